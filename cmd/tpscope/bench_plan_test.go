package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// planParetoArgs is a plan sweep of over 10,000 configurations: two
// 8-GPU boxes x every valid plan of Kimi-K2.5 on 8 GPUs x 2 KV dtypes x
// 10 contexts x 31 batches, plus each context's point at capacity, with
// the per-context fronts written as CSV.
func planParetoArgs(dir string) []string {
	var batches, contexts []string
	for b := 1; b <= 31; b++ {
		batches = append(batches, fmt.Sprint(b*b))
	}
	for c := 1; c <= 10; c++ {
		contexts = append(contexts, fmt.Sprint(1024*c*c))
	}
	return []string{"plan", "--topo", "rtxpro6000-2s,h200-nvswitch", "--gpus", "8", "--batch", strings.Join(batches, ","),
		"--context", strings.Join(contexts, ","), "--slo-ms", "50", "--workers", "2", "--output", "json",
		"--frontier", filepath.Join(dir, "front.csv")}
}

// BenchmarkPlanPareto: the whole plan verb on over 10,000
// configurations with 2 workers: enumerate, evaluate, the Pareto front
// per context and box, the frontier CSV and the JSON of every point. The
// target is under 5 s per run on 2 cores.
func BenchmarkPlanPareto(b *testing.B) {
	args := planParetoArgs(b.TempDir())
	var out, errb bytes.Buffer
	if code := dispatch(args, &out, &errb); code != 0 {
		b.Fatalf("exit %d: %s", code, errb.String())
	}
	n := strings.Count(out.String(), `"step_us"`)
	b.Run(fmt.Sprintf("configs=%d/workers=2", n), func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out.Reset()
			errb.Reset()
			if code := dispatch(args, &out, &errb); code != 0 {
				b.Fatalf("exit %d: %s", code, errb.String())
			}
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "configs/s")
	})
}
