package exec

import (
	"math"
	"testing"

	"github.com/tpscope/tpscope/model"
)

// TestMergeResults: two processes of a 2-rank run, one rank each, give one
// result: ranks in order, the steps both finished, each step the slower
// process's time (rank 0: 100 and 120 us, rank 1: 110 and 90 us -> 110
// and 120), the median of those 115 us, and the op times as measured.
func TestMergeResults(t *testing.T) {
	s := &model.Schedule{Model: "m", Ranks: [][]model.Op{
		{{ID: "a", Kind: model.KindGEMM, Rank: 0}, {ID: "b", Kind: model.KindNorm, Rank: 0}},
		{{ID: "a", Kind: model.KindGEMM, Rank: 1}, {ID: "b", Kind: model.KindNorm, Rank: 1}},
	}}
	part := func(rank int, steps []float64, opUs float64) *Result {
		r := newResult(s, "fake", []int{rank}, 1, 3)
		r.Timing = "device"
		for _, st := range steps {
			r.StepUs = append(r.StepUs, st)
			r.OpUs = append(r.OpUs, [][]float64{{opUs, opUs / 2}})
			r.LaunchUs = append(r.LaunchUs, [][]float64{{1, 1}})
		}
		r.Steps = len(steps)
		return r
	}
	// Rank 1's process finished a third step rank 0's did not.
	got, err := MergeResults(s, part(1, []float64{110, 90, 80}, 20), part(0, []float64{100, 120}, 10))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.LocalRanks) != 2 || got.LocalRanks[0] != 0 || got.LocalRanks[1] != 1 || got.Steps != 2 {
		t.Fatalf("ranks %v, %d steps: want [0 1], 2", got.LocalRanks, got.Steps)
	}
	if got.StepUs[0] != 110 || got.StepUs[1] != 120 || math.Abs(got.Summary.StepMedianUs-115) > 1e-9 {
		t.Errorf("steps %v (median %v), want [110 120] (115)", got.StepUs, got.Summary.StepMedianUs)
	}
	if got.OpUs[1][0][0] != 10 || got.OpUs[1][1][0] != 20 || got.OpUs[0][1][1] != 10 {
		t.Errorf("op times %v: want rank 0's 10/5 and rank 1's 20/10", got.OpUs)
	}
	// A rank in two parts, or parts that disagree on how they ran, do not merge.
	if _, err := MergeResults(s, part(0, []float64{1}, 1), part(0, []float64{1}, 1)); err == nil {
		t.Error("a rank in two parts merged")
	}
	other := part(1, []float64{1}, 1)
	other.Timing = "host"
	if _, err := MergeResults(s, part(0, []float64{1}, 1), other); err == nil {
		t.Error("parts with different timing merged")
	}
}
