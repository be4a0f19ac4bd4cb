package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/exectest"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/pipeline"
	"github.com/tpscope/tpscope/topology"
)

// testConfigBackend records the configuration its factory was given (the
// last one), so a test can check what a verb tells the backend.
const testConfigBackend = "test-config"

var (
	lastConfigMu sync.Mutex
	lastConfig   *exec.BackendConfig
)

func init() {
	exec.RegisterBackend(testConfigBackend, func(cfg exec.BackendConfig) (exec.Backend, error) {
		lastConfigMu.Lock()
		lastConfig = &cfg
		lastConfigMu.Unlock()
		return exectest.New(exectest.WithName(testConfigBackend)), nil
	})
}

// TestRunTellsBackendTheScenario: what run predicts is what the backend is
// told: all-reduce + RMSNorm fusion (the fused norm was predicted and the
// unfused one measured), the NCCL settings in NCCL's spelling, the seed.
func TestRunTellsBackendTheScenario(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want exec.BackendConfig
		env  map[string]string // want.NCCL in NCCL's spelling
	}{
		{"defaults", nil, exec.BackendConfig{Seed: 1}, nil},
		{"ar-norm-fusion", []string{"--ar-norm-fusion"}, exec.BackendConfig{Seed: 1, ARNormFusion: true}, nil},
		{"nccl settings", []string{"--nccl-proto", "LL", "--p2p-level", "SYS"},
			exec.BackendConfig{Seed: 1, NCCL: ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"}}, map[string]string{"NCCL_PROTO": "LL", "NCCL_P2P_LEVEL": "SYS"}},
		{"nccl channels", []string{"--nccl-min-channels", "8", "--nccl-max-channels", "16"},
			exec.BackendConfig{Seed: 1, NCCL: ncclenv.Settings{MinChannels: 8, MaxChannels: 16}}, map[string]string{"NCCL_MIN_NCHANNELS": "8", "NCCL_MAX_NCHANNELS": "16"}},
		{"seed", []string{"--seed", "7", "--ar-norm-fusion"}, exec.BackendConfig{Seed: 7, ARNormFusion: true}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lastConfigMu.Lock()
			lastConfig = nil
			lastConfigMu.Unlock()
			args := append([]string{"run", "--backend", testConfigBackend, "--model", "tiny-mla-moe", "--tp", "2", "--batch", "1", "--context", "64",
				"--steps", "1", "--warmup", "0", "--trace", "none"}, tc.args...)
			if code, _, errs := runCLI(t, args...); code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			lastConfigMu.Lock()
			got := lastConfig
			lastConfigMu.Unlock()
			if got == nil || !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("backend config %+v, want %+v", got, tc.want)
			}
			if got != nil {
				if env := got.NCCL.Env(); len(env)+len(tc.env) > 0 && !reflect.DeepEqual(env, tc.env) {
					t.Errorf("backend environment %v, want %v", env, tc.env)
				}
			}
		})
	}
}

