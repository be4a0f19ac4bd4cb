package compare

import (
	"math"

	"github.com/tpscope/tpscope/sim"
)

// HoldOut is the prediction error on the held-out steps (the odd steps
// of the fitted traces, or every step of the held-out traces).
type HoldOut struct {
	Steps int `json:"steps"`
	Units int `json:"units"`
	// OpRMSErrPct: RMS over units of (predicted - median measured) / median;
	// OpMeanAbsErrPct: the mean of |that|; StepErrPct: the step's error.
	OpRMSErrPct     float64 `json:"op_rms_err_pct"`
	OpMeanAbsErrPct float64 `json:"op_mean_abs_err_pct"`
	StepErrPct      float64 `json:"step_err_pct"`
}

// ScenarioHoldOuts is one scenario's held-out error before and after.
type ScenarioHoldOuts struct {
	Scenario sim.Scenario `json:"scenario"`
	Before   HoldOut      `json:"before"`
	After    HoldOut      `json:"after"`
}

// holdOut is the held-out error over one or several scenarios: op
// errors of all their units together, the mean of their signed step errors.
func holdOut(srs ...*ScenarioReport) HoldOut {
	var h HoldOut
	var sq, ab, step float64
	for _, sr := range srs {
		h.Steps += sr.Steps
		step += sr.Step.ErrPct
		for _, o := range sr.Ops {
			if o.MedianUs <= 0 {
				continue
			}
			sq += o.ErrPct * o.ErrPct
			ab += math.Abs(o.ErrPct)
			h.Units++
		}
	}
	if h.Units > 0 {
		h.OpRMSErrPct = math.Sqrt(sq / float64(h.Units))
		h.OpMeanAbsErrPct = ab / float64(h.Units)
	}
	if len(srs) > 0 {
		h.StepErrPct = step / float64(len(srs))
	}
	return h
}
