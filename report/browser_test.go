package report

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/tpscope/tpscope/report/reporttest"
)

// laneCount is what the page's laneCounts() hook returns per lane.
type laneCount struct {
	Label    string `json:"label"`
	Measured bool   `json:"measured"`
	Rank     int    `json:"rank"`
	Boxes    int    `json:"boxes"`
	Drawn    int    `json:"drawn"`
}

// bigStep is a step of ranks x layers x ops per layer, every rank
// predicted and rank 0 measured: 8 x 61 x 22 = 10,736 predicted boxes plus
// 1,342 measured, the size of a 61-layer model's decode step at TP 8.
func bigStep(ranks, layers, opsPerLayer int) *Report {
	kinds := []string{"gemm", "moe_gemm", "attention", "norm", "elementwise", "router", "collective"}
	tl := &Timeline{Kinds: kinds}
	for l := 0; l < layers; l++ {
		for k := 0; k < opsPerLayer; k++ {
			tl.Ops = append(tl.Ops, Op{ID: fmt.Sprintf("L%02d.op%02d", l, k), Kind: kinds[k%len(kinds)],
				Fields: []Field{{Name: "predicted", Value: "1.0 us"}}})
		}
	}
	var collLanes []int
	for r := 0; r < ranks; r++ {
		for _, measured := range []bool{false, true} {
			if measured && r != 0 {
				continue
			}
			ln := Lane{Label: fmt.Sprintf("rank %d %v", r, measured), Rank: r, Measured: measured}
			t := 0.0
			for i := range tl.Ops {
				d := 1 + float64(i%9)
				ln.Boxes = append(ln.Boxes, Box{Op: i, StartUs: t, DurUs: d, Critical: !measured && r == 0})
				t += d
			}
			tl.EndUs = max(tl.EndUs, t)
			if !measured {
				collLanes = append(collLanes, len(tl.Lanes))
			}
			tl.Lanes = append(tl.Lanes, ln)
		}
	}
	for i, o := range tl.Ops {
		if o.Kind == "collective" {
			var k Link
			for _, l := range collLanes {
				k.Boxes = append(k.Boxes, BoxRef{Lane: l, Box: i})
			}
			tl.Links = append(tl.Links, k)
		}
	}
	return &Report{Title: "big step", Sections: []Section{{Title: "Timeline", Timeline: tl}}}
}

