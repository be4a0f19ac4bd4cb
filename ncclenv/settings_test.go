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
		// NCCL_PARAMs: the first read is cached for the process
		// (src/include/param.h).
		{"min channels", Settings{MinChannels: 8}, Settings{}, false},
		{"max channels", Settings{MaxChannels: 8}, Settings{MaxChannels: 4}, false},
		{"same channels", Settings{MinChannels: 8, MaxChannels: 16}, Settings{MinChannels: 8, MaxChannels: 16}, true},
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
// on by default on NVLink only, so -1 "default" rather than on, and a
// list sets every protocol on or off); an error names the field.
func TestParse(t *testing.T) {
	cases := []struct {
		name   string
		s      Settings
		protos [NumProtocols]int8
		algos  [NumAlgorithms]bool
		level  string
		err    string
	}{
		{"defaults", Settings{}, [NumProtocols]int8{1, -1, 1}, [NumAlgorithms]bool{true, true}, "PXB", ""},
		{"one protocol", Settings{Proto: "ll"}, [NumProtocols]int8{1, 0, 0}, [NumAlgorithms]bool{true, true}, "PXB", ""},
		{"exclusion", Settings{Proto: "^LL128", Algo: "^Tree"}, [NumProtocols]int8{1, 0, 1}, [NumAlgorithms]bool{true, false}, "PXB", ""},
		{"list and level", Settings{Proto: "LL,Simple", Algo: "Ring,NVLS", P2PLevel: "sys"}, [NumProtocols]int8{1, 0, 1}, [NumAlgorithms]bool{true, false}, "SYS", ""},
		{"bad protocol", Settings{Proto: "LL256"}, [NumProtocols]int8{}, [NumAlgorithms]bool{}, "", "nccl.proto: "},
		{"only an unmodelled algorithm", Settings{Algo: "NVLS"}, [NumProtocols]int8{}, [NumAlgorithms]bool{}, "",
			`nccl.algo: NCCL_ALGO "NVLS": NVLS is not modelled (tpscope prices NCCL's Ring and Tree): want Ring or Tree among them`},
		{"every algorithm excluded", Settings{Algo: "^Ring,Tree"}, [NumProtocols]int8{}, [NumAlgorithms]bool{}, "",
			`nccl.algo: NCCL_ALGO "^Ring,Tree" enables neither Ring nor Tree`},
		{"bad level", Settings{P2PLevel: "far"}, [NumProtocols]int8{}, [NumAlgorithms]bool{}, "", "nccl.p2p_level: "},
		{"channels", Settings{MinChannels: 8, MaxChannels: 64}, [NumProtocols]int8{1, -1, 1}, [NumAlgorithms]bool{true, true}, "PXB", ""},
		// NCCL's MAXCHANNELS is 64 (src/include/device.h, NCCL 2.25+).
		{"min channels above NCCL's MAXCHANNELS", Settings{MinChannels: 65}, [NumProtocols]int8{}, [NumAlgorithms]bool{}, "",
			"nccl.min_channels: NCCL_MIN_NCHANNELS=65: want 1 to 64 channels (NCCL's MAXCHANNELS), or unset for NCCL's own count"},
		{"negative max channels", Settings{MaxChannels: -1}, [NumProtocols]int8{}, [NumAlgorithms]bool{}, "",
			"nccl.max_channels: NCCL_MAX_NCHANNELS=-1: want 1 to 64"},
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
			if p.Protocols(AllReduce) != tc.protos || p.Algorithms(AllReduce) != tc.algos || p.P2PLevel.String() != tc.level {
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
		{Settings{MinChannels: 8, MaxChannels: 16}, map[string]string{"NCCL_MIN_NCHANNELS": "8", "NCCL_MAX_NCHANNELS": "16"}, "PXB"},
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

// TestAlgorithms: the algorithms NCCL may pick per collective on one node
// of several GPUs follow NCCL's own availability (tuning.cc
// ncclTopoTuneModel, nvls.cc ncclNvlsInit): all-reduce has Ring and Tree,
// all-gather Ring alone, and NVLS joins both only where the GPUs have
// NVLink SHARP; PAT, NVLSTree and CollNet* run nowhere on such a node.
// NCCL_ALGO then keeps what it names (or what it does not exclude).
// "Tree,NVLS" on a PCIe box had been read as NCCL maybe picking NVLS.
func TestAlgorithms(t *testing.T) {
	for _, c := range []struct {
		algo               string
		op                 Collective
		nvls               bool
		priced, unmodelled string
	}{
		{"", AllReduce, false, "Ring Tree", ""},
		{"", AllReduce, true, "Ring Tree", "NVLS"},
		{"", AllGather, false, "Ring", ""},
		{"", AllGather, true, "Ring", "NVLS"},
		{"Ring,NVLS", AllReduce, true, "Ring", "NVLS"},
		{"Ring,NVLS", AllReduce, false, "Ring", ""},
		{"Tree,NVLS", AllReduce, false, "Tree", ""},
		{"Tree,NVLS", AllGather, false, "", ""},
		{"Tree,NVLS", AllGather, true, "", "NVLS"},
		{"^Ring", AllReduce, false, "Tree", ""},
		{"^Ring", AllGather, false, "", ""},
		{"^Ring", ReduceScatter, true, "", "NVLS"},
		{"^NVLS", AllReduce, true, "Ring Tree", ""},
		{"Ring,Tree,nvlstree,PAT", AllReduce, true, "Ring Tree", ""},
		{"tree", AllGather, true, "", ""},
		{"Tree,PAT", AllGather, false, "", ""},
		{"CollNetDirect,Ring", ReduceScatter, false, "Ring", ""},
	} {
		pr, un := Settings{Algo: c.algo}.Algorithms(c.op, c.nvls)
		if strings.Join(pr, " ") != c.priced || strings.Join(un, " ") != c.unmodelled {
			t.Errorf("NCCL_ALGO %q, %s, nvls %v: priced %q, unmodelled %q; want %q and %q", c.algo, c.op, c.nvls, pr, un, c.priced, c.unmodelled)
		}
	}
}

// TestSetEnvInvertsEnv: each variable Env writes reads back through
// SetEnv to the same Settings; "" unsets; NCCL_P2P_DISABLE is an integer
// (0 keeps P2P on); a variable Settings does not hold is an error.
func TestSetEnvInvertsEnv(t *testing.T) {
	want := Settings{Proto: "LL,LL128", Algo: "Ring", P2PLevel: "SYS", P2PDisable: true, MinChannels: 8, MaxChannels: 32}
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

// TestSetEnvChannels: the channel counts are integers as NCCL reads its
// parameters (strtoll base 0: "0x10" is 16); "" unsets; a count below 1
// or a word is one line naming the variable and what it wants.
func TestSetEnvChannels(t *testing.T) {
	for _, c := range []struct {
		env, v  string
		min, mx int
		err     string
	}{
		{EnvMinChannels, "8", 8, 0, ""},
		{EnvMaxChannels, " 0x10", 0, 16, ""},
		{EnvMinChannels, "", 0, 0, ""},
		{EnvMinChannels, "eight", 0, 0, "NCCL_MIN_NCHANNELS=eight: want 1 to 64 channels (NCCL's MAXCHANNELS), or unset for NCCL's own count"},
		{EnvMinChannels, "0", 0, 0, "NCCL_MIN_NCHANNELS=0: want 1 to 64"},
		{EnvMaxChannels, "-2", 0, 0, "NCCL_MAX_NCHANNELS=-2: want 1 to 64"},
	} {
		var s Settings
		err := s.SetEnv(c.env, c.v)
		if c.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), c.err) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s=%q: error %v, want one starting %q", c.env, c.v, err, c.err)
			}
			continue
		}
		if err != nil || s.MinChannels != c.min || s.MaxChannels != c.mx {
			t.Errorf("%s=%q: min %d max %d (%v), want %d %d", c.env, c.v, s.MinChannels, s.MaxChannels, err, c.min, c.mx)
		}
	}
	// Above MAXCHANNELS reads back as asked and Validate refuses it.
	var s Settings
	if err := s.SetEnv(EnvMaxChannels, "128"); err != nil || s.MaxChannels != 128 {
		t.Fatalf("NCCL_MAX_NCHANNELS=128: %d, %v", s.MaxChannels, err)
	}
	if err := s.Validate(); err == nil || !strings.HasPrefix(err.Error(), "nccl.max_channels: NCCL_MAX_NCHANNELS=128: want 1 to 64") {
		t.Errorf("Validate of NCCL_MAX_NCHANNELS=128: %v", err)
	}
}

