package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/report/reporttest"
	"github.com/tpscope/tpscope/serving"
)

// dsr1 is the deployment of the real InferenceX DSR1 results (see
// serving/testdata/bench/inferencex-dsr1-fp4-b200-sglang-tp8ep8/SOURCE.md):
// 8 x B200, TP 8 with EP, FP8 KV, --max-running-requests 256 and
// --chunked-prefill-size 16384; the engine, SGLang, is the one the results
// name.
var dsr1 = []string{"--model", "../../serving/testdata/models/deepseek-r1-0528-fp4", "--topo", "nvswitch:8xb200", "--tp", "8", "--ep",
	"--kv-dtype", "fp8", "--max-num-seqs", "256", "--max-num-batched-tokens", "16384"}

const dsr1Dir = "../../serving/testdata/bench/inferencex-dsr1-fp4-b200-sglang-tp8ep8/"

// dsr1Run is dsr1 with the server's own settings (SOURCE.md: the kernels,
// --attention-backend trtllm_mla and --enable-flashinfer-allreduce-fusion,
// --scheduler-recv-interval 30, which the runner sets from 16 clients up,
// and --stream-interval 10), names only SGLang's profile knows: the
// scenario the results measured.
var dsr1Run = append(append([]string(nil), dsr1...), "--attention-backend", "trtllm_mla", "--ar-norm-fusion", "--scheduler-recv-interval", "30", "--stream-interval", "10")

// compareJSON is simulate --compare's JSON: per measured level, the
// statistics predicted beside the file's.
type compareJSON struct {
	Compare []struct {
		Load     string `json:"load"`
		Measured struct {
			Completed int `json:"completed"`
		} `json:"measured"`
		Metrics []struct {
			Metric    string   `json:"metric"`
			Stat      string   `json:"stat"`
			Predicted float64  `json:"predicted"`
			Measured  *float64 `json:"measured"`
		} `json:"metrics"`
	} `json:"compare"`
}

// TestSimulateCompareTables: priced from the B200's measured tables (the
// sample perf DB's b200_sxm, vLLM 0.24's kernels standing in for
// SGLang's), uncalibrated, against the four InferenceX levels (16-256
// clients; the measured values are the files' own, read back from the
// output):
//   - the median ITL, a chunk of 10 tokens (--stream-interval 10), so 10
//     decode steps, within 15 % at every level: the decode step itself
//     (its fused all-reduce + RMSNorm priced as FlashInfer's kernel, not
//     from vLLM's custom all-reduce table; +26 % at 16 clients before);
//   - the median TTFT within 20 % at every level (issue 33's band;
//     2026-12-08: -12.7 / -11.2 / -5.7 / -8.8 %, -49.6 / -34.5 / -23.8 /
//     -16.5 % before the profile's eager prefill host time, which another
//     corpus's 4-client TTFT measured: sglang-0.5.yaml eager-prefill-host),
//     and at least 30 points closer than the same run with the scheduler
//     reading every step (--scheduler-recv-interval 1): the 30-step
//     receive interval and the eager prefill iteration are most of it;
//   - the median TPOT and the output throughput within 10 % at 16, 64
//     and 128 clients (issue 33's band; 2026-12-08: +7.9 / -8.0, +9.9 /
//     -6.5, +3.4 / -3.2 %; at 64 clients +13.9 / -9.8 % before the fused
//     all-reduce + RMSNorm kernel's one-shot rule, FlashInfer's, was
//     priced: from 17 to 192 tokens its one-shot kernel, not the custom
//     all-reduce's two-shot one, runs) and 25 % at 256 (-15.1 / +16.1 %):
//     TPOT is the decode step plus the stalls of the prefill steps that
//     pause every decode; at 256 the decode step itself is 10 % short
//     (its ITL).
func TestSimulateCompareTables(t *testing.T) {
	db := samplePerfDB(t, true)
	levels := []string{"16", "64", "128", "256"}
	run := func(extra ...string) []map[string]float64 {
		args := []string{"simulate", "--output", "json", "--perf-db", db}
		for _, c := range levels {
			args = append(args, "--compare", dsr1Dir+"conc"+c+".json")
		}
		var out, errb bytes.Buffer
		if code := dispatch(withFlags(append(args, dsr1Run...), extra...), &out, &errb); code != 0 {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
		var res compareJSON
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatal(err)
		}
		if len(res.Compare) != len(levels) {
			t.Fatalf("%d levels compared, want %d", len(res.Compare), len(levels))
		}
		errs := make([]map[string]float64, len(levels))
		for i, c := range res.Compare {
			errs[i] = map[string]float64{}
			for _, m := range c.Metrics {
				key := m.Metric + " " + m.Stat
				if key != "tpot_ms p50" && key != "ttft_ms p50" && key != "itl_ms p50" && m.Metric != "output_tokens_per_s" {
					continue
				}
				if m.Measured == nil || !(*m.Measured > 0) {
					t.Fatalf("%s %s: no measured value", c.Load, key)
				}
				errs[i][m.Metric] = m.Predicted / *m.Measured - 1
			}
			if len(errs[i]) != 4 {
				t.Fatalf("%s: %d of median TTFT, TPOT, ITL and output throughput found", c.Load, len(errs[i]))
			}
		}
		return errs
	}
	with, every := run(), run("--scheduler-recv-interval", "1")
	for i, c := range levels {
		e := with[i]
		t.Logf("%3s clients: TTFT %+.1f %% (reading every step: %+.1f %%), TPOT %+.1f %%, ITL (chunks) %+.1f %%, output tok/s %+.1f %%",
			c, 100*e["ttft_ms"], 100*every[i]["ttft_ms"], 100*e["tpot_ms"], 100*e["itl_ms"], 100*e["output_tokens_per_s"])
		if math.Abs(e["itl_ms"]) > 0.15 {
			t.Errorf("%s clients median ITL: %+.1f %% off, want within 15 %%", c, 100*e["itl_ms"])
		}
		band := map[string]float64{"16": 0.10, "64": 0.10, "128": 0.10, "256": 0.25}[c]
		for _, m := range []string{"tpot_ms", "output_tokens_per_s"} {
			if math.Abs(e[m]) > band {
				t.Errorf("%s clients %s: %+.1f %% off, want within %.0f %%", c, m, 100*e[m], 100*band)
			}
		}
		if a, b := math.Abs(e["ttft_ms"]), math.Abs(every[i]["ttft_ms"]); a > 0.20 || a > b-0.3 {
			t.Errorf("%s clients median TTFT: %.0f %% off, %.0f %% reading every step: want within 20 %% and 30 points closer", c, 100*a, 100*b)
		}
	}
}

