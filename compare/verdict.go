package compare

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/tpscope/tpscope/advise"
	"github.com/tpscope/tpscope/internal/stats"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
)

// Verdicts: an optimization's measured gain beside its predicted one.
//
// Two runs of the executor, the scenario without and with an optimization,
// each measured on one rank over several steps (the same seed, schedule
// rules and warm-up), are set against sim's predictions of the same two
// scenarios. A run may leave ops out (a one-rank shard skips collectives);
// the prediction "as run" is then the predicted step less the skipped ops'
// predicted time, so prediction and measurement price the same work. The
// prediction for the whole box, collectives included, stands beside it:
// that is what advise ranks by.
//
// Gains are advise.Gain (step time and tokens/s); an optimization pays when
// its tokens/s gain reaches the threshold (advise's, 5 %), and the verdict
// held when the as-run prediction and the measurement agree on that. When
// the measured gain's spread straddles the threshold, the measurements
// support neither answer and the verdict is inconclusive.
// Where they differ, the op names (an op ID without its layer: attn.mla_decode,
// moe.experts_gate_up) whose change of time was mispredicted the most say
// why.

// VerdictRun is one measured configuration.
type VerdictRun struct {
	Label      string          `json:"label"`
	Scenario   sim.Scenario    `json:"-"`
	Prediction *sim.Prediction `json:"-"`
	Schedule   *model.Schedule `json:"-"`
	// Rank is the rank measured; StepUs its measured steps; OpUs, per op
	// of the rank's list, the median over steps of its measured time, 0
	// for an op the run did not execute.
	Rank   int       `json:"rank"`
	StepUs []float64 `json:"step_us"`
	OpUs   []float64 `json:"-"`
	// Trace is where the run's spans went ("" for none).
	Trace string `json:"trace,omitempty"`
}

// RunStats summarizes a run against its prediction.
type RunStats struct {
	Label    string  `json:"label"`
	MedianUs float64 `json:"median_us"`
	P10Us    float64 `json:"p10_us"`
	P90Us    float64 `json:"p90_us"`
	Steps    int     `json:"steps"`
	// PredictedUs is the predicted step of the whole box; AsRunUs the
	// prediction of what ran (skipped ops out); NotRunUs their difference.
	PredictedUs float64 `json:"predicted_us"`
	AsRunUs     float64 `json:"predicted_as_run_us"`
	NotRunUs    float64 `json:"not_run_us"`
	NotRunOps   int     `json:"not_run_ops"`
	// TokensPerStep: tokens one step yields over all sequences (expected,
	// with MTP's acceptance).
	TokensPerStep float64 `json:"tokens_per_step"`
	// Speculative, for a speculative run, says what its step yields and
	// that the yield is the acceptance's, not measured.
	Speculative *SpecRunYield `json:"speculative,omitempty"`
	Trace       string        `json:"trace,omitempty"`
}

// SpecRunMeasured says what a speculative run measures and what it takes
// as an input: the executor's weights are random and accept nothing of
// their own. SpecRunMeasuredHost is the same of a method that drafts on
// the host (ngram, suffix), whose proposer the executor does not run.
const (
	SpecRunMeasured     = "the step is measured (verify pass and draft passes); the tokens it yields are not: the weights are random, so the acceptance is an input"
	SpecRunMeasuredHost = "the step is measured (its verify pass, over placeholder drafts: no n-gram or suffix proposer runs on the host); the tokens it yields are not: the weights are random, so the acceptance is an input"
)

// SpecRunYield is what a speculative run's measured step yields: the step
// (verify and draft passes) is measured; the tokens it yields come from
// the acceptance (Acceptance, with its source), an input. run's
// speculative line and JSON, and verdict's runs, are this one value.
type SpecRunYield struct {
	Spec                 string         `json:"spec"`
	Measured             string         `json:"measured"`
	Acceptance           *sim.SpecYield `json:"acceptance"`
	TokensPerSPerRequest float64        `json:"tokens_per_s_per_request,omitempty"`
	TokensPerS           float64        `json:"tokens_per_s,omitempty"`
}

