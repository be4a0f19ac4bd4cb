package traces

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
	"go.opentelemetry.io/otel/trace"
)

// Comparison of measured and predicted times.
//
// Error convention: ErrPct = (predicted - measured) / measured x 100, so a
// prediction that is too optimistic (too short) has a negative error.
// Measured values are medians over the samples (steps x ranks); P10/P90
// give their spread (linear interpolation between order statistics).

// CompareOptions configure Compare. The zero value compares every scenario
// recorded in the traces as recorded.
type CompareOptions struct {
	// Override replaces fields of every recorded scenario (flags given by
	// the user) and is the scenario of spans whose traces have no step root
	// (Kineto traces).
	Override ScenarioSpec
	// Topology, when not nil, is used instead of resolving the spec's
	// topology (a calibrated box passed by the caller).
	Topology *topology.Topology
	// Steps keeps only samples of steps for which Steps(step) is true (nil
	// = all); calibration evaluates on held-out steps with it.
	Steps func(step int) bool
	// Mode forces an alignment mode ("" = by op ID when spans have one).
	Mode string
	// GainTolerancePts: a measured and a predicted gain further apart than
	// this many percentage points make the verdict "model wrong here"
	// (0 = DefaultGainTolerancePts).
	GainTolerancePts float64
	// WorthItPct: a measured gain at least this large is "worth it"
	// (0 = DefaultWorthItPct).
	WorthItPct float64
}

// Verdict thresholds (assumptions: a 3 % faster step is worth building on
// a box where decode steps vary by about 1 % between runs; a model that
// misses a gain by more than 5 points would have ranked optimizations
// wrongly).
const (
	DefaultGainTolerancePts = 5
	DefaultWorthItPct       = 3
)

// Stat is a measured distribution against a prediction.
type Stat struct {
	PredictedUs float64 `json:"predicted_us"`
	MedianUs    float64 `json:"median_us"`
	P10Us       float64 `json:"p10_us"`
	P90Us       float64 `json:"p90_us"`
	N           int     `json:"n"`
	// ErrPct = (predicted - median) / median x 100; AbsErrUs = |predicted - median|.
	ErrPct   float64 `json:"err_pct"`
	AbsErrUs float64 `json:"abs_err_us"`
}

func newStat(pred float64, v []float64) Stat {
	st := Stat{PredictedUs: pred, N: len(v)}
	if len(v) == 0 {
		return st
	}
	sort.Float64s(v)
	st.MedianUs, st.P10Us, st.P90Us = Quantile(v, 0.5), Quantile(v, 0.1), Quantile(v, 0.9)
	if st.MedianUs > 0 {
		st.ErrPct = (pred - st.MedianUs) / st.MedianUs * 100
	}
	st.AbsErrUs = math.Abs(pred - st.MedianUs)
	return st
}

// Quantile returns the q-quantile (0 <= q <= 1) of sorted values by linear
// interpolation between order statistics (R type 7, numpy's default):
// position q*(n-1), so p10 of 10 values lies between the 1st and 2nd
// smallest. It returns NaN for no values.
func Quantile(sorted []float64, q float64) float64 {
	n := len(sorted)
	switch {
	case n == 0:
		return math.NaN()
	case n == 1:
		return sorted[0]
	}
	x := q * float64(n-1)
	if x < 0 {
		return sorted[0]
	}
	i := int(x)
	if i >= n-1 {
		return sorted[n-1]
	}
	f := x - float64(i)
	return sorted[i]*(1-f) + sorted[i+1]*f
}

// OpRow compares one unit (an op, or a group of ops; see Unit).
type OpRow struct {
	Key   string       `json:"key"`
	Kind  model.OpKind `json:"kind"`
	Layer int          `json:"layer"`
	Rank  int          `json:"rank"`
	Bound string       `json:"bound,omitempty"`
	Stat
}

// KindRow compares the time of one op kind per step and rank: the sum of
// its units' predictions against the per-(step, rank) sums of its samples.
type KindRow struct {
	Kind  model.OpKind `json:"kind"`
	Units int          `json:"units"`
	Stat
}

// ScenarioReport is the comparison of one scenario.
type ScenarioReport struct {
	Spec           ScenarioSpec `json:"scenario"`
	Sources        []string     `json:"sources"`
	UnknownOptions []string     `json:"unknown_options,omitempty"`
	Mode           string       `json:"mode"`
	Traces         int          `json:"traces"`
	Steps          int          `json:"steps"`
	Ranks          int          `json:"ranks"`
	Spans          int          `json:"spans"`
	Matched        int          `json:"matched"`
	// Step: predicted step time against the measured step (per step the
	// longest rank's extent of op spans).
	Step  Stat      `json:"step"`
	Kinds []KindRow `json:"kinds"`
	// Ops, largest absolute error first.
	Ops    []OpRow `json:"ops"`
	Issues []Issue `json:"issues,omitempty"`

	// Prediction and Alignment stay in memory for callers (plots, calibration).
	Prediction *sim.Prediction   `json:"-"`
	Schedule   *model.Schedule   `json:"-"`
	Alignment  *Alignment        `json:"-"`
	Resolved   *ResolvedScenario `json:"-"`
}

