package exec

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/traces/schema"
)

// tracerName is the instrumentation scope of the runner's spans (the project's one scope).
const tracerName = schema.ScopeName

// Run executes sched on backend: one goroutine per local rank, every rank's
// ops in list order (which honours Deps; collectives are entered by every
// local member of their group), opts' warm-up steps and then its measured
// steps, timing every op with the backend's clock, and emitting one trace
// per measured step (DESIGN.md "Op IDs and the span schema"):
//
//	step          root; model, topology, plan, workload, options, step, ranks, backend
//	  rank/N      per local rank, spanning its ops
//	    <op ID>   per op: schema.OpAttributes + device_us, host.launch_us,
//	              host.launch_unix_nano, timing, predicted_us (WithPredictedUs),
//	              schedule.scale (WithScheduleScale), backend annotations
//
// Defaults: DefaultSteps measured steps, DefaultWarmup warm-up steps (no
// spans), all ranks local, eager launches, spans to otel.GetTracerProvider(),
// DefaultCleanupTimeout to drain after a failure, the backend's own watchdog
// (WithWatchdog), no injected fault (WithFault).
//
// Steps are separated by a host barrier over the local ranks. Each rank
// creates its rank and op spans on its own goroutine after its EndStep, from
// the recorded times, off the timed path; the root span is ended between
// steps. With WithSpanExporter the op spans are built as finished spans
// (well under a microsecond each, against several through the SDK tracer)
// and exported in one batch per step, before the provider is flushed. A step's time is from the earliest op start to the latest op end
// over the local ranks.
//
// The schedule is checked first: every rank's ops carry that rank, op IDs are
// unique per rank, Deps point backwards, and collectives are consistent (each
// member of a group has the op, and every pair of ranks meets its shared
// collectives in the same order), since an inconsistent schedule would hang.
//
// Cancelling ctx stops every rank after its current op; the runner then
// drains the device, emits the spans of the finished ops of the interrupted
// step (its root span has status Error), flushes the tracer provider if it
// can, closes every Rank and the Session, and returns an error wrapping
// ctx.Err(). The first backend error (or span-export error) ends the run the
// same way and is returned, wrapped with rank, step and op ID. On error the
// Result holds the measured steps completed before it (it may have zero).
func Run(ctx context.Context, sched *model.Schedule, backend Backend, opts ...Option) (*Result, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if backend == nil {
		return nil, errors.New("exec.Run: nil backend")
	}
	if err := ValidateSchedule(sched); err != nil {
		return nil, err
	}
	local := cfg.localRanks
	if local == nil {
		local = make([]int, len(sched.Ranks))
		for r := range local {
			local[r] = r
		}
	}
	if err := checkLocalRanks(local, len(sched.Ranks)); err != nil {
		return nil, err
	}
	faultOp := -1
	if cfg.fault != nil {
		if faultOp, err = checkFault(cfg.fault, sched, local); err != nil {
			return nil, err
		}
	}
	warmup := cfg.warmup
	if cfg.graphs && warmup < 1 {
		warmup = 1 // graph capture needs one eager step first (GraphCapturer)
	}
	total := warmup + cfg.steps
	if cfg.fault != nil && cfg.fault.Step >= total {
		return nil, fmt.Errorf("exec options: fault step %d: the run has %d steps (warm-up included), so the fault would never fire", cfg.fault.Step, total)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("run not started: %w", err)
	}

	r := &runner{
		cfg:     cfg,
		sched:   sched,
		backend: backend,
		local:   local,
		warmup:  warmup,
		total:   total,
		tracer:  cfg.tp.Tracer(tracerName),
		faultOp: faultOp,
	}
	if f, ok := cfg.tp.(interface{ ForceFlush(context.Context) error }); ok {
		r.flush = f.ForceFlush
	}
	r.res = newResult(sched, backend.Name(), local, warmup, cfg.steps)
	sess, err := backend.Open(ctx, sched, SessionConfig{LocalRanks: local, Steps: total, Graphs: cfg.graphs, Watchdog: cfg.watchdog, Fail: r.backendFail})
	if err != nil {
		return nil, fmt.Errorf("open %s backend: %w", backend.Name(), err)
	}
	runErr := r.run(ctx, sess)
	r.res.Timing = r.timing
	closeErr := sess.Close()
	if closeErr != nil {
		closeErr = fmt.Errorf("close %s session: %w", backend.Name(), closeErr)
	}
	r.res.summarize(sched)
	return r.res, errors.Join(runErr, closeErr)
}

