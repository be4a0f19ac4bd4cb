package compare

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/tpscope/tpscope/advise"
	"github.com/tpscope/tpscope/internal/stats"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/traces"
	"github.com/tpscope/tpscope/traces/schema"
	"go.opentelemetry.io/otel/trace"
)

// Comparison of measured and predicted times.
//
// Error convention: ErrPct = (predicted - measured) / measured x 100, so a
// prediction that is too optimistic (too short) has a negative error.
// Measured values are medians over the samples (the steps of every trace
// x ranks); P10/P90 give their spread (linear interpolation between order
// statistics).

// Options configure Compare. The zero value compares every scenario
// recorded in the traces as recorded.
type Options struct {
	Scenarios
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
	st.MedianUs, st.P10Us, st.P90Us = stats.Quantile(v, 0.5), stats.Quantile(v, 0.1), stats.Quantile(v, 0.9)
	if st.MedianUs > 0 {
		st.ErrPct = (pred - st.MedianUs) / st.MedianUs * 100
	}
	st.AbsErrUs = math.Abs(pred - st.MedianUs)
	return st
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
// its measured units' predictions against the sums of its samples per
// step of each trace and rank.
type KindRow struct {
	Kind  model.OpKind `json:"kind"`
	Units int          `json:"units"`
	Stat
}

// ScenarioReport is the comparison of one scenario.
type ScenarioReport struct {
	Scenario sim.Scenario `json:"scenario"`
	// From says where the scenario's fields came from: the trace's
	// record, the flags that override it, or the flags alone.
	From           string   `json:"from"`
	Sources        []string `json:"sources"`
	UnknownOptions []string `json:"unknown_options,omitempty"`
	Mode           string   `json:"mode"`
	Traces         int      `json:"traces"`
	Steps          int      `json:"steps"`
	Ranks          int      `json:"ranks"`
	Spans          int      `json:"spans"`
	Matched        int      `json:"matched"`
	// Step: predicted step time against the measured step (per step of
	// each trace the extent of its op spans over all its ranks).
	Step Stat `json:"step"`
	// NeverMeasured counts the predicted ops (rank 0's when the
	// prediction is not symmetric) that no span measured and the backend
	// did not skip (Alignment.NeverMeasured); NeverMeasuredUs is their
	// predicted time. Step's and Kinds' predicted figures leave them out:
	// the measured figures hold no time of theirs.
	NeverMeasured   int     `json:"never_measured_ops,omitempty"`
	NeverMeasuredUs float64 `json:"never_measured_us,omitempty"`
	// Program says in one line how the traces' program differs from the
	// schedule (the line calibrate prints before a fit); "" when it does
	// not.
	Program string    `json:"program,omitempty"`
	Kinds   []KindRow `json:"kinds"`
	// Ops, largest absolute error first.
	Ops    []OpRow `json:"ops"`
	Issues []Issue `json:"issues,omitempty"`

	// Prediction and Alignment stay in memory for callers (plots, calibration).
	Prediction *sim.Prediction `json:"-"`
	Schedule   *model.Schedule `json:"-"`
	Alignment  *Alignment      `json:"-"`
	// Spans are the scenario's traces as read, trace by trace.
	TraceSpans [][]traces.Span `json:"-"`
}

// GainRow compares an optimization's predicted and measured gain: the
// scenario with Options against the one without (Baseline).
type GainRow struct {
	Scenario string `json:"scenario"` // the baseline scenario
	Baseline string `json:"baseline"` // options of the baseline
	Options  string `json:"options"`  // options of the optimized run
	// Predicted and Measured gains (advise.Gain: step-time based, tokens/s
	// beside it).
	Predicted advise.Gain `json:"predicted"`
	Measured  advise.Gain `json:"measured"`
	// ModelErrPct = (predicted speedup / measured speedup - 1) x 100,
	// speedup = base step / optimized step.
	ModelErrPct float64 `json:"model_err_pct"`
	Verdict     string  `json:"verdict"`
}

// SourceInfo summarizes one trace source as read.
type SourceInfo struct {
	Source       string        `json:"source"`
	Format       string        `json:"format"`
	Spans        int           `json:"spans"`
	SkippedTotal int           `json:"skipped_total"`
	Skipped      []traces.Skip `json:"skipped,omitempty"`
	Scenarios    int           `json:"scenarios"`
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
	sc      sim.Scenario
	from    string // ScenarioReport.From
	key     string
	unknown []string
	traces  [][]traces.Span
	sources []string
}

// groupTraces assigns every trace of the results to a scenario: its step
// root's (see Scenarios), or, for traces without a root, the default
// scenario (or the source's only recorded one).
func groupTraces(results []*traces.Result, scs *Scenarios, is *issues) []*group {
	var groups []*group
	byKey := map[string]*group{}
	get := func(sc sim.Scenario, unknown []string, src, from string) *group {
		k := scenarioKey(sc)
		g := byKey[k]
		if g == nil {
			g = &group{sc: sc, key: k, unknown: unknown, from: from}
			byKey[k] = g
			groups = append(groups, g)
		}
		if n := len(g.sources); n == 0 || g.sources[n-1] != src {
			g.sources = append(g.sources, src)
		}
		return g
	}
	type resolved struct {
		sc      sim.Scenario
		unknown []string
		err     error
		from    string
	}
	for _, res := range results {
		of := map[trace.TraceID]*resolved{}
		var recs []*resolved
		for i := range res.Scenarios {
			rec := &res.Scenarios[i]
			r := &resolved{}
			var overridden bool
			var filled []string
			r.sc, r.unknown, overridden, filled, r.err = scs.resolve(rec)
			r.from = scs.from(true, overridden, filled)
			if r.err == nil && rec.JSON == "" && scheduleScaled(res, rec) {
				r.err = fmt.Errorf("trace of a schedule shrunk by %s without a recorded scenario: the prediction cannot rebuild the shrunk model", schema.AttrScheduleScale)
			}
			recs = append(recs, r)
			for _, t := range rec.Traces {
				of[t] = r
			}
		}
		var orphan *resolved
		var phases *stepPhases
		switch {
		case scs.Default != nil:
			orphan = &resolved{sc: *scs.Default, from: scs.from(false, false, nil)}
			phases = newStepPhases(res, string(scs.Default.Workload.Normalized().Phase))
		case len(recs) == 1:
			orphan = recs[0]
		}
		for _, tr := range traces.SplitTraces(res.Spans) {
			r, ok := of[tr[0].TraceID]
			if !ok {
				r = orphan
				if tr = phases.keep(tr, is); len(tr) == 0 {
					continue
				}
			}
			switch {
			case r == nil:
				reason := errNoScenario.Error()
				if len(res.Scenarios) > 1 {
					reason = "trace without a step root span in a source with several scenarios (pass the scenario flags)"
				}
				is.add(reason, len(tr), res.Source+" trace "+tr[0].TraceID.String())
			case r.err != nil:
				is.add("scenario that cannot be predicted: "+r.err.Error(), len(tr), res.Source+" trace "+tr[0].TraceID.String())
			default:
				g := get(r.sc, r.unknown, res.Source, r.from)
				if len(g.traces) == 0 || tr[0].Start < g.first {
					g.first = tr[0].Start
				}
				g.traces = append(g.traces, tr)
			}
		}
	}
	// Scenarios in the order they were measured (trace IDs are random).
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].first < groups[j].first })
	return groups
}

