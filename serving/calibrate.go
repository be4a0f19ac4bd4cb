package serving

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/gonum/optimize"
)

// Calibration of the engine's overheads (Overheads) from measured
// benchmark results: the terms the static step model cannot know are
// fitted on some load levels by Nelder-Mead, and every level is then
// simulated again so the held-out ones say how far the fit carries.
//
// The objective is the sum over the fitted levels of the squared log
// ratios predicted / measured of median TTFT, median TPOT and output
// throughput (each where the benchmark reports it; the mean when it
// reports no median), plus a small pull of every term towards none
// (calibrateRidge x the squared scaled terms), so that terms the levels
// cannot tell apart stay at zero instead of trading against each other.
// The terms are searched in a transformed space that keeps them in range
// (squares for the non-negative times, an exponential for the decode and
// prefill scales), starting from none.

// CalibrateTerm names an overhead the fit may move.
type CalibrateTerm string

const (
	TermStepUs       CalibrateTerm = "step"         // Overheads.StepUs
	TermPerSeqUs     CalibrateTerm = "per-seq"      // Overheads.PerSeqUs
	TermPrefillScale CalibrateTerm = "prefill"      // Overheads.PrefillScale
	TermPrefillStep  CalibrateTerm = "prefill-step" // Overheads.PrefillStepUs
	TermDecodeScale  CalibrateTerm = "decode"       // Overheads.DecodeScale
	TermFrontendMs   CalibrateTerm = "frontend"     // Overheads.FrontendMs
)

// AllCalibrateTerms is every term (--terms all); with none named,
// Calibrate fits those the fitted levels tell apart.
var AllCalibrateTerms = []CalibrateTerm{TermStepUs, TermPerSeqUs, TermDecodeScale, TermPrefillScale, TermPrefillStep, TermFrontendMs}

// scaleTerm reports whether t is a multiplicative term (searched as an
// exponential, 1 at the start).
func scaleTerm(t CalibrateTerm) bool { return t == TermPrefillScale || t == TermDecodeScale }

