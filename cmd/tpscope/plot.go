package main

import (
	"fmt"
	"image/color"
	"math"

	"github.com/tpscope/tpscope/internal/chart"
	"github.com/tpscope/tpscope/report"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// scatterPlot is the gonum plot of a report.Scatter (the same data the
// HTML report draws), for PNG or SVG: each series in its colour, a front
// joined, faint series as grey crosses, reference lines dashed, marks
// ringed and labelled; axes from 0 to past the largest value so nothing
// is clipped.
func scatterPlot(title string, sc *report.Scatter) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Title.Padding = vg.Points(6)
	p.X.Label.Text, p.Y.Label.Text = sc.XLabel, sc.YLabel
	p.Add(plotter.NewGrid())
	maxX, maxY := 0.0, 0.0
	for _, s := range sc.Series {
		for _, pt := range s.Points {
			maxX, maxY = math.Max(maxX, pt[0]), math.Max(maxY, pt[1])
		}
	}
	for _, l := range sc.VLines {
		maxX = math.Max(maxX, l.At)
	}
	for _, l := range sc.HLines {
		maxY = math.Max(maxY, l.At)
	}
	if maxX <= 0 {
		maxX = 1
	}
	if maxY <= 0 {
		maxY = 1
	}
	p.X.Min, p.Y.Min = 0, 0
	p.X.Max, p.Y.Max = maxX*1.06, maxY*1.06
	p.X.Tick.Marker, p.Y.Tick.Marker = chart.PlainTicks{}, chart.PlainTicks{}
	colorIdx := 0
	var lastColor color.Color = chart.SeriesColors[0]
	for _, s := range sc.Series {
		if len(s.Points) == 0 {
			continue
		}
		xy := make(plotter.XYs, len(s.Points))
		for i, pt := range s.Points {
			xy[i] = plotter.XY{X: pt[0], Y: pt[1]}
		}
		switch {
		case s.Faint:
			sp, err := plotter.NewScatter(xy)
			if err != nil {
				return nil, fmt.Errorf("plot: %w", err)
			}
			sp.GlyphStyle.Shape, sp.GlyphStyle.Radius = draw.CrossGlyph{}, vg.Points(3.5)
			sp.GlyphStyle.Color = color.Gray{Y: 110}
			p.Add(sp)
			p.Legend.Add(s.Name, sp)
		case s.Line:
			// A front takes the colour of the series before it (its
			// points), so a box's points and front read as one.
			l, pts, err := plotter.NewLinePoints(xy)
			if err != nil {
				return nil, fmt.Errorf("plot: %w", err)
			}
			l.Color, l.Width = lastColor, vg.Points(1.6)
			// Rings, so a point under the front (a cross: missing the
			// SLO) shows through.
			pts.Color, pts.Radius, pts.Shape = lastColor, vg.Points(3.5), draw.RingGlyph{}
			p.Add(l, pts)
			p.Legend.Add(s.Name, l, pts)
		default:
			c := chart.SeriesColors[colorIdx%len(chart.SeriesColors)]
			colorIdx++
			lastColor = c
			sp, err := plotter.NewScatter(xy)
			if err != nil {
				return nil, fmt.Errorf("plot: %w", err)
			}
			sp.GlyphStyle.Color, sp.GlyphStyle.Radius = c, vg.Points(2)
			p.Add(sp)
			p.Legend.Add(s.Name, sp)
		}
	}
	// Threshold lines (an SLO), dashed red across the plot.
	red := color.RGBA{R: 0xc0, G: 0x39, B: 0x2b, A: 255}
	rule := func(label string, from, to plotter.XY) error {
		ln, err := plotter.NewLine(plotter.XYs{from, to})
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		ln.Color, ln.Width, ln.Dashes = red, vg.Points(1.4), []vg.Length{vg.Points(5), vg.Points(3)}
		p.Add(ln)
		p.Legend.Add(label, ln)
		return nil
	}
	for _, l := range sc.VLines {
		if err := rule(l.Label, plotter.XY{X: l.At, Y: 0}, plotter.XY{X: l.At, Y: p.Y.Max}); err != nil {
			return nil, err
		}
	}
	for _, l := range sc.HLines {
		if err := rule(l.Label, plotter.XY{X: 0, Y: l.At}, plotter.XY{X: p.X.Max, Y: l.At}); err != nil {
			return nil, err
		}
	}
	for _, m := range sc.Marks {
		ring, err := plotter.NewScatter(plotter.XYs{{X: m.X, Y: m.Y}})
		if err != nil {
			return nil, fmt.Errorf("plot: %w", err)
		}
		ring.GlyphStyle.Shape, ring.GlyphStyle.Radius, ring.GlyphStyle.Color = draw.RingGlyph{}, vg.Points(7), color.Black
		sty := p.Legend.TextStyle
		sty.Font.Size = vg.Points(10)
		p.Add(ring, markLabel{x: m.X, y: m.Y, text: m.Label, style: sty, clear: vg.Points(10)})
		p.Legend.Add("chosen", ring)
	}
	return p, nil
}

// markLabel is a marked point's label, drawn beside the point (clear of
// its ring) on whichever side the text fits inside the data area, right
// first, and against the right edge when neither does: a label placed by
// a fixed rule ran past the axes.
type markLabel struct {
	x, y  float64
	text  string
	style text.Style
	clear vg.Length
}

func (l markLabel) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	at := vg.Point{X: trX(l.x), Y: trY(l.y)}
	sty := l.style
	sty.YAlign = draw.YCenter
	w := sty.Width(l.text)
	switch {
	case at.X+l.clear+w <= c.Max.X:
		sty.XAlign, at.X = draw.XLeft, at.X+l.clear
	case at.X-l.clear-w >= c.Min.X:
		sty.XAlign, at.X = draw.XRight, at.X-l.clear
	default:
		sty.XAlign, at.X = draw.XRight, c.Max.X
	}
	c.FillText(sty, at, l.text)
}