// runner is one Run's state. Fields written by rank goroutines are per rank;
// the step actions run under the barrier while every rank waits.
type runner struct {
	cfg     *config
	sched   *model.Schedule
	backend Backend
	local   []int
	warmup  int
	total   int
	tracer  trace.Tracer
	flush   func(context.Context) error
	res     *Result
	faultOp int // index of the injected fault's op in its rank's list (WithFault), or -1

	anchor time.Time // wall and monotonic origin of all recorded times
	ranks  []*rankState
	graphs bool // every rank can capture and replay (decided after OpenRank)

	cancel context.CancelCauseFunc
	failMu sync.Mutex  // guards cancel and early against SessionConfig.Fail
	early  error       // a backend failure before the run started
	stop   atomic.Bool // set when the run context is done; polled between ops

	timing string // schema.AttrTiming value, fixed after every rank opened

	// The current step's root span, started by the first rank to emit
	// (rootFor) and ended between steps (endStep).
	stepMu      sync.Mutex
	rootStep    int // step of root, or -1
	rootCtx     context.Context
	root        trace.Span
	stepRelease int64 // when the current step was released, ns since anchor (written under the barrier)

	scratch    []attribute.KeyValue // step span attributes buffer (endStep)
	stepStatic []attribute.KeyValue // step span attributes that do not change (built on first use)
}

// rankState is one local rank's recorded times, reused every step.
type rankState struct {
	rank    int
	ops     []model.Op
	rk      Rank
	timer   DeviceTimer
	annot   OpAnnotator
	stepAnn StepAnnotator
	graph   GraphCapturer

	static  [][]attribute.KeyValue // per op: attributes fixed for the whole run
	scratch []attribute.KeyValue   // span attribute buffer of this rank's goroutine

	launchStart, launchEnd []int64  // ns since anchor, host clock around Exec
	dev                    []OpTime // device times (DeviceTimer)
	start, end             []int64  // op interval for the span, ns since anchor
	done                   int      // ops completed in the current step
	failed                 int      // op that failed in the current step, or -1
	replayNs               int64    // graph mode: host time of Replay
	opened                 bool
	faultOp                int // op this rank stalls at instead of issuing it (WithFault), or -1

	// Of the current step, set by emitRank: op and launch times in us,
	// whether any op got a span and the range the spans cover.
	opUs, launchUs     []float64
	spanned            bool
	spanStart, spanEnd int64

	// WithSpanExporter: op spans built by emitRank, not yet exported, and
	// the most attributes one step's op spans had (the next step's buffer).
	pending      []*opSpan
	attrsPerStep int
}

func (r *runner) now() int64 { return int64(time.Since(r.anchor)) }

// fail ends the run with err (the first failure wins).
func (r *runner) fail(err error) { r.cancel(err) }

// backendFail is SessionConfig.Fail: fail from any goroutine, and before
// the run's context exists (kept until it does).
func (r *runner) backendFail(err error) {
	r.failMu.Lock()
	defer r.failMu.Unlock()
	if r.cancel == nil {
		if r.early == nil {
			r.early = err
		}
		return
	}
	r.cancel(err)
}

