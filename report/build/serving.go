package build

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/tpscope/tpscope/plan"
	"github.com/tpscope/tpscope/report"
	"github.com/tpscope/tpscope/serving"
)

// ServingInput is a request-level simulation to report: its setup lines,
// runs, frontier, and what came with it (comparisons with measured
// benchmarks, a capacity answer).
type ServingInput struct {
	Title    string
	Subtitle string
	// Setup lines (model, box, engine, load, SLO), as the CLI printed
	// them.
	Setup []string
	Runs  []*serving.Result
	// Frontiers are the runs on the capacity plane, one per load shape.
	Frontiers []*serving.Frontier
	Compare   []*serving.LevelComparison
	Capacity  *serving.Capacity
}

// Serving builds the report of a request-level simulation: the setup,
// the capacity chart of each load shape (ServingScatter), the runs'
// table, each measured level's predicted-against-measured table, and the
// capacity answer.
func Serving(in ServingInput) *report.Report {
	r := &report.Report{Title: in.Title, Subtitle: in.Subtitle}
	r.Sections = append(r.Sections, report.Section{Title: "Setup", Lines: in.Setup})
	if c := in.Capacity; c != nil {
		r.Sections = append(r.Sections, report.Section{Title: "Capacity", Lines: []string{CapacityLine(c)}})
	}
	for _, f := range in.Frontiers {
		if len(f.Points) == 0 {
			continue
		}
		lines := []string{fmt.Sprintf("%s: %d runs, %d on the front (tokens/s per user = 1000 / median TPOT).", f.Group, len(f.Points), len(f.Front))}
		if f.Chosen >= 0 {
			p := f.Points[f.Chosen]
			lines = append(lines, fmt.Sprintf("chosen: %s, %.1f output tokens/s per GPU at %.1f tokens/s per user (median TPOT %.1f ms, TTFT %.0f ms)",
				p.Load, p.TokensPerSPerGPU, p.TokensPerSPerUser, p.MedianTPOTMs, p.MedianTTFTMs))
		}
		title := "Throughput per GPU against speed per user"
		if len(in.Frontiers) > 1 {
			title += ", " + f.Group
		}
		r.Sections = append(r.Sections, report.Section{Title: title, Lines: lines, Scatter: ServingScatter(f)})
	}
	if len(in.Runs) > 0 {
		t := &report.Table{Columns: []report.Column{{Name: "load"}, {Name: "requests", Numeric: true}, {Name: "TTFT p50 ms", Numeric: true},
			{Name: "TTFT p99 ms", Numeric: true}, {Name: "TPOT p50 ms", Numeric: true}, {Name: "TPOT p99 ms", Numeric: true},
			{Name: "out tok/s", Numeric: true}, {Name: "tok/s/GPU", Numeric: true}, {Name: "tok/s/user", Numeric: true}, {Name: "SLO"}}}
		for _, res := range in.Runs {
			ttft50, ttft99 := f1(res.TTFTMs.P50), f1(res.TTFTMs.P99)
			tpot50, tpot99 := f1(res.TPOTMs.P50), f1(res.TPOTMs.P99)
			tone, slo := "", "-"
			if res.SLO.TTFTMs > 0 || res.SLO.TPOTMs > 0 {
				slo, tone = "no", "bad"
				switch {
				case res.MeetsSLO:
					slo, tone = "yes", "good"
				case res.TooShort:
					slo, tone = "too short", "warn"
				}
			}
			if res.QueueGrows {
				ttft50, ttft99 = "unbounded", "unbounded"
			}
			if res.TPOTUnbounded() {
				tpot50, tpot99 = "unbounded", "unbounded"
			}
			if !res.TPOTTimed() {
				tpot50, tpot99 = "-", "-"
			}
			if res.Overloaded {
				slo, tone = "overloaded", "bad"
			}
			user := "-"
			if res.TPOTTimed() && res.TPOTMs.P50 > 0 {
				user = f1(1000 / res.TPOTMs.P50)
			}
			t.Rows = append(t.Rows, report.Row{Tone: tone, Cells: []string{res.Load, strconv.Itoa(res.Requests), ttft50, ttft99, tpot50, tpot99,
				f1(res.OutputTokensPerS), f1(res.OutputTokensPerSPerGPU), user, slo}})
		}
		r.Sections = append(r.Sections, report.Section{Title: "Runs", Table: t})
	}
	for _, lc := range in.Compare {
		m := lc.Measured
		lines := append([]string{fmt.Sprintf("%s record %d (%s): %s, %d requests, mean %.0f prompt / %.0f output tokens", m.File, m.Record, m.Format, m.Label(), m.Completed, m.MeanPrompt(), m.MeanOutput())},
			lc.TrafficNotes...)
		lines = append(lines, lc.Notes...)
		if v := SLOVerdictLine(lc); v != "" {
			lines = append(lines, v)
		}
		r.Sections = append(r.Sections, report.Section{Title: "Predicted against measured: " + m.Label(), Lines: lines, Table: ComparisonTable(lc)})
	}
	return r
}

