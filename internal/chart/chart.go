// Package chart lays out and writes the PNG and SVG charts of the verbs'
// --plot and --pareto flags (gonum plots): the margin, the grid of
// panels, legends beside the data or under it, titles inside their panel, value axes
// that hold their longest bar, and the file written whole or not at all.
package chart

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tpscope/tpscope/internal/fileout"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Margin is the blank border every chart is drawn inside: gonum places a
// title's baseline so that its tallest glyphs reach the canvas' top edge,
// and a PNG canvas clips what passes it.
const Margin = 10 * vg.Millimeter / 4

// SeriesColors are the charts' series colours (Tableau 10, as the HTML
// report's).
var SeriesColors = []color.RGBA{
	{R: 0x4e, G: 0x79, B: 0xa7, A: 255}, {R: 0xf2, G: 0x8e, B: 0x2b, A: 255}, {R: 0x59, G: 0xa1, B: 0x4f, A: 255},
	{R: 0xe1, G: 0x57, B: 0x59, A: 255}, {R: 0xb0, G: 0x7a, B: 0xa1, A: 255}, {R: 0x76, G: 0xb7, B: 0xb2, A: 255},
}

// kindColors are the op kinds' colours, the HTML report's (report.js
// KIND_COLORS), so a kind reads the same in every chart and every panel
// of one, and kindOrder their glyphs' order.
var (
	kindColors = map[string]color.RGBA{
		"gemm": {R: 0x4e, G: 0x79, B: 0xa7, A: 255}, "moe_gemm": {R: 0xf2, G: 0x8e, B: 0x2b, A: 255},
		"attention": {R: 0xe1, G: 0x57, B: 0x59, A: 255}, "norm": {R: 0x76, G: 0xb7, B: 0xb2, A: 255},
		"elementwise": {R: 0x59, G: 0xa1, B: 0x4f, A: 255}, "router": {R: 0xed, G: 0xc9, B: 0x48, A: 255},
		"embedding": {R: 0x9c, G: 0x75, B: 0x5f, A: 255}, "collective": {R: 0xb0, G: 0x7a, B: 0xa1, A: 255},
	}
	kindOrder  = []string{"gemm", "moe_gemm", "attention", "norm", "elementwise", "router", "embedding", "collective"}
	kindShapes = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{},
		draw.PlusGlyph{}, draw.RingGlyph{}, draw.BoxGlyph{}, draw.PyramidGlyph{}}
	// spareColors are for kinds outside kindColors, by first use.
	spareColors = []color.RGBA{{R: 0xba, G: 0xb0, B: 0xac, A: 255}, {R: 0xff, G: 0x9d, B: 0xa7, A: 255}, {R: 0x86, G: 0xbc, B: 0xb6, A: 255}}
)

// KindGlyphs are the glyphs of op kinds' points, one per kind: each
// kind its own colour and shape whatever other kinds the chart holds
// (glyphs by a kind's place in the chart gave one kind other colours in
// two panels, and an eighth kind the first one's colour); a kind outside
// the model's takes a spare colour.
func KindGlyphs(kinds []string) []draw.GlyphStyle {
	out := make([]draw.GlyphStyle, len(kinds))
	spare := 0
	for i, kind := range kinds {
		g := draw.GlyphStyle{Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
		if c, ok := kindColors[kind]; ok {
			g.Color = c
			g.Shape = kindShapes[slices.Index(kindOrder, kind)]
		} else {
			g.Color = spareColors[spare%len(spareColors)]
			spare++
		}
		out[i] = g
	}
	return out
}

// CheckPath refuses a path whose extension is neither .png nor .svg.
func CheckPath(path string) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png", ".svg":
		return nil
	}
	return fmt.Errorf("plot %s: want a .png or .svg file", path)
}

// newCanvas is a PNG or SVG canvas of w x h by path's extension.
func newCanvas(path string, w, h vg.Length) (interface {
	vg.CanvasSizer
	io.WriterTo
}, error) {
	if err := CheckPath(path); err != nil {
		return nil, err
	}
	if strings.EqualFold(filepath.Ext(path), ".svg") {
		return vgsvg.New(w, h), nil
	}
	return vgimg.PngCanvas{Canvas: vgimg.New(w, h)}, nil
}

// Save draws a grid of plots (rows of columns, aligned; a nil plot leaves
// its tile empty) into a w x h canvas inside Margin (Draw) and writes it
// to path, PNG or SVG by its extension, whole or not at all.
func Save(path string, w, h vg.Length, grid [][]*plot.Plot, tiles draw.Tiles) error {
	return SaveWith(path, w, h, func(dc draw.Canvas) { Draw(dc, grid, tiles) })
}

