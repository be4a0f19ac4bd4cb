package pipeline

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"github.com/tpscope/tpscope/engine"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/exec"
	_ "github.com/tpscope/tpscope/exec/cpu"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/traces"
	"github.com/tpscope/tpscope/traces/schema"
)

// envChild makes the test binary run as a fresh process of a run
// (RunChild on --spec and --result) instead of running tests: the
// Runner's children in these tests are this binary.
const envChild = "TPSCOPE_PIPELINE_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envChild) == "1" {
		fs := flag.NewFlagSet(ChildVerb, flag.ExitOnError)
		spec := fs.String("spec", "", "")
		result := fs.String("result", "", "")
		_ = fs.Parse(os.Args[1:])
		if err := RunChild(context.Background(), *spec, *result); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// tinyScenario is tiny-mla-moe at TP 2, batch 1, context 64, on the
// rtxpro6000-2s preset (which the child resolves by name again).
func tinyScenario(t *testing.T, o sim.Options) sim.Scenario {
	t.Helper()
	a, err := model.Resolve("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topology.Preset("rtxpro6000-2s")
	if err != nil {
		t.Fatal(err)
	}
	return sim.Scenario{Arch: a, Plan: model.Plan{TP: 2}, Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 64, KVDtype: model.BF16},
		Options: o, Topo: topo}
}

// TestBackendConfig: the backend is told the scenario's seed, NCCL
// settings (env: their environment in NCCL's spelling) and all-reduce +
// RMSNorm fusion, and nothing that belongs to the schedule or the runner.
func TestBackendConfig(t *testing.T) {
	cases := []struct {
		name string
		opts sim.Options
		seed int64
		want exec.BackendConfig
		env  map[string]string
	}{
		{"defaults", sim.Options{}, 1, exec.BackendConfig{Seed: 1}, nil},
		{"fusion", sim.Options{ARNormFusion: sim.ToggleOn}, 7, exec.BackendConfig{Seed: 7, ARNormFusion: true}, nil},
		{"nccl", sim.Options{NCCL: ncclenv.Settings{Proto: "LL", P2PLevel: "SYS", P2PDisable: true, Algo: "Ring"}}, 1,
			exec.BackendConfig{Seed: 1, NCCL: ncclenv.Settings{Proto: "LL", P2PLevel: "SYS", P2PDisable: true, Algo: "Ring"}},
			map[string]string{"NCCL_PROTO": "LL", "NCCL_P2P_LEVEL": "SYS", "NCCL_P2P_DISABLE": "1", "NCCL_ALGO": "Ring"}},
		{"channels", sim.Options{NCCL: ncclenv.Settings{MinChannels: 8, MaxChannels: 16}}, 1,
			exec.BackendConfig{Seed: 1, NCCL: ncclenv.Settings{MinChannels: 8, MaxChannels: 16}},
			map[string]string{"NCCL_MIN_NCHANNELS": "8", "NCCL_MAX_NCHANNELS": "16"}},
		{"graphs and custom all-reduce are not the backend's", sim.Options{CUDAGraphs: true, CustomAR: sim.CustomAROneShot}, 1, exec.BackendConfig{Seed: 1}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := BackendConfig(sim.Scenario{Options: tc.opts}, tc.seed)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if env := got.NCCL.Env(); len(env)+len(tc.env) > 0 && !reflect.DeepEqual(env, tc.env) {
				t.Errorf("environment %v, want %v", env, tc.env)
			}
		})
	}
}

