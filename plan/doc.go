// Package plan is capacity planning: it sweeps boxes (topology x GPU
// count), parallel plans (TP, EP, DP attention, DCP), batch, context, KV
// dtype and speculative tokens (MTP, or the method of Space.Build.Spec),
// predicts every configuration with sim's fast Evaluator (a short copy of
// the model on the discrete-event engine, extrapolated per layer), checks
// the memory fit, applies a per-request latency SLO (with speculative
// decoding, to a request's 90th-percentile time per output token:
// spec.go), and reports the maximum concurrency per (box, plan, KV
// dtype, context), throughput per GPU, per-request tokens/s and the
// Pareto front of the two per (context, box) (plan.go), with the sweep's caveats
// (caveats.go).
//
// Space.Enumerate lists the configurations (and the combinations of the
// lists that can never run, Coverage); Evaluate (workers.go) predicts
// them on any number of goroutines, each with its own sim.Evaluator and
// blocks of configurations that share schedules handed out by one
// atomic counter; Summarize picks the best points, the fronts and the
// capacity rows. Units: microseconds, ms per token, tokens/s, GB.
package plan