// ComparisonTable is one level's predicted-against-measured table: a row
// per latency (mean, p50, p90, p99 as "predicted / measured (error)") and
// per throughput; a row whose reported statistics are all within 10 % is
// good, one off by more than 20 % anywhere is bad.
func ComparisonTable(lc *serving.LevelComparison) *report.Table {
	t := &report.Table{Columns: []report.Column{{Name: "metric"}, {Name: "mean"}, {Name: "p50"}, {Name: "p90"}, {Name: "p99"}}}
	names := map[string]string{"ttft_ms": "TTFT ms", "tpot_ms": "TPOT ms", "itl_ms": "ITL ms", "e2e_ms": "E2E ms",
		"output_tokens_per_s": "output tok/s", "total_tokens_per_s": "total tok/s", "requests_per_s": "requests/s"}
	tone := func(errs []float64) string {
		worst, any := 0.0, false
		for _, e := range errs {
			if !math.IsNaN(e) {
				worst, any = math.Max(worst, math.Abs(e)), true
			}
		}
		switch {
		case !any:
			return ""
		case worst <= 0.10:
			return "good"
		case worst > 0.20:
			return "bad"
		}
		return "warn"
	}
	for _, metric := range []string{"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"} {
		row := []string{names[metric]}
		var errs []float64
		for _, st := range []string{"mean", "p50", "p90", "p99"} {
			c := lc.Get(metric, st)
			row = append(row, CompareCell(c))
			errs = append(errs, c.ErrFrac())
		}
		t.Rows = append(t.Rows, report.Row{Cells: row, Tone: tone(errs)})
	}
	for _, metric := range []string{"output_tokens_per_s", "total_tokens_per_s", "requests_per_s"} {
		c := lc.Get(metric, "")
		t.Rows = append(t.Rows, report.Row{Cells: []string{names[metric], CompareCell(c), "", "", ""}, Tone: tone([]float64{c.ErrFrac()})})
	}
	return t
}

// SLOVerdictLine is a level's SLO verdict in one line: the simulation's
// (met or not, its goodput) beside the measured level's by its own
// percentiles; "" without an SLO.
func SLOVerdictLine(lc *serving.LevelComparison) string {
	r := lc.Result
	if r.SLO.TTFTMs <= 0 && r.SLO.TPOTMs <= 0 {
		return ""
	}
	verdict := func(ok bool) string {
		if ok {
			return "met"
		}
		return "not met"
	}
	pred := verdict(r.MeetsSLO)
	switch {
	case r.Overloaded:
		pred += " (overloaded)"
	case r.TooShort:
		pred = "not judged (too short to reach steady state)"
	}
	meas := "not judged (the file does not report that percentile)"
	if lc.MeasuredMeetsSLO != nil {
		meas = verdict(*lc.MeasuredMeetsSLO)
	}
	goodput := "goodput not judged"
	if r.GoodputJudged() {
		goodput = fmt.Sprintf("goodput %.3f req/s", r.GoodputRequestsPerS)
	}
	return fmt.Sprintf("SLO %s: predicted %s, %s; measured %s", r.SLO, pred, goodput, meas)
}

