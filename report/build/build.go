// Package build turns tpscope's results into the plain data of a
// report.Report: a prediction (sim.Prediction and its schedule), a
// comparison of traces with their predictions (compare.Report, whose
// scenarios keep their traces' spans in memory) and advice (advise.Advice).
// It is the one place that knows both the result types and the report's
// data, so the renderer (package report) imports neither sim nor compare.
//
// What it derives, and how:
//   - Predicted lanes: every op of a rank at its simulated StartUs with its
//     Us; a symmetric prediction's rank 0 stands for every rank of the plan
//     (Prediction.Symmetric), so its boxes are repeated per rank. Ops on
//     Prediction.CriticalPath are marked on the lane of their rank.
//     Collectives are linked across the lanes of their schedule group.
//   - Measured lanes: one step of the scenario's traces (the spans compare
//     aligned, ScenarioReport.TraceSpans) drawn as recorded: the (trace,
//     step) whose extent (first op span start to last op span end, longest
//     rank) is nearest the measured median step; times from that step's
//     earliest op span. Ops the backend skipped (tpscope.skipped) are drawn
//     as zero-length ticks.
//   - Hover fields: the predicted op's inputs (FLOPs, bytes, bound, cost
//     parameters) and the comparison's per-op row (median, p10-p90 and
//     samples over every step and rank, error).
//   - Per-layer bars: predicted = the sum of a layer's ops (rank 0);
//     measured = median (p10-p90) over (step, rank) of the sum of that
//     layer's samples, the way compare.Compare totals kinds.
//
// Times are microseconds.
package build

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/tpscope/tpscope/advise"
	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/report"
	"github.com/tpscope/tpscope/sim"
)

// Input is what a report is built from; any combination of the three
// parts, at least one.
type Input struct {
	// Title replaces the generated title when not empty.
	Title string

	// Prediction and its Schedule (sim.Predict): a scenario predicted
	// without traces. Schedule may be nil (then no collective is linked
	// across ranks).
	Prediction *sim.Prediction
	Schedule   *model.Schedule

	// Comparison is compare.Compare's result: each scenario's
	// TraceSpans become its measured lanes. A comparison read back from
	// JSON has no in-memory prediction or spans: its scenarios get bars
	// and tables, no timeline.
	Comparison *compare.Report

	// Advice is advise.Advise's result.
	Advice *advise.Advice

	// MaxOpRows bounds the op tables (0 = DefaultMaxOpRows).
	MaxOpRows int
}

// DefaultMaxOpRows is the op table length when Input.MaxOpRows is 0.
const DefaultMaxOpRows = 40

// Build returns the report of in.
func Build(in Input) (*report.Report, error) {
	if in.Prediction == nil && in.Comparison == nil && in.Advice == nil {
		return nil, errors.New("report: nothing to show: want a prediction, a comparison or advice")
	}
	if in.MaxOpRows <= 0 {
		in.MaxOpRows = DefaultMaxOpRows
	}
	r := &report.Report{}
	var titles []string
	if pr := in.Prediction; pr != nil {
		titles = append(titles, fmt.Sprintf("%s %s on %s, %s", pr.Model, pr.Plan, pr.Topology, pr.Workload))
		r.Sections = append(r.Sections, predictionSections(pr, in.Schedule, in.MaxOpRows)...)
	}
	if c := in.Comparison; c != nil {
		for i := range c.Scenarios {
			sr := &c.Scenarios[i]
			sc := &sr.Scenario
			titles = append(titles, fmt.Sprintf("%s %s on %s, %s", modelName(sc), sc.Plan.Normalized(), boxName(sc), sc.Workload.Normalized()))
			r.Sections = append(r.Sections, comparisonSections(sr, i, len(c.Scenarios), in.MaxOpRows)...)
		}
		r.Sections = append(r.Sections, comparisonTail(c)...)
	}
	if a := in.Advice; a != nil {
		titles = append(titles, fmt.Sprintf("advice for %s %s on %s, %s", a.Model, a.Plan, a.Topology, a.Workload))
		r.Sections = append(r.Sections, adviceSections(a)...)
	}
	r.Title = "tpscope report: " + strings.Join(dedupe(titles), "; ")
	if in.Title != "" {
		r.Title = in.Title
	}
	r.Subtitle = subtitle(in)
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("report: built an invalid report: %w", err)
	}
	return r, nil
}

