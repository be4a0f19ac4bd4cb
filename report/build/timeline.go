package build

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/tpscope/tpscope/internal/units"

	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/internal/stats"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/report"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/traces"
	"github.com/tpscope/tpscope/traces/schema"
	"go.opentelemetry.io/otel/trace"
)

// kindOrder is the legend order of the op kinds.
var kindOrder = []model.OpKind{model.KindGEMM, model.KindMoEGEMM, model.KindAttention, model.KindNorm,
	model.KindElementwise, model.KindRouter, model.KindEmbedding, model.KindCollective}

// measuredStep is the one measured step a timeline draws.
type measuredStep struct {
	source   string
	traceID  trace.TraceID
	step     int
	spans    []*traces.Span // op spans of the step, every rank
	startNs  int64          // earliest start of a run op span (Unix ns)
	extentUs float64        // longest rank's first start to last end
	of       int            // (trace, step) pairs the step was chosen among
}

func skipped(s *traces.Span) bool {
	v, ok := s.Attr(string(schema.AttrSkipped))
	return ok && v.Type() == traces.TypeBool && v.AsBool()
}

// ran: a span that took part in the step (a positive duration, a start,
// not skipped), as compare.Align counts steps.
func ran(s *traces.Span) bool { return !skipped(s) && s.Duration > 0 && s.Start > 0 }

// stepsOf splits one trace's op spans by step, in order of appearance.
func stepsOf(src string, tr []traces.Span) []*measuredStep {
	var out []*measuredStep
	byStep := map[int]*measuredStep{}
	for i := range tr {
		s := &tr[i]
		if !traces.IsOpSpan(s) || s.Start <= 0 {
			continue
		}
		m := byStep[s.Step]
		if m == nil {
			m = &measuredStep{source: src, traceID: s.TraceID, step: s.Step}
			byStep[s.Step] = m
			out = append(out, m)
		}
		m.spans = append(m.spans, s)
	}
	for _, m := range out {
		lo, hi := map[int]int64{}, map[int]int64{}
		for _, s := range m.spans {
			if !ran(s) {
				continue
			}
			r := max(s.Rank, 0)
			if l, ok := lo[r]; !ok || s.Start < l {
				lo[r] = s.Start
			}
			if s.End() > hi[r] {
				hi[r] = s.End()
			}
			if m.startNs == 0 || s.Start < m.startNs {
				m.startNs = s.Start
			}
		}
		for r := range lo {
			m.extentUs = math.Max(m.extentUs, float64(hi[r]-lo[r])/1e3)
		}
		if m.startNs == 0 { // nothing ran: the earliest span anchors the step
			for _, s := range m.spans {
				if m.startNs == 0 || s.Start < m.startNs {
					m.startNs = s.Start
				}
			}
		}
	}
	return out
}

// pickStep returns the step of sr's traces (the spans compare aligned
// with its prediction) whose extent is nearest the measured median step,
// the earliest such; nil when no trace has an op span.
func pickStep(sr *compare.ScenarioReport) *measuredStep {
	// A trace keeps no source name: one source names them all, several
	// are listed.
	src := strings.Join(sr.Sources, " or ")
	var best *measuredStep
	bestD, n := math.Inf(1), 0
	for _, tr := range sr.TraceSpans {
		for _, m := range stepsOf(src, tr) {
			n++
			if d := math.Abs(m.extentUs - sr.Step.MedianUs); d < bestD {
				best, bestD = m, d
			}
		}
	}
	if best != nil {
		best.of = n
	}
	return best
}

// built is a timeline and the lines that explain it.
type built struct {
	t     *report.Timeline
	lines []string
}