// TestNeedsFreshProcess: in a verdict-like sequence on a backend whose
// collectives read NCCL's settings, the first run fixes the process's NCCL
// settings; a run whose cached settings differ goes to fresh processes,
// one with the same ones (or differing only in spelling) stays. A backend
// that does not read them never needs one.
func TestNeedsFreshProcess(t *testing.T) {
	baseline := ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"}
	seq := []struct {
		name  string
		o     ncclenv.Settings
		fresh bool
	}{
		{"baseline", baseline, false},
		{"fp8-kv (same settings)", baseline, false},
		{"without-nccl-proto-ll", ncclenv.Settings{P2PLevel: "SYS"}, true},
		{"spelled differently", ncclenv.Settings{Proto: "ll", P2PLevel: "sys"}, false},
		{"nccl-p2p-disable", ncclenv.Settings{Proto: "LL", P2PLevel: "SYS", P2PDisable: true}, true},
		{"without calibration (tpscope's own)", ncclenv.Settings{Proto: "LL", P2PLevel: "SYS", IgnoreCalibration: true}, false},
		{"nccl-min-channels 8 (NCCL_PARAMs are read once a process)", ncclenv.Settings{Proto: "LL", P2PLevel: "SYS", MinChannels: 8}, true},
	}
	for _, reads := range []bool{true, false} {
		var cached *ncclenv.Cached
		for _, s := range seq {
			got := needsFreshProcess(cached, reads, s.o)
			if want := s.fresh && reads; got != want {
				t.Errorf("reads settings %v, %s: fresh process %v, want %v", reads, s.name, got, want)
			}
			if reads && cached == nil {
				c := s.o.CachedPerProcess()
				cached = &c
			}
		}
	}
}

// clearNCCLEnv unsets every NCCL_* variable for the test (put back after
// it), so what a child records is exactly what its run was given.
func clearNCCLEnv(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "NCCL_") {
			os.Unsetenv(k)
			t.Cleanup(func() { os.Setenv(k, v) })
		}
	}
}