// TestReportBrowser renders reports in headless Chromium: no console
// error, no request beyond the file itself, every box of every lane drawn
// at full zoom, hover shows the op under the mouse, and a screenshot.
func TestReportBrowser(t *testing.T) {
	b := reporttest.New(t)
	dir := t.TempDir()
	cases := []struct {
		name      string
		rep       *Report
		wantLanes int // lanes the report was built with
		wantBoxes int // boxes per lane, by construction
	}{
		// synthetic(2, 1, 3): ranks 0 and 1 predicted, rank 0 measured: 3
		// lanes of 3 layers x 10 ops.
		{"small", synthetic(2, 1, 3), 3, 3 * len(layerOps)},
		// bigStep(8, 61, 22): 8 predicted lanes + rank 0 measured.
		{"8 ranks x 61 layers", bigStep(8, 61, 22), 9, 61 * 22},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".html")
			if err := WriteFile(path, c.rep); err != nil {
				t.Fatal(err)
			}
			st, _ := os.Stat(path)
			p := b.Open(t, path)
			t.Logf("%s: %d boxes, %d bytes; ready after %.0f ms (page clock), %v wall", c.name, c.rep.BoxCount(), st.Size(), p.RenderMs, p.LoadWall.Round(1e6))
			lanes := reporttest.Eval[[]laneCount](t, p, "tpscopeReport.timelines[0].laneCounts()")
			if len(lanes) != c.wantLanes {
				t.Fatalf("page shows %d lanes, want %d", len(lanes), c.wantLanes)
			}
			for i, l := range lanes {
				if l.Boxes != c.wantBoxes || l.Drawn != c.wantBoxes {
					t.Errorf("lane %d (%s): %d boxes, %d drawn; want %d of each", i, l.Label, l.Boxes, l.Drawn, c.wantBoxes)
				}
			}
			// The canvas attribute says the same as the hook.
			attr := reporttest.Eval[string](t, p, `document.querySelector("canvas[data-timeline='0']").getAttribute("data-drawn")`)
			if want := strings.TrimSuffix(strings.Repeat(fmt.Sprint(c.wantBoxes)+",", c.wantLanes), ","); attr != want {
				t.Errorf("data-drawn = %q, want %q", attr, want)
			}

			// Hover the widest box of the measured lane (lane 1): the tooltip
			// names its op.
			type center struct {
				X, Y float64
				ID   string
			}
			at := reporttest.Eval[center](t, p, "(function(){var t=tpscopeReport.timelines[0];return t.boxCenter(1,t.widestBox(1));})()")
			p.MoveMouse(t, at.X, at.Y)
			tip := reporttest.Eval[string](t, p, "tpscopeReport.timelines[0].tooltip()")
			if !strings.HasPrefix(tip, at.ID) {
				t.Errorf("tooltip at (%.0f, %.0f) = %q, want it to start with the op ID %q", at.X, at.Y, tip, at.ID)
			}
			// Zoomed into a tenth of the step, only the boxes in view are
			// drawn; a redraw's time is what a pan or zoom frame costs.
			ms := reporttest.Eval[float64](t, p, "tpscopeReport.timelines[0].zoom(0, "+fmt.Sprint(timelineOf(c.rep).EndUs/10)+")")
			full := reporttest.Eval[float64](t, p, "(function(){var t=tpscopeReport.timelines[0];t.zoom(0,"+fmt.Sprint(timelineOf(c.rep).EndUs)+");var s=0;for(var i=0;i<5;i++)s+=t.redraw();return s/5;})()")
			t.Logf("%s: frame after zoom %.1f ms, full-step redraw %.1f ms", c.name, ms, full)
			p.Screenshot(t, filepath.Join(shotDir(t, dir), "report-"+strings.ReplaceAll(c.name, " ", "_")+".png"))
			if probs := p.Problems(); len(probs) > 0 {
				t.Errorf("console errors: %q", probs)
			}
			if reqs := p.ForeignRequests(); len(reqs) > 0 {
				t.Errorf("the page requested %q; want nothing beyond %s", reqs, p.URL)
			}
		})
	}
}