// newTimeline draws pr per rank (symmetric: rank 0 repeated over the
// plan's ranks) and, when ms is given, the measured step below each
// measured rank's predicted lane. al and rows (a comparison's alignment
// and op rows) add the measured statistics to each op's fields.
func newTimeline(pr *sim.Prediction, sched *model.Schedule, al *compare.Alignment, rows []compare.OpRow, ms *measuredStep) built {
	world := worldOf(pr, sched)
	t := &report.Timeline{}
	var lines []string

	// The catalog: one entry per predicted op, with its measured row.
	unitOf := make([]int, len(pr.Ops))
	for i := range unitOf {
		unitOf[i] = -1
	}
	if al != nil {
		for u := range al.Units {
			for _, i := range al.Units[u].Ops {
				if i >= 0 && i < len(unitOf) {
					unitOf[i] = u
				}
			}
		}
	}
	rowOf := map[string]*compare.OpRow{}
	for i := range rows {
		rowOf[rows[i].Key+"|"+strconv.Itoa(rows[i].Rank)] = &rows[i]
	}
	t.Ops = make([]report.Op, len(pr.Ops), len(pr.Ops)+16)
	for i := range pr.Ops {
		op := &pr.Ops[i]
		var u *compare.Unit
		var row *compare.OpRow
		if unitOf[i] >= 0 {
			u = &al.Units[unitOf[i]]
			row = rowOf[u.Key+"|"+strconv.Itoa(u.Rank)]
		}
		t.Ops[i] = report.Op{ID: op.ID, Kind: string(op.Kind), Fields: opFields(op, al != nil, u, row)}
	}

	// Predicted ops per rank, by start.
	perRank := make([][]int, world)
	idByRank := make([]map[string]int, world)
	for r := range idByRank {
		idByRank[r] = map[string]int{}
	}
	if pr.Symmetric {
		all := make([]int, len(pr.Ops))
		for i := range all {
			all[i] = i
			idByRank[0][pr.Ops[i].ID] = i
		}
		sort.SliceStable(all, func(a, b int) bool { return pr.Ops[all[a]].StartUs < pr.Ops[all[b]].StartUs })
		for r := range perRank {
			perRank[r] = all
			idByRank[r] = idByRank[0]
		}
	} else {
		for i := range pr.Ops {
			r := pr.Ops[i].Rank
			if r < 0 || r >= world {
				continue
			}
			perRank[r] = append(perRank[r], i)
			idByRank[r][pr.Ops[i].ID] = i
		}
		for r := range perRank {
			ops := perRank[r]
			sort.SliceStable(ops, func(a, b int) bool { return pr.Ops[ops[a]].StartUs < pr.Ops[ops[b]].StartUs })
		}
	}
	crit := make([]bool, len(pr.Ops))
	for _, i := range pr.CriticalPath {
		if i >= 0 && i < len(crit) {
			crit[i] = true
		}
	}

	// Measured spans per rank, by start.
	var measured map[int][]*traces.Span
	if ms != nil {
		measured = map[int][]*traces.Span{}
		for _, s := range ms.spans {
			r := max(s.Rank, 0)
			measured[r] = append(measured[r], s)
		}
		for _, ss := range measured {
			sort.SliceStable(ss, func(a, b int) bool { return ss[a].Start < ss[b].Start })
		}
	}
	ranks := world
	for r := range measured {
		ranks = max(ranks, r+1)
	}

	skippedDrawn := 0
	predLane := make([]int, ranks)
	measLane := make([]int, ranks)
	posOf := map[int]map[int]int{} // lane -> op index -> box
	extra := map[string]int{}      // catalog entries of spans without a predicted op
	for r := 0; r < ranks; r++ {
		predLane[r], measLane[r] = -1, -1
		if r < world && len(perRank[r]) > 0 {
			ln := report.Lane{Label: fmt.Sprintf("rank %d predicted", r), Rank: r}
			pos := make(map[int]int, len(perRank[r]))
			for _, i := range perRank[r] {
				op := &pr.Ops[i]
				pos[i] = len(ln.Boxes)
				ln.Boxes = append(ln.Boxes, report.Box{Op: i, StartUs: math.Max(0, op.StartUs), DurUs: math.Max(0, op.Us),
					Critical: crit[i] && (!pr.Symmetric || r == 0)})
				t.EndUs = math.Max(t.EndUs, op.StartUs+op.Us)
			}
			predLane[r] = len(t.Lanes)
			posOf[predLane[r]] = pos
			t.Lanes = append(t.Lanes, ln)
		}
		if ss := measured[r]; len(ss) > 0 {
			measLane[r] = len(t.Lanes)
			ln, pos := measuredLane(t, extra, pr, r, world, idByRank, ss, ms.startNs)
			for _, b := range ln.Boxes {
				t.EndUs = math.Max(t.EndUs, b.StartUs+b.DurUs)
			}
			posOf[measLane[r]] = pos
			t.Lanes = append(t.Lanes, ln)
			skippedDrawn += skippedN(ss)
		}
	}

	// Collectives across their group: the predicted lanes, then the
	// measured ones.
	groupOf := func(r, i int) []int {
		if sched == nil || r >= len(sched.Ranks) {
			return nil
		}
		ops := sched.Ranks[r]
		id := pr.Ops[i].ID
		local := i
		if !pr.Symmetric {
			local = -1
			for j := range ops { // asymmetric schedules: find the op by ID
				if ops[j].ID == id {
					local = j
					break
				}
			}
		}
		if local < 0 || local >= len(ops) || ops[local].ID != id {
			return nil
		}
		return ops[local].Group
	}
	linkAcross := func(lanes []int) {
		seen := map[string]bool{}
		for r := 0; r < min(ranks, world); r++ {
			if predLane[r] < 0 {
				continue
			}
			for _, i := range perRank[r] {
				if pr.Ops[i].Kind != model.KindCollective {
					continue
				}
				g := groupOf(r, i)
				if len(g) < 2 {
					continue
				}
				key := pr.Ops[i].ID + "|" + fmt.Sprint(g)
				if seen[key] {
					continue
				}
				seen[key] = true
				var k report.Link
				for _, m := range g {
					if m < 0 || m >= len(lanes) || lanes[m] < 0 || m >= world {
						continue
					}
					oi, ok := idByRank[m][pr.Ops[i].ID]
					if !ok {
						continue
					}
					if b, ok := posOf[lanes[m]][oi]; ok {
						k.Boxes = append(k.Boxes, report.BoxRef{Lane: lanes[m], Box: b})
					}
				}
				if len(k.Boxes) > 1 {
					t.Links = append(t.Links, k)
				}
			}
		}
	}
	linkAcross(predLane)
	linkAcross(measLane)

	// Legend: the known kinds present, in order, then any other.
	present := map[string]bool{}
	for _, o := range t.Ops {
		present[o.Kind] = true
	}
	for _, k := range kindOrder {
		if present[string(k)] {
			t.Kinds = append(t.Kinds, string(k))
			delete(present, string(k))
		}
	}
	var rest []string
	for k := range present {
		rest = append(rest, k)
	}
	sort.Strings(rest)
	t.Kinds = append(t.Kinds, rest...)

	if pr.Symmetric && world > 1 {
		lines = append(lines, fmt.Sprintf("predicted: every rank runs the same ops, so rank 0's simulated step is drawn for each of the %d ranks; the critical path is marked on rank 0", world))
	}
	if skippedDrawn > 0 {
		lines = append(lines, fmt.Sprintf("%d measured ops were not run by the backend (tpscope.skipped): each is a tick where it would have run, after the op before it", skippedDrawn))
	}
	switch {
	case ms != nil:
		var mr []string
		for r := 0; r < ranks; r++ {
			if measLane[r] >= 0 {
				mr = append(mr, strconv.Itoa(r))
			}
		}
		lines = append(lines, fmt.Sprintf("measured: step %d of %s (trace %s), whose extent %.1f us is the nearest of %d measured steps to their median; ranks measured: %s; hover an op for its median and spread over every step",
			ms.step, ms.source, ms.traceID, ms.extentUs, ms.of, strings.Join(mr, ", ")))
	case al != nil:
		lines = append(lines, "no measured step to draw: the traces hold no op span of this scenario")
	}
	return built{t: t, lines: lines}
}

