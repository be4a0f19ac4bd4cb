package compare

import (
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// TestGainVerdicts: gains and verdicts computed by hand from step times
// (one token per step in every scenario, so the tokens/s gain is the step
// gain's 1/(1 - g) - 1). Baseline: predicted 1000 us, measured 1100 us.
//
//	A: 900 / 990   -> step gain 10 % and 10 %; tokens/s +11.1 % both: worth it
//	B: 990 / 1089  -> 1 % and 1 %; +1.0 % both: not worth it
//	C: 800 / 1100  -> 20 % and 0 %; +25 % and 0 %: speedups 1.25 vs 1.0, model wrong by +25 %
func TestGainVerdicts(t *testing.T) {
	a, err := model.Preset("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	box, err := topology.Resolve("rtxpro6000-2s", 0)
	if err != nil {
		t.Fatal(err)
	}
	sr := func(o sim.Options, pred, meas float64) ScenarioReport {
		sc := sim.Scenario{Arch: a, Plan: model.Plan{TP: 8}, Workload: model.Workload{Batch: 1, Context: 10}, Options: o, Topo: box}
		return ScenarioReport{Scenario: sc, Step: Stat{PredictedUs: pred, MedianUs: meas}, Prediction: &sim.Prediction{Summary: sim.Summary{TokensPerStep: 1}}}
	}
	srs := []ScenarioReport{sr(sim.Options{CUDAGraphs: true}, 900, 990), sr(sim.Options{}, 1000, 1100), sr(sim.Options{Overlap: true}, 990, 1089),
		sr(sim.Options{ARNormFusion: sim.ToggleOn, CUDAGraphs: true}, 800, 1100)}
	got := gains(srs, &Options{GainTolerancePts: DefaultGainTolerancePts, WorthItPct: DefaultWorthItPct})
	want := []struct {
		options                   string
		pred, meas, predTok, merr float64
		verdict                   string
	}{
		{"cuda-graphs", 10, 10, 100.0/90 - 1, 0, "worth it"},
		{"overlap", 1, 1, 100.0/99 - 1, 0, "not worth it"},
		{"ar-norm-fusion cuda-graphs", 20, 0, 0.25, 25, "model wrong here by +25.0 %"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		t.Run(w.options, func(t *testing.T) {
			g := got[i]
			if g.Options != w.options || g.Baseline != "none" {
				t.Fatalf("row %+v", g)
			}
			near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
			if !near(g.Predicted.StepPct, w.pred) || !near(g.Measured.StepPct, w.meas) || !near(g.Predicted.TokensPerSPct, 100*w.predTok) ||
				!near(g.ModelErrPct, w.merr) || g.Verdict != w.verdict {
				t.Errorf("got %+v, want step gains %v/%v, predicted tokens/s gain %v %%, model error %v, %q", g, w.pred, w.meas, 100*w.predTok, w.merr, w.verdict)
			}
		})
	}
}