// GainRow compares an optimization's predicted and measured gain: the
// scenario with Options against the one without (Baseline).
type GainRow struct {
	Scenario string `json:"scenario"` // model, plan, workload and topology of both
	Baseline string `json:"baseline"` // options of the baseline ("" = none)
	Options  string `json:"options"`
	// Gains in % of the baseline step: (base - opt) / base x 100.
	PredictedGainPct float64 `json:"predicted_gain_pct"`
	MeasuredGainPct  float64 `json:"measured_gain_pct"`
	// ModelErrPct = (predicted speedup / measured speedup - 1) x 100,
	// speedup = base step / optimized step.
	ModelErrPct float64 `json:"model_err_pct"`
	Verdict     string  `json:"verdict"`
}

// SourceInfo summarizes one trace source as read.
type SourceInfo struct {
	Source       string `json:"source"`
	Format       string `json:"format"`
	Spans        int    `json:"spans"`
	SkippedTotal int    `json:"skipped_total"`
	Skipped      []Skip `json:"skipped,omitempty"`
	Scenarios    int    `json:"scenarios"`
}

// Report is the result of Compare.
type Report struct {
	Sources   []SourceInfo     `json:"sources"`
	Scenarios []ScenarioReport `json:"scenarios"`
	Gains     []GainRow        `json:"gains,omitempty"`
	// Issues that belong to no scenario (spans left out before alignment).
	Issues []Issue `json:"issues,omitempty"`
}

// maxSourceSkips bounds SourceInfo.Skipped in a report.
const maxSourceSkips = 20

// group is the spans of one scenario.
type group struct {
	first   int64 // earliest span start, ns
	spec    ScenarioSpec
	traces  [][]Span
	sources []string
}

// groupTraces assigns every trace of the results to a scenario: its step
// root's scenario with override applied, or, for traces without a root,
// override alone (or the source's only scenario).
func groupTraces(results []*Result, override ScenarioSpec, is *issues) []*group {
	var groups []*group
	byKey := map[string]*group{}
	get := func(spec ScenarioSpec, src string) *group {
		k := spec.Key()
		g := byKey[k]
		if g == nil {
			g = &group{spec: spec}
			byKey[k] = g
			groups = append(groups, g)
		}
		if n := len(g.sources); n == 0 || g.sources[n-1] != src {
			g.sources = append(g.sources, src)
		}
		return g
	}
	for _, res := range results {
		specOf := map[trace.TraceID]ScenarioSpec{}
		for i := range res.Scenarios {
			sp := SpecOf(&res.Scenarios[i]).Override(override)
			for _, t := range res.Scenarios[i].Traces {
				specOf[t] = sp
			}
		}
		var orphan *ScenarioSpec
		switch {
		case override.Model != "":
			sp := ScenarioSpec{}.Override(override)
			orphan = &sp
		case len(res.Scenarios) == 1:
			sp := SpecOf(&res.Scenarios[0]).Override(override)
			orphan = &sp
		}
		for _, tr := range SplitTraces(res.Spans) {
			if f := scheduleScale(tr); f != 1 {
				is.add(fmt.Sprintf("trace of a schedule shrunk by %s (run --scale): the prediction cannot rebuild the shrunk model; compare the unscaled run or predict the scaled model yourself", string(AttrScheduleScale)), len(tr),
					fmt.Sprintf("%s trace %s: scale %g", res.Source, tr[0].TraceID, f))
				continue
			}
			sp, ok := specOf[tr[0].TraceID]
			if !ok && orphan != nil {
				sp, ok = *orphan, true
			}
			if ok {
				g := get(sp, res.Source)
				if len(g.traces) == 0 || tr[0].Start < g.first {
					g.first = tr[0].Start
				}
				g.traces = append(g.traces, tr)
			} else {
				reason := "trace without a step root span and no scenario given (pass --model, --plan, --workload)"
				if len(res.Scenarios) > 1 {
					reason = "trace without a step root span in a source with several scenarios (pass --model, --plan, --workload)"
				}
				is.add(reason, len(tr), res.Source+" trace "+tr[0].TraceID.String())
			}
		}
	}
	// Scenarios in the order they were measured (trace IDs are random).
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].first < groups[j].first })
	return groups
}

