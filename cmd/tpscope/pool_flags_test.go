package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// poolFlags are the flags that size a serving engine's KV pool, each
// with a value every engine that takes it accepts.
var poolFlags = [][2]string{
	{"--gpu-mem-util", "0.8"},
	{"--max-model-len", "32768"},
	{"--cuda-graph-mem-gib", "1"},
	{"--max-num-batched-tokens", "4096"},
	{"--max-num-seqs", "64"},
}

// TestExecutorRefusesPoolFlags: the executor allocates the step's own KV
// cache and serves no requests, so no pool flag sizes or limits anything
// it prices: each is refused in one line naming the flag and the
// executor, on every verb that prices a step under an engine (before, a
// --max-model-len was taken, listed on the options line and changed
// nothing).
func TestExecutorRefusesPoolFlags(t *testing.T) {
	for _, verb := range [][]string{{"predict"}, {"plan"}, {"model", "show"}, {"advise"}} {
		for _, f := range poolFlags {
			args := append(append([]string{}, verb...), "--engine", "executor", f[0], f[1])
			code, _, errs := runCLI(t, args...)
			if want := f[0] + " " + f[1] + ": executor@1 "; code != 2 || !strings.Contains(errs, want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
				t.Errorf("%q: exit %d, stderr %q; want exit 2 and one line with %q", args, code, errs, want)
			}
		}
	}
}

// TestReportStatesThePool: report without --trace prices the flags' step
// as predict does, so the pool flags size the pool its memory line states:
// the line names the engine's rule, fraction and profiling step and where
// each came from, as predict's memory line does, with predict's capacity
// (before, it gave a usable size and a capacity with no rule or source,
// and took limits predict refuses, such as a batch above --max-num-seqs);
// the flags are refused in one line where they size or bound nothing, as
// predict refuses them (SGLang's --max-num-seqs bounds the step's batch
// and its capture lists, and is taken by both).
func TestReportStatesThePool(t *testing.T) {
	dir := t.TempDir()
	for i, flags := range [][]string{
		{"--gpu-mem-util", "0.95"},
		{"--max-num-batched-tokens", "2048"},
		{"--max-num-seqs", "64", "--max-model-len", "32768", "--model", "glm-5-nvfp4"},
		{"--cuda-graph-mem-gib", "4.77", "--model", "glm-5-nvfp4"},
		{"--engine", "sglang", "--max-num-batched-tokens", "4096"},
	} {
		mem := predictLines(t, flags...)["memory per GPU"]
		_, want, ok := strings.Cut(mem, " usable at ")
		if !ok {
			t.Fatalf("predict %q: memory line %q", flags, mem)
		}
		out := filepath.Join(dir, fmt.Sprintf("r%d.html", i))
		if code, _, errs := runCLI(t, append([]string{"report", "-o", out}, flags...)...); code != 0 {
			t.Fatalf("report %q: exit %d: %s", flags, code, errs)
		}
		var line string
		for _, s := range reportData(t, out).Sections {
			for _, l := range s.Lines {
				if strings.HasPrefix(l, "memory per GPU: ") {
					line = l
				}
			}
		}
		// predict's line ends with the capacity; the report's adds
		// whether the step fits.
		if !strings.Contains(line, " usable at "+want+"; fits: true") {
			t.Errorf("report %q: memory line %q, want predict's pool %q", flags, line, want)
		}
	}
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--engine", "sglang", "--gpu-mem-util", "0.8", "--max-num-batched-tokens", "4096"}, "--max-num-batched-tokens 4096: with --gpu-mem-util"},
		{[]string{"--max-num-seqs", "4", "--batch", "8"}, "--batch 8: 8 sequences a scheduler (DP 1), above --max-num-seqs 4"},
		{[]string{"--engine", "trtllm", "--topo", "h200-nvswitch", "--model", "deepseek-v3", "--max-num-batched-tokens", "4096"}, "--max-num-batched-tokens 4096: trtllm@1.3's KV pool"},
		{[]string{"--engine", "executor", "--max-model-len", "32768"}, "--max-model-len 32768: executor@1 "},
		{[]string{"--engine", "executor", "--max-num-seqs", "64"}, "--max-num-seqs 64: executor@1 "},
		{[]string{"--engine", "executor", "--gpu-mem-util", "0.8"}, "--gpu-mem-util 0.8: executor@1 "},
	} {
		out := filepath.Join(dir, "refused.html")
		code, _, errs := runCLI(t, append([]string{"report", "-o", out}, c.flags...)...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("report %q: exit %d, stderr %q; want exit 2 and one line with %q", c.flags, code, errs, c.want)
		}
	}
}
