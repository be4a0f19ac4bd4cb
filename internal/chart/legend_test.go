package chart

import (
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/recorder"
)

// TextBox is a drawn string's box: its advance across, its font's
// descent below the baseline to its ascent above.
type textBox struct {
	s                      string
	minX, maxX, minY, maxY vg.Length
}

func textBoxes(rec *recorder.Canvas) []textBox {
	var out []textBox
	for _, a := range rec.Actions {
		if s, ok := a.(*recorder.FillString); ok {
			face := font.DefaultCache.Lookup(s.Font, s.Size)
			ext := face.Extents()
			out = append(out, textBox{s.String, s.Point.X, s.Point.X + face.Width(s.String), s.Point.Y - ext.Descent, s.Point.Y + ext.Ascent})
		}
	}
	return out
}

// TestLegendRowsApart: a legend's rows are drawn apart, each entry's text
// box clear of the next one's (simulate's p50 / p90 / p99 / SLO rows
// touched: gonum spaces the rows by the text's height alone, with no
// padding between them).
func TestLegendRowsApart(t *testing.T) {
	p := plot.New()
	names := []string{"p50", "p90", "p99", "SLO"}
	for i, name := range names {
		l, pts, err := plotter.NewLinePoints(plotter.XYs{{X: 0, Y: float64(i)}, {X: 1, Y: float64(i + 1)}})
		if err != nil {
			t.Fatal(err)
		}
		p.Add(l, pts)
		p.Legend.Add(name, l, pts)
	}
	var rec recorder.Canvas
	Draw(draw.NewCanvas(&rec, 6*vg.Inch, 4*vg.Inch), [][]*plot.Plot{{p}}, draw.Tiles{})
	var rows []textBox
	for _, b := range textBoxes(&rec) {
		for _, n := range names {
			if b.s == n {
				rows = append(rows, b)
			}
		}
	}
	if len(rows) != len(names) {
		t.Fatalf("%d legend rows drawn, want %d", len(rows), len(names))
	}
	for i := 1; i < len(rows); i++ {
		above, below := rows[i-1], rows[i]
		if gap := above.minY - below.maxY; gap < LegendRowGap {
			t.Errorf("legend rows %q and %q %.2f pt apart (text boxes y %.2f-%.2f and %.2f-%.2f), want at least %.2f",
				above.s, below.s, gap, above.minY, above.maxY, below.minY, below.maxY, LegendRowGap)
		}
	}
}
