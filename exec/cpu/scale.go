package cpu

import (
	"fmt"
	"math"

	"github.com/tpscope/tpscope/model"
)

// ScaleArch returns a copy of a whose widths are divided by f (>= 1), for
// running a model too big for the machine: hidden size, q/kv LoRA ranks,
// head dims, MLP and expert intermediate sizes, vocab and the DSA indexer
// head dim are divided (rounded; multiples of 16 stay multiples of 16, at
// least 16; the RoPE and nope head dims stay even). Layers, heads, experts, top-k and the quantization are kept,
// so the schedule keeps its structure, op IDs, collectives and routing
// statistics; GEMM FLOPs and weight bytes shrink by about f^2, KV bytes and
// collective bytes by about f.
//
// The choice (scale the model and rebuild, rather than shrink the ops of a
// built schedule) keeps every op consistent with model.Build's formulas, so
// the prediction of the scaled schedule (model.Build on the scaled Arch)
// is exactly comparable with its run. Run records f on the spans with
// exec.WithScheduleScale; measured times are not multiplied by it.
func ScaleArch(a *model.Arch, f float64) (*model.Arch, error) {
	if a == nil {
		return nil, fmt.Errorf("scale: nil architecture")
	}
	if !(f >= 1) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("scale %v: want a finite factor >= 1", f)
	}
	if f == 1 {
		c := *a
		return &c, nil
	}
	// Widths that are multiples of 16 stay multiples of 16 (at least 16)
	// so they still divide by any TP degree up to 16.
	div := func(v int) int {
		switch {
		case v == 0:
			return 0
		case v%16 == 0:
			return max(16, 16*int(math.Round(float64(v)/f/16)))
		}
		return max(1, int(math.Round(float64(v)/f)))
	}
	even := func(v int) int {
		if v == 0 {
			return 0
		}
		return max(2, 2*int(math.Round(float64(v)/f/2)))
	}
	c := *a
	c.Name = fmt.Sprintf("%s@scale=%g", a.Name, f)
	c.Hidden = div(a.Hidden)
	c.QLoraRank = div(a.QLoraRank)
	c.KVLoraRank = div(a.KVLoraRank)
	c.QKNopeHeadDim = even(a.QKNopeHeadDim)
	c.QKRopeHeadDim = even(a.QKRopeHeadDim)
	c.VHeadDim = div(a.VHeadDim)
	c.Intermediate = div(a.Intermediate)
	c.MoEIntermediate = div(a.MoEIntermediate)
	c.Vocab = div(a.Vocab)
	c.IndexHeadDim = even(a.IndexHeadDim)
	return &c, nil
}