func subtitle(in Input) string {
	var parts []string
	if in.Prediction != nil {
		parts = append(parts, "predicted step")
	}
	if c := in.Comparison; c != nil {
		var srcs []string
		for _, s := range c.Sources {
			srcs = append(srcs, s.Source)
		}
		if len(srcs) > 0 {
			parts = append(parts, "measured: "+strings.Join(srcs, ", "))
		} else {
			parts = append(parts, "comparison")
		}
	}
	if in.Advice != nil {
		parts = append(parts, "optimization advice")
	}
	return strings.Join(parts, " · ")
}

func dedupe(s []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range s {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	return out
}

// predictionSections: summary, timeline, bars by kind and layer, longest ops.
func predictionSections(pr *sim.Prediction, sched *model.Schedule, maxRows int) []report.Section {
	lines := []string{
		fmt.Sprintf("model %s, topology %s, plan %s, workload %s, options: %s", pr.Model, pr.Topology, pr.Plan, pr.Workload, pr.OptionsLabel()),
		fmt.Sprintf("predicted step %.1f us: %.1f tokens/s per request, %.1f tokens/s in all; %d kernels per rank; communication %.1f us (%.1f %% of the step); rank 0 idle %.1f us",
			pr.StepUs, pr.TokensPerSPerRequest, pr.TokensPerS, pr.Kernels, pr.CommUs, 100*pr.CommShareFrac, pr.IdleUs),
		criticalPathLine(pr),
	}
	// What priced the step, as predict's engine, moe routing and costs
	// lines say it: the same flags under another engine or with measured
	// tables give another step, and the report must say which one it is.
	if pr.Engine != "" {
		lines = append(lines, "engine: "+pr.Engine)
	}
	if !pr.MoERouting.IsZero() {
		lines = append(lines, "moe routing: "+pr.MoERouting.String())
	}
	if pr.CostSource != "" {
		lines = append(lines, fmt.Sprintf("costs: %s: %d of %d ops priced from its tables, the rest from the priors", pr.CostSource, pr.MeasuredOps, len(pr.Ops)))
	}
	if pr.Symmetric {
		lines = append(lines, fmt.Sprintf("every rank runs the same ops: rank 0's prediction is drawn for each of the %d ranks", worldOf(pr, sched)))
	}
	if m := pr.Memory; m != nil {
		// The pool as predict's memory line states it: the engine's rule,
		// its fraction and profiling step, and where each came from (the
		// pool flags the step was priced with).
		lines = append(lines, fmt.Sprintf("memory per GPU: weights %.1f GB + activations %.1f GB + KV %.2f GB of %.1f GB usable at %s; KV capacity %d tokens; fits: %v",
			gb(m.WeightBytes), gb(m.ActivationBytes), gb(m.KVBytes), gb(m.UsableBytes), m.Budget.GivenBy(), m.KVCapacityTokens, m.Fits))
		if c := m.Budget.GraphCaveat(); c != "" {
			lines = append(lines, "caveat: "+c)
		}
	}
	for _, c := range pr.Caveats {
		lines = append(lines, "caveat: "+c)
	}
	tl := newTimeline(pr, sched, nil, nil, nil)
	if sched == nil {
		tl.lines = append(tl.lines, "a saved prediction holds no schedule: collectives are not linked across ranks")
	}
	secs := []report.Section{
		{Title: "Predicted step", Lines: lines},
		{Title: "Timeline: one step per rank", Lines: tl.lines, Timeline: tl.t},
	}
	kb := &report.Bars{Unit: "us", Series: []string{"predicted"}}
	for _, s := range pr.ByKind {
		kb.Rows = append(kb.Rows, report.BarRow{Label: s.Name, Values: []report.BarValue{{V: s.Us}}, Note: fmt.Sprintf("%.1f %%", 100*s.ShareFrac)})
	}
	secs = append(secs, report.Section{Title: "Time by op kind (rank 0)", Bars: kb})
	if lb, _ := layerBars(pr, nil); lb != nil {
		secs = append(secs, report.Section{Title: "Time by layer (rank 0)", Bars: lb})
	}
	t := &report.Table{Columns: []report.Column{{Name: "op"}, {Name: "kind"}, {Name: "bound"}, {Name: "us", Numeric: true},
		{Name: "start us", Numeric: true}, {Name: "released by"}, {Name: "cost"}}}
	// --top rows: the saved TopOps hold only the first ten, so the
	// table is of rank 0's longest ops as many as asked for.
	for _, k := range pr.LongestOps(maxRows) {
		op := &pr.Ops[k]
		t.Rows = append(t.Rows, report.Row{Cells: []string{op.ID, string(op.Kind), op.Bound.String(), fmt.Sprintf("%.1f", op.Us),
			fmt.Sprintf("%.1f", op.StartUs), op.WaitedOn.String(), costLine(op)}})
	}
	secs = append(secs, report.Section{Title: "Longest ops", Lines: []string{fmt.Sprintf("%d longest of %d ops", len(t.Rows), len(pr.Ops))}, Table: t})
	return secs
}

func criticalPathLine(pr *sim.Prediction) string {
	counts := map[string]int{}
	var order []string
	for _, i := range pr.CriticalPath {
		if i < 0 || i >= len(pr.Ops) {
			continue
		}
		w := pr.Ops[i].WaitedOn.String()
		if counts[w] == 0 {
			order = append(order, w)
		}
		counts[w]++
	}
	sort.Strings(order)
	var parts []string
	for _, w := range order {
		parts = append(parts, fmt.Sprintf("%s %d", w, counts[w]))
	}
	return fmt.Sprintf("critical path: %d ops from the first to the one that ends the step, released by: %s (marked under the boxes)", len(pr.CriticalPath), strings.Join(parts, ", "))
}

// comparisonSections: one scenario's summary, timeline, bars and tables.
func comparisonSections(sr *compare.ScenarioReport, i, n, maxRows int) []report.Section {
	title := "Measured against predicted"
	if n > 1 {
		title = fmt.Sprintf("Scenario %d of %d", i+1, n)
	}
	st := sr.Step
	lines := []string{sr.Scenario.String()}
	if sr.From != "" {
		lines = append(lines, "scenario "+sr.From)
	}
	lines = append(lines,
		fmt.Sprintf("aligned by %s: %d of %d op spans matched; %d traces, %d steps x %d ranks", sr.Mode, sr.Matched, sr.Spans, sr.Traces, sr.Steps, sr.Ranks),
		fmt.Sprintf("step: predicted %.1f us, measured median %.1f us (p10-p90 %.1f-%.1f us over %d steps), error %+.1f %%", st.PredictedUs, st.MedianUs, st.P10Us, st.P90Us, st.N, st.ErrPct),
	)
	if len(sr.UnknownOptions) > 0 {
		lines = append(lines, "options the prediction does not model (ignored): "+strings.Join(sr.UnknownOptions, ", "))
	}
	if sr.Program != "" {
		lines = append(lines, sr.Program)
	}
	if l := sr.NeverMeasuredLine(); l != "" {
		lines = append(lines, l)
	}
	secs := []report.Section{{Title: title, Lines: lines}}
	if sr.Prediction != nil {
		ms := pickStep(sr)
		tl := newTimeline(sr.Prediction, sr.Schedule, sr.Alignment, sr.Ops, ms)
		tlLines := append([]string{criticalPathLine(sr.Prediction)}, tl.lines...)
		secs = append(secs, report.Section{Title: "Timeline: predicted above measured, one step per rank", Lines: tlLines, Timeline: tl.t})
	} else {
		secs[0].Lines = append(secs[0].Lines, "this comparison was read back from JSON, which holds no op timings: pass the traces (--trace) to draw the timeline")
	}
	kb := &report.Bars{Unit: "us", Series: []string{"predicted", "measured median (p10-p90)"}}
	for _, k := range sr.Kinds {
		kb.Rows = append(kb.Rows, report.BarRow{Label: string(k.Kind), Values: []report.BarValue{{V: k.PredictedUs}, statValue(k.Stat)}, Note: fmt.Sprintf("%+.1f %%", k.ErrPct)})
	}
	if len(kb.Rows) > 0 {
		secs = append(secs, report.Section{Title: "Time by op kind, per step and rank", Lines: []string{"largest absolute error first; the note is (predicted - measured) / measured"}, Bars: kb})
	}
	if sr.Prediction != nil && sr.Alignment != nil {
		if lb, measured := layerBars(sr.Prediction, sr.Alignment); lb != nil {
			line := "measured: median over steps and ranks of the layer's summed spans; predicted: the layer's ops without those the backend skipped or the traces never measured"
			if !measured {
				line = "predicted only: the traces resolve no measured op to a layer (" + sr.Mode + " alignment compares kernels per kind and step)"
			}
			secs = append(secs, report.Section{Title: "Time by layer, per step and rank", Lines: []string{line}, Bars: lb})
		}
	}
	t := &report.Table{Columns: []report.Column{{Name: "op"}, {Name: "kind"}, {Name: "layer", Numeric: true}, {Name: "bound"},
		{Name: "predicted us", Numeric: true}, {Name: "measured median us", Numeric: true}, {Name: "p10-p90 us"}, {Name: "n", Numeric: true}, {Name: "error", Numeric: true}}}
	for j, o := range sr.Ops {
		if j >= maxRows {
			break
		}
		t.Rows = append(t.Rows, report.Row{Cells: []string{o.Key, string(o.Kind), layerCell(o.Layer), o.Bound, fmt.Sprintf("%.1f", o.PredictedUs),
			fmt.Sprintf("%.1f", o.MedianUs), fmt.Sprintf("%.1f-%.1f", o.P10Us, o.P90Us), fmt.Sprint(o.N), fmt.Sprintf("%+.1f %%", o.ErrPct)}, Tone: errTone(o.ErrPct)})
	}
	if len(t.Rows) > 0 {
		secs = append(secs, report.Section{Title: "Ops, largest absolute error first", Lines: []string{fmt.Sprintf("%d of %d", len(t.Rows), len(sr.Ops))}, Table: t})
	}
	if it := issuesTable(sr.Issues); it != nil {
		secs = append(secs, report.Section{Title: "Left out or approximated", Table: it})
	}
	return secs
}

// comparisonTail: gains between scenarios, sources, issues of no scenario.
func comparisonTail(c *compare.Report) []report.Section {
	var secs []report.Section
	if len(c.Gains) > 0 {
		// Gains as advise.Gain defines them: step = (base - step) / base;
		// tokens/s, which the verdict tests, differs when the option
		// changes the tokens a step yields (MTP).
		t := &report.Table{Columns: []report.Column{{Name: "scenario"}, {Name: "baseline"}, {Name: "options"},
			{Name: "predicted step gain", Numeric: true}, {Name: "measured step gain", Numeric: true},
			{Name: "predicted tok/s gain", Numeric: true}, {Name: "measured tok/s gain", Numeric: true},
			{Name: "model error", Numeric: true}, {Name: "verdict"}}}
		for _, g := range c.Gains {
			tone := ""
			switch {
			case strings.HasPrefix(g.Verdict, "worth it"):
				tone = "good"
			case strings.HasPrefix(g.Verdict, "model wrong"):
				tone = "bad"
			}
			base := g.Baseline
			if base == "" {
				base = "none"
			}
			t.Rows = append(t.Rows, report.Row{Cells: []string{g.Scenario, base, g.Options,
				fmt.Sprintf("%+.1f %%", g.Predicted.StepPct), fmt.Sprintf("%+.1f %%", g.Measured.StepPct),
				fmt.Sprintf("%+.1f %%", g.Predicted.TokensPerSPct), fmt.Sprintf("%+.1f %%", g.Measured.TokensPerSPct),
				fmt.Sprintf("%+.1f %%", g.ModelErrPct), g.Verdict}, Tone: tone})
		}
		secs = append(secs, report.Section{Title: "Optimizations: predicted and measured gain", Table: t})
	}
	if len(c.Sources) > 0 {
		t := &report.Table{Columns: []report.Column{{Name: "source"}, {Name: "format"}, {Name: "spans", Numeric: true}, {Name: "skipped", Numeric: true}, {Name: "scenarios", Numeric: true}}}
		for _, s := range c.Sources {
			t.Rows = append(t.Rows, report.Row{Cells: []string{s.Source, s.Format, fmt.Sprint(s.Spans), fmt.Sprint(s.SkippedTotal), fmt.Sprint(s.Scenarios)}})
		}
		secs = append(secs, report.Section{Title: "Trace sources", Table: t})
	}
	if it := issuesTable(c.Issues); it != nil {
		secs = append(secs, report.Section{Title: "Spans left out before alignment", Table: it})
	}
	return secs
}

func issuesTable(is []compare.Issue) *report.Table {
	if len(is) == 0 {
		return nil
	}
	t := &report.Table{Columns: []report.Column{{Name: "count", Numeric: true}, {Name: "reason"}, {Name: "examples"}}}
	for _, i := range is {
		t.Rows = append(t.Rows, report.Row{Cells: []string{fmt.Sprint(i.Count), i.Reason, strings.Join(i.Examples, "; ")}})
	}
	return t
}

func statValue(s compare.Stat) report.BarValue {
	if s.N == 0 {
		return report.BarValue{Missing: true}
	}
	if s.P90Us > 0 && s.P10Us >= 0 {
		return spread(s.MedianUs, s.P10Us, s.P90Us)
	}
	return report.BarValue{V: s.MedianUs}
}

// errTone marks op rows whose prediction is off by more than 25 % (the
// table is sorted by absolute error; the colour says which way).
func errTone(errPct float64) string {
	switch {
	case errPct < -25:
		return "bad"
	case errPct > 25:
		return "warn"
	}
	return ""
}

func layerCell(l int) string {
	if l < 0 {
		return "-"
	}
	return fmt.Sprint(l)
}

// adviceSections: the baseline, the speedup bars and the table of entries.
func adviceSections(a *advise.Advice) []report.Section {
	var lines []string
	if b := a.Baseline; b != nil {
		// The engine that priced the baseline and every row, as advise's
		// engine line says it.
		if b.Engine != "" {
			lines = append(lines, "engine: "+b.Engine)
		}
		lines = append(lines, fmt.Sprintf("baseline (%s): step %.2f ms, %.1f tokens/s per request, %.1f tokens/s, communication %.0f %% of the step, KV capacity %d tokens",
			b.Options.Label(), b.StepUs/1e3, b.PerRequest, b.TokensPerS, 100*b.CommShareFrac, b.Footprint.KVCapacityToks))
		for _, c := range b.Caveats {
			lines = append(lines, "caveat: "+c)
		}
	}
	if s := a.Stock; s != nil {
		lines = append(lines, fmt.Sprintf("stock (%s): step %.2f ms, %.1f tokens/s; the baseline's settings are worth x%.2f here", s.Options.Label(), s.StepUs/1e3, s.TokensPerS, a.StockGain.Speedup()))
	}
	lines = append(lines, "'added' = the entry on top of the baseline; 'in baseline' = the baseline against the baseline without it; d.* = with - without (rank 0, one step)")
	secs := []report.Section{{Title: "Optimizations ranked by predicted gain", Lines: lines}}
	bars := &report.Bars{Unit: "x", Series: []string{"predicted speedup (tokens/s with / without)"}, RefLine: 1}
	t := &report.Table{Columns: []report.Column{{Name: "entry"}, {Name: "applies"}, {Name: "state"}, {Name: "step ms", Numeric: true}, {Name: "speedup", Numeric: true},
		{Name: "tok/s", Numeric: true}, {Name: "d.compute us", Numeric: true}, {Name: "d.comm us", Numeric: true}, {Name: "d.launch us", Numeric: true},
		{Name: "KV cap", Numeric: true}, {Name: "why"}, {Name: "how"}, {Name: "where it pays"}}}
	for i := range a.Rows {
		r := &a.Rows[i]
		state := "added"
		if r.InBaseline {
			state = "in baseline"
		}
		why := r.Applicability.Reason
		if r.Error != "" || r.With == nil {
			if r.Error != "" {
				why += "; not predicted: " + r.Error
			}
			t.Rows = append(t.Rows, report.Row{Cells: []string{r.Entry, string(r.Applicability.Status), state, "-", "-", "-", "-", "-", "-", "-", why, r.How.String(), ""}, Tone: "warn"})
			continue
		}
		c := r.Change
		kv := "-"
		if c.KVCapacityFrac > 0 && c.KVCapacityFrac != 1 {
			kv = fmt.Sprintf("x%.2f", c.KVCapacityFrac)
		}
		tone := ""
		switch th := a.ThresholdFrac; {
		case th > 0 && r.Gain.Speedup() >= 1+th:
			tone = "good"
		case th > 0 && r.Gain.Speedup() > 0 && r.Gain.Speedup() <= 1-th:
			tone = "bad"
		}
		if r.FitNote() != "" {
			tone = "warn" // it cannot run as priced, whatever its gain
		}
		t.Rows = append(t.Rows, report.Row{Cells: []string{r.Entry, string(r.Applicability.Status), state, fmt.Sprintf("%.2f", r.With.StepUs/1e3) + r.FitNote(),
			fmt.Sprintf("x%.3f", r.Gain.Speedup()), fmt.Sprintf("%.1f", r.With.TokensPerS), fmt.Sprintf("%+.0f", c.ComputeUs), fmt.Sprintf("%+.0f", c.CommUs),
			fmt.Sprintf("%+.0f", c.LaunchUs), kv, why, r.How.String(), r.Sweep.String()}, Tone: tone})
		if r.Gain.Speedup() > 0 {
			// Qualified as the CLI's chart and table qualify it: an
			// upper bound, a conditional entry or a variant that does not
			// fit read as plain gains.
			bars.Rows = append(bars.Rows, report.BarRow{Label: r.Entry + r.Qualifiers(), Values: []report.BarValue{{V: r.Gain.Speedup()}}, Note: fmt.Sprintf("%+.1f %%", 100*(r.Gain.Speedup()-1))})
		}
	}
	if len(bars.Rows) > 0 {
		secs = append(secs, report.Section{Title: "Predicted speedup per optimization", Bars: bars})
	}
	secs = append(secs, report.Section{Title: "Catalog entries", Table: t})
	if len(a.Transfer) > 1 {
		tt := &report.Table{Columns: []report.Column{{Name: "model"}, {Name: "baseline tok/s", Numeric: true}, {Name: "stock tok/s", Numeric: true}, {Name: "speedup", Numeric: true},
			{Name: "comm share", Numeric: true}, {Name: "collectives/step", Numeric: true}, {Name: "us/collective", Numeric: true}, {Name: "fits"}}}
		for _, r := range a.Transfer {
			if r.Error != "" {
				tt.Rows = append(tt.Rows, report.Row{Cells: []string{r.Model, "-", "-", "-", "-", "-", "-", r.Error}, Tone: "warn"})
				continue
			}
			fits := "yes"
			if !r.Fits {
				fits = fmt.Sprintf("no: -%.1f GB", r.ShortfallGB)
			}
			tt.Rows = append(tt.Rows, report.Row{Cells: []string{r.Model, fmt.Sprintf("%.1f", r.TokensPerS), fmt.Sprintf("%.1f", r.StockTokensPS), fmt.Sprintf("x%.2f", r.Gain.Speedup()),
				fmt.Sprintf("%.0f %%", 100*r.CommShareFrac), fmt.Sprint(r.Collectives), fmt.Sprintf("%.1f", r.CommUsPerCall), fits}})
		}
		secs = append(secs, report.Section{Title: "Do the baseline's settings transfer to other models?", Table: tt})
	}
	return secs
}

// modelName is the scenario's model: the architecture's name, or its
// reference (a preset name or config path) when it has none.
func modelName(sc *sim.Scenario) string {
	switch {
	case sc.Arch == nil:
		return "?"
	case sc.Arch.Name != "":
		return sc.Arch.Name
	}
	return sc.Arch.Ref.String()
}

// boxName is the scenario's box as its line (sim.Scenario.String) names
// it: the priced topology's name, or, for a saved comparison read back
// with its box by reference only, the reference (preset or file, GPU
// subset).
func boxName(sc *sim.Scenario) string {
	if sc.Topo != nil {
		return sc.Topo.Name
	}
	if s := sc.TopoRef.String(); s != "" {
		return s
	}
	return "?"
}

func gb(b int64) float64 { return float64(b) / 1e9 }

func worldOf(pr *sim.Prediction, sched *model.Schedule) int {
	if sched != nil && len(sched.Ranks) > 0 {
		return len(sched.Ranks)
	}
	return max(1, pr.Plan.World())
}
