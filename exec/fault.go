package exec

import (
	"context"
	"fmt"
	"time"

	"github.com/tpscope/tpscope/model"
)

// Fault is a failure the runner injects on purpose, to check that a run
// with a missing peer ends everywhere with an error instead of hanging:
// rank Rank stalls where it would issue op OpID -- it never enters that
// collective -- in the first step at or after Step (0-based, warm-up steps
// included; in CUDA-graph mode a step at or after the warm-up stalls in the
// capture). Its peers wait inside the collective until the backend's
// watchdog (WithWatchdog) ends their wait with an error, which ends the run
// and so the stalled rank's wait.
//
// Hold bounds the stall: when it passes and nothing has ended the run, the
// stalled rank fails the run itself with an error saying that no watchdog
// fired (so a backend without one cannot hang the test, and a multi-process
// launch, whose stalled process no peer can cancel, still ends). Zero:
// the stall lasts until the run ends.
type Fault struct {
	Rank int
	OpID string
	Step int
	Hold time.Duration
}

// String is the fault in words, for logs.
func (f Fault) String() string {
	s := fmt.Sprintf("rank %d never issues op %s (from step %d)", f.Rank, f.OpID, f.Step)
	if f.Hold > 0 {
		s += fmt.Sprintf(", for at most %v", f.Hold)
	}
	return s
}

// WithFault injects f into the run (see Fault). Run refuses a fault whose
// rank is not local, whose op is not one of that rank's collectives with
// at least one peer, or whose Step or Hold is negative. Default: none.
func WithFault(f Fault) Option {
	return func(c *config) { c.fault = &f }
}

// WithWatchdog bounds how long a rank waits for its peers before the
// backend gives up and ends the run with an error naming the wait
// (SessionConfig.Watchdog): exec/cpu bounds each wait inside a collective,
// exec/cuda a step with NCCL work (then it aborts the communicators) and
// the communicator set-up. It must exceed the longest legitimate wait: the
// slowest peer's work before the collective. Default 0: the backend's own
// (exec/cpu DefaultWatchdog, exec/cuda DefaultWatchdog).
func WithWatchdog(d time.Duration) Option { return func(c *config) { c.watchdog = d } }

// Check reports whether Run can inject f into a run of s on localRanks
// (nil: every rank of s), the same check Run makes, for a caller that
// wants to refuse a bad fault before any other work.
func (f Fault) Check(s *model.Schedule, localRanks []int) error {
	if s == nil {
		return &FaultError{Msg: "with no schedule"}
	}
	if localRanks == nil {
		localRanks = make([]int, len(s.Ranks))
		for r := range localRanks {
			localRanks[r] = r
		}
	}
	_, err := checkFault(&f, s, localRanks)
	return err
}

// FaultError is a Fault that cannot be injected into a run. Msg says
// why without the "exec options: fault " Error prefixes, for a caller
// that names its own flag instead.
type FaultError struct{ Msg string }

func (e *FaultError) Error() string { return "exec options: fault " + e.Msg }

func faultErrorf(format string, a ...any) error {
	return &FaultError{Msg: fmt.Sprintf(format, a...)}
}

// checkFault validates the configured fault against the schedule and the
// local ranks and returns the index of the faulted op in its rank's list.
func checkFault(f *Fault, s *model.Schedule, local []int) (int, error) {
	if f.Step < 0 || f.Hold < 0 {
		return 0, faultErrorf("step %d, hold %v: want both >= 0", f.Step, f.Hold)
	}
	isLocal := false
	for _, r := range local {
		isLocal = isLocal || r == f.Rank
	}
	if !isLocal || f.Rank >= len(s.Ranks) {
		return 0, faultErrorf("rank %d: not a rank this run executes (local ranks %v)", f.Rank, local)
	}
	for i := range s.Ranks[f.Rank] {
		op := &s.Ranks[f.Rank][i]
		if op.ID != f.OpID {
			continue
		}
		if !op.IsCollective() || len(op.Group) < 2 {
			return 0, faultErrorf("op %s on rank %d is a %s over %d rank(s): want a collective with peers (only they notice a rank that never arrives)",
				op.ID, f.Rank, op.Kind, max(1, len(op.Group)))
		}
		return i, nil
	}
	return 0, faultErrorf("op %q: rank %d has no op with that ID", f.OpID, f.Rank)
}

// stall is the faulted rank's stand-in for issuing op i: it waits until
// the run ends (a peer's watchdog error, a cancellation) or the fault's
// Hold passes.
func (r *runner) stall(ctx context.Context, rs *rankState, step, i int) error {
	rs.faultOp = -1 // once
	var hold <-chan time.Time
	if d := r.cfg.fault.Hold; d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		hold = t.C
	}
	select {
	case <-ctx.Done():
		return fmt.Errorf("rank %d step %d op %s: injected fault (never issued): %w", rs.rank, step, rs.ops[i].ID, context.Cause(ctx))
	case <-hold:
		return fmt.Errorf("rank %d step %d op %s: injected fault: the rank held the op back for %v and no watchdog ended the run",
			rs.rank, step, rs.ops[i].ID, r.cfg.fault.Hold)
	}
}
