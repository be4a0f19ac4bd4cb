package traces

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
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

// decodeGzipJSON decodes the gzipped JSON file path into v.
func decodeGzipJSON(t *testing.T, path string, v any) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := json.NewDecoder(z).Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func countReal(t *testing.T, path string) realCount {
	t.Helper()
	var doc struct {
		TraceEvents []struct {
			Ph, Cat, Name string
			Ts            json.Number
		} `json:"traceEvents"`
	}
	decodeGzipJSON(t, path, &doc)
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
	var doc map[string]json.RawMessage
	decodeGzipJSON(t, src, &doc)
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

// TestRealKimiStackPlacement: the naive PyTorch MLA + MoE traces
// (testdata/real/kimi-stack: no engine kernel, no collective, attention
// as bmm + softmax + bmm) place at least 90 % of every step's kernel time
// on op IDs, by position; and each kernel's op agrees with the ATen
// operator that launched it, read from the eager traces' cpu_op events
// (linked by External id) — an independent account of what each kernel
// runs, written by the profiler, not by the reader. The dense layers are
// the first first_k_dense_replace of config.json's num_hidden_layers.
func TestRealKimiStackPlacement(t *testing.T) {
	var cfg struct {
		TextConfig struct {
			Layers int `json:"num_hidden_layers"`
			Dense  int `json:"first_k_dense_replace"`
		} `json:"text_config"`
	}
	b, err := os.ReadFile(filepath.Join(realDir, "kimi-stack", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	// What each ATen operator of the script's step may implement
	// (scripts/gpu-kineto-torch.py; generic ones — mul, add, copy_, cat,
	// fill_, index, gather — run inside several ops and are not checked).
	norms := []model.Role{model.RoleInputNorm, model.RoleQANorm, model.RoleKVANorm, model.RoleMoEPostAttnNorm, model.RoleMLPPostAttnNorm, model.RoleFinalNorm}
	routing := []model.Role{model.RoleMoETopK}
	allowed := map[string][]model.Role{
		"aten::_fused_rms_norm": norms,
		"aten::_grouped_mm":     {model.RoleExpertsGateUp, model.RoleExpertsDown},
		"aten::_softmax":        {model.RoleMLADecode},
		"aten::topk":            routing, "aten::sort": routing, "aten::sigmoid": routing, "aten::cumsum": routing,
		"aten::scatter_add_": routing, "aten::floor_divide": routing, "aten::arange": routing, "aten::div": routing, "aten::sum": routing,
		"aten::index_copy_": {model.RoleKVCacheWrite},
		"aten::index_add_":  {model.RoleExpertsDown},
		"aten::bmm":         {model.RoleWUK, model.RoleWUV, model.RoleMLADecode},
		"aten::mm": {model.RoleFusedQKVAProj, model.RoleQBProj, model.RoleOProj, model.RoleMoEGate, model.RoleSharedGateUp, model.RoleSharedDown,
			model.RoleMLPGateUp, model.RoleMLPDown, model.RoleLMHead},
		"aten::silu":   {model.RoleExpertsAct, model.RoleSharedAct, model.RoleMLPAct},
		"aten::argmax": nil, // the sampler: no op of the schedule
	}
	for _, mode := range []string{"eager", "graph"} {
		for _, batch := range []int{1, 32} {
			rel := fmt.Sprintf("kimi-stack/kimi-stack-%s-b%d.pt.trace.json.gz", mode, batch)
			t.Run(rel, func(t *testing.T) {
				res := readReal(t, rel)
				for _, s := range res.Kineto[0].Steps {
					frac := float64(s.PlacedNs) / float64(s.KernelNs)
					if frac < 0.9 || s.Layers != cfg.TextConfig.Layers {
						t.Errorf("step %d: %.1f %% of kernel time placed over %d layers, want >= 90 %% over %d (%s)", s.Step, 100*frac, s.Layers, cfg.TextConfig.Layers, s.Note)
					}
				}
				for i := range res.Spans {
					sp := &res.Spans[i]
					if sp.Layer < 0 || sp.OpID == "" {
						continue
					}
					block := strings.SplitN(strings.TrimPrefix(sp.OpID, fmt.Sprintf("L%02d.", sp.Layer)), ".", 2)[0]
					dense := sp.Layer < cfg.TextConfig.Dense
					if block == "mlp" && !dense || block == "moe" && dense {
						t.Errorf("%s: layer %d is %s in config.json", sp.OpID, sp.Layer, map[bool]string{true: "dense", false: "MoE"}[dense])
					}
				}
				if mode != "eager" {
					return
				}
				aten := atenOps(t, filepath.Join(realDir, rel))
				checked, bad := 0, 0
				for i := range res.Spans {
					sp := &res.Spans[i]
					op, ok := aten[sp.Start]
					want, known := allowed[op]
					if !ok || !known {
						continue
					}
					checked++
					got := model.Role("")
					if sp.OpID != "" {
						got = model.Role(sp.OpID)
						if sp.Layer >= 0 {
							got = model.Role(strings.TrimPrefix(sp.OpID, fmt.Sprintf("L%02d.", sp.Layer)))
						}
					}
					if !(got == "" && want == nil) && !slices.Contains(want, got) {
						if bad < 10 {
							t.Errorf("step %d: a kernel of %s placed on %q, want one of %v", sp.Step, op, sp.OpID, want)
						}
						bad++
					}
				}
				if checked < 100 {
					t.Errorf("only %d kernels checked against their ATen operator", checked)
				}
				t.Logf("%d kernels checked against their ATen operator, %d wrong", checked, bad)
			})
		}
	}
}

// atenOps maps each kernel's start (ns, as the reader puts it on the span)
// to the name of the cpu_op that launched it (same External id).
func atenOps(t *testing.T, path string) map[int64]string {
	t.Helper()
	var doc struct {
		Base        int64 `json:"baseTimeNanoseconds"`
		TraceEvents []struct {
			Ph, Cat, Name string
			Ts            json.Number
			Args          struct {
				Ext *int64 `json:"External id"`
			}
		} `json:"traceEvents"`
	}
	decodeGzipJSON(t, path, &doc)
	ops := map[int64]string{}
	for _, e := range doc.TraceEvents {
		if e.Cat == "cpu_op" && e.Args.Ext != nil {
			if _, ok := ops[*e.Args.Ext]; !ok {
				ops[*e.Args.Ext] = e.Name
			}
		}
	}
	out := map[int64]string{}
	for _, e := range doc.TraceEvents {
		if e.Cat != "kernel" || e.Args.Ext == nil {
			continue
		}
		// ts in us with up to 3 decimals: ns exactly.
		us, frac, _ := strings.Cut(e.Ts.String(), ".")
		frac = (frac + "000")[:3]
		u, err1 := strconv.ParseInt(us, 10, 64)
		n, err2 := strconv.ParseInt(frac, 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("ts %s", e.Ts)
		}
		if name, ok := ops[*e.Args.Ext]; ok {
			out[doc.Base+u*1000+n] = name
		}
	}
	return out
}

// TestRealKimiStackGraphAsEager: the graph traces replay the very step the
// eager ones run op by op (the script captures Model.step), so one step of
// each, at one batch, must hold the same kernels placed on the same ops,
// in the same order — the eager placement being checked against ATen
// above, the graph one follows.
func TestRealKimiStackGraphAsEager(t *testing.T) {
	for _, b := range []int{1, 32} {
		seq := func(mode string) []string {
			res := readReal(t, fmt.Sprintf("kimi-stack/kimi-stack-%s-b%d.pt.trace.json.gz", mode, b))
			first := res.Kineto[0].Steps[0].Step
			var out []string
			for i := range res.Spans {
				if s := &res.Spans[i]; s.Step == first {
					out = append(out, s.OpID)
				}
			}
			return out
		}
		eager, graph := seq("eager"), seq("graph")
		if !slices.Equal(eager, graph) {
			n := 0
			for n < min(len(eager), len(graph)) && eager[n] == graph[n] {
				n++
			}
			t.Errorf("batch %d: %d eager and %d graph kernels, first difference at %d", b, len(eager), len(graph), n)
		}
	}
}
