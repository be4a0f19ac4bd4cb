package ncclenv

import (
	"strings"
	"testing"
)

// refParseList is NCCL's parseList (src/graph/tuning.cc, NCCL 2.24 and
// later) transcribed step by step with a C strtok_r over a byte buffer,
// kept apart from parseList's field splitting so the two read the
// grammar independently. elems are NCCL's names (ncclAlgoStr or
// ncclProtoStr, spelled here again) and init each function's starting
// row (tuning.cc: 1 for every algorithm; 1, 2, 1 for LL, LL128, Simple).
// ok is false where NCCL returns ncclInvalidUsage (or, for a clause of
// ":" alone, dereferences null).
func refParseList(str string, elems []string, init []int) (list [5][]int, ok bool) {
	funcs := []string{"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"}
	for p := range list {
		list[p] = append([]int(nil), init...)
	}
	// strtok_r over buf from *save: -1 is NULL.
	strtok := func(buf []byte, start int, save *int, delim byte) int {
		i := start
		if i < 0 {
			i = *save
		}
		for i < len(buf) && buf[i] == delim {
			i++
		}
		if i >= len(buf) {
			*save = len(buf)
			return -1
		}
		j := i
		for j < len(buf) && buf[j] != delim {
			j++
		}
		*save = j
		if j < len(buf) {
			*save = j + 1
		}
		return i
	}
	word := func(buf []byte, at int, delim byte) string {
		j := at
		for j < len(buf) && buf[j] != delim {
			j++
		}
		return string(buf[at:j])
	}
	full := []byte(str)
	var saveFull int
	for tok := strtok(full, 0, &saveFull, ';'); tok >= 0; tok = strtok(full, -1, &saveFull, ';') {
		sub := []byte(word(full, tok, ';'))
		var saveSub int
		pi := strtok(sub, 0, &saveSub, ':')
		ei := strtok(sub, -1, &saveSub, ':')
		var prefix, elemList string
		hasPrefix := true
		if ei < 0 {
			if tok != 0 {
				return list, false
			}
			if pi < 0 {
				return list, false // elemList = NULL; NCCL reads through it
			}
			elemList, hasPrefix = word(sub, pi, ':'), false
		} else {
			prefix, elemList = word(sub, pi, ':'), word(sub, ei, ':')
		}
		set, unset := 1, 0
		if len(elemList) > 0 && elemList[0] == '^' {
			set, unset = 0, 1
			elemList = elemList[1:]
		}
		found := false
		for p := range funcs {
			if hasPrefix && !strings.EqualFold(prefix, funcs[p]) {
				continue
			}
			found = true
			for e := range elems {
				list[p][e] = unset
			}
			eb := []byte(elemList)
			var saveE int
			for ti := strtok(eb, 0, &saveE, ','); ti >= 0; ti = strtok(eb, -1, &saveE, ',') {
				name, e := word(eb, ti, ','), 0
				for e = 0; e < len(elems); e++ {
					if strings.EqualFold(name, elems[e]) {
						list[p][e] = set
						break
					}
				}
				if e == len(elems) {
					return list, false
				}
			}
		}
		if !found {
			return list, false
		}
	}
	return list, true
}

// refAlgoNames and refProtoNames are NCCL's ncclAlgoStr and ncclProtoStr
// (src/init.cc), spelled apart from the package's tables.
var (
	refAlgoNames  = []string{"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"}
	refProtoNames = []string{"LL", "LL128", "Simple"}
)

// ncclAlgoSeeds are NCCL_ALGO values from NCCL's own source and docs and
// from its users' reports: the grammar's examples (tuning.cc's comment
// above parseList), the documented default list of NCCL 2.14
// (docs/env.rst, NVIDIA/nccl#790, spelled "Collnet"), the names of
// algorithms one at a time, the old single CollNet of NCCL before 2.14,
// and the exclusions users set to keep NVLS or Tree off.
var ncclAlgoSeeds = []string{
	"ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring",
	"Tree,Ring,CollnetDirect,CollnetChain",
	"Ring", "Tree", "Ring,Tree", "^Tree", "^NVLS", "NVLS", "NVLSTree", "PAT", "CollNet", "CollNetDirect", "CollNetChain",
	"^Ring", "Tree,NVLS", "allreduce:tree;allgather:ring", "allreduce:^nvls", "Ring;allgather:^Ring",
	"allreduce:tree", ";ring", "ring;", "ring;;allreduce:tree", "allreduce:", ":", "^", "allreduce:tree:ring",
	" Ring", "Ring ", "ring,,tree", "allgather:nvls", "sendrecv:ring", "AllReduce:Tree;ReduceScatter:Ring",
}

