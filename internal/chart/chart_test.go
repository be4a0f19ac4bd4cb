package chart

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/recorder"
)

// barPlot is a horizontal bar chart titled title with a legend of
// legend's entries, as advise draws its speedups.
func barPlot(t *testing.T, title string, legend ...string) *plot.Plot {
	t.Helper()
	p := plot.New()
	p.Title.Text = title
	vals := plotter.Values{7.29, 2.65, 1.06}
	for i, name := range legend {
		b, err := plotter.NewBarChart(plotter.Values{vals[i%len(vals)]}, vg.Points(10))
		if err != nil {
			t.Fatal(err)
		}
		b.Horizontal, b.XMin, b.Color = true, float64(i), SeriesColors[i%len(SeriesColors)]
		p.Add(b)
		p.Legend.Add(name, b)
	}
	p.NominalY("box-h200-nvswitch x7.29 (conditional)", "oneshot-ar x2.65 (upper bound)", "cuda-graphs (in baseline) x1.06")
	FitBarAxisX(p, vals)
	return p
}

// drawn is a string the recorder saw, with its extent.
type drawn struct {
	s          string
	x0, x1, y0 vg.Length
}

func record(t *testing.T, w, h vg.Length, grid [][]*plot.Plot, tiles draw.Tiles) []drawn {
	t.Helper()
	var rec recorder.Canvas
	Draw(draw.NewCanvas(&rec, w, h), grid, tiles)
	var out []drawn
	for _, a := range rec.Actions {
		if s, ok := a.(*recorder.FillString); ok {
			face := font.DefaultCache.Lookup(s.Font, s.Size)
			out = append(out, drawn{s.String, s.Point.X, s.Point.X + face.Width(s.String), s.Point.Y})
		}
	}
	return out
}

// TestDrawTitleInsideCanvas: a title wider than the plot beside its
// legend (advise's: the model, plan, box and workload) lies inside the
// canvas, centred over the whole tile; it was centred over the plot
// alone and began left of the canvas (x -1 pt in advise's SVG, its first
// letter cut in the PNG). One wider than its tile of a grid is broken
// into lines that stay in the tile, clear of the next panel's.
func TestDrawTitleInsideCanvas(t *testing.T) {
	const title = "kimi-k2.5-nvfp4 tp8 on rtxpro6000-2s, decode b1 ctx4096 kv=fp8: speedup in tokens/s"
	legend := []string{"conditional: runs given what its row needs", "upper bound: may not pay here", "predicted gain"}
	w, h := 9*vg.Inch, 3*vg.Inch
	seen := false
	for _, d := range record(t, w, h, [][]*plot.Plot{{barPlot(t, title, legend...)}}, draw.Tiles{}) {
		seen = seen || d.s == title
		if d.x0 < 0 || d.x1 > w || d.y0 < 0 || d.y0 > h {
			t.Errorf("%q spans x %.1f to %.1f at y %.1f, outside the %.0f x %.0f pt canvas", d.s, d.x0, d.x1, d.y0, w, h)
		}
	}
	if !seen {
		t.Errorf("title %q not drawn on one line", title)
	}

	// Two panels of 3 inches each: the title needs two lines in each.
	grid := [][]*plot.Plot{{barPlot(t, title, legend[:1]...), barPlot(t, title, legend[:1]...)}}
	w = 8 * vg.Inch
	var lines int
	for _, d := range record(t, w, h, grid, draw.Tiles{PadX: vg.Points(24)}) {
		if !strings.Contains(title, strings.TrimSpace(d.s)) || len(d.s) < 10 {
			continue // not a piece of the title
		}
		lines++
		left := d.x1 <= w/2
		right := d.x0 >= w/2
		if !left && !right {
			t.Errorf("title line %q spans x %.1f to %.1f, across the panels' border at %.1f", d.s, d.x0, d.x1, w/2)
		}
		if d.x0 < 0 || d.x1 > w {
			t.Errorf("title line %q spans x %.1f to %.1f, outside the canvas", d.s, d.x0, d.x1)
		}
	}
	if lines < 4 {
		t.Errorf("%d title lines drawn, want at least two per panel", lines)
	}
}