// scheduleScale returns the trace root's schedule scale (1 when absent).
func scheduleScale(tr []Span) float64 {
	for i := range tr {
		if tr[i].Name == SpanStep && tr[i].IsRoot() {
			if v, ok := tr[i].Attr(string(AttrScheduleScale)); ok {
				if f, ok := v.Number(); ok && f > 0 {
					return f
				}
			}
			return 1
		}
	}
	return 1
}

// Compare aligns the spans of results with predictions of their scenarios
// and reports per op, per kind and per step, scenario by scenario, plus
// the gain of every optimization measured against its baseline. A source
// that mixes scenarios is compared per scenario. Errors: no spans at all,
// or no scenario that could be predicted; a scenario that cannot be
// resolved is reported in Report.Issues and left out.
func Compare(results []*Result, o CompareOptions) (*Report, error) {
	if o.GainTolerancePts <= 0 {
		o.GainTolerancePts = DefaultGainTolerancePts
	}
	if o.WorthItPct <= 0 {
		o.WorthItPct = DefaultWorthItPct
	}
	rep := &Report{}
	total := 0
	for _, r := range results {
		si := SourceInfo{Source: r.Source, Format: r.Format, Spans: len(r.Spans), SkippedTotal: r.SkippedTotal, Scenarios: len(r.Scenarios)}
		si.Skipped = r.Skipped[:min(len(r.Skipped), maxSourceSkips)]
		rep.Sources = append(rep.Sources, si)
		total += len(r.Spans)
	}
	if total == 0 {
		return rep, errors.New("compare: the trace sources hold no span")
	}
	var is issues
	groups := groupTraces(results, o.Override, &is)
	for _, g := range groups {
		sr, err := compareGroup(g, &o)
		if err != nil {
			n := 0
			for _, t := range g.traces {
				n += len(t)
			}
			is.add("scenario that cannot be predicted: "+err.Error(), n, g.spec.String())
			continue
		}
		rep.Scenarios = append(rep.Scenarios, *sr)
	}
	rep.Issues = is.list
	if len(rep.Scenarios) == 0 {
		msg := "compare: no scenario could be compared"
		if len(is.list) > 0 {
			msg += ": " + is.list[0].Reason
		}
		return rep, errors.New(msg)
	}
	rep.Gains = gains(rep.Scenarios, &o)
	return rep, nil
}

func compareGroup(g *group, o *CompareOptions) (*ScenarioReport, error) {
	rs, err := g.spec.Resolve()
	if err != nil {
		return nil, err
	}
	pr, sched, _, err := rs.Predict(o.Topology)
	if err != nil {
		return nil, err
	}
	al := Align(g.traces, pr, o.Mode)
	return buildReport(rs, pr, sched, al, g, o), nil
}

