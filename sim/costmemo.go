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

const (
	costMemoBits = 9
	costMemoSize = 1 << costMemoBits
)

func (m *costMemo) clear() { clear(m.op[:]) }

func costHash(op *model.Op) uint64 {
	x := math.Float64bits(op.FLOPs)
	x = (x ^ x>>31) * 0xBF58476D1CE4E5B9
	x ^= math.Float64bits(op.BytesRead) + 0x9E3779B97F4A7C15
	x = (x ^ x>>27) * 0x94D049BB133111EB
	x ^= uint64(op.M)<<32 ^ uint64(op.N) ^ uint64(op.K)<<48 ^ uint64(len(op.Kind))<<20 ^ uint64(len(op.WeightDtype))<<24
	x = (x ^ x>>31) * 0x9E3779B97F4A7C15
	return x >> (64 - costMemoBits)
}

// get returns the memoized cost of an op with op's cost fields; named:
// it must also share their role and name (a cost source may price an op
// by what it is, e.g. a member of an MLA module, not only by its shape;
// an op not made by model's builder may have a name and no role).
// Two-way set associative: slots h and h^1.
func (m *costMemo) get(op *model.Op, named bool) (*OpCost, uint64) {
	h := costHash(op)
	if o := m.op[h]; o != nil && sameCost(o, op) && (!named || sameRole(o, op)) {
		return &m.cost[h], h
	}
	if o := m.op[h^1]; o != nil && sameCost(o, op) && (!named || sameRole(o, op)) {
		return &m.cost[h^1], h
	}
	return nil, h
}

// sameRole: a and b are the same op of their layers to a cost source.
func sameRole(a, b *model.Op) bool { return a.Role == b.Role && a.Name == b.Name }

func (m *costMemo) put(h uint64, op *model.Op, c OpCost) {
	if m.op[h] != nil {
		h ^= 1
	}
	m.op[h], m.cost[h] = op, c
}
