package exec_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/goleak"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/exectest"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/traces/schema"
)

func attrMap(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestRunSpanTree checks the span schema of DESIGN.md on a synthetic
// schedule: per measured step one root "step", one "rank/N" per rank under
// it, one span per op under its rank, named by op ID.
func TestRunSpanTree(t *testing.T) {
	defer goleak.VerifyNone(t)
	const ranks, layers, steps = 2, 2, 3
	s := exectest.Schedule(ranks, layers)
	opsPerRank := len(s.Ranks[0]) // 5 per layer x 2 layers = 10
	tp, rec := exectest.NewRecorder()
	defer tp.Shutdown(context.Background())
	pred := map[string]float64{"L01.attn.q_proj": 12.5}

	res, err := exec.Run(context.Background(), s, exectest.New(), exec.WithTracerProvider(tp),
		exec.WithSteps(steps), exec.WithWarmup(2), exec.WithPredictedUs(pred),
		exec.WithScenario(`{"model":{"name":"x"}}`, "cpu.json", []string{"b-opt", "a-opt"}))
	if err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	// 3 steps x (1 root + 2 rank spans + 2 x 10 op spans) = 69.
	if want := steps * (1 + ranks + ranks*opsPerRank); len(spans) != want {
		t.Fatalf("got %d spans, want %d", len(spans), want)
	}
	if res.Steps != steps || len(res.StepUs) != steps || len(res.OpUs) != steps {
		t.Fatalf("result steps = %d, StepUs %d, OpUs %d; want %d", res.Steps, len(res.StepUs), len(res.OpUs), steps)
	}
	byID := map[[8]byte]sdktrace.ReadOnlySpan{}
	for _, sp := range spans {
		byID[sp.SpanContext().SpanID()] = sp
	}
	traceIDs := map[string]bool{}
	var opSpans, rankSpans int
	for _, sp := range spans {
		a := attrMap(sp.Attributes())
		switch {
		case sp.Name() == schema.SpanStep:
			if sp.Parent().IsValid() {
				t.Errorf("step span has a parent")
			}
			traceIDs[sp.SpanContext().TraceID().String()] = true
			if got := a[schema.AttrOptions].AsStringSlice(); strings.Join(got, ",") != "a-opt,b-opt" {
				t.Errorf("options = %v, want sorted [a-opt b-opt]", got)
			}
			if got := a[schema.AttrPlan].AsString(); got != "tp2" {
				t.Errorf("plan = %q", got)
			}
			if got := a[schema.AttrScenario].AsString(); got != `{"model":{"name":"x"}}` {
				t.Errorf("scenario = %q, want the JSON given", got)
			}
			if a[schema.AttrTopology].AsString() != "cpu.json" || a[schema.AttrBackend].AsString() != "fake" || a[schema.AttrRanks].AsInt64() != ranks {
				t.Errorf("step attributes %v", a)
			}
		case strings.HasPrefix(sp.Name(), schema.SpanRankPrefix):
			rankSpans++
			p, ok := byID[sp.Parent().SpanID()]
			if !ok || p.Name() != schema.SpanStep {
				t.Errorf("%s: parent is not the step span", sp.Name())
			}
		default:
			opSpans++
			p, ok := byID[sp.Parent().SpanID()]
			if !ok {
				t.Fatalf("%s: no parent", sp.Name())
			}
			r, isRank := schema.ParseRankSpanName(p.Name())
			if !isRank || int64(r) != a[schema.AttrRank].AsInt64() {
				t.Errorf("%s: parent %q, rank attribute %v", sp.Name(), p.Name(), a[schema.AttrRank])
			}
			if a[schema.AttrOpID].AsString() != sp.Name() {
				t.Errorf("%s: op.id %q", sp.Name(), a[schema.AttrOpID].AsString())
			}
			if a[schema.AttrTiming].AsString() != schema.TimingHostClock {
				t.Errorf("%s: timing %q", sp.Name(), a[schema.AttrTiming].AsString())
			}
			// device_us is the span's own duration (exactly, up to float rounding).
			durUs := float64(sp.EndTime().Sub(sp.StartTime())) / 1e3
			if got := a[schema.AttrDeviceUs].AsFloat64(); math.Abs(got-durUs) > 1e-3 {
				t.Errorf("%s: device_us %v, span duration %v us", sp.Name(), got, durUs)
			}
			_, hasPred := a[schema.AttrPredictedUs]
			if wantPred := sp.Name() == "L01.attn.q_proj"; hasPred != wantPred {
				t.Errorf("%s: predicted_us present = %v, want %v", sp.Name(), hasPred, wantPred)
			} else if hasPred && a[schema.AttrPredictedUs].AsFloat64() != 12.5 {
				t.Errorf("%s: predicted_us = %v, want 12.5", sp.Name(), a[schema.AttrPredictedUs].AsFloat64())
			}
			if sp.Name() == "L00.attn.allreduce" && a[schema.AttrCommBytes].AsInt64() != 4*64*2 {
				t.Errorf("comm.bytes = %v, want 512", a[schema.AttrCommBytes])
			}
		}
	}
	if len(traceIDs) != steps || rankSpans != steps*ranks || opSpans != steps*ranks*opsPerRank {
		t.Errorf("traces %d rank spans %d op spans %d", len(traceIDs), rankSpans, opSpans)
	}
}

// TestRunDeviceTimes drives the DeviceTimer path with a virtual device clock
// on which each op takes exactly its scripted time, so measured times and
// the per-kind summary are known exactly.
func TestRunDeviceTimes(t *testing.T) {
	defer goleak.VerifyNone(t)
	// Per layer: gemm 100 us, attention 300 us, moe_gemm 200 us, each
	// all-reduce 50 us. 2 layers: gemm 200, attention 600, moe 400,
	// collective 4 x 50 = 200 us per rank per step; total 1400 us.
	us := map[model.OpKind]time.Duration{model.KindGEMM: 100, model.KindAttention: 300, model.KindMoEGEMM: 200, model.KindCollective: 50}
	delay := func(rank int, op *model.Op) time.Duration { return us[op.Kind] * time.Microsecond }
	for _, tc := range []struct {
		name   string
		opts   []exectest.Option
		graphs bool
	}{
		{"mode=eager", []exectest.Option{exectest.WithDeviceTimes()}, false},
		{"mode=graphs", []exectest.Option{exectest.WithGraphs()}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := exectest.Schedule(2, 2)
			tp, rec := exectest.NewRecorder()
			defer tp.Shutdown(context.Background())
			b := exectest.New(append(tc.opts, exectest.WithDelay(delay))...)
			res, err := exec.Run(context.Background(), s, b, exec.WithTracerProvider(tp), exec.WithSteps(2), exec.WithWarmup(0), exec.WithGraphs(tc.graphs))
			if err != nil {
				t.Fatal(err)
			}
			if res.Timing != schema.TimingDeviceEvents || res.Graphs != tc.graphs {
				t.Errorf("timing %q graphs %v", res.Timing, res.Graphs)
			}
			if tc.graphs {
				// warm-up raised to 1 for capture; one capture per rank; one replay per rank per measured step.
				if res.Warmup != 1 || b.Captures.Load() != 2 || b.Replays.Load() != 4 {
					t.Errorf("warmup %d captures %d replays %d, want 1, 2, 4", res.Warmup, b.Captures.Load(), b.Replays.Load())
				}
			}
			want := map[model.OpKind]float64{model.KindAttention: 600, model.KindMoEGEMM: 400, model.KindGEMM: 200, model.KindCollective: 200}
			if len(res.Summary.ByKind) != len(want) {
				t.Fatalf("ByKind = %+v", res.Summary.ByKind)
			}
			for _, kt := range res.Summary.ByKind {
				if math.Abs(kt.Us-want[kt.Kind]) > 1e-6 || math.Abs(kt.ShareFrac-want[kt.Kind]/1400) > 1e-9 {
					t.Errorf("%s: %v us share %v, want %v us share %v", kt.Kind, kt.Us, kt.ShareFrac, want[kt.Kind], want[kt.Kind]/1400)
				}
			}
			if res.Summary.ByKind[0].Kind != model.KindAttention {
				t.Errorf("ByKind not sorted largest first: %+v", res.Summary.ByKind)
			}
			// A step is at least its 1400 us of serial device work.
			if res.Summary.StepMinUs < 1400 {
				t.Errorf("step min %v us < 1400 us of device work", res.Summary.StepMinUs)
			}
			for _, sp := range rec.Ended() {
				a := attrMap(sp.Attributes())
				if sp.Name() == schema.SpanStep && tc.graphs {
					if v, ok := a[exec.AttrGraphs]; !ok || !v.AsBool() {
						t.Errorf("step span graphs attribute %v, want %v", v, tc.graphs)
					}
				}
				if sp.Name() == "L01.attn.core" && math.Abs(a[schema.AttrDeviceUs].AsFloat64()-300) > 1e-6 {
					t.Errorf("L01.attn.core device_us %v, want 300", a[schema.AttrDeviceUs].AsFloat64())
				}
			}
		})
	}
}

