package sim

import "testing"

// TestNCCLCachedPerProcess: two settings share a process exactly when NCCL
// would read the same cached values (names compared without case;
// tpscope's own IgnoreCalibration is no NCCL setting).
func TestNCCLCachedPerProcess(t *testing.T) {
	cases := []struct {
		name string
		a, b NCCLOptions
		same bool
	}{
		{"defaults", NCCLOptions{}, NCCLOptions{}, true},
		{"proto case", NCCLOptions{Proto: "LL"}, NCCLOptions{Proto: "ll"}, true},
		{"p2p level case", NCCLOptions{P2PLevel: "sys"}, NCCLOptions{P2PLevel: "SYS"}, true},
		{"calibration is tpscope's", NCCLOptions{IgnoreCalibration: true}, NCCLOptions{}, true},
		{"proto set vs NCCL's choice", NCCLOptions{Proto: "LL"}, NCCLOptions{}, false},
		{"algo", NCCLOptions{Algo: "Ring"}, NCCLOptions{Algo: "Tree"}, false},
		{"p2p level", NCCLOptions{P2PLevel: "SYS"}, NCCLOptions{P2PLevel: "PXB"}, false},
		{"p2p disable", NCCLOptions{P2PDisable: true}, NCCLOptions{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.CachedPerProcess() == tc.b.CachedPerProcess(); got != tc.same {
				t.Errorf("%+v vs %+v: same process cache %v, want %v", tc.a, tc.b, got, tc.same)
			}
		})
	}
}
