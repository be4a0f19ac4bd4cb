package main

import (
	"strings"
	"testing"
)

// TestScheduleRefusesPricingFlags: schedule prints the model's ops before
// pricing; a flag that only prices them (its kernels, fusions, costs) is
// refused in one line naming it, where it once printed the same 1342 ops
// and said nothing; a flag the schedule depends on changes it: eager
// steps run the batch as asked, graphed ones the capture size above it
// (vLLM's sizes: 201 runs as 208).
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
		{[]string{"--batch", "201"}, "decode b208 "},
		{[]string{"--batch", "201", "--cuda-graphs=false"}, "decode b201 "},
		{[]string{"--batch", "201", "--graph-sizes", "256"}, "decode b256 "},
	} {
		code, out, stderr := runCLI(t, append([]string{"schedule"}, c.args...)...)
		if first, _, _ := strings.Cut(out, "\n"); code != 0 || !strings.Contains(first, c.want) || !strings.Contains(first, "the model's ops, before an engine's kernels and fusions") {
			t.Errorf("%q: exit %d, first line %q, stderr %q; want %q and what the ops are", c.args, code, first, stderr, c.want)
		}
	}
}

// TestScheduleNamesPaddedBatch: a batch a CUDA-graph capture pads is named
// beside the padded one the schedule lists (batch 3 runs as the capture
// of 4, vLLM's sizes 1, 2, 4, 8...), as predict's workload line names it;
// an eager step and a batch that is a capture size name one batch.
func TestScheduleNamesPaddedBatch(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // in the title; "" for no padding note
	}{
		{[]string{"--batch", "3"}, "decode b4 ctx4096 kv=bf16 (batch 3 run as 4: the CUDA-graph capture it pads to)"},
		{[]string{"--batch", "4"}, ""},
		{[]string{"--batch", "3", "--cuda-graphs=false"}, ""},
	} {
		code, out, errs := runCLI(t, append([]string{"schedule", "--model", "tiny-mla-moe", "--tp", "8"}, c.args...)...)
		first, _, _ := strings.Cut(out, "\n")
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.args, code, errs)
		}
		if c.want != "" && !strings.Contains(first, c.want) || c.want == "" && strings.Contains(first, "run as") {
			t.Errorf("%v: title %q, want %q", c.args, first, c.want)
		}
	}
}
