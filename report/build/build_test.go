package build

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/report"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/traces"
	"github.com/tpscope/tpscope/traces/schema"
	"go.opentelemetry.io/otel/trace"
)

// handStep is a symmetric TP 2 prediction of four ops, back to back:
//
//	0 L00.attn.q_proj    gemm        0-10 us
//	1 L00.attn.allreduce collective 10-15 us  (group 0,1)
//	2 L00.moe.experts    moe_gemm   15-35 us
//	3 head.lm_head       gemm       35-40 us
//
// all on the critical path.
func handStep() (*sim.Prediction, *model.Schedule) {
	ops := []sim.OpResult{
		{ID: "L00.attn.q_proj", Kind: model.KindGEMM, Block: "attn", Layer: 0, StartUs: 0, Us: 10, Bound: sim.BoundMemory, FLOPs: 2e9, Bytes: 4e6},
		{ID: "L00.attn.allreduce", Kind: model.KindCollective, Block: "attn", Layer: 0, StartUs: 10, Us: 5, Bound: sim.BoundLatency, CommBytes: 1 << 20},
		{ID: "L00.moe.experts", Kind: model.KindMoEGEMM, Block: "moe", Layer: 0, StartUs: 15, Us: 20, Bound: sim.BoundMemory},
		{ID: "head.lm_head", Kind: model.KindGEMM, Block: "head", Layer: -1, StartUs: 35, Us: 5, Bound: sim.BoundMemory},
	}
	pr := &sim.Prediction{Model: "hand", Topology: "box", Plan: model.Plan{TP: 2}, Symmetric: true, Ops: ops, CriticalPath: []int{0, 1, 2, 3}}
	pr.StepUs = 40
	sched := &model.Schedule{Plan: pr.Plan}
	for r := 0; r < 2; r++ {
		var rank []model.Op
		for _, o := range ops {
			op := model.Op{ID: o.ID, Kind: o.Kind, Layer: o.Layer, Block: o.Block, Rank: r}
			if o.Kind == model.KindCollective {
				op.Group = []int{0, 1}
			}
			rank = append(rank, op)
		}
		sched.Ranks = append(sched.Ranks, rank)
	}
	return pr, sched
}

func TestReportTimelineOfPrediction(t *testing.T) {
	pr, sched := handStep()
	got := newTimeline(pr, sched, nil, nil, nil).t
	box := func(op int, start, dur float64, crit bool) report.Box {
		return report.Box{Op: op, StartUs: start, DurUs: dur, Critical: crit}
	}
	want := struct {
		Kinds []string
		Lanes []report.Lane
		Links []report.Link
		EndUs float64
	}{
		Kinds: []string{"gemm", "moe_gemm", "collective"},
		Lanes: []report.Lane{
			// The critical path is marked on rank 0 only: rank 0's
			// prediction stands for rank 1.
			{Label: "rank 0 predicted", Rank: 0, Boxes: []report.Box{box(0, 0, 10, true), box(1, 10, 5, true), box(2, 15, 20, true), box(3, 35, 5, true)}},
			{Label: "rank 1 predicted", Rank: 1, Boxes: []report.Box{box(0, 0, 10, false), box(1, 10, 5, false), box(2, 15, 20, false), box(3, 35, 5, false)}},
		},
		// The all-reduce joins both ranks' lanes.
		Links: []report.Link{{Boxes: []report.BoxRef{{Lane: 0, Box: 1}, {Lane: 1, Box: 1}}}},
		EndUs: 40,
	}
	if !reflect.DeepEqual(got.Kinds, want.Kinds) || !reflect.DeepEqual(got.Lanes, want.Lanes) || !reflect.DeepEqual(got.Links, want.Links) || got.EndUs != want.EndUs {
		t.Fatalf("timeline:\n got kinds %v lanes %+v links %+v end %v\nwant kinds %v lanes %+v links %+v end %v",
			got.Kinds, got.Lanes, got.Links, got.EndUs, want.Kinds, want.Lanes, want.Links, want.EndUs)
	}
	if len(got.Ops) != 4 || got.Ops[0].ID != "L00.attn.q_proj" {
		t.Fatalf("catalog %+v: want the four ops in prediction order", got.Ops)
	}
	f := map[string]string{}
	for _, x := range got.Ops[0].Fields {
		f[x.Name] = x.Value
	}
	// 2e9 FLOPs and 4e6 bytes as fmtCount and fmtBytes write them.
	if f["FLOPs"] != "2.00G" || f["bytes"] != "4.00 MB" || f["bound"] != "memory" {
		t.Errorf("hover fields %v", f)
	}
	if _, ok := f["measured"]; ok {
		t.Error("a prediction without traces says something about measurement")
	}
}

