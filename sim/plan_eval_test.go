package sim

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/internal/testfix"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/topology"
)

// mustPreset and mustTopo resolve the scenario's model and box (testfix).
var mustPreset, mustTopo = testfix.Arch, testfix.Box

// seedOptions is what the seed scenario's users run (seed-scenario.md):
// CUDA graphs, NCCL_PROTO=LL, NCCL_P2P_LEVEL=SYS.
var seedOptions = Options{CUDAGraphs: true, NCCL: ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"}}

// TestFastEvalAgreesWithEngine checks the layer extrapolation of Evaluator
// against the full engine on the full schedule (Predictor.Evaluate): the
// reference is the engine itself, so the expected value is independent of
// the extrapolation. Tolerance 0.5 % of the step.
func TestFastEvalAgreesWithEngine(t *testing.T) {
	kimi := mustPreset(t, "kimi-k2.5-nvfp4")
	glm := mustPreset(t, "glm-5-nvfp4")
	ds := mustPreset(t, "deepseek-v3")
	box := mustTopo(t, "rtxpro6000-2s")
	h200 := mustTopo(t, "h200-nvswitch")
	eager := Options{}
	// A host that may run only 16 launches ahead (a calibrated box may set
	// it; the presets leave it unlimited).
	shallow := box.Clone()
	shallow.Host.LaunchQueueDepth = 16
	cases := []struct {
		name string
		arch *model.Arch
		topo *topology.Topology
		opts Options
		plan model.Plan
		w    model.Workload
	}{
		{"kimi/seed", kimi, box, seedOptions, model.Plan{TP: 8}, model.Workload{Batch: 1, Context: 4096, KVDtype: model.BF16}},
		{"kimi/eager-stock", kimi, box, eager, model.Plan{TP: 8}, model.Workload{Batch: 1, Context: 4096, KVDtype: model.BF16}},
		{"kimi/eager-queue16", kimi, shallow, eager, model.Plan{TP: 8}, model.Workload{Batch: 1, Context: 4096, KVDtype: model.BF16}},
		{"kimi/eager-queue16-b128", kimi, shallow, Options{NCCL: ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"}}, model.Plan{TP: 8}, model.Workload{Batch: 128, Context: 16384, KVDtype: model.FP8}},
		{"kimi/eager-b64", kimi, box, eager, model.Plan{TP: 8}, model.Workload{Batch: 64, Context: 2048, KVDtype: model.FP8}},
		{"kimi/graphs-b37-padded", kimi, box, seedOptions, model.Plan{TP: 8}, model.Workload{Batch: 37, Context: 8192, KVDtype: model.FP8}},
		{"kimi/graphs-b600-eager-fallback", kimi, box, seedOptions, model.Plan{TP: 8}, model.Workload{Batch: 600, Context: 256, KVDtype: model.FP8}},
		{"kimi/ep", kimi, box, seedOptions, model.Plan{TP: 8, EP: true}, model.Workload{Batch: 16, Context: 4096, KVDtype: model.BF16}},
		{"kimi/dp4-ep", kimi, box, seedOptions, model.Plan{TP: 2, DP: 4, EP: true}, model.Workload{Batch: 16, Context: 4096, KVDtype: model.BF16}},
		{"kimi/dp8-ep-b520-graphed", kimi, box, seedOptions, model.Plan{TP: 1, DP: 8, EP: true}, model.Workload{Batch: 520, Context: 1024, KVDtype: model.FP8}},
		{"kimi/prefill-graphs-on", kimi, box, seedOptions, model.Plan{TP: 8}, model.Workload{Phase: model.Prefill, Batch: 2, Context: 1024, KVDtype: model.FP8}},
		{"kimi/dcp4", kimi, box, seedOptions, model.Plan{TP: 8, DCP: 4}, model.Workload{Batch: 8, Context: 32768, KVDtype: model.BF16}},
		{"kimi/tp4", kimi, box, seedOptions, model.Plan{TP: 4}, model.Workload{Batch: 4, Context: 4096, KVDtype: model.FP8}},
		{"kimi/oneshot-fusion-overlap", kimi, box, Options{CUDAGraphs: true, CustomAR: CustomAROneShot, ARNormFusion: ToggleOn, Overlap: true}, model.Plan{TP: 8}, model.Workload{Batch: 8, Context: 4096}},
		{"kimi/h200", kimi, h200, Options{CUDAGraphs: true}, model.Plan{TP: 8}, model.Workload{Batch: 32, Context: 4096}},
		{"glm5/seed-opts", glm, box, seedOptions, model.Plan{TP: 8}, model.Workload{Batch: 1, Context: 4096}},
		{"glm5/eager", glm, box, eager, model.Plan{TP: 8}, model.Workload{Batch: 1, Context: 4096}},
		{"dsv3/mtp", ds, box, Options{CUDAGraphs: true, MTPAcceptFrac: 0.8, NCCL: ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"}}, model.Plan{TP: 8}, model.Workload{Batch: 4, Context: 4096, SpecTokens: 1}},
	}
	var ev Evaluator
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := Scenario{Arch: c.arch, Plan: c.plan, Workload: c.w}
			p, err := New(c.topo, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			want, err := p.Evaluate(sc)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ev.Evaluate(withRun(sc, c.opts, c.topo))
			if err != nil {
				t.Fatal(err)
			}
			if rel := math.Abs(got.StepUs-want.StepUs) / want.StepUs; rel > 0.005 {
				t.Errorf("step %.1f us, engine %.1f us (%.2f %% off, tolerance 0.5 %%)", got.StepUs, want.StepUs, 100*rel)
			}
			if math.Abs(got.TokensPerS-want.TokensPerS)/want.TokensPerS > 0.005 {
				t.Errorf("tokens/s %.2f, engine %.2f", got.TokensPerS, want.TokensPerS)
			}
			if got.Graphed != want.Graphed || got.GraphTokens != want.GraphTokens || got.Sequences != want.Sequences {
				t.Errorf("graphed/graph tokens/sequences %v/%d/%d, engine %v/%d/%d", got.Graphed, got.GraphTokens, got.Sequences, want.Graphed, want.GraphTokens, want.Sequences)
			}
			if got.Memory == nil || want.Memory == nil || *got.Memory != *want.Memory {
				t.Errorf("memory fit %+v, engine %+v", got.Memory, want.Memory)
			}
		})
	}
}

// TestGraphStep: whether a step runs as a CUDA graph is decided once
// (model.NewDeployment), per DP group, and every path reports
// the padding and the launch mode that follow from it. vLLM captures
// graphs per engine (one per DP group) for up to 512 tokens (serving-facts.md
// "CUDA graphs"); a prefill step of more tokens runs eagerly.
func TestGraphStep(t *testing.T) {
	kimi := mustPreset(t, "kimi-k2.5-nvfp4")
	box := mustTopo(t, "rtxpro6000-2s")
	cases := []struct {
		name    string
		plan    model.Plan
		w       model.Workload
		graph   int // tokens per DP group of the graph replayed (0: eager)
		graphed bool
	}{
		// 520 sequences over 8 DP groups: 65 per group, their tokens
		// padded to the captured 72; the whole batch exceeds 512 tokens
		// but no engine runs more than 72.
		{"dp8-b520", model.Plan{TP: 1, DP: 8, EP: true}, model.Workload{Batch: 520, Context: 1024, KVDtype: model.FP8}, 72, true},
		// One engine past the largest captured size runs eagerly.
		{"tp8-b520", model.Plan{TP: 8}, model.Workload{Batch: 520, Context: 1024, KVDtype: model.FP8}, 0, false},
		{"prefill", model.Plan{TP: 8}, model.Workload{Phase: model.Prefill, Batch: 2, Context: 1024, KVDtype: model.FP8}, 0, false},
	}
	var ev Evaluator
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if d := model.NewDeployment(c.plan.Normalized(), c.w, seedOptions.GraphCapture(box.DeviceOf(0).MemBytes, c.plan.World())); d.GraphTokens != c.graph || d.Graphed != c.graphed {
				t.Fatalf("NewDeployment: graph of %d tokens graphed %v, want %d %v", d.GraphTokens, d.Graphed, c.graph, c.graphed)
			}
			sc := Scenario{Arch: kimi, Plan: c.plan, Workload: c.w}
			p, err := New(box, seedOptions)
			if err != nil {
				t.Fatal(err)
			}
			pr, err := p.PredictScenario(sc)
			if err != nil {
				t.Fatal(err)
			}
			sum, err := p.Evaluate(sc)
			if err != nil {
				t.Fatal(err)
			}
			fast, err := ev.Evaluate(withRun(sc, seedOptions, box))
			if err != nil {
				t.Fatal(err)
			}
			for _, got := range []Summary{pr.Summary, sum, fast} {
				if got.GraphTokens != c.graph || got.Graphed != c.graphed {
					t.Errorf("graph of %d tokens graphed %v, want %d %v", got.GraphTokens, got.Graphed, c.graph, c.graphed)
				}
			}
			// The engine launched as reported: a graph charges no host
			// launch per op, an eager step charges every op.
			for _, op := range pr.Ops {
				if eager := op.LaunchUs > 0; eager == c.graphed && !op.Cost.Fused {
					t.Fatalf("op %s: launch %.2f us in a step reported graphed=%v", op.ID, op.LaunchUs, c.graphed)
				}
			}
			if c.graphed {
				return
			}
			// An eager step is the same with graphs switched off.
			off := seedOptions
			off.CUDAGraphs = false
			po, err := New(box, off)
			if err != nil {
				t.Fatal(err)
			}
			want, err := po.Evaluate(sc)
			if err != nil {
				t.Fatal(err)
			}
			if sum.StepUs != want.StepUs {
				t.Errorf("step %.3f us with graphs on, %.3f us with graphs off", sum.StepUs, want.StepUs)
			}
		})
	}
}