// measuredLane lays out one rank's spans of the drawn step: times from
// the step's start (startNs). A span the backend skipped has no device
// time of its own (its span sits at its host launch), so it is placed at
// the end of the measured op before it in the rank's issue order. pos maps
// a catalog op to its first box (for links).
func measuredLane(t *report.Timeline, extra map[string]int, pr *sim.Prediction, r, world int, idByRank []map[string]int, ss []*traces.Span, startNs int64) (report.Lane, map[int]int) {
	ln := report.Lane{Label: fmt.Sprintf("rank %d measured", r), Rank: r, Measured: true}
	ops := make([]int, len(ss))
	endOf := map[int]float64{}
	for k, s := range ss {
		ops[k] = -1
		if s.OpID != "" && r < world {
			if i, ok := idByRank[r][s.OpID]; ok {
				ops[k] = i
			}
		}
		if ran(s) && ops[k] >= 0 {
			end := float64(s.End()-startNs) / 1e3
			endOf[ops[k]] = math.Max(endOf[ops[k]], end)
		}
	}
	for k, s := range ss {
		oi := ops[k]
		start := math.Max(0, float64(s.Start-startNs)/1e3)
		dur := 0.0
		if ran(s) {
			dur = float64(s.Duration) / 1e3
		} else if oi >= 0 {
			start = 0
			// The previous op of this rank in issue order (pr.Ops holds each
			// rank's ops in issue order) that ran.
			for j := oi - 1; j >= 0 && (pr.Symmetric || pr.Ops[j].Rank == pr.Ops[oi].Rank); j-- {
				if e, ok := endOf[j]; ok {
					start = math.Max(0, e)
					break
				}
			}
		}
		if oi < 0 {
			oi = extraOp(t, extra, s)
		}
		ln.Boxes = append(ln.Boxes, report.Box{Op: oi, StartUs: start, DurUs: dur})
	}
	sort.SliceStable(ln.Boxes, func(a, b int) bool { return ln.Boxes[a].StartUs < ln.Boxes[b].StartUs })
	pos := map[int]int{}
	for k, b := range ln.Boxes {
		if _, dup := pos[b.Op]; !dup {
			pos[b.Op] = k
		}
	}
	return ln, pos
}