// TestFreshProcessesKeepNCCLSettingsApart runs a verdict-like sequence of
// runs with different NCCL settings on CPU ranks, each forced into a fresh
// process, and reads the NCCL environment every rank was opened with from
// its rank spans (exec.AttrNCCLEnv): each run must see exactly its own
// settings (Env in NCCL's spelling) and none of the run before it — the
// run after nccl-proto-ll is the one that, sharing a process, inherited
// NCCL_PROTO=LL.
func TestFreshProcessesKeepNCCLSettingsApart(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	clearNCCLEnv(t)
	t.Setenv(envChild, "1")
	var stderr bytes.Buffer
	runner := NewRunner(WithIsolation(IsolateAlways), WithChildCommand(exe), WithStderr(&stderr))
	dir := t.TempDir()
	runs := []struct {
		label string
		nccl  ncclenv.Settings
		want  string
	}{
		{"baseline", ncclenv.Settings{}, ""},
		{"nccl-proto-ll", ncclenv.Settings{Proto: "LL"}, "NCCL_PROTO=LL"},
		{"after-proto-ll", ncclenv.Settings{}, ""},
		{"nccl-p2p-sys", ncclenv.Settings{P2PLevel: "SYS"}, "NCCL_P2P_LEVEL=SYS"},
		{"algo-and-p2p-disable", ncclenv.Settings{Algo: "Ring", P2PDisable: true}, "NCCL_ALGO=Ring NCCL_P2P_DISABLE=1"},
		{"proto-simple", ncclenv.Settings{Proto: "Simple"}, "NCCL_PROTO=Simple"},
	}
	for _, r := range runs {
		path := filepath.Join(dir, r.label+".otlp.jsonl")
		p, err := Prepare(Spec{Scenario: tinyScenario(t, sim.Options{NCCL: r.nccl}), Backend: "cpu", Seed: 1, Steps: 1, Warmup: 0,
			Trace: "file:" + path})
		if err != nil {
			t.Fatalf("%s: %v", r.label, err)
		}
		res, err := runner.Run(context.Background(), p, RunOptions{})
		if err != nil {
			t.Fatalf("%s: %v\n%s", r.label, err, stderr.String())
		}
		if res.Processes != 1 || res.Run == nil || res.Run.Steps != 1 || len(res.Run.LocalRanks) != 2 {
			t.Fatalf("%s: %d processes, result %+v: want one fresh process running both ranks for one step", r.label, res.Processes, res.Run)
		}
		tr, err := traces.ReadAll(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for i := range tr.Spans {
			sp := &tr.Spans[i]
			if !strings.HasPrefix(sp.Name, schema.SpanRankPrefix) {
				continue
			}
			v, ok := sp.Attr(string(exec.AttrNCCLEnv))
			if !ok {
				t.Fatalf("%s: rank span %s has no %s", r.label, sp.Name, exec.AttrNCCLEnv)
			}
			seen[v.AsString()]++
		}
		if len(seen) != 1 || seen[r.want] != 2 {
			t.Errorf("%s: ranks were opened with NCCL environments %v (value: ranks), want %q on both", r.label, seen, r.want)
		}
	}
}

// TestPlacement: fresh processes get one rank each, launched as torchrun
// would (rank, world size, the device index of a single-process run, one
// rendezvous shared by all), only where the backend runs ranks in separate
// processes and this process runs every rank of the plan; otherwise one
// process holds the ranks this one was asked to run.
func TestPlacement(t *testing.T) {
	a, err := model.Resolve("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	sched, err := model.Build(a, model.Plan{TP: 4}, model.Workload{Phase: model.Decode, Batch: 1, Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		multi     bool
		local     []int
		launched  bool
		wantLocal [][]int
		perRank   bool
	}{
		{"multi-process backend, every rank", true, nil, false, [][]int{{0}, {1}, {2}, {3}}, true},
		{"multi-process backend, ranks listed", true, []int{0, 1, 2, 3}, false, [][]int{{0}, {1}, {2}, {3}}, true},
		{"multi-process backend, one rank's shard", true, []int{0}, false, [][]int{{0}}, false},
		{"single-process backend", false, nil, false, [][]int{nil}, false},
		{"this process is one of a launch", true, []int{2}, true, [][]int{{2}}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &Prepared{Spec: Spec{LocalRanks: tc.local}, Schedule: sched, Capabilities: Capabilities{MultiProcess: tc.multi}}
			procs, err := placement(p, tc.launched, false)
			if err != nil {
				t.Fatal(err)
			}
			if len(procs) != len(tc.wantLocal) {
				t.Fatalf("%d processes, want %d", len(procs), len(tc.wantLocal))
			}
			port := ""
			for k, pr := range procs {
				if !reflect.DeepEqual(pr.local, tc.wantLocal[k]) {
					t.Errorf("process %d runs ranks %v, want %v", k, pr.local, tc.wantLocal[k])
				}
				if !tc.perRank {
					if len(pr.env) != 0 {
						t.Errorf("process %d gets launcher variables %v, want none", k, pr.env)
					}
					continue
				}
				env := map[string]string{}
				for _, kv := range pr.env {
					key, v, _ := strings.Cut(kv, "=")
					env[key] = v
				}
				want := map[string]string{"RANK": fmt.Sprint(k), "WORLD_SIZE": "4", "LOCAL_RANK": fmt.Sprint(k), "MASTER_ADDR": "127.0.0.1"}
				for key, v := range want {
					if env[key] != v {
						t.Errorf("process %d: %s=%q, want %q", k, key, env[key], v)
					}
				}
				if port == "" {
					port = env["MASTER_PORT"] + "/" + env["TPSCOPE_RDZV_PORT"]
				}
				if got := env["MASTER_PORT"] + "/" + env["TPSCOPE_RDZV_PORT"]; got != port || env["MASTER_PORT"] == "" || env["TPSCOPE_RDZV_PORT"] == "" {
					t.Errorf("process %d: ports %s, want the one rendezvous %s of every process", k, got, port)
				}
			}
		})
	}
}

