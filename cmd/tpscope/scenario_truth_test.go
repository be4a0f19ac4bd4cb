package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/internal/topofiletest"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/traces"
)

// The scenario a trace is predicted with is the one it records: flags the
// user passes override a field and are named, defaults never override, and
// a trace that records none needs the flags that matter.

// kimiKineto is a PyTorch-profiler trace of one Kimi-K2.5 TP-8 rank on an
// H200 (vLLM ranges: decode batch 32); it records no tpscope scenario.
const kimiKineto = "../../traces/testdata/kineto/vllm_kimi-k2.5_tp8_rank0_graph_b32.pt.trace.json.gz"

// TestKinetoTraceNeedsScenarioFlags: calibrate, compare and report refuse a
// trace without a scenario (exit 2, before any fit or file is written)
// naming the missing flags and what the trace does show (its GPU, world
// size and the batch its engine's ranges name); calibrate writes nothing.
func TestKinetoTraceNeedsScenarioFlags(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "k.json")
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"calibrate", []string{"calibrate", "--trace", kimiKineto, "-o", out},
			[]string{"records no scenario", "pass --model, --batch, --context and --topo", "NVIDIA H200", "world size 8", "decode batch 32"}},
		{"calibrate-topo-missing", []string{"calibrate", "--trace", kimiKineto, "--model", "kimi-k2.5", "--batch", "32", "--context", "4096", "-o", out},
			[]string{"pass --topo"}},
		{"compare", []string{"compare", "--trace", kimiKineto},
			[]string{"records no scenario", "pass --model, --batch and --context"}},
		{"compare-batch-missing", []string{"compare", "--trace", kimiKineto, "--model", "kimi-k2.5", "--context", "4096"},
			[]string{"pass --batch"}},
		{"report", []string{"report", "--trace", kimiKineto, "-o", filepath.Join(dir, "r.html")},
			[]string{"records no scenario", "pass --model, --batch and --context"}},
		// The default box is of another GPU than the trace's.
		{"compare-other-gpu", []string{"compare", "--trace", kimiKineto, "--model", "kimi-k2.5", "--batch", "32", "--context", "4096"},
			[]string{"ran on NVIDIA H200", "pass --topo"}},
		{"calibrate-other-gpu", []string{"calibrate", "--trace", kimiKineto, "--model", "kimi-k2.5", "--batch", "32", "--context", "4096", "--topo", "rtxpro6000-2s", "-o", out},
			[]string{"--topo rtxpro6000-2s", "NVIDIA H200"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr %q", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr %q lacks %q", stderr, w)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatalf("%s was written", out)
			}
		})
	}
}

