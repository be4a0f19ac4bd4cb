// Package ncclenv is NCCL's run-time settings as one typed value
// (Settings): the environment variables tpscope sets for a run
// (NCCL_PROTO, NCCL_ALGO, NCCL_P2P_LEVEL, NCCL_P2P_DISABLE,
// NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS), NCCL's grammar for each
// (Parse: which protocols and algorithms NCCL may pick, at which P2P
// level, over how many channels), their spelling in NCCL's environment
// (Env) and the part NCCL reads once per process and keeps (Cached).
//
// One value travels from the command line to both readers: sim's
// collective model prices collectives under Parse's result, and a
// backend with NCCL (exec.BackendConfig.NCCL) sets Env in its process
// before NCCL initialises. Nothing else spells the variables. It imports
// topology only, for the P2P levels.
package ncclenv

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tpscope/tpscope/topology"
)

// NCCL's names of the variables Settings sets.
const (
	EnvProto      = "NCCL_PROTO"
	EnvAlgo       = "NCCL_ALGO"
	EnvP2PLevel   = "NCCL_P2P_LEVEL"
	EnvP2PDisable = "NCCL_P2P_DISABLE"
	// EnvMinChannels and EnvMaxChannels bound the channels (CTAs) NCCL
	// runs each collective over: NCCL_PARAM(MinNchannels, "MIN_NCHANNELS")
	// and MaxNchannels (src/graph/connect.cc).
	EnvMinChannels = "NCCL_MIN_NCHANNELS"
	EnvMaxChannels = "NCCL_MAX_NCHANNELS"
)

// Vars are the variables Settings holds, in a fixed order: what a
// recorded environment is read for.
var Vars = []string{EnvProto, EnvAlgo, EnvP2PLevel, EnvP2PDisable, EnvMinChannels, EnvMaxChannels}

// ChannelCap is NCCL's MAXCHANNELS (src/include/device.h): 64 since NCCL
// 2.25, 32 before. NCCL limits NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS
// above it to it (connect.cc ncclMinNchannels/ncclMaxNchannels); tpscope
// refuses a count above it rather than price one NCCL never runs (an
// NCCL of 2.24 or older stops at 32).
const ChannelCap = 64

// Settings are the NCCL environment knobs tpscope models and sets, as the
// user spelled them (the spelling is kept, so a recorded scenario says
// what was asked). The zero value is NCCL's defaults.
type Settings struct {
	// Proto is NCCL_PROTO in NCCL's grammar, the one NCCL_ALGO has
	// (parseList): "" (default), a comma list ("LL,Simple"), a "^"
	// exclusion list ("^LL128"), or per collective
	// "LL,Simple;allreduce:^LL" (NCCL 2.24 and later).
	Proto string `json:"proto,omitempty"`
	// Algo is NCCL_ALGO in NCCL's grammar (parseAlgo): "", "Ring",
	// "Tree", "Ring,Tree", "^Tree", or per collective
	// "allreduce:tree;allgather:ring" (NCCL 2.24 and later). NCCL names
	// tpscope does not model (NVLS, NVLSTree, CollNetDirect, CollNetChain,
	// PAT) are accepted beside Ring or Tree and not priced where the box
	// has them (Algorithms; a prediction's caveat says so).
	Algo string `json:"algo,omitempty"`
	// P2PLevel is NCCL_P2P_LEVEL (LOC, NVL, NVB, PIX, PXB, PXN, PHB, SYS;
	// "" = PXB). Ring hops farther than the level go through host memory.
	P2PLevel string `json:"p2p_level,omitempty"`
	// P2PDisable is NCCL_P2P_DISABLE=1: every hop through host memory.
	P2PDisable bool `json:"p2p_disable,omitempty"`
	// MinChannels is NCCL_MIN_NCHANNELS and MaxChannels
	// NCCL_MAX_NCHANNELS (1 to ChannelCap; 0 = unset): NCCL caps the
	// channels its topology search and duplication settled on at the
	// maximum, then copies channels up to the minimum (ncclTopoPostset,
	// src/graph/connect.cc: "We permit combining max, then min", so a
	// minimum above the maximum runs the minimum; Channels). They change
	// how many channels run, not NCCL's choice of algorithm and protocol:
	// its tuning model reads the search's graph channels
	// (ncclTopoTuneModel, src/graph/tuning.cc: busBw =
	// graphs[a]->nChannels * bw), which these never touch.
	MinChannels int `json:"min_channels,omitempty"`
	MaxChannels int `json:"max_channels,omitempty"`
	// IgnoreCalibration is tpscope's own, not NCCL's (no variable, not in
	// Env or Cached): the collective model uses NCCL's constants even
	// when the topology carries calibrated ones.
	IgnoreCalibration bool `json:"ignore_calibration,omitempty"`
}