// handComparison measures handStep on rank 0 over three steps, one trace
// each, ops back to back with the all-reduce skipped by the backend:
//
//	step  q_proj  experts  lm_head  extent
//	0     10      30       5        45
//	1     12      36       5        53
//	2     14      42       5        61
//
// The median step is 53 us: step 1 is drawn.
func handComparison() *compare.ScenarioReport {
	pr, sched := handStep()
	q := []float64{10, 12, 14}
	ex := []float64{30, 36, 42}
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	var trs [][]traces.Span
	al := &compare.Alignment{Mode: compare.AlignByOpID}
	for i := range pr.Ops {
		al.Units = append(al.Units, compare.Unit{Key: pr.Ops[i].ID, Kind: pr.Ops[i].Kind, Layer: pr.Ops[i].Layer, Rank: -1, Ops: []int{i}, PredictedUs: pr.Ops[i].Us, Skipped: i == 1})
	}
	for step := 0; step < 3; step++ {
		var id trace.TraceID
		id[0] = byte(step + 1)
		var tr []traces.Span
		at := base + int64(step)*int64(time.Second)
		span := func(op int, us float64, skip bool) {
			s := traces.Span{TraceID: id, Name: pr.Ops[op].ID, OpID: pr.Ops[op].ID, OpKind: string(pr.Ops[op].Kind), Layer: pr.Ops[op].Layer,
				Rank: 0, Step: step, Seq: op, KindSeq: -1, Start: at, Duration: time.Duration(us * 1e3)}
			if skip {
				// A skipped collective's span sits at its host launch, before
				// the step's first kernel.
				s.Start, s.Duration = base-int64(time.Millisecond), 0
				s.Attrs = []traces.Attr{{Key: string(schema.AttrSkipped), Value: traces.BoolValue(true)}}
			} else {
				al.Samples = append(al.Samples, compare.Sample{Unit: int32(op), Step: int32(step), Rank: 0, Us: us})
			}
			tr = append(tr, s)
			at += int64(us * 1e3)
		}
		span(0, q[step], false)
		span(1, 0, true)
		span(2, ex[step], false)
		span(3, 5, false)
		trs = append(trs, tr)
	}
	sc := sim.Scenario{Arch: &model.Arch{Name: "hand"}, Plan: pr.Plan, Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 1}, TopoRef: topology.Ref{Name: "box"}}
	return &compare.ScenarioReport{Scenario: sc, Sources: []string{"hand.json"}, Mode: compare.AlignByOpID, Traces: 3, Steps: 3, Ranks: 1,
		Step:       compare.Stat{PredictedUs: 35, MedianUs: 53, P10Us: 46.6, P90Us: 59.4, N: 3},
		Ops:        []compare.OpRow{{Key: "L00.moe.experts", Kind: model.KindMoEGEMM, Layer: 0, Rank: -1, Stat: compare.Stat{PredictedUs: 20, MedianUs: 36, P10Us: 31.2, P90Us: 40.8, N: 3, ErrPct: -44.4}}},
		Prediction: pr, Schedule: sched, Alignment: al, TraceSpans: trs}
}

