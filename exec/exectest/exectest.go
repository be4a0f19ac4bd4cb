// Package exectest provides test doubles for exec: a scriptable fake
// Backend (delays, injected failures, real collective rendezvous between
// goroutine ranks, optional device timing and graph capture), schedule
// builders, and tracer providers that record spans in memory or fail to
// export them.
package exectest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/model"
)

// Backend is a fake exec.Backend. Its zero value is not usable; call New.
// Counters say how far the runner drove it, for leak and cleanup checks.
type Backend struct {
	name    string
	delay   func(rank int, op *model.Op) time.Duration
	fail    func(rank, step int, op *model.Op) error
	openErr func(rank int) error
	device  bool
	graphs  bool
	lock    bool
	release <-chan struct{} // non-nil: collectives ignore ctx and wait for peers or this

	Opened, Closed           atomic.Int32 // sessions
	RanksOpened, RanksClosed atomic.Int32
	RanksAborted             atomic.Int32 // Abort calls (exec.Aborter): the runner's teardown of a failed run
	Execs                    atomic.Int64 // Exec calls
	Captures, Replays        atomic.Int32
}

// Option configures the fake Backend.
type Option func(*Backend)

// New returns a fake backend named "fake" whose ops take no time, never fail,
// synchronise collectives among local group members, and time on the host.
func New(opts ...Option) *Backend {
	b := &Backend{name: "fake"}
	for _, o := range opts {
		o(b)
	}
	return b
}

// WithName sets Name().
func WithName(n string) Option { return func(b *Backend) { b.name = n } }

// WithDelay makes op take d(rank, op) (slept on the host, or advanced on
// the virtual device clock with WithDeviceTimes).
func WithDelay(d func(rank int, op *model.Op) time.Duration) Option {
	return func(b *Backend) { b.delay = d }
}

// WithFailure makes Exec return f(rank, step, op) when non-nil.
func WithFailure(f func(rank, step int, op *model.Op) error) Option {
	return func(b *Backend) { b.fail = f }
}

// WithOpenRankError makes OpenRank return f(rank) when non-nil.
func WithOpenRankError(f func(rank int) error) Option { return func(b *Backend) { b.openErr = f } }

// WithDeviceTimes makes ranks implement exec.DeviceTimer: Exec returns at
// once and ops run on a virtual device clock that EndStep waits for.
func WithDeviceTimes() Option { return func(b *Backend) { b.device = true } }

// WithGraphs makes ranks implement exec.GraphCapturer (implies WithDeviceTimes).
func WithGraphs() Option { return func(b *Backend) { b.graphs, b.device = true, true } }

// WithThreadLock makes the Session ask for OS-thread-locked rank goroutines.
func WithThreadLock() Option { return func(b *Backend) { b.lock = true } }

// WithIgnoreCancel makes a collective wait for its peers without watching
// ctx (a broken backend), to test the runner's cleanup timeout; closing
// release lets the stuck goroutines go so the test leaks none.
func WithIgnoreCancel(release <-chan struct{}) Option {
	return func(b *Backend) { b.release = release }
}

// Name implements exec.Backend.
func (b *Backend) Name() string { return b.name }

// SupportsGraphs implements exec.GraphSupporter: whether ranks capture and
// replay (WithGraphs).
func (b *Backend) SupportsGraphs() bool { return b.graphs }

// Open implements exec.Backend.
func (b *Backend) Open(ctx context.Context, s *model.Schedule, cfg exec.SessionConfig) (exec.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.Opened.Add(1)
	sess := &session{b: b, s: s, rv: map[string]*rendezvous{}}
	isLocal := map[int]bool{}
	for _, r := range cfg.LocalRanks {
		isLocal[r] = true
	}
	for _, r := range cfg.LocalRanks {
		for i := range s.Ranks[r] {
			op := &s.Ranks[r][i]
			key := fmt.Sprint(op.ID, op.Group)
			if !op.IsCollective() || sess.rv[key] != nil {
				continue
			}
			n := 0
			for _, m := range op.Group {
				if isLocal[m] {
					n++
				}
			}
			sess.rv[key] = &rendezvous{n: n, ch: make(chan struct{})}
		}
	}
	if b.lock {
		return &lockingSession{sess}, nil
	}
	return sess, nil
}