// TestKinetoTraceScenarioFromFlags: with the flags that matter the trace
// is predicted from them; its world size gives TP 8 (no --tp passed), and
// the output says where each part came from.
func TestKinetoTraceScenarioFromFlags(t *testing.T) {
	code, out, stderr := runCLI(t, "compare", "--trace", kimiKineto, "--model", "kimi-k2.5", "--batch", "32", "--context", "4096", "--topo", "h200-nvswitch", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Scenarios []struct {
			From     string          `json:"from"`
			Scenario json.RawMessage `json:"scenario"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Scenarios) != 1 {
		t.Fatalf("%v, %d scenarios", err, len(rep.Scenarios))
	}
	sr := rep.Scenarios[0]
	for _, w := range []string{"the trace records no scenario", "--model kimi-k2.5", "--batch 32", "--topo h200-nvswitch", "tp 8 from the trace's world size"} {
		if !strings.Contains(sr.From, w) {
			t.Errorf("from %q lacks %q", sr.From, w)
		}
	}
	var sc struct {
		Plan     string `json:"plan"`
		Workload string `json:"workload"`
	}
	if err := json.Unmarshal(sr.Scenario, &sc); err != nil {
		t.Fatal(err)
	}
	if sc.Plan != "tp8" || !strings.Contains(sc.Workload, "b32 ctx4096") {
		t.Errorf("scenario plan %q workload %q, want tp8 and b32 ctx4096", sc.Plan, sc.Workload)
	}
}

// TestRecordedScenarioOverrides: a recorded CPU-rank trace at TP 4 compared
// with --topo alone keeps its recorded plan (the --tp default of 8 does
// not override it: on fb5e1b0 this failed "--tp 8 x --dp 1 needs 8 GPUs;
// --topo cpu-4r has 4"), and the output names the flag that overrode the
// box; a passed --batch of the recorded batch changes nothing.
func TestRecordedScenarioOverrides(t *testing.T) {
	trace := filepath.Join(cpuRanksDir, "cpu4-tiny-mla-moe-tp4-b1-eager.otlp.jsonl.gz")
	box := filepath.Join(cpuRanksDir, "cpu-4r.json")
	for _, tc := range []struct {
		name      string
		args      []string
		plan, wl  string
		fromParts []string
	}{
		{"topo", []string{"--topo", box}, "tp4", "decode b1 ctx512", []string{"recorded in the trace", "overridden by --topo " + box}},
		{"topo-batch", []string{"--topo", box, "--batch", "1", "--tp", "4"}, "tp4", "decode b1 ctx512", []string{"--topo " + box}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runCLI(t, append([]string{"compare", "--trace", trace, "--output", "json"}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var rep struct {
				Scenarios []struct {
					From     string `json:"from"`
					Scenario struct {
						Plan     string `json:"plan"`
						Workload string `json:"workload"`
					} `json:"scenario"`
				} `json:"scenarios"`
			}
			if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Scenarios) != 1 {
				t.Fatalf("%v, %d scenarios", err, len(rep.Scenarios))
			}
			sr := rep.Scenarios[0]
			if sr.Scenario.Plan != tc.plan || !strings.HasPrefix(sr.Scenario.Workload, tc.wl) {
				t.Errorf("plan %q workload %q, want %q %q", sr.Scenario.Plan, sr.Scenario.Workload, tc.plan, tc.wl)
			}
			for _, w := range tc.fromParts {
				if !strings.Contains(sr.From, w) {
					t.Errorf("from %q lacks %q", sr.From, w)
				}
			}
		})
	}
}

// TestRecordedScenarioFacts: the flags that say what a trace measured
// (model, plan, workload) are refused over a recorded scenario they
// contradict, in one line naming the flag, the trace's value and the file
// (exit 2, nothing written), on compare, calibrate --trace and its
// --holdout traces; calibrate also refuses --cuda-graphs against how the
// trace ran. The recorded values are the ones the fixtures' names state
// (tp4, b1; the H200 runs: tp8, b32, graph or eager).
func TestRecordedScenarioFacts(t *testing.T) {
	cpu := filepath.Join(cpuRanksDir, "cpu4-tiny-mla-moe-tp4-b1-eager.otlp.jsonl.gz")
	h200 := "../../exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-graph-b32-catalog.otlp.jsonl.gz"
	h200Eager := "../../exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-eager.otlp.jsonl.gz"
	out := filepath.Join(t.TempDir(), "box.json")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"compare tp", []string{"compare", "--trace", h200, "--tp", "4"}, "--tp 4: " + h200 + " measured TP 8"},
		{"compare phase", []string{"compare", "--trace", h200, "--phase", "prefill"}, "--phase prefill: " + h200 + " measured phase decode"},
		{"compare context", []string{"compare", "--trace", h200, "--context", "8K"}, "--context 8192: " + h200 + " measured context 4096"},
		{"compare model", []string{"compare", "--trace", h200, "--model", "deepseek-v3"}, "--model deepseek-v3: " + h200 + " measured model kimi-k2.5"},
		{"compare kv", []string{"compare", "--trace", h200, "--kv-dtype", "fp8"}, "--kv-dtype fp8: " + h200 + " measured KV dtype bf16"},
		{"calibrate batch", []string{"calibrate", "--trace", h200, "--batch", "1", "-o", out}, "--batch 1: " + h200 + " measured batch 32"},
		{"calibrate holdout batch", []string{"calibrate", "--trace", h200, "--holdout", cpu, "--batch", "32", "--topo", "h200-nvswitch", "-o", out}, "--batch 32: " + cpu + " measured batch 1"},
		// How a trace ran is what calibrate fits: the graph run's CUDA
		// graphs, the eager run's none.
		{"calibrate graphs off", []string{"calibrate", "--trace", h200, "--cuda-graphs=false", "-o", out}, "--cuda-graphs false: " + h200 + " measured CUDA graphs on"},
		{"calibrate graphs on", []string{"calibrate", "--trace", h200Eager, "--cuda-graphs", "-o", out}, "--cuda-graphs true: " + h200Eager + " measured CUDA graphs off"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("exit %d, stderr %q; want 2 and one line with %q", code, stderr, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatalf("%s was written", out)
			}
		})
	}
	// The recorded values themselves are no contradiction.
	if code, _, stderr := runCLI(t, "compare", "--trace", cpu, "--tp", "4", "--batch", "1", "--context", "512", "--phase", "decode", "--model", "tiny-mla-moe", "--topo", filepath.Join(cpuRanksDir, "cpu-4r.json")); code != 0 {
		t.Errorf("the recorded values passed: exit %d: %s", code, stderr)
	}
}

// TestRecordedScenarioGraphs: a recorded trace's CUDA graphs are how it
// ran, for compare and report as for calibrate and profiler traces:
// --cuda-graphs against them is refused in one line naming the flag, the
// file and the recorded value (exit 2, nothing written); it had re-priced
// the H200 graph run as eager and compared the two. The recorded value
// itself passes, and false over the eager run reads back through the
// options codec, which writes false as nothing (the override once fed ""
// to the bool parser: '"": want true or false', every scenario left out).
func TestRecordedScenarioGraphs(t *testing.T) {
	const graph = "../../exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-graph-b8-catalog.otlp.jsonl.gz"
	const eager = "../../exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-eager.otlp.jsonl.gz"
	html := filepath.Join(t.TempDir(), "r.html")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"compare graphs off", []string{"compare", "--trace", graph, "--cuda-graphs=false"}, "--cuda-graphs false: " + graph + " measured CUDA graphs on"},
		{"compare graphs on", []string{"compare", "--trace", eager, "--cuda-graphs"}, "--cuda-graphs true: " + eager + " measured CUDA graphs off"},
		{"report graphs off", []string{"report", "--trace", graph, "--cuda-graphs=false", "-o", html}, "--cuda-graphs false: " + graph + " measured CUDA graphs on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runCLI(t, tc.args...)
			if code != 2 || out != "" || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("exit %d, stdout %d bytes, stderr %q; want 2, nothing on stdout and one line with %q", code, len(out), stderr, tc.want)
			}
			if _, err := os.Stat(html); err == nil {
				t.Fatalf("%s was written", html)
			}
		})
	}
	code, out, stderr := runCLI(t, "compare", "--trace", eager, "--cuda-graphs=false", "--output", "json")
	if code != 0 {
		t.Fatalf("the recorded value: exit %d: %s", code, stderr)
	}
	var rep struct {
		Scenarios []struct {
			From     string `json:"from"`
			Scenario struct {
				Options struct {
					CUDAGraphs *bool `json:"cuda_graphs"`
				} `json:"options"`
			} `json:"scenario"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Scenarios) != 1 {
		t.Fatalf("%v, %d scenarios", err, len(rep.Scenarios))
	}
	if sr := rep.Scenarios[0]; sr.From != "recorded in the trace" || sr.Scenario.Options.CUDAGraphs != nil && *sr.Scenario.Options.CUDAGraphs {
		t.Errorf("from %q, cuda_graphs %v: want the recorded eager scenario, nothing overridden", sr.From, sr.Scenario.Options.CUDAGraphs)
	}
}

// TestCPULoopPortable is the README's CPU loop as written: calibrate the
// CPU backend, run a TP-2 schedule on the calibrated box with --compare
// into a file trace, then compare that trace with only --topo: the same
// predicted step as run --compare (to 0.1 %); then move the trace, delete
// the box file and compare with no flag at all: the same step again (the
// box travels in the trace). A pre-box trace whose file is gone says so.
func TestCPULoopPortable(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: calibrates and runs the CPU backend")
	}
	dir := t.TempDir()
	box := filepath.Join(dir, "cpu.json")
	trace := filepath.Join(dir, "tiny.otlp.jsonl")
	mustRun := func(args ...string) string {
		t.Helper()
		code, out, stderr := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("tpscope %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		return out
	}
	mustRun("calibrate", "--backend", "cpu", "--ranks", "2", "--bench-ms", "50", "-o", box)
	var run struct {
		Comparison struct {
			PredictedStepUs float64 `json:"predicted_step_us"`
		} `json:"comparison"`
	}
	out := mustRun("run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--batch", "2", "--context", "256",
		"--steps", "2", "--warmup", "1", "--topo", box, "--trace", "file:"+trace, "--compare", "--output", "json")
	if err := json.Unmarshal([]byte(out), &run); err != nil || !(run.Comparison.PredictedStepUs > 0) {
		t.Fatalf("run --compare: %v, predicted %v", err, run.Comparison.PredictedStepUs)
	}
	predicted := func(args ...string) float64 {
		t.Helper()
		var rep struct {
			Scenarios []struct {
				Step struct {
					PredictedUs float64 `json:"predicted_us"`
				} `json:"step"`
			} `json:"scenarios"`
		}
		if err := json.Unmarshal([]byte(mustRun(append([]string{"compare", "--output", "json"}, args...)...)), &rep); err != nil || len(rep.Scenarios) != 1 {
			t.Fatalf("compare %v: %v", args, err)
		}
		return rep.Scenarios[0].Step.PredictedUs
	}
	want := run.Comparison.PredictedStepUs
	if got := predicted("--trace", trace, "--topo", box); math.Abs(got-want) > 1e-3*want {
		t.Errorf("compare --topo: predicted step %.1f us, run --compare %.1f us", got, want)
	}
	moved := filepath.Join(t.TempDir(), "moved.otlp.jsonl")
	if err := os.Rename(trace, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(box); err != nil {
		t.Fatal(err)
	}
	if got := predicted("--trace", moved); math.Abs(got-want) > 1e-3*want {
		t.Errorf("moved trace, box file deleted: predicted step %.1f us, run --compare %.1f us", got, want)
	}
	// A trace recorded before boxes travelled, its box file gone.
	code, _, stderr := runCLI(t, "compare", "--trace", filepath.Join(cpuRanksDir, "cpu4-tiny-mla-moe-tp4-b1-eager.otlp.jsonl.gz"))
	if code != 1 || !strings.Contains(stderr, "the file is gone") || !strings.Contains(stderr, "--topo") {
		t.Errorf("pre-box trace with its box gone: exit %d, %q; want 1 and a line saying the file is gone and naming --topo", code, stderr)
	}
}

// TestMeaninglessOptionsRefused: the same workload check on every verb that
// prices a scenario: MTP tokens on a model without an MTP layer are a usage
// error naming --mtp and the model (on fb5e1b0 predict priced them: 55.5
// against 25.4 tok/s).
func TestMeaninglessOptionsRefused(t *testing.T) {
	want := "--mtp 2: want 0: kimi-k2.5-nvfp4 has no MTP layer"
	var cases []usageCase
	for _, verb := range [][]string{{"predict"}, {"advise", "--no-sweep"}, {"schedule"}, {"model", "show"},
		{"run", "--backend", "cpu", "--scale", "64"}, {"verdict", "--backend", "cpu", "--topo", filepath.Join(cpuRanksDir, "cpu-4r.json")}} {
		cases = append(cases, usageCase{name: strings.Join(verb, "-"), args: append(append([]string(nil), verb...), "--model", "kimi-k2.5-nvfp4", "--mtp", "2"), want: want})
	}
	// plan sweeps lists: a list with nothing the model can take is refused.
	cases = append(cases, usageCase{name: "plan-list", args: []string{"plan", "--model", "kimi-k2.5-nvfp4", "--mtp", "2"}, want: "--mtp 2: kimi-k2.5-nvfp4 has no MTP layer"})
	checkUsageErrors(t, cases)
}

// TestDSAAsTheBoxRunsIt: GLM-5 on an SM120 box is priced as the engines
// there run it, dense MLA without the indexer (the same step as
// --dense-dsa), and says so; --dense-dsa=false prices the sparse path with
// a caveat that SM120 engines do not run it; on an H200 box the default is
// the sparse path. On fb5e1b0 the SM120 default priced the indexer with no
// caveat.
func TestDSAAsTheBoxRunsIt(t *testing.T) {
	type pred struct {
		StepUs  float64  `json:"step_us"`
		Caveats []string `json:"caveats"`
	}
	predict := func(args ...string) pred {
		t.Helper()
		code, out, stderr := runCLI(t, append([]string{"predict", "--model", "glm-5-nvfp4", "--output", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("predict %v: exit %d: %s", args, code, stderr)
		}
		var p pred
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hasCaveat := func(p pred, s string) bool {
		for _, c := range p.Caveats {
			if strings.Contains(c, s) {
				return true
			}
		}
		return false
	}
	def, dense, sparse := predict(), predict("--dense-dsa"), predict("--dense-dsa=false")
	if def.StepUs != dense.StepUs || def.StepUs == sparse.StepUs {
		t.Errorf("SM120 default %.1f us, --dense-dsa %.1f us, --dense-dsa=false %.1f us: want the default to be the dense step", def.StepUs, dense.StepUs, sparse.StepUs)
	}
	if !hasCaveat(def, "priced as dense MLA") || !hasCaveat(sparse, "which engines there do not run") {
		t.Errorf("caveats: default %q, sparse %q", def.Caveats, sparse.Caveats)
	}
	h200, h200Sparse := predict("--topo", "h200-nvswitch"), predict("--topo", "h200-nvswitch", "--dense-dsa=false")
	if h200.StepUs != h200Sparse.StepUs || hasCaveat(h200, "SM12x") {
		t.Errorf("H200 default %.1f us, sparse %.1f us, caveats %q: want the sparse path without an SM12x caveat", h200.StepUs, h200Sparse.StepUs, h200.Caveats)
	}
}

// TestTraceGPUMustBeTheBoxs: a run recorded on one GPU (the trace's
// resource names it) is not predicted on a box of another: the H200
// recording compared or calibrated on an H100 box is refused in one line
// naming --topo, both GPUs and the file (a usage fault: exit 2, one
// prefix), and compares on its own box.
func TestTraceGPUMustBeTheBoxs(t *testing.T) {
	const trace = "../../exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-graph-b8-catalog.otlp.jsonl.gz"
	want := "usage: --topo nvswitch:8xh100-sxm: its GPUs are NVIDIA H100 80GB HBM3, and " + trace + " ran on NVIDIA H200: pass a box of that GPU"
	for _, verb := range [][]string{{"compare"}, {"calibrate", "-o", filepath.Join(t.TempDir(), "box.json")}} {
		code, _, stderr := runCLI(t, append(append([]string(nil), verb...), "--trace", trace, "--topo", "nvswitch:8xh100-sxm")...)
		if code != 2 || stderr != "tpscope "+verb[0]+": "+want+"\n" {
			t.Errorf("%s on the H100 box: exit %d, stderr %q; want exit 2, one line %q", verb[0], code, stderr, want)
		}
	}
	if code, out, stderr := runCLI(t, "compare", "--trace", trace, "--topo", "nvswitch:8xh200-sxm", "--top", "1"); code != 0 || !strings.Contains(out, "-7.4 %") {
		t.Errorf("compare on its own box: exit %d, stderr %q, output %q", code, stderr, out)
	}
}

// TestLeftOutItemsSaid: what the reader left out of a profiler trace is
// said where it is listed: compare's note points at its output, whose
// sources list each item under the file named once (not "FILE: FILE:");
// calibrate, which has no such list, lists the items on stderr. The items
// are the reader's own (traces.ReadAll).
func TestLeftOutItemsSaid(t *testing.T) {
	res, err := traces.ReadAll(context.Background(), kimiKineto)
	if err != nil {
		t.Fatal(err)
	}
	if res.SkippedTotal == 0 || res.SkippedTotal > 10 {
		t.Fatalf("the fixture leaves out %d items; the test wants 1 to 10", res.SkippedTotal)
	}
	flags := []string{"--trace", kimiKineto, "--model", "kimi-k2.5", "--batch", "32", "--context", "4096", "--topo", "h200-nvswitch"}
	code, out, stderr := runCLI(t, append([]string{"compare"}, flags...)...)
	if code != 0 {
		t.Fatalf("compare: exit %d: %s", code, stderr)
	}
	if want := fmt.Sprintf("%s: left out %d items (listed in the output, under its sources)\n", kimiKineto, res.SkippedTotal); stderr != want {
		t.Errorf("compare stderr %q, want %q", stderr, want)
	}
	if strings.Contains(out, kimiKineto+": "+kimiKineto) {
		t.Errorf("compare names the file twice on a line:\n%s", out)
	}
	for _, sk := range res.Skipped {
		if want := "  skipped in " + kimiKineto + ": " + sk.Reason + "\n"; !strings.Contains(out, want) {
			t.Errorf("compare output lacks %q", want)
		}
	}
	// --force: the fixture's calibrated step is worse than its prior's
	// (errors that cancelled, README "Serving engines' profiler traces");
	// what is said of the left-out items is the same either way.
	code, _, stderr = runCLI(t, append([]string{"calibrate", "--force", "-o", filepath.Join(t.TempDir(), "k.json")}, flags...)...)
	if code != 0 {
		t.Fatalf("calibrate: exit %d: %s", code, stderr)
	}
	if want := fmt.Sprintf("%s: left out %d items:\n", kimiKineto, res.SkippedTotal); !strings.HasPrefix(stderr, want) || strings.Contains(stderr, "see the report") {
		t.Errorf("calibrate stderr %q, want it to start %q", stderr, want)
	}
	for _, sk := range res.Skipped {
		if !strings.Contains(stderr, "\n  "+sk.Reason+"\n") {
			t.Errorf("calibrate stderr lacks the item %q", sk.Reason)
		}
	}
}

// TestGPUsAloneSubsetsTheRecordedBox: --gpus without --topo takes the
// first GPUs of the box each trace recorded, not of the default box (an
// RTX PRO 6000 box, on which an H200 trace was once priced or refused as
// "the default box rtxpro6000-2s"). A TP-1 run priced on one GPU of its
// box, or a TP-8 run on all eight, is the prediction without the flag.
func TestGPUsAloneSubsetsTheRecordedBox(t *testing.T) {
	const dir = "../../exec/cuda/testdata/h200/"
	type scen struct {
		Scenario struct {
			Topology struct {
				Name string `json:"name"`
				GPUs int    `json:"gpus"`
			} `json:"topology"`
		} `json:"scenario"`
		Step struct {
			PredictedUs float64 `json:"predicted_us"`
		} `json:"step"`
	}
	compareJSON := func(t *testing.T, args ...string) scen {
		t.Helper()
		code, out, stderr := runCLI(t, append([]string{"compare", "--output", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("compare %v: exit %d: %s", args, code, stderr)
		}
		var rep struct{ Scenarios []scen }
		if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Scenarios) != 1 {
			t.Fatalf("compare %v: %v, %d scenarios", args, err, len(rep.Scenarios))
		}
		return rep.Scenarios[0]
	}
	for _, tc := range []struct {
		trace string
		gpus  int
	}{
		{dir + "h200-tiny-mla-moe-tp1-eager.otlp.jsonl.gz", 1},
		{dir + "h200-kimi-k2.5-tp8-rank0-graph-b8-catalog.otlp.jsonl.gz", 8},
	} {
		t.Run(filepath.Base(tc.trace), func(t *testing.T) {
			was := compareJSON(t, "--trace", tc.trace)
			got := compareJSON(t, "--trace", tc.trace, "--gpus", fmt.Sprint(tc.gpus))
			if got.Scenario.Topology.Name != was.Scenario.Topology.Name || got.Scenario.Topology.GPUs != tc.gpus {
				t.Errorf("box %+v, want the recorded %q at %d GPUs", got.Scenario.Topology, was.Scenario.Topology.Name, tc.gpus)
			}
			if math.Abs(got.Step.PredictedUs-was.Step.PredictedUs) > 1e-6*was.Step.PredictedUs {
				t.Errorf("predicted step %.1f us at --gpus %d, %.1f us without", got.Step.PredictedUs, tc.gpus, was.Step.PredictedUs)
			}
		})
	}
	// Fewer GPUs than the recorded plan needs is the flag's error, before
	// any work (it ended as "a scenario that cannot be predicted", exit 1).
	tp8 := dir + "h200-kimi-k2.5-tp8-rank0-graph-b8-catalog.otlp.jsonl.gz"
	checkUsageErrors(t, []usageCase{{"gpus below the recorded plan", []string{"compare", "--trace", tp8, "--gpus", "4"},
		"--gpus 4: " + tp8 + " records plan tp8, which needs 8 GPUs: want at least 8 (or leave --gpus out)"}})
}

// TestKinetoTraceFacts: what a profiler trace's steps record is held
// against the flags as a recorded scenario is: the world size (--tp x
// --dp), the phase and batch its engine ranges name (the batch per rank,
// that is per DP group) and its CUDA graphs, each refused in one line
// naming the flag, the file and the trace's value (exit 2, nothing
// written). The fixture is vLLM's Kimi-K2.5 TP-8 decode at batch 32 with
// one graph launch a step (its name and ranges:
// execute_context_0(0)_generation_32(32)).
func TestKinetoTraceFacts(t *testing.T) {
	out := filepath.Join(t.TempDir(), "box.json")
	base := []string{"--trace", kimiKineto, "--model", "kimi-k2.5", "--context", "4096", "--topo", "h200-nvswitch"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"batch", []string{"compare", "--batch", "8"}, "--batch 8: " + kimiKineto + " measured decode batch 32 per rank"},
		{"world", []string{"compare", "--batch", "32", "--tp", "4"}, "--tp 4: " + kimiKineto + " measured world size 8"},
		{"phase", []string{"compare", "--batch", "32", "--phase", "prefill"}, "--phase prefill: " + kimiKineto + " measured phase decode"},
		// DP 8 gives each rank 32/8 = 4 sequences, not the 32 its range names.
		{"dp", []string{"compare", "--batch", "32", "--tp", "1", "--dp", "8", "--ep"}, "--batch 32: " + kimiKineto + " measured decode batch 32 per rank"},
		{"graphs", []string{"compare", "--batch", "32", "--cuda-graphs=false"}, "--cuda-graphs false: " + kimiKineto + " measured CUDA graphs on"},
		{"calibrate batch", []string{"calibrate", "--batch", "8", "-o", out}, "--batch 8: " + kimiKineto + " measured decode batch 32 per rank"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, append(tc.args, base...)...)
			// The facts are read from the trace: the reader's note on what
			// it left out comes first, then the one-line refusal.
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			last := lines[len(lines)-1]
			if code != 2 || !strings.HasPrefix(last, "tpscope "+tc.args[0]+": usage: "+tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and a last line with %q", code, stderr, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatalf("%s was written", out)
			}
		})
	}
	// The recorded values are no contradiction: TP 8 at 32 a rank, or
	// DP 8 at 32 a rank (8 x 32 = 256 over all DP groups).
	for _, args := range [][]string{
		{"--batch", "32", "--tp", "8", "--phase", "decode", "--cuda-graphs"},
		{"--batch", "256", "--tp", "1", "--dp", "8", "--ep"},
	} {
		if code, _, stderr := runCLI(t, append(append([]string{"compare"}, base...), args...)...); code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, stderr)
		}
	}
}

// TestKinetoTraceRecordedRun: a profiler trace is predicted as it ran,
// not with the defaults: the eager fixture (no graph launch in its steps)
// without CUDA graphs, the scenario line saying so, and --cuda-graphs
// refused over it; of the piecewise fixture, whose ranges name one
// prefill step (execute_context_2(1024)_generation_0(0)) and three decode
// steps (execute_context_0(0)_generation_2(2)), the three decode steps
// are compared and the prefill step is left out and counted, and under
// --phase prefill the other way round.
func TestKinetoTraceRecordedRun(t *testing.T) {
	const dir = "../../traces/testdata/kineto/"
	eager, piecewise := dir+"vllm_tiny_tp4_rank0_eager.pt.trace.json.gz", dir+"vllm_tiny_tp4_rank0_piecewise.pt.trace.json.gz"
	flags := []string{"--model", "tiny-mla-moe", "--context", "512", "--topo", "h200-nvswitch", "--output", "json"}
	type issue struct {
		Reason   string   `json:"reason"`
		Count    int      `json:"count"`
		Examples []string `json:"examples"`
	}
	var rep struct {
		Scenarios []struct {
			From     string `json:"from"`
			Steps    int    `json:"steps"`
			Scenario struct {
				Workload string `json:"workload"`
				Options  struct {
					CUDAGraphs bool `json:"cuda_graphs"`
				} `json:"options"`
			} `json:"scenario"`
		} `json:"scenarios"`
		Issues []issue `json:"issues"`
	}
	compareJSON := func(t *testing.T, args ...string) {
		t.Helper()
		code, out, stderr := runCLI(t, append(append([]string{"compare"}, flags...), args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		rep.Scenarios, rep.Issues = nil, nil
		if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Scenarios) != 1 {
			t.Fatalf("%v: %v, %d scenarios", args, err, len(rep.Scenarios))
		}
	}
	leftOut := func(phase string) *issue {
		for i := range rep.Issues {
			if strings.HasPrefix(rep.Issues[i].Reason, phase+" steps left out") {
				return &rep.Issues[i]
			}
		}
		return nil
	}

	t.Run("eager", func(t *testing.T) {
		compareJSON(t, "--trace", eager, "--batch", "8")
		sr := rep.Scenarios[0]
		if sr.Scenario.Options.CUDAGraphs || !strings.Contains(sr.From, "cuda-graphs off recorded in the trace") {
			t.Errorf("cuda_graphs %v, from %q: want off, recorded in the trace", sr.Scenario.Options.CUDAGraphs, sr.From)
		}
		code, _, stderr := runCLI(t, append(append([]string{"compare"}, flags...), "--trace", eager, "--batch", "8", "--cuda-graphs")...)
		if want := "--cuda-graphs true: " + eager + " measured CUDA graphs off"; code != 2 || !strings.Contains(stderr, want) {
			t.Errorf("--cuda-graphs: exit %d, stderr %q; want 2 and %q", code, stderr, want)
		}
	})
	t.Run("piecewise decode", func(t *testing.T) {
		compareJSON(t, "--trace", piecewise, "--batch", "2")
		sr := rep.Scenarios[0]
		if sr.Steps != 3 || !strings.HasPrefix(sr.Scenario.Workload, "decode b2") || !strings.Contains(sr.From, "phase decode recorded in the trace") {
			t.Errorf("%d steps, workload %q, from %q: want the 3 decode steps at b2, the phase recorded in the trace", sr.Steps, sr.Scenario.Workload, sr.From)
		}
		if is := leftOut("prefill"); is == nil || is.Count != 1 || !strings.Contains(is.Examples[0], "step 0 rank 0: execute_context_2(1024)") {
			t.Errorf("issues %+v: want the prefill step 0 left out, counted once", rep.Issues)
		}
	})
	t.Run("piecewise prefill", func(t *testing.T) {
		compareJSON(t, "--trace", piecewise, "--batch", "2", "--phase", "prefill")
		if sr := rep.Scenarios[0]; sr.Steps != 1 || !strings.HasPrefix(sr.Scenario.Workload, "prefill b2") {
			t.Errorf("%d steps, workload %q: want the prefill step at b2", sr.Steps, sr.Scenario.Workload)
		}
		if is := leftOut("decode"); is == nil || is.Count != 3 {
			t.Errorf("issues %+v: want the 3 decode steps left out", rep.Issues)
		}
	})
}

// TestOlderTraceFilledFromFlags: a trace recorded before the whole
// scenario was (traces/testdata/jaeger_ui_download.json: its step span
// names model deepseek-v3 and no plan, workload or box) takes what it
// lacks from the flags the error names, and says so; what the flags do
// not give is refused before any work, naming the file, every attribute
// it lacks and the flags that give it (the error once asked for --tp and,
// given it, asked again: the flags filled nothing).
func TestOlderTraceFilledFromFlags(t *testing.T) {
	const trace = "../../traces/testdata/jaeger_ui_download.json"
	code, _, stderr := runCLI(t, "compare", "--trace", trace, "--tp", "8")
	if want := "tpscope compare: usage: " + trace + ": the trace's step span lacks tpscope.workload: pass --batch and --context"; code != 2 || !strings.HasPrefix(stderr, want) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("--tp alone: exit %d, stderr %q; want 2 and one line %q...", code, stderr, want)
	}
	code, out, stderr := runCLI(t, "compare", "--trace", trace, "--tp", "8", "--batch", "1", "--context", "4096", "--topo", "h200-nvswitch", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Scenarios []struct {
			From     string `json:"from"`
			Scenario struct {
				Model    struct{ Name string } `json:"model"`
				Plan     string                `json:"plan"`
				Workload string                `json:"workload"`
			} `json:"scenario"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Scenarios) != 1 {
		t.Fatalf("%v, %d scenarios", err, len(rep.Scenarios))
	}
	sr := rep.Scenarios[0]
	if sr.Scenario.Model.Name != "deepseek-v3" || sr.Scenario.Plan != "tp8" || !strings.HasPrefix(sr.Scenario.Workload, "decode b1 ctx4096") {
		t.Errorf("scenario %+v: want the recorded deepseek-v3 at tp8, decode b1 ctx4096 from the flags", sr.Scenario)
	}
	for _, w := range []string{"recorded in the trace", "plan tp8 from --tp", "workload decode b1 ctx4096"} {
		if !strings.Contains(sr.From, w) {
			t.Errorf("from %q lacks %q", sr.From, w)
		}
	}
}

// TestKinetoTraceEngine: the engine whose step ranges split a profiler
// trace ran it. An SGLang trace is priced with SGLang's profile when
// --engine is left out, said in the scenario line; another --engine (or
// the executor) is refused in one line naming the flag, the file and the
// engine it recorded; the same engine at a version is accepted. A vLLM
// trace under the default engine says nothing (the default is vLLM).
func TestKinetoTraceEngine(t *testing.T) {
	const dir = "../../traces/testdata/kineto/"
	sgl, vllm := dir+"sglang_tiny_tp2_rank0_graph.trace.json.gz", dir+"vllm_tiny_tp4_rank0_eager.pt.trace.json.gz"
	flags := []string{"--model", "tiny-mla-moe", "--batch", "8", "--context", "512", "--topo", "h200-nvswitch"}
	run := func(args ...string) (int, string, string) {
		return runCLI(t, append(append([]string{"compare"}, flags...), args...)...)
	}
	code, out, errs := run("--trace", sgl)
	if code != 0 || !strings.Contains(out, "engine=sglang") || !strings.Contains(out, "; engine sglang recorded in the trace's step ranges;") {
		t.Errorf("SGLang trace: exit %d, stderr %q; want it priced as sglang and said:\n%s", code, errs, out)
	}
	if code, _, errs := run("--trace", sgl, "--engine", "sglang@0.5"); code != 0 {
		t.Errorf("--engine sglang@0.5 on an SGLang trace: exit %d: %s", code, errs)
	}
	for _, c := range []struct{ trace, engine, recorded string }{{sgl, "vllm", "sglang"}, {sgl, "executor", "sglang"}, {vllm, "sglang", "vllm"}} {
		code, out, errs := run("--trace", c.trace, "--engine", c.engine)
		want := "usage: --engine " + c.engine + ": " + c.trace + " measured engine " + c.recorded + " (its step ranges)"
		if code != 2 || out != "" || !strings.Contains(errs, want) {
			t.Errorf("--engine %s on %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.engine, c.trace, code, out, errs, want)
		}
	}
	if code, out, _ := run("--trace", vllm); code != 0 || strings.Contains(out, "recorded in the trace's step ranges") {
		t.Errorf("vLLM trace under the default engine: exit %d; want no engine line:\n%s", code, out)
	}
}

// TestRecordedScenarioEngine: the engine a recorded trace names ran it
// (tpscope's executor: its own kernels), as a profiler trace's step ranges
// name theirs. Another --engine is refused on compare, report and
// calibrate in one line naming the flag, the file and the recorded engine
// (exit 2, nothing written): compare had priced vLLM's kernels against the
// executor's measured ones, and calibrate fitted the executor's kernel
// times as vLLM's. The recorded engine (by name or at its version) passes.
func TestRecordedScenarioEngine(t *testing.T) {
	const h200 = "../../exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-graph-b8-catalog.otlp.jsonl.gz"
	cpu := filepath.Join(cpuRanksDir, "cpu4-tiny-mla-moe-tp4-b1-eager.otlp.jsonl.gz")
	cpuBox := filepath.Join(cpuRanksDir, "cpu-4r.json") // recorded before boxes travelled in traces
	dir := t.TempDir()
	box, html := filepath.Join(dir, "box.json"), filepath.Join(dir, "r.html")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"compare vllm", []string{"compare", "--trace", h200, "--engine", "vllm"}, "--engine vllm: " + h200 + " measured engine executor"},
		{"compare sglang", []string{"compare", "--trace", cpu, "--topo", cpuBox, "--engine", "sglang@0.5"}, "--engine sglang@0.5: " + cpu + " measured engine executor"},
		{"report", []string{"report", "--trace", h200, "--engine", "vllm", "-o", html}, "--engine vllm: " + h200 + " measured engine executor"},
		{"calibrate", []string{"calibrate", "--trace", cpu, "--topo", cpuBox, "--engine", "vllm", "--force", "-o", box}, "--engine vllm: " + cpu + " measured engine executor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runCLI(t, tc.args...)
			if code != 2 || out != "" || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("exit %d, stdout %d bytes, stderr %q; want 2, nothing on stdout and one line with %q", code, len(out), stderr, tc.want)
			}
			for _, f := range []string{box, html} {
				if _, err := os.Stat(f); err == nil {
					t.Fatalf("%s was written", f)
				}
			}
		})
	}
	for _, eng := range []string{"executor", "executor@1"} {
		if code, _, stderr := runCLI(t, "compare", "--trace", h200, "--engine", eng); code != 0 {
			t.Errorf("--engine %s, the recorded engine: exit %d: %s", eng, code, stderr)
		}
	}
}

// TestRecordedScenarioSpec: speculative decoding is part of what a trace
// measured (its draft ops and tokens per step), whichever flag sets it:
// --spec over a run without speculation is refused as --mtp and
// --spec-tokens are (it had priced three draft tokens a step against a
// plain run), and another method at the recorded tokens over an EAGLE-3
// run too (--spec mtp --spec-tokens 3 had priced MTP's ops against the
// EAGLE-3 head's, 'overridden by --spec mtp'). One line naming the flag,
// the file and what it recorded; the recorded speculation passes.
func TestRecordedScenarioSpec(t *testing.T) {
	const h200 = "../../exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-graph-b8-catalog.otlp.jsonl.gz"
	dir := t.TempDir()
	eagle := filepath.Join(dir, "eagle3.otlp.jsonl")
	box := filepath.Join(cpuRanksDir, "cpu-4r.json")
	if code, _, stderr := runCLI(t, "run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--batch", "2", "--context", "256",
		"--steps", "2", "--warmup", "1", "--spec", "eagle3", "--topo", box, "--trace", "file:"+eagle); code != 0 {
		t.Fatalf("run --spec eagle3: exit %d: %s", code, stderr)
	}
	out := filepath.Join(dir, "box.json")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"spec over none", []string{"compare", "--trace", h200, "--spec", "eagle3"}, "--spec eagle3: " + h200 + " measured speculative decoding none"},
		{"calibrate spec over none", []string{"calibrate", "--trace", h200, "--spec", "eagle3", "--force", "-o", out}, "--spec eagle3: " + h200 + " measured speculative decoding none"},
		{"another method", []string{"compare", "--trace", eagle, "--spec", "mtp", "--spec-tokens", "3"}, "--spec mtp: " + eagle + " measured speculative decoding eagle3(tiny-mla-moe-eagle3) k3"},
		{"other tokens", []string{"compare", "--trace", eagle, "--spec-tokens", "2"}, "--spec-tokens 2: " + eagle + " measured speculative decoding eagle3(tiny-mla-moe-eagle3) k3"},
		// --mtp N is --spec mtp --spec-tokens N, here too.
		{"mtp at the recorded tokens", []string{"compare", "--trace", eagle, "--mtp", "3"}, "--mtp 3: " + eagle + " measured speculative decoding eagle3(tiny-mla-moe-eagle3) k3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != 2 || stdout != "" || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("exit %d, stdout %d bytes, stderr %q; want 2, nothing on stdout and one line with %q", code, len(stdout), stderr, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatalf("%s was written", out)
			}
		})
	}
	if code, _, stderr := runCLI(t, "compare", "--trace", eagle, "--spec", "eagle3", "--spec-tokens", "3"); code != 0 {
		t.Errorf("the recorded speculation: exit %d: %s", code, stderr)
	}
}

// TestRecordedScenarioGraphSizes: the capture sizes a recorded run was
// replayed with are how it ran, as its CUDA graphs are: --graph-sizes that
// would pad its batch to another size (the trace, recorded when graphs
// padded whole sequences, says batch 8: the graph of 8 tokens) (16,32 over the batch-8 graph run
// had priced batch 16 against it, +12.5 % where the run's own batch gives
// -10.1 %, said only in the 'left out' table) or leave it uncaptured
// (1,2,4: priced eager) is refused in one line naming the flag, the file
// and the graph it ran; over an eager run capture sizes price nothing and
// are refused too. Sizes that keep the recorded graph pass.
func TestRecordedScenarioGraphSizes(t *testing.T) {
	const graph = "../../exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-graph-b8-catalog.otlp.jsonl.gz"
	const eager = "../../exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-eager.otlp.jsonl.gz"
	checkUsageErrors(t, []usageCase{
		{"pads to another batch", []string{"compare", "--trace", graph, "--graph-sizes", "16,32"}, "--graph-sizes 16+32: " + graph + " measured CUDA graph replay of 8 tokens"},
		{"leaves it eager", []string{"compare", "--trace", graph, "--graph-sizes", "1,2,4"}, "--graph-sizes 1+2+4: " + graph + " measured CUDA graph replay of 8 tokens"},
		{"calibrate", []string{"calibrate", "--trace", graph, "--graph-sizes", "16,32", "-o", filepath.Join(t.TempDir(), "box.json")}, "--graph-sizes 16+32: " + graph + " measured CUDA graph replay of 8 tokens"},
		{"over an eager run", []string{"compare", "--trace", eager, "--graph-sizes", "8,16"}, "--graph-sizes 8+16: " + eager + " measured CUDA graphs off"},
	})
	if code, _, stderr := runCLI(t, "compare", "--trace", graph, "--graph-sizes", "4,8,16"); code != 0 {
		t.Errorf("sizes that keep the recorded graph: exit %d: %s", code, stderr)
	}
}

// TestRecordedScenarioOverrideChecked: an option that overrides a recorded
// scenario is checked as predict checks it, before any work: a kernel the
// trace's engine does not have (the executor has no FLASHMLA backend and no
// Marlin MoE kernel) had been named as an override and priced as nothing
// (the step unchanged at 12345.4 us); an option the scenario cannot take
// had ended as 'no scenario of the traces could be compared', exit 1. Now
// one line naming the flag, exit 2.
func TestRecordedScenarioOverrideChecked(t *testing.T) {
	const h200 = "../../exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-graph-b8-catalog.otlp.jsonl.gz"
	cpu := filepath.Join(cpuRanksDir, "cpu4-tiny-mla-moe-tp4-b1-eager.otlp.jsonl.gz")
	box := filepath.Join(cpuRanksDir, "cpu-4r.json")
	for _, tc := range []usageCase{
		{"attention backend", []string{"compare", "--trace", h200, "--attention-backend", "FLASHMLA"}, "--attention-backend flashmla: executor@1 has no attention backend"},
		{"moe kernel", []string{"compare", "--trace", h200, "--moe-kernel", "marlin"}, "--moe-kernel marlin: executor@1 has no MoE kernel"},
		{"report moe kernel", []string{"report", "--trace", h200, "--moe-kernel", "marlin", "-o", filepath.Join(t.TempDir(), "r.html")}, "--moe-kernel marlin: executor@1 has no MoE kernel"},
		{"acceptance without speculation", []string{"compare", "--trace", cpu, "--topo", box, "--mtp-accept", "0.5"}, "--mtp-accept 0.5: compare, calibrate --trace and report --trace price the steps a trace measured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, stderr := runCLI(t, tc.args...)
			if code != 2 || out != "" || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("exit %d, stdout %d bytes, stderr %q; want 2, nothing on stdout and one line with %q", code, len(out), stderr, tc.want)
			}
		})
	}
}

// TestTraceVerbsRefuseGPUMemUtil: compare, calibrate --trace and report
// --trace price the steps a trace measured, whose KV cache the traced
// step held; the pool fraction sizes a serving engine's KV pool, which
// none of them prints, so --gpu-mem-util is refused in one line before
// any trace is read, as run and verdict refuse it (it had been listed as
// an override, "overridden by --gpu-mem-util 0.5", and changed nothing).
// report without a trace predicts the flags' step, whose memory line
// the fraction sizes: there it stays.
func TestTraceVerbsRefuseGPUMemUtil(t *testing.T) {
	const eager = "../../exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-eager.otlp.jsonl.gz"
	dir := t.TempDir()
	html, cal := filepath.Join(dir, "r.html"), filepath.Join(dir, "box.json")
	want := "--gpu-mem-util 0.5: compare, calibrate --trace and report --trace price the steps a trace measured"
	for _, args := range [][]string{
		{"compare", "--trace", eager, "--gpu-mem-util", "0.5"},
		{"calibrate", "--trace", eager, "--gpu-mem-util", "0.5", "-o", cal},
		{"report", "--trace", eager, "--gpu-mem-util", "0.5", "-o", html},
	} {
		code, out, stderr := runCLI(t, args...)
		if code != 2 || out != "" || !strings.Contains(stderr, want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%s: exit %d, stdout %d bytes, stderr %q; want 2, nothing on stdout and one line with %q", args[0], code, len(out), stderr, want)
		}
	}
	for _, p := range []string{html, cal} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	// (0.85: the fraction at which the default step fits, as predict
	// would refuse one that does not.)
	code, out, stderr := runCLI(t, "report", "--gpu-mem-util", "0.85", "-o", html)
	if code != 0 || !strings.HasPrefix(out, "wrote "+html) {
		t.Errorf("report of a predicted step with --gpu-mem-util: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
}

// TestCPUTraceRefusesNCCLSettings: a CPU-backend trace is priced on its CPU
// box, whose ranks' collectives are the cpu backend's own rings. An NCCL
// setting over it (which run refuses on that backend) is refused in one
// line by compare, calibrate and report, naming the flag, the file and the
// box, before any work (calibrate writes nothing); a setting left false
// is no request and passes, and over a GPU trace the same flag still
// re-prices it and is named.
func TestCPUTraceRefusesNCCLSettings(t *testing.T) {
	dir := t.TempDir()
	cpuTrace := filepath.Join(dir, "cpu.otlp.jsonl")
	if code, _, errs := runCLI(t, "run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "4", "--topo", filepath.Join(cpuRanksDir, "cpu-4r.json"),
		"--steps", "2", "--warmup", "0", "--trace", "file:"+cpuTrace); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	cal := filepath.Join(dir, "cal.json")
	for _, tc := range []struct {
		name string
		args []string
		flag string
	}{
		{"compare-proto", []string{"compare", "--trace", cpuTrace, "--nccl-proto", "LL"}, "--nccl-proto LL"},
		{"compare-algo", []string{"compare", "--trace", cpuTrace, "--nccl-algo", "Tree"}, "--nccl-algo Tree"},
		{"calibrate-p2p-disable", []string{"calibrate", "--trace", cpuTrace, "--p2p-disable", "-o", cal}, "--p2p-disable true"},
		{"report-channels", []string{"report", "--trace", cpuTrace, "--nccl-min-channels", "4", "-o", filepath.Join(dir, "r.html")}, "--nccl-min-channels 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != 2 || strings.Count(stderr, "\n") != 1 || stdout != "" ||
				!strings.Contains(stderr, tc.flag+": "+cpuTrace+" is priced on the CPU box cpu-4r") ||
				!strings.Contains(stderr, "NCCL's settings do not reach") {
				t.Errorf("exit %d (want 2), stdout %q, stderr %q", code, stdout, stderr)
			}
		})
	}
	if _, err := os.Stat(cal); !os.IsNotExist(err) {
		t.Errorf("calibrate wrote %s: %v", cal, err)
	}
	if code, out, errs := runCLI(t, "compare", "--trace", cpuTrace, "--p2p-disable=false"); code != 0 || strings.Contains(out, "overridden") {
		t.Errorf("--p2p-disable=false over the CPU trace: exit %d, %s%s", code, out, errs)
	}
	const gpuTrace = "../../exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-graph-b8-catalog.otlp.jsonl.gz"
	if code, out, errs := runCLI(t, "compare", "--trace", gpuTrace, "--nccl-proto", "LL"); code != 0 || !strings.Contains(out, "overridden by --nccl-proto LL") {
		t.Errorf("--nccl-proto LL over the H200 trace: exit %d, %s", code, errs)
	}
}

// TestRecordedScenarioNamesOnlyOverrides: over a recorded trace, flags
// that name what it measured (its model, plan, batch, and its KV dtype,
// which it ran unnamed as the checkpoint's bf16) override nothing and are
// not named, alone or beside a flag that does re-price it, which alone is
// named; and a box given as the one the trace recorded, beside such a
// flag, is no override either.
func TestRecordedScenarioNamesOnlyOverrides(t *testing.T) {
	dir := t.TempDir()
	box := filepath.Join(cpuRanksDir, "cpu-4r.json")
	tr := filepath.Join(dir, "cpu.otlp.jsonl")
	if code, _, errs := runCLI(t, "run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "4", "--topo", box,
		"--steps", "2", "--warmup", "0", "--trace", "file:"+tr); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"facts", []string{"--model", "tiny-mla-moe", "--tp", "4", "--batch", "1", "--kv-dtype", "bf16"}, "scenario recorded in the trace\n"},
		{"kv-and-box", []string{"--kv-dtype", "bf16", "--topo", box}, "scenario recorded in the trace\n"},
		{"facts-and-option", []string{"--batch", "1", "--kv-dtype", "bf16", "--ar-norm-fusion"}, "scenario recorded in the trace; overridden by --ar-norm-fusion true\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, append([]string{"compare", "--trace", tr}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if !strings.Contains(out, "\n"+tc.want) {
				t.Errorf("want the line %q in:\n%s", tc.want, out)
			}
		})
	}
}

// TestEditedTraceIsDamagedInput: a trace whose recorded box no longer
// hashes to the hash beside it (one step's box edited after the run) is
// damaged input: compare and report stop with exit 1 and one line naming
// the file and the mismatch, unless --allow-partial, which compares the
// other steps and lists the edited one as left out; calibrate refuses it
// even with --allow-partial and writes nothing.
func TestEditedTraceIsDamagedInput(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "cpu.otlp.jsonl")
	if code, _, errs := runCLI(t, "run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "4", "--topo", filepath.Join(cpuRanksDir, "cpu-4r.json"),
		"--steps", "3", "--warmup", "0", "--trace", "file:"+tr); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(tr)
	if err != nil {
		t.Fatal(err)
	}
	const name = `\"box\":{\"name\":\"cpu-4r\"`
	if strings.Count(string(b), name) != 3 {
		t.Fatalf("the trace records its box %d times, want once per step (3)", strings.Count(string(b), name))
	}
	edited := filepath.Join(dir, "edited.otlp.jsonl")
	if err := os.WriteFile(edited, []byte(strings.Replace(string(b), name, `\"box\":{\"name\":\"cpu-4X\"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	const why = "its content hashes to "
	cal := filepath.Join(dir, "cal.json")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"compare", []string{"compare", "--trace", edited}, "the trace was edited or damaged (--allow-partial reads its other steps)\n"},
		{"report", []string{"report", "--trace", edited, "-o", filepath.Join(dir, "r.html")}, "the trace was edited or damaged (--allow-partial reads its other steps)\n"},
		{"calibrate", []string{"calibrate", "--trace", edited, "-o", cal}, "the trace was edited or damaged; calibrate refuses damaged input"},
		{"calibrate-allow-partial", []string{"calibrate", "--trace", edited, "--allow-partial", "-o", cal}, "calibrate refuses damaged input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "tpscope "+tc.args[0]+": "+edited+": scenario box ") ||
				!strings.Contains(stderr, why) || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d (want 1), stdout %q, stderr %q (want %q)", code, stdout, stderr, tc.want)
			}
		})
	}
	if _, err := os.Stat(cal); !os.IsNotExist(err) {
		t.Errorf("calibrate wrote %s: %v", cal, err)
	}
	code, out, errs := runCLI(t, "compare", "--trace", edited, "--allow-partial")
	if code != 0 || !strings.Contains(out, "2 steps x 4 ranks, 2 traces") || !strings.Contains(out, "the trace was edited or damaged") {
		t.Errorf("--allow-partial: exit %d, stderr %q:\n%s", code, errs, out)
	}
}

// TestCPUTraceOnGPUBoxNamesTopo: a --topo of GPUs over a CPU-backend
// trace is refused as a GPU box of another GPU is (exit 2, one line naming
// --topo, its GPUs and the file), by compare, calibrate and report, before
// any work; the CPU box it ran on is taken.
func TestCPUTraceOnGPUBoxNamesTopo(t *testing.T) {
	dir := t.TempDir()
	box := filepath.Join(cpuRanksDir, "cpu-4r.json")
	tr := filepath.Join(dir, "cpu.otlp.jsonl")
	if code, _, errs := runCLI(t, "run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "4", "--topo", box,
		"--steps", "2", "--warmup", "0", "--trace", "file:"+tr); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	cal := filepath.Join(dir, "cal.json")
	for _, tc := range []struct {
		name, topo, gpu string
		args            []string
	}{
		{"compare", "h200-nvswitch", "NVIDIA H200", []string{"compare"}},
		{"calibrate", "nvswitch:8xh100-sxm", "NVIDIA H100 80GB HBM3", []string{"calibrate", "-o", cal}},
		{"report", "rtxpro6000-2s", "NVIDIA RTX PRO 6000 Blackwell Server Edition", []string{"report", "-o", filepath.Join(dir, "r.html")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append(tc.args, "--trace", tr, "--topo", tc.topo)...)
			want := "tpscope " + tc.name + ": usage: --topo " + tc.topo + ": its GPUs are " + tc.gpu + ", and " + tr + " ran on the cpu backend, whose ranks are CPU cores: pass the JSON 'tpscope calibrate --backend cpu' wrote\n"
			if code != 2 || stdout != "" || stderr != want {
				t.Errorf("exit %d (want 2), stdout %q,\nstderr %q\nwant   %q", code, stdout, stderr, want)
			}
		})
	}
	if _, err := os.Stat(cal); !os.IsNotExist(err) {
		t.Errorf("calibrate wrote %s: %v", cal, err)
	}
	if code, _, errs := runCLI(t, "compare", "--trace", tr, "--topo", box); code != 0 {
		t.Errorf("--topo %s: exit %d: %s", box, code, errs)
	}
}

// TestBoxesFromOneFileNamedApart: two runs on one box file whose content
// changed between them (calibrated again in place) are two scenarios on
// two boxes of one name, each priced on the box it recorded by value; the
// file's path names neither (it holds the second one now), so both are
// numbered.
func TestBoxesFromOneFileNamedApart(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join(cpuRanksDir, "cpu-4r.json"))
	if err != nil {
		t.Fatal(err)
	}
	box := filepath.Join(dir, "cpu.json")
	var trs []string
	for i, content := range []string{string(src), strings.Replace(string(src), "4 goroutine ranks sharing", "4 goroutine ranks, calibrated again, sharing", 1)} {
		if content == string(src) && i == 1 {
			t.Fatal("the box's description changed nothing")
		}
		if err := os.WriteFile(box, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		tr := filepath.Join(dir, fmt.Sprintf("run%d.otlp.jsonl", i+1))
		if code, _, errs := runCLI(t, "run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "4", "--topo", box,
			"--steps", "1", "--warmup", "0", "--trace", "file:"+tr); code != 0 {
			t.Fatalf("run: exit %d: %s", code, errs)
		}
		trs = append(trs, tr)
	}
	code, out, errs := runCLI(t, "compare", "--trace", strings.Join(trs, ","))
	if code != 0 {
		t.Fatalf("compare: exit %d: %s", code, errs)
	}
	for i := 1; i <= 2; i++ {
		if want := fmt.Sprintf("\nscenario %d: tiny-mla-moe tp4 decode b1 ctx4096 kv=bf16 on cpu-4r (box %d of 2 named cpu-4r), ", i, i); !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, box) {
		t.Errorf("a scenario is named by %s, which holds the second box:\n%s", box, out)
	}
}

// TestRecordedPlanNeedsTheBox: a box given with --topo (at --gpus) with
// fewer GPUs than the plan a trace records is refused as --gpus alone is:
// a usage error (exit 2) in one line naming the flag that made it small,
// the trace and the GPUs its plan needs, before any work.
func TestRecordedPlanNeedsTheBox(t *testing.T) {
	const h200 = "../../exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-graph-b8.otlp.jsonl.gz"
	out := filepath.Join(t.TempDir(), "box.json")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"topo", []string{"compare", "--trace", h200, "--topo", "nvswitch:4xh200-sxm"},
			"usage: --topo nvswitch:4xh200-sxm: its box nvswitch:4xh200-sxm has 4 GPUs, and " + h200 + " records plan tp8, which needs 8: pass a box of at least 8\n"},
		{"topo and gpus", []string{"compare", "--trace", h200, "--topo", "h200-nvswitch", "--gpus", "4"},
			"usage: --gpus 4: " + h200 + " records plan tp8, which needs 8 GPUs: want at least 8 (or leave --gpus out)\n"},
		{"calibrate topo", []string{"calibrate", "--trace", h200, "--topo", "nvswitch:4xh200-sxm", "-o", out},
			"usage: --topo nvswitch:4xh200-sxm: its box nvswitch:4xh200-sxm has 4 GPUs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tc.args...)
			if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d (want 2), stdout %q, stderr %q (want %q)", code, stdout, stderr, tc.want)
			}
		})
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("calibrate wrote %s: %v", out, err)
	}
}

// TestProfilerWorldNeedsTheBox: a profiler trace's world size gives --tp;
// a box (--topo, or --gpus of it) smaller than that world is refused in
// one line naming the flag the user gave and the trace's world, not
// '--tp 8 x --dp 1', which the user did not give.
func TestProfilerWorldNeedsTheBox(t *testing.T) {
	base := []string{"compare", "--trace", kimiKineto, "--model", "kimi-k2.5", "--batch", "32", "--context", "4096"}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"topo", []string{"--topo", "nvswitch:4xh200-sxm"}, "usage: --topo nvswitch:4xh200-sxm: the box nvswitch:4xh200-sxm has 4 GPUs, and " + kimiKineto + " ran on a world of 8: want a box of at least 8\n"},
		{"gpus", []string{"--topo", "h200-nvswitch", "--gpus", "2"}, "usage: --gpus 2: the box h200-nvswitch/2gpu has 2 GPUs, and " + kimiKineto + " ran on a world of 8: want a box of at least 8\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, append(base, tc.args...)...)
			if code != 2 || stdout != "" || !strings.HasSuffix(stderr, tc.want) || strings.Contains(stderr, "--tp") {
				t.Errorf("exit %d (want 2), stdout %q, stderr %q (want %q)", code, stdout, stderr, tc.want)
			}
		})
	}
}

// TestTraceRefusalIsOneLine: the profiler trace's reader leaves 9 events
// out (copies, kernels outside every step range); a refusal of the flags
// over it is one line on stderr, with no note before it promising a
// listing in an output that never comes, on compare, report and
// calibrate. Where the verb goes on, the note is said (compare: where its
// output lists them).
func TestTraceRefusalIsOneLine(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"compare", "--trace", kimiKineto},
		{"compare", "--trace", kimiKineto, "--model", "kimi-k2.5", "--batch", "32", "--context", "4096", "--topo", "nvswitch:4xh200-sxm"},
		{"report", "--trace", kimiKineto, "-o", filepath.Join(dir, "r.html")},
		{"calibrate", "--trace", kimiKineto, "-o", filepath.Join(dir, "c.json")},
	} {
		code, stdout, stderr := runCLI(t, args...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "tpscope "+args[0]+": usage: ") {
			t.Errorf("%v: exit %d (want 2), stdout %q, stderr %q: want one usage line", args, code, stdout, stderr)
		}
	}
	code, _, stderr := runCLI(t, "compare", "--trace", kimiKineto, "--model", "kimi-k2.5", "--batch", "32", "--context", "4096", "--topo", "h200-nvswitch")
	if code != 0 || stderr != kimiKineto+": left out 9 items (listed in the output, under its sources)\n" {
		t.Errorf("compare: exit %d, stderr %q", code, stderr)
	}
}

// TestKinetoTraceARNormFusion: whether the server fused each all-reduce
// with the RMSNorm after it is what the trace's kernels show, not the
// engine's default: the vLLM fixture runs a norm kernel after every
// all-reduce, so on an H200 (where vLLM 0.24 would fuse them by default)
// compare prices it with the fusion off and says the trace recorded it;
// --ar-norm-fusion, which it contradicts, is refused in one line naming
// the flag and the trace, before any work; the TensorRT-LLM fixture's
// allreduce_fusion kernels read as on.
func TestKinetoTraceARNormFusion(t *testing.T) {
	args := []string{"compare", "--trace", kimiKineto, "--model", "kimi-k2.5", "--batch", "32", "--context", "4096", "--topo", "h200-nvswitch"}
	code, out, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "ar-norm-fusion off recorded in the trace (a norm kernel follows each all-reduce)") {
		t.Errorf("output does not say the trace recorded the fusion off:\n%s", out)
	}
	code, _, stderr = runCLI(t, append(args, "--ar-norm-fusion")...)
	if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "--ar-norm-fusion") ||
		!strings.Contains(stderr, "all-reduce + RMSNorm fusion off (a norm kernel follows each all-reduce)") {
		t.Errorf("--ar-norm-fusion over the unfused trace: exit %d, stderr %q; want one line naming the flag and what the trace shows", code, stderr)
	}
	res, err := traces.ReadAll(context.Background(), "../../traces/testdata/kineto/trtllm_tiny_tp4_rank0_graph.trace.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	if on, ok := traceARNormFusion([]*traces.Result{res}, "decode"); !on || !ok {
		t.Errorf("TensorRT-LLM fixture: fusion %v (known %v), want on", on, ok)
	}
}

// TestRecordedScenarioSpecKeepsDrafter: a speculative flag over a
// recorded run changes the field it names, the rest of the recorded
// speculation stays: over a draft-model run (tiny-mla-moe drafting for
// itself at draft TP 1, no built-in drafter for the family), restating
// --spec-tokens 3, --spec draft or --draft-tp 1 is the run as recorded and
// compares; another K or draft TP is refused naming what the trace
// measured. Each had been refused with "--spec draft: no built-in draft
// model for tiny-mla-moe", the flags' spec rebuilt from scratch with the
// family's default drafter, even where the user passed no --spec.
func TestRecordedScenarioSpecKeepsDrafter(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "draft.otlp.jsonl")
	box := filepath.Join(cpuRanksDir, "cpu-4r.json")
	if code, _, stderr := runCLI(t, "run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--batch", "2", "--context", "256",
		"--steps", "1", "--warmup", "0", "--spec", "draft", "--draft-model", "tiny-mla-moe", "--draft-tp", "1", "--topo", box, "--trace", "file:"+trace); code != 0 {
		t.Fatalf("run --spec draft: exit %d: %s", code, stderr)
	}
	for _, args := range [][]string{{"--spec-tokens", "3"}, {"--spec", "draft"}, {"--draft-tp", "1"}, {"--spec", "draft", "--spec-tokens", "3", "--draft-model", "tiny-mla-moe", "--draft-tp", "1"}} {
		if code, _, stderr := runCLI(t, append([]string{"compare", "--trace", trace}, args...)...); code != 0 {
			t.Errorf("compare %v, the run as recorded: exit %d: %s", args, code, stderr)
		}
	}
	const was = " measured speculative decoding draft(tiny-mla-moe, tp1) k3"
	checkUsageErrors(t, []usageCase{
		{"other tokens", []string{"compare", "--trace", trace, "--spec-tokens", "2"}, "--spec-tokens 2: " + trace + was},
		{"other draft tp", []string{"compare", "--trace", trace, "--draft-tp", "2"}, "--draft-tp 2: " + trace + was},
	})
}

// TestLeftOutItemsSaidUnderCSV: compare's CSV is one row per op, with no
// list of the sources' left-out items, so what the reader left out is
// listed on stderr there, not pointed at an output that lacks it.
func TestLeftOutItemsSaidUnderCSV(t *testing.T) {
	res, err := traces.ReadAll(context.Background(), kimiKineto)
	if err != nil {
		t.Fatal(err)
	}
	if res.SkippedTotal == 0 || res.SkippedTotal > 10 {
		t.Fatalf("the fixture leaves out %d items; the test wants 1 to 10", res.SkippedTotal)
	}
	code, out, stderr := runCLI(t, "compare", "--trace", kimiKineto, "--model", "kimi-k2.5", "--batch", "32", "--context", "4096", "--topo", "h200-nvswitch", "--output", "csv")
	if code != 0 {
		t.Fatalf("compare: exit %d: %s", code, stderr)
	}
	if strings.Contains(stderr, "listed in the output") {
		t.Errorf("compare --output csv points at its output for the left-out items, which the CSV does not list:\n%s", stderr)
	}
	if want := fmt.Sprintf("%s: left out %d items:\n", kimiKineto, res.SkippedTotal); !strings.HasPrefix(stderr, want) {
		t.Errorf("compare --output csv stderr %q, want it to start %q", stderr, want)
	}
	for _, sk := range res.Skipped {
		if !strings.Contains(stderr, "\n  "+sk.Reason+"\n") {
			t.Errorf("compare --output csv stderr lacks the item %q", sk.Reason)
		}
		if strings.Contains(out, sk.Reason) {
			t.Errorf("the CSV holds the left-out item %q, which is not an op row", sk.Reason)
		}
	}
}

// TestProfilerTraceWithoutEngineNeedsEngine: a profiler trace whose steps
// no engine's ranges split (the TensorRT-LLM fixture, split by its graph
// launches, as TensorRT-LLM's torch traces record no step range) says
// nothing of the engine whose kernels ran; compare, report and calibrate
// refuse it without --engine in one line naming the file, where it was
// priced with the default engine's (vLLM's) profile, said only as "the
// options not set". With --engine trtllm it is priced with TensorRT-LLM's.
func TestProfilerTraceWithoutEngineNeedsEngine(t *testing.T) {
	const trt = "../../traces/testdata/kineto/trtllm_tiny_tp4_rank0_graph.trace.json.gz"
	res, err := traces.ReadAll(context.Background(), trt)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Kineto) != 1 || res.Kineto[0].Engine != "" || res.Kineto[0].StepRule != traces.StepRuleGraphLaunch {
		t.Fatalf("the fixture's steps: %+v; want split by graph launches, no engine", res.Kineto)
	}
	flags := []string{"--trace", trt, "--model", "tiny-mla-moe", "--batch", "8", "--context", "512", "--topo", "nvswitch:8xb200"}
	dir := t.TempDir()
	for _, verb := range [][]string{{"compare"}, {"report", "-o", filepath.Join(dir, "r.html")}, {"calibrate", "-o", filepath.Join(dir, "c.json")}} {
		code, stdout, stderr := runCLI(t, append(verb, flags...)...)
		if code != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, trt+" records no engine") || !strings.Contains(stderr, "pass --engine") {
			t.Errorf("%s without --engine: exit %d, stdout %q, stderr %q; want exit 2 and one line naming the file and --engine", verb[0], code, stdout, stderr)
		}
	}
	code, out, stderr := runCLI(t, append([]string{"compare", "--engine", "trtllm"}, flags...)...)
	if code != 0 || !strings.Contains(out, "engine=trtllm") {
		t.Errorf("compare --engine trtllm: exit %d, stderr %q; want the step priced with trtllm:\n%s", code, stderr, out)
	}
}

// TestBoxOfAnotherGPUNamesTheFlagAsGiven: a --topo file whose box ran on
// another device than the trace is refused naming --topo as the user
// gave it (the file's path), not the name inside the file ("--topo
// cpu-4r" for a path the user never wrote as that): for a recorded
// trace (an H200 run on the CPU box) and a CPU run on a GPU box file.
func TestBoxOfAnotherGPUNamesTheFlagAsGiven(t *testing.T) {
	cpuBox := filepath.Join(cpuRanksDir, "cpu-4r.json")
	const h200 = "../../exec/cuda/testdata/h200/h200-tiny-mla-moe-tp1-eager.otlp.jsonl.gz"
	dir := t.TempDir()
	h200Box, err := topology.Preset("h200-nvswitch")
	if err != nil {
		t.Fatal(err)
	}
	gpuBox := topofiletest.Write(t, h200Box, "h200.json")
	cpuTrace := filepath.Join(dir, "cpu.otlp.jsonl")
	if code, _, stderr := runCLI(t, "run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--batch", "2", "--context", "256",
		"--steps", "1", "--warmup", "0", "--topo", cpuBox, "--trace", "file:"+cpuTrace); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
	for _, tc := range []struct {
		trace, topo, want string
	}{
		{h200, cpuBox, "usage: --topo " + cpuBox + ": its GPUs are "},
		{cpuTrace, gpuBox, "usage: --topo " + gpuBox + ": its GPUs are NVIDIA H200, and " + cpuTrace + " ran on the cpu backend"},
	} {
		code, _, stderr := runCLI(t, "compare", "--trace", tc.trace, "--topo", tc.topo)
		if code != 2 || !strings.HasPrefix(stderr, "tpscope compare: "+tc.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("compare %s on %s: exit %d, stderr %q; want 2 and one line starting %q", tc.trace, tc.topo, code, stderr, tc.want)
		}
	}
}
