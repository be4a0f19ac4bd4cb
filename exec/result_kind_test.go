package exec

import (
	"math"
	"testing"

	"github.com/tpscope/tpscope/model"
)

// A kind's time per step is the median over (measured step, local rank)
// of the kind's summed op times in that step on that rank: the statistic
// compare gives the kind from the run's trace. Two norm ops per rank, by
// hand:
//
//   - one slow rank of four: ranks 0-2 sum 1+1 = 2 us every step, rank 3
//     13+1 = 14 us; the 12 samples are nine 2s and three 14s, median 2
//     (per-op medians summed per rank, then the mean over ranks, said
//     (2+2+2+14)/4 = 5);
//   - one rank, each op slow in another step: a = 1, 1, 10 and b = 10,
//     1, 1 us give step sums 11, 2, 11, median 11 (the per-op medians
//     summed said 1+1 = 2, a step that never ran).
func TestKindTimeIsTheMedianStepSum(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ranks  int
		opUs   [][][]float64 // [step][local rank][op]
		wantUs float64
	}{
		{"slow-rank", 4, [][][]float64{
			{{1, 1}, {1, 1}, {1, 1}, {13, 1}},
			{{1, 1}, {1, 1}, {1, 1}, {13, 1}},
			{{1, 1}, {1, 1}, {1, 1}, {13, 1}},
		}, 2},
		{"ops-slow-in-different-steps", 1, [][][]float64{{{1, 10}}, {{1, 1}}, {{10, 1}}}, 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &model.Schedule{}
			var local []int
			for r := 0; r < tc.ranks; r++ {
				s.Ranks = append(s.Ranks, []model.Op{{ID: "L00.attn.norm", Kind: model.KindNorm, Rank: r}, {ID: "L00.mlp.norm", Kind: model.KindNorm, Rank: r}})
				local = append(local, r)
			}
			res := newResult(s, "fake", local, 0, len(tc.opUs))
			for _, st := range tc.opUs {
				res.StepUs = append(res.StepUs, 100)
				res.OpUs = append(res.OpUs, st)
			}
			res.summarize(s)
			kt := res.Summary.ByKind
			if len(kt) != 1 || kt[0].Kind != model.KindNorm || math.Abs(kt[0].Us-tc.wantUs) > 1e-9 || kt[0].Ops != 2 {
				t.Errorf("by kind %+v, want norm %g us, 2 ops per rank", kt, tc.wantUs)
			}
		})
	}
}