// TestMeasuredBoxNeedsTopo: a CPU run set beside a prediction needs the
// box it runs on, for run --compare and verdict alike, refused before any
// work: no --topo, or a --topo of GPUs (h200-nvswitch's are H200s, a
// description's are the GPUs it names), since the CPU backend's ranks are
// CPU cores; verdict on other backends may price the default box.
func TestMeasuredBoxNeedsTopo(t *testing.T) {
	scen := []string{"--model", "tiny-mla-moe", "--tp", "2", "--batch", "1", "--context", "64", "--trace", "none"}
	const gpuBox = "the cpu backend's ranks are CPU cores, and this box's devices are "
	checkUsageErrors(t, []usageCase{
		{"verdict cpu", append([]string{"verdict", "--backend", "cpu"}, scen[:len(scen)-2]...), "verdict --backend cpu needs --topo"},
		{"run compare cpu", append([]string{"run", "--backend", "cpu", "--compare"}, scen...), "--compare needs --topo"},
		{"run compare other backend", append([]string{"run", "--backend", testGraphsBackend, "--compare"}, scen...), "--compare needs --topo"},
		{"verdict cpu on a GPU preset", append([]string{"verdict", "--backend", "cpu", "--topo", "h200-nvswitch"}, scen[:len(scen)-2]...),
			"--topo h200-nvswitch: " + gpuBox + "NVIDIA H200 GPUs: verdict needs a CPU box"},
		{"run compare cpu on a GPU preset", append([]string{"run", "--backend", "cpu", "--compare", "--topo", "h200-nvswitch"}, scen...),
			"--topo h200-nvswitch: " + gpuBox + "NVIDIA H200 GPUs: --compare needs a CPU box"},
		{"run compare cpu on a GPU description", append([]string{"run", "--backend", "cpu", "--compare", "--topo", "nvswitch:8xh100-sxm"}, scen...),
			gpuBox + "NVIDIA H100"},
	})
	// The CPU box passes, and a GPU box on a GPU backend is that
	// backend's own check (its device against the box's GPU).
	cpuBox, err := topology.Resolve(filepath.Join(cpuRanksDir, "cpu-4r.json"), 0)
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := topology.Resolve("h200-nvswitch", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		backend string
		box     *topology.Topology
	}{{"cpu", cpuBox}, {testKVBackend, gpu}} {
		if err := checkMeasuredBox("verdict", c.backend, true, false, c.box); err != nil {
			t.Errorf("verdict --backend %s --topo %s: %v", c.backend, c.box.Name, err)
		}
	}
	if err := checkMeasuredBox("verdict", testKVBackend, false, false, nil); err != nil {
		t.Errorf("verdict on %s without --topo: %v", testKVBackend, err)
	}
}

// TestVerdictCPUNotOnBackend: on CPU goroutine ranks NCCL's settings and
// the all-reduce choice change nothing, and every step runs eagerly: those
// entries are not run, and say why, instead of measuring noise as a verdict.
func TestVerdictCPUNotOnBackend(t *testing.T) {
	code, out, errs := runCLI(t, "verdict", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--batch", "1", "--context", "64",
		"--topo", filepath.Join(cpuRanksDir, "cpu-4r.json"), "--steps", "1", "--warmup", "0", "--output", "json",
		"--entries", "nccl-proto-ll,nccl-p2p-sys,nccl-p2p-disable,oneshot-ar,cuda-graphs")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var rep verdictReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Shard || len(rep.Entries) != 5 {
		t.Fatalf("shard %v, %d entries: want every rank here and 5 entries", rep.Shard, len(rep.Entries))
	}
	for _, e := range rep.Entries {
		if e.Status != compare.VerdictNotOnBackend || e.Verdict != nil || !strings.Contains(e.Reason, "cpu backend") {
			t.Errorf("%s: status %v (%s), verdict %v: want not on this backend, not run", e.Entry, e.Status, e.Reason, e.Verdict)
		}
		// The baseline ran eagerly (the cpu backend captures no graph, and
		// its scenario says so): cuda-graphs is not in it, though
		// --cuda-graphs defaults to true.
		if e.Entry == "cuda-graphs" && (e.InBaseline || !strings.Contains(rep.Scenario, "eager")) {
			t.Errorf("cuda-graphs in the baseline %v, baseline %q: want not in an eager baseline", e.InBaseline, rep.Scenario)
		}
	}
	if len(rep.Runs) != 1 {
		t.Errorf("%d runs, want the baseline only", len(rep.Runs))
	}
}

