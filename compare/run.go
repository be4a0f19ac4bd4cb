package compare

import (
	"encoding/json"
	"math"
	"sort"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
)

// RunComparison sets a run's result (exec.Result, the executor's own
// measurement of a schedule, tpscope run --compare) beside a prediction
// of the same schedule, per step and per op kind. Trace comparisons
// (Compare) align spans instead; this one reads the result's per-op
// times directly. Errors are relative: (predicted - measured) / measured,
// so -0.2 means the prediction was 20 % too fast.
type RunComparison struct {
	MeasuredStepUs  float64 `json:"measured_step_us"` // median measured step
	PredictedStepUs float64 `json:"predicted_step_us"`
	// StepErrPct = (predicted - measured) / measured x 100.
	StepErrPct float64   `json:"step_err_pct"`
	ByKind     []RunKind `json:"by_kind"` // largest measured first
	// Unpredicted lists op IDs of the local ranks with no predicted time
	// (sorted, each once).
	Unpredicted []string `json:"unpredicted,omitempty"`
	// Caveats say where the prediction prices another run than this one
	// (a CPU box measured with another number of ranks at once).
	Caveats []string `json:"caveats,omitempty"`
}

// RunKind is one op kind's time per step. Measured: the median over the
// measured steps and local ranks of the kind's summed op times in one
// step on one rank (exec.Summary.ByKind), the statistic Compare's kind
// rows give for the run's trace. Predicted: the mean over local ranks of
// the per-rank sums of the ops' predicted spans (sim.OpResult.SpanUs), as
// Compare's kind rows sum them.
type RunKind struct {
	Kind        model.OpKind `json:"kind"`
	MeasuredUs  float64      `json:"measured_us"`
	PredictedUs float64      `json:"predicted_us"`
	// ErrPct = (predicted - measured) / measured x 100; NaN when nothing
	// was measured (written as null in JSON).
	ErrPct float64 `json:"err_pct"`
	// NotRun counts this kind's ops per rank that the backend never timed in
	// any step (collectives of a one-rank shard run): their predicted time
	// is shown here but left out of PredictedStepUs.
	NotRun int `json:"not_run"`
}

// Run compares res (a run of schedule s) with pr, the prediction of the
// same schedule. An op's measured time is its span, from its opening
// timing event to its closing one, so each kind sets the measured spans
// beside the predicted ones (sim.OpResult.SpanUs); the transitions
// between spans lie in the measured step and in the predicted one alike
// (pr.StepUs), not in any kind. Ops the backend never timed are left out
// of the predicted step with everything they were priced at, their gap
// included.
func Run(res *exec.Result, s *model.Schedule, pr *sim.Prediction) RunComparison {
	spanUs, opUs := predictedByOpID(pr)
	c := RunComparison{MeasuredStepUs: res.Summary.StepMedianUs, PredictedStepUs: pr.StepUs, StepErrPct: relErrPct(pr.StepUs, res.Summary.StepMedianUs)}
	pred := map[model.OpKind]float64{}
	notRun := map[model.OpKind]int{}
	missing := map[string]bool{}
	var notRunUs float64
	for k, rank := range res.LocalRanks {
		for i, op := range s.Ranks[rank] {
			us, ok := spanUs[op.ID]
			if !ok {
				missing[op.ID] = true
				continue
			}
			pred[op.Kind] += us
			if neverTimed(res, k, i) {
				notRun[op.Kind]++
				notRunUs += opUs[op.ID]
			}
		}
	}
	nr := float64(max(len(res.LocalRanks), 1))
	// Ops that did not run were not part of the measured step either.
	if notRunUs > 0 {
		c.PredictedStepUs = pr.StepUs - notRunUs/nr
		c.StepErrPct = relErrPct(c.PredictedStepUs, res.Summary.StepMedianUs)
	}
	seen := map[model.OpKind]bool{}
	for _, k := range res.Summary.ByKind {
		seen[k.Kind] = true
		c.ByKind = append(c.ByKind, RunKind{Kind: k.Kind, MeasuredUs: k.Us, PredictedUs: pred[k.Kind] / nr, ErrPct: relErrPct(pred[k.Kind]/nr, k.Us)})
	}
	for k, us := range pred {
		if !seen[k] {
			c.ByKind = append(c.ByKind, RunKind{Kind: k, PredictedUs: us / nr, ErrPct: math.NaN()})
		}
	}
	for i := range c.ByKind {
		c.ByKind[i].NotRun = notRun[c.ByKind[i].Kind] / max(len(res.LocalRanks), 1)
	}
	sort.SliceStable(c.ByKind, func(i, j int) bool {
		if c.ByKind[i].MeasuredUs != c.ByKind[j].MeasuredUs {
			return c.ByKind[i].MeasuredUs > c.ByKind[j].MeasuredUs
		}
		return c.ByKind[i].Kind < c.ByKind[j].Kind
	})
	for id := range missing {
		c.Unpredicted = append(c.Unpredicted, id)
	}
	sort.Strings(c.Unpredicted)
	return c
}

func relErrPct(pred, meas float64) float64 {
	if meas == 0 {
		return math.NaN()
	}
	return (pred - meas) / meas * 100
}

// MarshalJSON writes ErrPct as null when nothing was measured (JSON has no
// NaN).
func (k RunKind) MarshalJSON() ([]byte, error) {
	type plain RunKind
	var errPct *float64
	if !math.IsNaN(k.ErrPct) {
		errPct = &k.ErrPct
	}
	return json.Marshal(struct {
		plain
		ErrPct *float64 `json:"err_pct"`
	}{plain(k), errPct})
}

// neverTimed reports whether op i of local rank k has no measured time in
// any step (the backend skipped it).
func neverTimed(res *exec.Result, k, i int) bool {
	if len(res.OpUs) == 0 {
		return false
	}
	for s := range res.OpUs {
		if k < len(res.OpUs[s]) && i < len(res.OpUs[s][k]) && res.OpUs[s][k][i] > 0 {
			return false
		}
	}
	return true
}

// predictedByOpID maps each op ID of the first rank pr holds (every rank
// of a symmetric schedule) to its predicted span and to its whole
// predicted time, the gap after its span included.
func predictedByOpID(pr *sim.Prediction) (spanUs, opUs map[string]float64) {
	ops := pr.FirstRankOps()
	spanUs, opUs = make(map[string]float64, len(ops)), make(map[string]float64, len(ops))
	for i := range ops {
		spanUs[ops[i].ID], opUs[ops[i].ID] = ops[i].SpanUs(), ops[i].Us
	}
	return spanUs, opUs
}