func (r *runner) run(parent context.Context, sess Session) error {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	r.failMu.Lock()
	r.cancel = cancel
	if r.early != nil {
		cancel(r.early)
	}
	r.failMu.Unlock()
	stopWatch := context.AfterFunc(ctx, func() { r.stop.Store(true) })
	defer stopWatch()

	r.anchor = time.Now()
	r.rootStep = -1
	r.ranks = make([]*rankState, len(r.local))
	for k, rank := range r.local {
		r.ranks[k] = r.newRankState(rank)
	}
	lock := false
	if tl, ok := sess.(ThreadLocker); ok {
		lock = tl.LockOSThread()
	}

	b := newBarrier(len(r.local))
	var wg sync.WaitGroup
	closeErrs := make([]error, len(r.local))
	for k := range r.ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			closeErrs[k] = r.rankLoop(ctx, sess, r.ranks[k], b, lock)
		}()
	}

	// Wait for the rank goroutines; after a cancellation give them
	// cleanupTimeout to drain, then report a backend that ignores ctx.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t := time.NewTimer(r.cfg.cleanupTimeout)
		select {
		case <-done:
			t.Stop()
		case <-t.C:
			return fmt.Errorf("%s backend: rank goroutines did not stop within %v of cancellation (%v); the backend ignores ctx",
				r.backend.Name(), r.cfg.cleanupTimeout, context.Cause(ctx))
		}
	}

	var runErr error
	if cause := context.Cause(ctx); cause != nil {
		if parent.Err() != nil && errors.Is(cause, parent.Err()) {
			runErr = fmt.Errorf("run cancelled after %d of %d measured steps: %w", r.res.Steps, r.cfg.steps, cause)
		} else {
			runErr = cause
		}
		// End the root span of the interrupted measured step; the ranks
		// emitted what finished of it before closing.
		r.stepMu.Lock()
		partial := r.rootStep
		r.stepMu.Unlock()
		if partial >= 0 {
			r.endStep(partial, runErr)
		}
		fctx, fcancel := context.WithTimeout(context.WithoutCancel(parent), r.cfg.cleanupTimeout)
		if err := r.exportPending(fctx); err != nil && !errors.Is(runErr, errExport) {
			runErr = errors.Join(runErr, fmt.Errorf("%w: %w", errExport, err))
		}
		if r.flush != nil {
			if err := r.flush(fctx); err != nil && !errors.Is(runErr, errExport) {
				runErr = errors.Join(runErr, fmt.Errorf("%w: %w", errExport, err))
			}
		}
		fcancel()
	}
	return errors.Join(append([]error{runErr}, closeErrs...)...)
}

// errExport marks span-export failures.
var errExport = errors.New("export spans")

func (r *runner) newRankState(rank int) *rankState {
	ops := r.sched.Ranks[rank]
	n := len(ops)
	rs := &rankState{
		rank: rank, ops: ops, failed: -1, faultOp: -1,
		static:      make([][]attribute.KeyValue, n),
		launchStart: make([]int64, n),
		opUs:        make([]float64, n),
		launchUs:    make([]float64, n),
		launchEnd:   make([]int64, n),
		dev:         make([]OpTime, n),
		start:       make([]int64, n),
		end:         make([]int64, n),
	}
	for i := range ops {
		rs.static[i] = r.staticAttrs(&ops[i])
	}
	if r.cfg.fault != nil && r.cfg.fault.Rank == rank {
		rs.faultOp = r.faultOp
	}
	return rs
}

