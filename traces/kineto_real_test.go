package traces

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// Real profiler traces (testdata/real/*/SOURCE.md, README.md): what the
// reader finds in them is checked against what the JSON says, counted here
// with encoding/json and regular expressions of the engines' own formats,
// not with the reader under test.

const realDir = "testdata/real"

// realCount is what a test counts in a trace file by itself.
type realCount struct {
	kernels int
	// vllm, sglang: the CPU step ranges of each engine's own form, with the
	// phase their names give (in file order); prof: the distinct N of the
	// CPU ProfilerStep#N ranges; frames: the engine's iteration frames.
	vllm, sglang        []string
	prof                map[int]bool
	execModel, fwdBatch int
	graphLaunches       int
	profNs              map[int]int64 // CPU ProfilerStep#N start, ns since the trace's first event
}

var (
	reVLLMRange = regexp.MustCompile(`^execute_(?:\d+_)?context_(\d+)\([^)]*\)_generation_(\d+)\([^)]*\)$`)
	reSGLRange  = regexp.MustCompile(`^step\[([A-Z_]+) bs=\d+`)
	reProfStep  = regexp.MustCompile(`^ProfilerStep#(\d+)$`)
	reExecModel = regexp.MustCompile(`gpu_model_runner\.py\(\d+\): execute_model$`)
	reFwdBatch  = regexp.MustCompile(`tp_worker\.py\(\d+\): forward_batch_generation$`)
	reGraph     = regexp.MustCompile(`^(cuda|cu|hip)GraphLaunch`)
)

func countReal(t *testing.T, path string) realCount {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		TraceEvents []struct {
			Ph, Cat, Name string
			Ts            json.Number
		} `json:"traceEvents"`
	}
	if err := json.NewDecoder(z).Decode(&doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	c := realCount{prof: map[int]bool{}}
	for _, e := range doc.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		switch e.Cat {
		case "kernel":
			c.kernels++
		case "cuda_runtime", "cuda_driver":
			if reGraph.MatchString(e.Name) {
				c.graphLaunches++
			}
		case "user_annotation":
			if m := reVLLMRange.FindStringSubmatch(e.Name); m != nil {
				ctx, _ := strconv.Atoi(m[1])
				gen, _ := strconv.Atoi(m[2])
				c.vllm = append(c.vllm, phaseByHand(ctx > 0, gen > 0))
			}
			if m := reSGLRange.FindStringSubmatch(e.Name); m != nil {
				switch m[1] {
				case "EXTEND":
					c.sglang = append(c.sglang, PhasePrefill)
				case "DECODE":
					c.sglang = append(c.sglang, PhaseDecode)
				default:
					c.sglang = append(c.sglang, "")
				}
			}
			if m := reProfStep.FindStringSubmatch(e.Name); m != nil {
				n, _ := strconv.Atoi(m[1])
				c.prof[n] = true
			}
		case "python_function":
			if reExecModel.MatchString(e.Name) {
				c.execModel++
			}
			if reFwdBatch.MatchString(e.Name) {
				c.fwdBatch++
			}
		}
	}
	return c
}

func phaseByHand(ctx, gen bool) string {
	switch {
	case ctx && gen:
		return PhaseMixed
	case ctx:
		return PhasePrefill
	case gen:
		return PhaseDecode
	}
	return PhaseIdle
}

// realTraces are the real traces kept, with the count that is the
// engine's own step count in each and the rule that must find it.
var realTraces = []struct {
	path   string
	rule   string
	engine string
	// steps picks the independent count the reader's steps must equal.
	steps func(c realCount) int
	// phases the reader's steps must show, in order (nil: the trace's
	// ranges say no phase).
	phases func(c realCount) []string
}{
	{"vllm-b200-eager/eager_trace.json.gz", StepRuleEngineRange, EngineVLLM,
		func(c realCount) int { return len(c.vllm) }, func(c realCount) []string { return c.vllm }},
	{"amd-vllm-piecewise/vllm_gptoss_piecewise_graph_execution_mi300.json.gz", StepRuleEngineRange, EngineVLLM,
		func(c realCount) int { return c.execModel }, func(c realCount) []string { return c.vllm }},
	{"amd-sglang/sglang_Qwen3-8B_prefilldecode_mi300x.json.gz", StepRuleEngineRange, EngineSGLang,
		func(c realCount) int { return len(c.sglang) }, func(c realCount) []string { return c.sglang }},
	{"amd-sglang/sglang_Qwen3-8B_decode_mi300x.json.gz", StepRuleEngineRange, EngineSGLang,
		func(c realCount) int { return len(c.sglang) }, func(c realCount) []string { return c.sglang }},
	{"kimi-stack/kimi-stack-eager-b1.pt.trace.json.gz", StepRuleProfilerStep, "",
		func(c realCount) int { return len(c.prof) }, nil},
	{"kimi-stack/kimi-stack-eager-b32.pt.trace.json.gz", StepRuleProfilerStep, "",
		func(c realCount) int { return len(c.prof) }, nil},
	{"kimi-stack/kimi-stack-graph-b1.pt.trace.json.gz", StepRuleProfilerStep, "",
		func(c realCount) int { return len(c.prof) }, nil},
	{"kimi-stack/kimi-stack-graph-b32.pt.trace.json.gz", StepRuleProfilerStep, "",
		func(c realCount) int { return len(c.prof) }, nil},
}