// TestFitBarAxis: a bar chart's value axis ends past its longest bar,
// horizontal or vertical (compare's per-kind bars ended at their tallest,
// drawn to the top edge with no tick above it), its ticks labelled in
// their shortest form.
func TestFitBarAxis(t *testing.T) {
	p := plot.New()
	FitBarAxisY(p, []float64{3691.2, 1171.4}, []float64{4329.4, 1417.2})
	if !(p.Y.Max > 4329.4) || p.Y.Min != 0 {
		t.Errorf("vertical value axis %v to %v, want 0 to past 4329.4", p.Y.Min, p.Y.Max)
	}
	FitBarAxisX(p, []float64{7.29, 1.06})
	wide := plot.New()
	FitBarAxisX(wide, []float64{27092})
	if !(p.X.Max > 7.29) || p.X.Min != 0 {
		t.Errorf("horizontal value axis %v to %v, want 0 to past 7.29", p.X.Min, p.X.Max)
	}
	for _, c := range []struct {
		axis plot.Axis
		want string
	}{{p.X, "0 2.5 5 7.5"}, {p.Y, "0 2000 4000"},
		// predict's breakdown of a 27,092 us collective row: gonum labels
		// 0 and 25000 alone; every tick of 5000 is labelled then.
		{wide.X, "0 5000 10000 15000 20000 25000"}} {
		var labels []string
		for _, tk := range c.axis.Tick.Marker.Ticks(c.axis.Min, c.axis.Max) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if got := strings.Join(labels, " "); got != c.want {
			t.Errorf("tick labels %q, want %q", got, c.want)
		}
	}
}

// TestSaveSVGOpaque: an SVG chart is white under everything it draws,
// its title and legend included: the SVG canvas is transparent where
// nothing is drawn and a plot fills only its own area, so advise's title
// and legend stood on a dark viewer's background as black text.
func TestSaveSVGOpaque(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.svg")
	legend := []string{"conditional: runs given what its row needs", "predicted gain"}
	if err := SaveOne(path, 9*vg.Inch, 3*vg.Inch, barPlot(t, "speedup in tokens/s", legend...)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The first thing drawn: the whole 648 x 216 pt canvas, white.
	first := regexp.MustCompile(`<(path|text)[^>]*>`).Find(b)
	if want := `<path d="M0,0L648,0L648,216L0,216Z" style="fill:#FFFFFF" />`; string(first) != want {
		t.Errorf("first element drawn %s, want %s", first, want)
	}
}

// TestLogTicks: a log axis is labelled at 1, 2 and 5 times the powers of
// ten, at least three labels on any axis (gonum's LogTicks labelled only
// the powers: compare's H200 panel, 3.4 to 90 us, showed just "10"), at
// every whole multiple where 1-2-5 give fewer than three, at linear ticks
// where those too do; every tick within the axis.
func TestLogTicks(t *testing.T) {
	for _, c := range []struct {
		min, max float64
		want     string
	}{
		{3.4, 90, "5 10 20 50"},
		{0.3, 2000, "0.5 1 2 5 10 20 50 100 200 500 1000 2000"},
		{12, 48, "20 30 40"},
	} {
		var labels []string
		for _, tk := range (LogTicks{}).Ticks(c.min, c.max) {
			if tk.Value < c.min || tk.Value > c.max {
				t.Errorf("axis %v to %v: tick %v outside it", c.min, c.max, tk.Value)
			}
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if got := strings.Join(labels, " "); got != c.want {
			t.Errorf("axis %v to %v: labels %q, want %q", c.min, c.max, got, c.want)
		}
	}
	// 12 to 17: one whole multiple of ten's powers; linear ticks then.
	n := 0
	for _, tk := range (LogTicks{}).Ticks(12, 17) {
		if tk.Label != "" {
			n++
		}
	}
	if n < 3 {
		t.Errorf("axis 12 to 17: %d labelled ticks, want at least 3", n)
	}
}
