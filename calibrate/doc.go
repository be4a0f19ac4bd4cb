// Package calibrate fits sim's cost parameters to measurements and
// writes them into a topology, with their provenance, so that every
// later prediction on that box uses them.
//
// Two fits, both by Nelder-Mead (gonum/optimize) on the mean squared log
// error (every sample counts by its relative error) plus a small weight
// that holds each parameter at its prior where the data cannot see it:
//
//   - Compute (compute.go): per kernel family (op kind and dtype, the key
//     of topology.Device.Efficiency), a factor on the roofline's compute
//     term, one on its memory term and the fixed ramp beside them, from
//     measured op times with the prior cost that priced them
//     (ComputeSample: sim.OpCost and sim.CostFamily); ApplyCompute writes
//     the determined ones into the devices.
//   - Collective (collective.go): per (algorithm, protocol) NCCL would
//     run at each size, the base latency, the latency per ring step and
//     the bus bandwidth of NCCL's formula (sim.CollectivePrior), from
//     measured collective times (an nccl-tests log, read by
//     calibrate/nccltests, or the executor's own collectives); the
//     result is the topology's Calibration.
//
// Package compare collects the samples from traces; tpscope calibrate
// runs either fit. Units: microseconds, bytes, GB/s.
package calibrate