func TestReportTimelineOfComparison(t *testing.T) {
	sr := handComparison()
	ms := pickStep(sr)
	if ms == nil {
		t.Fatal("pickStep: no step")
	}
	if ms.step != 1 || ms.of != 3 || math.Abs(ms.extentUs-53) > 1e-9 {
		t.Fatalf("drew step %d of %d (extent %v us); want step 1 of 3, extent 53 us", ms.step, ms.of, ms.extentUs)
	}
	tl := newTimeline(sr.Prediction, sr.Schedule, sr.Alignment, sr.Ops, ms).t
	// Lanes: rank 0 predicted, rank 0 measured, rank 1 predicted.
	if len(tl.Lanes) != 3 || !tl.Lanes[1].Measured || tl.Lanes[1].Rank != 0 || tl.Lanes[2].Rank != 1 {
		t.Fatalf("lanes %+v", tl.Lanes)
	}
	// Step 1 from its first kernel: q_proj 0-12, the skipped all-reduce a
	// tick at q_proj's end (12), experts 12-48, lm_head 48-53.
	want := []report.Box{{Op: 0, StartUs: 0, DurUs: 12}, {Op: 1, StartUs: 12, DurUs: 0}, {Op: 2, StartUs: 12, DurUs: 36}, {Op: 3, StartUs: 48, DurUs: 5}}
	if !reflect.DeepEqual(tl.Lanes[1].Boxes, want) {
		t.Fatalf("measured boxes %+v, want %+v", tl.Lanes[1].Boxes, want)
	}
	if tl.EndUs != 53 {
		t.Errorf("end %v us, want 53 (the measured step is longer than the predicted 40)", tl.EndUs)
	}
	fields := func(op int) map[string]string {
		m := map[string]string{}
		for _, f := range tl.Ops[op].Fields {
			m[f.Name] = f.Value
		}
		return m
	}
	if f := fields(2); f["measured median"] != "36.00 us" || f["measured p10-p90"] != "31.20-40.80 us" || f["samples"] != "3 (steps x ranks)" {
		t.Errorf("experts' hover %v: want the op row's median, spread and samples", f)
	}
	if f := fields(1); f["measured"] != "not run by the backend (tpscope.skipped)" {
		t.Errorf("all-reduce's hover %v: want it marked skipped", f)
	}
	if f := fields(3); f["measured"] != "never measured" {
		t.Errorf("lm_head has no op row: hover %v, want 'never measured'", f)
	}

	// Per layer: L00 measured per step = q_proj + experts = 40, 48, 56:
	// median 48, p10 = 40 + 0.2 x 8 = 41.6, p90 = 48 + 0.8 x 8 = 54.4 (R
	// type 7); predicted 10 + 20 = 30 (the skipped all-reduce left out).
	// head: 5 us every step, predicted 5.
	lb, measured := layerBars(sr.Prediction, sr.Alignment)
	if !measured {
		t.Fatal("layer bars without a measured layer")
	}
	wantRows := []struct {
		label         string
		pred, med, lo float64
		hi            float64
	}{{"L00", 30, 48, 41.6, 54.4}, {"head", 5, 5, 5, 5}}
	if lb == nil || len(lb.Rows) != len(wantRows) {
		t.Fatalf("layer bars %+v", lb)
	}
	for i, w := range wantRows {
		r := lb.Rows[i]
		p, m := r.Values[0], r.Values[1]
		if r.Label != w.label || math.Abs(p.V-w.pred) > 1e-9 || math.Abs(m.V-w.med) > 1e-9 || math.Abs(m.Lo-w.lo) > 1e-9 || math.Abs(m.Hi-w.hi) > 1e-9 {
			t.Errorf("row %d: %s predicted %v measured %+v; want %s %v, %v (%v-%v)", i, r.Label, p.V, m, w.label, w.pred, w.med, w.lo, w.hi)
		}
	}

	// The whole report builds and validates.
	r, err := Build(Input{Comparison: &compare.Report{Scenarios: []compare.ScenarioReport{*sr}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.BoxCount() != 12 {
		t.Errorf("%d boxes, want 12 (3 lanes x 4 ops)", r.BoxCount())
	}
}

// pickStep draws from the traces compare grouped into the scenario and
// from nothing else.
func TestReportPickStepOfScenarioTraces(t *testing.T) {
	cases := []struct {
		name    string
		traces  func([][]traces.Span) [][]traces.Span
		wantNil bool
		step    int // the step drawn when not nil
	}{
		{"all three traces", func(t [][]traces.Span) [][]traces.Span { return t }, false, 1},
		// Steps 0 (45 us) and 2 (61 us) are 8 us from the 53 us median
		// each: the earlier one is drawn.
		{"without the median step", func(t [][]traces.Span) [][]traces.Span { return [][]traces.Span{t[0], t[2]} }, false, 0},
		{"no traces", func([][]traces.Span) [][]traces.Span { return nil }, true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := *handComparison()
			s.TraceSpans = c.traces(s.TraceSpans)
			ms := pickStep(&s)
			if (ms == nil) != c.wantNil {
				t.Fatalf("pickStep = %+v, want nil: %v", ms, c.wantNil)
			}
			if ms != nil && ms.step != c.step {
				t.Fatalf("drew step %d, want %d", ms.step, c.step)
			}
		})
	}
}

func TestReportBuildNeedsInput(t *testing.T) {
	if _, err := Build(Input{}); err == nil || !strings.Contains(err.Error(), "nothing to show") {
		t.Fatalf("Build(empty) = %v", err)
	}
}

// A profiler trace compared per kind and step has units spanning layers:
// no layer gets a measured value and the bars are the prediction alone.
func TestReportLayerBarsUnresolved(t *testing.T) {
	pr, _ := handStep()
	al := &compare.Alignment{Mode: compare.AlignByKindOrder,
		Units:   []compare.Unit{{Key: "step:gemm", Kind: model.KindGEMM, Layer: -1, Rank: -1, Ops: []int{0, 3}, PredictedUs: 15}},
		Samples: []compare.Sample{{Unit: 0, Step: 0, Us: 20}, {Unit: 0, Step: 1, Us: 22}}}
	lb, measured := layerBars(pr, al)
	if measured || lb == nil || len(lb.Series) != 1 {
		t.Fatalf("bars %+v, measured %v: want predicted-only bars", lb, measured)
	}
	// L00 = 10 + 5 + 20, head = 5 (nothing skipped).
	if len(lb.Rows) != 2 || lb.Rows[0].Values[0].V != 35 || lb.Rows[1].Values[0].V != 5 {
		t.Fatalf("rows %+v, want L00 35 us and head 5 us", lb.Rows)
	}
}

// The layer bars' predicted time is the figure the op and kind rows set
// beside spans (sim.OpResult.SpanUs: the op's time less the gap its span
// cannot hold), of the ops that ran and were measured. Timing-event gaps
// of 1 us per GEMM and 2 us for the experts, the all-reduce skipped,
// lm_head never measured: L00 = (10 - 1) + (20 - 2) = 27 us, L01 = 10 - 1
// = 9 us, as their units' PredictedUs add up; head, of which nothing was
// measured, gets no bar.
func TestReportLayerBarsAreTheOpRowsFigure(t *testing.T) {
	pr := &sim.Prediction{Symmetric: true, Ops: []sim.OpResult{
		{ID: "L00.attn.q_proj", Kind: model.KindGEMM, Layer: 0, Us: 10, SpanGapUs: 1},
		{ID: "L00.attn.allreduce", Kind: model.KindCollective, Layer: 0, Us: 5},
		{ID: "L00.moe.experts", Kind: model.KindMoEGEMM, Layer: 0, Us: 20, SpanGapUs: 2},
		{ID: "L01.attn.q_proj", Kind: model.KindGEMM, Layer: 1, Us: 10, SpanGapUs: 1},
		{ID: "head.lm_head", Kind: model.KindGEMM, Layer: -1, Us: 5, SpanGapUs: 0.5},
	}}
	al := &compare.Alignment{Mode: compare.AlignByOpID}
	for i := range pr.Ops {
		al.Units = append(al.Units, compare.Unit{Key: pr.Ops[i].ID, Kind: pr.Ops[i].Kind, Layer: pr.Ops[i].Layer, Rank: -1, Ops: []int{i},
			PredictedUs: pr.Ops[i].Us - pr.Ops[i].SpanGapUs, Skipped: i == 1})
	}
	for tr := int32(0); tr < 2; tr++ {
		al.Samples = append(al.Samples, compare.Sample{Unit: 0, Trace: tr, Us: 10}, compare.Sample{Unit: 2, Trace: tr, Us: 20}, compare.Sample{Unit: 3, Trace: tr, Us: 10})
	}
	lb, measured := layerBars(pr, al)
	if !measured || lb == nil {
		t.Fatalf("bars %+v, measured %v", lb, measured)
	}
	want := []struct {
		label     string
		pred, med float64
	}{{"L00", 27, 30}, {"L01", 9, 10}}
	if len(lb.Rows) != len(want) {
		t.Fatalf("rows %+v, want L00 and L01", lb.Rows)
	}
	// Two traces' step 0 are two samples (30 us for L00), not one of
	// their sum.
	for i, w := range want {
		r := lb.Rows[i]
		if r.Label != w.label || math.Abs(r.Values[0].V-w.pred) > 1e-9 || math.Abs(r.Values[1].V-w.med) > 1e-9 {
			t.Errorf("row %d: %s predicted %v measured %v; want %s %v, %v", i, r.Label, r.Values[0].V, r.Values[1].V, w.label, w.pred, w.med)
		}
	}
}

// A comparison whose traces' program differs from the schedule says so in
// the report as compare does: the program line and what the predicted
// step and kinds leave out head the scenario's section.
func TestReportSaysTheProgramLine(t *testing.T) {
	sr := handComparison()
	sr.Program = "the traces' program differs from the schedule: 1 of 3 predicted ops never measured (lm_head x1)"
	sr.NeverMeasured, sr.NeverMeasuredUs = 1, 5
	lines := comparisonSections(sr, 0, 1, 10)[0].Lines
	for _, want := range []string{sr.Program, "predicted step and kinds leave out the 1 predicted ops never measured (5.0 us of predicted time)"} {
		found := false
		for _, l := range lines {
			found = found || strings.HasPrefix(l, want)
		}
		if !found {
			t.Errorf("section lines %q lack %q", lines, want)
		}
	}
}

// TestBoxNameIsThePricedBox: a report's title names a compared scenario's
// box as the scenario line and predict do, by the priced topology's name;
// a topology file's path is the recording machine's, and the box it priced
// travelled with the trace. A saved comparison, read back with its box by
// reference only, names the reference.
func TestBoxNameIsThePricedBox(t *testing.T) {
	ref := topology.Ref{Path: "/gone/box.json", SHA256: "ab"}
	if got := boxName(&sim.Scenario{TopoRef: ref, Topo: &topology.Topology{Name: "my-box"}}); got != "my-box" {
		t.Errorf("box named %q, want my-box", got)
	}
	if got := boxName(&sim.Scenario{TopoRef: ref}); got != "/gone/box.json" {
		t.Errorf("box by reference named %q, want /gone/box.json", got)
	}
}
