package exec

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tpscope/tpscope/model"
)

// Backend runs the ops of a Schedule on one kind of hardware (exec/cpu:
// goroutine ranks and gonum BLAS; exec/cuda: CUDA, cuBLAS, NCCL).
//
// The runner (Run) drives a backend through three levels of objects, each
// with its own lifetime:
//
//	Backend   long-lived factory, one per process and kind (Open may be
//	          called again after the previous Session is closed)
//	Session   one Run of one Schedule: shared state (communicators, the
//	          shared-memory collective fabric, the seeded router)
//	Rank      one local rank of that Session: its buffers, stream, events
//
// Call sequence for one Run, with the goroutine each call is made on:
//
//	Run goroutine:   sess := backend.Open(ctx, sched, cfg)
//	rank goroutine r (one per local rank, started after Open returns; locked
//	                  to an OS thread when sess implements ThreadLocker and
//	                  says so; all rank goroutines run concurrently):
//	                 rk := sess.OpenRank(ctx, r)
//	                 for each step (warm-up steps first, then measured steps):
//	                     rk.BeginStep(ctx, step)
//	                     for i := range sched.Ranks[r]: rk.Exec(ctx, i)
//	                     rk.EndStep(ctx)
//	                     [rk.(DeviceTimer).DeviceTimes(dst)]
//	                 rk.Close()
//	Run goroutine:   sess.Close()   (after every rank goroutine has returned)
//
// A Rank's methods are only ever called from its own rank goroutine and
// never concurrently with each other, so a Rank needs no locking of its own;
// different Ranks of one Session are called concurrently. Between steps the
// runner holds every local rank at a host barrier, so step s+1 starts on no
// rank before every rank has returned from EndStep of step s.
//
// Errors: any error returned by a backend method ends the Run. The runner
// cancels the ctx passed to every other rank, waits for all rank goroutines
// to return, closes every Rank and the Session, and returns the first error
// (wrapped with the rank, op ID and step) joined with any Close errors.
//
// Context: the ctx given to a method is cancelled when the user cancels the
// Run (Ctrl-C) or when another rank failed. A method that blocks -- waiting
// for peers inside a collective, for the device to drain, for communicator
// set-up -- must return promptly once ctx is done, with an error wrapping
// ctx.Err() (CPU: select on ctx.Done(); CUDA: a watchdog that aborts the
// NCCL communicator). Otherwise one failing rank hangs the others forever.
// Close methods get no ctx: they must not block on peers.
type Backend interface {
	// Name is the backend's registry name ("cpu", "cuda"); it goes on the
	// step span (schema.AttrBackend).
	Name() string

	// Open prepares a Session that runs sched on the local ranks named in
	// cfg. It validates that the backend can run this schedule (op kinds,
	// dtypes, shapes, memory) and sets up what the ranks share. Per-rank
	// allocation belongs in Session.OpenRank, which runs on the rank's own
	// (possibly OS-thread-locked) goroutine.
	//
	// Open is called from Run's goroutine. It may block (library loading,
	// communicator bootstrap) and must return when ctx is done. sched is
	// read-only and stays valid and unchanged until Session.Close returns.
	Open(ctx context.Context, sched *model.Schedule, cfg SessionConfig) (Session, error)
}

// SessionConfig is what the runner tells a Backend about one Run.
type SessionConfig struct {
	// LocalRanks are the ranks this process runs, ascending; a subset of
	// 0..len(sched.Ranks)-1 (all of them in a single-process run). Ranks
	// outside this list are run by other processes (multi-node launch).
	LocalRanks []int
	// Steps is the total number of steps the runner will execute (warm-up
	// plus measured), so a backend can size per-step timing storage.
	Steps int
	// Graphs reports that the runner will try CUDA-graph mode (see
	// GraphCapturer); a backend may use it to prepare capture-safe
	// allocations. Backends without graphs ignore it.
	Graphs bool
	// Watchdog is how long a rank may wait for its peers before the
	// backend ends the wait with an error (WithWatchdog); 0 means the
	// backend's own default. A backend with no blocking waits ignores it.
	Watchdog time.Duration
	// Fail ends the run with err, from any goroutine: for a backend's
	// watchdog that fires while its rank's goroutine is blocked in a call
	// the runner cannot reach. The runner then cancels every rank as it does
	// for a failed op, and reports a rank that does not stop within its
	// cleanup timeout. Never nil when the runner opens a session.
	Fail func(err error)
}