// TestAlgoGrammarFollowsNCCL: NCCL_ALGO reads as NCCL 2.24+ reads it.
// Per-collective clauses set their function's algorithms (NCCL accepts
// "allreduce:tree;allgather:ring", which tpscope had refused as an
// unknown algorithm), and names NCCL refuses are refused ("CollNet",
// which tpscope had accepted: NCCL knows CollNetDirect and CollNetChain
// since 2.14 and refuses unknown names since 2.24), each in one line.
func TestAlgoGrammarFollowsNCCL(t *testing.T) {
	for _, c := range []struct {
		algo   string
		ar, ag string // the modelled algorithms per op when accepted; "" refused
		errHas string
	}{
		{"allreduce:tree;allgather:ring", "Tree", "Ring", ""},
		{"Ring,Tree;allreduce:^ring", "Tree", "Ring", ""},
		{"AllReduce:Tree", "Tree", "Ring", ""}, // other functions keep NCCL's default
		{"Tree;allgather:ring", "Tree", "Ring", ""},
		{"allgather:^ring", "Ring Tree", "", ""}, // no Ring for the gathers: the box's question (Fails)
		{"ring;;allreduce:tree", "Tree", "Ring", ""},
		{"CollNet", "", "", `unknown algorithm "CollNet"`},
		{"CollNet,Ring", "", "", `unknown algorithm "CollNet"`},
		{"allreduce:tree;ring", "", "", "every clause but the first needs one"},
		{";ring", "", "", "every clause but the first needs one"},
		{"allgahter:ring", "", "", `unknown function "allgahter"`},
		{"allreduce:", "", "", `unknown algorithm "allreduce"`},
		{":", "", "", "names neither"},
		{" Ring", "", "", `unknown algorithm " Ring"`},
		{"allreduce:nvls", "", "", "nvls is not modelled for allreduce"},
		{"Ring;allreduce:^Ring,Tree", "", "", "enables neither Ring nor Tree for allreduce"},
	} {
		s := Settings{Algo: c.algo}
		p, err := s.Parse()
		if c.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), c.errHas) || !strings.HasPrefix(err.Error(), "nccl.algo: NCCL_ALGO ") || strings.Contains(err.Error(), "\n") {
				t.Errorf("NCCL_ALGO %q: error %v; want one line containing %q", c.algo, err, c.errHas)
			}
			continue
		}
		if err != nil {
			t.Errorf("NCCL_ALGO %q: %v", c.algo, err)
			continue
		}
		names := func(on [NumAlgorithms]bool, op Collective) string {
			var out []string
			for a, v := range on {
				if v && !(Algorithm(a) == Tree && op != AllReduce) {
					out = append(out, Algorithm(a).String())
				}
			}
			return strings.Join(out, " ")
		}
		if got := names(p.Algorithms(AllReduce), AllReduce); got != c.ar {
			t.Errorf("NCCL_ALGO %q: all-reduce may run %q, want %q", c.algo, got, c.ar)
		}
		if got := names(p.Algorithms(AllGather), AllGather); got != c.ag {
			t.Errorf("NCCL_ALGO %q: all-gather may run %q, want %q", c.algo, got, c.ag)
		}
		if pr, _ := s.Algorithms(AllGather, false); strings.Join(pr, " ") != c.ag {
			t.Errorf("NCCL_ALGO %q: Settings.Algorithms gives the all-gather %q, want %q", c.algo, pr, c.ag)
		}
	}
}

