// Package sim predicts the time of a model.Schedule on a topology.Topology.
//
// Three models, one per file group, all in float64 microseconds:
//
//   - Compute (compute.go): a roofline per op. t = max(MinKernelUs,
//     RampUs + max(FLOPs / (peak x efficiency x fill), bytes / achieved
//     bandwidth)), RampUs the family's fixed time before and after the
//     stream (a catalog device's kernel floor, so the presets' too, or
//     calibrated). The peak is the device's dense peak for the op's compute dtype at the
//     sustained clock (bf16 when the chip lacks the dtype); efficiency is
//     the named prior of the preset per kernel family and dtype
//     (Device.Efficiency, replaced by calibrated values); fill is the wave
//     efficiency of the estimated CTA grid; achieved bandwidth is the
//     device's streaming bandwidth, or less when too few CTAs keep memory
//     requests in flight (Little's law, per-SM bytes in flight / DRAM
//     latency). Two engine facts sit beside the roofline: a split-KV
//     decode kernel's serial loop per CTA bounds it from below (LoopUs),
//     and kernels the engine launches with an op that the schedule does
//     not list (split merges, MoE sort/permute/finalize) cost a floor
//     and a launch gap each (ExtraKernels).
//   - Collectives (collective.go): NCCL's own tuning model per algorithm x
//     protocol on the box's links, plus custom one-shot/two-shot
//     all-reduce.
//   - The discrete-event engine (engine.go): ranks x streams, a host
//     launch queue per rank (eager) or one graph launch per step (CUDA
//     graphs), dependencies, and collectives that start when their whole
//     group is ready. Identical ranks are simulated once.
//
// A measured cost source (costsource.go, implemented by package perfdb
// over an engine's per-op tables) may replace the first two: the
// Predictor consults it per op before the roofline, shares a module
// measurement (an MLA block, a MoE layer's routed experts) over the
// module's ops in proportion to their prior times, and uses its
// collective tables only where they were measured under the box's
// conditions. OpCost.Source says where every op's time came from.
//
// Predictor (predict.go) ties them together: New(topology, Options) once,
// then Predict(schedule) or PredictScenario / Evaluate(Scenario) many
// times. Every op result carries its bound and the parameters that
// produced it. The Evaluator (plan_eval.go) is the sweeps' fast path (a
// short copy of the model, extrapolated per layer); IterationCoster
// (iteration.go) prices a serving engine's mixed iterations from a memo.
//
// Around the models: the Scenario (scenario.go) and its JSON, the
// run-time Options and their text codec (options*.go; NCCL's settings
// are package ncclenv's one value), the engine profile's kernels per op
// (engine_profile.go), the memory fit (memory.go), and speculative
// decoding (spec.go, iteration_spec.go): a speculative step is its
// schedule (the verify pass, the draft passes) priced like any other, plus
// the host's drafting time for the methods that draft on the host; what it
// yields a sequence comes from the acceptance, an input
// (Options.SpecAccept) or the method's cited figure for the model's
// family (Scenario.SpecYield). Caveats (caveats.go)
// are part of pricing: which gaps a prediction has depends on which
// source priced each op and on what the box's parameters were calibrated
// from, which only the Predictor knows, so PredictScenario attaches them.
//
// Above sim: package advise ranks the optimization catalog (its
// speculative entries with the acceptance each breaks even at), package
// plan sweeps capacity on several cores, package calibrate fits the cost
// parameters to measurements. sim has no goroutines, files or clocks;
// results are deterministic.
package sim