// ParseCalibrateTerms parses a comma list of terms: "all" every term, ""
// none named (nil: Calibrate picks what the fitted levels can tell
// apart).
func ParseCalibrateTerms(s string) ([]CalibrateTerm, error) {
	switch s {
	case "":
		return nil, nil
	case "all":
		return AllCalibrateTerms, nil
	}
	var out []CalibrateTerm
	for _, p := range strings.Split(s, ",") {
		t := CalibrateTerm(strings.TrimSpace(strings.ToLower(p)))
		if !slices.Contains(AllCalibrateTerms, t) {
			return nil, fmt.Errorf("overhead term %q: want step, per-seq, decode, prefill, prefill-step or frontend", p)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// CalibrateOptions choose what is fitted on what. Zero values: fit every
// term on the first level, 400 objective evaluations, seed 0.
type CalibrateOptions struct {
	// Fit lists the indexes of the levels fitted on (nil: the first).
	Fit []int
	// Terms are the overheads fitted (nil: every term the fitted levels
	// can tell apart, Calibrate); the others keep the deployment's
	// values.
	Terms []CalibrateTerm
	// MaxEvals bounds the objective's evaluations (each simulates every
	// fitted level once).
	MaxEvals int
	Seed     uint64
}

// Calibration is a fit's outcome.
type Calibration struct {
	Overheads Overheads `json:"overheads"`
	// Fitted marks, per level, whether it was fitted on (the others are
	// held out).
	Fitted []bool `json:"fitted"`
	// Before and After compare every level with the deployment's own
	// overheads and with the fitted ones.
	Before []*LevelComparison `json:"before"`
	After  []*LevelComparison `json:"after"`
	// Objective before and after the fit, and the evaluations used.
	ObjectiveBefore float64 `json:"objective_before"`
	ObjectiveAfter  float64 `json:"objective_after"`
	Evals           int     `json:"evals"`
	// Notes say which terms were left out of the fit and why.
	Notes []string `json:"notes,omitempty"`
}

// distinctLoads counts the different loads (rate and concurrency: the
// running batch a step serves) among the levels fitted on, and the
// different shapes (a load with the requests' mean prompt and output
// lengths, to the token: how much of the load is prefill).
func distinctLoads(levels []Measured, fit []int) (loads, shapes int) {
	type load struct {
		qps float64
		c   int
	}
	type shape struct {
		load
		prompt, outputs int64
	}
	seenL, seenS := map[load]bool{}, map[shape]bool{}
	for _, i := range fit {
		if i >= 0 && i < len(levels) {
			m := &levels[i]
			l := load{m.QPS, m.Concurrency}
			sh := shape{load: l}
			if m.Completed > 0 {
				sh.prompt, sh.outputs = m.PromptTokens/int64(m.Completed), m.OutputTokens/int64(m.Completed)
			}
			seenL[l], seenS[sh] = true, true
		}
	}
	return len(seenL), len(seenS)
}

// CheckCalibrateTerms refuses named terms the fitted levels (fit: level
// indexes, nil the first) cannot determine. Levels of two or more loads
// determine every term. One load shows one median TTFT and one median
// TPOT (a closed loop's throughput follows from both): it fits two terms,
// three where its levels differ in lengths (the prefill scale, which the
// lengths tell from the frontend), and of those at most one of the step
// cost and the decode scale, which move its TPOT alike, and at most one
// of the frontend and, on one shape, the prefill scale, which move its
// TTFT alike; Calibrate's ridge would otherwise split the one gap between
// them at will. A per-sequence cost named on one load is left out with a
// note (Calibrate) and not counted here. The error says how many terms
// the levels fit; nil terms (Calibrate's choice) pass.
func CheckCalibrateTerms(levels []Measured, fit []int, terms []CalibrateTerm) error {
	if len(fit) == 0 {
		fit = []int{0}
	}
	loads, shapes := distinctLoads(levels, fit)
	if loads >= 2 || len(terms) == 0 {
		return nil
	}
	ttftAlike := []CalibrateTerm{TermFrontendMs}
	if shapes < 2 {
		ttftAlike = append(ttftAlike, TermPrefillScale)
	}
	var named, tpot, ttft []string
	for _, t := range terms {
		if t == TermPerSeqUs {
			continue
		}
		named = append(named, string(t))
		switch {
		case t == TermStepUs || t == TermDecodeScale:
			tpot = append(tpot, string(t))
		case slices.Contains(ttftAlike, t):
			ttft = append(ttft, string(t))
		}
	}
	fits, shape, figures := 2, "1 shape", "its median TTFT and TPOT"
	if shapes >= 2 {
		fits, shape, figures = 3, fmt.Sprintf("%d shapes", shapes), "its median TTFT and TPOT, and the prefill scale its lengths tell from the frontend"
	}
	var why []string
	if len(named) > fits {
		why = append(why, fmt.Sprintf("%d named (%s)", len(named), strings.Join(named, ", ")))
	}
	if len(tpot) > 1 {
		why = append(why, strings.Join(tpot, " and ")+" both move its TPOT")
	}
	if len(ttft) > 1 {
		why = append(why, strings.Join(ttft, " and ")+" both move its TTFT")
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("the fitted levels run 1 load of %s (load and lengths), which fits %d terms (%s; the throughput follows from both), at most one of step and decode (they move its TPOT alike) and one of %s (they move its TTFT alike): %s; name fewer, or fit on levels of two or more loads (--fit-levels) to fit every term",
		shape, fits, figures, strings.Join(termNames(ttftAlike), " and "), strings.Join(why, "; "))
}

// termNames are terms as typed.
func termNames(ts []CalibrateTerm) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return out
}

// calibrateRidge weighs the pull of each scaled term towards none
// against the squared log errors (a term moving the fit by 1 % costs
// 1e-4).
const calibrateRidge = 1e-4

// CalibrateMetrics are the metrics fitted, each through CalibrateTarget.
var CalibrateMetrics = []string{"ttft_ms", "tpot_ms", "output_tokens_per_s"}

// CalibrateTarget is the statistic of metric the fit takes on a level: a
// latency's median, or its mean where the benchmark reports no median (the
// row's Stat says which, so a table can label it); a throughput's one
// figure.
func (l *LevelComparison) CalibrateTarget(metric string) MetricCompare {
	if !slices.Contains(compareLatencies, metric) {
		return l.Get(metric, "")
	}
	c := l.Get(metric, "p50")
	if math.IsNaN(c.Measured) {
		if m := l.Get(metric, "mean"); !math.IsNaN(m.Measured) {
			return m
		}
	}
	return c
}

// logErrors is the sum of squared log ratios of a comparison's targets.
func logErrors(lc *LevelComparison) (float64, int) {
	sum, n := 0.0, 0
	for _, metric := range CalibrateMetrics {
		c := lc.CalibrateTarget(metric)
		if !(c.Measured > 0) || !(c.Predicted > 0) {
			continue
		}
		e := math.Log(c.Predicted / c.Measured)
		sum += e * e
		n++
	}
	return sum, n
}

// Calibrate fits the deployment's overheads on the levels opts.Fit
// selects and compares every level before and after (see the model
// above). The levels run on one Simulator, whose step-cost memo serves
// every evaluation. Errors: no level, a level index out of range, a
// deployment New refuses, a level whose load cannot be simulated.
func Calibrate(d Deployment, levels []Measured, opts CalibrateOptions) (*Calibration, error) {
	if len(levels) == 0 {
		return nil, errors.New("calibrate: no measured load level")
	}
	fit := opts.Fit
	if len(fit) == 0 {
		fit = []int{0}
	}
	cal := &Calibration{Fitted: make([]bool, len(levels))}
	for _, i := range fit {
		if i < 0 || i >= len(levels) {
			return nil, fmt.Errorf("calibrate: level %d to fit on: want 1 to %d", i+1, len(levels))
		}
		cal.Fitted[i] = true
	}
	if err := CheckCalibrateTerms(levels, fit, opts.Terms); err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	terms := opts.Terms
	loads, shapes := distinctLoads(levels, fit)
	if len(terms) == 0 {
		// Every term moves a level's TTFT or TPOT (a closed loop's
		// throughput follows from both); the levels tell terms apart only
		// where they differ. A scale on the decode part, a host cost per
		// step and one per running sequence move the TPOT of one running
		// batch alike: on one load the decode scale takes that gap (a
		// ratio on the step model's price: fitted on one level of the
		// DSR1 results, it carries to the others better than a host time
		// per step, held-out TPOT -3 to -16 % against -11 to -23 % from
		// 16 clients), and the other two need levels of different loads. The prefill scale and the frontend move the TTFT of one
		// prompt length alike: on one shape (load and lengths) the
		// frontend takes that gap, and the prefill scale needs levels of
		// different lengths or loads. A time per prefill step adds to one
		// load's TTFT as the frontend does and to its TPOT (the decodes
		// that wait) as the decode scale does: it needs levels of
		// different loads, where different numbers of decodes wait; but
		// an engine that runs its prefill batches eagerly (SGLang's
		// scheduler: sglang PRs #28053 and #32785 keep the DeepSeek
		// trtllm_mla prefill out of graphs) pays a host time per prefill
		// step that is the mechanism of that TTFT gap, and a frontend is
		// not: the same InferenceX client on the same B200 host measures
		// a median TTFT of 26.3 ms at 16 clients under vLLM (gpt-oss-120b,
		// SemiAnalysisAI/InferenceX@2a6a04c0 together_runner/baselines/
		// b200/vllm/gptoss-fp4/1k1k/untuned/conc16.json), where the
		// frontend fitted on the DSR1 results took 170 ms. So on one load
		// under SGLang the prefill step takes the gap in the frontend's
		// place (held out on the DSR1 results, 64-256 clients, priors:
		// TTFT -8.6 / -4.8 / -9.4 % against -15.8 / -15.1 / -18.9 % with
		// the frontend; with the B200 tables -9.5 / -7.5 / -3.8 against
		// -12.1 / -16.7 / -21.2).
		eagerPrefill := d.Engine.Policy == PolicySGLang
		var left []string
		for _, t := range AllCalibrateTerms {
			switch {
			case loads < 2 && eagerPrefill && t == TermPrefillStep:
				terms = append(terms, t)
			case loads < 2 && eagerPrefill && t == TermFrontendMs:
				left = append(left, string(t))
			case loads < 2 && (t == TermStepUs || t == TermPerSeqUs || t == TermPrefillStep):
				left = append(left, string(t))
			case shapes < 2 && t == TermPrefillScale:
				left = append(left, string(t))
			default:
				terms = append(terms, t)
			}
		}
		if len(left) > 0 {
			why := "a time per prefill step one load's TTFT and TPOT as the frontend and the decode scale do, a prefill scale one shape's TTFT as the frontend does"
			if eagerPrefill && loads < 2 {
				why = "the frontend one load's TTFT as the time of the prefill steps the engine runs eagerly does, a prefill scale one shape's TTFT as that time does"
			}
			cal.Notes = append(cal.Notes, fmt.Sprintf("%s not fitted: the fitted levels run %d load(s) and %d shape(s) (load and lengths), which the fitted terms already cover: a cost per step or per sequence moves one load's TPOT as the decode scale does, %s (fit on levels of two or more loads and lengths to tell them apart; --terms picks others)",
				strings.Join(left, ", "), loads, shapes, why))
		}
	}
	// A host cost per step and one per running sequence move a level's
	// TPOT alike: only levels of different loads (running batches) tell
	// them apart; fitting both on one trades one against the other and
	// carries the wrong split to the held-out loads.
	if loads < 2 && slices.Contains(terms, TermPerSeqUs) {
		terms = slices.DeleteFunc(slices.Clone(terms), func(t CalibrateTerm) bool { return t == TermPerSeqUs })
		cal.Notes = append(cal.Notes, fmt.Sprintf("%s not fitted: the fitted levels run %d load; a cost per sequence and one per step are told apart only by levels of different loads (fit on two or more)", TermPerSeqUs, loads))
	}
	maxEvals := opts.MaxEvals
	if maxEvals <= 0 {
		maxEvals = 400
	}
	s, err := New(d)
	if err != nil {
		return nil, err
	}
	base := d.Overheads
	compareAll := func(o Overheads) ([]*LevelComparison, float64, error) {
		s.d.Overheads = o
		out := make([]*LevelComparison, len(levels))
		obj := 0.0
		for i := range levels {
			lc, err := s.CompareMeasured(&levels[i], opts.Seed, RunOptions{})
			if err != nil {
				return nil, 0, err
			}
			out[i] = lc
			if cal.Fitted[i] {
				e, _ := logErrors(lc)
				obj += e
			}
		}
		return out, obj, nil
	}
	if cal.Before, cal.ObjectiveBefore, err = compareAll(base); err != nil {
		return nil, err
	}
	for i := range levels {
		if _, n := logErrors(cal.Before[i]); cal.Fitted[i] && n == 0 {
			return nil, fmt.Errorf("calibrate: %s record %d reports no TTFT, TPOT or output throughput to fit on", levels[i].File, levels[i].Record)
		}
	}
	// The search space: u -> overheads. Times are squares of scaled
	// coordinates (0 at the start), the decode and prefill scales exponentials (1
	// at the start); terms not fitted keep the deployment's value.
	scales := map[CalibrateTerm]float64{TermStepUs: 300, TermPerSeqUs: 30, TermPrefillStep: 300, TermFrontendMs: 100}
	decode := func(u []float64) Overheads {
		o := base
		for k, t := range terms {
			switch t {
			case TermStepUs:
				o.StepUs = math.Min(maxOverheadStepUs, math.Pow(scales[t]*u[k], 2))
			case TermPerSeqUs:
				o.PerSeqUs = math.Min(maxOverheadPerSeqUs, math.Pow(scales[t]*u[k], 2))
			case TermFrontendMs:
				o.FrontendMs = math.Min(maxFrontendMs, math.Pow(scales[t]*u[k], 2))
			case TermPrefillStep:
				o.PrefillStepUs = math.Min(maxOverheadStepUs, math.Pow(scales[t]*u[k], 2))
			case TermPrefillScale:
				o.PrefillScale = math.Min(maxPrefillScale, math.Exp(math.Max(-10, math.Min(10, u[k]))))
			case TermDecodeScale:
				o.DecodeScale = math.Min(maxDecodeScale, math.Exp(math.Max(-10, math.Min(10, u[k]))))
			}
		}
		return o
	}
	var simErr error
	f := func(u []float64) float64 {
		s.d.Overheads = decode(u)
		obj := 0.0
		for i := range levels {
			if !cal.Fitted[i] {
				continue
			}
			lc, err := s.CompareMeasured(&levels[i], opts.Seed, RunOptions{})
			if err != nil {
				simErr = err
				return math.Inf(1)
			}
			e, _ := logErrors(lc)
			obj += e
		}
		for _, x := range u {
			obj += calibrateRidge * x * x
		}
		return obj
	}
	x0 := make([]float64, len(terms))
	// Nelder-Mead's first simplex steps each coordinate by a fixed
	// amount; start the square-root coordinates off zero so a step in
	// either direction moves the term.
	for k, t := range terms {
		if !scaleTerm(t) {
			x0[k] = 0.1
		}
	}
	res, err := optimize.Minimize(optimize.Problem{Func: f}, x0,
		&optimize.Settings{FuncEvaluations: maxEvals, Converger: &optimize.FunctionConverge{Absolute: 1e-6, Relative: 1e-4, Iterations: 40}},
		&optimize.NelderMead{})
	if simErr != nil {
		return nil, simErr
	}
	if err != nil && res == nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	cal.Evals = res.Stats.FuncEvaluations
	best := decode(res.X)
	// Keep the fit only if it beats where it started (a search that ends
	// on its evaluation budget may not).
	var after []*LevelComparison
	var objAfter float64
	if after, objAfter, err = compareAll(best); err != nil {
		return nil, err
	}
	if objAfter > cal.ObjectiveBefore {
		best, after, objAfter = base, cal.Before, cal.ObjectiveBefore
	}
	cal.Overheads, cal.After, cal.ObjectiveAfter = best, after, objAfter
	s.d.Overheads = base
	return cal, nil
}