type session struct {
	b  *Backend
	s  *model.Schedule
	rv map[string]*rendezvous // by collective op ID and group; read-only after Open
}

type lockingSession struct{ *session }

func (*lockingSession) LockOSThread() bool { return true }

func (s *session) OpenRank(ctx context.Context, rank int) (exec.Rank, error) {
	if s.b.openErr != nil {
		if err := s.b.openErr(rank); err != nil {
			return nil, err
		}
	}
	s.b.RanksOpened.Add(1)
	base := &rankImpl{sess: s, rank: rank, ops: s.s.Ranks[rank]}
	switch {
	case s.b.graphs:
		base.dev = make([]exec.OpTime, len(base.ops))
		return &graphRank{deviceRank{base}}, nil
	case s.b.device:
		base.dev = make([]exec.OpTime, len(base.ops))
		return &deviceRank{base}, nil
	}
	return base, nil
}

func (s *session) Close() error {
	s.b.Closed.Add(1)
	return nil
}

// rendezvous releases its n members together, once per step.
type rendezvous struct {
	n     int
	mu    sync.Mutex
	count int
	ch    chan struct{}
}

func (r *rendezvous) arrive(ctx context.Context, release <-chan struct{}) error {
	r.mu.Lock()
	ch := r.ch
	r.count++
	if r.count == r.n {
		r.count = 0
		r.ch = make(chan struct{})
		r.mu.Unlock()
		close(ch)
		return nil
	}
	r.mu.Unlock()
	if release != nil {
		select {
		case <-ch:
			return nil
		case <-release:
			return errors.New("collective: released by the test")
		}
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("collective: waiting for peers: %w", ctx.Err())
	}
}

type rankImpl struct {
	sess *session
	rank int
	ops  []model.Op
	step int

	dev       []exec.OpTime
	cursor    time.Time // virtual device clock (device mode): set at each step's start, advanced only by op delays
	capturing bool
	graph     []int // captured op indices
}

func (r *rankImpl) BeginStep(ctx context.Context, step int) error {
	r.step = step
	// The device starts the step when the host does and then runs its ops
	// back to back: host scheduling inside a step (a loaded test machine)
	// never shows in the device times, so gains measured on them are exact.
	if now := time.Now(); now.After(r.cursor) {
		r.cursor = now
	}
	return ctx.Err()
}

func (r *rankImpl) Exec(ctx context.Context, i int) error {
	b := r.sess.b
	b.Execs.Add(1)
	op := &r.ops[i]
	if r.capturing {
		r.graph = append(r.graph, i)
		return nil
	}
	return r.run(ctx, i, op)
}

func (r *rankImpl) run(ctx context.Context, i int, op *model.Op) error {
	b := r.sess.b
	if b.fail != nil {
		if err := b.fail(r.rank, r.step, op); err != nil {
			return err
		}
	}
	if op.IsCollective() {
		if err := r.sess.rv[fmt.Sprint(op.ID, op.Group)].arrive(ctx, b.release); err != nil {
			return err
		}
	}
	var d time.Duration
	if b.delay != nil {
		d = b.delay(r.rank, op)
	}
	if r.dev != nil {
		r.dev[i] = exec.OpTime{Start: r.cursor, End: r.cursor.Add(d)}
		r.cursor = r.cursor.Add(d)
		return nil
	}
	if d > 0 {
		time.Sleep(d)
	}
	return nil
}

func (r *rankImpl) EndStep(ctx context.Context) error {
	if r.dev != nil {
		if wait := time.Until(r.cursor); wait > 0 {
			time.Sleep(wait)
		}
	}
	return nil
}

func (r *rankImpl) Close() error {
	r.sess.b.RanksClosed.Add(1)
	return nil
}

func (r *rankImpl) Abort() { r.sess.b.RanksAborted.Add(1) }

type deviceRank struct{ *rankImpl }

func (r *deviceRank) DeviceTimes(dst []exec.OpTime) error {
	if len(dst) != len(r.dev) {
		return fmt.Errorf("DeviceTimes: len(dst) = %d, want %d", len(dst), len(r.dev))
	}
	copy(dst, r.dev)
	return nil
}

type graphRank struct{ deviceRank }

func (r *graphRank) BeginCapture(ctx context.Context) error {
	r.capturing, r.graph = true, r.graph[:0]
	return nil
}

