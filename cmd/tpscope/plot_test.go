package main

import (
	"slices"
	"testing"

	"github.com/tpscope/tpscope/internal/chart"
	"github.com/tpscope/tpscope/report"
	"github.com/tpscope/tpscope/sim"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/recorder"
)

// TestPlotLegendBesideData: a chart's legend is drawn right of its data
// area and a marked point's label inside it, so neither an SLO line nor
// the label crosses the legend (simulate's dashed SLO ran through the
// TPOT legend; plan's "chosen" label ran into it). The data area's right
// edge is where the horizontal SLO line, drawn across the whole data
// area, ends: the longest horizontal stroke.
func TestPlotLegendBesideData(t *testing.T) {
	sc := &report.Scatter{XLabel: "tokens/s per user", YLabel: "tokens/s per GPU",
		Series: []report.ScatterSeries{{Name: "box a", Points: [][2]float64{{1, 1}, {6, 8}, {9.5, 10}}}},
		VLines: []report.RefLine{{At: 9, Label: "SLO: 111 ms/token"}},
		HLines: []report.RefLine{{At: 9.8, Label: "a horizontal rule"}},
		// Near the right edge and too long to fit right of its point.
		Marks: []report.Mark{{X: 9.5, Y: 10, Label: "chosen: rtxpro6000-2s x8 tp2-dp4-ep fp8 b512 ctx1024"}},
	}
	p, err := scatterPlot("legend placement", sc)
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder.Canvas
	chart.Draw(draw.NewCanvas(&rec, 8*vg.Inch, 5*vg.Inch), [][]*plot.Plot{{p}}, draw.Tiles{})
	left, right, _ := widestHorizontalStroke(&rec)
	if right <= left {
		t.Fatal("no horizontal line drawn")
	}
	legend := []string{"box a", "SLO: 111 ms/token", "a horizontal rule", "chosen"}
	seen := 0
	for _, a := range rec.Actions {
		s, ok := a.(*recorder.FillString)
		if !ok {
			continue
		}
		face := font.DefaultCache.Lookup(s.Font, s.Size)
		w := face.Width(s.String)
		switch {
		case slices.Contains(legend, s.String):
			seen++
			if s.Point.X < right {
				t.Errorf("legend entry %q starts at x %.1f, inside the data area (%.1f to %.1f)", s.String, s.Point.X, left, right)
			}
		case s.String == sc.Marks[0].Label:
			seen++
			if s.Point.X < left || s.Point.X+w > right {
				t.Errorf("mark label spans x %.1f to %.1f, outside the data area (%.1f to %.1f)", s.Point.X, s.Point.X+w, left, right)
			}
		}
	}
	if seen != len(legend)+1 {
		t.Errorf("%d of the %d legend entries and mark label drawn", seen, len(legend)+1)
	}
}

