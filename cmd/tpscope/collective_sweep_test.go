package main

import (
	"math"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

func TestParseSizes(t *testing.T) {
	cases := []struct {
		in    string
		first int64
		last  int64
		n     int
		bad   bool
	}{
		{"512:512M", 512, 512 << 20, 21, false}, // 2^9 .. 2^29: 21 sizes
		{"8:8", 8, 8, 1, false},
		{"1K:4K", 1024, 4096, 3, false},
		{"64KiB", 65536, 65536, 1, false},
		{"1.5M", 1572864, 1572864, 1, false},
		{"4K:1K", 0, 0, 0, true},
		{"abc", 0, 0, 0, true},
		{"0", 0, 0, 0, true},
		{"-5:10", 0, 0, 0, true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := parseSizeRange(c.in)
			if c.bad {
				if err == nil {
					t.Errorf("no error, got %v", got)
				}
				return
			}
			if err != nil || len(got) != c.n || got[0] != c.first || got[len(got)-1] != c.last {
				t.Errorf("got %v, %v; want %d sizes %d..%d", got, err, c.n, c.first, c.last)
			}
		})
	}
}

func TestParseCollective(t *testing.T) {
	for in, want := range map[string]model.Collective{"allreduce": model.AllReduce, "all_reduce": model.AllReduce, "AllGather": model.AllGather,
		"reduce-scatter": model.ReduceScatter, "a2a": model.AllToAll} {
		if got, err := parseCollective(in); err != nil || got != want {
			t.Errorf("parseCollective(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := parseCollective("broadcast"); err == nil {
		t.Error("broadcast accepted")
	}
}

// TestSweep: the rows carry Cost's numbers; JSON fields per the CLI contract.
func TestSweep(t *testing.T) {
	m := collModel(t, "rtxpro6000-2s", 8, ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"})
	rows, err := sweepCollective(m, model.AllReduce, []int{0, 1, 2, 3, 4, 5, 6, 7}, []int64{512, 1024}, "")
	if err != nil {
		t.Fatal(err)
	}
	// 20.6 us + 14 x 0.4 us of cross-socket hops + 512 B / (1000 x 11.1 x
	// 8/14 GB/s) (see sim's TestNCCLLatencyByHand, TestBandwidthByHand).
	want := 20.6 + 14*0.4 + 512/(1000*11.1*8.0/14)
	if len(rows) != 2 || !collNear(rows[0].TimeUs, want, 1e-9) || rows[0].Algo != "Ring" || rows[0].Proto != "LL" {
		t.Errorf("rows %+v, want first %.4f us Ring/LL", rows, want)
	}
	if _, err := sweepCollective(m, model.AllReduce, []int{0, 8}, []int64{512}, ""); err == nil {
		t.Error("rank 8 on 8 GPUs accepted")
	}
	if _, err := sweepCollective(m, model.AllGather, nil, []int64{512}, "oneshot"); err == nil {
		t.Error("one-shot all-gather accepted")
	}
	if _, err := sweepCollective(collModel(t, "rtxpro6000-2s", 8, ncclenv.Settings{P2PDisable: true}), model.AllReduce, nil, []int64{512}, "oneshot"); err == nil {
		t.Error("one-shot with P2P disabled accepted")
	}
}

func collModel(t testing.TB, name string, gpus int, o ncclenv.Settings) *sim.CollectiveModel {
	t.Helper()
	tp, err := topology.Resolve(name, gpus)
	if err != nil {
		t.Fatal(err)
	}
	m, err := sim.NewCollectiveModel(tp, o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func collNear(got, want, tol float64) bool { return math.Abs(got-want) <= tol }
