// Package collbench times collectives through the executor by message
// size, the way nccl-tests times NCCL, so the executor's collectives can be
// set beside nccl-tests, a PyTorch harness and sim's prediction.
//
// The schedule is synthetic: one step holds, for every size in increasing
// order, Iters back-to-back ops of one collective over all ranks (op IDs
// bench.<collective>_<bytes>B_i<k>). exec.Run runs it on any backend --
// warm-up steps, then measured steps, CUDA-graph capture when asked -- and
// each op is timed by the backend's clock: device events around the op on
// exec/cuda, the host clock on exec/cpu (goroutine ranks). A size's time is
// the mean over measured steps, iterations and ranks, which is what
// nccl-tests reports by default (-a 1: the mean iteration time, averaged
// over ranks); its spread is given as the fastest and slowest sample, a
// sample being one (step, iteration) averaged over ranks.
//
// Sizes follow nccl-tests' conventions (all-reduce: the buffer; all-gather:
// the gathered output; reduce-scatter: the input; all-to-all: one rank's
// send buffer) and are rounded down to a multiple of 4 bytes per rank, so
// every backend moves exactly the bytes reported. Units: bytes,
// microseconds.
package collbench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/model"
)

// DefaultIters is the number of ops per size and step when Config.Iters is
// zero.
const DefaultIters = 5

// Config says what to time. The zero value of Iters means DefaultIters.
type Config struct {
	Op    model.Collective // allreduce, allgather, reducescatter or alltoall
	Ranks int              // ranks taking part: all of the schedule's (>= 2)
	Sizes []int64          // bytes, nccl-tests' convention
	Iters int              // back-to-back ops per size and step
}

// Row is one size's timing.
type Row struct {
	Bytes   int64   `json:"bytes"`   // as run (rounded down to 4 bytes per rank)
	TimeUs  float64 `json:"time_us"` // mean over steps, iterations and ranks
	MinUs   float64 `json:"min_us"`  // fastest sample (one step and iteration, mean over ranks)
	MaxUs   float64 `json:"max_us"`  // slowest sample
	Samples int     `json:"samples"` // measured steps x iterations
}

// Result is what Measure measured.
type Result struct {
	Config Config       `json:"config"`
	Rows   []Row        `json:"rows"`
	Run    *exec.Result `json:"-"` // the runner's result (per-op times, step summary)
}

// ConfigError is a Config that cannot be benchmarked (a collective,
// rank count, iteration count or size out of range). Msg says which
// without the "collbench: " Error prefixes, for a caller that names its
// own flags instead.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return "collbench: " + e.Msg }

// MaxRanks bounds a measured group's ranks (goroutine ranks on the cpu
// backend are bounded by nothing else).
const MaxRanks = 1 << 12

func configErrorf(format string, a ...any) error {
	return &ConfigError{Msg: fmt.Sprintf(format, a...)}
}

// normalize checks cfg and returns the sizes as run: rounded down to a
// multiple of 4 bytes per rank, ascending, without repeats.
func (cfg *Config) normalize() ([]int64, error) {
	switch cfg.Op {
	case model.AllReduce, model.AllGather, model.ReduceScatter, model.AllToAll:
	default:
		return nil, configErrorf("collective %q: want allreduce, allgather, reducescatter or alltoall", cfg.Op)
	}
	if cfg.Ranks < 2 || cfg.Ranks > MaxRanks {
		return nil, configErrorf("%d ranks: want 2..%d (a collective needs peers)", cfg.Ranks, MaxRanks)
	}
	if cfg.Iters == 0 {
		cfg.Iters = DefaultIters
	}
	if cfg.Iters < 1 || cfg.Iters > 1000 {
		return nil, configErrorf("%d iterations: want 1..1000", cfg.Iters)
	}
	if len(cfg.Sizes) == 0 {
		return nil, configErrorf("no sizes")
	}
	unit := int64(4 * cfg.Ranks)
	var sizes []int64
	for _, b := range cfg.Sizes {
		if b < unit || b > 1<<40 {
			return nil, configErrorf("size %d B: want %d B (4 bytes per rank) to 1 TiB", b, unit)
		}
		sizes = append(sizes, b/unit*unit)
	}
	slices.Sort(sizes)
	return slices.Compact(sizes), nil
}

// Schedule builds the synthetic schedule of cfg (see the package doc) and
// returns it with the sizes as run.
func Schedule(cfg Config) (*model.Schedule, []int64, error) {
	sizes, err := cfg.normalize()
	if err != nil {
		return nil, nil, err
	}
	group := make([]int, cfg.Ranks)
	for r := range group {
		group[r] = r
	}
	s := &model.Schedule{
		Model:    "collbench-" + string(cfg.Op),
		Plan:     model.Plan{TP: cfg.Ranks},
		Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 1},
		Ranks:    make([][]model.Op, cfg.Ranks),
	}
	for r := range s.Ranks {
		ops := make([]model.Op, 0, len(sizes)*cfg.Iters)
		for _, b := range sizes {
			for k := range cfg.Iters {
				name := fmt.Sprintf("%s_%dB_i%02d", cfg.Op, b, k)
				ops = append(ops, model.Op{
					ID: "bench." + name, Kind: model.KindCollective, Layer: -1, Block: "bench", Name: name, Rank: r,
					ActDtype: model.BF16, BytesRead: float64(b), BytesWritten: float64(b),
					Collective: cfg.Op, CommBytes: b, Group: slices.Clone(group),
				})
			}
		}
		s.Ranks[r] = ops
	}
	return s, sizes, nil
}

// Measure builds cfg's schedule, runs it on backend with opts (steps,
// warm-up, graphs, watchdog, ...) and returns each size's timing. Every
// rank must run in this process (no WithLocalRanks subset): a collective
// with a member elsewhere is skipped by the backends, not timed. On a run
// error the Result holds what the completed measured steps give (nil when
// none completed).
func Measure(ctx context.Context, backend exec.Backend, cfg Config, opts ...exec.Option) (*Result, error) {
	if _, err := cfg.normalize(); err != nil { // sets the default Iters
		return nil, err
	}
	s, sizes, err := Schedule(cfg)
	if err != nil {
		return nil, err
	}
	run, runErr := exec.Run(ctx, s, backend, opts...)
	if run == nil {
		return nil, runErr
	}
	if len(run.LocalRanks) != cfg.Ranks {
		return nil, errors.Join(runErr, fmt.Errorf("collbench: %d of %d ranks ran in this process: every rank must, or the collectives are skipped", len(run.LocalRanks), cfg.Ranks))
	}
	if run.Steps == 0 {
		return nil, runErr
	}
	res := &Result{Config: cfg, Run: run, Rows: make([]Row, len(sizes))}
	res.Config.Sizes = sizes
	for j, b := range sizes {
		row := Row{Bytes: b, MinUs: math.Inf(1), MaxUs: math.Inf(-1)}
		sum := 0.0
		for st := range run.OpUs {
			for k := range cfg.Iters {
				i := j*cfg.Iters + k
				v := 0.0
				for r := range run.OpUs[st] {
					v += run.OpUs[st][r][i]
				}
				v /= float64(len(run.OpUs[st]))
				sum += v
				row.MinUs, row.MaxUs = min(row.MinUs, v), max(row.MaxUs, v)
				row.Samples++
			}
		}
		row.TimeUs = sum / float64(row.Samples)
		res.Rows[j] = row
	}
	return res, runErr
}
