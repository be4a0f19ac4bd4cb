package main

import (
	"strings"
	"testing"
)

// TestOverlapRefused: --overlap moves collectives to a second stream, which
// overlaps only compute the schedule marks independent of them; the
// builder marks none (every op waits for the one before), so the flag
// priced the same step and only blanked its idle time. Every verb that
// prices a step refuses it in one line naming the flag.
func TestOverlapRefused(t *testing.T) {
	for _, args := range [][]string{
		{"predict", "--overlap"},
		{"predict", "--overlap", "--ep", "--dp", "2", "--tp", "4", "--batch", "8"},
		{"predict", "--overlap", "--model", "deepseek-v3", "--topo", "nvswitch:8xb200", "--phase", "prefill", "--context", "1024"},
		{"advise", "--overlap"},
		{"plan", "--overlap", "--tp", "8", "--batch", "1", "--context", "4096"},
		{"run", "--overlap", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "1", "--topo", "pcie-1s:1xl4"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			code, out, stderr := runCLI(t, args...)
			if code != 2 || !strings.Contains(stderr, "--overlap: the step's schedule marks no op independent") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q: want exit 2 and one line refusing --overlap", code, out, stderr)
			}
		})
	}
}