// Session is one Run of one Schedule on a Backend.
type Session interface {
	// OpenRank allocates and initialises everything rank needs for the
	// whole Run -- activation, weight (one set per layer, so no cache
	// flatters the timing), KV-cache and communication buffers, streams,
	// events -- and returns its handle. Buffers are allocated here once and
	// reused by every step; Exec must not allocate per op.
	//
	// OpenRank is called once per local rank, on that rank's goroutine,
	// concurrently for all local ranks. It may block waiting for peers
	// (e.g. ncclCommInitRank) and must return when ctx is done.
	OpenRank(ctx context.Context, rank int) (Rank, error)

	// Close frees what the Session holds. Run calls it exactly once, from
	// Run's goroutine, after every rank goroutine has returned (and Closed
	// its Rank), also when the Run failed or was cancelled. It must not
	// block on peers.
	Close() error
}

// Rank executes one rank's op list. All methods are called from the rank's
// own goroutine only (see Backend for the sequence).
type Rank interface {
	// BeginStep starts a step (0-based over warm-up and measured steps).
	// A device backend typically records its step anchor event here.
	BeginStep(ctx context.Context, step int) error

	// Exec runs op i of this rank's op list (sched.Ranks[rank][i]). The
	// runner issues ops in list order, which satisfies every op's Deps
	// (the runner checks that Deps point backwards); a backend with
	// several streams may use Deps to overlap ops, provided the op's
	// device time still brackets only that op.
	//
	// Timing contract: if the Rank does not implement DeviceTimer, Exec
	// must return only after the op has completed, and the runner's host
	// clock around Exec is the op's measured time (schema.TimingHostClock).
	// If it implements DeviceTimer, Exec may return once the op is
	// enqueued; the runner's clock around Exec is then the host launch time.
	//
	// For a collective op (op.IsCollective()), Exec takes part in the
	// collective with the other members of op.Group, which the runner
	// drives on their own goroutines (local ranks) or which other
	// processes drive (remote ranks). Exec may block until the peers
	// arrive and must return when ctx is done.
	//
	// Exec must not allocate per op in steady state; it is on the hot path.
	Exec(ctx context.Context, i int) error

	// EndStep waits until every op issued in this step has finished on the
	// device (a stream synchronise; a no-op for synchronous backends).
	EndStep(ctx context.Context) error

	// Close frees the rank's buffers. It is called exactly once, on the
	// rank's goroutine, also after errors and cancellation (after a failed
	// OpenRank there is no Rank to close). It must not block on peers.
	Close() error
}

// OpTime is the measured device interval of one op, on the wall clock.
type OpTime struct {
	Start, End time.Time
}

// Duration is End - Start.
func (t OpTime) Duration() time.Duration { return t.End.Sub(t.Start) }

// Optional capabilities. The runner discovers them with a type assertion on
// the Session or the Rank; each lists the runner's fallback when absent.

// ThreadLocker is implemented by a Session whose ranks must each stay on one
// OS thread (a CUDA context is current per thread). When LockOSThread
// reports true, every rank goroutine calls runtime.LockOSThread before
// OpenRank and stays locked until it returns.
// Fallback: rank goroutines are not locked.
type ThreadLocker interface {
	LockOSThread() bool
}

// DeviceTimer is implemented by a Rank that times ops on the device (CUDA
// events around each op). After EndStep returns, the runner calls
// DeviceTimes with len(dst) == len(sched.Ranks[rank]); the Rank fills dst[i]
// with op i's device start and end mapped onto the wall clock (e.g. from an
// anchor event recorded at BeginStep whose host time is known). An op the
// Rank did not run gets a zero OpTime and should be marked skipped through
// OpAnnotator. DeviceTimes is called on the rank goroutine, must not block
// and must not retain dst.
// Fallback: Exec is synchronous and the runner's host clock times each op.
type DeviceTimer interface {
	DeviceTimes(dst []OpTime) error
}

// Aborter is implemented by a Rank whose teardown after a failed run
// must not wait on its peers: a collective library's orderly teardown
// (NCCL's ncclCommDestroy) may, once a peer has aborted or stopped, while
// its abort (ncclCommAbort) does not. When a run fails or is cancelled,
// the runner calls Abort on every open rank, on its rank goroutine, just
// before Close.
// Fallback: Close alone.
type Aborter interface {
	Abort()
}

// GraphCapturer is implemented by a Rank that can record a whole step once
// and replay it (CUDA graphs). When the runner is asked for graphs
// (WithGraphs) and the Rank implements both GraphCapturer and DeviceTimer,
// then after the warm-up steps (at least one eager step runs first) the
// runner calls, on the rank goroutine and on every local rank at once:
//
//	BeginCapture(ctx); Exec(ctx, i) for every op in order; EndCapture(ctx)
//
// during which Exec records the op (with its timing events) instead of
// running it; then for each measured step:
//
//	BeginStep(ctx, step); Replay(ctx); EndStep(ctx); DeviceTimes(dst)
//
// Replay launches the captured step; DeviceTimes then reports the events
// captured in the graph. The runner records Replay's host time on the rank
// span instead of per-op launch times.
// Fallback: eager steps; the step span records that graphs were requested
// but not used (AttrGraphs false).
type GraphCapturer interface {
	BeginCapture(ctx context.Context) error
	EndCapture(ctx context.Context) error
	Replay(ctx context.Context) error
}

