package main

import (
	"strings"
	"testing"
)

// TestScheduleRefusesPricingFlags: schedule prints the model's ops before
// pricing; a flag that only prices them (its kernels, fusions, costs) is
// refused in one line naming it, where it once printed the same 1342 ops
// and said nothing; a flag the schedule depends on changes it: eager
// steps run the batch's tokens, graphed ones the capture size above them
// (vLLM's sizes: 201 tokens on the graph of 208), the batch as asked.
func TestScheduleRefusesPricingFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--ar-norm-fusion"}, {"--moe-kernel", "marlin"}, {"--nccl-proto", "LL"}, {"--custom-ar", "off"},
		{"--overlap"}, {"--attention-backend", "TRITON_MLA"}, {"--gpu-mem-util", "0.8"}, {"--perf-db", "."},
	} {
		code, _, stderr := runCLI(t, append([]string{"schedule"}, args...)...)
		if want := "tpscope schedule: usage: " + args[0]; code != 2 || !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, "pass it to predict") ||
			strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%q: exit %d, stderr %q; want 2 and one line starting %q", args, code, stderr, want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--batch", "201"}, "decode b201 ctx4096 kv=fp8 (graph of 208 tokens: "},
		{[]string{"--batch", "201", "--cuda-graphs=false"}, "decode b201 ctx4096 kv=fp8  "},
		{[]string{"--batch", "201", "--graph-sizes", "256"}, "decode b201 ctx4096 kv=fp8 (graph of 256 tokens: "},
	} {
		code, out, stderr := runCLI(t, append([]string{"schedule"}, c.args...)...)
		if first, _, _ := strings.Cut(out, "\n"); code != 0 || !strings.Contains(first, c.want) || !strings.Contains(first, "the model's ops, before an engine's kernels and fusions") {
			t.Errorf("%q: exit %d, first line %q, stderr %q; want %q and what the ops are", c.args, code, first, stderr, c.want)
		}
	}
}

// TestScheduleNamesPaddedBatch: a batch whose tokens a CUDA-graph capture
// pads is listed as asked, with the graph its token ops run (batch 3 on
// the graph of 4, vLLM's sizes 1, 2, 4, 8...), as predict's workload line
// names it; an eager step and a batch that is a capture size pad nothing.
func TestScheduleNamesPaddedBatch(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in the title; "" for no padding note
	}{
		{[]string{"--batch", "3"}, "decode b3 ctx4096 kv=bf16 (graph of 4 tokens: the padding runs every op but attention)"},
		{[]string{"--batch", "4"}, ""},
		{[]string{"--batch", "3", "--cuda-graphs=false"}, ""},
	} {
		code, out, errs := runCLI(t, append([]string{"schedule", "--model", "tiny-mla-moe", "--tp", "8"}, c.args...)...)
		first, _, _ := strings.Cut(out, "\n")
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errs)
		}
		if c.want != "" && !strings.Contains(first, c.want) || c.want == "" && strings.Contains(first, "graph of") {
			t.Errorf("%v: title %q, want %q", c.args, first, c.want)
		}
	}
}

// TestScheduleTakesSGLangRequestPool: SGLang's capture lists stop at its
// request pool (--max-num-seqs, its --max-running-requests), so a decode
// step of 99 under --max-num-seqs 100 replays the 100 graph, as predict
// pads it, where the default list pads it to 104. schedule had refused
// the flag as pricing only and printed the 104 graph; it takes it where
// the engine's capture stops at it, refuses a batch above it as predict
// does, and still refuses it where it bounds no capture.
func TestScheduleTakesSGLangRequestPool(t *testing.T) {
	flags := []string{"--engine", "sglang@0.5", "--max-num-seqs", "100", "--batch", "99", "--context", "1024"}
	var pr struct {
		GraphTokens int64 `json:"graph_tokens"`
	}
	runJSONInto(t, &pr, append([]string{"predict", "--output", "json"}, flags...)...)
	if pr.GraphTokens != 100 {
		t.Fatalf("predict %v: graph of %d tokens, want 100 (the request pool)", flags, pr.GraphTokens)
	}
	code, out, errs := runCLI(t, append([]string{"schedule"}, flags...)...)
	if code != 0 || !strings.Contains(out, "(graph of 100 tokens:") {
		t.Errorf("schedule %v: exit %d %s; want predict's graph of 100 tokens:\n%.300s", flags, code, errs, out)
	}
	checkUsageErrors(t, []usageCase{
		{"above the pool", []string{"schedule", "--engine", "sglang@0.5", "--max-num-seqs", "100", "--batch", "101", "--context", "1024"}, "--batch 101: 101 sequences a scheduler (DP 1), above --max-num-seqs 100"},
		{"vllm", []string{"schedule", "--max-num-seqs", "100"}, "--max-num-seqs 100: it only prices the ops (vllm@0.24's capture sizes do not stop at it)"},
		{"eager", []string{"schedule", "--engine", "sglang@0.5", "--cuda-graphs=false", "--max-num-seqs", "100"}, "--max-num-seqs 100: it only prices the ops (the step replays no graph under --cuda-graphs=false)"},
	})
}