// Protocol is one of NCCL's protocols.
type Protocol uint8

const (
	LL Protocol = iota
	LL128
	Simple
	NumProtocols
)

var protoNames = [NumProtocols]string{"LL", "LL128", "Simple"}

// String is NCCL's name of the protocol.
func (p Protocol) String() string {
	if p < NumProtocols {
		return protoNames[p]
	}
	return fmt.Sprintf("Protocol(%d)", uint8(p))
}

// Algorithm is one of NCCL's collective algorithms tpscope models.
type Algorithm uint8

const (
	Ring Algorithm = iota
	Tree
	NumAlgorithms
)

var algoNames = [NumAlgorithms]string{"Ring", "Tree"}

// String is NCCL's name of the algorithm.
func (a Algorithm) String() string {
	if a < NumAlgorithms {
		return algoNames[a]
	}
	return fmt.Sprintf("Algorithm(%d)", uint8(a))
}

// ParseProtocol reads a protocol's name, ignoring case; ok is false for
// any other text.
func ParseProtocol(s string) (p Protocol, ok bool) {
	i := indexOf(protoNames[:], s)
	return Protocol(i), i >= 0
}

// ParseAlgorithm reads an algorithm's name (Ring, Tree), ignoring case;
// ok is false for any other text.
func ParseAlgorithm(s string) (a Algorithm, ok bool) {
	i := indexOf(algoNames[:], s)
	return Algorithm(i), i >= 0
}

// Parsed is Settings in NCCL's terms.
type Parsed struct {
	// protos is NCCL_PROTO as NCCL reads it: per NCCL function, per
	// Protocol, 1 on, 0 off, -1 NCCL's default (LL128 on NVLink only;
	// Protocols reads it).
	protos protoTable
	// algos is NCCL_ALGO as NCCL reads it: per NCCL function, per NCCL
	// algorithm, whether NCCL may pick it (Algorithms reads it).
	algos algoTable
	// P2PLevel is the farthest path NCCL uses P2P over (PXB by default).
	P2PLevel topology.P2PLevel
	// P2PDisable: no P2P at all.
	P2PDisable bool
	// MinChannels and MaxChannels bound the channels NCCL runs (0: unset;
	// Settings.Channels applies them).
	MinChannels, MaxChannels int
}

// Parse reads the settings with NCCL's grammar; an error names the
// field (nccl.proto, nccl.algo, nccl.p2p_level, nccl.min_channels,
// nccl.max_channels) and what is accepted.
func (s Settings) Parse() (Parsed, error) {
	var p Parsed
	var err error
	if p.protos, err = parseProto(s.Proto); err != nil {
		return p, fmt.Errorf("nccl.proto: %w", err)
	}
	if p.algos, err = parseAlgo(s.Algo); err != nil {
		return p, fmt.Errorf("nccl.algo: %w", err)
	}
	if p.P2PLevel, err = topology.ParseP2PLevel(s.P2PLevel); err != nil {
		return p, fmt.Errorf("nccl.p2p_level: %w", err)
	}
	p.P2PDisable = s.P2PDisable
	for _, c := range []struct {
		field, env string
		n          int
	}{{"nccl.min_channels", EnvMinChannels, s.MinChannels}, {"nccl.max_channels", EnvMaxChannels, s.MaxChannels}} {
		if c.n < 0 || c.n > ChannelCap {
			return p, fmt.Errorf("%s: %w", c.field, channelsError(c.env, strconv.Itoa(c.n)))
		}
	}
	p.MinChannels, p.MaxChannels = s.MinChannels, s.MaxChannels
	return p, nil
}

