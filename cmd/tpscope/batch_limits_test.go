package main

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
)

// kimiRTX is Kimi-K2.5 at TP 8 with an fp8 cache on 8 x RTX PRO 6000
// (96 GB: vLLM's defaults there are 8192 tokens and 1024 sequences).
var kimiRTX = []string{"--model", "kimi-k2.5", "--topo", "rtxpro6000-2s", "--tp", "8", "--kv-dtype", "fp8"}

// TestBatchLimitsSizeVLLMPool: vLLM 0.24 sizes its KV pool less the
// activations of a profiling step at its scheduler's limits
// (max_num_batched_tokens, max_num_seqs), and predict, plan, advise and
// model show had no flag for them, so a pool launched with other limits
// (the README's KV3/KV4 at --max-num-batched-tokens 4096, KV7 and KV8 at
// --max-num-seqs 32 and 128) could not be stated. Each now takes
// --max-num-batched-tokens and --max-num-seqs (the same definition as
// simulate's, with its K suffix), and the memory line names the step and
// where each figure came from. Predict's pool at 4096 tokens is larger
// than at the default 8192 by exactly the activations the shorter
// forward drops, over the KV bytes of a token.
func TestBatchLimitsSizeVLLMPool(t *testing.T) {
	type mem struct {
		Memory struct {
			Activation int64   `json:"activation_bytes"`
			PerToken   float64 `json:"kv_bytes_per_token"`
			Tokens     int64   `json:"kv_capacity_tokens"`
			Budget     struct {
				Tokens     int    `json:"profile_tokens"`
				Seqs       int    `json:"profile_seqs"`
				TokensFrom string `json:"profile_tokens_from"`
				SeqsFrom   string `json:"profile_seqs_from"`
			} `json:"kv_budget"`
		}
	}
	predict := func(extra ...string) mem {
		t.Helper()
		args := append(append(append([]string{"predict"}, kimiRTX...), extra...), "--output", "json")
		code, out, errs := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var m mem
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	def, given := predict(), predict("--max-num-batched-tokens", "4K")
	if b := def.Memory.Budget; b.Tokens != 8192 || b.Seqs != 1024 || b.TokensFrom != "vllm@0.24's default" || b.SeqsFrom != "vllm@0.24's default" {
		t.Errorf("no limits: profiling step %+v, want 8192 and 1024, vllm@0.24's defaults", b)
	}
	if b := given.Memory.Budget; b.Tokens != 4096 || b.Seqs != 1024 || b.TokensFrom != "given" || b.SeqsFrom != "vllm@0.24's default" {
		t.Errorf("--max-num-batched-tokens 4K: profiling step %+v, want 4096 (given) and 1024 (the default)", b)
	}
	dropped := float64(def.Memory.Activation - given.Memory.Activation)
	if grew := float64(given.Memory.Tokens-def.Memory.Tokens) * def.Memory.PerToken; dropped <= 0 || math.Abs(grew-dropped) > 2*def.Memory.PerToken {
		t.Errorf("4096 tokens for 8192: activations %.0f B fewer, pool %.0f B larger; want the same", dropped, grew)
	}

	code, out, errs := runCLI(t, append(append([]string{"predict"}, kimiRTX...), "--max-num-batched-tokens", "4096", "--max-num-seqs", "128")...)
	if want := "profiling step of 4096 tokens (given by --max-num-batched-tokens) and 128 sequences (given by --max-num-seqs)"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("predict: exit %d, stderr %q, memory line lacks %q:\n%s", code, errs, want, out)
	}
	code, out, errs = runCLI(t, append([]string{"predict"}, kimiRTX...)...)
	if want := "profiling step of 8192 tokens and 1024 sequences, vllm@0.24's default; KV capacity"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("predict: exit %d, stderr %q, memory line lacks %q:\n%s", code, errs, want, out)
	}
	code, out, errs = runCLI(t, append(append([]string{"model", "show"}, kimiRTX...), "--max-num-seqs", "32")...)
	if want := "vLLM's profiling step of 8192 tokens (vllm@0.24's default) and 32 sequences (given by --max-num-seqs)"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("model show: exit %d, stderr %q, output lacks %q:\n%s", code, errs, want, out)
	}
	capOf := func(args ...string) int64 {
		t.Helper()
		code, out, errs := runCLI(t, append(append(args, kimiRTX...), "--output", "json")...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var p struct {
			Points []struct {
				Tokens int64 `json:"kv_capacity_tokens"`
			} `json:"points"`
		}
		if err := json.Unmarshal([]byte(out), &p); err != nil || len(p.Points) == 0 {
			t.Fatalf("%v: %v, %d points", args, err, len(p.Points))
		}
		return p.Points[0].Tokens
	}
	if a, b := capOf("plan", "--batch", "1", "--context", "1024"), capOf("plan", "--batch", "1", "--context", "1024", "--max-num-batched-tokens", "4096"); a != def.Memory.Tokens || b != given.Memory.Tokens {
		t.Errorf("plan: KV capacity %d, %d at 4096 tokens; want predict's %d, %d", a, b, def.Memory.Tokens, given.Memory.Tokens)
	}
	if code, _, errs := runCLI(t, append(append([]string{"advise"}, kimiRTX...), "--max-num-seqs", "128")...); code != 0 {
		t.Errorf("advise --max-num-seqs 128: exit %d: %s", code, errs)
	}
}

