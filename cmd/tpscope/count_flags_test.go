package main

import (
	"strings"
	"testing"
)

// TestParseCount: K and M are 1024 multiples; anything else that is not
// an integer, or that a suffix would carry past 2^40, is refused.
func TestParseCount(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"4096", 4096, true},
		{"4K", 4 * 1024, true},
		{"32k", 32 * 1024, true},
		{"1M", 1024 * 1024, true},
		{" 8K ", 8 * 1024, true},
		{"-5", -5, true}, // the range is the caller's (model.Validate names --context -5)
		{"1048576M", 1 << 40, true},
		{"1048577M", 0, false},
		{"1.5K", 0, false},
		{"K", 0, false},
		{"", 0, false},
		{"32KB", 0, false},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := parseCount(c.in)
			if (err == nil) != c.ok || got != c.want {
				t.Fatalf("parseCount(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
			}
		})
	}
}

// countFlagNames are the token-count and size flags of every verb: each
// takes parseCount's suffixes and its help says so once.
var countFlagNames = []string{"batch", "context", "isl", "osl", "requests", "concurrency", "max-num-seqs", "max-num-batched-tokens",
	"block-size", "num-gpu-blocks-override", "long-prefill-token-threshold", "holdout-batch", "sweep-batch", "sweep-context"}

// TestCountFlagsTakeSuffixes: on every verb that has one of the count
// flags, "2K" sets it to 2048, and its help names the suffixes once.
func TestCountFlagsTakeSuffixes(t *testing.T) {
	seen := map[string]bool{}
	for _, v := range verbs {
		fs := bindFlags(v)
		for _, name := range countFlagNames {
			fl := fs.Lookup(name)
			if fl == nil {
				continue
			}
			seen[name] = true
			if n := strings.Count(fl.Usage, countSuffixHelp); n != 1 {
				t.Errorf("%s --%s: help names the suffixes %d times, want once: %q", v.Name(), name, n, fl.Usage)
			}
			if err := fs.Set(name, "2K"); err != nil {
				t.Errorf("%s --%s 2K: %v", v.Name(), name, err)
				continue
			}
			if got := fl.Value.String(); got != "2048" && name != "concurrency" { // --concurrency is parsed in Run
				t.Errorf("%s --%s 2K = %s, want 2048", v.Name(), name, got)
			}
		}
	}
	for _, name := range countFlagNames {
		if !seen[name] {
			t.Errorf("no verb has --%s", name)
		}
	}
}

// TestCountSuffixesOnEveryVerb: predict --context 32K prices what
// --context 32768 prices, and simulate takes --isl 1K; a count that is
// not one is refused in one line naming the flag.
func TestCountSuffixesOnEveryVerb(t *testing.T) {
	code, k, stderr := runCLI(t, "predict", "--context", "32K", "--output", "json")
	if code != 0 {
		t.Fatalf("predict --context 32K: exit %d: %s", code, stderr)
	}
	_, n, _ := runCLI(t, "predict", "--context", "32768", "--output", "json")
	if k != n {
		t.Errorf("predict --context 32K and --context 32768 differ")
	}
	if !strings.Contains(n, `"workload": "decode b1 ctx32768 `) {
		t.Errorf("predict --context 32768 JSON has no context 32768")
	}
	code, _, stderr = runCLI(t, "simulate", "--isl", "1K", "--osl", "64", "--requests", "4", "--qps", "1", "--output", "json")
	if code != 0 {
		t.Fatalf("simulate --isl 1K: exit %d: %s", code, stderr)
	}
	code, _, stderr = runCLI(t, "predict", "--context", "32KB")
	if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, `"--context"`) || !strings.Contains(stderr, "want an integer (K and M suffixes") {
		t.Errorf("predict --context 32KB: exit %d, %q", code, stderr)
	}
}
