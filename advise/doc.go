// Package advise ranks tpscope's optimization catalog for one scenario:
// which optimization is worth building next on this box, by how much,
// and from which batch and context on it pays.
//
// The catalog (catalog.go, catalog_plan.go) holds optimizations as data
// (DESIGN.md "Optimizations are data"): an Entry is a named
// transformation of a sim.Scenario (its plan, workload, run-time options
// or box) with the rule that says whether it runs on the scenario's box
// and why (Check, each rule citing its source) and how to run it (HowTo).
//
// Advise (advise.go) predicts the baseline, its stock form (Stock: what
// an untuned engine runs) and every entry applied to it with per-op
// detail (sim.Predictor), and diffs each prediction against the
// baseline's Footprint: step time and tokens/s (Gain, gain.go, the one
// definition that compare's measured verdicts share), device time by
// category, kernels, collectives and their bytes, bytes streamed, KV
// capacity. Entries are ranked by the tokens/s gain; WorthBuilding keeps
// the software entries the model stands behind. For entries marked
// Sweep, the fast sim.Evaluator sweeps batch x context and finds where
// each starts to pay (EntrySweep). The speculative-decoding entries, one
// per method (catalog_spec.go), price the acceptance an input gives or the
// method's cited default; advise adds where each pays (advise_spec.go:
// the acceptance it breaks even at, per batch, and the largest batch each
// acceptance level carries it to, SpecAdvice). Units: microseconds,
// bytes, tokens/s.
package advise
