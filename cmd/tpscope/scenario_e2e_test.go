package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/exectest"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/traces"
	"github.com/tpscope/tpscope/traces/schema"
)

// testGraphsBackend is a backend that replays CUDA graphs on a virtual
// device clock (1 us per op): it runs any schedule, however large, in
// milliseconds, so the tests below can drive `run` on real models.
const testGraphsBackend = "test-graphs"

func init() {
	exec.RegisterBackend(testGraphsBackend, func(exec.BackendConfig) (exec.Backend, error) {
		return exectest.New(exectest.WithName(testGraphsBackend), exectest.WithGraphs(),
			exectest.WithDelay(func(int, *model.Op) time.Duration { return time.Microsecond })), nil
	})
}

// runJSON runs `tpscope run` with a file trace and returns the run's JSON
// report and the trace path.
func runJSON(t *testing.T, args ...string) (map[string]any, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run.otlp.jsonl")
	code, out, errs := runCLI(t, append([]string{"run", "--backend", testGraphsBackend, "--steps", "1", "--warmup", "0",
		"--compare", "--output", "json", "--trace", "file:" + path}, args...)...)
	if code != 0 {
		t.Fatalf("run %v: exit %d: %s", args, code, errs)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("run JSON: %v\n%s", err, out)
	}
	return rep, path
}

// TestRunSpansPredictionEqualsCompare: the prediction `run` writes on each
// op span (tpscope.predicted_us) and the one `compare` makes from the
// trace's recorded scenario are the same, op by op and for the step, for
// the scenarios where they used to part: a graphed step whose tokens are
// padded (batch 9 on the graph of 16 under vLLM's capture sizes), GLM-5
// run as dense MLA, DP attention + EP, and MTP (batch 3 of 2 tokens on
// the graph of 8). The step span records the batch as asked, and the
// scenario the tokens per DP group the graph ran.
func TestRunSpansPredictionEqualsCompare(t *testing.T) {
	seed := []string{"--nccl-proto", "LL", "--p2p-level", "SYS", "--kv-dtype", "bf16", "--topo", "rtxpro6000-2s"}
	cases := []struct {
		name     string
		args     []string
		workload string // what the step span must say ran
		tokens   string // the recorded scenario's run_tokens
	}{
		{"graphs padded batch", []string{"--model", "kimi-k2.5-nvfp4", "--batch", "9"}, "decode b9 ctx4096 kv=bf16", `"run_tokens":16`},
		{"dense dsa", []string{"--model", "glm-5-nvfp4", "--dense-dsa", "--batch", "1"}, "decode b1 ctx4096 kv=bf16", `"run_tokens":1`},
		{"dp ep", []string{"--model", "kimi-k2.5-nvfp4", "--tp", "1", "--dp", "8", "--ep", "--batch", "64"}, "decode b64 ctx4096 kv=bf16", `"run_tokens":8`},
		{"mtp", []string{"--model", "deepseek-v3", "--mtp", "1", "--batch", "3"}, "decode b3 ctx4096 spec1 kv=bf16", `"run_tokens":8`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, path := runJSON(t, append(seed, tc.args...)...)
			cmp, _ := rep["comparison"].(map[string]any)
			runStep, _ := cmp["predicted_step_us"].(float64)
			res, err := traces.ReadAll(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Scenarios) != 1 || res.Scenarios[0].Workload != tc.workload || !strings.Contains(res.Scenarios[0].JSON, tc.tokens) {
				t.Fatalf("recorded scenarios %+v, want one that ran %q with its JSON (%s)", res.Scenarios, tc.workload, tc.tokens)
			}
			// The prediction on the spans, per (rank, op ID).
			onSpan := map[[2]string]float64{}
			for i := range res.Spans {
				s := &res.Spans[i]
				if v, ok := s.Attr(string(schema.AttrPredictedUs)); ok && s.OpID != "" {
					f, _ := v.Number()
					onSpan[[2]string{s.OpID, strconv.Itoa(s.Rank)}] = f
				}
			}
			cr, err := compare.Compare([]*traces.Result{res}, compare.Options{})
			if err != nil {
				t.Fatal(err)
			}
			sr := cr.Scenarios[0]
			if rel := math.Abs(sr.Step.PredictedUs-runStep) / runStep; !(rel < 1e-9) {
				t.Errorf("step: compare %.3f us, run %.3f us", sr.Step.PredictedUs, runStep)
			}
			checked := 0
			for _, u := range sr.Alignment.Units {
				rank := u.Rank
				if rank < 0 {
					rank = 0
				}
				want, ok := onSpan[[2]string{u.Key, strconv.Itoa(rank)}]
				if !ok {
					t.Fatalf("unit %s (rank %d) has no span prediction", u.Key, rank)
				}
				if math.Abs(u.PredictedUs-want) > 1e-9*math.Max(1, want) {
					t.Fatalf("%s: compare predicts %.6f us, the span says %.6f", u.Key, u.PredictedUs, want)
				}
				checked++
			}
			if checked < 1000 {
				t.Errorf("checked %d ops, want the whole step (over 1000)", checked)
			}
		})
	}
}

