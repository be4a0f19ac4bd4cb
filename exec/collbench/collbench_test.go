package collbench_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/collbench"
	"github.com/tpscope/tpscope/exec/cpu"
	"github.com/tpscope/tpscope/exec/exectest"
	"github.com/tpscope/tpscope/model"
)

// TestBenchSchedule: one op per size and iteration on every rank, sizes rounded
// down to 4 bytes per rank (3 ranks: multiples of 12, so 512 -> 504 and
// 1000 -> 996; 513 also -> 504 and is run once), ascending, and a schedule
// the runner accepts.
func TestBenchSchedule(t *testing.T) {
	s, sizes, err := collbench.Schedule(collbench.Config{Op: model.AllGather, Ranks: 3, Sizes: []int64{1000, 512, 513}, Iters: 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{504, 996}; !slices.Equal(sizes, want) {
		t.Fatalf("sizes %v, want %v", sizes, want)
	}
	if err := exec.ValidateSchedule(s); err != nil {
		t.Fatal(err)
	}
	for r, ops := range s.Ranks {
		if len(ops) != 4 {
			t.Fatalf("rank %d: %d ops, want 2 sizes x 2 iterations", r, len(ops))
		}
		want := []string{"bench.allgather_504B_i00", "bench.allgather_504B_i01", "bench.allgather_996B_i00", "bench.allgather_996B_i01"}
		for i, op := range ops {
			if op.ID != want[i] || op.Kind != model.KindCollective || op.Collective != model.AllGather || op.CommBytes != sizes[i/2] || len(op.Group) != 3 {
				t.Errorf("rank %d op %d: %+v", r, i, op)
			}
		}
	}
	for _, bad := range []struct {
		cfg  collbench.Config
		want string
	}{
		{collbench.Config{Op: "broadcast", Ranks: 2, Sizes: []int64{512}}, `collective "broadcast"`},
		{collbench.Config{Op: model.AllReduce, Ranks: 1, Sizes: []int64{512}}, "1 ranks: want 2..4096"},
		{collbench.Config{Op: model.AllReduce, Ranks: 2, Sizes: []int64{4}}, "size 4 B: want 8 B"},
		{collbench.Config{Op: model.AllReduce, Ranks: 2}, "no sizes"},
		{collbench.Config{Op: model.AllReduce, Ranks: 2, Sizes: []int64{512}, Iters: -1}, "-1 iterations"},
	} {
		if _, _, err := collbench.Schedule(bad.cfg); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%+v: err = %v, want %q", bad.cfg, err, bad.want)
		}
	}
}

// TestBenchMeasureAverages: on the fake backend's virtual device clock an op
// takes exactly the delay it is given. With rank r taking (r+1) x bytes /
// 512 microseconds, a size's time is the mean over the 4 ranks, 2.5 x
// bytes / 512 us, the same in every sample (so min = mean = max), over
// steps x iterations = 3 x 4 samples.
func TestBenchMeasureAverages(t *testing.T) {
	defer goleak.VerifyNone(t)
	b := exectest.New(exectest.WithDeviceTimes(), exectest.WithDelay(func(rank int, op *model.Op) time.Duration {
		return time.Duration(rank+1) * time.Duration(op.CommBytes) * time.Microsecond / 512
	}))
	res, err := collbench.Measure(context.Background(), b, collbench.Config{Op: model.AllReduce, Ranks: 4, Sizes: []int64{512, 2048, 8192}, Iters: 4},
		exec.WithSteps(3), exec.WithWarmup(1))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 3 {
		t.Fatalf("%d rows, want 3", len(res.Rows))
	}
	for _, row := range res.Rows {
		want := 2.5 * float64(row.Bytes) / 512
		for name, got := range map[string]float64{"mean": row.TimeUs, "min": row.MinUs, "max": row.MaxUs} {
			if math.Abs(got-want) > 1e-3 {
				t.Errorf("%d B: %s %.4f us, want %.4f", row.Bytes, name, got, want)
			}
		}
		if row.Samples != 12 {
			t.Errorf("%d B: %d samples, want 12", row.Bytes, row.Samples)
		}
	}
}

// TestBenchMeasureCPU runs every collective through the CPU backend's ring
// (results checked against a serial sum after each step) on 4 goroutine
// ranks: every size gets a positive time within its own spread, and the
// largest size (1 MiB) takes longer than the smallest (512 B) since it
// moves 2048 times the bytes.
func TestBenchMeasureCPU(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, op := range []model.Collective{model.AllReduce, model.AllGather, model.ReduceScatter, model.AllToAll} {
		t.Run(fmt.Sprintf("op=%s", op), func(t *testing.T) {
			res, err := collbench.Measure(context.Background(), cpu.New(), collbench.Config{Op: op, Ranks: 4, Sizes: []int64{512, 4096, 1 << 20}, Iters: 3},
				exec.WithSteps(4), exec.WithWarmup(1))
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range res.Rows {
				if !(row.TimeUs > 0) || row.MinUs > row.TimeUs || row.TimeUs > row.MaxUs || row.Samples != 12 {
					t.Errorf("%d B: %+v", row.Bytes, row)
				}
			}
			if first, last := res.Rows[0], res.Rows[len(res.Rows)-1]; !(last.MinUs > first.MinUs) {
				t.Errorf("1 MiB fastest %.2f us is not above 512 B fastest %.2f us", last.MinUs, first.MinUs)
			}
		})
	}
}

// TestBenchMeasureNeedsEveryRank: with only rank 0 in this process the CPU
// backend would skip the collectives; Measure refuses the result.
func TestBenchMeasureNeedsEveryRank(t *testing.T) {
	_, err := collbench.Measure(context.Background(), cpu.New(), collbench.Config{Op: model.AllReduce, Ranks: 2, Sizes: []int64{512}},
		exec.WithSteps(1), exec.WithWarmup(0), exec.WithLocalRanks(0))
	if err == nil || !strings.Contains(err.Error(), "1 of 2 ranks ran in this process") {
		t.Errorf("err = %v", err)
	}
}