func TestRunGraphsUnsupportedFallsBack(t *testing.T) {
	tp, rec := exectest.NewRecorder()
	res, err := exec.Run(context.Background(), exectest.Schedule(1, 1), exectest.New(), exec.WithTracerProvider(tp), exec.WithSteps(1), exec.WithGraphs(true))
	if err != nil {
		t.Fatal(err)
	}
	if res.Graphs {
		t.Error("Graphs = true for a backend without GraphCapturer")
	}
	for _, sp := range rec.Ended() {
		if sp.Name() == schema.SpanStep {
			if v, ok := attrMap(sp.Attributes())[exec.AttrGraphs]; !ok || v.AsBool() {
				t.Errorf("step span graphs attribute = %v (present %v), want false", v, ok)
			}
		}
	}
}

// TestRunHostTiming checks that a synchronous backend's op time is its
// scripted work: an op sleeping 2 ms measures at least 2 ms. The upper
// bound is loose (the machine is shared); it catches unit errors (x1000).
func TestRunHostTiming(t *testing.T) {
	s := exectest.Schedule(1, 1)
	delay := func(rank int, op *model.Op) time.Duration {
		if op.Kind == model.KindAttention {
			return 2 * time.Millisecond
		}
		return 0
	}
	res, err := exec.Run(context.Background(), s, exectest.New(exectest.WithDelay(delay)), exec.WithSteps(2), exec.WithWarmup(0))
	if err != nil {
		t.Fatal(err)
	}
	for st := range res.OpUs {
		got := res.OpUs[st][0][1] // op 1 is L00.attn.core
		if got < 2000 || got > 200000 {
			t.Errorf("step %d: attention %v us, want >= 2000 us", st, got)
		}
		if res.StepUs[st] < got {
			t.Errorf("step %d: step %v us < its op %v us", st, res.StepUs[st], got)
		}
	}
}