// channelsError is what a channel count NCCL does not run says.
func channelsError(env, v string) error {
	return fmt.Errorf("%s=%s: want 1 to %d channels (NCCL's MAXCHANNELS), or unset for NCCL's own count", env, v, ChannelCap)
}

// Channels is the number of channels NCCL runs where its own topology
// search and channel duplication give computed: computed capped at
// MaxChannels, then raised to MinChannels (ncclTopoPostset, in that
// order, so a minimum above the maximum wins).
func (s Settings) Channels(computed int) int {
	n := computed
	if s.MaxChannels > 0 && n > s.MaxChannels {
		n = s.MaxChannels
	}
	return max(n, s.MinChannels)
}

// Validate checks every field against NCCL's grammar (Parse).
func (s *Settings) Validate() error {
	_, err := s.Parse()
	return err
}

// Env is the environment that asks NCCL for these settings, in NCCL's
// spelling (NCCL_PROTO, NCCL_ALGO, NCCL_P2P_LEVEL, NCCL_P2P_DISABLE=1,
// NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS); empty for NCCL's defaults.
func (s Settings) Env() map[string]string {
	env := map[string]string{}
	if s.Proto != "" {
		env[EnvProto] = s.Proto
	}
	if s.Algo != "" {
		env[EnvAlgo] = s.Algo
	}
	if s.P2PLevel != "" {
		env[EnvP2PLevel] = s.P2PLevel
	}
	if s.P2PDisable {
		env[EnvP2PDisable] = "1"
	}
	if s.MinChannels != 0 {
		env[EnvMinChannels] = strconv.Itoa(s.MinChannels)
	}
	if s.MaxChannels != 0 {
		env[EnvMaxChannels] = strconv.Itoa(s.MaxChannels)
	}
	return env
}

// SetEnv sets what environment variable name asks of NCCL to value, as
// NCCL reads it ("" = unset, NCCL's default): the inverse of Env, one
// variable at a time (a log that records the environment, a copy of one
// setting). NCCL_P2P_DISABLE is an integer, P2P off when it is not 0.
// NCCL_MIN_NCHANNELS and NCCL_MAX_NCHANNELS are integers as NCCL reads
// its parameters (strtoll base 0: "8", "0x8"), and a count below 1 is an
// error here (Settings' 0 is unset; NCCL reads a minimum of 0 as none
// and raises a maximum below 1 to 1). A variable Settings does not hold
// is an error; the other values are not validated here (Validate).
func (s *Settings) SetEnv(name, value string) error {
	switch name {
	case EnvProto:
		s.Proto = value
	case EnvAlgo:
		s.Algo = value
	case EnvP2PLevel:
		s.P2PLevel = value
	case EnvP2PDisable:
		on := false
		if value != "" {
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return fmt.Errorf("%s=%s: want an integer (1 disables P2P)", EnvP2PDisable, value)
			}
			on = n != 0
		}
		s.P2PDisable = on
	case EnvMinChannels, EnvMaxChannels:
		n := 0
		if value = strings.TrimSpace(value); value != "" {
			v, err := strconv.ParseInt(value, 0, 64)
			if err != nil || v < 1 {
				return channelsError(name, value)
			}
			n = int(v) // above ChannelCap: Validate says so
		}
		if name == EnvMinChannels {
			s.MinChannels = n
		} else {
			s.MaxChannels = n
		}
	default:
		return fmt.Errorf("%s: not one of the NCCL settings (%s)", name, strings.Join(Vars, ", "))
	}
	return nil
}

