package sim

import (
	"math"

	"github.com/tpscope/tpscope/model"
)

// costMemo remembers compute costs within one prediction: a decode step
// repeats the same op shapes in every layer, and pricing an op costs more
// than recognizing a repeat. Direct-mapped by a hash of the cost fields;
// a hit is confirmed with sameCost, so a collision only costs a miss.
type costMemo struct {
	op   [costMemoSize]*model.Op
	cost [costMemoSize]OpCost
}

const costMemoSize = 256 // power of two

func (m *costMemo) clear() { clear(m.op[:]) }

func costHash(op *model.Op) uint64 {
	h := math.Float64bits(op.FLOPs)*0x9E3779B97F4A7C15 ^ math.Float64bits(op.BytesRead)*0xC2B2AE3D27D4EB4F ^
		uint64(op.N)*0x165667B19E3779F9 ^ uint64(op.M)<<17 ^ uint64(len(op.Kind))<<7 ^ uint64(len(op.WeightDtype))
	return (h ^ h>>29) & (costMemoSize - 1)
}

// get returns the memoized cost of an op with op's cost fields.
func (m *costMemo) get(op *model.Op) (OpCost, uint64, bool) {
	h := costHash(op)
	if o := m.op[h]; o != nil && sameCost(o, op) {
		return m.cost[h], h, true
	}
	return OpCost{}, h, false
}

func (m *costMemo) put(h uint64, op *model.Op, c OpCost) {
	m.op[h], m.cost[h] = op, c
}