// FuzzAlgoGrammar: on any text, parseAlgoTable accepts exactly what
// NCCL's parseList accepts, with the same table, and refuses in one line;
// Parse then refuses only an all-reduce without Ring and Tree.
func FuzzAlgoGrammar(f *testing.F) {
	for _, s := range ncclAlgoSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, ok := refParseList(s, refAlgoNames, []int{1, 1, 1, 1, 1, 1, 1})
		got, err := parseAlgoTable(s)
		if ok != (err == nil) {
			t.Fatalf("NCCL_ALGO %q: NCCL accepts: %v; tpscope's error: %v", s, ok, err)
		}
		if !ok {
			if _, perr := (Settings{Algo: s}).Parse(); perr == nil || strings.Contains(perr.Error(), "\n") {
				t.Fatalf("NCCL_ALGO %q: Parse error %v; want one line", s, perr)
			}
			return
		}
		for p := range want {
			for e := range want[p] {
				if want[p][e] != int(got[p][e]) {
					t.Fatalf("NCCL_ALGO %q: %s/%s %v, NCCL's %d", s, ncclFuncNames[p], ncclAlgoNames[e], got[p][e], want[p][e])
				}
			}
		}
		_, perr := (Settings{Algo: s}).Parse()
		arOK := want[4][0] == 1 || want[4][1] == 1 // AllReduce: Tree, Ring
		if arOK != (perr == nil) {
			t.Fatalf("NCCL_ALGO %q: all-reduce has Ring or Tree: %v; Parse: %v", s, arOK, perr)
		}
	})
}

// ncclProtoSeeds are NCCL_PROTO values from NCCL's own source and docs
// and from its users' reports: tuning.cc's examples above parseList
// ("LL,Simple;allreduce:^LL", "^LL128;allreduce:LL128"), docs/env.rst's
// single names and "^LL128" (the setting NCCL's troubleshooting gives
// for LL128 data corruption), "LL,LL128,Simple" (NCCL's full list), the
// "Simple" users set to avoid LL hangs over PCIe, and the spellings
// NCCL's strtok_r/strcasecmp reading tells apart (spaces, empty clauses,
// a bare "^", an unknown "LL256", a clause left with no protocol).
var ncclProtoSeeds = []string{
	"LL,Simple;allreduce:^LL", "^LL128;allreduce:LL128",
	"LL", "LL128", "Simple", "simple", "^LL128", "^LL", "^Simple", "^LL,LL128", "LL,LL128,Simple", "^LL,LL128,Simple",
	"LL,Simple", "allreduce:LL;allgather:Simple", "Simple;allgather:,", "allreduce:,", "allgather:^LL,LL128,Simple",
	" LL", "LL ", "LL, Simple", "LL,,Simple", ";LL", "LL;", "LL;;allreduce:simple", "allreduce:", ":", "^", "",
	"allreduce:LL:Simple", "LL256", "sendrecv:LL", "AllReduce:LL128;ReduceScatter:Simple",
}