// TestChildEnv: a child's environment is this process's with the run's
// settings and launcher variables in place of the same keys, each key
// once.
func TestChildEnv(t *testing.T) {
	base := []string{"PATH=/bin", "NCCL_PROTO=Simple", "RANK=7", "NCCL_DEBUG=WARN"}
	got := childEnv(base, map[string]string{"NCCL_PROTO": "LL", "NCCL_P2P_LEVEL": "SYS"}, []string{"RANK=1", "WORLD_SIZE=2"})
	want := []string{"PATH=/bin", "NCCL_DEBUG=WARN", "NCCL_P2P_LEVEL=SYS", "NCCL_PROTO=LL", "RANK=1", "WORLD_SIZE=2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestPrepareEagerWhereNoGraphs: on a backend that cannot capture CUDA
// graphs (the CPU backend) the scenario asked with graphs is recorded and
// priced eager, as it runs: the prediction equals the one of the same
// scenario without graphs, and differs from the graphed one (the launch
// cost graphs hide), so a compare of the trace and run --compare agree.
func TestPrepareEagerWhereNoGraphs(t *testing.T) {
	graphed := tinyScenario(t, sim.Options{CUDAGraphs: true})
	eager := tinyScenario(t, sim.Options{})
	p, err := Prepare(Spec{Scenario: graphed, Backend: "cpu", Seed: 1, Steps: 1, Predict: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.Scenario.Options.CUDAGraphs || p.Schedule.Deploy.Graphed {
		t.Fatalf("CPU backend: scenario cuda_graphs %v, graphed %v; want eager", p.Scenario.Options.CUDAGraphs, p.Schedule.Deploy.Graphed)
	}
	eager.Options.Engine = engine.ExecutorRef
	want, _, err := sim.Predict(eager)
	if err != nil {
		t.Fatal(err)
	}
	if p.Prediction.StepUs != want.StepUs {
		t.Errorf("predicted %.3f us, the eager scenario %.3f us", p.Prediction.StepUs, want.StepUs)
	}
	graphed.Options.Engine = engine.ExecutorRef
	if g, _, err := sim.Predict(graphed); err != nil || g.StepUs == want.StepUs {
		t.Errorf("the graphed prediction %v (%v) should differ from the eager one %.3f", g, err, want.StepUs)
	}
}

// TestPlacementSharedDevice: the one-GPU rehearsal puts each rank's
// process on device 0 with a host id of its own for NCCL, and sends every
// multi-rank run to fresh processes, whatever its settings.
func TestPlacementSharedDevice(t *testing.T) {
	a, err := model.Resolve("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	sched, err := model.Build(a, model.Plan{TP: 2}, model.Workload{Phase: model.Decode, Batch: 1, Context: 64})
	if err != nil {
		t.Fatal(err)
	}
	p := &Prepared{Schedule: sched, Capabilities: Capabilities{MultiProcess: true}}
	procs, err := placement(p, false, true)
	if err != nil || len(procs) != 2 {
		t.Fatalf("%d processes (%v), want 2", len(procs), err)
	}
	hosts := map[string]bool{}
	for k, pr := range procs {
		env := map[string]string{}
		for _, kv := range pr.env {
			key, v, _ := strings.Cut(kv, "=")
			env[key] = v
		}
		if env["LOCAL_RANK"] != "0" || !reflect.DeepEqual(pr.device, []int{0}) || env["RANK"] != fmt.Sprint(k) || env["NCCL_HOSTID"] == "" {
			t.Errorf("process %d: env %v devices %v; want rank %d on device 0 with a host id", k, env, pr.device, k)
		}
		hosts[env["NCCL_HOSTID"]] = true
	}
	if len(hosts) != 2 {
		t.Errorf("host ids %v, want one per process", hosts)
	}
	r := NewRunner(WithSharedDevice(true))
	if !r.freshProcesses(p) {
		t.Error("a two-rank run under WithSharedDevice stays in this process")
	}
	if NewRunner().freshProcesses(p) {
		t.Error("a first run without WithSharedDevice goes to fresh processes")
	}
}