// TestRunFailures: an op failure on one rank, an OpenRank failure, a
// cancellation and an exporter failure each end the run with a clear
// error, every opened rank and the session closed, and no goroutine left.
func TestRunFailures(t *testing.T) {
	errInjected := errors.New("injected fault")
	for _, tc := range []struct {
		name    string
		backend func(cancel context.CancelFunc) *exectest.Backend
		tp      func() *sdktrace.TracerProvider
		wantIs  error
		wantMsg string
	}{
		{
			name: "fault=op-on-one-rank",
			backend: func(context.CancelFunc) *exectest.Backend {
				return exectest.New(exectest.WithFailure(func(rank, step int, op *model.Op) error {
					if rank == 2 && step == 3 && op.ID == "L01.moe.experts" {
						return errInjected
					}
					return nil
				}))
			},
			wantIs:  errInjected,
			wantMsg: "rank 2 step 3 op L01.moe.experts: injected fault",
		},
		{
			name: "fault=open-rank",
			backend: func(context.CancelFunc) *exectest.Backend {
				return exectest.New(exectest.WithOpenRankError(func(rank int) error {
					if rank == 1 {
						return errInjected
					}
					return nil
				}))
			},
			wantIs:  errInjected,
			wantMsg: "open rank 1: injected fault",
		},
		{
			name: "fault=cancel",
			backend: func(cancel context.CancelFunc) *exectest.Backend {
				return exectest.New(exectest.WithFailure(func(rank, step int, op *model.Op) error {
					if rank == 0 && step == 3 && op.ID == "L00.moe.experts" {
						cancel() // Ctrl-C in the middle of measured step 1
					}
					return nil
				}))
			},
			wantIs:  context.Canceled,
			wantMsg: "run cancelled after 1 of 5 measured steps",
		},
		{
			name:    "fault=exporter",
			backend: func(context.CancelFunc) *exectest.Backend { return exectest.New() },
			tp: func() *sdktrace.TracerProvider {
				return sdktrace.NewTracerProvider(sdktrace.WithBatcher(&exectest.FailingExporter{OK: 1}))
			},
			wantIs:  exectest.ErrExport,
			wantMsg: "export spans of step 1",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var tp *sdktrace.TracerProvider
			if tc.tp != nil {
				tp = tc.tp()
			} else {
				tp, _ = exectest.NewRecorder()
			}
			b := tc.backend(cancel)
			res, err := exec.Run(ctx, exectest.Schedule(4, 2), b, exec.WithTracerProvider(tp), exec.WithSteps(5), exec.WithWarmup(2))
			_ = tp.Shutdown(context.Background())
			if err == nil {
				t.Fatal("Run returned no error")
			}
			if !errors.Is(err, tc.wantIs) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q: want it to wrap %v and contain %q", err, tc.wantIs, tc.wantMsg)
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("error spans several lines: %q", err)
			}
			if res == nil {
				t.Fatal("nil Result with the error")
			}
			if b.RanksOpened.Load() != b.RanksClosed.Load() || b.Opened.Load() != 1 || b.Closed.Load() != 1 {
				t.Errorf("ranks opened %d closed %d; sessions opened %d closed %d",
					b.RanksOpened.Load(), b.RanksClosed.Load(), b.Opened.Load(), b.Closed.Load())
			}
			// A failed run tears every open rank down by Abort, then Close.
			if b.RanksAborted.Load() != b.RanksOpened.Load() {
				t.Errorf("%d of %d open ranks aborted before Close", b.RanksAborted.Load(), b.RanksOpened.Load())
			}
		})
	}
}