// NewSpecRunYield is the yield of sc's steps at its acceptance, measured
// at a median of stepMedianUs (0: no step measured); nil without
// speculative decoding.
func NewSpecRunYield(sc sim.Scenario, stepMedianUs float64) *SpecRunYield {
	y := sc.SpecYield()
	if y == nil {
		return nil
	}
	r := &SpecRunYield{Spec: sc.Build.Spec.String(sc.Workload), Measured: SpecRunMeasured, Acceptance: y}
	if !y.Method.OnDevice() {
		r.Measured = SpecRunMeasuredHost
	}
	if stepMedianUs > 0 {
		r.TokensPerSPerRequest = y.TokensPerStep / (stepMedianUs / 1e6)
		r.TokensPerS = r.TokensPerSPerRequest * float64(sc.Workload.Batch)
	}
	return r
}

// OpDelta is how one op name's time changed from one run to the other,
// predicted (as run) and measured, per step on the measured rank.
type OpDelta struct {
	Op          string  `json:"op"`
	PredictedUs float64 `json:"predicted_change_us"`
	MeasuredUs  float64 `json:"measured_change_us"`
	// OffUs = MeasuredUs - PredictedUs.
	OffUs float64 `json:"off_us"`
}

// GapsOp is the OpDelta name of the time between ops (launch gaps, graph
// node overhead, idle).
const GapsOp = "(between ops)"

// VerdictStatus is what a verdict row says about an optimization: measured
// (and then whether the prediction held), or why it could not be.
type VerdictStatus uint8

const (
	// VerdictMeasured: both runs measured and their spread decides whether
	// it pays; VerdictRow.Held says whether the prediction agreed.
	VerdictMeasured VerdictStatus = iota + 1
	// VerdictInconclusive: both runs measured, but the measured gain's
	// spread (MeasuredLow to MeasuredHigh) straddles the threshold, so the
	// measurements support neither "pays" nor "does not pay".
	VerdictInconclusive
	// VerdictNeedsGPUs: it changes only collectives, which a one-rank
	// shard skips.
	VerdictNeedsGPUs
	// VerdictNotOnBackend: it changes nothing where it would run (NCCL
	// settings on ranks whose collectives are not NCCL's, CUDA graphs on
	// a backend that runs every step eagerly).
	VerdictNotOnBackend
	// VerdictNotBuilt: the executor has no kernel for it.
	VerdictNotBuilt
	// VerdictAnotherBox: a move to another box, not run here.
	VerdictAnotherBox
	// VerdictNotApplicable: it cannot run on this scenario.
	VerdictNotApplicable
	// VerdictError: its run failed.
	VerdictError
	// VerdictInterrupted: its run was cut short (Ctrl-C).
	VerdictInterrupted
)

var verdictStatusText = [...]string{
	VerdictMeasured:      "measured",
	VerdictInconclusive:  "inconclusive",
	VerdictNeedsGPUs:     "needs several GPUs",
	VerdictNotOnBackend:  "not on this backend",
	VerdictNotBuilt:      "not in the executor",
	VerdictAnotherBox:    "another box",
	VerdictNotApplicable: "not applicable",
	VerdictError:         "error",
	VerdictInterrupted:   "interrupted",
}