func readReal(t *testing.T, rel string) *Result {
	t.Helper()
	res, err := ReadAll(context.Background(), filepath.Join(realDir, rel))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Kineto) != 1 {
		t.Fatalf("%d Kineto files read, want 1", len(res.Kineto))
	}
	return res
}

// TestRealTraceSteps: on every real trace kept, the steps the reader finds
// are the engine's own (its step ranges, else its iteration frames, else
// ProfilerStep#N), counted from the JSON here, with the phases the
// ranges' names give.
func TestRealTraceSteps(t *testing.T) {
	for _, tc := range realTraces {
		t.Run(tc.path, func(t *testing.T) {
			c := countReal(t, filepath.Join(realDir, tc.path))
			want := tc.steps(c)
			if want == 0 {
				t.Fatal("the independent count found no step: the table names the wrong count")
			}
			res := readReal(t, tc.path)
			kf := res.Kineto[0]
			if len(kf.Steps) != want {
				t.Errorf("%d steps (rule %s), want %d", len(kf.Steps), kf.StepRule, want)
			}
			if kf.StepRule != tc.rule || kf.Engine != tc.engine {
				t.Errorf("rule %s engine %q, want %s %q", kf.StepRule, kf.Engine, tc.rule, tc.engine)
			}
			var phases []string
			for _, s := range kf.Steps {
				phases = append(phases, s.Phase)
			}
			if tc.phases != nil && !slices.Equal(phases, tc.phases(c)) {
				t.Errorf("phases %v, want %v", phases, tc.phases(c))
			}
			kernels := 0
			for _, s := range kf.Steps {
				kernels += s.Kernels
			}
			if kernels > c.kernels || kernels == 0 {
				t.Errorf("%d kernels in steps, the file has %d", kernels, c.kernels)
			}
			t.Logf("%d steps by %s, phases %v; %d of %d kernels in steps", len(kf.Steps), kf.StepRule, phases, kernels, c.kernels)
		})
	}
}

// TestRealPiecewiseOneStepPerFrame: vLLM's piecewise graphs launch many
// graphs per iteration; the real trace's 25 graph launches (counted here)
// are one step, the one execute_model frame's, with every launch in it.
func TestRealPiecewiseOneStepPerFrame(t *testing.T) {
	rel := "amd-vllm-piecewise/vllm_gptoss_piecewise_graph_execution_mi300.json.gz"
	c := countReal(t, filepath.Join(realDir, rel))
	if c.execModel != 1 || c.graphLaunches < 2 {
		t.Fatalf("the file has %d execute_model frames and %d graph launches; the test wants 1 and many", c.execModel, c.graphLaunches)
	}
	kf := readReal(t, rel).Kineto[0]
	if len(kf.Steps) != c.execModel {
		t.Fatalf("%d steps, want %d (one per execute_model, not per graph launch)", len(kf.Steps), c.execModel)
	}
	if kf.Steps[0].GraphLaunches != c.graphLaunches {
		t.Errorf("the step holds %d graph launches, the file has %d", kf.Steps[0].GraphLaunches, c.graphLaunches)
	}
}

