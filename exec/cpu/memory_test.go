package cpu_test

import (
	"testing"

	"github.com/tpscope/tpscope/exec/collbench"
	"github.com/tpscope/tpscope/exec/cpu"
	"github.com/tpscope/tpscope/model"
)

// TestEstimateMemoryCollectives: the CPU backend keeps each collective's
// buffers per member as float32 (fabric.go). By hand, for 4 ranks and one
// 1 MiB op (262144 values, chunk 65536): all-reduce and all-to-all hold
// send + receive = 2 x 262144 values per rank, all-gather a chunk to send
// and the whole output (65536 + 262144), reduce-scatter the input, a
// working copy and a chunk (262144 x 2 + 65536); times 4 bytes and 4 ranks.
func TestEstimateMemoryCollectives(t *testing.T) {
	for _, tc := range []struct {
		op     model.Collective
		values int64
	}{
		{model.AllReduce, 2 * 262144},
		{model.AllToAll, 2 * 262144},
		{model.AllGather, 65536 + 262144},
		{model.ReduceScatter, 2*262144 + 65536},
	} {
		t.Run(string(tc.op), func(t *testing.T) {
			s, _, err := collbench.Schedule(collbench.Config{Op: tc.op, Ranks: 4, Sizes: []int64{1 << 20}, Iters: 1})
			if err != nil {
				t.Fatal(err)
			}
			est, err := cpu.New().EstimateMemory(s, nil)
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.values * 4 * 4; est.NeedBytes != want {
				t.Errorf("need %d B, want %d", est.NeedBytes, want)
			}
		})
	}
}
