package sim

import (
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/topology"
)

// TestCollectiveAlgoPerClause: NCCL_ALGO's per-collective clauses price
// each collective with its own clause's algorithms: under
// "allreduce:tree;allgather:ring" an all-reduce is what NCCL_ALGO=Tree
// prices and an all-gather what NCCL_ALGO=Ring prices, at every size.
func TestCollectiveAlgoPerClause(t *testing.T) {
	topo, err := topology.Resolve("rtxpro6000-2s", 0)
	if err != nil {
		t.Fatal(err)
	}
	mk := func(algo string) *CollectiveModel {
		m, err := NewCollectiveModel(topo, ncclenv.Settings{Algo: algo})
		if err != nil {
			t.Fatalf("NCCL_ALGO %q: %v", algo, err)
		}
		return m
	}
	clauses, tree, ring := mk("allreduce:tree;allgather:ring"), mk("Tree"), mk("Ring")
	for _, b := range []int64{4 << 10, 1 << 20, 256 << 20} {
		for _, c := range []struct {
			op   model.Collective
			want *CollectiveModel
			algo string
		}{{model.AllReduce, tree, "Tree"}, {model.AllGather, ring, "Ring"}, {model.ReduceScatter, ring, "Ring"}} {
			got, want := clauses.Cost(c.op, nil, b), c.want.Cost(c.op, nil, b)
			if got.Algo != c.algo || got != want {
				t.Errorf("%s of %d B under allreduce:tree;allgather:ring: %s/%s %.3f us; want %s/%s %.3f us", c.op, b, got.Algo, got.Proto, got.TimeUs, want.Algo, want.Proto, want.TimeUs)
			}
		}
	}
}
