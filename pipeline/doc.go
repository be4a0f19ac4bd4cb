// Package pipeline is the one path from a scenario to a measurement:
//
//	scenario ─► schedule ─► prediction ─► backend config ─► exporter ─► exec.Run ─► result
//	           (sim.BuildSchedule) (sim, on the box) (BackendConfig)  (traces.Setup)
//
// Every verb that measures calls it: tpscope run (one run), tpscope verdict
// (the baseline and each catalog entry, one after another), tpscope
// collective --measure (MeasureCollective, through exec/collbench), and
// cudacheck's run. It sits between cmd and exec, sim, model and traces;
// nothing below cmd imports it.
//
// What it owns:
//
//   - the backend's configuration, derived from the scenario in one place
//     (BackendConfig: seed, NCCL environment, all-reduce + RMSNorm fusion),
//     so that what a run predicts and what the backend is told cannot
//     drift apart;
//   - the scenario as run: the executor's own kernels (sim.Options.Engine = executor)
//     and the timing events the backend records around each op
//     (exec.TimingEventer), the batch as padded for CUDA graphs, recorded
//     on every step span so a comparison re-predicts exactly what ran;
//   - the trace exporter of a run (set up before, flushed and counted
//     after);
//   - where a run's ranks execute (Runner). NCCL reads its protocol,
//     algorithm and P2P settings once per process and keeps them
//     (ncclenv.Cached), so a run whose settings differ from those an
//     earlier run fixed in this process runs in fresh processes of this
//     binary: the hidden verb ChildVerb, given a serialized run spec,
//     writes its result to a file. Where the backend runs ranks in
//     separate processes (exec.MultiProcessRanker) each rank gets its own,
//     launched as torchrun would; otherwise one child holds all the ranks.
//
// Inputs are plain values (Spec, CollectiveSpec: the zero value of a field
// is its documented default); the Runner, which lives as long as a
// sequence of runs, takes functional options.
package pipeline
