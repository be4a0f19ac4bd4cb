package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		{"dcp", []string{"simulate", "--qps", "1", "--dcp", "8"}, `field "dcp" = 8`},
	})
}

func TestSimulateTable(t *testing.T) {
	code, out, stderr := runCLI(t, "simulate", "--model", "kimi-k2.5", "--kv-dtype", "fp8", "--concurrency", "4", "--requests", "40", "--isl", "256", "--osl", "32")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"engine: max_num_seqs 1024, max_num_batched_tokens 8192, block_size 16", "concurrency 4", "timeline"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