// Cached is the part of Settings that NCCL reads once per process and
// keeps (its parameters are cached on first use: the P2P level, P2P
// disable, the protocol and algorithm choices, and NCCL_MIN_NCHANNELS /
// NCCL_MAX_NCHANNELS, NCCL_PARAMs whose first read is cached for the
// process: src/include/param.h), in a canonical spelling
// (NCCL compares these names without case), so two values compare with ==.
// Two runs whose Cached differ cannot share a process: the second would
// run with the first one's settings whatever its environment says.
type Cached struct {
	Proto, Algo, P2PLevel    string
	P2PDisable               bool
	MinChannels, MaxChannels int
}

// CachedPerProcess is s's Cached.
func (s Settings) CachedPerProcess() Cached {
	return Cached{Proto: strings.ToUpper(s.Proto), Algo: strings.ToUpper(s.Algo),
		P2PLevel: strings.ToUpper(s.P2PLevel), P2PDisable: s.P2PDisable,
		MinChannels: s.MinChannels, MaxChannels: s.MaxChannels}
}

// P2PCondition names the P2P setting a measurement ran under, as a
// calibration stores it (topology.CollectiveParams.P2PLevel): "disabled"
// or the NCCL_P2P_LEVEL name ("PXB" by default).
func (s Settings) P2PCondition() string {
	if s.P2PDisable {
		return "disabled"
	}
	l, err := topology.ParseP2PLevel(s.P2PLevel)
	if err != nil {
		return strings.ToUpper(s.P2PLevel)
	}
	return l.String()
}

func indexOf(names []string, s string) int {
	for i, n := range names {
		if strings.EqualFold(n, s) {
			return i
		}
	}
	return -1
}

// Collective names an NCCL collective as NCCL_ALGO's per-function lists
// do (ncclFuncStr, matched without case; tpscope spells them lower case).
type Collective string

const (
	AllReduce     Collective = "allreduce"
	AllGather     Collective = "allgather"
	ReduceScatter Collective = "reducescatter"
)

// ncclFuncNames are NCCL's functions in its order (src/init.cc
// ncclFuncStr): the prefixes NCCL_ALGO's clauses may name.
var ncclFuncNames = [...]string{"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"}

// ncclAlgoNames are NCCL's algorithms in its order (src/init.cc
// ncclAlgoStr since NCCL 2.19, where PAT joined): the names NCCL_ALGO
// may list. "CollNet" is none of them: NCCL split it into CollNetDirect
// and CollNetChain in 2.14, and 2.24 refuses a name it does not know.
var ncclAlgoNames = [...]string{"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"}

// algoTable is NCCL_ALGO as NCCL reads it: per function (ncclFuncNames),
// per algorithm (ncclAlgoNames), 1 where NCCL may pick it, else 0.
type algoTable [len(ncclFuncNames)][len(ncclAlgoNames)]int8

// row is the algorithms the table allows op (nil for a function NCCL does
// not have).
func (t *algoTable) row(op Collective) *[len(ncclAlgoNames)]int8 {
	if f := indexOf(ncclFuncNames[:], string(op)); f >= 0 {
		return &t[f]
	}
	return nil
}

// allows reports whether the table lets NCCL pick the algorithm named alg
// (an NCCL name) for op.
func (t *algoTable) allows(op Collective, alg string) bool {
	r, a := t.row(op), indexOf(ncclAlgoNames[:], alg)
	return r != nil && a >= 0 && r[a] == 1
}

// protoTable is NCCL_PROTO as NCCL reads it: per function
// (ncclFuncNames), per Protocol, 1 on, 0 off, -1 NCCL's default where no
// clause named the function (tuning.cc starts every row at 1, LL128 at 2:
// on only where its NVLink and GPU checks pass). A clause sets its rows
// whole, so "^LL" turns LL128 on, not back to its default.
type protoTable [len(ncclFuncNames)][NumProtocols]int8

