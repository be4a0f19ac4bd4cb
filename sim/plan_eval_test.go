package sim

import (
	"fmt"
	"math"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

func mustPreset(t testing.TB, name string) *model.Arch {
	t.Helper()
	a, err := model.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustTopo(t testing.TB, name string) *topology.Topology {
	t.Helper()
	topo, err := topology.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// seedOptions is what the seed scenario's users run (seed-scenario.md):
// CUDA graphs, NCCL_PROTO=LL, NCCL_P2P_LEVEL=SYS.
var seedOptions = Options{CUDAGraphs: true, NCCLProto: "LL", P2PLevel: "SYS"}

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
		{"kimi/eager-queue16-b128", kimi, shallow, Options{NCCLProto: "LL", P2PLevel: "SYS"}, model.Plan{TP: 8}, model.Workload{Batch: 128, Context: 16384, KVDtype: model.FP8}},
		{"kimi/eager-b64", kimi, box, eager, model.Plan{TP: 8}, model.Workload{Batch: 64, Context: 2048, KVDtype: model.FP8}},
		{"kimi/graphs-b37-padded", kimi, box, seedOptions, model.Plan{TP: 8}, model.Workload{Batch: 37, Context: 8192, KVDtype: model.FP8}},
		{"kimi/graphs-b600-eager-fallback", kimi, box, seedOptions, model.Plan{TP: 8}, model.Workload{Batch: 600, Context: 256, KVDtype: model.FP8}},
		{"kimi/ep", kimi, box, seedOptions, model.Plan{TP: 8, EP: true}, model.Workload{Batch: 16, Context: 4096, KVDtype: model.BF16}},
		{"kimi/dp4-ep", kimi, box, seedOptions, model.Plan{TP: 2, DP: 4, EP: true}, model.Workload{Batch: 16, Context: 4096, KVDtype: model.BF16}},
		{"kimi/dcp4", kimi, box, seedOptions, model.Plan{TP: 8, DCP: 4}, model.Workload{Batch: 8, Context: 32768, KVDtype: model.BF16}},
		{"kimi/tp4", kimi, box, seedOptions, model.Plan{TP: 4}, model.Workload{Batch: 4, Context: 4096, KVDtype: model.FP8}},
		{"kimi/oneshot-fusion-overlap", kimi, box, Options{CUDAGraphs: true, CustomAR: CustomAROneShot, ARNormFusion: true, Overlap: true}, model.Plan{TP: 8}, model.Workload{Batch: 8, Context: 4096}},
		{"kimi/h200", kimi, h200, Options{CUDAGraphs: true}, model.Plan{TP: 8}, model.Workload{Batch: 32, Context: 4096}},
		{"glm5/seed-opts", glm, box, seedOptions, model.Plan{TP: 8}, model.Workload{Batch: 1, Context: 4096}},
		{"glm5/eager", glm, box, eager, model.Plan{TP: 8}, model.Workload{Batch: 1, Context: 4096}},
		{"dsv3/mtp", ds, box, Options{CUDAGraphs: true, NCCLProto: "LL", P2PLevel: "SYS", MTPAcceptRate: 0.8}, model.Plan{TP: 8}, model.Workload{Batch: 4, Context: 4096, SpecTokens: 1}},
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
			got, err := ev.Evaluate(Config{Scenario: sc, Options: c.opts, Topo: c.topo})
			if err != nil {
				t.Fatal(err)
			}
			if rel := math.Abs(got.StepUs-want.StepUs) / want.StepUs; rel > 0.005 {
				t.Errorf("step %.1f us, engine %.1f us (%.2f %% off, tolerance 0.5 %%)", got.StepUs, want.StepUs, 100*rel)
			}
			if math.Abs(got.TokensPerS-want.TokensPerS)/want.TokensPerS > 0.005 {
				t.Errorf("tokens/s %.2f, engine %.2f", got.TokensPerS, want.TokensPerS)
			}
			if got.Graphed != want.Graphed || got.PaddedBatch != want.PaddedBatch || got.Sequences != want.Sequences {
				t.Errorf("graphed/padded/sequences %v/%d/%d, engine %v/%d/%d", got.Graphed, got.PaddedBatch, got.Sequences, want.Graphed, want.PaddedBatch, want.Sequences)
			}
			if got.Memory == nil || want.Memory == nil || *got.Memory != *want.Memory {
				t.Errorf("memory fit %+v, engine %+v", got.Memory, want.Memory)
			}
		})
	}
}

func TestEvaluatorErrors(t *testing.T) {
	kimi := mustPreset(t, "kimi-k2.5-nvfp4")
	box := mustTopo(t, "rtxpro6000-2s")
	cases := []struct {
		name string
		c    Config
	}{
		{"no-topology", Config{Scenario: Scenario{Arch: kimi, Plan: model.Plan{TP: 8}, Workload: model.Workload{Batch: 1, Context: 1}}}},
		{"no-arch", Config{Topo: box, Scenario: Scenario{Plan: model.Plan{TP: 8}, Workload: model.Workload{Batch: 1, Context: 1}}}},
		{"batch-0", Config{Topo: box, Scenario: Scenario{Arch: kimi, Plan: model.Plan{TP: 8}, Workload: model.Workload{Batch: 0, Context: 1}}}},
		{"tp-3", Config{Topo: box, Scenario: Scenario{Arch: kimi, Plan: model.Plan{TP: 3}, Workload: model.Workload{Batch: 1, Context: 1}}}},
		{"tp-16-on-8", Config{Topo: box, Scenario: Scenario{Arch: kimi, Plan: model.Plan{TP: 16}, Workload: model.Workload{Batch: 1, Context: 1}}}},
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
				if _, err := ev.Evaluate(Config{Scenario: Scenario{Arch: kimi, Plan: model.Plan{TP: 8}, Workload: model.Workload{Batch: 8, Context: ctx}}, Options: seedOptions, Topo: box}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
