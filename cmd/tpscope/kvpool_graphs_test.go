package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// kvGraphScen is GLM-5.1-NVFP4's scenario of the public logs the
// CUDA-graph estimate is quoted from (sjug/rtx6kpro, 8x RTX PRO 6000, fp8
// KV, DSA sparse), under vllm@0.24's default fraction.
var kvGraphScen = []string{"--model", "glm-5-nvfp4", "--topo", "rtxpro6000-2s", "--tp", "8", "--kv-dtype", "fp8", "--dense-dsa=false"}

// rtxPro6000MemB is the RTX PRO 6000 Blackwell's memory as nvidia-smi
// reports it (97,887 MiB).
const rtxPro6000MemB = 97887 << 20

// TestCUDAGraphMemDeduction: vLLM from 0.21.0 takes the estimate its
// start-up log prints ("Estimated CUDA graph memory: 4.77 GiB total")
// off the pool (gpu_worker.py: requested_memory - non_kv_cache_memory -
// cudagraph_memory_estimate_applied), so predict's pool under
// --cuda-graph-mem-gib 4.77 is floor((0.92 x memory - weights -
// activations - 4.77 GiB) / KV bytes per token), 0.92 being vLLM 0.24's
// default; model show, simulate, plan and advise take the same flag, the
// first two sizing the same pool. Without it the pool is the fraction less
// weights and activations, and a caveat names the deduction left out,
// its public range and the flag; given 0 (the estimate off), no caveat.
func TestCUDAGraphMemDeduction(t *testing.T) {
	type mem struct {
		Weight     float64 `json:"weight_bytes"`
		Activation float64 `json:"activation_bytes"`
		Graphs     float64 `json:"cuda_graph_bytes"`
		PerToken   float64 `json:"kv_bytes_per_token"`
		Tokens     int64   `json:"kv_capacity_tokens"`
		Budget     struct {
			Frac     float64 `json:"frac"`
			Unpriced bool    `json:"cuda_graph_estimate_unpriced"`
		} `json:"kv_budget"`
	}
	predict := func(extra ...string) (mem, []string) {
		t.Helper()
		args := append(append([]string{"predict"}, kvGraphScen...), append([]string{"--batch", "1", "--output", "json"}, extra...)...)
		code, out, errs := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errs)
		}
		var p struct {
			Memory  mem
			Caveats []string `json:"caveats"`
		}
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatal(err)
		}
		return p.Memory, p.Caveats
	}
	const graphB = 4.77 * (1 << 30)
	given, _ := predict("--cuda-graph-mem-gib", "4.77")
	wa := given.Weight + given.Activation
	if given.Budget.Frac != 0.92 || given.Budget.Unpriced {
		t.Errorf("budget %+v, want vllm@0.24's 0.92 with the estimate priced", given.Budget)
	}
	if want := int64((0.92*rtxPro6000MemB - wa - graphB) / given.PerToken); given.Tokens != want || math.Abs(given.Graphs-graphB) > 1 {
		t.Errorf("pool %d tokens less %.0f B of graphs, want (0.92 x %d - %.0f - 4.77 GiB) / %.0f = %d", given.Tokens, given.Graphs, rtxPro6000MemB, wa, given.PerToken, want)
	}
	none, _ := predict()
	if want := int64((0.92*rtxPro6000MemB - wa) / given.PerToken); none.Tokens != want || !none.Budget.Unpriced || none.Graphs != 0 {
		t.Errorf("no estimate: %d tokens, unpriced %v, graphs %.0f; want (0.92 x %d - %.0f) / %.0f = %d, unpriced, none taken", none.Tokens, none.Budget.Unpriced, none.Graphs, rtxPro6000MemB, wa, given.PerToken, want)
	}
	zero, _ := predict("--cuda-graph-mem-gib", "0")
	if zero.Tokens != none.Tokens || zero.Budget.Unpriced {
		t.Errorf("--cuda-graph-mem-gib 0: %d tokens, unpriced %v; want %d, priced", zero.Tokens, zero.Budget.Unpriced, none.Tokens)
	}

	// The table: the memory line says what came off, or a caveat what
	// did not.
	table := func(extra ...string) string {
		t.Helper()
		args := append(append([]string{"predict"}, kvGraphScen...), append([]string{"--batch", "1"}, extra...)...)
		code, out, errs := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errs)
		}
		return out
	}
	if out := table("--cuda-graph-mem-gib", "4.77"); !strings.Contains(out, "less 4.77 GiB of CUDA graphs (the engine's estimate, given by --cuda-graph-mem-gib)") || strings.Contains(out, "CUDA-graph memory estimate") {
		t.Errorf("--cuda-graph-mem-gib 4.77: want the memory line to name the deduction and no caveat:\n%s", out)
	}
	out := table()
	for _, want := range []string{"less the engine's CUDA-graph estimate, not priced", "caveat", "KV pool priced without the engine's CUDA-graph memory estimate", "4.77-6.84 GiB", "--cuda-graph-mem-gib"} {
		if !strings.Contains(out, want) {
			t.Errorf("no estimate given: output lacks %q:\n%s", want, out)
		}
	}
	if out := table("--cuda-graph-mem-gib", "0"); strings.Contains(out, "CUDA-graph memory estimate") || strings.Contains(out, "of CUDA graphs") {
		t.Errorf("--cuda-graph-mem-gib 0: want neither a deduction nor a caveat:\n%s", out)
	}

	// model show sizes the same pool; simulate's blocks hold it.
	code, js, errs := runCLI(t, append(append([]string{"model", "show"}, kvGraphScen...), "--cuda-graph-mem-gib", "4.77", "--output", "json")...)
	if code != 0 {
		t.Fatalf("model show: exit %d: %s", code, errs)
	}
	var s struct {
		Tokens int64   `json:"kv_capacity_tokens"`
		Graphs float64 `json:"cuda_graph_bytes"`
		Frac   float64 `json:"gpu_mem_util_frac"`
	}
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatal(err)
	}
	if s.Tokens != given.Tokens || s.Frac != 0.92 || math.Abs(s.Graphs-graphB) > 1 {
		t.Errorf("model show: %d tokens at %v less %.0f B, want predict's %d at 0.92 less 4.77 GiB", s.Tokens, s.Frac, s.Graphs, given.Tokens)
	}
	code, js, errs = runCLI(t, append(append([]string{"simulate"}, kvGraphScen...), "--cuda-graph-mem-gib", "4.77", "--concurrency", "2", "--requests", "4", "--isl", "256", "--osl", "8", "--output", "json")...)
	if code != 0 {
		t.Fatalf("simulate: exit %d: %s", code, errs)
	}
	var sim struct {
		Blocks int `json:"kv_blocks_per_scheduler"`
		Budget struct {
			Graphs float64 `json:"cuda_graph_bytes"`
		} `json:"kv_budget"`
	}
	if err := json.Unmarshal([]byte(js), &sim); err != nil {
		t.Fatal(err)
	}
	// The sparse backend's pages are 64 tokens: the pool's whole blocks.
	if math.Abs(sim.Budget.Graphs-graphB) > 1 || int64(sim.Blocks) > given.Tokens/16 || int64(sim.Blocks) < given.Tokens/64-1 {
		t.Errorf("simulate: %d blocks less %.0f B of graphs, want the %d-token pool's blocks less 4.77 GiB", sim.Blocks, sim.Budget.Graphs, given.Tokens)
	}
	for _, verb := range [][]string{{"plan", "--output", "json"}, {"advise", "--no-sweep", "--transfer", "", "--compare-topos", "", "--output", "json"}} {
		args := append(append([]string{verb[0]}, kvGraphScen...), append([]string{"--cuda-graph-mem-gib", "4.77"}, verb[1:]...)...)
		if verb[0] == "plan" {
			args = []string{"plan", "--model", "glm-5-nvfp4", "--topo", "rtxpro6000-2s", "--kv-dtype", "fp8", "--dense-dsa=false", "--cuda-graph-mem-gib", "4.77", "--output", "json"}
		}
		if code, out, errs := runCLI(t, args...); code != 0 || strings.Contains(out, "KV pool priced without the engine's CUDA-graph memory estimate") {
			t.Errorf("%s with --cuda-graph-mem-gib 4.77: exit %d (%s), or a caveat of the estimate given", verb[0], code, errs)
		}
	}
}