func skippedN(ss []*traces.Span) int {
	n := 0
	for _, s := range ss {
		if skipped(s) {
			n++
		}
	}
	return n
}

// extraOp returns the catalog entry of a measured span no predicted op
// stands for (a kernel of a profiler trace, an unknown op ID), adding it
// once per name and kind.
func extraOp(t *report.Timeline, extra map[string]int, s *traces.Span) int {
	id, why := s.OpID, "op ID not in the prediction"
	if id == "" {
		id, why = s.Name, "kernel without an op ID (profiler trace): compared by kind and order"
	}
	kind := s.OpKind
	if kind == "" {
		kind = "other"
	}
	key := id + "|" + kind
	if i, ok := extra[key]; ok {
		return i
	}
	f := []report.Field{{Name: "measured", Value: why}}
	if v, ok := s.Attr(string(schema.AttrKernel)); ok && v.AsString() != "" && v.AsString() != id {
		f = append(f, report.Field{Name: "kernel", Value: v.AsString()})
	}
	if skipped(s) {
		f = append(f, report.Field{Name: "run", Value: "skipped by the backend (tpscope.skipped)"})
	}
	t.Ops = append(t.Ops, report.Op{ID: id, Kind: kind, Fields: f})
	extra[key] = len(t.Ops) - 1
	return len(t.Ops) - 1
}