// TimingEventer is implemented by a Backend that records events on the
// device around each op to time it (CUDA events): TimingEventsPerOp says
// how many, so a prediction of the run can price the extra graph or stream
// nodes they are (sim.Options.TimingEventsPerOp).
// Fallback: the backend records none (host clock, or a fake).
type TimingEventer interface {
	TimingEventsPerOp() int
}

// MemoryEstimator is implemented by a Backend that can say, before it
// opens a Session, how many bytes running the schedule's local ranks would
// allocate and how many are free where it allocates them (RAM for the CPU
// backend), so a caller refuses a run that cannot fit instead of starting
// it. It must be cheap (no allocation of the run's memory) and safe to
// call from any goroutine.
// Fallback: no estimate; the run finds out when it allocates.
type MemoryEstimator interface {
	EstimateMemory(s *model.Schedule, localRanks []int) (MemoryEstimate, error)
}

// MemoryEstimate is what a MemoryEstimator found.
type MemoryEstimate struct {
	NeedBytes int64  // bytes the run would allocate (at least)
	FreeBytes int64  // bytes free where it allocates them
	Where     string // "RAM", "device memory"
}

// OpAnnotator is implemented by a Rank that has facts about individual ops
// to put on their spans: a substituted kernel (schema.AttrSubstituted,
// schema.AttrSubstitution), a skipped op (schema.AttrSkipped,
// schema.AttrSkipReason -- e.g. a collective with no peers in a one-GPU
// shard run), the kernel name (schema.AttrKernel), or a time multiplier
// (schema.AttrScale). OpAttributes is called on the rank goroutine after
// EndStep, off the timed path; the returned slice is copied by the runner
// and may be reused by the Rank. Return nil when there is nothing to add.
// On the host clock (no DeviceTimer) an op marked skipped is recorded as
// not run, zero time, as a DeviceTimer's zero OpTime is: the clock timed
// the call that skipped it, not the op.
// Fallback: no extra attributes.
type OpAnnotator interface {
	OpAttributes(i int) []attribute.KeyValue
}

// StepAnnotator is implemented by a Rank with per-step facts for its rank/N
// span (NVML clock, power and temperature samples taken during the step).
// It is called on the rank goroutine after EndStep of a measured step.
// Fallback: no extra attributes.
type StepAnnotator interface {
	StepAttributes(step int) []attribute.KeyValue
}

// Capabilities a caller asks a Backend about before it runs anything, to
// know what a run can show there (tpscope verdict says "not on this
// backend" for a setting that changes nothing where it runs) and how its
// ranks may be placed.

// CollectiveSettingsReader is implemented by a Backend whose collectives
// run through a library configured from BackendConfig.NCCL (NCCL reads
// NCCL_PROTO, NCCL_ALGO, NCCL_P2P_LEVEL and NCCL_P2P_DISABLE when a
// communicator is created), so those settings, and the choice of the
// library's all-reduce, change what its ranks run.
// ReadsCollectiveSettings reports whether they do.
// Fallback: assumed to read them; a caller runs the settings and measures
// whatever they change.
type CollectiveSettingsReader interface {
	ReadsCollectiveSettings() bool
}

// GraphSupporter is implemented by a Backend that can say before a run
// whether its ranks capture and replay a step (GraphCapturer), so a caller
// knows whether WithGraphs changes anything there.
// Fallback: unknown before the run; the step span says what ran
// (schema.AttrGraphs).
type GraphSupporter interface {
	SupportsGraphs() bool
}

// MultiProcessRanker is implemented by a Backend whose ranks can run one
// per process, each process told its place by a launcher's environment as
// torchrun sets it (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT) and the processes joined by the backend's own rendezvous.
// MultiProcessRanks reports whether they can.
// Fallback: every rank of a run lives in one process (the CPU backend's
// collectives are shared memory).
type MultiProcessRanker interface {
	MultiProcessRanks() bool
}

// ResourceDescriber is implemented by a Backend that knows facts about the
// machine for a trace's resource (GPU model and count, driver, CUDA and
// NCCL versions) of the given device ordinals (nil: the first device). It
// is called before a Session exists, must be cheap, and leaves out what it
// cannot find.
// Fallback: the resource names the service and the host only.
type ResourceDescriber interface {
	ResourceAttributes(ordinals ...int) []attribute.KeyValue
}