// TestCUDAGraphMemRefused: the estimate is a finite GiB figure at least 0
// and at most the GPU's memory; an engine that takes none off its pool
// (SGLang, TensorRT-LLM, the nightly of 0.16, the executor), graphs off
// (vLLM captures and estimates none) and the verbs that size no pool
// (run, compare --trace) refuse it in one line naming the flag.
func TestCUDAGraphMemRefused(t *testing.T) {
	p := func(extra ...string) []string {
		return append(append([]string{"predict"}, kvGraphScen...), extra...)
	}
	const none = "takes no CUDA-graph memory estimate off its KV pool"
	checkUsageErrors(t, []usageCase{
		{"negative", p("--cuda-graph-mem-gib", "-1"), "--cuda-graph-mem-gib"},
		{"nan", p("--cuda-graph-mem-gib", "NaN"), "a finite number >= 0"},
		{"inf", p("--cuda-graph-mem-gib", "Inf"), "a finite number >= 0"},
		{"above the memory", p("--cuda-graph-mem-gib", "96"), "--cuda-graph-mem-gib 96: more than the 95.59 GiB of memory"},
		{"sglang", p("--engine", "sglang", "--cuda-graph-mem-gib", "1"), "--cuda-graph-mem-gib 1: sglang@0.5 " + none},
		{"nightly", []string{"predict", "--engine", "vllm@0.16-nightly", "--cuda-graph-mem-gib", "1"}, "--cuda-graph-mem-gib 1: vllm@0.16-nightly " + none},
		{"executor", []string{"predict", "--engine", "executor", "--model", "tiny-mla-moe", "--tp", "2", "--cuda-graph-mem-gib", "0"}, "--cuda-graph-mem-gib 0: executor@1 " + none},
		{"trtllm", []string{"predict", "--engine", "trtllm", "--topo", "h200-nvswitch", "--model", "deepseek-v3", "--tp", "8", "--cuda-graph-mem-gib", "1"}, "--cuda-graph-mem-gib 1: trtllm@1.3 " + none},
		{"model show sglang", []string{"model", "show", "deepseek-v3", "--engine", "sglang", "--cuda-graph-mem-gib", "1"}, "--cuda-graph-mem-gib 1: sglang@0.5 " + none},
		{"eager", p("--cuda-graphs=false", "--cuda-graph-mem-gib", "1"), "--cuda-graph-mem-gib 1: with --cuda-graphs=false the engine captures no graph"},
		{"run", []string{"run", "--cuda-graph-mem-gib", "1"}, "--cuda-graph-mem-gib 1: run and verdict allocate the measured step's KV cache"},
	})
}
