package serving

import "testing"

// BenchmarkSimulateHour: one simulated hour at 10 QPS (Poisson, about
// 36,000 requests) of Kimi-K2.5 at TP 8 on the 8-GPU RTX PRO 6000 box,
// from a cold start each time (New: the memory fit and an empty step-cost
// memo). Two loads: fixed 1024-token prompts and 256-token outputs (more
// than the box sustains at TP 8: the queue and the KV cache fill, and the
// run drains past the hour), and log-normal 512 +- 50 % / 128 +- 50 %
// lengths (many distinct steps for the memo). The target is under 5 s per
// run on 2 cores.
func BenchmarkSimulateHour(b *testing.B) {
	loads := []struct {
		name   string
		prompt Lengths
		output Lengths
	}{
		{"load=fixed-1024-256", Lengths{Mean: 1024}, Lengths{Mean: 256}},
		{"load=lognormal-512-128", Lengths{Dist: LogNormal, Mean: 512, Spread: 0.5}, Lengths{Dist: LogNormal, Mean: 128, Spread: 0.5}},
	}
	for _, l := range loads {
		b.Run(l.name, func(b *testing.B) {
			b.ReportAllocs()
			var res *Result
			for i := 0; i < b.N; i++ {
				s := mustNew(b, kimiDeployment(b))
				res = mustRun(b, s, Traffic{QPS: 10, DurationS: 3600, Prompt: l.prompt, Output: l.output, Seed: 1}, RunOptions{})
			}
			b.ReportMetric(float64(res.Requests), "requests")
			b.ReportMetric(float64(res.Steps), "steps")
			b.ReportMetric(float64(res.Pricing.Priced), "priced")
		})
	}
}