// String is the status in words, as tables and JSON show it.
func (s VerdictStatus) String() string {
	if int(s) < len(verdictStatusText) && verdictStatusText[s] != "" {
		return verdictStatusText[s]
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// MarshalText writes String.
func (s VerdictStatus) MarshalText() ([]byte, error) {
	if int(s) >= len(verdictStatusText) || verdictStatusText[s] == "" {
		return nil, fmt.Errorf("verdict status %d: not a status", uint8(s))
	}
	return []byte(s.String()), nil
}

// UnmarshalText reads what MarshalText wrote.
func (s *VerdictStatus) UnmarshalText(b []byte) error {
	for v, t := range verdictStatusText {
		if t != "" && t == string(b) {
			*s = VerdictStatus(v)
			return nil
		}
	}
	return fmt.Errorf("verdict status %q: want one of measured, inconclusive, needs several GPUs, not on this backend, not in the executor, another box, not applicable, error, interrupted", b)
}

// VerdictRow is one optimization's verdict.
type VerdictRow struct {
	// Status is VerdictMeasured or VerdictInconclusive.
	Status  VerdictStatus `json:"status"`
	Without RunStats      `json:"without"`
	With    RunStats      `json:"with"`
	// PredictedBox is the gain over the whole box (collectives included);
	// Predicted the gain of what ran; Measured the gain of the median
	// steps, Low and High its spread (the slowest decile of the faster
	// configuration against the fastest of the slower, and the reverse).
	PredictedBox advise.Gain `json:"predicted_box"`
	Predicted    advise.Gain `json:"predicted"`
	Measured     advise.Gain `json:"measured"`
	MeasuredLow  advise.Gain `json:"measured_low"`
	MeasuredHigh advise.Gain `json:"measured_high"`
	// ErrPts is Predicted - Measured tokens/s gain, percentage points;
	// ModelErrPct = (predicted step speedup / measured - 1) x 100, as
	// compare's GainRow.
	ErrPts      float64 `json:"err_pts"`
	ModelErrPct float64 `json:"model_err_pct"`
	// Pays: the tokens/s gain reaches ThresholdPct.
	ThresholdPct float64 `json:"threshold_pct"`
	PredPays     bool    `json:"predicted_pays"`
	MeasPays     bool    `json:"measured_pays"`
	BoxPays      bool    `json:"box_predicted_pays"`
	// Held: the as-run prediction and the measured median agree on
	// whether it pays. It decides only where Status is VerdictMeasured: an
	// inconclusive measurement confirms no prediction.
	Held bool `json:"held"`
	// Off: the op names whose change was mispredicted the most, largest
	// first (at most five).
	Off []OpDelta `json:"off"`
}

// DefaultVerdictThresholdPct is where an optimization pays: advise's
// default threshold (AdviseInput.ThresholdFrac, 0.05).
const DefaultVerdictThresholdPct = 5

// Stats summarizes r.
func (r *VerdictRun) Stats() RunStats {
	s := RunStats{Label: r.Label, Steps: len(r.StepUs), Trace: r.Trace}
	if len(r.StepUs) > 0 {
		v := append([]float64(nil), r.StepUs...)
		sort.Float64s(v)
		s.MedianUs, s.P10Us, s.P90Us = stats.Quantile(v, 0.5), stats.Quantile(v, 0.1), stats.Quantile(v, 0.9)
	}
	if pr := r.Prediction; pr != nil {
		s.PredictedUs = pr.StepUs
		s.TokensPerStep = pr.TokensPerS * pr.StepUs * 1e-6
		s.AsRunUs, s.NotRunOps = r.asRun()
		s.NotRunUs = s.PredictedUs - s.AsRunUs
	}
	s.Speculative = NewSpecRunYield(r.Scenario, s.MedianUs)
	return s
}

// predOps maps each op of the measured rank to its prediction (by ID; a
// symmetric prediction holds rank 0's ops for every rank).
func (r *VerdictRun) predOps() []*sim.OpResult {
	ops := r.Schedule.Ranks[r.Rank]
	out := make([]*sim.OpResult, len(ops))
	pr := r.Prediction
	byID := map[string]*sim.OpResult{}
	for i := range pr.Ops {
		o := &pr.Ops[i]
		if o.Rank == r.Rank || (pr.Symmetric && o.Rank == 0) {
			byID[o.ID] = o
		}
	}
	for i := range ops {
		out[i] = byID[ops[i].ID]
	}
	return out
}

// ran reports whether op i of the measured rank ran.
func (r *VerdictRun) ran(i int) bool { return i < len(r.OpUs) && r.OpUs[i] > 0 }

// asRun is the predicted step less the ops that did not run. A norm that
// all-reduce + RMSNorm fusion folded into the all-reduce before it is
// priced inside that all-reduce; when the all-reduce did not run but the
// norm did (its local part, in a one-rank shard), the norm's own traffic
// (its fused cost's memory term) stays in.
func (r *VerdictRun) asRun() (us float64, notRun int) {
	us = r.Prediction.StepUs
	pred := r.predOps()
	for i, p := range pred {
		if p == nil {
			continue
		}
		if !r.ran(i) {
			us -= p.Us
			notRun++
			continue
		}
		if p.Cost.Fused && i > 0 && !r.ran(i-1) {
			us += p.Cost.MemoryUs
		}
	}
	return us, notRun
}

// OpName is an op ID without its layer or MTP step: "L07.attn.o_proj" ->
// "attn.o_proj", "mtp.s0.attn.mla_decode" -> "mtp.attn.mla_decode".
func OpName(id string) string {
	if len(id) > 4 && id[0] == 'L' && id[3] == '.' && id[1] >= '0' && id[1] <= '9' {
		return id[4:]
	}
	if rest, ok := strings.CutPrefix(id, "mtp.s"); ok {
		if i := strings.IndexByte(rest, '.'); i >= 0 {
			return "mtp." + rest[i+1:]
		}
	}
	return id
}

// byName sums, per op name, the predicted device time (without the
// per-kernel launch overhead, which goes to GapsOp with the rest of the
// step) and the measured median time of the ops that ran.
func (r *VerdictRun) byName() (pred, meas map[string]float64) {
	pred, meas = map[string]float64{}, map[string]float64{}
	ops := r.Schedule.Ranks[r.Rank]
	var predOps, measOps float64
	for i, p := range r.predOps() {
		if !r.ran(i) {
			continue
		}
		n := OpName(ops[i].ID)
		m := r.OpUs[i]
		meas[n] += m
		measOps += m
		if p != nil {
			c := p.Cost.Us
			if p.Cost.Fused {
				c = p.Cost.MemoryUs
			}
			pred[n] += c
			predOps += c
		}
	}
	st := r.Stats()
	pred[GapsOp] = st.AsRunUs - predOps
	meas[GapsOp] = st.MedianUs - measOps
	return pred, meas
}

// Verdict sets the run with an optimization against the run without it.
// thresholdPct <= 0 takes DefaultVerdictThresholdPct.
func Verdict(without, with *VerdictRun, thresholdPct float64) VerdictRow {
	if thresholdPct <= 0 {
		thresholdPct = DefaultVerdictThresholdPct
	}
	a, b := without.Stats(), with.Stats()
	row := VerdictRow{Without: a, With: b, ThresholdPct: thresholdPct}
	tok := func(tps, us float64) float64 {
		if us <= 0 {
			return 0
		}
		return tps / (us * 1e-6)
	}
	gain := func(x, y float64) advise.Gain {
		return advise.GainOf(x, y, tok(a.TokensPerStep, x), tok(b.TokensPerStep, y))
	}
	row.PredictedBox = gain(a.PredictedUs, b.PredictedUs)
	row.Predicted = gain(a.AsRunUs, b.AsRunUs)
	row.Measured = gain(a.MedianUs, b.MedianUs)
	row.MeasuredLow = gain(a.P10Us, b.P90Us)
	row.MeasuredHigh = gain(a.P90Us, b.P10Us)
	row.ErrPts = row.Predicted.TokensPerSPct - row.Measured.TokensPerSPct
	if s := row.Measured.StepSpeedup(); s > 0 {
		row.ModelErrPct = (row.Predicted.StepSpeedup()/s - 1) * 100
	}
	row.PredPays = row.Predicted.TokensPerSPct >= thresholdPct
	row.MeasPays = row.Measured.TokensPerSPct >= thresholdPct
	row.BoxPays = row.PredictedBox.TokensPerSPct >= thresholdPct
	row.Status = VerdictMeasured
	lo := min(row.MeasuredLow.TokensPerSPct, row.MeasuredHigh.TokensPerSPct)
	hi := max(row.MeasuredLow.TokensPerSPct, row.MeasuredHigh.TokensPerSPct)
	if lo < thresholdPct && hi >= thresholdPct {
		row.Status = VerdictInconclusive
	}
	row.Held = row.PredPays == row.MeasPays

	pa, ma := without.byName()
	pb, mb := with.byName()
	names := map[string]bool{}
	for _, m := range []map[string]float64{pa, ma, pb, mb} {
		for n := range m {
			names[n] = true
		}
	}
	for n := range names {
		d := OpDelta{Op: n, PredictedUs: pb[n] - pa[n], MeasuredUs: mb[n] - ma[n]}
		d.OffUs = d.MeasuredUs - d.PredictedUs
		row.Off = append(row.Off, d)
	}
	sort.Slice(row.Off, func(i, j int) bool {
		x, y := math.Abs(row.Off[i].OffUs), math.Abs(row.Off[j].OffUs)
		if x != y {
			return x > y
		}
		return row.Off[i].Op < row.Off[j].Op
	})
	row.Off = row.Off[:min(5, len(row.Off))]
	return row
}