// row is the protocols the table allows op (nil for a function NCCL does
// not have).
func (t *protoTable) row(op Collective) *[NumProtocols]int8 {
	if f := indexOf(ncclFuncNames[:], string(op)); f >= 0 {
		return &t[f]
	}
	return nil
}

// strtokFields splits s as C's strtok_r does on sep: the non-empty runs
// between separators, each with its offset in s (NCCL tells the first
// clause by its offset: a leading ";" makes the first clause not first).
func strtokFields(s string, sep byte) (fields []string, offsets []int) {
	start := -1
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == sep {
			if start >= 0 {
				fields, offsets = append(fields, s[start:i]), append(offsets, start)
				start = -1
			}
		} else if start < 0 {
			start = i
		}
	}
	return fields, offsets
}

// parseList reads NCCL_ALGO or NCCL_PROTO with NCCL's grammar, as
// parseList (src/graph/tuning.cc, NCCL 2.24 and later) reads both: clauses
// split by ";", each "[function:]list" (the prefix is NCCL's function
// name, any case; only the first clause may lack one, and it applies to
// every function); a list is names of elems (any case) split by ",", or
// "^" and the names to exclude. A clause sets its functions' rows (rows,
// indexed as ncclFuncNames, each as elems, holding NCCL's starting
// values) whole: 1 for what it enables, 0 for the rest; later clauses
// over earlier ones. Separators in a row collapse and nothing is trimmed,
// as strtok_r and strcasecmp have it (" Ring" is no name); a clause's
// text after a second ":" is ignored, as NCCL ignores it. Errors are
// NCCL's refusals (ncclInvalidUsage), and a clause of ":" alone, which
// NCCL reads through a null pointer; kind names an element ("algorithm")
// and example shows the per-collective form.
func parseList(s string, elems []string, kind, example string, rows [][]int8) error {
	clauses, offsets := strtokFields(s, ';')
	for k, clause := range clauses {
		parts, _ := strtokFields(clause, ':')
		var prefix, list string
		switch {
		case len(parts) == 0:
			return fmt.Errorf("clause %q names neither a function nor %s %s", clause, map[bool]string{true: "an", false: "a"}[kind == "algorithm"], kind)
		case len(parts) == 1:
			if offsets[k] != 0 {
				return fmt.Errorf("clause %q has no function: every clause but the first needs one (function:list, the function one of %s)", clause, strings.Join(ncclFuncNames[:], ", "))
			}
			list = parts[0]
		default:
			prefix, list = parts[0], parts[1]
		}
		exclude := strings.HasPrefix(list, "^")
		list = strings.TrimPrefix(list, "^")
		names, _ := strtokFields(list, ',')
		on, off := int8(1), int8(0)
		if exclude {
			on, off = 0, 1
		}
		matched := false
		for f := range rows {
			if prefix != "" && !strings.EqualFold(prefix, ncclFuncNames[f]) {
				continue
			}
			matched = true
			for e := range rows[f] {
				rows[f][e] = off
			}
			for _, n := range names {
				e := indexOf(elems, n)
				if e < 0 {
					return fmt.Errorf("unknown %s %q (want NCCL's %s, a comma list, ^ to exclude, per collective as %s)", kind, n, strings.Join(elems, ", "), example)
				}
				rows[f][e] = on
			}
		}
		if !matched {
			return fmt.Errorf("unknown function %q (want one of NCCL's %s before the \":\")", prefix, strings.Join(ncclFuncNames[:], ", "))
		}
	}
	return nil
}

