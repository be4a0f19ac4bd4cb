package compare

import (
	"testing"

	"github.com/tpscope/tpscope/traces"
)

// The runner writes tpscope.graphs on a step root whenever graphs were
// requested: what it says about the measured steps decides the
// prediction's CUDAGraphs, in both directions; without it the recorded
// options stand.
func TestRecordedGraphsDecide(t *testing.T) {
	rec := func(options, graphs string) *traces.Scenario {
		return &traces.Scenario{Model: "tiny-mla-moe", Topology: "rtxpro6000-2s", Plan: "tp2", Workload: "decode b4 ctx64", Options: options, Graphs: graphs}
	}
	cases := []struct {
		name string
		rec  *traces.Scenario
		want bool
	}{
		{"no attribute keeps options (on)", rec("cuda-graphs,p2p-level=SYS", ""), true},
		{"no attribute keeps options (off)", rec("p2p-level=SYS", ""), false},
		{"replayed, options silent", rec(`["p2p-level=SYS"]`, "true"), true},
		{"fell back to eager", rec(`["cuda-graphs","nccl-proto=LL"]`, "false"), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var s Scenarios
			sc, _, _, _, err := s.resolve(tc.rec)
			if err != nil {
				t.Fatal(err)
			}
			if sc.Options.CUDAGraphs != tc.want || sc.Options.NCCL.P2PLevel == "" && tc.rec.Options != `["cuda-graphs","nccl-proto=LL"]` {
				t.Errorf("options %+v, want cuda graphs %v and the recorded NCCL settings", sc.Options, tc.want)
			}
		})
	}
}