func (r *graphRank) EndCapture(ctx context.Context) error {
	r.capturing = false
	r.sess.b.Captures.Add(1)
	return nil
}

func (r *graphRank) Replay(ctx context.Context) error {
	r.sess.b.Replays.Add(1)
	for _, i := range r.graph {
		if err := r.run(ctx, i, &r.ops[i]); err != nil {
			return err
		}
	}
	return nil
}

// NewRecorder returns a tracer provider that records ended spans in memory,
// synchronously, and the recorder to read them from.
func NewRecorder() (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), rec
}

// ErrExport is what FailingExporter returns.
var ErrExport = errors.New("exectest: collector unreachable")

// FailingExporter is a span exporter whose every export fails with
// ErrExport after the first OK batches.
type FailingExporter struct {
	OK    int // exports that succeed before failures start
	calls atomic.Int32
}

// ExportSpans implements sdktrace.SpanExporter.
func (e *FailingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if int(e.calls.Add(1)) <= e.OK {
		return nil
	}
	return ErrExport
}

// Shutdown implements sdktrace.SpanExporter.
func (e *FailingExporter) Shutdown(ctx context.Context) error { return nil }

// Schedule builds a synthetic TP schedule: ranks ranks, each with layers x
// [gemm, attention, allreduce over all ranks, moe_gemm, allreduce] ops with
// IDs in the project's form (L00.attn.q_proj, ...). Shapes are small and
// arbitrary; the schedule exercises the runner, not a model.
func Schedule(ranks, layers int) *model.Schedule {
	group := make([]int, ranks)
	for r := range group {
		group[r] = r
	}
	s := &model.Schedule{
		Model:    "exectest",
		Plan:     model.Plan{TP: ranks},
		Workload: model.Workload{Phase: model.Decode, Batch: 4, Context: 128},
		Ranks:    make([][]model.Op, ranks),
	}
	// 4 tokens, top-2 of 8 experts, all on every rank (TP).
	moe := model.NewMoEShape(4, 2, 8, 8, 0)
	for r := range ranks {
		for l := range layers {
			id := func(block, name string) string { return fmt.Sprintf("L%02d.%s.%s", l, block, name) }
			s.Ranks[r] = append(s.Ranks[r],
				model.Op{ID: id("attn", "q_proj"), Kind: model.KindGEMM, Layer: l, Block: "attn", Name: "q_proj", Rank: r, M: 4, N: 64, K: 64, Batch: 1, FLOPs: 2 * 4 * 64 * 64, BytesRead: 2 * 64 * 64, WeightDtype: model.BF16, ActDtype: model.BF16},
				model.Op{ID: id("attn", "core"), Kind: model.KindAttention, Layer: l, Block: "attn", Name: "core", Rank: r},
				model.Op{ID: id("attn", "allreduce"), Kind: model.KindCollective, Layer: l, Block: "attn", Name: "allreduce", Rank: r, Collective: model.AllReduce, CommBytes: 4 * 64 * 2, Group: slices.Clone(group)},
				model.Op{ID: id("moe", "experts"), Kind: model.KindMoEGEMM, Layer: l, Block: "moe", Name: "experts", Rank: r,
					M: int64(math.Ceil(moe.Rows / moe.ExpertsTouched)), N: 64, K: 64, Batch: moe.ExpertsTouched, MoE: &moe},
				model.Op{ID: id("moe", "allreduce"), Kind: model.KindCollective, Layer: l, Block: "moe", Name: "allreduce", Rank: r, Collective: model.AllReduce, CommBytes: 4 * 64 * 2, Group: slices.Clone(group)},
			)
		}
	}
	return s
}

// NoOp returns a backend whose ops do nothing and take no time: what is
// left of a Run over it is the runner's own cost (timing, barrier, spans).
func NoOp() exec.Backend { return noop{} }

type noop struct{}

func (noop) Name() string { return "noop" }
func (noop) Open(ctx context.Context, s *model.Schedule, cfg exec.SessionConfig) (exec.Session, error) {
	return noop{}, nil
}
func (noop) OpenRank(ctx context.Context, rank int) (exec.Rank, error) { return noop{}, nil }
func (noop) Close() error                                              { return nil }
func (noop) BeginStep(ctx context.Context, step int) error             { return nil }
func (noop) Exec(ctx context.Context, i int) error                     { return nil }
func (noop) EndStep(ctx context.Context) error                         { return nil }