// TestParetoLegendRowsApart: the legend of a --pareto chart keeps each
// entry clear of the others: no two rows' text boxes meet, and the
// "chosen" ring (7 pt across its radius) stays off the rows above and
// below it (it ran into "Pareto front" above: gonum spaces the rows by a
// line's height alone).
func TestParetoLegendRowsApart(t *testing.T) {
	sc := &report.Scatter{XLabel: "tokens/s per user", YLabel: "tokens/s per GPU",
		Series: []report.ScatterSeries{
			{Name: "runs within the SLO", Points: [][2]float64{{10, 30}, {20, 20}, {38, 17}}},
			{Name: "runs missing the SLO", Points: [][2]float64{{4, 52}}, Faint: true},
			{Name: "Pareto front", Points: [][2]float64{{10, 30}, {20, 20}, {38, 17}}, Line: true},
		},
		VLines: []report.RefLine{{At: 20, Label: "SLO: TPOT 50 ms (judged at p99)"}},
		Marks:  []report.Mark{{X: 38, Y: 17, Label: "chosen: qps 0.5 poisson"}},
	}
	p, err := scatterPlot("pareto", sc)
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder.Canvas
	chart.Draw(draw.NewCanvas(&rec, 10*vg.Inch, 6.5*vg.Inch), [][]*plot.Plot{{p}}, draw.Tiles{})
	type box struct {
		s          string
		minY, maxY vg.Length
		minX       vg.Length
	}
	var rows []box
	names := []string{"runs within the SLO", "runs missing the SLO", "Pareto front", "SLO: TPOT 50 ms (judged at p99)", "chosen"}
	for _, a := range rec.Actions {
		if s, ok := a.(*recorder.FillString); ok && slices.Contains(names, s.String) {
			face := font.DefaultCache.Lookup(s.Font, s.Size)
			ext := face.Extents()
			rows = append(rows, box{s.String, s.Point.Y - ext.Descent, s.Point.Y + ext.Ascent, s.Point.X})
		}
	}
	if len(rows) != len(names) {
		t.Fatalf("%d legend rows drawn, want %d", len(rows), len(names))
	}
	for i := 1; i < len(rows); i++ {
		if rows[i-1].minY < rows[i].maxY {
			t.Errorf("legend rows %q (y %.1f-%.1f) and %q (y %.1f-%.1f) overlap", rows[i-1].s, rows[i-1].minY, rows[i-1].maxY, rows[i].s, rows[i].minY, rows[i].maxY)
		}
	}
	// The legend's ring: the 7 pt arc left of the rows' text.
	chosen, above := rows[len(rows)-1], rows[len(rows)-2]
	found := false
	for _, a := range rec.Actions {
		s, ok := a.(*recorder.Stroke)
		if !ok {
			continue
		}
		for _, c := range s.Path {
			if c.Type != vg.ArcComp || c.Radius != vg.Points(7) || c.Pos.X > chosen.minX || c.Pos.X < chosen.minX-vg.Points(40) {
				continue
			}
			found = true
			if top := c.Pos.Y + c.Radius; top > above.minY {
				t.Errorf("the legend's chosen ring reaches y %.1f, into %q's row (from y %.1f)", top, above.s, above.minY)
			}
		}
	}
	if !found {
		t.Error("the legend's chosen ring not drawn")
	}
}

// TestPredictPlotNoSpacerMark: predict's chart draws a bar for each kind
// and name and nothing on its empty row between them: the row was a bar
// of 0 us, a zero-width mark on the axis. A bar is a filled rectangle 10
// pt tall.
func TestPredictPlotNoSpacerMark(t *testing.T) {
	pr := &sim.Prediction{Model: "m", Topology: "box",
		ByKind: []sim.Share{{Name: "gemm", Us: 600, ShareFrac: 0.6}, {Name: "attention", Us: 400, ShareFrac: 0.4}},
		ByName: []sim.Share{{Name: "attn.mla_decode", Us: 400, ShareFrac: 0.4}, {Name: "moe.gate", Us: 300, ShareFrac: 0.3}, {Name: "head.lm_head", Us: 300, ShareFrac: 0.3}}}
	p, rows, err := predictPlot(pr)
	if err != nil {
		t.Fatal(err)
	}
	if rows != 6 {
		t.Errorf("%d rows, want 2 kinds, a spacer and 3 names", rows)
	}
	var rec recorder.Canvas
	chart.Draw(draw.NewCanvas(&rec, 9*vg.Inch, vg.Points(float64(14*rows+90))), [][]*plot.Plot{{p}}, draw.Tiles{})
	bars := 0
	for _, a := range rec.Actions {
		var path vg.Path
		switch a := a.(type) {
		case *recorder.Fill:
			path = a.Path
		case *recorder.Stroke:
			path = a.Path
		default:
			continue
		}
		if len(path) != 5 || path[4].Type != vg.CloseComp {
			continue
		}
		x0, x1, y0, y1 := path[0].Pos.X, path[0].Pos.X, path[0].Pos.Y, path[0].Pos.Y
		for _, c := range path[:4] {
			x0, x1, y0, y1 = min(x0, c.Pos.X), max(x1, c.Pos.X), min(y0, c.Pos.Y), max(y1, c.Pos.Y)
		}
		if y1-y0 != vg.Points(10) {
			continue // not a bar
		}
		if x1 == x0 {
			t.Errorf("a zero-width bar drawn at x %.1f, y %.1f to %.1f", x0, y0, y1)
			continue
		}
		if _, ok := a.(*recorder.Fill); ok {
			bars++
		}
	}
	if bars != 5 {
		t.Errorf("%d bars filled, want 5 (2 kinds, 3 names)", bars)
	}
}