// parseAlgoTable reads NCCL_ALGO with NCCL's grammar (parseList; every
// algorithm for every function to start with, as tuning.cc has it).
func parseAlgoTable(s string) (algoTable, error) {
	var t algoTable
	rows := make([][]int8, len(t))
	for f := range t {
		for a := range t[f] {
			t[f][a] = 1
		}
		rows[f] = t[f][:]
	}
	err := parseList(s, ncclAlgoNames[:], "algorithm", "allreduce:tree;allgather:ring", rows)
	return t, err
}

// parseProtoTable reads NCCL_PROTO with NCCL's grammar (parseList; every
// function starts at NCCL's default: LL and Simple on, LL128 -1).
func parseProtoTable(s string) (protoTable, error) {
	var t protoTable
	rows := make([][]int8, len(t))
	for f := range t {
		t[f] = [NumProtocols]int8{1, -1, 1}
		rows[f] = t[f][:]
	}
	err := parseList(s, protoNames[:], "protocol", "LL,Simple;allreduce:^LL", rows)
	return t, err
}

// parseProto parses NCCL_PROTO with NCCL's grammar (parseProtoTable) and
// refuses, beyond what NCCL refuses, an all-reduce left no protocol, as
// parseAlgo refuses one left neither Ring nor Tree: NCCL fails every
// all-reduce then ("No algorithm/protocol available", src/enqueue.cc),
// and tpscope's steps run one. An all-gather or reduce-scatter left none
// is the step's question (Settings.Fails).
func parseProto(s string) (protoTable, error) {
	t, err := parseProtoTable(s)
	if err != nil {
		return t, fmt.Errorf("NCCL_PROTO %q: %w", s, err)
	}
	if *t.row(AllReduce) == ([NumProtocols]int8{}) {
		return t, fmt.Errorf("NCCL_PROTO %q leaves allreduce no protocol, so NCCL fails every all-reduce (\"No algorithm/protocol available\"): want one of LL, LL128, Simple for it", s)
	}
	return t, nil
}

// Protocols is what NCCL_PROTO lets NCCL pick for op (its own clause
// where it has one): per Protocol 1 on, 0 off, -1 NCCL's default (LL128
// on NVLink only). A function NCCL does not have (send/recv) follows no
// row: LL is off for it only where every function's row has it off, as
// tpscope has priced NCCL_PROTO without LL.
func (p Parsed) Protocols(op Collective) [NumProtocols]int8 {
	if r := p.protos.row(op); r != nil {
		return *r
	}
	out := [NumProtocols]int8{0, -1, 1}
	for _, r := range p.protos {
		if r[LL] != 0 {
			out[LL] = 1
		}
	}
	return out
}

// nodeAlgorithms are the algorithms NCCL runs op with on one node of
// several GPUs, tpscope's box, before NCCL_ALGO: NCCL src/graph/tuning.cc
// ncclTopoTuneModel gives all-gather and reduce-scatter Ring, PAT, NVLS
// and CollNetDirect only, all-reduce every algorithm but PAT; it then
// disables NVLSTree on a single node and CollNetDirect, CollNetChain
// without a CollNet plugin (collnetEnable 0), and ncclPatEnable leaves PAT
// to one GPU a node. NVLS runs only where the GPUs map NVLink SHARP
// multicast memory (src/transport/nvls.cc ncclNvlsInit:
// CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, an NVSwitch of Hopper or
// later; src/init.cc drops it where its graph finds no channel): nvls.
func nodeAlgorithms(op Collective, nvls bool) []string {
	a := []string{"Ring"}
	if op == AllReduce {
		a = append(a, "Tree")
	}
	if nvls {
		a = append(a, "NVLS")
	}
	return a
}

