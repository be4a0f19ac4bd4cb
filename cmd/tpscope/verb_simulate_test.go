package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/serving"
	"gonum.org/v1/plot"
)

// simulateJSON is the part of simulate's JSON the tests read.
type simulateJSON struct {
	Model    string `json:"model"`
	GPUs     int    `json:"gpus"`
	KVBlocks int    `json:"kv_blocks_per_scheduler"`
	Runs     []struct {
		Load             string  `json:"load"`
		QPS              float64 `json:"qps"`
		Requests         int     `json:"requests"`
		OutputTokensPerS float64 `json:"output_tokens_per_s"`
		MeetsSLO         bool    `json:"meets_slo"`
		TTFTMs           struct {
			P99 float64 `json:"p99"`
		} `json:"ttft_ms"`
		Timeline []struct {
			KVUseFrac float64 `json:"kv_use_frac"`
		} `json:"timeline"`
	} `json:"runs"`
	Sweep *struct {
		MaxQPS  float64 `json:"max_qps"`
		Bracket float64 `json:"bracket"`
	} `json:"sweep"`
}

func runSimulateJSON(t *testing.T, args ...string) simulateJSON {
	t.Helper()
	var out, errb bytes.Buffer
	if code := dispatch(append([]string{"simulate", "--output", "json"}, args...), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res simulateJSON
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestSimulateRuns: one run per --qps value, each with the requests asked
// for; the plot file is written.
func TestSimulateRuns(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "lat.svg")
	res := runSimulateJSON(t, "--model", "kimi-k2.5", "--kv-dtype", "fp8", "--qps", "0.5,2", "--requests", "200",
		"--isl", "512", "--osl", "64", "--slo-ttft-ms", "3000", "--plot", plot)
	if len(res.Runs) != 2 || res.Runs[0].QPS != 0.5 || res.Runs[1].QPS != 2 {
		t.Fatalf("runs %+v, want qps 0.5 and 2", res.Runs)
	}
	for _, r := range res.Runs {
		if r.Requests != 200 || r.OutputTokensPerS <= 0 || len(r.Timeline) == 0 {
			t.Errorf("run %s: %d requests, %.1f tok/s, %d timeline windows", r.Load, r.Requests, r.OutputTokensPerS, len(r.Timeline))
		}
	}
	if res.GPUs != 8 || res.KVBlocks <= 0 {
		t.Errorf("gpus %d, KV blocks %d", res.GPUs, res.KVBlocks)
	}
	if st, err := os.Stat(plot); err != nil || st.Size() == 0 {
		t.Errorf("plot not written: %v", err)
	}
}

// TestSimulateSweepAndFile: a QPS sweep ends on a bracket that meets the
// SLO below and fails it above; a request file sets the requests.
func TestSimulateSweepAndFile(t *testing.T) {
	res := runSimulateJSON(t, "--model", "kimi-k2.5", "--kv-dtype", "fp8", "--sweep-qps", "--duration", "300",
		"--isl", "1024", "--osl", "128", "--slo-tpot-ms", "60")
	if res.Sweep == nil || res.Sweep.MaxQPS <= 0 || res.Sweep.Bracket <= res.Sweep.MaxQPS {
		t.Fatalf("sweep %+v", res.Sweep)
	}
	for _, r := range res.Runs {
		if (r.QPS <= res.Sweep.MaxQPS) != r.MeetsSLO && (r.QPS == res.Sweep.MaxQPS || r.QPS == res.Sweep.Bracket) {
			t.Errorf("run at %.4f qps: meets %v, bracket [%.4f, %.4f]", r.QPS, r.MeetsSLO, res.Sweep.MaxQPS, res.Sweep.Bracket)
		}
	}
	file := filepath.Join(t.TempDir(), "reqs.csv")
	if err := os.WriteFile(file, []byte("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,2000,50\n0.7,300,300\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res = runSimulateJSON(t, "--model", "kimi-k2.5", "--kv-dtype", "fp8", "--requests-file", file)
	if len(res.Runs) != 1 || res.Runs[0].Requests != 3 || res.Runs[0].Load != "trace" {
		t.Fatalf("trace run %+v, want 3 requests", res.Runs)
	}
}

func TestSimulateUsageErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"arrival_s\": 0, \"prompt_tokens\": 10}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	checkUsageErrors(t, []usageCase{
		{"no load", []string{"simulate"}, "no load"},
		{"both loops", []string{"simulate", "--qps", "1", "--concurrency", "4"}, "not both"},
		{"bad qps", []string{"simulate", "--qps", "fast"}, `--qps: "fast"`},
		{"zero concurrency", []string{"simulate", "--concurrency", "0"}, "--concurrency"},
		{"batch is not a simulate flag", []string{"simulate", "--qps", "1", "--batch", "8"}, "--batch: not used by simulate"},
		{"sweep without slo", []string{"simulate", "--sweep-qps"}, "need an SLO"},
		{"two sweeps", []string{"simulate", "--sweep-qps", "--sweep-concurrency", "--slo-tpot-ms", "50"}, "one search"},
		{"bad percentile", []string{"simulate", "--qps", "1", "--slo-percentile", "95"}, "--slo-percentile"},
		{"percentile without an slo", []string{"simulate", "--qps", "1", "--slo-percentile", "50"}, "--slo-percentile 50: needs an SLO"},
		{"bad output", []string{"simulate", "--qps", "1", "--output", "csv"}, "--output"},
		{"bad plot", []string{"simulate", "--qps", "1", "--plot", "x.jpg"}, "--plot"},
		{"bad arrival", []string{"simulate", "--qps", "1", "--arrival", "zipf"}, "--arrival"},
		{"bad dist", []string{"simulate", "--qps", "1", "--isl-dist", "pareto"}, "--isl-dist"},
		{"spread on fixed", []string{"simulate", "--qps", "1", "--isl-spread", "0.3"}, "spread"},
		{"bad watermark", []string{"simulate", "--qps", "1", "--watermark", "1.5"}, "watermark"},
		{"bad router", []string{"simulate", "--qps", "1", "--router", "random"}, "--router"},
		{"bad requests file", []string{"simulate", "--requests-file", bad}, "bad.jsonl:1: field \"output_tokens\": missing"},
		{"missing requests file", []string{"simulate", "--requests-file", "/nonexistent/r.csv"}, "--requests-file"},
		{"too many instances", []string{"simulate", "--qps", "1", "--instances", "2"}, "need 16 GPUs"},
		{"bad plan", []string{"simulate", "--qps", "1", "--tp", "3"}, "tp"},
		{"dcp", []string{"simulate", "--qps", "1", "--dcp", "8"}, "--dcp 8: want 1"},
	})
}