// shotDir is where screenshots go: $TPSCOPE_SCREENSHOT_DIR when set (to
// look at them), else the test's temporary dir.
func shotDir(t testing.TB, tmp string) string {
	if d := os.Getenv("TPSCOPE_SCREENSHOT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return tmp
}

func timelineOf(r *Report) *Timeline {
	for _, s := range r.Sections {
		if s.Timeline != nil {
			return s.Timeline
		}
	}
	return nil
}

// BenchmarkReportRender loads the 8-rank, 61-layer step in headless
// Chromium: ms_ready is the page's own time from navigation to drawn.
func BenchmarkReportRender(b *testing.B) {
	for _, size := range []struct{ ranks, layers int }{{1, 61}, {8, 61}} {
		b.Run(fmt.Sprintf("ranks=%d/layers=%d", size.ranks, size.layers), func(b *testing.B) {
			br := reporttest.New(b)
			path := filepath.Join(b.TempDir(), "r.html")
			if err := WriteFile(path, bigStep(size.ranks, size.layers, 22)); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			total := 0.0
			for b.Loop() {
				p := br.Open(b, path)
				total += p.RenderMs
			}
			b.ReportMetric(total/float64(b.N), "ms_ready")
		})
	}
}

// TestReportBrowserSeesProblems: the checks the browser tests rely on can
// fail. A page that logs an error, throws, and loads an image from
// loopback (a closed port) is caught on all three counts.
func TestReportBrowserSeesProblems(t *testing.T) {
	b := reporttest.New(t)
	path := filepath.Join(t.TempDir(), "bad.html")
	page := `<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/none.png">
<script>window.tpscopeReport = {ready: true, renderMs: 1}; console.error("boom");</script>
<script>null.nothing;</script></body></html>`
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	p := b.Open(t, path)
	// The image request and the exception may land after ready: wait for
	// them a little (bounded) before judging.
	reporttest.Eval[bool](t, p, `new Promise(function(r){setTimeout(function(){r(true)}, 200)})`, chromedp.EvalAwaitPromise)
	probs := strings.Join(p.Problems(), "\n")
	if !strings.Contains(probs, "boom") || !strings.Contains(probs, "nothing") {
		t.Errorf("problems %q: want the console.error and the exception", probs)
	}
	if reqs := p.ForeignRequests(); len(reqs) != 1 || reqs[0] != "http://127.0.0.1:9/none.png" {
		t.Errorf("foreign requests %q: want the image", reqs)
	}
}

// TestReportBrowserEmptyLists: a section whose lists are empty (a
// scatter series with no point, as simulate's "runs within the SLO" when
// every run misses it; bars and a table with no row) is drawn, and so is
// every section after it. Go encodes an empty list as null: the page read
// a series' points as a list, threw, and drew nothing past the first
// section.
func TestReportBrowserEmptyLists(t *testing.T) {
	b := reporttest.New(t)
	rep := &Report{Title: "empty lists", Sections: []Section{
		{Title: "Setup", Lines: []string{"a line"}},
		{Title: "Capacity", Scatter: &Scatter{XLabel: "tokens/s per user", YLabel: "tokens/s per GPU", Series: []ScatterSeries{
			{Name: "runs within the SLO"},
			{Name: "runs missing the SLO", Points: [][2]float64{{5, 50}, {10, 30}}, Faint: true},
		}}},
		{Title: "No bars", Bars: &Bars{Unit: "us", Series: []string{"predicted"}}},
		{Title: "No rows", Table: &Table{Columns: []Column{{Name: "load"}}}},
		{Title: "Runs", Table: &Table{Columns: []Column{{Name: "load"}}, Rows: []Row{{Cells: []string{"qps 1"}}}}},
	}}
	path := filepath.Join(t.TempDir(), "empty.html")
	if err := WriteFile(path, rep); err != nil {
		t.Fatal(err)
	}
	p := b.Open(t, path)
	if probs := p.Problems(); len(probs) > 0 {
		t.Errorf("console errors: %q", probs)
	}
	titles := reporttest.Eval[[]string](t, p, `Array.from(document.querySelectorAll("section.sec h2")).map(function(h){return h.textContent})`)
	var want []string
	for _, s := range rep.Sections {
		want = append(want, s.Title)
	}
	if strings.Join(titles, "|") != strings.Join(want, "|") {
		t.Errorf("sections drawn %q, want %q", titles, want)
	}
	if n := reporttest.Eval[int](t, p, "tpscopeReport.scatters.length ? tpscopeReport.scatters[0].pointCount() : -1"); n != 2 {
		t.Errorf("scatter drew %d points, want 2", n)
	}
}

// TestReportBrowserScatterTextInside: every text of a scatter (ticks,
// axis labels, legend, a reference line's label, a mark's label) lies
// inside the chart, with a vertical line near the right edge (an SLO
// past the fastest run): its label ran out of the chart, cut at
// "(judged at p99".
func TestReportBrowserScatterTextInside(t *testing.T) {
	b := reporttest.New(t)
	rep := &Report{Title: "scatter text", Sections: []Section{
		{Title: "Capacity", Scatter: &Scatter{XLabel: "tokens/s per user", YLabel: "tokens/s per GPU",
			Series: []ScatterSeries{{Name: "runs", Points: [][2]float64{{5.25, 58.7}, {10.2, 32.4}, {15.5, 16.7}}}},
			VLines: []RefLine{{At: 20, Label: "SLO: TPOT 50 ms (judged at p99)"}},
			Marks:  []Mark{{X: 15.5, Y: 16.7, Label: "chosen: qps 0.5 poisson"}},
		}},
	}}
	path := filepath.Join(t.TempDir(), "scatter.html")
	if err := WriteFile(path, rep); err != nil {
		t.Fatal(err)
	}
	p := b.Open(t, path)
	type box struct {
		Text          string
		X, Right, Max float64
	}
	boxes := reporttest.Eval[[]box](t, p, `Array.from(document.querySelectorAll(".scatter svg text")).map(function(e){
		// Screen boxes (a rotated axis label's too), in the chart's units.
		var r = e.getBoundingClientRect(), s = e.ownerSVGElement.getBoundingClientRect();
		var vb = e.ownerSVGElement.viewBox.baseVal, k = vb.width / s.width;
		return {Text: e.textContent, X: (r.left - s.left) * k, Right: (r.right - s.left) * k, Max: vb.width};
	})`)
	seen := false
	for _, bx := range boxes {
		seen = seen || bx.Text == rep.Sections[0].Scatter.VLines[0].Label
		if bx.X < 0 || bx.Right > bx.Max {
			t.Errorf("text %q spans x %.0f to %.0f, outside the chart's 0 to %.0f", bx.Text, bx.X, bx.Right, bx.Max)
		}
	}
	if !seen {
		t.Errorf("the reference line's label is not drawn (texts %v)", boxes)
	}
}

// TestReportBrowserBarLabelsInside: a bar chart's labels lie inside it,
// a long one too (an advice row qualified as the CLI qualifies it:
// "box-rtxpro6000-switch (conditional)"); the label column was a fixed
// 190 units and such a label began left of the chart.
func TestReportBrowserBarLabelsInside(t *testing.T) {
	b := reporttest.New(t)
	long := "box-rtxpro6000-switch (conditional)"
	rep := &Report{Title: "bar labels", Sections: []Section{{Title: "Speedup", Bars: &Bars{Unit: "x", Series: []string{"predicted speedup"}, RefLine: 1,
		Rows: []BarRow{
			{Label: "box-h200-nvswitch (conditional)", Values: []BarValue{{V: 7.29}}, Note: "+628.9 %"},
			{Label: long, Values: []BarValue{{V: 1.41}}, Note: "+41.1 %"},
			{Label: "dp-attn-ep (no fit: -1.8 GB)", Values: []BarValue{{V: 0.951}}, Note: "-4.9 %"},
		}}}}}
	path := filepath.Join(t.TempDir(), "bars.html")
	if err := WriteFile(path, rep); err != nil {
		t.Fatal(err)
	}
	p := b.Open(t, path)
	type box struct {
		Text          string
		X, Right, Max float64
	}
	boxes := reporttest.Eval[[]box](t, p, `Array.from(document.querySelectorAll(".bars svg text")).map(function(e){
		var r = e.getBoundingClientRect(), s = e.ownerSVGElement.getBoundingClientRect();
		var vb = e.ownerSVGElement.viewBox.baseVal, k = vb.width / s.width;
		return {Text: e.textContent, X: (r.left - s.left) * k, Right: (r.right - s.left) * k, Max: vb.width};
	})`)
	seen := false
	for _, bx := range boxes {
		seen = seen || bx.Text == long
		if bx.X < 0 || bx.Right > bx.Max {
			t.Errorf("text %q spans x %.0f to %.0f, outside the chart's 0 to %.0f", bx.Text, bx.X, bx.Right, bx.Max)
		}
	}
	if !seen {
		t.Errorf("the label %q is not drawn", long)
	}
}