// Algorithms returns the algorithms NCCL may pick for op on one node of
// several GPUs (nvls: whether they have NVLink SHARP, nodeAlgorithms)
// under NCCL_ALGO (op's own clause where it has one) and NCCL_PROTO,
// split into those tpscope prices (Ring, Tree) and those it does not
// (NVLS). NVLS runs with the Simple protocol alone (src/graph/tuning.cc
// ncclTopoTuneModel, NCCL 2.21 to 2.29: "if ((a == NCCL_ALGO_NVLS || a ==
// NCCL_ALGO_NVLS_TREE) && p != NCCL_PROTO_SIMPLE) continue;", so its LL
// and LL128 bandwidths stay 0, for which ncclTopoGetAlgoTime gives the
// time -1 that the selection skips), so an
// NCCL_PROTO that turns Simple off for op leaves NVLS out. Both empty:
// NCCL has no algorithm/protocol pair for op and fails the call
// (src/enqueue.cc topoGetAlgoInfo: "no algorithm/protocol available for
// function AllGather ...", ncclInvalidUsage where NCCL_ALGO or NCCL_PROTO
// is set). A name the node lacks (NVLS on PCIe, PAT, NVLSTree,
// CollNet*) enables nothing. s must be valid (Validate): an NCCL_ALGO
// NCCL refuses gives nothing.
func (s Settings) Algorithms(op Collective, nvls bool) (priced, unmodelled []string) {
	t, err := parseAlgoTable(s.Algo)
	if err != nil {
		return nil, nil
	}
	for _, alg := range nodeAlgorithms(op, nvls) {
		if !t.allows(op, alg) || (alg == "NVLS" && s.noSimple(op)) {
			continue
		}
		if indexOf(algoNames[:], alg) >= 0 {
			priced = append(priced, alg)
		} else {
			unmodelled = append(unmodelled, alg)
		}
	}
	return priced, unmodelled
}

// Fails reports whether NCCL has nothing to run op with on one node of
// several GPUs, so it fails the call (src/enqueue.cc topoGetAlgoInfo: "No
// algorithm/protocol available", ncclInvalidUsage): NCCL_ALGO leaves op
// no algorithm (Algorithms: a list of all-reduce-only algorithms (Tree,
// NVLSTree, CollNetChain) for an all-gather, of algorithms the node lacks
// (NVLS where nvls is false: a PCIe box), or an exclusion of all it has
// (^Ring without NVLS)), or NCCL_PROTO leaves it no protocol (NoProtocol),
// or the two leave it no pair (NVLSWithoutSimple: NVLS alone, Simple
// off).
func (s Settings) Fails(op Collective, nvls bool) bool {
	priced, unmodelled := s.Algorithms(op, nvls)
	return len(priced)+len(unmodelled) == 0 || s.NoProtocol(op)
}

// NoProtocol reports whether NCCL_PROTO leaves op no protocol (op's own
// clause, as "allgather:^LL,LL128,Simple"): NCCL fails the call whatever
// the algorithm. s must be valid (Validate): an NCCL_PROTO NCCL refuses
// gives false.
func (s Settings) NoProtocol(op Collective) bool {
	t, err := parseProtoTable(s.Proto)
	if err != nil {
		return false
	}
	r := t.row(op)
	return r != nil && *r == [NumProtocols]int8{}
}

// noSimple reports whether NCCL_PROTO turns the Simple protocol off for
// op (its own clause, or the list for every function), the one protocol
// NCCL runs NVLS with. An NCCL_PROTO NCCL refuses gives false.
func (s Settings) noSimple(op Collective) bool {
	t, err := parseProtoTable(s.Proto)
	if err != nil {
		return false
	}
	r := t.row(op)
	return r != nil && r[Simple] == 0
}

// NVLSWithoutSimple reports whether NCCL_ALGO leaves op NVLS alone on the
// node (nvls: NVLink SHARP among its GPUs), the only algorithm it lets
// NCCL pick there, while NCCL_PROTO turns Simple off for op, though LL or
// LL128 stay on: NCCL runs NVLS with Simple alone (Algorithms), so op has
// no algorithm/protocol pair and NCCL fails the call, a setting of both
// flags together (Fails holds).
func (s Settings) NVLSWithoutSimple(op Collective, nvls bool) bool {
	if !nvls || !s.noSimple(op) || s.NoProtocol(op) {
		return false
	}
	t, err := parseAlgoTable(s.Algo)
	if err != nil || !t.allows(op, "NVLS") {
		return false
	}
	for _, alg := range nodeAlgorithms(op, nvls) {
		if alg != "NVLS" && t.allows(op, alg) {
			return false
		}
	}
	return true
}

