package pipeline

import (
	"context"
	"errors"
	"time"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/collbench"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/sim"
)

// CollectiveSpec is one collective timed by size through the executor
// (exec/collbench), as tpscope collective --measure runs it. The zero
// value of a field is its default, as noted.
type CollectiveSpec struct {
	// Backend is a registered backend's name.
	Backend string
	// NCCL are the NCCL settings the collective runs with (BackendConfig).
	NCCL ncclenv.Settings
	// Bench is the collective, its ranks, sizes and iterations.
	Bench collbench.Config
	// Steps is the number of measured steps (0: exec.DefaultSteps); Warmup
	// the warm-up steps before them (0: none).
	Steps, Warmup int
	// Graphs captures one step as a CUDA graph and replays it.
	Graphs bool
	// Watchdog bounds how long a rank waits for its peers (0: the
	// backend's default).
	Watchdog time.Duration
}

// PreparedCollective is a CollectiveSpec with its schedule and backend
// built; nothing has run.
type PreparedCollective struct {
	Spec     CollectiveSpec
	Schedule *model.Schedule
	Backend  exec.Backend
}

// PrepareCollective builds the bench schedule and the backend (seed 1, the
// spec's NCCL settings through BackendConfig).
func PrepareCollective(spec CollectiveSpec) (*PreparedCollective, error) {
	if spec.Backend == "" {
		return nil, errors.New("pipeline: no backend named")
	}
	if spec.Steps == 0 {
		spec.Steps = exec.DefaultSteps
	}
	s, _, err := collbench.Schedule(spec.Bench)
	if err != nil {
		return nil, err
	}
	b, err := exec.NewBackend(spec.Backend, BackendConfig(sim.Scenario{Options: sim.Options{NCCL: spec.NCCL}}, 1))
	if err != nil {
		return nil, err
	}
	return &PreparedCollective{Spec: spec, Schedule: s, Backend: b}, nil
}

// Measure runs the collective in this process (every rank here: a
// collective with a member elsewhere is not timed) and returns each size's
// timing; progress, when set, is called after every step.
func (p *PreparedCollective) Measure(ctx context.Context, progress func(done, total int)) (*collbench.Result, error) {
	opts := []exec.Option{exec.WithSteps(p.Spec.Steps), exec.WithWarmup(p.Spec.Warmup), exec.WithGraphs(p.Spec.Graphs), exec.WithWatchdog(p.Spec.Watchdog)}
	if progress != nil {
		opts = append(opts, exec.WithProgress(progress))
	}
	return collbench.Measure(ctx, p.Backend, p.Spec.Bench, opts...)
}
