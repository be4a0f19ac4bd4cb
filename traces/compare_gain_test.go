package traces

import "testing"

// TestGainVerdicts: gains and verdicts computed by hand from step times.
// Baseline: predicted 1000 us, measured 1100 us.
//
//	A: 900 / 990   -> predicted gain 10 %, measured 10 %: worth it
//	B: 990 / 1089  -> 1 % and 1 %: not worth it
//	C: 800 / 1100  -> 20 % and 0 %: speedups 1.25 vs 1.0, model wrong by +25 %
func TestGainVerdicts(t *testing.T) {
	spec := func(opts string) ScenarioSpec {
		return ScenarioSpec{Model: "m", Topology: "t", Plan: "tp8", Workload: "decode b1 ctx10", Options: opts}
	}
	sr := func(opts string, pred, meas float64) ScenarioReport {
		return ScenarioReport{Spec: spec(opts), Step: Stat{PredictedUs: pred, MedianUs: meas}}
	}
	srs := []ScenarioReport{sr("cuda-graphs", 900, 990), sr("", 1000, 1100), sr("overlap", 990, 1089), sr("ar-norm-fusion,cuda-graphs", 800, 1100)}
	got := gains(srs, &CompareOptions{GainTolerancePts: DefaultGainTolerancePts, WorthItPct: DefaultWorthItPct})
	want := []struct {
		options          string
		pred, meas, merr float64
		verdict          string
	}{
		{"cuda-graphs", 10, 10, 0, "worth it"},
		{"overlap", 1, 1, 0, "not worth it"},
		{"ar-norm-fusion,cuda-graphs", 20, 0, 25, "model wrong here by +25.0 %"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		t.Run(w.options, func(t *testing.T) {
			g := got[i]
			if g.Options != w.options || g.Baseline != "" {
				t.Fatalf("row %+v", g)
			}
			near := func(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
			if !near(g.PredictedGainPct, w.pred) || !near(g.MeasuredGainPct, w.meas) || !near(g.ModelErrPct, w.merr) || g.Verdict != w.verdict {
				t.Errorf("got %+v, want gains %v/%v, model error %v, %q", g, w.pred, w.meas, w.merr, w.verdict)
			}
		})
	}
}