// CompareCell is "predicted / measured (+x.x %)", or the prediction and
// "not reported"; an unbounded prediction (an overloaded simulation's
// TTFT or E2E) is "unbounded", with no error.
func CompareCell(c serving.MetricCompare) string {
	if c.Unbounded {
		if math.IsNaN(c.Measured) {
			return "unbounded / not reported"
		}
		return "unbounded / " + f1(c.Measured)
	}
	if math.IsNaN(c.Measured) {
		if math.IsNaN(c.Predicted) {
			return "-"
		}
		return f1(c.Predicted) + " / not reported"
	}
	return fmt.Sprintf("%s / %s (%+.1f %%)", f1(c.Predicted), f1(c.Measured), 100*c.ErrFrac())
}

// CapacityLine says how many copies, GPUs and boxes carry a target rate.
// Where the instance's GPUs do not divide the box's, it says how many
// instances a box holds and the GPUs idle in each.
func CapacityLine(c *serving.Capacity) string {
	boxes := fmt.Sprintf("%s of %s", count(c.Boxes, "box", "boxes"), count(c.BoxGPUs, "GPU", "GPUs"))
	if idle := c.BoxGPUs - c.InstancesPerBox*c.InstanceGPUs; idle > 0 {
		boxes += fmt.Sprintf(" (%s of %s a box, %s idle in each)", count(c.InstancesPerBox, "instance", "instances"), count(c.InstanceGPUs, "GPU", "GPUs"), count(idle, "GPU", "GPUs"))
	}
	tpot := fmt.Sprintf(", TPOT p99 %.1f ms", c.Check.TPOTMs.P99)
	if !c.Check.TPOTTimed() {
		tpot = "" // one-token outputs: no TPOT was timed
	}
	return fmt.Sprintf("%g requests/s within the SLO: %s of the deployment (%.4g req/s each at most, %s each) = %s on %s; one copy at %.4g req/s: TTFT p99 %.0f ms%s",
		c.TargetQPS, count(c.Copies, "copy", "copies"), c.PerCopyQPS, count(c.GPUsPerCopy, "GPU", "GPUs"), count(c.GPUs, "GPU", "GPUs"), boxes, c.Check.QPS, c.Check.TTFTMs.P99, tpot)
}

// count writes n with its noun, singular for one: "1 copy", "4 copies".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// f1 writes a value with about four significant digits.
func f1(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "-"
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

// Plan builds the report of a capacity-planning sweep: a capacity chart
// per context (PlanScatter) and the fronts' table, each context's best
// marked.
func Plan(title string, lines []string, res *plan.Result) *report.Report {
	r := &report.Report{Title: title}
	r.Sections = append(r.Sections, report.Section{Title: "Sweep", Lines: lines})
	for _, cx := range PlanContexts(res) {
		r.Sections = append(r.Sections, report.Section{Title: fmt.Sprintf("Throughput per GPU against speed per request, context %d", cx), Scatter: PlanScatter(res, cx)})
	}
	t := &report.Table{Columns: []report.Column{{Name: "context", Numeric: true}, {Name: "topology"}, {Name: "gpus", Numeric: true}, {Name: "plan"}, {Name: "kv"},
		{Name: "batch", Numeric: true}, {Name: "ms/token", Numeric: true}, {Name: "tok/s/req", Numeric: true}, {Name: "tok/s/GPU", Numeric: true}}}
	n := 0
	for _, f := range res.Fronts {
		for _, i := range f.Points {
			p := &res.Points[i]
			tone := ""
			if slices.Contains(res.BestByContext, i) {
				tone = "good"
			}
			t.Rows = append(t.Rows, report.Row{Tone: tone, Cells: []string{strconv.Itoa(p.Context), p.Topology, strconv.Itoa(p.GPUs), p.Plan, p.KVDtype, strconv.Itoa(p.Batch),
				strconv.FormatFloat(p.MsPerToken, 'f', 2, 64), f1(p.TokensPerSPerRequest), f1(p.TokensPerSPerGPU)}})
			n++
		}
	}
	r.Sections = append(r.Sections, report.Section{Title: fmt.Sprintf("Pareto fronts, one per context and box (%d fronts, %d points; each context's best marked)", len(res.Fronts), n), Table: t})
	return r
}