// opFields are the hover rows of a predicted op: where it sits, what it
// costs and why, and, in a comparison, what was measured.
func opFields(op *sim.OpResult, compared bool, u *compare.Unit, row *compare.OpRow) []report.Field {
	var f []report.Field
	add := func(name, format string, a ...any) {
		f = append(f, report.Field{Name: name, Value: fmt.Sprintf(format, a...)})
	}
	if op.Layer >= 0 {
		add("block", "%s, layer %d, rank %d", op.Block, op.Layer, op.Rank)
	} else {
		add("block", "%s, rank %d", op.Block, op.Rank)
	}
	pred := fmt.Sprintf("%.2f us device time", op.Us)
	if op.OverheadUs > 0 {
		pred += fmt.Sprintf(" (incl. %.2f us launch gap)", op.OverheadUs)
	}
	if op.LaunchUs > 0 {
		pred += fmt.Sprintf("; host launch %.2f us", op.LaunchUs)
	}
	add("predicted", "%s", pred)
	add("released by", "%s", op.WaitedOn)
	add("bound", "%s", op.Bound)
	if op.FLOPs > 0 {
		add("FLOPs", "%s", units.Count(op.FLOPs))
	}
	if op.Bytes > 0 {
		add("bytes", "%s", units.Bytes(op.Bytes))
	}
	c := &op.Cost
	if op.Kind == model.KindCollective {
		if op.CommBytes > 0 {
			add("message", "%s per rank", units.Bytes(float64(op.CommBytes)))
		}
		if c.Algo != "" || c.Proto != "" {
			add("algorithm", "%s %s", c.Algo, c.Proto)
		}
		add("latency part", "%.2f us", c.LatencyUs)
		add("link part", "%.2f us", c.LinkUs)
	} else {
		if c.PeakTFLOPS > 0 {
			add("compute", "%.2f us = FLOPs / (%s peak %.0f TFLOPS x efficiency %.2f x fill %.2f)", c.ComputeUs, c.ComputeDtype, c.PeakTFLOPS, c.Efficiency, c.Fill)
		}
		if c.MemGBps > 0 {
			add("memory", "%.2f us = bytes / %.0f GB/s (%.0f CTAs)", c.MemoryUs, c.MemGBps, c.CTAs)
		}
		if c.DequantUs > 0 {
			add("dequantization", "%.2f us (part of compute)", c.DequantUs)
		}
		if c.RampUs > 0 {
			add("ramp", "%.2f us (fixed time beside the roofline: the floor of a catalog device, or calibrated)", c.RampUs)
		}
		if c.MinKernelUs > 0 {
			add("floor", "%.2f us minimum kernel time", c.MinKernelUs)
		}
	}
	if c.Fused {
		add("fused", "folded into its neighbour")
	}
	switch {
	case row != nil:
		if u != nil && len(u.Ops) > 1 {
			add("measured as", "%s (%d ops together)", u.Key, len(u.Ops))
		}
		add("measured median", "%.2f us", row.MedianUs)
		add("measured p10-p90", "%.2f-%.2f us", row.P10Us, row.P90Us)
		add("samples", "%d (steps x ranks)", row.N)
		add("error", "%+.1f %% (predicted %.2f us)", row.ErrPct, row.PredictedUs)
	case u != nil && u.Skipped:
		add("measured", "not run by the backend (tpscope.skipped)")
	case compared:
		add("measured", "never measured")
	}
	return f
}

// costLine is an op's cost in one line (the longest-ops table).
func costLine(op *sim.OpResult) string {
	c := &op.Cost
	if op.Kind == model.KindCollective {
		return fmt.Sprintf("%s, %s %s, latency %.1f us + link %.1f us", units.Bytes(float64(op.CommBytes)), c.Algo, c.Proto, c.LatencyUs, c.LinkUs)
	}
	return fmt.Sprintf("%s FLOP, %s; compute %.1f us, memory %.1f us", units.Count(op.FLOPs), units.Bytes(op.Bytes), c.ComputeUs, c.MemoryUs)
}

// layerLabel names an op's layer ("L07") or, outside the decoder layers,
// its block ("embed", "head", "mtp").
func layerLabel(op *sim.OpResult) string {
	if op.Layer >= 0 {
		return fmt.Sprintf("L%02d", op.Layer)
	}
	if op.Block != "" {
		return op.Block
	}
	if i := strings.IndexByte(op.ID, '.'); i > 0 {
		return op.ID[:i]
	}
	return op.ID
}

