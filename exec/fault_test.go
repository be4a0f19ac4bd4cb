package exec_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/exectest"
	"github.com/tpscope/tpscope/model"
)

// TestFaultHoldEndsRunWithoutWatchdog: the fake backend's collectives wait
// for their peers as long as ctx lives (no watchdog), so with rank 1
// stalling before L01.attn.allreduce nothing but the fault's Hold can end
// the run: it must, with the fault's own error (which says that no
// watchdog fired), every rank closed, no goroutine left. In graph mode the
// stall happens in the capture and the peers wait inside the replay.
func TestFaultHoldEndsRunWithoutWatchdog(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []exectest.Option
		graphs bool
		step   int
	}{
		{"eager/step=0", nil, false, 0},
		{"eager/step=3", nil, false, 3},
		{"graphs", []exectest.Option{exectest.WithGraphs()}, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			s := exectest.Schedule(4, 2)
			b := exectest.New(tc.opts...)
			const hold = 100 * time.Millisecond
			res, err := exec.Run(context.Background(), s, b, exec.WithSteps(5), exec.WithWarmup(1), exec.WithGraphs(tc.graphs),
				exec.WithFault(exec.Fault{Rank: 1, OpID: "L01.attn.allreduce", Step: tc.step, Hold: hold}))
			if err == nil {
				t.Fatal("run with a stalled rank succeeded")
			}
			for _, want := range []string{"rank 1 step", "op L01.attn.allreduce: injected fault", "no watchdog ended the run"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if got, want := b.RanksClosed.Load(), int32(4); got != want {
				t.Errorf("%d ranks closed, want %d", got, want)
			}
			if got, want := b.RanksAborted.Load(), int32(4); got != want {
				t.Errorf("%d ranks aborted before Close, want %d (the run failed)", got, want)
			}
			// Steps before the faulted one complete (warm-up 1: step 3 is
			// measured step 2, so two measured steps finish first).
			if want := max(0, tc.step-1); !tc.graphs && res.Steps != want {
				t.Errorf("%d measured steps completed, want %d", res.Steps, want)
			}
		})
	}
}

// TestFaultRefused: a fault the runner cannot inject meaningfully is an
// option error before anything runs.
func TestFaultRefused(t *testing.T) {
	s := exectest.Schedule(2, 1)
	for _, tc := range []struct {
		name  string
		fault exec.Fault
		local []int
		want  string
	}{
		{"unknown op", exec.Fault{Rank: 0, OpID: "L09.attn.allreduce"}, nil, `fault op "L09.attn.allreduce": rank 0 has no op with that ID`},
		{"not a collective", exec.Fault{Rank: 1, OpID: "L00.attn.q_proj"}, nil, "fault op L00.attn.q_proj on rank 1 is a gemm over 1 rank(s): want a collective with peers"},
		{"rank not local", exec.Fault{Rank: 1, OpID: "L00.attn.allreduce"}, []int{0}, "fault rank 1: not a rank this run executes (local ranks [0])"},
		{"negative step", exec.Fault{Rank: 0, OpID: "L00.attn.allreduce", Step: -1}, nil, "fault step -1, hold 0s: want both >= 0"},
		{"negative hold", exec.Fault{Rank: 0, OpID: "L00.attn.allreduce", Hold: -time.Second}, nil, "fault step 0, hold -1s: want both >= 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := exectest.New()
			opts := []exec.Option{exec.WithFault(tc.fault)}
			if tc.local != nil {
				opts = append(opts, exec.WithLocalRanks(tc.local...))
			}
			_, err := exec.Run(context.Background(), s, b, opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if b.Opened.Load() != 0 {
				t.Errorf("backend opened despite the bad fault")
			}
		})
	}
	if _, err := exec.Run(context.Background(), s, exectest.New(), exec.WithSteps(2), exec.WithWarmup(1),
		exec.WithFault(exec.Fault{Rank: 0, OpID: "L00.attn.allreduce", Step: 3})); err == nil || !strings.Contains(err.Error(), "fault step 3: the run has 3 steps") {
		t.Errorf("fault after the last step: err = %v", err)
	}
	if _, err := exec.Run(context.Background(), s, exectest.New(), exec.WithWatchdog(-time.Second)); err == nil || !strings.Contains(err.Error(), "watchdog = -1s: want > 0, or 0 for the backend's default") {
		t.Errorf("negative watchdog: err = %v", err)
	}
}

// TestWatchdogReachesBackend: WithWatchdog is handed to the backend in
// SessionConfig.Watchdog (0 when not set: the backend's default).
func TestWatchdogReachesBackend(t *testing.T) {
	for _, d := range []time.Duration{0, 1500 * time.Millisecond} {
		var got time.Duration
		spy := &configSpy{Backend: exectest.New(), seen: func(c exec.SessionConfig) { got = c.Watchdog }}
		opts := []exec.Option{exec.WithSteps(1), exec.WithWarmup(0)}
		if d > 0 {
			opts = append(opts, exec.WithWatchdog(d))
		}
		if _, err := exec.Run(context.Background(), exectest.Schedule(2, 1), spy, opts...); err != nil {
			t.Fatal(err)
		}
		if got != d {
			t.Errorf("WithWatchdog(%v): backend saw %v", d, got)
		}
	}
}

type configSpy struct {
	*exectest.Backend
	seen func(exec.SessionConfig)
}

func (c *configSpy) Open(ctx context.Context, s *model.Schedule, cfg exec.SessionConfig) (exec.Session, error) {
	c.seen(cfg)
	return c.Backend.Open(ctx, s, cfg)
}

// TestSessionFailEndsRun: SessionConfig.Fail (a backend watchdog that fires
// while its rank is blocked where the runner cannot reach) ends the run with
// its error, every rank closed and aborted; called before the run starts
// (from Open), it ends the run as soon as it starts.
func TestSessionFailEndsRun(t *testing.T) {
	errWatch := errors.New("cuda rank 1: NCCL communicator aborted: the step did not finish within 10s (watchdog)")
	for _, early := range []bool{false, true} {
		t.Run(map[bool]string{false: "during a step", true: "from Open"}[early], func(t *testing.T) {
			defer goleak.VerifyNone(t)
			var fail func(error)
			b := exectest.New(exectest.WithFailure(func(rank, step int, op *model.Op) error {
				if !early && rank == 1 && step == 2 && op.ID == "L00.attn.core" {
					// From the backend's own goroutine, as a timer would;
					// the rank goes on only once it has fired, so the run
					// cannot end first on a slow machine.
					fired := make(chan struct{})
					go func() {
						fail(errWatch)
						close(fired)
					}()
					<-fired
				}
				return nil
			}))
			spy := &configSpy{Backend: b, seen: func(c exec.SessionConfig) {
				fail = c.Fail
				if early {
					c.Fail(errWatch)
				}
			}}
			_, err := exec.Run(context.Background(), exectest.Schedule(2, 1), spy, exec.WithSteps(4), exec.WithWarmup(1))
			if !errors.Is(err, errWatch) {
				t.Fatalf("run error %v, want it to wrap the backend's %v", err, errWatch)
			}
			if b.RanksClosed.Load() != b.RanksOpened.Load() || b.RanksAborted.Load() != b.RanksOpened.Load() {
				t.Errorf("ranks opened %d, closed %d, aborted %d", b.RanksOpened.Load(), b.RanksClosed.Load(), b.RanksAborted.Load())
			}
		})
	}
}