// rankLoop is one rank goroutine: open, steps, close. It returns the Close
// error; run errors go through r.fail.
func (r *runner) rankLoop(ctx context.Context, sess Session, rs *rankState, b *barrier, lock bool) (closeErr error) {
	if lock {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	rk, err := sess.OpenRank(ctx, rs.rank)
	if err != nil {
		r.fail(fmt.Errorf("open rank %d: %w", rs.rank, err))
		return nil
	}
	if rk == nil {
		r.fail(fmt.Errorf("open rank %d: %s backend returned a nil Rank", rs.rank, r.backend.Name()))
		return nil
	}
	rs.rk, rs.opened = rk, true
	rs.timer, _ = rk.(DeviceTimer)
	rs.annot, _ = rk.(OpAnnotator)
	rs.stepAnn, _ = rk.(StepAnnotator)
	rs.graph, _ = rk.(GraphCapturer)
	defer func() {
		if ab, ok := rk.(Aborter); ok && ctx.Err() != nil {
			ab.Abort()
		}
		if err := rk.Close(); err != nil {
			closeErr = fmt.Errorf("close rank %d: %w", rs.rank, err)
		}
	}()

	// Every rank open; decide graph mode and the timing source once for all.
	if b.wait(ctx, func() { r.decideGraphs(); r.timing = r.timingName(); r.stepRelease = r.now() }) != nil {
		return nil
	}
	for step := 0; step < r.total; step++ {
		if r.graphs && step == r.warmup {
			if err := r.capture(ctx, rs); err != nil {
				r.fail(err)
				return nil
			}
		}
		if err := r.runStep(ctx, rs, step); err != nil {
			if !(errors.Is(err, context.Canceled) && ctx.Err() != nil) {
				r.fail(err)
			}
			r.drain(ctx, rs)
			if step >= r.warmup {
				r.emitRank(rs, step, true)
			}
			return nil
		}
		if step >= r.warmup {
			r.emitRank(rs, step, false)
		}
		if b.wait(ctx, func() { r.stepDone(ctx, step) }) != nil {
			return nil
		}
	}
	return nil
}

// decideGraphs runs once, after every rank opened.
func (r *runner) decideGraphs() {
	if !r.cfg.graphs {
		return
	}
	r.graphs = true
	for _, rs := range r.ranks {
		if rs.graph == nil || rs.timer == nil {
			r.graphs = false
		}
	}
	r.res.Graphs = r.graphs
}

// drain waits for the device after an interrupted step so buffers can be
// freed and the finished ops reported.
func (r *runner) drain(ctx context.Context, rs *rankState) {
	if rs.done == 0 && rs.failed < 0 {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.cleanupTimeout)
	defer cancel()
	if err := rs.rk.EndStep(cctx); err != nil {
		rs.done = 0 // times of unfinished device work are meaningless
		return
	}
	if rs.timer != nil {
		if rs.timer.DeviceTimes(rs.dev) != nil {
			rs.done = 0
			return
		}
		r.useDeviceTimes(rs, rs.done)
	}
}

func (r *runner) capture(ctx context.Context, rs *rankState) error {
	if err := rs.graph.BeginCapture(ctx); err != nil {
		return fmt.Errorf("rank %d: begin graph capture: %w", rs.rank, err)
	}
	for i := range rs.ops {
		if i == rs.faultOp {
			return r.stall(ctx, rs, r.warmup, i)
		}
		if err := rs.rk.Exec(ctx, i); err != nil {
			return fmt.Errorf("rank %d: capture op %s: %w", rs.rank, rs.ops[i].ID, err)
		}
	}
	if err := rs.graph.EndCapture(ctx); err != nil {
		return fmt.Errorf("rank %d: end graph capture: %w", rs.rank, err)
	}
	return nil
}

// runStep runs one step on one rank and records its times in rs.
func (r *runner) runStep(ctx context.Context, rs *rankState, step int) error {
	rs.done, rs.failed, rs.replayNs = 0, -1, 0
	if r.stop.Load() {
		return context.Cause(ctx)
	}
	if err := rs.rk.BeginStep(ctx, step); err != nil {
		return fmt.Errorf("rank %d step %d: begin step: %w", rs.rank, step, err)
	}
	if r.graphs && step >= r.warmup {
		t0 := r.now()
		if err := rs.graph.Replay(ctx); err != nil {
			return fmt.Errorf("rank %d step %d: graph replay: %w", rs.rank, step, err)
		}
		rs.replayNs = r.now() - t0
		for i := range rs.ops {
			rs.launchStart[i], rs.launchEnd[i] = t0, t0
		}
		rs.done = len(rs.ops)
	} else {
		for i := range rs.ops {
			if r.stop.Load() {
				return context.Cause(ctx)
			}
			if i == rs.faultOp && step >= r.cfg.fault.Step {
				return r.stall(ctx, rs, step, i)
			}
			t0 := r.now()
			err := rs.rk.Exec(ctx, i)
			t1 := r.now()
			rs.launchStart[i], rs.launchEnd[i] = t0, t1
			if err != nil {
				if ctx.Err() != nil && errors.Is(err, context.Canceled) {
					return err
				}
				rs.failed = i
				return fmt.Errorf("rank %d step %d op %s: %w", rs.rank, step, rs.ops[i].ID, err)
			}
			rs.done = i + 1
		}
	}
	if err := rs.rk.EndStep(ctx); err != nil {
		return fmt.Errorf("rank %d step %d: end step: %w", rs.rank, step, err)
	}
	if rs.timer != nil {
		if err := rs.timer.DeviceTimes(rs.dev); err != nil {
			return fmt.Errorf("rank %d step %d: device times: %w", rs.rank, step, err)
		}
		r.useDeviceTimes(rs, len(rs.ops))
	} else {
		copy(rs.start, rs.launchStart)
		copy(rs.end, rs.launchEnd)
	}
	return nil
}

func (r *runner) useDeviceTimes(rs *rankState, n int) {
	for i := range n {
		t := rs.dev[i]
		if t.Start.IsZero() {
			rs.start[i], rs.end[i] = rs.launchStart[i], rs.launchStart[i]
			continue
		}
		rs.start[i] = int64(t.Start.Sub(r.anchor))
		rs.end[i] = int64(t.End.Sub(r.anchor))
	}
}

// stepDone runs under the barrier after every rank finished (and emitted)
// step; it releases the next one.
func (r *runner) stepDone(ctx context.Context, step int) {
	if step >= r.warmup {
		r.endStep(step, nil)
		if err := r.exportPending(ctx); err != nil && ctx.Err() == nil {
			r.fail(fmt.Errorf("%w of step %d: %w", errExport, step-r.warmup, err))
		}
		if r.flush != nil {
			if err := r.flush(ctx); err != nil && ctx.Err() == nil {
				r.fail(fmt.Errorf("%w of step %d: %w", errExport, step-r.warmup, err))
			}
		}
	}
	if r.cfg.progress != nil {
		r.cfg.progress(step+1, r.total)
	}
	r.stepRelease = r.now()
}

// checkLocalRanks reports a bad WithLocalRanks list.
func checkLocalRanks(local []int, n int) error {
	if len(local) == 0 {
		return errors.New("exec options: local ranks: empty list")
	}
	for i, r := range local {
		if r < 0 || r >= n {
			return fmt.Errorf("exec options: local rank %d: schedule has ranks 0..%d", r, n-1)
		}
		if i > 0 && r <= local[i-1] {
			return fmt.Errorf("exec options: local ranks %v: want ascending, no repeats", local)
		}
	}
	return nil
}

// barrier holds n goroutines until all arrive; the last to arrive runs the
// action before releasing the others. A waiter leaves early when ctx is done
// (the run is over then; the barrier is not reused).
type barrier struct {
	n     int
	mu    sync.Mutex
	count int
	gen   chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, gen: make(chan struct{})} }

func (b *barrier) wait(ctx context.Context, action func()) error {
	b.mu.Lock()
	ch := b.gen
	b.count++
	if b.count == b.n {
		if action != nil {
			action()
		}
		b.count = 0
		b.gen = make(chan struct{})
		b.mu.Unlock()
		close(ch)
		return ctx.Err()
	}
	b.mu.Unlock()
	select {
	case <-ch:
		return ctx.Err()
	case <-ctx.Done():
		return ctx.Err()
	}
}
