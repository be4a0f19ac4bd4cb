package compare

import (
	"fmt"
	"math"

	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// HoldOut is the prediction error on the held-out (odd) steps.
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

// holdOuts reports the held-out (odd steps) error of every scenario before
// the fit (its prior prediction) and after (predicted on out).
func holdOuts(scens []*calScenario, out *topology.Topology, c *Calibration) error {
	var befores, afters []*ScenarioReport
	for _, sc := range scens {
		before := buildReport(sc.g, sc.pr, sc.sched, sc.al, &Options{Steps: odd})
		s := sc.g.sc
		s.Topo = out
		pr2, sched2, err := sim.Predict(s)
		if err != nil {
			return fmt.Errorf("calibrate: %s: predict with the calibrated topology: %w", s, err)
		}
		al2 := Align(sc.g.traces, pr2, sc.al.Mode)
		after := buildReport(sc.g, pr2, sched2, al2, &Options{Steps: odd})
		befores, afters = append(befores, before), append(afters, after)
		c.PerScenario = append(c.PerScenario, ScenarioHoldOuts{Scenario: sc.g.sc, Before: holdOut(before), After: holdOut(after)})
	}
	c.Before, c.After = holdOut(befores...), holdOut(afters...)
	return nil
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