// TestChannels: the count NCCL runs is its own capped at the maximum,
// then raised to the minimum (ncclTopoPostset, src/graph/connect.cc:
// "We permit combining max, then min", so a minimum above the maximum
// wins).
func TestChannels(t *testing.T) {
	for _, c := range []struct {
		s              Settings
		computed, want int
	}{
		{Settings{}, 2, 2},
		{Settings{MinChannels: 8}, 2, 8},
		{Settings{MinChannels: 8}, 16, 16},
		{Settings{MaxChannels: 4}, 16, 4},
		{Settings{MaxChannels: 4}, 2, 2},
		{Settings{MinChannels: 8, MaxChannels: 4}, 2, 8},
		{Settings{MinChannels: 8, MaxChannels: 4}, 16, 8},
	} {
		if got := c.s.Channels(c.computed); got != c.want {
			t.Errorf("%+v over NCCL's %d: %d channels, want %d", c.s, c.computed, got, c.want)
		}
	}
}

// TestGathersFail: an NCCL_ALGO that leaves an all-gather no algorithm
// on the node makes NCCL fail it: Tree alone anywhere, ^Ring and Tree,NVLS
// on a box without NVLink SHARP; Ring, no setting, or NVLS where the
// box has it leave one.
func TestGathersFail(t *testing.T) {
	for _, c := range []struct {
		algo string
		nvls bool
		want bool
	}{
		{"Tree", true, true}, {" Tree ", false, true}, {"Tree,NVLSTree", true, true}, {"CollNetChain", false, true}, {"Tree,PAT", false, true},
		{"^Ring", false, true}, {"Tree,NVLS", false, true},
		{"^Ring", true, false}, {"Tree,NVLS", true, false},
		{"", false, false}, {"Ring", false, false}, {"Ring,Tree", false, false}, {"^Tree", false, false},
	} {
		if got := (Settings{Algo: c.algo}).GathersFail(c.nvls); got != c.want {
			t.Errorf("NCCL_ALGO %q, nvls %v: GathersFail %v, want %v", c.algo, c.nvls, got, c.want)
		}
	}
}