// TestVerdictInterrupted: Ctrl-C during an entry's run (here after its
// first measured step) leaves the table and the report of what finished,
// names the run that was cut and the entries not run, keeps the cut run's
// trace as a partial file, and exits 130.
func TestVerdictInterrupted(t *testing.T) {
	dir := t.TempDir()
	verdictProgress = func(label string, done int, interrupt func()) {
		// Warm-up (1) plus the first measured step.
		if label == "expert-parallel" && done == 2 {
			interrupt()
		}
	}
	t.Cleanup(func() { verdictProgress = nil })
	code, out, errs := runCLI(t, "verdict", "--backend", testKVBackend, "--model", "tiny-mla-moe", "--tp", "2", "--local-ranks", "0",
		"--batch", "8", "--context", "4096", "--kv-dtype", "bf16", "--topo", "h200-nvswitch", "--steps", "3", "--warmup", "1",
		"--entries", "fp8-kv,expert-parallel,mtp", "-o", dir)
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d: %s", code, exitInterrupted, errs)
	}
	if !strings.Contains(errs, "interrupted during the expert-parallel run: 1 of 3 entries finished") || strings.Contains(errs, "context canceled") {
		t.Errorf("stderr %q: want the cut run and the count of finished entries in words", errs)
	}
	for _, want := range []string{"fp8-kv", "measured", "expert-parallel", "interrupted: the expert-parallel run was cut", "not run: mtp"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	js, err := os.ReadFile(filepath.Join(dir, "verdict.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep verdictReport
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	partial := filepath.Join(dir, "expert-parallel"+partialSuffix)
	if in := rep.Interrupted; in == nil || in.Run != "expert-parallel" || in.Trace != partial || !reflect.DeepEqual(in.NotRun, []string{"mtp"}) {
		t.Fatalf("interrupted %+v: want the expert-parallel run, its partial trace %s, mtp not run", rep.Interrupted, partial)
	}
	if len(rep.Entries) != 2 || rep.Entries[0].Entry != "fp8-kv" || rep.Entries[0].Verdict == nil ||
		rep.Entries[1].Entry != "expert-parallel" || rep.Entries[1].Status != compare.VerdictInterrupted {
		t.Errorf("entries %+v: want fp8-kv measured, then expert-parallel interrupted", rep.Entries)
	}
	for path, want := range map[string]bool{partial: true, filepath.Join(dir, "expert-parallel.otlp.jsonl"): false,
		filepath.Join(dir, "fp8-kv.otlp.jsonl"): true, filepath.Join(dir, "mtp.otlp.jsonl"): false} {
		if _, err := os.Stat(path); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", path, err == nil, want)
		}
	}
	if md, err := os.ReadFile(filepath.Join(dir, "verdict.md")); err != nil || !strings.Contains(string(md), "the expert-parallel run was cut") {
		t.Errorf("verdict.md does not say it was interrupted (%v)", err)
	}
}

// The verb tpscope starts for a run in fresh processes is not listed.
func TestChildVerbHidden(t *testing.T) {
	code, out, _ := runCLI(t, "help")
	if code != 0 || strings.Contains(out, pipeline.ChildVerb) || !strings.Contains(out, "verdict") {
		t.Errorf("help (exit %d) lists %q or lacks verdict:\n%s", code, pipeline.ChildVerb, out)
	}
	if v, _ := findVerb([]string{pipeline.ChildVerb}); v == nil || !v.Hidden {
		t.Errorf("verb %q: %+v, want it registered and hidden", pipeline.ChildVerb, v)
	}
}

// TestUnrealizedFlagsRefused: a flag that asks the backend for what it
// does not realize is refused in one line before any run: NCCL's settings
// on the CPU backend's goroutine ranks, whose collectives are their own,
// and CUDA graphs on a backend that runs every step eagerly. run had gone
// without them and said nothing, its trace recording nccl-proto=LL as
// run (compare then showed it among the trace's options); collective
// --measure wrote '# NCCL settings: NCCL_PROTO=LL' into its nccl-tests log
// of CPU ranks. Nothing is written. --cuda-graphs=false, what the CPU
// backend runs, passes.
func TestUnrealizedFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	trace, log := filepath.Join(dir, "run.otlp.jsonl"), filepath.Join(dir, "all_reduce_perf.txt")
	box := filepath.Join(cpuRanksDir, "cpu-4r.json")
	run := []string{"run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--batch", "1", "--context", "64", "--steps", "1", "--warmup", "0", "--trace", "file:" + trace}
	verdict := []string{"verdict", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--batch", "1", "--context", "64", "--steps", "1", "--warmup", "0", "--topo", box, "--entries", "fp8-kv"}
	coll := []string{"collective", "--measure", "--backend", "cpu", "--ranks", "2", "--sizes", "1K", "--steps", "1", "--warmup", "0", "-o", log}
	const nccl = "the cpu backend's collectives are its own, which NCCL's settings do not reach"
	const eager = "the cpu backend runs every step eagerly"
	cases := []usageCase{
		{"run nccl-proto", append(run, "--nccl-proto", "LL"), "--nccl-proto LL: " + nccl},
		{"run p2p-disable", append(run, "--p2p-disable"), "--p2p-disable true: " + nccl},
		{"run cuda-graphs", append(run, "--cuda-graphs"), "--cuda-graphs true: " + eager},
		{"run graph-sizes", append(run, "--graph-sizes", "1,2"), "--graph-sizes 1+2: " + eager},
		{"verdict p2p-level", append(verdict, "--p2p-level", "SYS"), "--p2p-level SYS: " + nccl},
		{"collective nccl-algo", append(coll, "--nccl-algo", "Ring"), "--nccl-algo Ring: " + nccl},
		{"collective cuda-graphs", append(coll, "--cuda-graphs"), "--cuda-graphs true: " + eager},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runCLI(t, tc.args...)
			if code != 2 || out != "" || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2, nothing on stdout and one line with %q", code, out, stderr, tc.want)
			}
			for _, f := range []string{trace, log} {
				if _, err := os.Stat(f); err == nil {
					t.Fatalf("%s was written", f)
				}
			}
		})
	}
	if code, _, stderr := runCLI(t, append(run, "--cuda-graphs=false")...); code != 0 {
		t.Errorf("--cuda-graphs=false on the cpu backend: exit %d: %s", code, stderr)
	}
}