// TestParetoChartKeepsWidth: simulate's capacity chart draws its legend
// under the axis, so the data keep most of the chart's width: its long
// entries ("runs missing the SLO, too short to judge or overloaded")
// beside the data had taken about 40 % of it. The data area's width is
// the longest horizontal stroke (the x axis); every legend entry is drawn
// below it, inside the canvas.
func TestParetoChartKeepsWidth(t *testing.T) {
	names := []string{"runs within the SLO", "runs missing the SLO, too short to judge or overloaded", "Pareto front"}
	sc := &report.Scatter{XLabel: "tokens/s per user", YLabel: "tokens/s per GPU",
		Series: []report.ScatterSeries{
			{Name: names[0], Points: [][2]float64{{10, 30}, {20, 20}, {38, 17}}},
			{Name: names[1], Points: [][2]float64{{4, 52}}, Faint: true},
			{Name: names[2], Points: [][2]float64{{10, 30}, {20, 20}, {38, 17}}, Line: true},
		},
		VLines: []report.RefLine{{At: 20, Label: "SLO: TPOT 50 ms (judged at p99)"}},
	}
	p, err := scatterPlot("pareto", sc)
	if err != nil {
		t.Fatal(err)
	}
	w, h := paretoChartSize(p)
	var rec recorder.Canvas
	drawParetoChart(draw.NewCanvas(&rec, w, h), p)
	left, right, axisY := widestHorizontalStroke(&rec)
	if share := (right - left) / w; share < 0.75 {
		t.Errorf("the data span x %.0f to %.0f pt, %.0f %% of the %.0f pt width; want at least 75 %%", left, right, 100*share, w)
	}
	seen := 0
	for _, a := range rec.Actions {
		s, ok := a.(*recorder.FillString)
		if !ok || !slices.Contains(names, s.String) {
			continue
		}
		seen++
		face := font.DefaultCache.Lookup(s.Font, s.Size)
		if top := s.Point.Y + face.Extents().Ascent; top >= axisY || s.Point.Y < 0 || s.Point.X+face.Width(s.String) > w {
			t.Errorf("legend entry %q at (%.0f, %.0f): want it under the axis (y %.0f) and inside the %.0f x %.0f pt canvas", s.String, s.Point.X, s.Point.Y, axisY, w, h)
		}
	}
	if seen != len(names) {
		t.Errorf("%d of the %d legend entries drawn", seen, len(names))
	}
}

// widestHorizontalStroke is the longest two-point horizontal stroke a
// chart drew (its x axis, or an SLO line across the data area): its
// ends and height; right <= left when none was drawn.
func widestHorizontalStroke(rec *recorder.Canvas) (left, right, y vg.Length) {
	for _, a := range rec.Actions {
		s, ok := a.(*recorder.Stroke)
		if !ok || len(s.Path) != 2 || s.Path[0].Pos.Y != s.Path[1].Pos.Y {
			continue
		}
		x0, x1 := min(s.Path[0].Pos.X, s.Path[1].Pos.X), max(s.Path[0].Pos.X, s.Path[1].Pos.X)
		if x1-x0 > right-left {
			left, right, y = x0, x1, s.Path[0].Pos.Y
		}
	}
	return left, right, y
}