// TestOneScenarioEveryVerb: one scenario, written once as flags, gives the
// same predicted step in predict, advise (its baseline), plan (its row),
// run --compare and compare on run's trace, to 0.1 %. The scenario is the
// step as tpscope's executor runs it (--executor: the schedule's kernels,
// none of an engine's auxiliary ones), which is what run predicts; the
// fake backend records no timing events. The same holds with the sample
// perf DB as the cost source, which the trace then names.
func TestOneScenarioEveryVerb(t *testing.T) {
	base := []string{"--model", "kimi-k2.5-nvfp4", "--topo", "rtxpro6000-2s", "--batch", "8", "--context", "4096",
		"--nccl-proto", "LL", "--p2p-level", "SYS", "--executor"}
	cases := []struct {
		name  string
		extra []string
	}{{"priors", nil}}
	if db := samplePerfDB(t, false); db != "" {
		cases = append(cases, struct {
			name  string
			extra []string
		}{"perf-db", []string{"--perf-db", db}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			flags := append(slices.Clone(base), tc.extra...)
			jsonOf := func(args ...string) map[string]any {
				t.Helper()
				code, out, errs := runCLI(t, append(args, "--output", "json")...)
				if code != 0 {
					t.Fatalf("%v: exit %d: %s", args, code, errs)
				}
				var m map[string]any
				if err := json.Unmarshal([]byte(out), &m); err != nil {
					t.Fatalf("%v: %v", args, err)
				}
				return m
			}
			steps := map[string]float64{}
			steps["predict"] = jsonOf(append([]string{"predict"}, flags...)...)["step_us"].(float64)
			adv := jsonOf(append([]string{"advise", "--no-sweep", "--entries", "cuda-graphs", "--transfer", ""}, flags...)...)
			steps["advise"] = adv["baseline"].(map[string]any)["step_us"].(float64)
			// plan's lists: the one point of the flags above (Kimi's
			// checkpoint KV dtype is fp8).
			pl := jsonOf(append([]string{"plan", "--model", "kimi-k2.5-nvfp4", "--topo", "rtxpro6000-2s", "--gpus", "8", "--plan", "tp8", "--batch", "8",
				"--context", "4096", "--kv-dtype", "fp8", "--nccl-proto", "LL", "--p2p-level", "SYS", "--executor"}, tc.extra...)...)
			for _, p := range pl["points"].([]any) {
				pt := p.(map[string]any)
				if pt["batch"].(float64) == 8 && pt["plan"] == "tp8" {
					steps["plan"] = pt["step_us"].(float64)
				}
			}
			rep, path := runJSON(t, flags...)
			steps["run --compare"] = rep["comparison"].(map[string]any)["predicted_step_us"].(float64)
			cr := jsonOf(append([]string{"compare", "--trace", path}, tc.extra...)...)
			steps["compare"] = cr["scenarios"].([]any)[0].(map[string]any)["step"].(map[string]any)["predicted_us"].(float64)
			ref := steps["predict"]
			if len(steps) != 5 || !(ref > 0) {
				t.Fatalf("steps %v", steps)
			}
			for verb, us := range steps {
				if math.Abs(us-ref)/ref > 0.001 {
					t.Errorf("%s: %.1f us, predict %.1f us (%+.3f %%)", verb, us, ref, 100*(us-ref)/ref)
				}
			}
			t.Logf("predicted step per verb: %v", steps)
			if len(tc.extra) > 0 {
				// The trace names the tables it was priced with; compare
				// without them would give another number, so it refuses.
				code, _, errs := runCLI(t, "compare", "--trace", path)
				if code != 1 || !strings.Contains(errs, "the trace was priced with perfdb rtx_pro_6000_server/vllm/") {
					t.Errorf("compare without --perf-db: exit %d, %q", code, errs)
				}
			}
		})
	}
}

// TestCompareRefusesWhatItCannotPrice: a CPU run priced on a GPU box is
// said in one line, not priced; a trace whose topology file is gone is
// priced on the box it recorded by value (the file's name and content).
func TestCompareRefusesWhatItCannotPrice(t *testing.T) {
	dir := t.TempDir()
	// A CPU run without --topo records the default GPU box.
	cpuTrace := filepath.Join(dir, "cpu.otlp.jsonl")
	if code, _, errs := runCLI(t, "run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--batch", "2", "--context", "64",
		"--steps", "2", "--warmup", "0", "--trace", "file:"+cpuTrace); code != 0 {
		t.Fatalf("run: %s", errs)
	}
	code, _, errs := runCLI(t, "compare", "--trace", cpuTrace)
	if code != 1 || !strings.Contains(errs, "a CPU run (tpscope.backend cpu) compared against the GPU box rtxpro6000-2s") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("CPU run on a GPU box: exit %d, stderr %q", code, errs)
	}

	// A run on a topology file that is deleted before the comparison.
	box := filepath.Join(dir, "box.json")
	if code, _, errs := runCLI(t, "topo", "show", "rtxpro6000-2s", "-o", box); code != 0 {
		t.Skipf("topo show cannot save a box here: %s", errs)
	}
	_, path := runJSON(t, "--model", "tiny-mla-moe", "--tp", "2", "--batch", "2", "--topo", box)
	if err := os.Remove(box); err != nil {
		t.Fatal(err)
	}
	// It is named as predict names that file's box (by its name, the
	// preset's box it is), not by the path of a file that is gone.
	code, out, errs := runCLI(t, "compare", "--trace", path)
	if code != 0 || !strings.Contains(out, "on rtxpro6000-2s,") || strings.Contains(out, box) {
		t.Errorf("missing topology file: exit %d, stderr %q, stdout %q; want it compared on the recorded box, rtxpro6000-2s", code, errs, out)
	}
}