// stepPhases are the phases a profiler trace's engine ranges name for its
// steps, by rank and step, held against the phase of the scenario its
// traces are predicted in (Scenarios.Default's).
type stepPhases struct {
	src   string
	want  string
	steps map[[2]int]*traces.KinetoStep // by {rank, step}
}

// newStepPhases returns the step phases of res against want; nil when
// no step of res names its phase.
func newStepPhases(res *traces.Result, want string) *stepPhases {
	sp := &stepPhases{src: res.Source, want: want, steps: map[[2]int]*traces.KinetoStep{}}
	for i := range res.Kineto {
		for j := range res.Kineto[i].Steps {
			if st := &res.Kineto[i].Steps[j]; st.Phase != "" {
				sp.steps[[2]int{st.Rank, st.Step}] = st
			}
		}
	}
	if len(sp.steps) == 0 {
		return nil
	}
	return sp
}

// keep returns the spans of tr (one step of every rank) without those of
// the steps whose range names another phase than the scenario's (a
// prefill step among decode steps): pooled with the others, their time
// would be compared with a step they are not. Each step left out is
// counted in is, by phase. A step whose phase is not known is kept.
func (sp *stepPhases) keep(tr []traces.Span, is *issues) []traces.Span {
	if sp == nil {
		return tr
	}
	other := func(s *traces.Span) *traces.KinetoStep {
		if st := sp.steps[[2]int{s.Rank, s.Step}]; st != nil && st.Phase != sp.want {
			return st
		}
		return nil
	}
	first := -1
	for i := range tr {
		if other(&tr[i]) != nil {
			first = i
			break
		}
	}
	if first < 0 {
		return tr
	}
	kept := append(make([]traces.Span, 0, len(tr)), tr[:first]...)
	left := map[*traces.KinetoStep]bool{}
	for i := first; i < len(tr); i++ {
		st := other(&tr[i])
		if st == nil {
			kept = append(kept, tr[i])
			continue
		}
		if !left[st] {
			left[st] = true
			is.add(fmt.Sprintf("%s steps left out (their engine range names the phase): the scenario compares %s steps and pools no other phase with them", st.Phase, sp.want),
				1, fmt.Sprintf("%s step %d rank %d: %s", sp.src, st.Step, st.Rank, st.Range))
		}
	}
	return kept
}