func buildReport(rs *ResolvedScenario, pr *sim.Prediction, sched *model.Schedule, al *Alignment, g *group, o *CompareOptions) *ScenarioReport {
	sr := &ScenarioReport{Spec: rs.Spec, Sources: g.sources, UnknownOptions: rs.UnknownOptions, Mode: al.Mode,
		Traces: len(g.traces), Spans: al.Spans, Matched: al.Matched, Issues: al.Issues,
		Prediction: pr, Schedule: sched, Alignment: al, Resolved: rs}
	keep := func(step int32) bool { return o.Steps == nil || o.Steps(int(step)) }
	// Bucket samples by unit (counting sort: no per-unit slices grown).
	cnt := make([]int, len(al.Units)+1)
	for _, s := range al.Samples {
		if keep(s.Step) {
			cnt[s.Unit+1]++
		}
	}
	for i := 1; i < len(cnt); i++ {
		cnt[i] += cnt[i-1]
	}
	vals := make([]float64, cnt[len(cnt)-1])
	pos := append([]int(nil), cnt[:len(al.Units)]...)
	type sk struct{ step, rank int32 }
	steps := map[int32]bool{}
	ranks := map[int32]bool{}
	kindSum := map[model.OpKind]map[sk]float64{}
	for _, s := range al.Samples {
		if !keep(s.Step) {
			continue
		}
		vals[pos[s.Unit]] = s.Us
		pos[s.Unit]++
		steps[s.Step], ranks[s.Rank] = true, true
		k := al.Units[s.Unit].Kind
		if kindSum[k] == nil {
			kindSum[k] = map[sk]float64{}
		}
		kindSum[k][sk{s.Step, s.Rank}] += s.Us
	}
	sr.Steps, sr.Ranks = len(steps), len(ranks)
	kindPred := map[model.OpKind]float64{}
	kindUnits := map[model.OpKind]int{}
	for i := range al.Units {
		u := &al.Units[i]
		// Non-symmetric predictions: the kind totals are rank 0's.
		if u.Rank <= 0 {
			kindPred[u.Kind] += u.PredictedUs
			kindUnits[u.Kind]++
		}
		v := vals[cnt[i]:cnt[i+1]]
		if len(v) == 0 {
			continue
		}
		row := OpRow{Key: u.Key, Kind: u.Kind, Layer: u.Layer, Rank: u.Rank, Stat: newStat(u.PredictedUs, v)}
		if len(u.Ops) == 1 {
			row.Bound = pr.Ops[u.Ops[0]].Bound.String()
		}
		sr.Ops = append(sr.Ops, row)
	}
	sort.SliceStable(sr.Ops, func(i, j int) bool { return sr.Ops[i].AbsErrUs > sr.Ops[j].AbsErrUs })
	kinds := make([]model.OpKind, 0, len(kindSum))
	for k := range kindSum {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i] < kinds[j] })
	for _, k := range kinds {
		m := kindSum[k]
		keys := make([]sk, 0, len(m))
		for key := range m {
			if pr.Symmetric || key.rank == 0 {
				keys = append(keys, key)
			}
		}
		v := make([]float64, 0, len(keys))
		for _, key := range keys {
			v = append(v, m[key])
		}
		sr.Kinds = append(sr.Kinds, KindRow{Kind: k, Units: kindUnits[k], Stat: newStat(kindPred[k], v)})
	}
	sort.SliceStable(sr.Kinds, func(i, j int) bool { return sr.Kinds[i].AbsErrUs > sr.Kinds[j].AbsErrUs })
	// Step: per step, the longest rank.
	stepMax := map[int]float64{}
	for _, st := range al.Steps {
		if o.Steps != nil && !o.Steps(st.Step) {
			continue
		}
		stepMax[st.Step] = math.Max(stepMax[st.Step], st.Us)
	}
	sv := make([]float64, 0, len(stepMax))
	for _, v := range stepMax {
		sv = append(sv, v)
	}
	// Ops the backend skipped did not take part in the measured step: on
	// an in-order rank each skipped op's predicted time comes off the
	// predicted step (its units' longest rank for an asymmetric prediction
	// is not tracked: rank 0's units stand for it).
	stepPred := pr.StepUs
	for i := range al.Units {
		if u := &al.Units[i]; u.Skipped && u.Rank <= 0 {
			stepPred -= u.PredictedUs
		}
	}
	sr.Step = newStat(stepPred, sv)
	return sr
}

// gains pairs scenarios that differ only by options: within a BaseKey, the
// scenario with the fewest option names is the baseline.
func gains(srs []ScenarioReport, o *CompareOptions) []GainRow {
	var out []GainRow
	done := map[string]bool{}
	for i := range srs {
		bk := srs[i].Spec.BaseKey()
		if done[bk] {
			continue
		}
		done[bk] = true
		var members []int
		for j := range srs {
			if srs[j].Spec.BaseKey() == bk {
				members = append(members, j)
			}
		}
		if len(members) < 2 {
			continue
		}
		base := members[0]
		for _, j := range members[1:] {
			if len(OptionNames(srs[j].Spec.Options)) < len(OptionNames(srs[base].Spec.Options)) {
				base = j
			}
		}
		b := &srs[base]
		for _, j := range members {
			if j == base {
				continue
			}
			s := &srs[j]
			if b.Step.MedianUs <= 0 || s.Step.MedianUs <= 0 || b.Step.PredictedUs <= 0 || s.Step.PredictedUs <= 0 {
				continue
			}
			sp := &b.Spec
			g := GainRow{Scenario: fmt.Sprintf("%s %s %s on %s", sp.Model, sp.Plan, sp.Workload, sp.Topology), Baseline: strings.Join(OptionNames(b.Spec.Options), ","), Options: strings.Join(OptionNames(s.Spec.Options), ",")}
			g.PredictedGainPct = (b.Step.PredictedUs - s.Step.PredictedUs) / b.Step.PredictedUs * 100
			g.MeasuredGainPct = (b.Step.MedianUs - s.Step.MedianUs) / b.Step.MedianUs * 100
			predSpeed := b.Step.PredictedUs / s.Step.PredictedUs
			measSpeed := b.Step.MedianUs / s.Step.MedianUs
			g.ModelErrPct = (predSpeed/measSpeed - 1) * 100
			g.Verdict = verdict(g, o)
			out = append(out, g)
		}
	}
	return out
}

func verdict(g GainRow, o *CompareOptions) string {
	if math.Abs(g.PredictedGainPct-g.MeasuredGainPct) > o.GainTolerancePts {
		return fmt.Sprintf("model wrong here by %+.1f %%", g.ModelErrPct)
	}
	if g.MeasuredGainPct >= o.WorthItPct {
		return "worth it"
	}
	return "not worth it"
}