func TestSimulateTable(t *testing.T) {
	code, out, stderr := runCLI(t, "simulate", "--model", "kimi-k2.5", "--kv-dtype", "fp8", "--concurrency", "4", "--requests", "40", "--isl", "256", "--osl", "32")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"engine: vllm policy, max_num_seqs 1024, max_num_batched_tokens 8192, block_size 16", "concurrency 4", "timeline"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestSimulateOverloaded: 10 requests/s of 1024 + 256 tokens on the
// default box is far beyond what it serves (its completions over the run,
// requests / duration, are under 3/s): the run says it is overloaded,
// with the offered rate (the Poisson arrivals of --qps 10, within 15 %),
// the served rate (within 15 % of the completion rate, which an
// overloaded engine sets) and the queue's growth (their difference), and
// prints TTFT and E2E as "unbounded" (null in JSON). At 0.5 requests/s the
// same box carries the load: served = offered within 5 %, latencies
// printed, no overload line.
func TestSimulateOverloaded(t *testing.T) {
	type run struct {
		Load       string  `json:"load"`
		Requests   int     `json:"requests"`
		DurationS  float64 `json:"duration_s"`
		Offered    float64 `json:"offered_requests_per_s"`
		Served     float64 `json:"served_requests_per_s"`
		Growth     float64 `json:"queue_growth_requests_per_s"`
		Overloaded bool    `json:"overloaded"`
	}
	for _, tc := range []struct {
		qps        string
		overloaded bool
	}{{"10", true}, {"0.5", false}} {
		t.Run("qps "+tc.qps, func(t *testing.T) {
			code, out, errs := runCLI(t, "simulate", "--qps", tc.qps, "--timeline", "0", "--output", "json")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var res struct {
				Runs []map[string]json.RawMessage `json:"runs"`
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Runs) != 1 {
				t.Fatalf("%v: %d runs", err, len(res.Runs))
			}
			raw := res.Runs[0]
			var r run
			b, _ := json.Marshal(raw)
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			qps := map[string]float64{"10": 10, "0.5": 0.5}[tc.qps]
			if r.Overloaded != tc.overloaded || math.Abs(r.Offered/qps-1) > 0.15 || math.Abs(r.Offered-r.Served-r.Growth) > 1e-9*r.Offered {
				t.Fatalf("overloaded %v (want %v), offered %.3f (qps %v), served %.3f, growth %.3f", r.Overloaded, tc.overloaded, r.Offered, qps, r.Served, r.Growth)
			}
			completions := float64(r.Requests) / r.DurationS
			nullLatency := string(raw["ttft_ms"]) == "null" && string(raw["e2e_ms"]) == "null" && string(raw["tpot_ms"]) != "null"
			code, table, _ := runCLI(t, "simulate", "--qps", tc.qps, "--timeline", "0")
			if code != 0 {
				t.Fatalf("table: exit %d", code)
			}
			if tc.overloaded {
				if completions >= 3 || math.Abs(r.Served/completions-1) > 0.15 || r.Growth <= 0.05*r.Offered {
					t.Errorf("served %.3f req/s against %.3f completions/s, growth %.3f", r.Served, completions, r.Growth)
				}
				if !nullLatency || strings.Count(table, "unbounded") != 2 {
					t.Errorf("null TTFT and E2E in JSON %v; table lacks two \"unbounded\":\n%s", nullLatency, table)
				}
				// The line's rates are the JSON's to three significant
				// digits, each written without a bare point ("124.").
				m := regexp.MustCompile(`qps ` + regexp.QuoteMeta(tc.qps) + ` poisson: overloaded: offered (\S+) req/s, served (\S+) req/s, queue grows by (\S+) requests/s`).FindStringSubmatch(table)
				if m == nil {
					t.Fatalf("table lacks the overload line:\n%s", table)
				}
				for i, want := range []float64{r.Offered, r.Served, r.Growth} {
					got, err := strconv.ParseFloat(m[i+1], 64)
					if err != nil || strings.HasSuffix(m[i+1], ".") || math.Abs(got/want-1) > 0.005 {
						t.Errorf("overload line's rate %q: want %.4g to three significant digits", m[i+1], want)
					}
				}
				return
			}
			if math.Abs(r.Served/r.Offered-1) > 0.05 || nullLatency || strings.Contains(table, "overloaded") || strings.Contains(table, "unbounded") {
				t.Errorf("carried load: served %.3f of %.3f, null latencies %v, table:\n%s", r.Served, r.Offered, nullLatency, table)
			}
			if !strings.Contains(table, fmt.Sprintf("%.3f / %.3f", r.Offered, r.Served)) {
				t.Errorf("table lacks offered / served %.3f / %.3f:\n%s", r.Offered, r.Served, table)
			}
		})
	}
}

// TestSimulateBurstiness: --burstiness X, as vllm bench serve reads it,
// draws gamma gaps of shape X: alone it implies --arrival gamma (the same
// run as naming it), 1 stays Poisson, and where it cannot shape the
// arrivals (another --arrival, a closed loop) it is refused in one line.
func TestSimulateBurstiness(t *testing.T) {
	type traffic struct {
		Traffic struct {
			Arrival    string  `json:"arrival"`
			Burstiness float64 `json:"burstiness"`
		} `json:"traffic"`
		Runs []struct {
			Load string `json:"load"`
		} `json:"runs"`
	}
	run := func(args ...string) (traffic, string) {
		t.Helper()
		code, out, errs := runCLI(t, append([]string{"simulate", "--qps", "1", "--requests", "50", "--output", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var res traffic
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		return res, out
	}
	implied, impliedOut := run("--burstiness", "0.5")
	if implied.Traffic.Arrival != "gamma" || implied.Traffic.Burstiness != 0.5 || len(implied.Runs) != 1 || implied.Runs[0].Load != "qps 1 gamma (burstiness 0.5)" {
		t.Errorf("--burstiness 0.5: traffic %+v, runs %+v; want gamma arrivals of shape 0.5", implied.Traffic, implied.Runs)
	}
	if _, named := run("--burstiness", "0.5", "--arrival", "gamma"); named != impliedOut {
		t.Error("--burstiness 0.5 and --burstiness 0.5 --arrival gamma differ")
	}
	if one, _ := run("--burstiness", "1"); one.Traffic.Arrival != "poisson" || one.Runs[0].Load != "qps 1 poisson" {
		t.Errorf("--burstiness 1: traffic %+v, runs %+v; want Poisson", one.Traffic, one.Runs)
	}
	reqs := filepath.Join(t.TempDir(), "reqs.csv")
	if err := os.WriteFile(reqs, []byte("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,200,20\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []usageCase{
		{"poisson", []string{"simulate", "--qps", "1", "--arrival", "poisson", "--burstiness", "0.5"}, "--arrival poisson with --burstiness 0.5: the burstiness is the shape of gamma arrivals"},
		{"constant", []string{"simulate", "--qps", "1", "--arrival", "constant", "--burstiness", "2"}, "--arrival constant with --burstiness 2"},
		{"closed loop", []string{"simulate", "--concurrency", "4", "--burstiness", "0.5"}, "--burstiness with --concurrency: a closed loop has no arrival process"},
		{"closed loop, shape 1", []string{"simulate", "--concurrency", "4", "--burstiness", "1"}, "--burstiness with --concurrency"},
		{"trace at its own times", []string{"simulate", "--requests-file", reqs, "--burstiness", "0.5"}, "--burstiness with --requests-file: the trace's own arrival times are replayed"},
		{"measured load", []string{"simulate", "--compare", "../../serving/testdata/bench/generated/vllm-detailed.json", "--burstiness", "0.5"}, "--burstiness with --compare"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, tc.args...)
			if code != 2 || out != "" || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Errorf("exit %d (want 2), stdout %q, stderr %q (want one line with %q)", code, out, errs, tc.want)
			}
		})
	}
}

// TestSimulateLoadFromFileRefusesLoadFlags: a load that comes from a file
// takes no flag that would set it: with --compare every load flag (the
// lengths, their distributions, --arrival, --requests, --duration); with
// --requests-file the lengths, and --arrival unless --qps sets a rate;
// a closed loop no --arrival. Each is one line naming the flag, before
// any work. --requests with a trace (it stops the trace early) and
// --arrival with a trace's lengths at --qps still run.
func TestSimulateLoadFromFileRefusesLoadFlags(t *testing.T) {
	measured := "../../serving/testdata/bench/generated/vllm-detailed.json"
	reqs := filepath.Join(t.TempDir(), "reqs.csv")
	if err := os.WriteFile(reqs, []byte("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,200,20\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var cases []usageCase
	for _, fl := range [][]string{{"--isl", "100"}, {"--osl", "100"}, {"--isl-dist", "uniform"}, {"--osl-dist", "lognormal"},
		{"--isl-spread", "0.5"}, {"--osl-spread", "0.5"}, {"--arrival", "constant"}, {"--requests", "10"}, {"--duration", "5"}} {
		cases = append(cases, usageCase{"compare " + fl[0], append([]string{"simulate", "--model", "deepseek-v3", "--compare", measured}, fl...),
			"--compare with " + fl[0] + ": the measured result sets the load"})
	}
	for _, fl := range [][]string{{"--isl", "100"}, {"--osl", "100"}, {"--isl-dist", "uniform"}, {"--osl-dist", "uniform"}, {"--isl-spread", "0.2"}, {"--osl-spread", "0.2"}} {
		cases = append(cases, usageCase{"requests-file " + fl[0], append([]string{"simulate", "--requests-file", reqs}, fl...),
			"--requests-file with " + fl[0] + ": the trace gives every request's prompt and output tokens"})
	}
	cases = append(cases,
		usageCase{"requests-file --arrival", []string{"simulate", "--requests-file", reqs, "--arrival", "constant"},
			"--arrival with --requests-file: the trace's own arrival times are replayed"},
		usageCase{"closed loop --arrival", []string{"simulate", "--concurrency", "4", "--arrival", "gamma"},
			"--arrival with --concurrency: a closed loop has no arrival process"})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, tc.args...)
			if code != 2 || out != "" || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Errorf("exit %d (want 2), stdout %q, stderr %q (want one line with %q)", code, out, errs, tc.want)
			}
		})
	}
	res := runSimulateJSON(t, "--requests-file", reqs, "--requests", "1")
	if res.Runs[0].Requests != 1 {
		t.Errorf("--requests 1 over a 2-request trace: %d requests, want 1", res.Runs[0].Requests)
	}
	res = runSimulateJSON(t, "--requests-file", reqs, "--qps", "1", "--arrival", "constant")
	if res.Runs[0].Load != "qps 1 constant" || res.Runs[0].Requests != 2 {
		t.Errorf("a trace's lengths at --qps 1 --arrival constant: load %q, %d requests; want qps 1 constant, 2", res.Runs[0].Load, res.Runs[0].Requests)
	}
}