func TestEvaluatorErrors(t *testing.T) {
	kimi := mustPreset(t, "kimi-k2.5-nvfp4")
	box := mustTopo(t, "rtxpro6000-2s")
	cases := []struct {
		name string
		c    Scenario
	}{
		{"no-topology", Scenario{Arch: kimi, Plan: model.Plan{TP: 8}, Workload: model.Workload{Batch: 1, Context: 1}}},
		{"no-arch", Scenario{Topo: box, Plan: model.Plan{TP: 8}, Workload: model.Workload{Batch: 1, Context: 1}}},
		{"batch-0", Scenario{Topo: box, Arch: kimi, Plan: model.Plan{TP: 8}, Workload: model.Workload{Batch: 0, Context: 1}}},
		{"tp-3", Scenario{Topo: box, Arch: kimi, Plan: model.Plan{TP: 3}, Workload: model.Workload{Batch: 1, Context: 1}}},
		{"tp-16-on-8", Scenario{Topo: box, Arch: kimi, Plan: model.Plan{TP: 16}, Workload: model.Workload{Batch: 1, Context: 1}}},
	}
	var ev Evaluator
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := ev.Evaluate(c.c); err == nil {
				t.Fatal("want an error")
			}
		})
	}
}

// BenchmarkEvaluate measures one fast evaluation with a cold schedule
// cache (every iteration a new context) and a warm one.
func BenchmarkEvaluate(b *testing.B) {
	kimi := mustPreset(b, "kimi-k2.5-nvfp4")
	box := mustTopo(b, "rtxpro6000-2s")
	for _, warm := range []bool{false, true} {
		b.Run(fmt.Sprintf("cache=%v", warm), func(b *testing.B) {
			var ev Evaluator
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				ctx := 4096
				if !warm {
					ctx = 1 + i%100000
				}
				if _, err := ev.Evaluate(Scenario{Arch: kimi, Plan: model.Plan{TP: 8}, Workload: model.Workload{Batch: 8, Context: ctx}, Options: seedOptions, Topo: box}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// withRun is sc with options and box set.
func withRun(sc Scenario, o Options, t *topology.Topology) Scenario {
	sc.Options, sc.Topo = o, t
	return sc
}

// TestOptionsEqualSeesEveryField: the Evaluator's predictor cache tells
// apart options that differ in any one field, nested ones included (the
// NCCL settings field by field).
func TestOptionsEqualSeesEveryField(t *testing.T) {
	var walk func(v reflect.Value, path string)
	fields := 0
	walk = func(v reflect.Value, path string) {
		for i := 0; i < v.NumField(); i++ {
			f := v.Field(i)
			name := path + v.Type().Field(i).Name
			if f.Kind() == reflect.Struct && f.Type() != reflect.TypeOf(engprof.Ref{}) {
				walk(f, name+".")
				continue
			}
			t.Run(name, func(t *testing.T) {
				var a, b Options
				target := reflect.ValueOf(&b).Elem().FieldByName(strings.Split(name, ".")[0])
				if strings.Contains(name, ".") {
					target = target.FieldByName(strings.Split(name, ".")[1])
				}
				setSome(target)
				if optionsEqual(&a, &b) || optionsEqual(&b, &a) {
					t.Errorf("options differing in %s compare equal", name)
				}
				if c := b; !optionsEqual(&b, &c) {
					t.Errorf("options equal but for nothing compare unequal (%s)", name)
				}
			})
			fields++
		}
	}
	walk(reflect.ValueOf(Options{}), "")
	if fields < 15 {
		t.Errorf("%d fields walked; Options has more", fields)
	}
}

// TestFastEvalFusedNormsExact: where the engine fuses each all-reduce with
// the RMSNorm after it, an interior MoE layer's closing all-reduce carries
// the next layer's input norm and the last layer's the head's final norm,
// whose bytes differ; the evaluator extrapolates an interior layer, so its
// step is the engine's to rounding (TensorRT-LLM's default fusion and
// vLLM's on an H200; extrapolating the last layer left it 3.3 us short on
// DeepSeek-V3 at batch 8, 0.06 us a layer).
func TestFastEvalFusedNormsExact(t *testing.T) {
	ds := mustPreset(t, "deepseek-v3")
	h200 := mustTopo(t, "h200-nvswitch")
	var ev Evaluator
	for _, eng := range []string{"trtllm", "vllm"} {
		opts := Options{CUDAGraphs: true, Engine: engprof.Ref{Name: eng}}
		sc := Scenario{Arch: ds, Plan: model.Plan{TP: 8}, Workload: model.Workload{Batch: 8, Context: 4096, KVDtype: model.BF16}}
		p, err := New(h200, opts)
		if err != nil {
			t.Fatal(err)
		}
		want, err := p.Evaluate(sc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ev.Evaluate(withRun(sc, opts, h200))
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(got.StepUs/want.StepUs-1) > 1e-9 {
			t.Errorf("%s: evaluator step %.4f us, engine %.4f us", eng, got.StepUs, want.StepUs)
		}
	}
}
