package main

import (
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