// GathersFail reports whether NCCL has nothing to run an all-gather or a
// reduce-scatter with on one node of several GPUs (Fails), where it had
// been priced as Ring.
func (s Settings) GathersFail(nvls bool) bool {
	return s.Fails(AllGather, nvls) || s.Fails(ReduceScatter, nvls)
}

// GathersLackProtocol reports whether NCCL_PROTO leaves an all-gather or
// a reduce-scatter no protocol (NoProtocol): the part of GathersFail that
// is --nccl-proto's.
func (s Settings) GathersLackProtocol() bool {
	return s.NoProtocol(AllGather) || s.NoProtocol(ReduceScatter)
}

// GathersNVLSWithoutSimple reports whether an all-gather or a
// reduce-scatter is left NVLS alone without the Simple protocol
// (NVLSWithoutSimple): the part of GathersFail that is NCCL_ALGO's and
// NCCL_PROTO's together.
func (s Settings) GathersNVLSWithoutSimple(nvls bool) bool {
	return s.NVLSWithoutSimple(AllGather, nvls) || s.NVLSWithoutSimple(ReduceScatter, nvls)
}

// Algorithms is what NCCL_ALGO lets NCCL pick for op among the
// algorithms tpscope models (op's clause where it has one); all of them
// for a function NCCL does not have.
func (p Parsed) Algorithms(op Collective) [NumAlgorithms]bool {
	var on [NumAlgorithms]bool
	if p.algos.row(op) == nil {
		return [NumAlgorithms]bool{true, true}
	}
	for a := range on {
		on[a] = p.algos.allows(op, algoNames[a])
	}
	return on
}

// parseAlgo parses NCCL_ALGO with NCCL's grammar (parseAlgoTable; every
// algorithm for every function when unset) and refuses, beyond what NCCL
// refuses, an all-reduce tpscope cannot price: one whose list (its own
// clause's, or the list for every function) enables neither Ring nor
// Tree, as what it is: only algorithms tpscope does not model, or none.
// An all-gather or reduce-scatter left without Ring is the box's
// question (Settings.Fails; NVLS may run it).
func parseAlgo(s string) (algoTable, error) {
	t, err := parseAlgoTable(s)
	if err != nil {
		return t, fmt.Errorf("NCCL_ALGO %q: %w", s, err)
	}
	ar := t.row(AllReduce)
	if ar[indexOf(ncclAlgoNames[:], "Ring")] == 1 || ar[indexOf(ncclAlgoNames[:], "Tree")] == 1 {
		return t, nil
	}
	// The all-reduce's list: the last clause that set its row.
	list, where := "", ""
	clauses, _ := strtokFields(s, ';')
	for _, c := range clauses {
		parts, _ := strtokFields(c, ':')
		switch {
		case len(parts) == 1:
			list = parts[0]
		case strings.EqualFold(parts[0], string(AllReduce)):
			list, where = parts[1], " for allreduce"
		}
	}
	var named []string
	if !strings.HasPrefix(list, "^") {
		named, _ = strtokFields(list, ',')
	}
	if len(named) > 0 {
		return t, fmt.Errorf("NCCL_ALGO %q: %s not modelled%s (tpscope prices NCCL's Ring and Tree): want Ring or Tree among them",
			s, strings.Join(named, ", ")+map[bool]string{true: " is", false: " are"}[len(named) == 1], where)
	}
	return t, fmt.Errorf("NCCL_ALGO %q enables neither Ring nor Tree%s", s, where)
}