// scheduleScaled reports whether the traces of rec ran a shrunk schedule.
func scheduleScaled(res *traces.Result, rec *traces.Scenario) bool {
	want := map[trace.TraceID]bool{}
	for _, t := range rec.Traces {
		want[t] = true
	}
	for i := range res.Spans {
		s := &res.Spans[i]
		if s.Name == schema.SpanStep && s.IsRoot() && want[s.TraceID] {
			if v, ok := s.Attr(string(schema.AttrScheduleScale)); ok {
				if f, ok := v.Number(); ok && f > 1 {
					return true
				}
			}
		}
	}
	return false
}

// Compare aligns the spans of results with predictions of their scenarios
// and reports per op, per kind and per step, scenario by scenario, plus
// the gain of every optimization measured against its baseline. A source
// that mixes scenarios is compared per scenario. Errors: no spans at all,
// or no scenario that could be predicted; a scenario that cannot be
// resolved is reported in Report.Issues and left out.
func Compare(results []*traces.Result, o Options) (*Report, error) {
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
		// No package prefix: the verb that calls (tpscope compare,
		// report) names itself.
		return rep, errors.New("the trace sources hold no span")
	}
	var is issues
	groups := groupTraces(results, &o.Scenarios, &is)
	nameBoxesApart(groups)
	for _, g := range groups {
		sr, err := compareGroup(g, &o)
		if err != nil {
			n := 0
			for _, t := range g.traces {
				n += len(t)
			}
			is.add("scenario that cannot be predicted: "+err.Error(), n, g.sc.String())
			continue
		}
		sr.Program = programLine([]*Alignment{sr.Alignment}, sourcesOf(results, g.sources))
		rep.Scenarios = append(rep.Scenarios, *sr)
	}
	rep.Issues = is.list
	if len(rep.Scenarios) == 0 {
		return rep, nothingError("no scenario of the traces could be compared", is.list)
	}
	rep.Gains = gains(rep.Scenarios, &o)
	return rep, nil
}

// nothingError is the error for traces of which no scenario could be
// used: msg, the first reason and where it was met (the source and
// trace of its first example), so that among several sources the line
// names the one to mend.
func nothingError(msg string, list []Issue) error {
	if len(list) == 0 {
		return errors.New(msg)
	}
	msg += ": " + list[0].Reason
	if len(list[0].Examples) > 0 {
		msg += " (" + list[0].Examples[0] + ")"
	}
	return errors.New(msg)
}