// TestMovedModelIsTheSame: a trace of a model read from a config
// directory is compared with --model naming the same config at another
// path (the checkpoint moved since the run): the content is what the
// trace measured, so it is not refused as another model; a config of
// other content at the old path's name still is. compare had refused
// the moved copy ("t measured model /tmp/.../a ... drop --model").
func TestMovedModelIsTheSame(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join("..", "..", "model", "presets", "tiny-mla-moe.json"))
	if err != nil {
		t.Fatal(err)
	}
	put := func(sub string, b []byte) string {
		p := filepath.Join(dir, sub)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "config.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	orig, trace := put("a", data), filepath.Join(dir, "run.otlp.jsonl")
	if code, _, stderr := runCLI(t, "run", "--backend", "cpu", "--model", orig, "--tp", "2", "--batch", "1", "--context", "64",
		"--steps", "1", "--warmup", "0", "--trace", "file:"+trace); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	moved := filepath.Join(dir, "moved")
	if err := os.Rename(orig, moved); err != nil {
		t.Fatal(err)
	}
	box := filepath.Join(cpuRanksDir, "cpu-4r.json")
	if code, out, stderr := runCLI(t, "compare", "--trace", trace, "--model", moved, "--topo", box); code != 0 || !strings.Contains(out, "aligned by op-id") {
		t.Errorf("compare --model (the same config, moved): exit %d, stderr %q; want the comparison", code, stderr)
	}
	other := put("a", []byte(strings.Replace(string(data), `"num_hidden_layers": 4`, `"num_hidden_layers": 3`, 1)))
	code, _, stderr := runCLI(t, "compare", "--trace", trace, "--model", other, "--topo", box)
	if code != 2 || !strings.Contains(stderr, "measured model "+orig) {
		t.Errorf("compare --model (other content at the old path): exit %d, stderr %q; want 2 naming the model measured", code, stderr)
	}
}
