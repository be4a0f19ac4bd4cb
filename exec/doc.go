// Package exec runs a model.Schedule on N ranks through a Backend, times
// every op with the backend's clock and emits one OpenTelemetry trace per
// measured step (DESIGN.md "Op IDs and the span schema"; keys in
// traces/schema.go).
//
// The runner (Run) is a loop per local rank on its own goroutine: open the
// rank, then for each step BeginStep, Exec of every op in list order
// (which honours Deps; collectives are entered by every member), EndStep,
// and — for backends with device timing — DeviceTimes; then the rank
// creates its spans from the recorded times, off the timed path. A host
// barrier separates steps. Cancellation stops every
// rank after its current op; the first error ends the run and is returned
// with rank, step and op ID. WithWatchdog bounds how long a backend lets a
// rank wait for its peers (SessionConfig.Watchdog); WithFault (fault.go)
// injects a rank that never issues a collective, to check that the
// watchdog ends every rank. Backend (backend.go) is the plug-in contract,
// with optional capabilities discovered by type assertion (ThreadLocker,
// DeviceTimer, GraphCapturer, OpAnnotator, StepAnnotator; before a run:
// CollectiveSettingsReader, GraphSupporter, MultiProcessRanker,
// ResourceDescriber, MemoryEstimator, TimingEventer); backends register
// by name (RegisterBackend) so the command can pick one with --backend.
//
// Units: Result times are microseconds (float64); span times are the wall
// clock (host clock, or device events mapped onto it); attribute names
// carry their unit (tpscope.device_us, tpscope.host.launch_us).
//
// Subpackages: exec/cpu (goroutine ranks, gonum BLAS, shared-memory
// collectives, CPU calibration), exec/cuda (CUDA, cuBLAS, NCCL through
// purego), exec/collbench (collectives timed by size, nccl-tests style),
// exec/exectest (test doubles).
package exec