// TestRealGraphStepsAreTheirLaunches: under CUDA graphs a step's CPU range
// ends long before its kernels run; the kernels of a step are its graph
// launch's. The steps' GPU extents (first kernel start to last kernel end)
// must then match the script's CUDA-event step times (steps-h100.jsonl:
// an independent clock) within 3 %, and every step must hold the same
// kernels (one captured graph, replayed).
func TestRealGraphStepsAreTheirLaunches(t *testing.T) {
	ms := kimiEventMs(t)
	for _, b := range []int{1, 32} {
		rel := "kimi-stack/kimi-stack-graph-b" + strconv.Itoa(b) + ".pt.trace.json.gz"
		t.Run(rel, func(t *testing.T) {
			res := readReal(t, rel)
			lo, hi := map[int]int64{}, map[int]int64{}
			n := map[int]int{}
			for i := range res.Spans {
				s := &res.Spans[i]
				end := s.Start + int64(s.Duration)
				if n[s.Step] == 0 || s.Start < lo[s.Step] {
					lo[s.Step] = s.Start
				}
				hi[s.Step] = max(hi[s.Step], end)
				n[s.Step]++
			}
			steps := res.Kineto[0].Steps
			want := ms["graph"][b]
			if len(steps) != len(want) {
				t.Fatalf("%d steps, the script timed %d", len(steps), len(want))
			}
			for i, st := range steps {
				got := float64(hi[st.Step]-lo[st.Step]) / 1e6
				if math.Abs(got-want[i]) > 0.03*want[i] {
					t.Errorf("step %d: GPU extent %.3f ms, CUDA events %.3f ms", st.Step, got, want[i])
				}
				if n[st.Step] != n[steps[0].Step] {
					t.Errorf("step %d holds %d kernels, step %d %d: one graph replays the same kernels", st.Step, n[st.Step], steps[0].Step, n[steps[0].Step])
				}
			}
		})
	}
}

// kimiEventMs reads steps-h100.jsonl: ms per step by mode and batch.
func kimiEventMs(t *testing.T) map[string]map[int][]float64 {
	t.Helper()
	f, err := os.Open(filepath.Join(realDir, "kimi-stack", "steps-h100.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[int][]float64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r struct {
			Mode  string
			Batch int
			Ms    *float64
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Ms == nil {
			continue // the header line
		}
		if out[r.Mode] == nil {
			out[r.Mode] = map[int][]float64{}
		}
		out[r.Mode][r.Batch] = append(out[r.Mode][r.Batch], *r.Ms)
	}
	return out
}

// TestRealFramesWithoutRanges: vLLM writes its execute_context range only
// under its profiler wrapper, and real traces exist with execute_model
// frames and no range (a vLLM V1 H100 trace with piecewise graphs, 11
// frames and 729 graph launches, was read as one step). The real traces
// with their step ranges taken out must split by the frames: one step per
// execute_model (vLLM) or forward_batch_generation (SGLang) frame, counted
// here, whatever the graph launches.
func TestRealFramesWithoutRanges(t *testing.T) {
	for _, tc := range []struct {
		rel    string
		engine string
		frames func(c realCount) int
	}{
		{"amd-vllm-piecewise/vllm_gptoss_piecewise_graph_execution_mi300.json.gz", EngineVLLM, func(c realCount) int { return c.execModel }},
		{"vllm-b200-eager/eager_trace.json.gz", EngineVLLM, func(c realCount) int { return c.execModel }},
		{"amd-sglang/sglang_Qwen3-8B_decode_mi300x.json.gz", EngineSGLang, func(c realCount) int { return c.fwdBatch }},
		{"amd-sglang/sglang_Qwen3-8B_prefilldecode_mi300x.json.gz", EngineSGLang, func(c realCount) int { return c.fwdBatch }},
	} {
		t.Run(tc.rel, func(t *testing.T) {
			src := filepath.Join(realDir, tc.rel)
			want := tc.frames(countReal(t, src))
			if want == 0 {
				t.Fatal("no frame counted")
			}
			path := withoutAnnotations(t, src)
			res, err := ReadAll(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			kf := res.Kineto[0]
			if kf.StepRule != StepRuleEngineFrame || kf.Engine != tc.engine || len(kf.Steps) != want {
				t.Errorf("%d steps by %s (%s), want %d by %s (%s)", len(kf.Steps), kf.StepRule, kf.Engine, want, StepRuleEngineFrame, tc.engine)
			}
		})
	}
}

// withoutAnnotations writes src without its user_annotation and
// gpu_user_annotation events (every step range) to a temporary file.
func withoutAnnotations(t *testing.T, src string) string {
	t.Helper()
	f, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.NewDecoder(z).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	var events []json.RawMessage
	if err := json.Unmarshal(doc["traceEvents"], &events); err != nil {
		t.Fatal(err)
	}
	kept := events[:0]
	for _, e := range events {
		var h struct{ Cat string }
		if json.Unmarshal(e, &h) == nil && (h.Cat == "user_annotation" || h.Cat == "gpu_user_annotation") {
			continue
		}
		kept = append(kept, e)
	}
	b, err := json.Marshal(kept)
	if err != nil {
		t.Fatal(err)
	}
	doc["traceEvents"] = b
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "trace.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
