package compare

import (
	"math"
	"testing"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/model"
)

// A one-rank shard run never times its collectives (the backend skips
// them): Run shows their predicted time but leaves it out of the
// predicted step. Hand-built: ops gemm 10 us, allreduce 4 us, gemm 6 us
// predicted (step 20 us); measured gemm 12 and 8 us, allreduce 0 in both
// steps, step 20 us. Predicted step without the all-reduce: 16 us,
// error (16 - 20) / 20 = -0.2.
func TestCompareLeavesUntimedOpsOutOfTheStep(t *testing.T) {
	s := &model.Schedule{Ranks: [][]model.Op{{
		{ID: "L00.attn.o_proj", Kind: model.KindGEMM},
		{ID: "L00.attn.allreduce", Kind: model.KindCollective, Collective: model.AllReduce},
		{ID: "L00.moe.down", Kind: model.KindGEMM},
	}}}
	res := &exec.Result{
		LocalRanks: []int{0},
		OpUs:       [][][]float64{{{12, 0, 8}}, {{12, 0, 8}}},
		Summary:    exec.Summary{StepMedianUs: 20, ByKind: []exec.KindTime{{Kind: model.KindGEMM, Us: 20}}},
	}
	pred := map[string]float64{"L00.attn.o_proj": 10, "L00.attn.allreduce": 4, "L00.moe.down": 6}
	c := Run(res, s, pred, 20)
	if c.PredictedStepUs != 16 || math.Abs(c.StepErrPct-(-20)) > 1e-10 {
		t.Errorf("predicted step %v (err %v), want 16 (-20 %%)", c.PredictedStepUs, c.StepErrPct)
	}
	var coll *RunKind
	for i := range c.ByKind {
		if c.ByKind[i].Kind == model.KindCollective {
			coll = &c.ByKind[i]
		}
	}
	if coll == nil || coll.NotRun != 1 || coll.PredictedUs != 4 || !math.IsNaN(coll.ErrPct) {
		t.Errorf("collective row %+v, want 1 not run, 4 us predicted, NaN error", coll)
	}
}