// nameBoxesApart names apart the boxes of scenarios that share a name
// but are not one box (a box and its calibrated copy keep one name): a
// scenario names its box by the box's name, as predict does, so both
// would read alike. Each such box is named by the file it was recorded
// from too ("cpu-4r (/data/cpu.json)"), or, where two were recorded from
// one file, by its order among them ("cpu-4r (box 1 of 2 named cpu-4r)").
func nameBoxesApart(groups []*group) {
	byName := map[string][]*group{}
	var names []string
	for _, g := range groups {
		if t := g.sc.Topo; t != nil {
			if byName[t.Name] == nil {
				names = append(names, t.Name)
			}
			byName[t.Name] = append(byName[t.Name], g)
		}
	}
	for _, name := range names {
		gs := byName[name]
		var boxes []*topology.Topology // the distinct boxes of this name
		of := make([]int, len(gs))
		for i, g := range gs {
			of[i] = slices.IndexFunc(boxes, g.sc.Topo.SameBox)
			if of[i] < 0 {
				of[i] = len(boxes)
				boxes = append(boxes, g.sc.Topo)
			}
		}
		if len(boxes) < 2 {
			continue
		}
		labels := make([]string, len(boxes))
		for i, g := range gs {
			if labels[of[i]] == "" {
				labels[of[i]] = g.sc.TopoRef.Path
			}
		}
		// A path two of the boxes were recorded from (a file calibrated
		// again in place) names neither: each is numbered, the first too,
		// which the path would name as the file's content now.
		uses := map[string]int{}
		for _, l := range labels {
			uses[l]++
		}
		shared := make([]bool, len(labels))
		for i, l := range labels {
			shared[i] = l == "" || uses[l] > 1
		}
		for i := range labels {
			if shared[i] {
				labels[i] = fmt.Sprintf("box %d of %d named %s", i+1, len(labels), name)
			}
		}
		for i, g := range gs {
			t := g.sc.Topo.Clone()
			t.Name = fmt.Sprintf("%s (%s)", name, labels[of[i]])
			g.sc.Topo = t
		}
	}
}

// sourcesOf is the results read from the sources named.
func sourcesOf(results []*traces.Result, sources []string) []*traces.Result {
	var out []*traces.Result
	for _, r := range results {
		if slices.Contains(sources, r.Source) {
			out = append(out, r)
		}
	}
	return out
}

func compareGroup(g *group, o *Options) (*ScenarioReport, error) {
	pr, sched, err := sim.Predict(g.sc)
	if err != nil {
		return nil, err
	}
	al := Align(g.traces, pr, o.Mode)
	sr := buildReport(g, pr, sched, al, o)
	if msg := runBatchIssue(&g.sc, sched); msg != "" {
		sr.Issues = append(sr.Issues, Issue{Reason: msg, Count: 1})
	}
	return sr, nil
}