// SaveWith is Save of what drawFn draws inside Margin.
func SaveWith(path string, w, h vg.Length, drawFn func(dc draw.Canvas)) error {
	c, err := newCanvas(path, w, h)
	if err != nil {
		return err
	}
	dc := draw.New(c)
	// White under everything: an SVG canvas is transparent where nothing
	// is drawn, and a plot fills only its own area, so the titles, legends
	// and margin stood on whatever a viewer shows behind (black text on a
	// dark page's background).
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	drawFn(draw.Crop(dc, Margin, -Margin, Margin, -Margin))
	if err := fileout.Write(path, func(w io.Writer) error { _, err := c.WriteTo(w); return err }); err != nil {
		return fmt.Errorf("plot %w", err)
	}
	return nil
}

// SaveOne draws one plot inside Margin (Save).
func SaveOne(path string, w, h vg.Length, p *plot.Plot) error {
	return Save(path, w, h, [][]*plot.Plot{{p}}, draw.Tiles{})
}

// LegendGap is the space between a plot's data area and its legend.
const LegendGap = 2 * vg.Millimeter

// LegendRowGap is the least space between a legend's rows: gonum spaces
// them by a line's height alone (Legend.Padding 0), less than the font's
// ascent and descent, so one row's descenders ran into the next one's
// capitals.
const LegendRowGap = 3 * vg.Inch / 72

// legendPadding is the space between l's rows that leaves LegendRowGap
// between one row's text box (the font's descent to its ascent) and the
// next one's, and room for a glyph up to that pitch tall.
func legendPadding(l plot.Legend) vg.Length {
	ext := l.TextStyle.FontExtents()
	line := l.TextStyle.Rectangle("Xg").Max.Y
	return max(0, ext.Ascent+ext.Descent-line) + LegendRowGap
}

// Draw draws a grid of plots (rows of columns, aligned) into dc.
//
// Legends are drawn to the right of the data area, a column's plots all
// giving up the width of its widest legend (so their axes stay aligned):
// gonum draws a legend over the data, where a reference line (an SLO), a
// label or a bar crosses it.
//
// A title is centred over its whole tile, the legend's width included,
// and broken at spaces into lines that fit the tile: gonum centres it
// over the plot it is given, so a title wider than the plot beside its
// legend ran past the canvas' left edge (advise's), and one wider than
// its tile into the next panel.
func Draw(dc draw.Canvas, grid [][]*plot.Plot, tiles draw.Tiles) {
	tiles.Rows, tiles.Cols = len(grid), len(grid[0])
	canvases := plot.Align(grid, tiles, dc)
	wrapped := false
	for i := range grid {
		for j, p := range grid[i] {
			if p == nil || p.Title.Text == "" {
				continue
			}
			c := canvases[i][j]
			if t := Wrap(p.Title.TextStyle, p.Title.Text, c.Max.X-c.Min.X); t != p.Title.Text {
				p.Title.Text, wrapped = t, true
			}
		}
	}
	if wrapped {
		canvases = plot.Align(grid, tiles, dc) // the titles' heights changed
	}
	legendW := make([]vg.Length, tiles.Cols)
	for i := range grid {
		for j, p := range grid[i] {
			if p != nil {
				r := p.Legend.Rectangle(canvases[i][j])
				legendW[j] = max(legendW[j], r.Max.X-r.Min.X)
			}
		}
	}
	for i := range grid {
		for j, p := range grid[i] {
			if p == nil {
				continue
			}
			if legendW[j] == 0 {
				p.Draw(canvases[i][j])
				continue
			}
			full := canvases[i][j]
			titleH := vg.Length(0)
			title := p.Title.Text
			if title != "" {
				// As gonum draws it (plot.Draw), over the whole tile.
				descent := p.Title.TextStyle.FontExtents().Descent
				full.FillText(p.Title.TextStyle, vg.Point{X: full.Center().X, Y: full.Max.Y + descent}, title)
				titleH = p.Title.TextStyle.Rectangle(title).Size().Y + p.Title.Padding
			}
			pc := draw.Crop(full, 0, -(legendW[j] + LegendGap), 0, -titleH)
			legend := p.Legend
			legend.Padding = max(legend.Padding, legendPadding(legend))
			p.Legend = plot.NewLegend() // no entries: drawn beside, below
			p.Title.Text = ""           // drawn above
			p.Draw(pc)
			data := p.DataCanvas(pc)
			p.Legend, p.Title.Text = legend, title
			legend.Top, legend.Left = true, true
			legend.Draw(draw.Canvas{Canvas: full.Canvas, Rectangle: vg.Rectangle{
				Min: vg.Point{X: pc.Max.X + LegendGap, Y: data.Min.Y}, Max: vg.Point{X: full.Max.X, Y: data.Max.Y}}})
		}
	}
}

// LegendBelowHeight is the height DrawLegendBelow gives p's legend under
// its plot, the gap above it included; 0 without a legend.
func LegendBelowHeight(p *plot.Plot) vg.Length {
	legend := p.Legend
	legend.Padding = max(legend.Padding, legendPadding(legend))
	r := legend.Rectangle(draw.Canvas{})
	if h := r.Max.Y - r.Min.Y; h > 0 {
		return h + LegendGap + legendPadding(legend) // the last row's descent
	}
	return 0
}

