// Package compare joins measured spans (package traces) with predictions
// (package sim) and fits a box's cost parameters to them.
//
// A trace's scenario is what its step root records (the scenario JSON,
// sim.DecodeScenario; older traces: the short attributes), changed by the
// caller's overrides (Scenarios); Compare predicts each scenario and aligns
// its spans with the predicted ops: by op ID where the spans carry one, by
// kernel kind and order for profiler traces (align.go). It reports per op,
// per kind and per step the predicted time against the measured median and
// p10-p90 (ErrPct = (predicted - measured) / measured x 100), and for
// scenarios that differ only by run-time options the predicted and measured
// gain (advise.Gain) with a verdict.
//
// Calibrate fits on the even steps (or every step, with traces of another
// load held out) and reports the held-out steps before and after:
// samples.go collects measured ops with the prior cost that priced them,
// fit_compute.go fits kernel floors, per-family compute and memory
// efficiencies (calibrate.Compute) and the eager launch cost, select.go
// the collectives' latency and bandwidth (calibrate.Collective) and keeps
// each fitted parameter only where the held-out steps support it,
// holdout.go the held-out errors.
//
// Run (run.go) sets the executor's own result of a schedule
// (exec.Result, tpscope run --compare) beside its prediction per step and
// per op kind, from the result's per-op times, without spans. Units:
// microseconds, bytes.
package compare