// TestRunCleanRunDoesNotAbort: a run that completes closes its ranks
// without Abort (the orderly teardown, e.g. ncclCommDestroy).
func TestRunCleanRunDoesNotAbort(t *testing.T) {
	for _, graphs := range []bool{false, true} {
		b := exectest.New(exectest.WithGraphs())
		if _, err := exec.Run(context.Background(), exectest.Schedule(4, 2), b, exec.WithSteps(3), exec.WithWarmup(1), exec.WithGraphs(graphs)); err != nil {
			t.Fatal(err)
		}
		if b.RanksClosed.Load() != 4 || b.RanksAborted.Load() != 0 {
			t.Errorf("graphs=%v: %d ranks closed, %d aborted; want 4 and 0", graphs, b.RanksClosed.Load(), b.RanksAborted.Load())
		}
	}
}

// TestRunCancelFlushesPartialStep: after a cancellation in measured step 1,
// spans of step 0 are complete and step 1's root span carries the error.
func TestRunCancelFlushesPartialStep(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tp, rec := exectest.NewRecorder()
	b := exectest.New(exectest.WithFailure(func(rank, step int, op *model.Op) error {
		if rank == 0 && step == 1 && op.ID == "L00.moe.experts" {
			cancel()
		}
		return nil
	}))
	s := exectest.Schedule(2, 1)
	res, err := exec.Run(ctx, s, b, exec.WithTracerProvider(tp), exec.WithSteps(3), exec.WithWarmup(0))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if res.Steps != 1 {
		t.Errorf("completed steps %d, want 1", res.Steps)
	}
	var roots, errRoots, step1Ops int
	for _, sp := range rec.Ended() {
		a := attrMap(sp.Attributes())
		if sp.Name() == schema.SpanStep {
			roots++
			if sp.Status().Code == codes.Error {
				errRoots++
				if a[schema.AttrStep].AsInt64() != 1 {
					t.Errorf("errored root is step %d, want 1", a[schema.AttrStep].AsInt64())
				}
			}
		}
	}
	// Rank 0 cancelled while running its 4th op (index 3), after which it stops;
	// the finished ops of the partial step still get spans. Count them from
	// the partial trace: all spans not in a complete step.
	total := len(rec.Ended())
	step1Ops = total - (1 + 2 + 2*len(s.Ranks[0])) - 1 - 2 // minus step 0, minus step 1 root and rank spans
	if roots != 2 || errRoots != 1 {
		t.Errorf("roots %d (errored %d), want 2 (1)", roots, errRoots)
	}
	if step1Ops < 1 || step1Ops > 2*len(s.Ranks[0]) {
		t.Errorf("partial step has %d op spans, want 1..%d", step1Ops, 2*len(s.Ranks[0]))
	}
	_ = tp.Shutdown(context.Background())
}

