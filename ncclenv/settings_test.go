package ncclenv

import (
	"reflect"
	"strings"
	"testing"
)

// TestNCCLCachedPerProcess: two settings share a process exactly when NCCL
// would read the same cached values (names compared without case;
// tpscope's own IgnoreCalibration is no NCCL setting).
func TestNCCLCachedPerProcess(t *testing.T) {
	cases := []struct {
		name string
		a, b Settings
		same bool
	}{
		{"defaults", Settings{}, Settings{}, true},
		{"proto case", Settings{Proto: "LL"}, Settings{Proto: "ll"}, true},
		{"p2p level case", Settings{P2PLevel: "sys"}, Settings{P2PLevel: "SYS"}, true},
		{"calibration is tpscope's", Settings{IgnoreCalibration: true}, Settings{}, true},
		{"proto set vs NCCL's choice", Settings{Proto: "LL"}, Settings{}, false},
		{"algo", Settings{Algo: "Ring"}, Settings{Algo: "Tree"}, false},
		{"p2p level", Settings{P2PLevel: "SYS"}, Settings{P2PLevel: "PXB"}, false},
		{"p2p disable", Settings{P2PDisable: true}, Settings{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.a.CachedPerProcess() == tc.b.CachedPerProcess(); got != tc.same {
				t.Errorf("%+v vs %+v: same process cache %v, want %v", tc.a, tc.b, got, tc.same)
			}
		})
	}
}

// TestParse: NCCL's grammar per field (NCCL's docs: NCCL_PROTO and
// NCCL_ALGO take a comma list, or "^" and the ones to exclude; LL128 is
// on by default on NVLink only, so -1 "default" rather than on); an
// error names the field.
func TestParse(t *testing.T) {
	cases := []struct {
		name   string
		s      Settings
		protos [NumProtocols]int8
		algos  [NumAlgorithms]bool
		level  string
		err    string
	}{
		{"defaults", Settings{}, [NumProtocols]int8{-1, -1, -1}, [NumAlgorithms]bool{true, true}, "PXB", ""},
		{"one protocol", Settings{Proto: "ll"}, [NumProtocols]int8{1, 0, 0}, [NumAlgorithms]bool{true, true}, "PXB", ""},
		{"exclusion", Settings{Proto: "^LL128", Algo: "^Tree"}, [NumProtocols]int8{-1, 0, -1}, [NumAlgorithms]bool{true, false}, "PXB", ""},
		{"list and level", Settings{Proto: "LL,Simple", Algo: "Ring,NVLS", P2PLevel: "sys"}, [NumProtocols]int8{1, 0, 1}, [NumAlgorithms]bool{true, false}, "SYS", ""},
		{"bad protocol", Settings{Proto: "LL256"}, [NumProtocols]int8{}, [NumAlgorithms]bool{}, "", "nccl.proto: "},
		{"only an unmodelled algorithm", Settings{Algo: "NVLS"}, [NumProtocols]int8{}, [NumAlgorithms]bool{}, "",
			`nccl.algo: NCCL_ALGO "NVLS": NVLS is not modelled (tpscope prices NCCL's Ring and Tree): want Ring or Tree among them`},
		{"every algorithm excluded", Settings{Algo: "^Ring,Tree"}, [NumProtocols]int8{}, [NumAlgorithms]bool{}, "",
			`nccl.algo: NCCL_ALGO "^Ring,Tree" enables neither Ring nor Tree`},
		{"bad level", Settings{P2PLevel: "far"}, [NumProtocols]int8{}, [NumAlgorithms]bool{}, "", "nccl.p2p_level: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.s.Parse()
			if tc.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
					t.Fatalf("error %v, want one starting %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Protocols != tc.protos || p.Algorithms != tc.algos || p.P2PLevel.String() != tc.level {
				t.Errorf("parsed %+v (level %s), want %v %v %s", p, p.P2PLevel, tc.protos, tc.algos, tc.level)
			}
		})
	}
}

// TestEnv: the settings in NCCL's spelling, nothing for NCCL's defaults
// or for tpscope's own IgnoreCalibration; P2PCondition names the P2P
// setting as calibrations record it.
func TestEnv(t *testing.T) {
	cases := []struct {
		s    Settings
		env  map[string]string
		cond string
	}{
		{Settings{}, map[string]string{}, "PXB"},
		{Settings{IgnoreCalibration: true}, map[string]string{}, "PXB"},
		{Settings{Proto: "LL", Algo: "Ring", P2PLevel: "SYS"}, map[string]string{"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS"}, "SYS"},
		{Settings{P2PDisable: true}, map[string]string{"NCCL_P2P_DISABLE": "1"}, "disabled"},
	}
	for _, tc := range cases {
		if got := tc.s.Env(); !reflect.DeepEqual(got, tc.env) {
			t.Errorf("%+v: env %v, want %v", tc.s, got, tc.env)
		}
		if got := tc.s.P2PCondition(); got != tc.cond {
			t.Errorf("%+v: P2P condition %q, want %q", tc.s, got, tc.cond)
		}
	}
}

// TestUnmodelledAlgos: an inclusive NCCL_ALGO list naming an algorithm
// tpscope does not price says which, beside the ones it does; an
// exclusion list or the default names none.
func TestUnmodelledAlgos(t *testing.T) {
	for _, c := range []struct {
		algo          string
		unmod, priced string
	}{
		{"Ring,NVLS", "NVLS", "Ring"},
		{"Ring, Tree,nvlstree,PAT", "nvlstree PAT", "Ring Tree"},
		{"^NVLS", "", ""},
		{"Ring,Tree", "", "Ring Tree"},
		{"", "", ""},
	} {
		un, pr := Settings{Algo: c.algo}.UnmodelledAlgos()
		if strings.Join(un, " ") != c.unmod || (c.unmod != "" && strings.Join(pr, " ") != c.priced) {
			t.Errorf("%q: unmodelled %q, priced %q; want %q and %q", c.algo, un, pr, c.unmod, c.priced)
		}
	}
}

// TestSetEnvInvertsEnv: each variable Env writes reads back through
// SetEnv to the same Settings; "" unsets; NCCL_P2P_DISABLE is an integer
// (0 keeps P2P on); a variable Settings does not hold is an error.
func TestSetEnvInvertsEnv(t *testing.T) {
	want := Settings{Proto: "LL,LL128", Algo: "Ring", P2PLevel: "SYS", P2PDisable: true}
	var got Settings
	for k, v := range want.Env() {
		if err := got.SetEnv(k, v); err != nil {
			t.Fatalf("SetEnv(%s, %s): %v", k, v, err)
		}
	}
	if got != want {
		t.Errorf("read back %+v, want %+v", got, want)
	}
	for _, c := range []struct {
		v  string
		on bool
	}{{"", false}, {"0", false}, {"1", true}, {"2", true}} {
		s := Settings{P2PDisable: !c.on}
		if err := s.SetEnv(EnvP2PDisable, c.v); err != nil || s.P2PDisable != c.on {
			t.Errorf("NCCL_P2P_DISABLE=%q: %v, %v; want %v", c.v, s.P2PDisable, err, c.on)
		}
	}
	var s Settings
	if err := s.SetEnv(EnvP2PDisable, "yes"); err == nil {
		t.Error("NCCL_P2P_DISABLE=yes accepted")
	}
	if err := s.SetEnv("NCCL_IB_HCA", "mlx5"); err == nil {
		t.Error("NCCL_IB_HCA accepted as a setting")
	}
	if err := (&Settings{Proto: "LL"}).SetEnv(EnvProto, ""); err != nil {
		t.Error(err)
	}
}