func buildReport(g *group, pr *sim.Prediction, sched *model.Schedule, al *Alignment, o *Options) *ScenarioReport {
	sr := &ScenarioReport{Scenario: g.sc, From: g.from, Sources: g.sources, UnknownOptions: g.unknown, Mode: al.Mode,
		Traces: len(g.traces), Spans: al.Spans, Matched: al.Matched, Issues: al.Issues,
		Prediction: pr, Schedule: sched, Alignment: al, TraceSpans: g.traces}
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
	// A measured step is one step of one trace: two runs of a scenario
	// number their steps alike, and each is a sample of its own.
	type ts struct{ trace, step int32 }
	type tsr struct{ trace, step, rank int32 }
	steps := map[ts]bool{}
	ranks := map[int32]bool{}
	kindSum := map[model.OpKind]map[tsr]float64{}
	for _, s := range al.Samples {
		if !keep(s.Step) {
			continue
		}
		vals[pos[s.Unit]] = s.Us
		pos[s.Unit]++
		steps[ts{s.Trace, s.Step}], ranks[s.Rank] = true, true
		k := al.Units[s.Unit].Kind
		if kindSum[k] == nil {
			kindSum[k] = map[tsr]float64{}
		}
		kindSum[k][tsr{s.Trace, s.Step, s.Rank}] += s.Us
	}
	sr.Steps, sr.Ranks = len(steps), len(ranks)
	never := al.NeverMeasured(o.Steps)
	kindPred := map[model.OpKind]float64{}
	kindUnits := map[model.OpKind]int{}
	for i := range al.Units {
		u := &al.Units[i]
		// Non-symmetric predictions: the kind totals are rank 0's. A
		// kind's predicted total is that of its units measured: the
		// measured sums hold no time of the others.
		if u.Rank <= 0 && cnt[i+1] > cnt[i] {
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
		v := make([]float64, 0, len(m))
		for key, us := range m {
			if pr.Symmetric || key.rank == 0 {
				v = append(v, us)
			}
		}
		sr.Kinds = append(sr.Kinds, KindRow{Kind: k, Units: kindUnits[k], Stat: newStat(kindPred[k], v)})
	}
	sort.SliceStable(sr.Kinds, func(i, j int) bool { return sr.Kinds[i].AbsErrUs > sr.Kinds[j].AbsErrUs })
	// Step: per step of each trace, from the earliest op start on any of
	// its ranks to the latest op end, as the run measured it (exec's
	// step time, the step span's tpscope.step_us): one trace's ranks share
	// its process's clock, and a rank that started late still held the
	// step up. The longest rank alone would leave out the ranks' skew and
	// say another step time than run --compare for the same steps.
	type extent struct{ startNs, endNs int64 }
	stepExt := map[ts]extent{}
	for _, st := range al.Steps {
		if o.Steps != nil && !o.Steps(st.Step) {
			continue
		}
		k := ts{int32(st.Trace), int32(st.Step)}
		if e, ok := stepExt[k]; ok {
			stepExt[k] = extent{min(e.startNs, st.StartNs), max(e.endNs, st.EndNs)}
		} else {
			stepExt[k] = extent{st.StartNs, st.EndNs}
		}
	}
	sv := make([]float64, 0, len(stepExt))
	for _, e := range stepExt {
		sv = append(sv, float64(e.endNs-e.startNs)/1e3)
	}
	// Ops the backend skipped did not take part in the measured step, nor
	// did ops the traces never measured: on an in-order rank each such
	// op's predicted time comes off the predicted step (its units'
	// longest rank for an asymmetric prediction is not tracked: rank 0's
	// units stand for it).
	stepPred := pr.StepUs
	for i := range al.Units {
		u := &al.Units[i]
		if u.Rank > 0 || !(u.Skipped || never[i]) {
			continue
		}
		for _, j := range u.Ops {
			stepPred -= pr.Ops[j].Us // all of it: an op not run leaves no node in the step
			if never[i] {
				sr.NeverMeasured++
				sr.NeverMeasuredUs += pr.Ops[j].Us
			}
		}
	}
	sr.Step = newStat(stepPred, sv)
	return sr
}

// gains pairs scenarios that differ only by options: within a base key,
// the scenario with the fewest option names is the baseline.
func gains(srs []ScenarioReport, o *Options) []GainRow {
	var out []GainRow
	done := map[string]bool{}
	for i := range srs {
		bk := baseKey(srs[i].Scenario)
		if done[bk] {
			continue
		}
		done[bk] = true
		var members []int
		for j := range srs {
			if baseKey(srs[j].Scenario) == bk {
				members = append(members, j)
			}
		}
		if len(members) < 2 {
			continue
		}
		base := members[0]
		for _, j := range members[1:] {
			if len(srs[j].Scenario.Options.Names()) < len(srs[base].Scenario.Options.Names()) {
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
			bt, st := b.Prediction.TokensPerStep, s.Prediction.TokensPerStep
			g := GainRow{Scenario: b.Scenario.String(), Baseline: b.Scenario.Options.String(), Options: s.Scenario.Options.String(),
				Predicted: advise.GainOf(b.Step.PredictedUs, s.Step.PredictedUs, bt/b.Step.PredictedUs, st/s.Step.PredictedUs),
				Measured:  advise.GainOf(b.Step.MedianUs, s.Step.MedianUs, bt/b.Step.MedianUs, st/s.Step.MedianUs)}
			g.ModelErrPct = (g.Predicted.StepSpeedup()/g.Measured.StepSpeedup() - 1) * 100
			g.Verdict = verdict(g, o)
			out = append(out, g)
		}
	}
	return out
}

func verdict(g GainRow, o *Options) string {
	if math.Abs(g.Predicted.TokensPerSPct-g.Measured.TokensPerSPct) > o.GainTolerancePts {
		return fmt.Sprintf("model wrong here by %+.1f %%", g.ModelErrPct)
	}
	if g.Measured.TokensPerSPct >= o.WorthItPct {
		return "worth it"
	}
	return "not worth it"
}
