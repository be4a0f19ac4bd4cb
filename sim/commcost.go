package sim

import "github.com/tpscope/tpscope/model"

// collectiveCoster prices collective calls on one box under one set of
// NCCL options; *CollectiveModel (collective.go) is the implementation.
// Predict calls it once per distinct (op, group, bytes) of a step, from
// one goroutine, with a group of distinct GPUs of the topology; it must be
// deterministic and must not retain group.
type collectiveCoster interface {
	Cost(op model.Collective, group []int, bytes int64) CollectiveCost
}

// customAllReducer is the optional capability of a collective model to
// price a custom all-reduce over P2P (one-shot or two-shot); ok is false
// when P2P is not available between every pair. Without the capability
// every all-reduce is priced as NCCL.
type customAllReducer interface {
	CustomAllReduce(group []int, bytes int64, twoShot bool) (c CollectiveCost, ok bool)
}

// multimemAllReducer is the optional capability of a collective model to
// price torch's symmetric-memory multimem all-reduce; ok is false where
// the group shares no NVSwitch. Without it NCCL carries such an op.
type multimemAllReducer interface {
	MultimemAllReduce(group []int, bytes int64) (c CollectiveCost, ok bool)
}

// collMemo caches collective op costs within one prediction run: a
// decode step repeats the same (op, group, bytes) over 100+ layers, and a
// pricing call costs far more than a lookup. Predictor.run resets it at
// the start of every run, so the linear search only ever scans the
// handful of distinct keys of one step.
type collMemo struct {
	keys []collKey
	vals []OpCost
}

type collKey struct {
	op    model.Collective
	msg   collMsg
	group []int // owned copy
}

// collMsg is what a collective's price depends on besides the call and
// its group: the bytes, and for an all-reduce the tokens they hold and
// whether the norm after it is handed to its kernel (an engine's strategy
// table keys on both).
type collMsg struct {
	bytes, tokens int64
	fused         bool
}

func (m *collMemo) get(op model.Collective, group []int, msg collMsg) (OpCost, bool) {
	for i := range m.keys {
		k := &m.keys[i]
		if k.msg != msg || len(k.group) != len(group) || k.op != op {
			continue
		}
		same := true
		for j, g := range group {
			if k.group[j] != g {
				same = false
				break
			}
		}
		if same {
			return m.vals[i], true
		}
	}
	return OpCost{}, false
}

// reset forgets every key, keeping the arrays (put reuses the group
// copies, so a warmed-up memo does not allocate).
func (m *collMemo) reset() {
	m.keys, m.vals = m.keys[:0], m.vals[:0]
}

func (m *collMemo) put(op model.Collective, group []int, msg collMsg, c OpCost) {
	if len(m.keys) >= 256 { // bound memory for a schedule of many sizes
		m.reset()
	}
	var owned []int
	if n := len(m.keys); n < cap(m.keys) {
		owned = m.keys[:n+1][n].group[:0] // a slot forgotten by reset
	}
	m.keys = append(m.keys, collKey{op: op, msg: msg, group: append(owned, group...)})
	m.vals = append(m.vals, c)
}
