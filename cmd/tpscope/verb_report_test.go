package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/report"
	"github.com/tpscope/tpscope/report/reporttest"
	"github.com/tpscope/tpscope/traces"
)

// h200GraphTrace is rank 0 of Kimi-K2.5 at TP 8, batch 32, three CUDA-graph
// steps on an H200 (exec/cuda/testdata/h200/README.md).
const h200GraphTrace = "../../exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-graph.otlp.jsonl.gz"

// reportData reads back the data a written report embeds.
func reportData(t *testing.T, path string) *report.Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	open := `<script type="application/json" id="` + report.DataElementID + `">`
	i := strings.Index(page, open)
	if i < 0 {
		t.Fatalf("%s: no data element", path)
	}
	page = page[i+len(open):]
	var r report.Report
	if err := json.Unmarshal([]byte(page[:strings.Index(page, "</script>")]), &r); err != nil {
		t.Fatalf("%s: embedded data: %v", path, err)
	}
	return &r
}

func timelines(r *report.Report) []*report.Timeline {
	var out []*report.Timeline
	for _, s := range r.Sections {
		if s.Timeline != nil {
			out = append(out, s.Timeline)
		}
	}
	return out
}

// opSpansPerStep counts rank 0's op spans in each step of a trace file,
// straight from the reader: the number of boxes each rank-0 lane must hold.
func opSpansPerStep(t *testing.T, src string) map[int]int {
	t.Helper()
	res, err := traces.ReadAll(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	n := map[int]int{}
	for _, s := range res.Spans {
		if s.OpID != "" && s.Rank <= 0 {
			n[s.Step]++
		}
	}
	return n
}

func shotPath(t *testing.T, name string) string {
	if d := os.Getenv("TPSCOPE_SCREENSHOT_DIR"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(d, name)
	}
	return filepath.Join(t.TempDir(), name)
}

// TestReportH200TraceInBrowser is the acceptance run: the report of an
// H200 graph trace is under 5 MB, renders in headless Chromium with no
// console error and no request, holds every op of rank 0 on both its
// lanes, and hovering an op shows its ID and its measured statistics.
func TestReportH200TraceInBrowser(t *testing.T) {
	perStep := opSpansPerStep(t, h200GraphTrace)
	// Every step of the recording covers the schedule once
	// (TestCompareH200Fixtures): one count for all three steps.
	want := -1
	for step, n := range perStep {
		if want >= 0 && n != want {
			t.Fatalf("step %d has %d op spans, another %d: the fixture changed", step, n, want)
		}
		want = n
	}
	if len(perStep) != 3 || want < 1000 {
		t.Fatalf("fixture: %d steps of %d op spans; want 3 steps of a 61-layer schedule", len(perStep), want)
	}
	out := filepath.Join(t.TempDir(), "r.html")
	code, stdout, stderr := runCLI(t, "report", "--trace", h200GraphTrace, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() >= 5<<20 {
		t.Errorf("report is %d bytes, want under 5 MB", st.Size())
	}
	data := reportData(t, out)
	tls := timelines(data)
	if len(tls) != 1 {
		t.Fatalf("%d timelines, want 1", len(tls))
	}
	// TP 8: eight predicted lanes (rank 0's prediction stands for each
	// rank) and rank 0's measured lane.
	if n := len(tls[0].Lanes); n != 9 {
		t.Fatalf("%d lanes, want 9", n)
	}

	b := reporttest.New(t)
	p := b.Open(t, out)
	t.Logf("%s: %d bytes, %s ready after %.0f ms (page clock), %v wall", h200GraphTrace, st.Size(), strings.TrimSpace(stdout), p.RenderMs, p.LoadWall.Round(1e6))
	lanes := reporttest.Eval[[]struct {
		Label    string
		Measured bool
		Rank     int
		Boxes    int
		Drawn    int
	}](t, p, "tpscopeReport.timelines[0].laneCounts()")
	var measuredLane = -1
	for i, l := range lanes {
		if l.Rank == 0 && (l.Boxes != want || l.Drawn != want) {
			t.Errorf("lane %q: %d boxes, %d drawn; want every op of rank 0: %d", l.Label, l.Boxes, l.Drawn, want)
		}
		if l.Measured {
			measuredLane = i
		}
	}
	if measuredLane != 1 {
		t.Fatalf("measured lane at %d, want 1 (below rank 0's predicted lane)", measuredLane)
	}
	type center struct {
		X, Y float64
		ID   string
	}
	for _, lane := range []int{0, measuredLane} {
		at := reporttest.Eval[center](t, p, "(function(){var t=tpscopeReport.timelines[0];return t.boxCenter("+strconv.Itoa(lane)+",t.widestBox("+strconv.Itoa(lane)+"));})()")
		p.MoveMouse(t, at.X, at.Y)
		tip := reporttest.Eval[string](t, p, "tpscopeReport.timelines[0].tooltip()")
		if !strings.HasPrefix(tip, at.ID) || !strings.Contains(tip, "measured median") {
			t.Errorf("lane %d: tooltip %q, want the op ID %q and its measured median", lane, tip, at.ID)
		}
	}
	p.Screenshot(t, shotPath(t, "report-h200.png"))
	// A close-up of the first layers with an op hovered (the README's
	// picture when TPSCOPE_SCREENSHOT_DIR is set).
	attn := -1
	for i, b := range tls[0].Lanes[1].Boxes {
		if tls[0].Ops[b.Op].ID == "L02.attn.mla_decode" {
			attn = i
		}
	}
	if attn < 0 {
		t.Fatal("no L02.attn.mla_decode box on rank 0's measured lane")
	}
	reporttest.Eval[float64](t, p, "tpscopeReport.timelines[0].zoom(0, 1300)")
	at := reporttest.Eval[center](t, p, "tpscopeReport.timelines[0].boxCenter(1, "+strconv.Itoa(attn)+")")
	p.MoveMouse(t, at.X, at.Y)
	if tip := reporttest.Eval[string](t, p, "tpscopeReport.timelines[0].tooltip()"); !strings.HasPrefix(tip, "L02.attn.mla_decode") {
		t.Errorf("zoomed in, the tooltip over L02.attn.mla_decode reads %q", tip)
	}
	p.Screenshot(t, shotPath(t, "report-h200-zoom.png"))
	if probs := p.Problems(); len(probs) > 0 {
		t.Errorf("console errors: %q", probs)
	}
	if reqs := p.ForeignRequests(); len(reqs) > 0 {
		t.Errorf("the page requested %q; want nothing beyond itself", reqs)
	}
}

// TestReportVerb builds reports from each kind of input and checks what
// they embed against numbers known from the inputs.
func TestReportVerb(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "run.json")
	// 100 steps of tiny-mla-moe TP 8, every op taking exactly its predicted
	// time on every rank (writeExactRun).
	writeExactRun(t, run, 100)
	cmp := filepath.Join(dir, "cmp.json")
	code, stdout, stderr := runCLI(t, "compare", "--trace", run, "--output", "json")
	if code != 0 {
		t.Fatalf("compare: exit %d: %s", code, stderr)
	}
	if err := os.WriteFile(cmp, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	adv := filepath.Join(dir, "adv.json")
	code, stdout, stderr = runCLI(t, "advise", "--model", "tiny-mla-moe", "--tp", "8", "--no-sweep", "--transfer", "", "--entries", "cuda-graphs,nccl-proto-ll,fp8-kv", "--output", "json")
	if code != 0 {
		t.Fatalf("advise: exit %d: %s", code, stderr)
	}
	if err := os.WriteFile(adv, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	var cmpRep compare.Report
	if b, _ := os.ReadFile(cmp); json.Unmarshal(b, &cmpRep) != nil || len(cmpRep.Scenarios) != 1 {
		t.Fatal("compare JSON does not read back to one scenario")
	}

	t.Run("100-step trace, 8 ranks measured", func(t *testing.T) {
		out := filepath.Join(dir, "trace.html")
		if code, _, stderr := runCLI(t, "report", "--trace", run, "-o", out); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		perStep := opSpansPerStep(t, run)
		tls := timelines(reportData(t, out))
		if len(tls) != 1 {
			t.Fatalf("%d timelines, want 1", len(tls))
		}
		tl := tls[0]
		// 8 ranks, each predicted then measured: one step drawn of 100.
		if len(tl.Lanes) != 16 {
			t.Fatalf("%d lanes, want 16", len(tl.Lanes))
		}
		for i, l := range tl.Lanes {
			if l.Measured != (i%2 == 1) || l.Rank != i/2 {
				t.Errorf("lane %d is %q (rank %d, measured %v); want rank %d, measured %v", i, l.Label, l.Rank, l.Measured, i/2, i%2 == 1)
			}
			if len(l.Boxes) != perStep[0] {
				t.Errorf("lane %q: %d boxes, want %d (rank 0's op spans of a step)", l.Label, len(l.Boxes), perStep[0])
			}
		}
		// The run took each op's predicted time: measured and predicted
		// durations agree to 2 ns (the trace truncates times to whole ns,
		// the report rounds them to ns).
		pred, meas := tl.Lanes[0].Boxes, tl.Lanes[1].Boxes
		durOf := map[int]float64{}
		for _, b := range pred {
			durOf[b.Op] = b.DurUs
		}
		for _, b := range meas {
			if d, ok := durOf[b.Op]; !ok || d-b.DurUs > 2e-3 || b.DurUs-d > 2e-3 {
				t.Fatalf("measured box of %s lasts %.3f us, predicted %.3f us (present %v); the run took exactly the prediction", tl.Ops[b.Op].ID, b.DurUs, d, ok)
			}
		}
		// Each collective of a TP 8 step joins all 8 ranks, on the
		// predicted lanes and on the measured ones.
		colls := 0
		for _, b := range pred {
			if tl.Ops[b.Op].Kind == "collective" {
				colls++
			}
		}
		if colls == 0 || len(tl.Links) != 2*colls {
			t.Fatalf("%d links for %d collectives, want one across the predicted and one across the measured lanes each", len(tl.Links), colls)
		}
		for _, k := range tl.Links {
			if len(k.Boxes) != 8 {
				t.Fatalf("a link joins %d boxes, want 8", len(k.Boxes))
			}
		}
		// Hover rows hold the 100-step statistics: 100 steps x 8 ranks.
		f := fieldsOf(tl.Ops[pred[len(pred)/2].Op])
		if f["samples"] != "800 (steps x ranks)" || !strings.HasPrefix(f["error"], "+0.0 %") {
			t.Errorf("hover fields %v: want 800 samples and +0.0 %% error", f)
		}
	})

	t.Run("trace with a scenario flag contradicting the recording", func(t *testing.T) {
		// The run recorded batch 8 (writeExactRun); --batch 64 would
		// report another workload as measured: refused, nothing written.
		out := filepath.Join(dir, "trace-b64.html")
		code, _, stderr := runCLI(t, "report", "--trace", run, "--batch", "64", "-o", out)
		if code != 2 || !strings.Contains(stderr, "--batch 64: "+run+" measured batch 8") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Fatalf("exit %d, stderr %q; want 2 and one line naming --batch 64, the file and its batch 8", code, stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s was written", out)
		}
	})

	pred := filepath.Join(dir, "pred.json")
	code, stdout, stderr = runCLI(t, "predict", "--model", "tiny-mla-moe", "--tp", "4", "--batch", "8", "--output", "json")
	if code != 0 {
		t.Fatalf("predict: exit %d: %s", code, stderr)
	}
	if err := os.WriteFile(pred, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("saved prediction", func(t *testing.T) {
		out := filepath.Join(dir, "saved-pred.html")
		if code, _, stderr := runCLI(t, "report", "--from", pred, "-o", out); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		var p struct {
			Symmetric bool
			Ops       []json.RawMessage
		}
		if err := json.Unmarshal([]byte(stdout), &p); err != nil || !p.Symmetric {
			t.Fatalf("predict JSON: %v (symmetric %v); want a symmetric TP 4 prediction", err, p.Symmetric)
		}
		tls := timelines(reportData(t, out))
		// TP 4: rank 0's ops drawn on each of 4 predicted lanes; the
		// saved JSON has no schedule, so no collective is linked.
		if len(tls) != 1 || len(tls[0].Lanes) != 4 {
			t.Fatalf("want one timeline of 4 predicted lanes, got %d timelines", len(tls))
		}
		for _, l := range tls[0].Lanes {
			if l.Measured || len(l.Boxes) != len(p.Ops) {
				t.Errorf("lane %q: measured %v, %d boxes; want predicted, %d boxes (the saved ops)", l.Label, l.Measured, len(l.Boxes), len(p.Ops))
			}
		}
		if len(tls[0].Links) != 0 {
			t.Errorf("%d links drawn from a prediction without its schedule", len(tls[0].Links))
		}
	})

	t.Run("saved advice", func(t *testing.T) {
		out := filepath.Join(dir, "adv.html")
		if code, _, stderr := runCLI(t, "report", "--from", adv, "-o", out); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		r := reportData(t, out)
		if len(timelines(r)) != 0 {
			t.Error("advice alone drew a timeline")
		}
		var rows int
		for _, s := range r.Sections {
			if s.Table != nil && s.Title == "Catalog entries" {
				rows = len(s.Table.Rows)
			}
		}
		// --entries named three catalog entries.
		if rows != 3 {
			t.Errorf("advice table has %d rows, want 3", rows)
		}
	})

	t.Run("saved comparison", func(t *testing.T) {
		out := filepath.Join(dir, "cmp.html")
		if code, _, stderr := runCLI(t, "report", "--from", cmp, "-o", out); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		r := reportData(t, out)
		if len(timelines(r)) != 0 {
			t.Error("a saved comparison drew a timeline it has no timings for")
		}
		var kinds int
		for _, s := range r.Sections {
			if s.Bars != nil && strings.HasPrefix(s.Title, "Time by op kind") {
				kinds = len(s.Bars.Rows)
			}
		}
		if kinds != len(cmpRep.Scenarios[0].Kinds) {
			t.Errorf("kind bars: %d rows, want %d", kinds, len(cmpRep.Scenarios[0].Kinds))
		}
	})

	t.Run("scenario", func(t *testing.T) {
		out := filepath.Join(dir, "pred.html")
		if code, _, stderr := runCLI(t, "report", "--model", "tiny-mla-moe", "--tp", "4", "--batch", "8", "-o", out); code != 0 {
			t.Fatalf("exit %d: %s", code, stderr)
		}
		tls := timelines(reportData(t, out))
		if len(tls) != 1 || len(tls[0].Lanes) != 4 {
			t.Fatalf("want one timeline of 4 predicted lanes (TP 4), got %d timelines", len(tls))
		}
		crit := 0
		for _, l := range tls[0].Lanes {
			if l.Measured {
				t.Errorf("lane %q measured in a prediction-only report", l.Label)
			}
			for _, b := range l.Boxes {
				if b.Critical {
					crit++
				}
			}
		}
		if crit == 0 {
			t.Error("no op marked on the critical path")
		}
	})

	// Saved advice or a saved comparison beside the scenario flags: the
	// flags' step is drawn beside it when it is the saved one's (the
	// advice: tiny-mla-moe tp8 at the defaults, batch 1, context 4096;
	// the comparison: tiny-mla-moe tp8 b8 ctx512 eager on rtxpro6000-2s,
	// writeExactRun), and refused, naming both, when it is another. A saved
	// prediction (tiny-mla-moe tp4 b8) is drawn as saved beside the flags
	// of its step, and refused, naming both, beside another.
	for _, c := range []struct {
		name  string
		from  string
		args  []string
		lanes int // the step's ranks, predicted
	}{
		{"saved advice and its scenario", adv, []string{"--model", "tiny-mla-moe", "--tp", "8"}, 8},
		// One box under two names: the preset the advice names and the
		// description of the same box.
		{"saved advice and its box under another name", adv, []string{"--model", "tiny-mla-moe", "--tp", "8", "--topo", "pcie-2s:8xrtx-pro-6000-server"}, 8},
		{"saved comparison and its scenario", cmp, []string{"--model", "tiny-mla-moe", "--tp", "8", "--batch", "8", "--context", "512", "--cuda-graphs=false"}, 8},
		{"saved comparison and its box under another name", cmp, []string{"--model", "tiny-mla-moe", "--tp", "8", "--batch", "8", "--context", "512", "--cuda-graphs=false", "--topo", "pcie-2s:8xrtx-pro-6000-server"}, 8},
		// The flags the prediction was made with name its step: it is
		// drawn (it had been refused as "another" scenario, naming no file).
		{"saved prediction and its scenario", pred, []string{"--model", "tiny-mla-moe", "--tp", "4", "--batch", "8"}, 4},
		{"saved prediction and its box under another name", pred, []string{"--model", "tiny-mla-moe", "--tp", "4", "--batch", "8", "--topo", "pcie-2s:8xrtx-pro-6000-server"}, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, "same.html")
			if code, _, stderr := runCLI(t, append([]string{"report", "--from", c.from, "-o", out}, c.args...)...); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if tls := timelines(reportData(t, out)); len(tls) != 1 || len(tls[0].Lanes) != c.lanes {
				t.Fatalf("want one timeline of the step's %d predicted lanes", c.lanes)
			}
		})
	}
	other := func(from string, more ...string) []string {
		return withFlags([]string{"report", "--from", from, "--model", "tiny-mla-moe", "--tp", "8", "-o", filepath.Join(dir, "x.html")}, more...)
	}
	checkUsageErrors(t, []usageCase{
		{"saved advice and another batch", other(adv, "--batch", "64"),
			"--from " + adv + ": advice of tiny-mla-moe tp8 decode b1 ctx4096 kv=bf16 on rtxpro6000-2s (options cuda-graphs), and the scenario flags name tiny-mla-moe tp8 decode b64 ctx4096 kv=bf16 on rtxpro6000-2s (options cuda-graphs): a report shows one scenario"},
		{"saved advice and another model", other(adv, "--model", "deepseek-v3"), "the scenario flags name deepseek-v3 tp8 decode b1"},
		{"saved advice and other options", other(adv, "--cuda-graphs=false"), "(options eager): a report shows one scenario"},
		{"saved comparison and the flags' defaults", other(cmp), "--from " + cmp + ": a comparison of tiny-mla-moe tp8 decode b8 ctx512"},
		{"saved comparison and another box", other(cmp, "--batch", "8", "--context", "512", "--cuda-graphs=false", "--topo", "h200-nvswitch"), "on h200-nvswitch (options eager): a report shows one scenario"},
	})

	if err := os.WriteFile(run+"x", []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	checkUsageErrors(t, []usageCase{
		{"no output", []string{"report", "--trace", run}, "pass -o FILE.html"},
		{"bad scenario flag with trace", []string{"report", "--trace", run, "--batch", "0", "-o", filepath.Join(dir, "x.html")}, "--batch"},
		{"saved prediction and scenario flags", []string{"report", "--from", pred, "--tp", "2", "-o", filepath.Join(dir, "x.html")},
			"--from " + pred + ": a prediction of tiny-mla-moe tp4 decode b8 ctx4096 kv=bf16 on rtxpro6000-2s (options cuda-graphs), and the scenario flags name kimi-k2.5-nvfp4 tp2 decode b1 ctx4096 kv=fp8 on rtxpro6000-2s (options cuda-graphs): a report shows one scenario"},
		{"two saved predictions", []string{"report", "--from", pred, "--from", pred, "-o", filepath.Join(dir, "x.html")}, "a second prediction"},
		{"missing saved file", []string{"report", "--from", filepath.Join(dir, "nope.json"), "-o", filepath.Join(dir, "x.html")}, "nope.json"},
		{"saved file not JSON", []string{"report", "--from", run + "x", "-o", filepath.Join(dir, "x.html")}, "--from"},
		{"saved compare and trace", []string{"report", "--from", cmp, "--trace", run, "-o", filepath.Join(dir, "x.html")}, "pass one"},
		{"bad top", []string{"report", "--top", "0", "-o", filepath.Join(dir, "x.html")}, "--top 0"},
		// --allow-partial reads cut traces; without one it changed nothing
		// and was taken silently.
		{"allow-partial beside a saved prediction", []string{"report", "--from", pred, "--allow-partial", "-o", filepath.Join(dir, "x.html")}, "--allow-partial: reads cut or damaged traces, and no --trace is given"},
		{"allow-partial beside the scenario flags", []string{"report", "--model", "tiny-mla-moe", "--allow-partial", "-o", filepath.Join(dir, "x.html")}, "--allow-partial: reads cut or damaged traces"},
		{"output not html", []string{"report", "--model", "tiny-mla-moe", "-o", filepath.Join(dir, "x.png")}, "-o " + filepath.Join(dir, "x.png") + ": want a .html or .htm file"},
		{"output without extension", []string{"report", "--model", "tiny-mla-moe", "-o", filepath.Join(dir, "x")}, "want a .html or .htm file"},
	})
	for _, name := range []string{"x.png", "x"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			t.Errorf("a refused -o %s was written", name)
		}
	}
	// Either extension, any case, is HTML.
	if code, _, stderr := runCLI(t, "report", "--model", "tiny-mla-moe", "--tp", "4", "-o", filepath.Join(dir, "p.HTM")); code != 0 {
		t.Errorf("-o p.HTM: exit %d: %s", code, stderr)
	}
}

func fieldsOf(o report.Op) map[string]string {
	m := map[string]string{}
	for _, f := range o.Fields {
		m[f.Name] = f.Value
	}
	return m
}

// TestReportSavedResultIsTheTracesStep: a report shows one scenario, so a
// saved result beside what else names a step must be of that step, every
// option counted. The H200 executor runs of kimi-k2.5 tp8 decode b8 (CUDA
// graphs, two timing events per op: their names and recorded scenarios;
// one recorded on h200-nvswitch, the catalog run on the same box as
// nvswitch:8xh200-sxm): the first, saved as a comparison, is refused beside
// flags without its timing events (the report drew the flags' shorter step
// above the comparison's for one scenario) and accepted with them; a saved
// prediction beside the catalog run is refused for another model (GLM-5
// beside the Kimi run, once drawn as one report) or without the timing
// events, and accepted for its step on h200-nvswitch.
func TestReportSavedResultIsTheTracesStep(t *testing.T) {
	const run = "../../exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-graph-b8.otlp.jsonl.gz"
	const trace = "../../exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-graph-b8-catalog.otlp.jsonl.gz"
	dir := t.TempDir()
	save := func(name string, args ...string) string {
		t.Helper()
		code, out, stderr := runCLI(t, append(args, "--output", "json")...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cmp := save("cmp.json", "compare", "--trace", run)
	step := []string{"--model", "kimi-k2.5", "--batch", "8", "--topo", "h200-nvswitch", "--engine", "executor"}
	ownPred := save("own.json", append([]string{"predict", "--timing-events", "2"}, step...)...)
	bare := save("bare.json", append([]string{"predict"}, step...)...)
	glm := save("glm.json", "predict", "--model", "glm-5-nvfp4", "--topo", "h200-nvswitch")
	out := filepath.Join(dir, "r.html")

	checkUsageErrors(t, []usageCase{
		{"comparison beside flags without its timing events", append([]string{"report", "--from", cmp, "-o", out}, step...),
			"--from " + cmp + ": a comparison of kimi-k2.5 tp8 decode b8 ctx4096 kv=bf16 on h200-nvswitch (options cuda-graphs engine=executor timing-events=2), and the scenario flags name kimi-k2.5 tp8 decode b8 ctx4096 kv=bf16 on h200-nvswitch (options cuda-graphs engine=executor)"},
		{"prediction of another model beside the trace", []string{"report", "--from", glm, "--trace", trace, "-o", out},
			"--from " + glm + ": a prediction of glm-5-nvfp4 tp8 decode b1"},
		{"prediction without the timing events beside the trace", []string{"report", "--from", bare, "--trace", trace, "-o", out},
			"(options cuda-graphs engine=executor), and the traces measured kimi-k2.5 tp8 decode b8 ctx4096 kv=bf16 on nvswitch:8xh200-sxm (options cuda-graphs engine=executor timing-events=2)"},
	})
	if _, err := os.Stat(out); err == nil {
		t.Fatalf("a refused report was written")
	}
	for _, args := range [][]string{
		append([]string{"report", "--from", cmp, "--timing-events", "2", "-o", out}, step...),
		{"report", "--from", ownPred, "--trace", trace, "-o", out},
	} {
		if code, _, stderr := runCLI(t, args...); code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, stderr)
		}
	}
}

// TestReportRefusesAStepThatDoesNotFit: report prices the flags' step as
// predict does, and a step whose weights and cache do not fit the pool is
// the same one line (the shortfall named) before any page is written,
// where report had drawn it with "fits: false".
func TestReportRefusesAStepThatDoesNotFit(t *testing.T) {
	args := []string{"--gpu-mem-util", "0.5"}
	_, _, perr := runCLI(t, append([]string{"predict"}, args...)...)
	out := filepath.Join(t.TempDir(), "r.html")
	code, _, rerr := runCLI(t, append([]string{"report", "-o", out}, args...)...)
	want := strings.TrimPrefix(strings.TrimSpace(perr), "tpscope predict: ")
	if code == 0 || !strings.Contains(rerr, "does not fit in GPU memory: short by") || !strings.HasSuffix(strings.TrimSpace(rerr), want) {
		t.Errorf("report exit %d, stderr %q; want predict's refusal %q", code, rerr, want)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s written for a step that does not fit", out)
	}
}

// TestReportSaysWhatPricedTheStep: a report of a predicted step says what
// priced it as predict does, in its engine, moe routing and costs lines:
// its summary named the model, box, plan, workload and options only, so
// a step priced by SGLang's kernels, under power-law routing or from an
// aiconfigurator database read as any other, though each is another step
// (predict's engine line names the profile, backends and kernels).
func TestReportSaysWhatPricedTheStep(t *testing.T) {
	dir := t.TempDir()
	step := []string{"--model", "tiny-mla-moe", "--tp", "4", "--batch", "4", "--engine", "sglang", "--moe-routing", "power-law-1.2"}
	want := []string{"moe routing: power-law-1.2"}
	if db := samplePerfDB(t, false); db != "" {
		step = []string{"--model", "kimi-k2.5-nvfp4", "--topo", "pcie-2s:8xrtx-pro-6000-server", "--tp", "8", "--batch", "1",
			"--kv-dtype", "bf16", "--engine", "sglang", "--perf-db", db}
		want = nil
	}
	code, out, errs := runCLI(t, append([]string{"predict", "--output", "json"}, step...)...)
	if code != 0 {
		t.Fatalf("predict: exit %d: %s", code, errs)
	}
	var pr struct {
		Engine      string `json:"engine"`
		MoERouting  string `json:"moe_routing"`
		CostSource  string `json:"cost_source"`
		MeasuredOps int    `json:"measured_ops"`
		Ops         []any  `json:"ops"`
	}
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(pr.Engine, "sglang@") {
		t.Fatalf("predict's engine %q: want SGLang's profile", pr.Engine)
	}
	want = append(want, "engine: "+pr.Engine)
	if pr.MoERouting != "" {
		want = append(want, "moe routing: "+pr.MoERouting)
	}
	if pr.CostSource != "" {
		want = append(want, fmt.Sprintf("costs: %s: %d of %d ops priced from its tables, the rest from the priors", pr.CostSource, pr.MeasuredOps, len(pr.Ops)))
	}
	html := filepath.Join(dir, "p.html")
	if code, _, errs := runCLI(t, append([]string{"report", "-o", html}, step...)...); code != 0 {
		t.Fatalf("report: exit %d: %s", code, errs)
	}
	r := reportData(t, html)
	if len(r.Sections) == 0 || r.Sections[0].Title != "Predicted step" {
		t.Fatalf("first section %+v: want the predicted step", r.Sections)
	}
	for _, w := range want {
		if !slices.Contains(r.Sections[0].Lines, w) {
			t.Errorf("the predicted step's lines lack %q:\n%s", w, strings.Join(r.Sections[0].Lines, "\n"))
		}
	}
}

// TestReportAdviceSaysItsEngine: a report of saved advice says the engine
// that priced its baseline and rows, as advise's engine line does; it had
// left it out, so advice priced with SGLang's kernels read as any other.
func TestReportAdviceSaysItsEngine(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := runCLI(t, "advise", "--model", "tiny-mla-moe", "--tp", "4", "--engine", "sglang", "--no-sweep", "--transfer", "", "--entries", "fp8-kv", "--output", "json")
	if code != 0 {
		t.Fatalf("advise: exit %d: %s", code, errs)
	}
	var adv struct {
		Baseline struct {
			Engine string `json:"engine"`
		} `json:"baseline"`
	}
	if err := json.Unmarshal([]byte(out), &adv); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(adv.Baseline.Engine, "sglang@") {
		t.Fatalf("advise's baseline engine %q: want SGLang's profile", adv.Baseline.Engine)
	}
	saved, html := filepath.Join(dir, "adv.json"), filepath.Join(dir, "adv.html")
	if err := os.WriteFile(saved, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	// Advice alone has no op table for --top to size: it was taken and
	// changed nothing.
	checkUsageErrors(t, []usageCase{{"top beside advice alone", []string{"report", "--from", saved, "--top", "5", "-o", html},
		"--top 5: sets the rows of the op tables, and saved advice alone has none"}})
	if code, _, errs := runCLI(t, "report", "--from", saved, "-o", html); code != 0 {
		t.Fatalf("report: exit %d: %s", code, errs)
	}
	r := reportData(t, html)
	if want := "engine: " + adv.Baseline.Engine; len(r.Sections) == 0 || !slices.Contains(r.Sections[0].Lines, want) {
		t.Errorf("the advice's first section lacks %q: %+v", want, r.Sections)
	}
}

// TestReportSavedComparisonNamesItsBox: a saved comparison's scenario is
// named as compare named it, by the box it was priced on (the box the
// scenario carries by value, sim.DecodeRecordedBox), not by the path of
// the topology file --topo gave: the report of 'compare --topo
// .../cpu-4r.json --output json' was titled "tiny-mla-moe tp4 on
// /abs/path/cpu-4r.json" where compare said "on cpu-4r". A box edited
// after it was saved is refused, as a trace's is.
func TestReportSavedComparisonNamesItsBox(t *testing.T) {
	dir := t.TempDir()
	args := []string{"compare", "--trace", filepath.Join(cpuRanksDir, "cpu4-tiny-mla-moe-tp4-b1-eager.otlp.jsonl.gz"), "--topo", filepath.Join(cpuRanksDir, "cpu-4r.json")}
	code, text, errs := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("compare: exit %d: %s", code, errs)
	}
	var line string
	for _, l := range strings.Split(text, "\n") {
		if s, ok := strings.CutPrefix(l, "scenario 1: "); ok {
			line = s
		}
	}
	if !strings.Contains(line, " on cpu-4r, ") {
		t.Fatalf("compare's scenario line %q: want the box named cpu-4r", line)
	}
	code, js, errs := runCLI(t, append(args, "--output", "json")...)
	if code != 0 {
		t.Fatalf("compare json: exit %d: %s", code, errs)
	}
	saved, html := filepath.Join(dir, "cmp.json"), filepath.Join(dir, "cmp.html")
	if err := os.WriteFile(saved, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, "report", "--from", saved, "-o", html); code != 0 {
		t.Fatalf("report: exit %d: %s", code, errs)
	}
	r := reportData(t, html)
	if !strings.Contains(r.Title, "tiny-mla-moe tp4 on cpu-4r, decode b1 ctx512") || len(r.Sections) == 0 || len(r.Sections[0].Lines) == 0 || r.Sections[0].Lines[0] != line {
		t.Errorf("title %q, first section %+v: want compare's scenario line %q", r.Title, r.Sections, line)
	}
	edited := filepath.Join(dir, "edited.json")
	if err := os.WriteFile(edited, []byte(strings.Replace(js, `"name": "cpu-4r"`, `"name": "cpu-4x"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, "report", "--from", edited, "-o", html); code != 2 || !strings.Contains(errs, "edited or damaged") {
		t.Errorf("an edited box: exit %d, %q: want it refused as edited", code, errs)
	}
}

// TestReportTopIsTheLongestOpsAskedFor: --top sets the rows of the
// predicted step's longest-ops table, as predict's --top does its list:
// the report drew the prediction's first ten whatever --top asked for
// ("10 longest of 88 ops" under --top 25). The rows are rank 0's longest
// ops, longest first, by the times predict prints.
func TestReportTopIsTheLongestOpsAskedFor(t *testing.T) {
	step := []string{"--model", "tiny-mla-moe", "--tp", "4", "--batch", "2"}
	code, out, errs := runCLI(t, append([]string{"predict", "--output", "json"}, step...)...)
	if code != 0 {
		t.Fatalf("predict: exit %d: %s", code, errs)
	}
	var pr struct {
		Ops []struct {
			ID   string  `json:"id"`
			Rank int     `json:"rank"`
			Us   float64 `json:"us"`
		} `json:"ops"`
	}
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatal(err)
	}
	var us []float64
	for _, op := range pr.Ops {
		if op.Rank == 0 {
			us = append(us, op.Us)
		}
	}
	slices.SortFunc(us, func(a, b float64) int { return -cmp.Compare(a, b) })
	const top = 25
	if len(us) <= top {
		t.Fatalf("%d ops on rank 0: want more than --top %d", len(us), top)
	}
	html := filepath.Join(t.TempDir(), "p.html")
	if code, _, errs := runCLI(t, append([]string{"report", "--top", strconv.Itoa(top), "-o", html}, step...)...); code != 0 {
		t.Fatalf("report: exit %d: %s", code, errs)
	}
	r := reportData(t, html)
	var tab *report.Table
	for _, s := range r.Sections {
		if s.Title == "Longest ops" {
			tab = s.Table
		}
	}
	if tab == nil || len(tab.Rows) != top {
		t.Fatalf("longest ops table %+v: want %d rows", tab, top)
	}
	for i, row := range tab.Rows {
		if want := fmt.Sprintf("%.1f", us[i]); row.Cells[3] != want {
			t.Errorf("row %d %s: %s us, want the %d-th longest op's %s us", i, row.Cells[0], row.Cells[3], i+1, want)
		}
	}
}
