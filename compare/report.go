package compare

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Report rendering: a table for terminals, Markdown for issues and pull
// requests, JSON for tools. Every renderer prints the same numbers.

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(r)
}

// WriteTable writes the report as aligned text; top bounds the op rows
// per scenario (0 = all).
func (r *Report) WriteTable(w io.Writer, top int) error { return r.write(w, top, false) }

// WriteMarkdown writes the report as Markdown tables.
func (r *Report) WriteMarkdown(w io.Writer, top int) error { return r.write(w, top, true) }

type tableWriter struct {
	w  io.Writer
	md bool
	tw *tabwriter.Writer
}

func (t *tableWriter) header(cols ...string) {
	if t.md {
		fmt.Fprintf(t.w, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
		return
	}
	t.tw = tabwriter.NewWriter(t.w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(t.tw, strings.Join(cols, "\t")+"\t")
}

func (t *tableWriter) row(cols ...string) {
	if t.md {
		fmt.Fprintf(t.w, "| %s |\n", strings.Join(cols, " | "))
		return
	}
	fmt.Fprintln(t.tw, strings.Join(cols, "\t")+"\t")
}

func (t *tableWriter) end() {
	if t.tw != nil {
		t.tw.Flush()
		t.tw = nil
	}
	fmt.Fprintln(t.w)
}

func (t *tableWriter) title(s string) {
	if t.md {
		fmt.Fprintf(t.w, "### %s\n\n", s)
	} else {
		fmt.Fprintf(t.w, "%s\n", s)
	}
}

func us(v float64) string  { return fmt.Sprintf("%.1f", v) }
func pct(v float64) string { return fmt.Sprintf("%+.1f %%", v) }

func statCols(s Stat) []string {
	return []string{us(s.PredictedUs), us(s.MedianUs), us(s.P10Us) + "–" + us(s.P90Us), fmt.Sprint(s.N), pct(s.ErrPct)}
}

func (r *Report) write(w io.Writer, top int, md bool) error {
	t := &tableWriter{w: w, md: md}
	t.title("sources")
	t.header("source", "format", "spans", "skipped", "scenarios")
	for _, s := range r.Sources {
		t.row(s.Source, s.Format, fmt.Sprint(s.Spans), fmt.Sprint(s.SkippedTotal), fmt.Sprint(s.Scenarios))
	}
	t.end()
	for _, s := range r.Sources {
		for _, sk := range s.Skipped {
			fmt.Fprintf(w, "  skipped in %s: %s\n", s.Source, sk.In(s.Source))
		}
	}
	for i := range r.Scenarios {
		sr := &r.Scenarios[i]
		t.title(fmt.Sprintf("scenario %d: %s", i+1, sr.Scenario))
		fmt.Fprintf(w, "scenario %s\n", sr.From)
		fmt.Fprintf(w, "aligned by %s: %d of %d op spans matched, %d steps x %d ranks, %d traces\n", sr.Mode, sr.Matched, sr.Spans, sr.Steps, sr.Ranks, sr.Traces)
		if len(sr.UnknownOptions) > 0 {
			fmt.Fprintf(w, "options sim does not model (ignored): %s\n", strings.Join(sr.UnknownOptions, ", "))
		}
		if sr.Program != "" {
			fmt.Fprintln(w, sr.Program)
		}
		if l := sr.NeverMeasuredLine(); l != "" {
			fmt.Fprintln(w, l)
		}
		fmt.Fprintln(w)
		t.header("", "predicted us", "measured median us", "p10–p90 us", "n", "error")
		t.row(append([]string{"step"}, statCols(sr.Step)...)...)
		t.end()
		t.title("per kind (per step and rank)")
		t.header("kind", "units", "predicted us", "measured median us", "p10–p90 us", "n", "error")
		for _, k := range sr.Kinds {
			t.row(append([]string{string(k.Kind), fmt.Sprint(k.Units)}, statCols(k.Stat)...)...)
		}
		t.end()
		n := len(sr.Ops)
		if top > 0 && n > top {
			n = top
		}
		t.title(fmt.Sprintf("ops, largest absolute error first (%d of %d)", n, len(sr.Ops)))
		t.header("op", "kind", "bound", "predicted us", "measured median us", "p10–p90 us", "n", "error")
		for _, o := range sr.Ops[:n] {
			key := o.Key
			if o.Rank >= 0 {
				key = fmt.Sprintf("%s@%d", o.Key, o.Rank)
			}
			t.row(append([]string{key, string(o.Kind), o.Bound}, statCols(o.Stat)...)...)
		}
		t.end()
		writeIssues(t, sr.Issues)
	}
	if len(r.Gains) > 0 {
		t.title("optimizations: predicted vs measured gain")
		t.header("scenario", "baseline", "options", "predicted step gain", "measured step gain", "predicted tok/s gain", "measured tok/s gain", "verdict")
		for _, g := range r.Gains {
			t.row(g.Scenario, g.Baseline, g.Options, pct(g.Predicted.StepPct), pct(g.Measured.StepPct), pct(g.Predicted.TokensPerSPct), pct(g.Measured.TokensPerSPct), g.Verdict)
		}
		t.end()
	}
	writeIssues(t, r.Issues)
	return nil
}

// NeverMeasuredLine says that the predicted step and kinds leave out the
// ops the traces never measured ("" when none were).
func (sr *ScenarioReport) NeverMeasuredLine() string {
	if sr.NeverMeasured == 0 {
		return ""
	}
	return fmt.Sprintf("predicted step and kinds leave out the %d predicted ops never measured (%.1f us of predicted time): they compare what ran", sr.NeverMeasured, sr.NeverMeasuredUs)
}

func writeIssues(t *tableWriter, is []Issue) {
	if len(is) == 0 {
		return
	}
	t.title("left out or approximated")
	t.header("count", "reason", "examples")
	for _, i := range is {
		// A kernel's name may be a C++ signature of thousands of
		// characters: the table cuts each example (the JSON has it whole).
		ex := make([]string, len(i.Examples))
		for k, e := range i.Examples {
			if ex[k] = e; len(e) > 60 {
				ex[k] = e[:57] + "..."
			}
		}
		t.row(fmt.Sprint(i.Count), i.Reason, strings.Join(ex, "; "))
	}
	t.end()
}

// WriteCSV writes one row per compared op (unit) of every scenario: the
// scenario's index and name, the unit, and its predicted and measured
// statistics.
func (r *Report) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	_ = cw.Write([]string{"scenario", "scenario_name", "key", "kind", "layer", "rank", "bound", "predicted_us", "median_us", "p10_us", "p90_us", "n", "err_pct"})
	for i := range r.Scenarios {
		// The scenario's number alone names nothing in a CSV read
		// without the table or the JSON: each row carries the heading
		// the table gives the scenario.
		name := r.Scenarios[i].Scenario.String()
		for _, o := range r.Scenarios[i].Ops {
			_ = cw.Write([]string{strconv.Itoa(i + 1), name, o.Key, string(o.Kind), strconv.Itoa(o.Layer), strconv.Itoa(o.Rank), o.Bound,
				f(o.PredictedUs), f(o.MedianUs), f(o.P10Us), f(o.P90Us), strconv.Itoa(o.N), f(o.ErrPct)})
		}
	}
	cw.Flush()
	return cw.Error()
}