// TestSimulateZeroLoadLength: --requests 0 and --duration 0, typed, are
// refused in one line naming the flag: 0 is the load's "not given", so on
// 601a891 either ran the default 1000 requests (a trace: all of it), a
// load other than the zero asked for.
func TestSimulateZeroLoadLength(t *testing.T) {
	reqs := filepath.Join(t.TempDir(), "reqs.csv")
	if err := os.WriteFile(reqs, []byte("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,200,20\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	checkUsageErrors(t, []usageCase{
		{"requests", []string{"simulate", "--qps", "1", "--requests", "0"}, "--requests 0: want 1 or more requests per run"},
		{"duration", []string{"simulate", "--concurrency", "2", "--duration", "0"}, "--duration 0: want a time above 0 s"},
		{"trace", []string{"simulate", "--requests-file", reqs, "--requests", "0"}, "--requests 0: want 1 or more requests per run"},
	})
}

// TestSimulateTraceCutShort: --requests and --duration cut a trace short,
// and the load line says how much of it each run takes; on 601a891 it
// said "3 requests over 1.0 s" of a trace the runs took 1 request of.
func TestSimulateTraceCutShort(t *testing.T) {
	reqs := filepath.Join(t.TempDir(), "reqs.csv")
	if err := os.WriteFile(reqs, []byte("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,200,20\n1,100,10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flags []string
		want  string
	}{
		// A trace at its own times draws nothing: no seed on the line.
		{[]string{"--requests", "1"}, "3 requests over 1.0 s; each run takes its first 1 (--requests 1); SLO"},
		{[]string{"--duration", "0.7"}, "3 requests over 1.0 s; each run takes the requests arriving in its first 0.7 s (--duration 0.7); SLO"},
		{nil, "3 requests over 1.0 s; SLO"},
	} {
		code, out, errs := runCLI(t, append([]string{"simulate", "--requests-file", reqs, "--timeline", "0"}, c.flags...)...)
		if code != 0 || !strings.Contains(out, "load: trace "+reqs+" (tpscope): "+c.want) {
			t.Errorf("%v: exit %d, stderr %q, want the load line to say %q:\n%s", c.flags, code, errs, c.want, out)
		}
	}
}

// TestSimulateTraceCutBeyondIt: --requests past a trace's requests, or
// --duration past its last arrival (at its own times, or at the times
// --replay-qps scales them to), is refused in one line: the run would
// stop at the trace's end, short of the load asked, and say nothing.
// Three requests at 0, 0.5 and 1 s: replayed at 4 req/s, 2 gaps of 0.25 s
// span 0.5 s.
func TestSimulateTraceCutBeyondIt(t *testing.T) {
	reqs := filepath.Join(t.TempDir(), "reqs.csv")
	if err := os.WriteFile(reqs, []byte("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,200,20\n1,100,10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sim := func(flags ...string) []string { return append([]string{"simulate", "--requests-file", reqs}, flags...) }
	checkUsageErrors(t, []usageCase{
		{"own times, count", sim("--requests", "4"), "--requests 4: want at most 3, the trace's requests"},
		{"open loop, count", sim("--qps", "2", "--requests", "4"), "--requests 4: want at most 3, the trace's requests"},
		{"closed loop, count", sim("--concurrency", "2", "--requests", "4"), "--requests 4: want at most 3, the trace's requests"},
		{"replay, count", sim("--replay-qps", "4", "--requests", "4"), "--requests 4: want at most 3, the trace's requests"},
		{"own times, duration", sim("--duration", "1.5"), "--duration 1.5: want at most 1 s: the trace's last request arrives at 1 s"},
		{"replay, duration", sim("--replay-qps", "4", "--duration", "0.6"), "--duration 0.6: want at most 0.5 s: at 4 req/s the trace's 3 requests arrive within it"},
	})
	// Within the trace, each runs.
	for _, flags := range [][]string{{"--requests", "3"}, {"--duration", "1"}, {"--replay-qps", "4", "--duration", "0.5"}, {"--qps", "2", "--duration", "5"}} {
		if code, _, errs := runCLI(t, append(sim(flags...), "--timeline", "0")...); code != 0 {
			t.Errorf("%v: exit %d: %s", flags, code, errs)
		}
	}
}

// TestSimulateTPOTLimitNeedsLongerOutputs: --slo-tpot-ms on a load whose
// every output is one token is refused in one line before any run: TPOT
// is timed over the tokens after the first, and the runs had printed
// "TPOT 0.0 / 0.0 / 0.0" and met the limit (SLO yes) on nothing timed,
// a sweep searching on TTFT alone under a TPOT limit it said it met.
func TestSimulateTPOTLimitNeedsLongerOutputs(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "t.csv")
	if err := os.WriteFile(trace, []byte("arrival_s,prompt_tokens,output_tokens\n0,100,1\n0.5,200,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	checkUsageErrors(t, []usageCase{
		{"open loop", []string{"simulate", "--qps", "2", "--osl", "1", "--slo-tpot-ms", "20"}, "--slo-tpot-ms 20: every request of the load outputs one token (--osl 1)"},
		{"sweep", []string{"simulate", "--sweep-qps", "--osl", "1", "--slo-ttft-ms", "500", "--slo-tpot-ms", "20"}, "--slo-tpot-ms 20: every request of the load outputs one token (--osl 1)"},
		{"trace", []string{"simulate", "--requests-file", trace, "--slo-tpot-ms", "20"}, "--slo-tpot-ms 20: every request of the load outputs one token (the trace's)"},
	})
	// A TTFT limit judges such a load.
	if code, _, errs := runCLI(t, "simulate", "--qps", "2", "--requests", "20", "--osl", "1", "--slo-ttft-ms", "500", "--timeline", "0"); code != 0 {
		t.Errorf("--osl 1 --slo-ttft-ms 500: exit %d: %s", code, errs)
	}
}

// TestSimulateChosenRunReachedSteadyState: without an SLO the run chosen
// on the Pareto chart, CSV and JSON is the most tokens/s per GPU among
// the runs that reached steady state: 300 requests at 16 req/s on
// DeepSeek-V3 at TP 8 fill the engine for the whole run (too short),
// and it had been chosen on the throughput of an engine still filling.
func TestSimulateChosenRunReachedSteadyState(t *testing.T) {
	code, out, errs := runCLI(t, "simulate", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--qps", "1,4,16", "--requests", "300", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var raw struct {
		Runs []struct {
			Load                   string  `json:"load"`
			TooShort               bool    `json:"too_short"`
			Overloaded             bool    `json:"overloaded"`
			OutputTokensPerSPerGPU float64 `json:"output_tokens_per_s_per_gpu"`
		} `json:"runs"`
		Frontiers []struct {
			Points []struct {
				Run int `json:"run"`
			} `json:"points"`
			Chosen int `json:"chosen"`
		} `json:"frontiers"`
	}
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw.Runs) != 3 || !raw.Runs[2].TooShort {
		t.Fatalf("want three runs, the last too short to reach steady state: %+v", raw.Runs)
	}
	// The pick, worked out from the runs: the most tokens/s per GPU of
	// those steady and not overloaded.
	want := -1
	for i, r := range raw.Runs {
		if !r.TooShort && !r.Overloaded && (want < 0 || r.OutputTokensPerSPerGPU > raw.Runs[want].OutputTokensPerSPerGPU) {
			want = i
		}
	}
	if len(raw.Frontiers) != 1 || raw.Frontiers[0].Chosen < 0 {
		t.Fatalf("frontiers %+v: want one with a run chosen", raw.Frontiers)
	}
	f := raw.Frontiers[0]
	if got := f.Points[f.Chosen].Run; got != want {
		t.Errorf("chosen run %d (%s), want %d (%s)", got, raw.Runs[got].Load, want, raw.Runs[want].Load)
	}
}

// TestSimulateInstancesCount: --instances 0 is refused naming the flag
// (the deployment reads 0 as one, and had run one engine for the none
// asked), and so are a negative count and one above the bound, whose
// refusal had named the deployment's field, not the flag.
func TestSimulateInstancesCount(t *testing.T) {
	checkUsageErrors(t, []usageCase{
		{"zero", []string{"simulate", "--qps", "1", "--requests", "10", "--instances", "0"}, "--instances 0: want 1 to 1024 engine instances"},
		{"negative", []string{"simulate", "--qps", "1", "--requests", "10", "--instances", "-1"}, "--instances -1: want 1 to 1024 engine instances"},
		{"above", []string{"simulate", "--qps", "1", "--requests", "10", "--instances", "1025"}, "--instances 1025: want 1 to 1024 engine instances"},
	})
}

// TestSimulateDistNeedsSpread: --isl-dist or --osl-dist uniform or
// lognormal without a spread is refused naming the flag: a spread of 0
// draws the mean every time, so the run was fixed lengths while the load
// line said "uniform (spread 0)".
func TestSimulateDistNeedsSpread(t *testing.T) {
	checkUsageErrors(t, []usageCase{
		{"isl uniform", []string{"simulate", "--qps", "1", "--requests", "10", "--isl-dist", "uniform"}, "--isl-dist uniform: want --isl-spread above 0 with it"},
		{"osl lognormal", []string{"simulate", "--qps", "1", "--requests", "10", "--osl-dist", "lognormal"}, "--osl-dist lognormal: want --osl-spread above 0 with it"},
	})
	if code, _, errs := runCLI(t, "simulate", "--qps", "1", "--requests", "10", "--timeline", "0", "--isl-dist", "uniform", "--isl-spread", "0.5"); code != 0 {
		t.Errorf("--isl-dist uniform --isl-spread 0.5: exit %d: %s", code, errs)
	}
}

// TestSimulateTimelineRows: --timeline N draws N rows of one run's
// timeline: merging the run's 60 default windows whole had drawn 30
// rows for 50 (two windows a row) and 60 for 200; above the bound it is
// refused in one line.
func TestSimulateTimelineRows(t *testing.T) {
	for _, n := range []int{7, 50, 200} {
		code, out, errs := runCLI(t, "simulate", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--qps", "2", "--requests", "100", "--timeline", strconv.Itoa(n))
		if code != 0 {
			t.Fatalf("--timeline %d: exit %d: %s", n, code, errs)
		}
		_, table, ok := strings.Cut(out, "timeline (time-weighted means per window)\n")
		if !ok {
			t.Fatalf("--timeline %d: no timeline table:\n%s", n, out)
		}
		lines := strings.Split(strings.TrimSpace(table), "\n")
		if rows := len(lines) - 1; rows != n { // less the header
			t.Errorf("--timeline %d: %d rows, want %d", n, rows, n)
		}
	}
	checkUsageErrors(t, []usageCase{{"above the bound", []string{"simulate", "--qps", "2", "--timeline", "1001"}, "--timeline 1001: want 0 to 1000 rows"}})
}

// TestSimulateRouterNeedsSchedulers: --router picks among the schedulers
// (--instances x DP ranks); with one (the default deployment: one
// instance, TP 8, no DP) it routes nothing and is refused in one line,
// whichever router it names; with two instances it runs as given.
func TestSimulateRouterNeedsSchedulers(t *testing.T) {
	checkUsageErrors(t, []usageCase{
		{"least-loaded, one scheduler", []string{"simulate", "--qps", "2", "--requests", "20", "--router", "least-loaded"},
			"--router least-loaded: one scheduler takes every request (1 instance, DP 1), so nothing is routed"},
		{"round-robin, one scheduler", []string{"simulate", "--qps", "2", "--requests", "20", "--router", "round-robin"},
			"--router round-robin: one scheduler takes every request"},
	})
	var out struct {
		Router     string `json:"router"`
		Schedulers int    `json:"schedulers"`
	}
	code, stdout, errs := runCLI(t, "simulate", "--model", "tiny-mla-moe", "--tp", "4", "--instances", "2", "--router", "least-loaded",
		"--qps", "2", "--requests", "20", "--output", "json")
	if code != 0 {
		t.Fatalf("two instances: exit %d, stderr %q", code, errs)
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if out.Router != "least-loaded" || out.Schedulers != 2 {
		t.Errorf("two instances: router %q over %d schedulers, want least-loaded over 2", out.Router, out.Schedulers)
	}
}

// TestOverloadTextDigits: the overload line writes each rate with three
// significant digits and no bare decimal point, above 100 as below.
func TestOverloadTextDigits(t *testing.T) {
	for _, tc := range []struct {
		offered, served, growth float64
		want                    string
	}{
		{124.43, 119.41, 5.02, "offered 124 req/s, served 119 req/s, queue grows by 5.02 requests/s"},
		{99.97, 30.06, 69.91, "offered 100 req/s, served 30.1 req/s, queue grows by 69.9 requests/s"},
		{9.002, 2.841, 6.161, "offered 9.00 req/s, served 2.84 req/s, queue grows by 6.16 requests/s"},
		{0.4563, 0.2, 0.2563, "offered 0.456 req/s, served 0.200 req/s, queue grows by 0.256 requests/s"},
	} {
		got := overloadText(&serving.Result{Overloaded: true, QueueGrows: true, OfferedRequestsPerS: tc.offered, ServedRequestsPerS: tc.served, QueueGrowthPerS: tc.growth})
		if !strings.Contains(got, tc.want) {
			t.Errorf("%q: want it to contain %q", got, tc.want)
		}
	}
}

// TestSimulateJSONWithoutSLO: without --slo-ttft-ms or --slo-tpot-ms the
// JSON speaks of no objective (no slo, verdict, good requests or
// goodput, as the table prints "-"); with one, every run that reached
// steady state (400 requests here; 100 are too short, and a run too
// short to judge carries its verdict but no goodput) carries all four, a
// verdict of false included.
func TestSimulateJSONWithoutSLO(t *testing.T) {
	keys := []string{"slo", "meets_slo", "good_requests", "goodput_requests_per_s"}
	for _, tc := range []struct {
		name string
		slo  []string
		want bool
	}{
		{"none", nil, false},
		{"tpot 1 ms", []string{"--slo-tpot-ms", "1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runCLI(t, append([]string{"simulate", "--qps", "1", "--requests", "400", "--timeline", "0", "--output", "json"}, tc.slo...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var res struct {
				SLO  json.RawMessage              `json:"slo"`
				Runs []map[string]json.RawMessage `json:"runs"`
			}
			if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Runs) != 1 {
				t.Fatalf("%v: %d runs", err, len(res.Runs))
			}
			if (res.SLO != nil) != tc.want {
				t.Errorf("top-level slo %s: want present %v", res.SLO, tc.want)
			}
			for _, k := range keys {
				if _, ok := res.Runs[0][k]; ok != tc.want {
					t.Errorf("run key %q present %v, want %v", k, ok, tc.want)
				}
			}
			if tc.want && string(res.Runs[0]["meets_slo"]) != "false" {
				t.Errorf("meets_slo %s under a 1 ms TPOT: want false", res.Runs[0]["meets_slo"])
			}
		})
	}
}

// TestSimulateSweepRunLength: the largest rate within the SLO does not
// depend on how long the runs are asked to be. DeepSeek-V3 at TP 4 x DP
// 2 with EP on 8 B200s, 1024 / 256 tokens: with 200 requests a run at
// 100 req/s ends its arrivals in 2 s, long before a request's 8 s, and
// judged so it answered over 100 req/s against 44 with 4000 requests.
// Now every run judged spans SteadyStateE2Es median end-to-end latencies
// (too short ones are lengthened, and said so), and the two answers
// agree within 5 %.
func TestSimulateSweepRunLength(t *testing.T) {
	type sweepRun struct {
		QPS          float64 `json:"qps"`
		Requests     int     `json:"requests"`
		MeetsSLO     bool    `json:"meets_slo"`
		TooShort     bool    `json:"too_short"`
		ArrivalSpanS float64 `json:"arrival_span_s"`
		E2EMs        *struct {
			P50 float64 `json:"p50"`
		} `json:"e2e_ms"`
	}
	answer := map[string]float64{}
	for _, n := range []string{"200", "4000"} {
		code, out, errs := runCLI(t, "simulate", "--model", "deepseek-v3", "--topo", "nvswitch:8xb200", "--tp", "4", "--dp", "2", "--ep", "--sweep-qps",
			"--isl", "1024", "--osl", "256", "--slo-ttft-ms", "2000", "--slo-tpot-ms", "50", "--requests", n, "--output", "json")
		if code != 0 {
			t.Fatalf("--requests %s: exit %d: %s", n, code, errs)
		}
		var res struct {
			Runs  []sweepRun `json:"runs"`
			Sweep struct {
				MaxQPS     float64 `json:"max_qps"`
				Lengthened int     `json:"lengthened"`
			} `json:"sweep"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		answer[n] = res.Sweep.MaxQPS
		for _, r := range res.Runs {
			if r.MeetsSLO && (r.TooShort || r.E2EMs == nil || r.ArrivalSpanS < 4*r.E2EMs.P50/1e3) {
				t.Errorf("--requests %s: the run at %.2f req/s meets the SLO with %d requests over %.1f s (too short %v)", n, r.QPS, r.Requests, r.ArrivalSpanS, r.TooShort)
			}
		}
		if n == "200" && res.Sweep.Lengthened == 0 {
			t.Errorf("--requests 200: no run lengthened")
		}
	}
	t.Logf("largest rate within the SLO: %.2f req/s with 200 requests, %.2f with 4000", answer["200"], answer["4000"])
	if math.Abs(answer["200"]/answer["4000"]-1) > 0.05 {
		t.Errorf("largest rate %.2f req/s with 200 requests, %.2f with 4000: want within 5 %%", answer["200"], answer["4000"])
	}
}

// TestPlotLoadAxis: the latency chart's load axis. Open loops go by their
// offered rate and closed loops by their clients, each sorted; measured
// levels of both kinds (vllm bench's rates beside GuideLLM's concurrency
// 4, which a rate axis put at 0) and traces go by the rate each served,
// sorted by it rather than in file order. The rates are the table's
// (req/s offered/served): the axis had put --qps 0.5 at 0.5 where the
// table's offered rate said 0.597.
func TestPlotLoadAxis(t *testing.T) {
	// A run's offered and served rates as the table prints them (over
	// the second half of the arrivals) differ from its nominal --qps and
	// from its rate over the whole run: the axis goes by the table's.
	q := func(qps, offered, served float64) *serving.Result {
		return &serving.Result{Load: fmt.Sprint("qps ", qps), QPS: qps, OfferedRequestsPerS: offered, ServedRequestsPerS: served, RequestsPerS: served - 0.05}
	}
	c := func(n int, offered, served float64) *serving.Result {
		return &serving.Result{Load: fmt.Sprint("concurrency ", n), Concurrency: n, OfferedRequestsPerS: offered, ServedRequestsPerS: served, RequestsPerS: served - 0.05}
	}
	for _, tc := range []struct {
		name  string
		runs  []*serving.Result
		label string
		xs    []float64
	}{
		{"open loops", []*serving.Result{q(4, 4.2, 3.9), q(0.5, 0.597, 0.597), q(2, 2.388, 2.4)}, "offered load, requests/s (as the table's req/s offered)", []float64{0.597, 2.388, 4.2}},
		{"open loops, one with no offered rate", []*serving.Result{q(4, 4.2, 3.9), q(1, 0, 0)}, "nominal load (--qps), requests/s", []float64{1, 4}},
		{"closed loops", []*serving.Result{c(16, 5, 5), c(4, 2, 2)}, "concurrent clients", []float64{4, 16}},
		{"both kinds", []*serving.Result{q(2, 2.1, 1.9), q(8, 8, 6.5), c(4, 3.1, 3.1), c(1, 0.8, 0.8)}, "requests/s served (as the table's req/s served)", []float64{0.8, 1.9, 3.1, 6.5}},
		{"a trace", []*serving.Result{{Load: "trace", OfferedRequestsPerS: 0.71, ServedRequestsPerS: 0.7, RequestsPerS: 0.65}}, "requests/s served (as the table's req/s served)", []float64{0.7}},
		{"a trace too short to rate", []*serving.Result{{Load: "trace", RequestsPerS: 0.65}}, "requests/s served over the whole run", []float64{0.65}},
	} {
		sorted, xOf, label := plotLoadAxis(tc.runs)
		var xs []float64
		for _, r := range sorted {
			xs = append(xs, xOf(r))
		}
		if label != tc.label || fmt.Sprint(xs) != fmt.Sprint(tc.xs) {
			t.Errorf("%s: axis %q at %v, want %q at %v", tc.name, label, xs, tc.label, tc.xs)
		}
	}
}

// TestSimulateTooShortSpeaksOfSLOOnlyWhenGiven: a run too short to reach
// steady state (64 clients, 100 requests: each client sends fewer than
// two, far under four end-to-end latencies of arrivals) says so and how
// many requests would tell; the verdict it withholds is an SLO verdict
// only when --slo-ttft-ms or --slo-tpot-ms gave an SLO.
func TestSimulateTooShortSpeaksOfSLOOnlyWhenGiven(t *testing.T) {
	args := []string{"simulate", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--concurrency", "64", "--requests", "100", "--timeline", "0"}
	code, out, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "concurrency 64: too short to reach steady state") {
		t.Fatalf("want the run judged too short:\n%s", out)
	}
	if strings.Contains(out, "SLO verdict") {
		t.Errorf("no SLO given, but the too-short note speaks of an SLO verdict:\n%s", out)
	}
	code, out, stderr = runCLI(t, append(args, "--slo-tpot-ms", "50")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "; no SLO verdict") {
		t.Errorf("with an SLO the too-short note says no verdict is given:\n%s", out)
	}
}

// TestSimulateTrafficFlagsNamed: the load's lengths, duration and
// burstiness are refused in one line naming the flag and its value, not
// the traffic's field ("traffic: prompt: mean 0 tokens"); a burstiness of
// 0, which is no gamma shape, is refused like any other outside (0, 1000],
// where it ran as "qps 1 gamma (burstiness 1)".
func TestSimulateTrafficFlagsNamed(t *testing.T) {
	checkUsageErrors(t, []usageCase{
		{"isl", []string{"simulate", "--qps", "1", "--isl", "0"}, "usage: --isl 0: want 1 to 16777216 tokens"},
		{"osl", []string{"simulate", "--qps", "1", "--osl", "0"}, "usage: --osl 0: want 1 to 16777216 tokens"},
		{"isl-spread fixed", []string{"simulate", "--qps", "1", "--isl-spread", "0.5"}, "usage: --isl-spread 0.5: want 0 with a fixed length"},
		{"osl-spread uniform", []string{"simulate", "--qps", "1", "--osl-dist", "uniform", "--osl-spread", "2"}, "usage: --osl-spread 2: want at most 1"},
		{"duration", []string{"simulate", "--qps", "1", "--duration", "-1"}, "usage: --duration -1: want a finite time >= 0 s"},
		{"burstiness 0", []string{"simulate", "--qps", "1", "--burstiness", "0"}, "usage: --burstiness 0: want a gamma shape above 0"},
		{"burstiness -2", []string{"simulate", "--qps", "1", "--burstiness", "-2"}, "usage: --burstiness -2: want a gamma shape above 0"},
	})
}

// TestSimulatePlotLatencyAxes: each latency panel's axis runs from 0 to
// past its largest percentile and SLO, ticks labelled in their shortest
// form. gonum spans the data alone: 64 clients' TTFT p99 (12509 ms) sat
// on the axis' end with no tick above it, the axis started at 1 client's
// 286 ms, and its ticks read "2500.00", "7500.00", "12500.00".
func TestSimulatePlotLatencyAxes(t *testing.T) {
	run := func(n int, ttft, tpot serving.Stats) *serving.Result {
		return &serving.Result{Load: fmt.Sprint("concurrency ", n), Concurrency: n, TTFTMs: ttft, TPOTMs: tpot, TPOTRequests: n}
	}
	o := &simulateOutput{Model: "kimi-k2.5-nvfp4", Plan: "tp8", Topology: "rtxpro6000-2s", SLO: serving.SLO{TPOTMs: 150},
		Runs: []*serving.Result{
			run(1, serving.Stats{P50: 286, P90: 286, P99: 286}, serving.Stats{P50: 41.2, P90: 41.2, P99: 41.2}),
			run(8, serving.Stats{P50: 1556, P90: 1556, P99: 1556}, serving.Stats{P50: 49.6, P90: 49.6, P99: 49.6}),
			run(64, serving.Stats{P50: 1566, P90: 9378, P99: 12509}, serving.Stats{P50: 139.6, P90: 140.4, P99: 144.4}),
		}}
	top, bottom, err := simulatePlots(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    *plot.Plot
		hi   float64 // the largest value drawn: a p99 or the SLO
	}{{"TTFT", top, 12509}, {"TPOT", bottom, 150}} {
		if c.p.Y.Min != 0 || !(c.p.Y.Max > c.hi) {
			t.Errorf("%s axis %v to %v, want 0 to past %v", c.name, c.p.Y.Min, c.p.Y.Max, c.hi)
		}
		for _, tk := range c.p.Y.Tick.Marker.Ticks(c.p.Y.Min, c.p.Y.Max) {
			if strings.HasSuffix(tk.Label, ".00") {
				t.Errorf("%s tick %q: want its shortest form", c.name, tk.Label)
			}
		}
	}
}

// TestSimulateSeedRefusedWhereNothingIsDrawn: --seed is refused in one
// line, before any run, where no run draws from it (fixed lengths in a
// closed loop, constant arrivals of fixed lengths, a trace at its own
// times), and the load line names no seed there; it is taken where the
// gaps or lengths are drawn. It had been taken and printed ("seed 3")
// where it changed nothing.
func TestSimulateSeedRefusedWhereNothingIsDrawn(t *testing.T) {
	base := []string{"simulate", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--requests", "20", "--timeline", "0"}
	// The trace holds the 20 requests --requests takes of it.
	trace := filepath.Join(t.TempDir(), "t.csv")
	rows := "arrival_s,prompt_tokens,output_tokens\n"
	for i := range 20 {
		rows += fmt.Sprintf("%g,%d,%d\n", 0.5*float64(i), 100*(1+i%3), 10*(1+i%3))
	}
	if err := os.WriteFile(trace, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		what string
	}{
		{[]string{"--concurrency", "4"}, "fixed lengths in a closed loop"},
		{[]string{"--qps", "2", "--arrival", "constant"}, "fixed lengths at constant arrivals"},
		{[]string{"--requests-file", trace}, "a trace replayed at its own times"},
	} {
		code, out, stderr := runCLI(t, append(append(base, c.args...), "--seed", "3")...)
		if code == 0 || out != "" || strings.Count(strings.TrimSpace(stderr), "\n") != 0 ||
			!strings.Contains(stderr, "--seed 3") || !strings.Contains(stderr, c.what) {
			t.Errorf("%v --seed 3: exit %d, stdout %q, stderr %q; want one line naming --seed 3 and %q", c.args, code, out, stderr, c.what)
		}
		code, out, stderr = runCLI(t, append(base, c.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, stderr)
		}
		if strings.Contains(out, "seed") {
			t.Errorf("%v: nothing is drawn, but the output names a seed:\n%s", c.args, out)
		}
	}
	for _, args := range [][]string{{"--qps", "2"}, {"--concurrency", "4", "--isl-dist", "uniform", "--isl-spread", "0.5"}} {
		code, out, stderr := runCLI(t, append(append(base, args...), "--seed", "3")...)
		if code != 0 || !strings.Contains(out, ", seed 3;") {
			t.Errorf("%v --seed 3: exit %d, want the run and its load line naming seed 3: %s\n%s", args, code, stderr, out)
		}
	}
}

// TestSimulateTTFTIsPredictPrefill: one client sending one prompt that
// fits a step's budget waits one prefill step for its first token, the
// step 'predict --phase prefill' prices for that prompt: the same launch
// mode included. vLLM v1 replays a step with prefill tokens as piecewise
// graphs where its tokens fit a capture size (its profile states no
// prefill_eager), SGLang runs it eagerly; simulate's iterations followed
// the profile while predict ran every prefill step eagerly, so a
// 512-token prompt under vLLM took 191.96 ms to its first token in
// simulate and 194.14 ms in predict.
func TestSimulateTTFTIsPredictPrefill(t *testing.T) {
	for _, flags := range [][]string{
		{"--model", "kimi-k2.5-nvfp4"},
		{"--model", "deepseek-v3", "--topo", "h200-nvswitch"},
		{"--model", "deepseek-v3", "--topo", "h200-nvswitch", "--engine", "sglang@0.5"},
	} {
		t.Run(strings.Join(flags, " "), func(t *testing.T) {
			var sim struct {
				Runs []struct {
					TTFTMs struct {
						P50 float64 `json:"p50"`
					} `json:"ttft_ms"`
				} `json:"runs"`
			}
			runJSONInto(t, &sim, append([]string{"simulate", "--output", "json", "--concurrency", "1", "--requests", "1", "--isl", "512", "--osl", "1"}, flags...)...)
			var pr struct {
				StepUs float64 `json:"step_us"`
			}
			runJSONInto(t, &pr, append([]string{"predict", "--output", "json", "--phase", "prefill", "--context", "512"}, flags...)...)
			if len(sim.Runs) != 1 {
				t.Fatalf("%d runs, want 1", len(sim.Runs))
			}
			if got := sim.Runs[0].TTFTMs.P50 * 1e3; math.Abs(got-pr.StepUs) > 1e-6*pr.StepUs {
				t.Errorf("simulate TTFT %.1f us; predict --phase prefill %.1f us: want one step", got, pr.StepUs)
			}
		})
	}
}