// TestRunBackendIgnoringCancel: a backend stuck in a collective after a
// peer failed is reported once the cleanup timeout passes.
func TestRunBackendIgnoringCancel(t *testing.T) {
	release := make(chan struct{})
	defer goleak.VerifyNone(t)
	b := exectest.New(exectest.WithIgnoreCancel(release), exectest.WithFailure(func(rank, step int, op *model.Op) error {
		if rank == 1 && op.ID == "L00.attn.core" {
			time.Sleep(20 * time.Millisecond) // let rank 0 enter the all-reduce first
			return errors.New("boom")
		}
		return nil
	}))
	_, err := exec.Run(context.Background(), exectest.Schedule(2, 1), b, exec.WithCleanupTimeout(50*time.Millisecond), exec.WithSteps(1), exec.WithWarmup(0))
	if err == nil || !strings.Contains(err.Error(), "did not stop within 50ms") {
		t.Errorf("err = %v, want a cleanup-timeout error", err)
	}
	close(release)
	// Let the released goroutine finish its Close before the leak check.
	deadline := time.Now().Add(5 * time.Second)
	for b.RanksClosed.Load() != b.RanksOpened.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

func TestRunLocalRanks(t *testing.T) {
	tp, rec := exectest.NewRecorder()
	// Rank 1 of a TP-2 schedule run alone: its collectives have one local member.
	res, err := exec.Run(context.Background(), exectest.Schedule(2, 1), exectest.New(), exec.WithTracerProvider(tp), exec.WithLocalRanks(1), exec.WithSteps(2), exec.WithWarmup(0))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.LocalRanks) != 1 || res.LocalRanks[0] != 1 {
		t.Errorf("LocalRanks %v", res.LocalRanks)
	}
	for _, sp := range rec.Ended() {
		if r, ok := schema.ParseRankSpanName(sp.Name()); ok && r != 1 {
			t.Errorf("span %s for a rank not run", sp.Name())
		}
	}
	if got, want := len(rec.Ended()), 2*(1+1+5); got != want {
		t.Errorf("%d spans, want %d", got, want)
	}
}

func TestRunThreadLock(t *testing.T) {
	var ok atomic.Bool
	_, err := exec.Run(context.Background(), exectest.Schedule(2, 1), exectest.New(exectest.WithThreadLock()), exec.WithSteps(1))
	ok.Store(err == nil)
	if !ok.Load() {
		t.Fatal(err)
	}
}

