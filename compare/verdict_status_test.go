package compare

import (
	"encoding/json"
	"testing"

	"github.com/tpscope/tpscope/model"
)

// TestVerdictInconclusive: a verdict is inconclusive exactly when the
// measured tokens/s gain's spread straddles the threshold. Both runs price
// the same scenario, so the tokens/s gain of step times x (without) and y
// (with) is x/y - 1; quantiles interpolate linearly (R type 7). The steps
// and the spreads they give, by hand:
//
//   - noisy: without 100 x 5; with 90, 95, 100, 105, 110 (p10 92, median
//     100, p90 108): median 0 %, spread 100/108 - 1 = -7.4 % to 100/92 - 1
//     = +8.7 %, straddling 5 %.
//   - fp8-kv as once measured on CPU ranks: without 100 x 5; with 80.6,
//     80.6, 100.9, 131.6, 131.6 (p10 80.6, median 100.9, p90 131.6): median
//     -0.9 %, spread 100/131.6 - 1 = -24.0 % to 100/80.6 - 1 = +24.1 %.
//   - pays: without 100 x 5; with 80 x 5: +25 % at every quantile.
//   - tight, below: without 100 x 5; with 98, 99, 100, 101, 102 (p10
//     98.4, p90 101.6): -1.6 % to +1.6 %, all below 5 %.
//   - straddles a 20 % threshold: without 100 x 5; with 75, 80, 85, 90, 95
//     (p10 77, median 85, p90 93): +7.5 % to +29.9 %; at 5 % the same runs
//     pay at every quantile.
func TestVerdictInconclusive(t *testing.T) {
	sc := tinyScenario(t)
	one := func(*model.Op) float64 { return 1 }
	flat := []float64{100, 100, 100, 100, 100}
	cases := []struct {
		name         string
		with         []float64
		thresholdPct float64
		want         VerdictStatus
		measPays     bool
	}{
		{"noisy around zero", []float64{110, 90, 100, 95, 105}, 5, VerdictInconclusive, false},
		{"fp8-kv spread", []float64{131.6, 80.6, 100.9, 80.6, 131.6}, 5, VerdictInconclusive, false},
		{"pays at every quantile", []float64{80, 80, 80, 80, 80}, 5, VerdictMeasured, true},
		{"below at every quantile", []float64{102, 98, 100, 99, 101}, 5, VerdictMeasured, false},
		{"straddles 20 %", []float64{95, 75, 85, 80, 90}, 20, VerdictInconclusive, false},
		{"same runs at 5 %", []float64{95, 75, 85, 80, 90}, 5, VerdictMeasured, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := verdictRun(t, "without", sc, flat, one)
			b := verdictRun(t, "with", sc, tc.with, one)
			v := Verdict(a, b, tc.thresholdPct)
			if v.Status != tc.want || v.MeasPays != tc.measPays {
				t.Errorf("status %v, measured pays %v (median %+.1f %%, spread %+.1f..%+.1f %%, threshold %.0f %%); want %v, %v",
					v.Status, v.MeasPays, v.Measured.TokensPerSPct, v.MeasuredLow.TokensPerSPct, v.MeasuredHigh.TokensPerSPct, tc.thresholdPct, tc.want, tc.measPays)
			}
		})
	}
}

// Statuses travel as their words, and every word reads back.
func TestVerdictStatusText(t *testing.T) {
	for s := VerdictMeasured; s <= VerdictInterrupted; s++ {
		js, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("%d: %v", s, err)
		}
		var back VerdictStatus
		if err := json.Unmarshal(js, &back); err != nil || back != s {
			t.Errorf("%s: read back %v (%v)", js, back, err)
		}
	}
	for s, want := range map[VerdictStatus]string{VerdictInconclusive: `"inconclusive"`, VerdictNotOnBackend: `"not on this backend"`, VerdictNeedsGPUs: `"needs several GPUs"`} {
		if js, _ := json.Marshal(s); string(js) != want {
			t.Errorf("%d marshals to %s, want %s", s, js, want)
		}
	}
	if _, err := json.Marshal(VerdictStatus(0)); err == nil {
		t.Error("the zero status marshals")
	}
	var s VerdictStatus
	if err := json.Unmarshal([]byte(`"held-ish"`), &s); err == nil {
		t.Error("an unknown word reads")
	}
}