// TestProtoGrammarFollowsNCCL: NCCL_PROTO reads as NCCL 2.24+ reads it,
// with NCCL_ALGO's parseList. Per-collective clauses set their function's
// protocols (NCCL accepts "LL,Simple;allreduce:^LL", which tpscope had
// refused as an unknown protocol); names are not trimmed (" LL" is no
// name to NCCL; tpscope had trimmed it); an exclusion sets the clause's
// row whole, so "^LL" turns LL128 on (1), not back to its NVLink-only
// default (tpscope had kept it at -1); and an all-reduce left no
// protocol is refused in one line.
func TestProtoGrammarFollowsNCCL(t *testing.T) {
	for _, c := range []struct {
		proto  string
		ar, ag [NumProtocols]int8
		errHas string
	}{
		{"", [3]int8{1, -1, 1}, [3]int8{1, -1, 1}, ""},
		{"LL,Simple;allreduce:^LL", [3]int8{0, 1, 1}, [3]int8{1, 0, 1}, ""},
		{"^LL128;allreduce:LL128", [3]int8{0, 1, 0}, [3]int8{1, 0, 1}, ""},
		{"^LL", [3]int8{0, 1, 1}, [3]int8{0, 1, 1}, ""},
		{"allreduce:LL", [3]int8{1, 0, 0}, [3]int8{1, -1, 1}, ""},
		{"simple;allgather:,", [3]int8{0, 0, 1}, [3]int8{}, ""}, // the gathers' question (Settings.NoProtocol)
		{" LL", [3]int8{}, [3]int8{}, `unknown protocol " LL"`},
		{"LL, Simple", [3]int8{}, [3]int8{}, `unknown protocol " Simple"`},
		{"LL256", [3]int8{}, [3]int8{}, `unknown protocol "LL256"`},
		{"allreduce:LL;Simple", [3]int8{}, [3]int8{}, "every clause but the first needs one"},
		{"sendrecv:LL", [3]int8{}, [3]int8{}, `unknown function "sendrecv"`},
		{":", [3]int8{}, [3]int8{}, "names neither"},
		{"^LL,LL128,Simple", [3]int8{}, [3]int8{}, "leaves allreduce no protocol"},
		{"LL;allreduce:,", [3]int8{}, [3]int8{}, "leaves allreduce no protocol"},
	} {
		s := Settings{Proto: c.proto}
		p, err := s.Parse()
		if c.errHas != "" {
			if err == nil || !strings.Contains(err.Error(), c.errHas) || !strings.HasPrefix(err.Error(), "nccl.proto: NCCL_PROTO ") || strings.Contains(err.Error(), "\n") {
				t.Errorf("NCCL_PROTO %q: error %v; want one line containing %q", c.proto, err, c.errHas)
			}
			continue
		}
		if err != nil {
			t.Errorf("NCCL_PROTO %q: %v", c.proto, err)
			continue
		}
		if got := p.Protocols(AllReduce); got != c.ar {
			t.Errorf("NCCL_PROTO %q: all-reduce protocols %v, want %v", c.proto, got, c.ar)
		}
		if got := p.Protocols(AllGather); got != c.ag {
			t.Errorf("NCCL_PROTO %q: all-gather protocols %v, want %v", c.proto, got, c.ag)
		}
		if got, want := s.NoProtocol(AllGather), c.ag == [3]int8{}; got != want || s.GathersFail(true) != want {
			t.Errorf("NCCL_PROTO %q: NoProtocol(allgather) %v, GathersFail %v; want %v", c.proto, got, s.GathersFail(true), want)
		}
	}
}

// FuzzProtoGrammar: on any text, NCCL_PROTO's table is exactly what
// NCCL's parseList makes of it (LL128's starting 2, NCCL's "on where
// NVLink allows", is tpscope's -1), accepted exactly where NCCL accepts
// it, refused in one line; Parse then refuses only an all-reduce left no
// protocol.
func FuzzProtoGrammar(f *testing.F) {
	for _, s := range ncclProtoSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, ok := refParseList(s, refProtoNames, []int{1, 2, 1})
		got, err := parseProtoTable(s)
		if ok != (err == nil) {
			t.Fatalf("NCCL_PROTO %q: NCCL accepts: %v; tpscope's error: %v", s, ok, err)
		}
		_, perr := (Settings{Proto: s}).Parse()
		if !ok {
			if perr == nil || strings.Contains(perr.Error(), "\n") {
				t.Fatalf("NCCL_PROTO %q: Parse error %v; want one line", s, perr)
			}
			return
		}
		for p := range want {
			for e := range want[p] {
				w := want[p][e]
				if w == 2 {
					w = -1
				}
				if w != int(got[p][e]) {
					t.Fatalf("NCCL_PROTO %q: %s/%s %d, NCCL's %d", s, ncclFuncNames[p], protoNames[e], got[p][e], want[p][e])
				}
			}
		}
		arOK := want[4][0]+want[4][1]+want[4][2] > 0 // AllReduce
		if arOK != (perr == nil) || (perr != nil && strings.Contains(perr.Error(), "\n")) {
			t.Fatalf("NCCL_PROTO %q: all-reduce has a protocol: %v; Parse: %v", s, arOK, perr)
		}
	})
}