func TestRunBadInput(t *testing.T) {
	s := exectest.Schedule(2, 1)
	for _, tc := range []struct {
		name string
		opts []exec.Option
		want string
	}{
		{"steps=0", []exec.Option{exec.WithSteps(0)}, "steps = 0: want at least 1"},
		{"warmup=-1", []exec.Option{exec.WithWarmup(-1)}, "warmup = -1: want 0 or more"},
		{"scale=0.5", []exec.Option{exec.WithScheduleScale(0.5)}, "schedule scale = 0.5"},
		{"local=out-of-range", []exec.Option{exec.WithLocalRanks(0, 2)}, "local rank 2: schedule has ranks 0..1"},
		{"local=unsorted", []exec.Option{exec.WithLocalRanks(1, 0)}, "want ascending"},
		{"timeout=0", []exec.Option{exec.WithCleanupTimeout(0)}, "cleanup timeout = 0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := exec.Run(context.Background(), s, exectest.New(), tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestValidateSchedule(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(s *model.Schedule)
		want   string
	}{
		{"ok", func(*model.Schedule) {}, ""},
		{"rank-field", func(s *model.Schedule) { s.Ranks[1][0].Rank = 0 }, "rank 1 op 0 (L00.attn.q_proj): field Rank = 0, want 1"},
		{"duplicate-id", func(s *model.Schedule) { s.Ranks[0][1].ID = s.Ranks[0][0].ID }, "duplicate op ID"},
		{"forward-dep", func(s *model.Schedule) { s.Ranks[0][1].Deps = []int{3} }, "Deps entry 3: want an earlier op index in 0..0"},
		{"group-without-self", func(s *model.Schedule) { s.Ranks[0][2].Group = []int{1} }, "does not contain the rank"},
		{"group-unsorted", func(s *model.Schedule) { s.Ranks[0][2].Group = []int{1, 0} }, "want ascending ranks"},
		{"missing-peer", func(s *model.Schedule) { s.Ranks[1][2].ID = "L00.attn.allreduce2" }, "group member rank 1 has no collective with this ID"},
		{"kind-mismatch", func(s *model.Schedule) { s.Ranks[1][2].Collective = model.AllGather }, "rank 0 has allreduce over [0 1], rank 1 has allgather"},
		{"order-mismatch", func(s *model.Schedule) {
			r := s.Ranks[1]
			r[2], r[4] = r[4], r[2]
		}, "ranks 0 and 1 meet collectives in different orders"},
		{"no-ranks", func(s *model.Schedule) { s.Ranks = nil }, "no ranks"},
		{"moe-no-shape", func(s *model.Schedule) { s.Ranks[0][3].MoE = nil }, "(L00.moe.experts): moe_gemm without its routing shape"},
		{"moe-batch", func(s *model.Schedule) { s.Ranks[1][3].Batch = 8 }, "rank 1 op 3 (L00.moe.experts): grouped GEMM M = 2, Batch = 8"},
		{"moe-shape", func(s *model.Schedule) {
			m := *s.Ranks[0][3].MoE
			m.ExpertsTouched++
			s.Ranks[0][3].MoE = &m
		}, "moe: experts_touched"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := exectest.Schedule(2, 1)
			tc.break_(s)
			err := exec.ValidateSchedule(s)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("unexpected error %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func init() {
	exec.RegisterBackend("exectest-registry", func(cfg exec.BackendConfig) (exec.Backend, error) {
		if cfg.Seed < 0 {
			return nil, errors.New("libfake.so not found; set FAKE_LIBS")
		}
		return exectest.New(), nil
	})
}

func TestRegistry(t *testing.T) {
	if _, err := exec.NewBackend("exectest-registry", exec.BackendConfig{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := exec.NewBackend("exectest-registry", exec.BackendConfig{Seed: -1})
	if err == nil || err.Error() != "backend exectest-registry: libfake.so not found; set FAKE_LIBS" {
		t.Errorf("factory error = %v", err)
	}
	_, err = exec.NewBackend("nope", exec.BackendConfig{})
	if err == nil || !strings.Contains(err.Error(), `backend "nope" is not available in this build`) || !strings.Contains(err.Error(), "exectest-registry") {
		t.Errorf("unknown backend error = %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("second RegisterBackend of one name did not panic")
		}
	}()
	exec.RegisterBackend("exectest-registry", func(exec.BackendConfig) (exec.Backend, error) { return nil, nil })
}