// layerBars: per layer, rank 0's predicted time (the ops' SpanUs, as the
// op and kind rows have it, without ops the backend skipped or the traces
// never measured) and, with an alignment, the median (p10-p90) over
// (trace, step, rank) of the layer's summed samples. Units whose ops span
// several layers (kind totals of a profiler trace) count in no layer. Nil
// for fewer than two layers. measured says whether any layer has a measured value (a
// profiler trace compared per kind and step resolves none; the bars are
// then the prediction alone).
func layerBars(pr *sim.Prediction, al *compare.Alignment) (b *report.Bars, measured bool) {
	// skip: ops whose time the measured sums hold none of, as the per-kind
	// rows leave them out: those the backend skipped, those never measured.
	skip := make([]bool, len(pr.Ops))
	unitLabel := map[int32]string{}
	if al != nil {
		never := al.NeverMeasured(nil)
		for u := range al.Units {
			unit := &al.Units[u]
			lab := ""
			for k, i := range unit.Ops {
				if i < 0 || i >= len(pr.Ops) {
					lab = ""
					break
				}
				l := layerLabel(&pr.Ops[i])
				if k == 0 {
					lab = l
				} else if l != lab {
					lab = ""
					break
				}
			}
			unitLabel[int32(u)] = lab
			if unit.Skipped || never[u] {
				for _, i := range unit.Ops {
					if i >= 0 && i < len(skip) {
						skip[i] = true
					}
				}
			}
		}
	}
	// A layer none of whose ops ran or was measured (the layers a shorter
	// stack than the model never had) gets no bar.
	var order []string
	pred := map[string]float64{}
	for i := range pr.Ops {
		op := &pr.Ops[i]
		if (!pr.Symmetric && op.Rank != 0) || skip[i] {
			continue
		}
		l := layerLabel(op)
		if _, ok := pred[l]; !ok {
			order = append(order, l)
		}
		pred[l] += op.SpanUs() // the figure the op rows and kinds set beside spans
	}
	if len(order) < 2 {
		return nil, false
	}
	b = &report.Bars{Unit: "us", Series: []string{"predicted"}}
	// One sample per step of each trace and rank, as the per-kind rows.
	type sk struct{ trace, step, rank int32 }
	sums := map[string]map[sk]float64{}
	if al != nil {
		for _, s := range al.Samples {
			l := unitLabel[s.Unit]
			if l == "" || (!pr.Symmetric && s.Rank != 0) {
				continue
			}
			if sums[l] == nil {
				sums[l] = map[sk]float64{}
			}
			sums[l][sk{s.Trace, s.Step, s.Rank}] += s.Us
		}
	}
	measured = len(sums) > 0
	if measured {
		b.Series = append(b.Series, "measured median (p10-p90)")
	}
	for _, l := range order {
		row := report.BarRow{Label: l, Values: []report.BarValue{{V: pred[l]}}}
		if measured {
			m := sums[l]
			if len(m) == 0 {
				row.Values = append(row.Values, report.BarValue{Missing: true})
			} else {
				v := make([]float64, 0, len(m))
				for _, x := range m {
					v = append(v, x)
				}
				sort.Float64s(v)
				med := stats.Quantile(v, 0.5)
				row.Values = append(row.Values, spread(med, stats.Quantile(v, 0.1), stats.Quantile(v, 0.9)))
				if med > 0 {
					row.Note = fmt.Sprintf("%+.1f %%", (pred[l]-med)/med*100)
				}
			}
		}
		b.Rows = append(b.Rows, row)
	}
	return b, measured
}

// spread is a bar with its p10-p90 whisker; interpolated quantiles of equal
// values can differ in the last bit, so lo is capped at hi.
func spread(v, lo, hi float64) report.BarValue {
	return report.BarValue{V: v, Lo: math.Min(lo, hi), Hi: hi}
}