// TestSimulateCompare: simulate --compare sets each level of the files
// beside its simulation; the measured numbers are the file's (median
// TTFT 358.53 ms at 16 clients, 606.57 ms at 256), the load simulated is
// the file's (16 and 256 clients, 160 and 2554 requests), and the
// throughput row's measured value is the file's output_token_throughput.
func TestSimulateCompare(t *testing.T) {
	var out, errb bytes.Buffer
	args := append([]string{"simulate", "--output", "json", "--compare", dsr1Dir + "conc16.json", "--compare", dsr1Dir + "conc256.json"}, dsr1Run...)
	if code := dispatch(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res compareJSON
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		load          string
		n             int
		ttft50, outPS float64
	}{{"concurrency 16", 160, 358.53034793399274, 1121.5270840361031}, {"concurrency 256", 2554, 606.573797063902, 7197.241528905786}}
	if len(res.Compare) != 2 {
		t.Fatalf("%d levels compared, want 2", len(res.Compare))
	}
	for i, w := range want {
		c := res.Compare[i]
		if c.Load != w.load || c.Measured.Completed != w.n {
			t.Errorf("level %d: load %q, %d requests; want %q, %d", i, c.Load, c.Measured.Completed, w.load, w.n)
		}
		for _, m := range c.Metrics {
			switch {
			case m.Metric == "ttft_ms" && m.Stat == "p50":
				if m.Measured == nil || math.Abs(*m.Measured-w.ttft50) > 1e-6 || !(m.Predicted > 0) {
					t.Errorf("level %d TTFT p50: %+v, want measured %v", i, m, w.ttft50)
				}
			case m.Metric == "output_tokens_per_s":
				if m.Measured == nil || math.Abs(*m.Measured-w.outPS) > 1e-6 {
					t.Errorf("level %d output tok/s: %+v, want measured %v", i, m, w.outPS)
				}
			case m.Metric == "ttft_ms" && m.Stat == "mean":
				if m.Measured != nil {
					t.Errorf("level %d mean TTFT measured %v: the file does not report it", i, *m.Measured)
				}
			}
		}
	}
}