// TestNVLSRunsSimpleOnly: NCCL runs NVLS with the Simple protocol alone
// (src/graph/tuning.cc ncclTopoTuneModel skips NVLS and NVLSTree for every
// protocol but Simple, NCCL 2.21 to 2.29), so an NCCL_PROTO that turns
// Simple off takes NVLS out of what NCCL may pick, and where NCCL_ALGO
// left a collective NVLS alone it has no algorithm/protocol pair and NCCL
// fails it. allgather:nvls with allgather:LL (or a list for every
// function without Simple, or ^Simple) fails the all-gather on an NVLink
// SHARP box; Simple among the protocols, Ring among the algorithms, or a
// reduce-scatter whose own clauses leave Ring and Simple, do not; an
// all-reduce keeps Ring and Tree and only loses NVLS.
func TestNVLSRunsSimpleOnly(t *testing.T) {
	for _, c := range []struct {
		algo, proto        string
		op                 Collective
		priced, unmodelled string
		fails, pairless    bool
	}{
		{"allgather:nvls", "allgather:LL", AllGather, "", "", true, true},
		{"allgather:nvls", "LL,LL128", AllGather, "", "", true, true},
		{"allgather:nvls", "^Simple", AllGather, "", "", true, true},
		{"NVLS", "allgather:LL128", AllGather, "", "", true, true},
		{"allgather:nvls", "allgather:LL,Simple", AllGather, "", "NVLS", false, false},
		{"allgather:nvls", "allreduce:LL", AllGather, "", "NVLS", false, false},
		{"allgather:nvls", "allgather:LL", ReduceScatter, "Ring", "NVLS", false, false},
		{"allgather:ring,nvls", "allgather:LL", AllGather, "Ring", "", false, false},
		{"", "LL", AllReduce, "Ring Tree", "", false, false},
		{"", "LL", AllGather, "Ring", "", false, false},
		{"", "", AllGather, "Ring", "NVLS", false, false},
		// No protocol at all is NoProtocol's, not this pair's.
		{"allgather:nvls", "allgather:^LL,LL128,Simple", AllGather, "", "", true, false},
	} {
		s := Settings{Algo: c.algo, Proto: c.proto}
		pr, un := s.Algorithms(c.op, true)
		if strings.Join(pr, " ") != c.priced || strings.Join(un, " ") != c.unmodelled {
			t.Errorf("NCCL_ALGO %q, NCCL_PROTO %q, %s: priced %q, unmodelled %q; want %q and %q", c.algo, c.proto, c.op, pr, un, c.priced, c.unmodelled)
		}
		if got := s.Fails(c.op, true); got != c.fails {
			t.Errorf("NCCL_ALGO %q, NCCL_PROTO %q, %s: Fails %v, want %v", c.algo, c.proto, c.op, got, c.fails)
		}
		if got := s.NVLSWithoutSimple(c.op, true); got != c.pairless {
			t.Errorf("NCCL_ALGO %q, NCCL_PROTO %q, %s: NVLSWithoutSimple %v, want %v", c.algo, c.proto, c.op, got, c.pairless)
		}
		// Without NVLink SHARP there is no NVLS to lose.
		if s.NVLSWithoutSimple(c.op, false) {
			t.Errorf("NCCL_ALGO %q, NCCL_PROTO %q, %s: NVLSWithoutSimple on a box without NVLS", c.algo, c.proto, c.op)
		}
	}
}