// TestBatchLimitsRefused: the limits are refused in one line naming the
// flag where they size nothing or the engine refuses them: 0 or less
// (vLLM's SchedulerConfig Field(ge=1); leaving the flag out is the
// default), a budget below the running limit (verify_max_model_len), also
// where the other is vLLM's default for the GPU (4096 sequences on an
// L40S, whose default budget is 2048); a decode batch above the running
// limit a scheduler (a step vLLM never runs), and under SGLang above its
// running limit (each DP rank running its share); SGLang's running limit
// where nothing priced takes it (model show) and, with its fraction
// given, its budget; TensorRT-LLM, whose pool tpscope prices
// at an assumed step; run, which executes a given step; compare over a
// trace.
func TestBatchLimitsRefused(t *testing.T) {
	for _, c := range []struct {
		args  []string
		wants []string
	}{
		{append([]string{"predict"}, append(kimiRTX, "--max-num-seqs", "0")...), []string{"--max-num-seqs 0", "1 or more"}},
		{append([]string{"model", "show"}, append(kimiRTX, "--max-num-batched-tokens", "-8")...), []string{"--max-num-batched-tokens -8", "1 or more"}},
		{append([]string{"predict"}, append(kimiRTX, "--max-num-batched-tokens", "512", "--max-num-seqs", "1024")...),
			[]string{"--max-num-batched-tokens 512", "at least max_num_seqs (1024", "refuses"}},
		{[]string{"predict", "--model", "tiny-mla-moe", "--topo", "pcie-switch:8xl40s", "--tp", "1", "--max-num-seqs", "4096"},
			[]string{"--max-num-seqs 4096", "max_num_batched_tokens (2048, vllm@0.24's default)", "refuses"}},
		{[]string{"plan", "--model", "tiny-mla-moe", "--topo", "pcie-switch:8xl40s", "--tp", "1", "--context", "1024", "--max-num-seqs", "4096"},
			[]string{"--max-num-seqs 4096", "refuses"}},
		{[]string{"predict", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--engine", "sglang", "--max-num-seqs", "128", "--batch", "129"},
			[]string{"--batch 129", "above --max-num-seqs 128", "sglang@0.5", "at most 128"}},
		// SGLang's limit is the engine's: each of 4 DP ranks runs 102 // 4.
		{[]string{"predict", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--engine", "sglang", "--tp", "2", "--dp", "4", "--ep", "--max-num-seqs", "102", "--batch", "101"},
			[]string{"--batch 101", "26 sequences a scheduler (DP 4)", "25 a DP rank", "at most 100"}},
		{[]string{"model", "show", "--model", "glm-5", "--topo", "h200-nvswitch", "--engine", "sglang", "--max-num-seqs", "128"},
			[]string{"--max-num-seqs 128", "sglang@0.5", "sizes nothing of its KV pool"}},
		{[]string{"predict", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--engine", "sglang", "--gpu-mem-util", "0.9", "--max-num-batched-tokens", "4096"},
			[]string{"--max-num-batched-tokens 4096", "mem_fraction_static is given"}},
		{[]string{"advise", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--engine", "trtllm", "--max-num-batched-tokens", "4096"},
			[]string{"--max-num-batched-tokens 4096", "trtllm@1.3", "prices nothing"}},
		{append([]string{"predict"}, append(kimiRTX, "--max-num-seqs", "32", "--batch", "64")...),
			[]string{"--batch 64", "above --max-num-seqs 32", "at most 32"}},
		{[]string{"run", "--max-num-seqs", "12"}, []string{"--max-num-seqs 12", "leave it out"}},
		{[]string{"compare", "--trace", "t.json", "--max-num-batched-tokens", "4096"}, []string{"--max-num-batched-tokens 4096", "leave it out"}},
	} {
		oneLineUsage(t, c.args, c.wants...)
	}
	// Each DP group's scheduler runs its own max_num_seqs: 64 sequences
	// over DP 2 are 32 a scheduler.
	if code, _, errs := runCLI(t, "predict", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--tp", "4", "--dp", "2", "--ep", "--batch", "64", "--max-num-seqs", "32"); code != 0 {
		t.Errorf("--batch 64 at DP 2 with --max-num-seqs 32: exit %d: %s", code, errs)
	}
	// SGLang's running limit bounds the batch (100 sequences, 25 a rank
	// at DP 4, run) where it once priced nothing.
	if code, _, errs := runCLI(t, "predict", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--engine", "sglang", "--tp", "2", "--dp", "4", "--ep", "--batch", "100", "--max-num-seqs", "102"); code != 0 {
		t.Errorf("sglang --batch 100 at DP 4 with --max-num-seqs 102: exit %d: %s", code, errs)
	}
	// SGLang's budget is its chunked_prefill_size, which its default
	// fraction reserves for: taken.
	code, out, errs := runCLI(t, "predict", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--engine", "sglang", "--max-num-batched-tokens", "4096")
	if want := "reserved for chunked_prefill_size 4096"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("sglang --max-num-batched-tokens 4096: exit %d, stderr %q, output lacks %q", code, errs, want)
	}
}

// TestPlanRunningLimitCLI: plan under --max-num-seqs prices no batch the
// engine never runs and says so: at TP 8 with --max-num-seqs 32 the
// swept batches 64..512 are left out in one line with predict's reason,
// and the capacity table's concurrency is 32, marked as the limit's (the
// KV cache holds hundreds of 4097-token sequences on an H200 box).
func TestPlanRunningLimitCLI(t *testing.T) {
	code, out, errs := runCLI(t, "plan", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--plan", "tp8", "--kv-dtype", "fp8", "--context", "4096", "--max-num-seqs", "32")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"left out 4 batches (box x plan x batch) above the running limit given, steps the engine never runs: --plan tp8 --batch 64 (--batch 64: 64 sequences a scheduler (DP 1), above --max-num-seqs 32",
		"the running limit given where marked --max-num-seqs",
		"32 (--max-num-seqs)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
	// No row of the point tables (topology, gpus, plan, kv, spec,
	// context, batch, ...) at a batch above 32.
	rows := 0
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || f[0] != "h200-nvswitch" {
			continue
		}
		rows++
		if b, err := strconv.Atoi(f[6]); err == nil && b > 32 && f[6] != "32" {
			t.Errorf("a row at batch %d under --max-num-seqs 32: %s", b, line)
		}
	}
	if rows == 0 {
		t.Errorf("no table rows in:\n%s", out)
	}
}