// calibrateDSR1 fits the InferenceX DSR1 levels' overheads on the
// 16-client level (extra: more flags, as --perf-db), checks the written
// file and the terms one load fits, and returns the calibration.
func calibrateDSR1(t *testing.T, extra ...string) serving.Calibration {
	t.Helper()
	out := filepath.Join(t.TempDir(), "overheads.json")
	args := []string{"calibrate", "--output", "json", "-o", out, "--fit-levels", "1"}
	for _, c := range []string{"16", "64", "128", "256"} {
		args = append(args, "--serving", dsr1Dir+"conc"+c+".json")
	}
	var stdout, errb bytes.Buffer
	if code := dispatch(append(append(args, dsr1Run...), extra...), &stdout, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var cal serving.Calibration
	if err := json.Unmarshal(stdout.Bytes(), &cal); err != nil {
		t.Fatal(err)
	}
	file, err := serving.LoadOverheadsFile(out)
	if err != nil {
		t.Fatal(err)
	}
	o := file.Overheads
	if o != cal.Overheads || o.IsZero() {
		t.Errorf("file %+v, report %+v", o, cal.Overheads)
	}
	// One load under SGLang, which runs its prefill batches eagerly: the
	// decode scale and the host time of a prefill step are fitted,
	// nothing else (no frontend).
	if !(o.DecodeScale > 0) || !(o.PrefillStepUs > 0) || o.FrontendMs != 0 || o.StepUs != 0 || o.PerSeqUs != 0 || o.PrefillScale != 0 {
		t.Errorf("overheads %+v: want only a decode scale and a prefill step time", o)
	}
	if !cal.Fitted[0] || cal.Fitted[1] || len(cal.After) != 4 || !(cal.ObjectiveAfter < cal.ObjectiveBefore) {
		t.Fatalf("fitted %v, %d levels after, objective %v -> %v", cal.Fitted, len(cal.After), cal.ObjectiveBefore, cal.ObjectiveAfter)
	}
	// The file feeds simulate back.
	var so, se bytes.Buffer
	if code := dispatch(append(append([]string{"simulate", "--output", "json", "--serving-overheads", out, "--compare", dsr1Dir + "conc64.json"}, dsr1Run...), extra...), &so, &se); code != 0 {
		t.Fatalf("simulate with the overheads: exit %d: %s", code, se.String())
	}
	return cal
}

// calibratedMetrics are the three figures issue 33 judges a level by.
var calibratedMetrics = []struct{ metric, stat string }{{"ttft_ms", "p50"}, {"tpot_ms", "p50"}, {"output_tokens_per_s", ""}}

// TestCalibrateServing: fitted on the 16-client level with the priors,
// the overheads file is written and read back, and every held-out level
// (64, 128 and 256 clients) is closer to the measurement than before on
// median TTFT, median TPOT and output throughput; at 64 and 128 clients
// TPOT and throughput within 10 % and TTFT within 15 % (2026-12-08, the
// fused all-reduce's one-shot rule priced: -10.8 / -1.9 / +5.7 % and
// -5.0 / -4.6 / +6.7 %; before it -8.5 / +1.8 / +1.9 % and -4.7 / -4.0 /
// +5.6 %: the priors' decode step at 64 clients, 26 % fast on the chunk
// ITL uncalibrated, carries the 16-client fit less well). The 256-client
// level, which no fit on the others reaches (its TPOT 33.0 ms is 36 %
// above its 10-token chunk's 24.2), is closer, not in.
func TestCalibrateServing(t *testing.T) {
	cal := calibrateDSR1(t)
	for i := 1; i < 4; i++ {
		for _, m := range calibratedMetrics {
			b, a := cal.Before[i].Get(m.metric, m.stat), cal.After[i].Get(m.metric, m.stat)
			t.Logf("level %d %s: %+.1f %% -> %+.1f %%", i+1, m.metric, 100*b.ErrFrac(), 100*a.ErrFrac())
			if !(math.Abs(a.ErrFrac()) < math.Abs(b.ErrFrac())) {
				t.Errorf("held-out level %d %s: error %+.1f %% after, %+.1f %% before: want closer", i+1, m.metric, 100*a.ErrFrac(), 100*b.ErrFrac())
			}
			band := 0.10
			if m.metric == "ttft_ms" {
				band = 0.15
			}
			if i < 3 && !(math.Abs(a.ErrFrac()) <= band) {
				t.Errorf("held-out level %d %s: error %+.1f %% after the fit, want within %.0f %%", i+1, m.metric, 100*a.ErrFrac(), 100*band)
			}
		}
	}
}

// TestCalibrateServingTables: the same fit with the sample database's
// B200 tables pricing the step (what a user holding aiconfigurator's
// tables runs): the held-out 64- and 128-client levels within issue 33's
// 10 % on all three (2026-12-08: -8.2 / +2.5 / +1.0 % and -4.8 / -4.5 /
// +5.7 %). The 256-client level is logged, not asserted: the 16-client
// fit moves it away (TTFT -8.8 -> -10.1 %, TPOT -15.1 -> -22.5 %,
// throughput +16.1 -> +28.0 %), its decode steps being slower than any
// step term fitted below it carries (README "not accurate").
func TestCalibrateServingTables(t *testing.T) {
	db := samplePerfDB(t, true)
	cal := calibrateDSR1(t, "--perf-db", db)
	for i := 1; i < 4; i++ {
		for _, m := range calibratedMetrics {
			b, a := cal.Before[i].Get(m.metric, m.stat), cal.After[i].Get(m.metric, m.stat)
			t.Logf("level %d %s: %+.1f %% -> %+.1f %%", i+1, m.metric, 100*b.ErrFrac(), 100*a.ErrFrac())
			if i < 3 && !(math.Abs(a.ErrFrac()) <= 0.10) {
				t.Errorf("held-out level %d %s: error %+.1f %% after the fit, want within 10 %%", i+1, m.metric, 100*a.ErrFrac())
			}
		}
	}
}

// TestSimulateReplay: the public Mooncake trace (its first 1000
// requests) replayed time-scaled at two rates: one run each, every
// request served, the offered rate of the second half of the arrivals
// near the rate asked (a trace's bursts move it), and the prefix cache
// hit on its shared blocks (hash IDs).
func TestSimulateReplay(t *testing.T) {
	res := runSimulateJSON(t, "--model", "kimi-k2.5", "--topo", "h200-nvswitch", "--tp", "8", "--kv-dtype", "fp8",
		"--requests-file", "../../serving/testdata/traces/mooncake-fast25/conversation_trace.first1000.jsonl", "--replay-qps", "0.5,1")
	if len(res.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(res.Runs))
	}
	var raw struct {
		Runs []struct {
			Load               string  `json:"load"`
			Requests           int     `json:"requests"`
			CachedPromptTokens int64   `json:"cached_prompt_tokens"`
			Offered            float64 `json:"offered_requests_per_s"`
		} `json:"runs"`
	}
	var out, errb bytes.Buffer
	if code := dispatch([]string{"simulate", "--output", "json", "--model", "kimi-k2.5", "--topo", "h200-nvswitch", "--tp", "8", "--kv-dtype", "fp8",
		"--requests-file", "../../serving/testdata/traces/mooncake-fast25/conversation_trace.first1000.jsonl", "--replay-qps", "0.5,1"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if err := json.Unmarshal(out.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	for i, q := range []float64{0.5, 1} {
		r := raw.Runs[i]
		if r.Requests != 1000 || r.CachedPromptTokens == 0 || math.Abs(r.Offered/q-1) > 0.25 || !strings.Contains(r.Load, "trace at") {
			t.Errorf("rate %v: %+v", q, r)
		}
	}
}

// TestSimulateCapacity: --sweep-qps --for-qps answers with copies =
// ceil(target / the sweep's largest rate), 8 GPUs each, boxes of the
// 8-GPU box; and the Pareto chart, frontier CSV and report are written.
func TestSimulateCapacity(t *testing.T) {
	dir := t.TempDir()
	png, csvPath, html := filepath.Join(dir, "p.png"), filepath.Join(dir, "f.csv"), filepath.Join(dir, "r.html")
	var out, errb bytes.Buffer
	if code := dispatch([]string{"simulate", "--output", "json", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--tp", "8", "--sweep-qps",
		"--for-qps", "30", "--isl", "1024", "--osl", "128", "--requests", "200", "--slo-ttft-ms", "2000", "--slo-tpot-ms", "50",
		"--pareto", png, "--frontier", csvPath, "--report", html}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res struct {
		Sweep struct {
			MaxQPS float64 `json:"max_qps"`
		} `json:"sweep"`
		Capacity *serving.Capacity `json:"capacity"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	c := res.Capacity
	if c == nil {
		t.Fatal("no capacity")
	}
	copies := int(math.Ceil(30 / res.Sweep.MaxQPS))
	if c.Copies < copies || c.GPUs != 8*c.Copies || c.Boxes != c.Copies || !c.Check.MeetsSLO {
		t.Errorf("capacity %+v; want at least %d copies of 8 GPUs, one box each, the check within the SLO", c, copies)
	}
	for _, p := range []string{png, csvPath, html} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s not written: %v", p, err)
		}
	}
	b, _ := os.ReadFile(csvPath)
	if lines := strings.Count(string(b), "\n"); lines < 3 || !strings.HasPrefix(string(b), "group,load,tokens_per_s_per_gpu,tokens_per_s_per_user") {
		t.Errorf("frontier CSV:\n%s", b)
	}
}

// TestCollectiveMeasureJSON: collective --measure -o FILE.json writes
// nccl-tests' -J document with per-iteration timing, which calibrate
// --nccl-tests reads.
func TestCollectiveMeasureJSON(t *testing.T) {
	dir := t.TempDir()
	j := filepath.Join(dir, "all_gather_perf.json")
	if code, _, stderr := runCLI(t, "collective", "--measure", "--backend", "cpu", "--ranks", "2", "--op", "allgather", "--sizes", "512:8K",
		"--iters", "2", "--steps", "2", "-o", j); code != 0 {
		t.Fatalf("measure: exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(j)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"version": 3`) || !strings.Contains(string(b), `"out_of_place_per_iter"`) {
		t.Errorf("not nccl-tests JSON with per-iteration timing:\n%.400s", b)
	}
	if code, _, stderr := runCLI(t, "calibrate", "--nccl-tests", j, "--topo", filepath.Join(cpuRanksDir, "cpu-4r.json"), "--gpus", "2", "-o", filepath.Join(dir, "cal.json")); code != 0 {
		t.Fatalf("calibrate: exit %d: %s", code, stderr)
	}
}

// TestCapacityReportsInBrowser opens the HTML reports of a simulate sweep
// and of a two-box plan in headless Chromium: no console error and no
// request beyond the file; every capacity chart draws every point of its
// data (the count the report's data holds), all inside the plotted area;
// the simulate chart has its SLO line and chosen point; the plan has a
// chart per context with a series and a front per box. Screenshots go to
// $TPSCOPE_SCREENSHOT_DIR when set.
func TestCapacityReportsInBrowser(t *testing.T) {
	b := reporttest.New(t)
	dir := t.TempDir()
	simHTML, planHTML := filepath.Join(dir, "simulate.html"), filepath.Join(dir, "plan.html")
	if code, _, stderr := runCLI(t, "simulate", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--tp", "8", "--qps", "1,4,8,12,16",
		"--isl", "1024", "--osl", "128", "--requests", "200", "--slo-ttft-ms", "2000", "--slo-tpot-ms", "50", "--report", simHTML); code != 0 {
		t.Fatalf("simulate: exit %d: %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "plan", "--topo", "rtxpro6000-2s,h200-nvswitch", "--gpus", "8", "--context", "4096,32768", "--slo-ms", "50", "--report", planHTML); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, stderr)
	}
	for _, c := range []struct {
		path     string
		scatters int
		series   int // at least, in the first chart
		slo      bool
	}{{simHTML, 1, 2, true}, {planHTML, 2, 4, true}} {
		t.Run(filepath.Base(c.path), func(t *testing.T) {
			p := b.Open(t, c.path)
			type chart struct {
				Drawn, Want, Series, VLines, Marks int
				Inside                             bool
			}
			got := reporttest.Eval[[]chart](t, p, `(function(){var d=JSON.parse(document.getElementById("tpscope-data").textContent);var sc=d.sections.filter(function(s){return s.scatter}).map(function(s){return s.scatter});
				return tpscopeReport.scatters.map(function(x,i){var n=0;sc[i].series.forEach(function(s){n+=s.points.length});
				return {Drawn:x.pointCount(),Want:n,Series:sc[i].series.length,VLines:(sc[i].v_lines||[]).length,Marks:(sc[i].marks||[]).length,Inside:x.inside()};});})()`)
			if len(got) != c.scatters {
				t.Fatalf("%d charts, want %d", len(got), c.scatters)
			}
			for i, g := range got {
				if g.Drawn != g.Want || g.Want == 0 || !g.Inside {
					t.Errorf("chart %d: %d of %d points drawn, all inside %v", i, g.Drawn, g.Want, g.Inside)
				}
			}
			if g := got[0]; g.Series < c.series || (c.slo && g.VLines != 1) || g.Marks != 1 {
				t.Errorf("first chart: %d series (want >= %d), %d SLO lines, %d marks", g.Series, c.series, g.VLines, g.Marks)
			}
			shots := dir
			if d := os.Getenv("TPSCOPE_SCREENSHOT_DIR"); d != "" {
				shots = d
			}
			p.Screenshot(t, filepath.Join(shots, "capacity-"+strings.TrimSuffix(filepath.Base(c.path), ".html")+".png"))
			if probs := p.Problems(); len(probs) > 0 {
				t.Errorf("console errors: %q", probs)
			}
			if reqs := p.ForeignRequests(); len(reqs) > 0 {
				t.Errorf("the page requested %q", reqs)
			}
		})
	}
}

// TestSimulateCompareSLOVerdict: with --compare, an SLO gets a verdict
// per level, the simulation's (met or not, its goodput) beside the
// measured level's by its own percentiles. The conc64 file reports p99
// TTFT 1420.3 ms, p99 TPOT 28.5 ms and no p90: limits of 2000 and 30 ms
// are met there, 28 ms of TPOT is not, and p90 cannot be judged. Limits
// no request can miss (100 s) are met by the simulation too; 1 us of
// TTFT no request meets (goodput 0).
func TestSimulateCompareSLOVerdict(t *testing.T) {
	level := dsr1Dir + "conc64.json"
	for _, c := range []struct {
		slo  []string
		want string
	}{
		{[]string{"--slo-ttft-ms", "100000", "--slo-tpot-ms", "100000"}, "  SLO p99 TTFT <= 100000 ms, TPOT <= 100000 ms: predicted met, goodput "},
		{[]string{"--slo-ttft-ms", "2000", "--slo-tpot-ms", "30"}, "; measured met\n"},
		{[]string{"--slo-ttft-ms", "2000", "--slo-tpot-ms", "28"}, "; measured not met\n"},
		{[]string{"--slo-ttft-ms", "0.001"}, "  SLO p99 TTFT <= 0.001 ms: predicted not met, goodput 0.000 req/s; measured not met\n"},
		{[]string{"--slo-ttft-ms", "2000", "--slo-percentile", "90"}, "; measured not judged (the file does not report that percentile)\n"},
	} {
		code, out, errs := runCLI(t, append(append([]string{"simulate", "--compare", level}, dsr1Run...), c.slo...)...)
		if code != 0 || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, stderr %q; output lacks %q:\n%s", c.slo, code, errs, c.want, out)
		}
	}
}

// TestSimulateCompareReportSLOVerdict: the HTML report of a comparison
// under an SLO carries the same verdict line as the text, in the level's
// section (conc64 reports p99 TPOT 28.5 ms: 28 ms is not met there).
func TestSimulateCompareReportSLOVerdict(t *testing.T) {
	html := filepath.Join(t.TempDir(), "cmp.html")
	args := append(append([]string{"simulate", "--compare", dsr1Dir + "conc64.json"}, dsr1Run...),
		"--slo-ttft-ms", "2000", "--slo-tpot-ms", "28", "--report", html)
	code, out, errs := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	i := strings.Index(out, "SLO p99 TTFT <= 2000 ms, TPOT <= 28 ms: predicted ")
	if i < 0 {
		t.Fatalf("text output lacks the SLO verdict:\n%s", out)
	}
	line := strings.TrimSpace(out[i : i+strings.Index(out[i:], "\n")])
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	// The page carries its data as JSON, "<" escaped.
	if !strings.Contains(string(page), strings.ReplaceAll(line, "<=", `\u003c=`)) {
		t.Errorf("report %s lacks the verdict %q", html, line)
	}
}

// qwenLog is LLMServingSim's vLLM request log (Qwen3-30B-A3B, 300
// requests at about 10 per second, see its SOURCE.md): replayed on the
// default deployment, a far larger model, the simulation is overloaded.
const qwenLog = "../../serving/testdata/bench/llmservingsim-rtxpro6000-qwen3-30b-a3b-dp2ep/vllm_requests.jsonl"

// TestSimulateCompareOverloaded: against an overloaded simulation the
// TTFT and E2E rows print "unbounded" beside the measured figure with no
// error, their predicted and err_frac are null in JSON with "unbounded":
// true, the TPOT rows stay figures, and each comparison's rows appear
// once, under "metrics".
func TestSimulateCompareOverloaded(t *testing.T) {
	code, out, errs := runCLI(t, "simulate", "--compare", qwenLog, "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var res struct {
		Compare []map[string]json.RawMessage `json:"compare"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Compare) != 1 {
		t.Fatalf("%v: %d comparisons", err, len(res.Compare))
	}
	lc := res.Compare[0]
	var pred struct {
		Overloaded bool `json:"overloaded"`
	}
	if err := json.Unmarshal(lc["predicted"], &pred); err != nil || !pred.Overloaded {
		t.Fatalf("predicted run overloaded %v (%v): the case needs an overloaded simulation", pred.Overloaded, err)
	}
	if _, dup := lc["Metrics"]; dup {
		t.Errorf("the rows appear under \"Metrics\" as well as \"metrics\"")
	}
	var rows []map[string]any
	if err := json.Unmarshal(lc["metrics"], &rows); err != nil || len(rows) != 19 {
		t.Fatalf("%v: %d rows, want 4 latencies x 4 statistics + 3 rates", err, len(rows))
	}
	for _, r := range rows {
		m := r["metric"].(string)
		unbounded := m == "ttft_ms" || m == "e2e_ms"
		if unbounded != (r["unbounded"] == true) || unbounded != (r["predicted"] == nil) || (unbounded && r["err_frac"] != nil) {
			t.Errorf("row %v: want unbounded, predicted and err_frac null: %v", r, unbounded)
		}
	}
	code, table, _ := runCLI(t, "simulate", "--compare", qwenLog)
	if code != 0 {
		t.Fatalf("table: exit %d", code)
	}
	for _, line := range strings.Split(table, "\n") {
		for _, name := range []string{"TTFT ms", "E2E ms"} {
			if strings.HasPrefix(line, name) && strings.Count(line, "unbounded / ") != 4 {
				t.Errorf("%s row: want 4 cells \"unbounded / measured\": %q", name, line)
			}
		}
		if strings.HasPrefix(line, "TPOT ms") && strings.Contains(line, "unbounded") {
			t.Errorf("TPOT row: %q", line)
		}
	}
}

// TestSimulateCompareGroupsByLength: measured levels of different prompt
// lengths are not one capacity plane (their tokens/s per user are not
// comparable). Two GLM-5 levels of ISL 1024 and one of ISL 8192 (OSL 128
// each: the files' total_input_tokens / completed) give two fronts, each
// with its own chosen run, in the JSON, the frontier CSV and the Pareto
// chart; the four DSR1 levels, whose random prompts average 517 to 521
// tokens, share one.
func TestSimulateCompareGroupsByLength(t *testing.T) {
	const glm = "../../serving/testdata/bench/inferencex-glm5-fp8-vllm-tp8-tokenpos/results/glm5_fp8_vllm_tp8_"
	dir := t.TempDir()
	csvPath, png := filepath.Join(dir, "f.csv"), filepath.Join(dir, "p.png")
	code, out, errs := runCLI(t, "simulate", "--model", "../../serving/testdata/models/glm-5-fp8", "--topo", "h200-nvswitch", "--mtp", "1",
		"--compare", glm+"isl1024_osl128_conc4.json", "--compare", glm+"isl1024_osl128_conc32.json", "--compare", glm+"isl8192_osl128_conc8.json",
		"--frontier", csvPath, "--pareto", png, "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	type front struct {
		Group  string `json:"group"`
		Points []struct {
			Run  int    `json:"run"`
			Load string `json:"load"`
		} `json:"points"`
		Chosen int `json:"chosen"`
	}
	var res struct {
		Frontiers []front `json:"frontiers"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		group string
		runs  []int
	}{{"ISL 1024 / OSL 128 (measured)", []int{0, 1}}, {"ISL 8192 / OSL 128 (measured)", []int{2}}}
	if len(res.Frontiers) != len(want) {
		t.Fatalf("%d fronts, want %d: %+v", len(res.Frontiers), len(want), res.Frontiers)
	}
	for i, w := range want {
		f := res.Frontiers[i]
		var runs []int
		for _, p := range f.Points {
			runs = append(runs, p.Run)
		}
		if f.Group != w.group || fmt.Sprint(runs) != fmt.Sprint(w.runs) || f.Chosen < 0 {
			t.Errorf("front %d: %q of runs %v, chosen %d; want %q of %v with a chosen run", i, f.Group, runs, f.Chosen, w.group, w.runs)
		}
	}
	b, err := os.ReadFile(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(string(b)), "\n")
	chosen := 0
	for _, r := range rows[1:] {
		if strings.HasSuffix(r, ",true") {
			chosen++
		}
	}
	if len(rows) != 4 || strings.Count(string(b), "\nISL 8192 / OSL 128 (measured),concurrency 8,") != 1 || chosen != 2 {
		t.Errorf("frontier CSV: want a header and 3 rows, the ISL 8192 level in its own group, a chosen row per group:\n%s", b)
	}
	if st, err := os.Stat(png); err != nil || st.Size() == 0 {
		t.Errorf("Pareto chart not written: %v", err)
	}

	code, out, errs = runCLI(t, append([]string{"simulate", "--output", "json", "--compare", dsr1Dir + "conc16.json", "--compare", dsr1Dir + "conc64.json",
		"--compare", dsr1Dir + "conc128.json", "--compare", dsr1Dir + "conc256.json"}, dsr1...)...)
	if code != 0 {
		t.Fatalf("DSR1: exit %d: %s", code, errs)
	}
	res.Frontiers = nil
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Frontiers) != 1 || len(res.Frontiers[0].Points) != 4 {
		t.Errorf("DSR1: %d fronts: want one of the 4 levels: %+v", len(res.Frontiers), res.Frontiers)
	}
}

// TestCalibrateServingMeanLabelled: a result that reports a mean TTFT and
// no median (the 16-client DSR1 level with median_ttft_ms renamed
// mean_ttft_ms, the same 358.53 ms) is fitted on that mean, as the fit's
// objective says it falls back; the before/after table's TTFT cells under
// the "p50" header say they hold the mean, and the objective line says
// which level's mean was fitted. The TPOT cells, whose median the file
// reports, are not marked.
func TestCalibrateServingMeanLabelled(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(dsr1Dir + "conc16.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"median_ttft_ms"`)) {
		t.Fatal("fixture has no median_ttft_ms")
	}
	meanOnly := filepath.Join(dir, "conc16-mean.json")
	if err := os.WriteFile(meanOnly, bytes.Replace(b, []byte(`"median_ttft_ms"`), []byte(`"mean_ttft_ms"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, append([]string{"calibrate", "--serving", meanOnly, "-o", filepath.Join(dir, "o.json")}, dsr1Run...)...)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errs)
	}
	var row []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "1 ") {
			row = splitCells(l)
		}
	}
	// level, load, role, TTFT before, TTFT after, TPOT before, TPOT after, tok/s before, tok/s after
	if len(row) != 9 {
		t.Fatalf("level row %q: want 9 cells:\n%s", row, out)
	}
	for i, c := range row[3:5] {
		if !strings.HasPrefix(c, "mean ") || !strings.Contains(c, " / 358.5 (") {
			t.Errorf("TTFT cell %d %q: want the mean, labelled, against the measured 358.5 ms", i, c)
		}
	}
	for i, c := range row[5:] {
		if strings.Contains(c, "mean") {
			t.Errorf("cell %d %q: marked as a mean where the file reports the median or a rate", i+5, c)
		}
	}
	if !strings.Contains(out, "the mean TTFT of level 1, whose result reports no median") {
		t.Errorf("the objective line does not say level 1's mean TTFT was fitted:\n%s", out)
	}
}

// splitCells splits a text table row on runs of two or more spaces.
func splitCells(l string) []string {
	var cells []string
	for _, c := range strings.Split(l, "  ") {
		if c = strings.TrimSpace(c); c != "" {
			cells = append(cells, c)
		}
	}
	return cells
}

// TestCalibrateServingTermsOneLoad: fitted on one load (the 16-client
// DSR1 level: one median TTFT and one median TPOT, its closed-loop
// throughput following from both), --terms naming four terms, two of
// which move its TPOT alike (step, decode), is refused in one line
// naming --terms and the two terms one load of one shape fits, before
// any fit (no overheads file). A pair the load does determine (the
// decode scale and the prefill step, SGLang's default) is fitted.
func TestCalibrateServingTermsOneLoad(t *testing.T) {
	dir := t.TempDir()
	o := filepath.Join(dir, "o.json")
	code, out, errs := runCLI(t, append([]string{"calibrate", "--serving", dsr1Dir + "conc16.json", "--terms", "step,decode,prefill-step,frontend", "-o", o}, dsr1Run...)...)
	want := "--terms step,decode,prefill-step,frontend: the fitted levels run 1 load of 1 shape (load and lengths), which fits 2 terms"
	if code != 2 || out != "" || !strings.Contains(errs, want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", code, out, errs, want)
	}
	if _, err := os.Stat(o); err == nil {
		t.Errorf("%s written by a refused fit", o)
	}
	code, out, errs = runCLI(t, append([]string{"calibrate", "--serving", dsr1Dir + "conc16.json", "--terms", "decode,prefill-step", "-o", o}, dsr1Run...)...)
	if code != 0 || !strings.Contains(out, "serving overheads: ") {
		t.Errorf("--terms decode,prefill-step on one load: exit %d, stderr %q, output:\n%s", code, errs, out)
	}
}

// TestSimulateCompareSpeculativeServer: a result of a server that decoded
// speculatively (vllm bench serve's spec_decode_* keys: 3.20 tokens a
// step over 3-token drafts) measured another scenario than a simulation
// that drafts nothing, and the comparison says so, naming the flags that
// price it; simulated with --spec and the file's own acceptance
// (--spec-accept-file the same result: positions 0.9, 0.75, 0.55, 1 +
// their sum = 3.20 tokens a step), the note sets the two yields side by
// side.
func TestSimulateCompareSpeculativeServer(t *testing.T) {
	data, err := os.ReadFile("../../serving/testdata/bench/generated/vllm-detailed.json")
	if err != nil {
		t.Fatal(err)
	}
	spec := bytes.Replace(data, []byte(`{"date"`), []byte(`{"spec_decode_acceptance_length": 3.2, "spec_decode_num_drafts": 100, "spec_decode_draft_tokens": 300, "spec_decode_accepted_tokens": 220, "spec_decode_per_position_acceptance_rates": [0.9, 0.75, 0.55], "date"`), 1)
	path := filepath.Join(t.TempDir(), "spec-result.json")
	if err := os.WriteFile(path, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "simulate", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--compare", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "the measured server decoded speculatively (3.20 tokens a step, as the file reports) and this simulation drafts nothing: --spec METHOD with --spec-accept-file "+path+" prices it") {
		t.Errorf("no note of the server's speculative decoding:\n%s", out)
	}
	code, out, errs = runCLI(t, "simulate", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--compare", path, "--spec", "mtp", "--spec-tokens", "3", "--spec-accept-file", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "acceptance: the simulation yields 3.20 tokens a step (") || !strings.Contains(out, "the measured server 3.20 (as the file reports") {
		t.Errorf("no acceptance beside the measured one:\n%s", out)
	}
}

// TestSimulateReplayCutShortAtRate: --replay-qps with --requests or
// --duration offers the rate asked over the requests the run takes.
// Four requests a second apart then one 97 s later: scaled whole to 2
// req/s (4 gaps in 2 s) and cut to four, the run's arrivals spanned
// 0.06 s, 50 req/s for a run labelled "trace at 2 req/s". Taken first,
// four requests at 2 req/s span 3 gaps of 0.5 s; a 1.2 s run at 2 req/s
// takes ceil(2.4) = 3 requests over 1 s.
func TestSimulateReplayCutShortAtRate(t *testing.T) {
	reqs := filepath.Join(t.TempDir(), "reqs.csv")
	if err := os.WriteFile(reqs, []byte("arrival_s,prompt_tokens,output_tokens\n0,100,10\n1,100,10\n2,100,10\n3,100,10\n100,100,10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flags    []string
		requests int
		spanS    float64
	}{
		{[]string{"--requests", "4"}, 4, 1.5},
		{[]string{"--duration", "1.2"}, 3, 1},
	} {
		code, out, errs := runCLI(t, append([]string{"simulate", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--output", "json",
			"--requests-file", reqs, "--replay-qps", "2"}, c.flags...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.flags, code, errs)
		}
		var raw struct {
			Runs []struct {
				Requests     int     `json:"requests"`
				ArrivalSpanS float64 `json:"arrival_span_s"`
			} `json:"runs"`
		}
		if err := json.Unmarshal([]byte(out), &raw); err != nil {
			t.Fatal(err)
		}
		if r := raw.Runs[0]; r.Requests != c.requests || math.Abs(r.ArrivalSpanS-c.spanS) > 1e-9 {
			t.Errorf("%v: %d requests over %v s, want %d over %v s", c.flags, r.Requests, r.ArrivalSpanS, c.requests, c.spanS)
		}
	}
}

// TestSimulateOneTokenOutputsShowNoTPOT: simulate --osl 1 without an SLO
// times no TPOT or ITL (no token after the first): the runs' table says
// "-" for both, as for other figures not measured, and the JSON null,
// where they read 0.0 and 0, times the run never took.
func TestSimulateOneTokenOutputsShowNoTPOT(t *testing.T) {
	args := []string{"simulate", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--tp", "8", "--qps", "1", "--isl", "1024", "--osl", "1", "--requests", "30", "--timeline", "0"}
	code, out, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var row []string
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "load ") && i+1 < len(lines) {
			// Columns are two spaces or more apart.
			row = regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(lines[i+1]), -1)
			break
		}
	}
	// load, requests, duration, TTFT, TPOT, ITL, ...
	if len(row) < 6 || row[4] != "-" || row[5] != "-" || row[3] == "-" {
		t.Errorf("runs row %q: want TPOT and ITL '-' and a TTFT\n%s", row, out)
	}
	code, js, stderr := runCLI(t, append(args, "--output", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res struct {
		Runs []map[string]json.RawMessage `json:"runs"`
	}
	if err := json.Unmarshal([]byte(js), &res); err != nil || len(res.Runs) != 1 {
		t.Fatalf("%v: %d runs", err, len(res.Runs))
	}
	for _, k := range []string{"tpot_ms", "itl_ms"} {
		if v := string(res.Runs[0][k]); v != "null" {
			t.Errorf("%s = %s, want null", k, v)
		}
	}
}