// DrawLegendBelow draws one plot into dc with its legend under the axis
// (LegendBelowHeight tall, left-aligned with the data area), the data
// keeping the whole width: a legend of long entries beside the data
// (Draw) left advise's bars a third of the chart's width. Its title is
// broken into lines that fit dc (Wrap).
func DrawLegendBelow(dc draw.Canvas, p *plot.Plot) {
	below := LegendBelowHeight(p)
	if p.Title.Text != "" {
		p.Title.Text = Wrap(p.Title.TextStyle, p.Title.Text, dc.Max.X-dc.Min.X)
	}
	legend := p.Legend
	legend.Padding = max(legend.Padding, legendPadding(legend))
	p.Legend = plot.NewLegend() // no entries: drawn below
	pc := draw.Crop(dc, 0, 0, below, 0)
	p.Draw(pc)
	data := p.DataCanvas(pc)
	p.Legend = legend
	if below == 0 {
		return
	}
	legend.Top, legend.Left = true, true
	legend.Draw(draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
		Min: vg.Point{X: data.Min.X, Y: dc.Min.Y}, Max: vg.Point{X: dc.Max.X, Y: dc.Min.Y + below - LegendGap}}})
}

// Wrap breaks s at spaces into lines no wider than width in style sty (a
// word wider than width keeps a line of its own); its own line breaks
// stay.
func Wrap(sty text.Style, s string, width vg.Length) string {
	var out []string
	for _, para := range strings.Split(s, "\n") {
		line := ""
		for _, w := range strings.Fields(para) {
			if line != "" && sty.Width(line+" "+w) > width {
				out = append(out, line)
				line = ""
			}
			if line != "" {
				line += " "
			}
			line += w
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// FitBarAxisX ends a horizontal bar chart's value axis a step past its
// longest bar, FitBarAxisY a vertical one's: gonum ends the axis at the
// largest value, so that bar reaches the plot's edge and runs past the
// last tick. The axis' ticks are PlainTicks (gonum labelled predict's
// "0.00" and "25000.00").
func FitBarAxisX(p *plot.Plot, vals ...[]float64) {
	p.X.Tick.Marker = PlainTicks{}
	if hi := maxOf(vals); hi > 0 {
		p.X.Min, p.X.Max = 0, hi*1.08
	}
}

// FitBarAxisY is FitBarAxisX for vertical bars.
func FitBarAxisY(p *plot.Plot, vals ...[]float64) {
	p.Y.Tick.Marker = PlainTicks{}
	if hi := maxOf(vals); hi > 0 {
		p.Y.Min, p.Y.Max = 0, hi*1.08
	}
}

func maxOf(vals [][]float64) float64 {
	hi := 0.0
	for _, vs := range vals {
		for _, v := range vs {
			hi = math.Max(hi, v)
		}
	}
	return hi
}

// PlainTicks are gonum's default ticks labelled in their shortest form:
// gonum labels some ranges' ticks with a fixed two decimals ("500.00"
// beside another panel's "1800"). Where gonum labels fewer than three
// (predict's 0 to 31,600 us axis: "0" and "25000" alone, five unlabelled
// ticks between), every tick within the axis is labelled.
type PlainTicks struct{}

func (PlainTicks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	labelled := 0
	for _, t := range ts {
		if t.Label != "" {
			labelled++
		}
	}
	for i := range ts {
		if ts[i].Label != "" || (labelled < 3 && ts[i].Value >= min && ts[i].Value <= max) {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 6, 64)
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Value < ts[j].Value })
	return ts
}

// LogTicks are a log axis' ticks labelled at 1, 2 and 5 times the powers
// of ten, every other whole multiple a minor tick; at 1 to 9 times them
// where fewer than three of those lie on the axis, and at gonum's linear
// ticks (PlainTicks) where fewer than three of those do. gonum's LogTicks
// label the powers of ten alone: compare's H200 panel, from 3.4 to 90 us,
// showed just "10" on each axis.
type LogTicks struct{}

func (LogTicks) Ticks(min, max float64) []plot.Tick {
	if !(min > 0) || !(max > min) {
		return PlainTicks{}.Ticks(min, max)
	}
	for _, labelled := range [][]int{{1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}} {
		var ts []plot.Tick
		n := 0
		for e := int(math.Floor(math.Log10(min))); e <= int(math.Ceil(math.Log10(max))); e++ {
			for m := 1; m <= 9; m++ {
				// m * 10^e, formatted from its digits so 3e-1 is 0.3,
				// not 0.30000000000000004.
				v, err := strconv.ParseFloat(fmt.Sprintf("%de%d", m, e), 64)
				if err != nil || v < min || v > max {
					continue
				}
				t := plot.Tick{Value: v}
				if slices.Contains(labelled, m) {
					t.Label = strconv.FormatFloat(v, 'g', -1, 64)
					n++
				}
				ts = append(ts, t)
			}
		}
		if n >= 3 {
			return ts
		}
	}
	return PlainTicks{}.Ticks(min, max)
}
