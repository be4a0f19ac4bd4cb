package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
)

const tolUs = 1e-9

// engineFor builds an engine over hand-made ops of one or more ranks.
func engineFor(ranks [][]engineOp, deps []int32) *engine {
	e := &engine{}
	n := 0
	for _, r := range ranks {
		n += len(r)
	}
	e.reset(n)
	e.deps = append(e.deps, deps...)
	for _, r := range ranks {
		e.ops = append(e.ops, r...)
		e.rankOff = append(e.rankOff, int32(len(e.ops)))
	}
	return e
}

func op(dur, launch float64) engineOp { return engineOp{durUs: dur, launchUs: launch, depLo: -1} }

// Every expected time below is worked out by hand from the engine's rule
// start = max(host launch done, deps done, stream free).
func TestEngineSingleRank(t *testing.T) {
	cases := []struct {
		name      string
		ops       []engineOp
		deps      []int32
		stepUs    float64
		depth     int
		wantStart []float64
		wantWhy   []uint8
	}{
		{
			// Eager, host slower than device: launches end at 6, 12, 18;
			// each 1 us kernel starts when its launch is done.
			name: "eager launch bound", ops: []engineOp{op(1, 6), op(1, 6), op(1, 6)},
			wantStart: []float64{6, 12, 18}, wantWhy: []uint8{waitLaunch, waitLaunch, waitLaunch},
		},
		{
			// Eager, device slower than host: launches end at 6, 12, 18
			// but each kernel waits for the previous 10 us one: 6, 16, 26.
			name: "eager device bound", ops: []engineOp{op(10, 6), op(10, 6), op(10, 6)},
			wantStart: []float64{6, 16, 26}, wantWhy: []uint8{waitLaunch, waitDep, waitDep},
		},
		{
			// Graph: one 6 us launch for the step, then back to back.
			name: "graph", ops: []engineOp{op(1, 0), op(1, 0), op(1, 0)}, stepUs: 6,
			wantStart: []float64{6, 7, 8}, wantWhy: []uint8{waitLaunch, waitDep, waitDep},
		},
		{
			// Queue depth 1: launch of op 1 waits until op 0 started (t=1),
			// op 2's until op 1 started. Host: 0-1 op0, op0 starts 1; op1
			// launch 1-2, starts max(2, end op0 = 101) = 101; op2 launch
			// may begin at 101, done 102, starts max(102, 201) = 201.
			name: "queue depth", ops: []engineOp{op(100, 1), op(100, 1), op(100, 1)}, depth: 1,
			wantStart: []float64{1, 101, 201}, wantWhy: []uint8{waitLaunch, waitDep, waitDep},
		},
		{
			// Overlap: op1 (comm stream) depends on op0 only; op2 (compute)
			// depends on nothing before it but shares op0's stream; op3
			// joins both. No launch cost. op0 0-10, op1 10-30 (comm),
			// op2 10-15 (after op0 on the stream), op3 at max(30, 15) = 30.
			name: "overlap",
			ops: []engineOp{
				op(10, 0),
				{durUs: 20, depLo: 0, depHi: 1, stream: 1},
				{durUs: 5, depLo: 1, depHi: 1},
				{durUs: 1, depLo: 1, depHi: 3},
			},
			deps:      []int32{0, 1, 2},
			wantStart: []float64{0, 10, 10, 30}, wantWhy: []uint8{waitNone, waitDep, waitStream, waitDep},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := engineFor([][]engineOp{tc.ops}, tc.deps)
			e.stepLaunchUs, e.queueDepth = tc.stepUs, tc.depth
			e.runSymmetric()
			for i, w := range tc.wantStart {
				if math.Abs(e.start[i]-w) > tolUs {
					t.Errorf("op %d start %v, want %v", i, e.start[i], w)
				}
				if e.why[i] != tc.wantWhy[i] {
					t.Errorf("op %d waited on %s, want %s", i, waitNames[e.why[i]], waitNames[tc.wantWhy[i]])
				}
			}
			// The multi-rank path must agree on a single rank.
			f := engineFor([][]engineOp{tc.ops}, tc.deps)
			f.stepLaunchUs, f.queueDepth = tc.stepUs, tc.depth
			s := &model.Schedule{Ranks: [][]model.Op{make([]model.Op, len(tc.ops))}}
			if err := f.runRanks(s); err != nil {
				t.Fatal(err)
			}
			for i := range tc.ops {
				if f.start[i] != e.start[i] || f.end[i] != e.end[i] {
					t.Errorf("op %d: runRanks [%v,%v] != runSymmetric [%v,%v]", i, f.start[i], f.end[i], e.start[i], e.end[i])
				}
			}
		})
	}
}

// A collective starts when the last member is ready and ends together.
func TestEngineCollectiveWaitsForGroup(t *testing.T) {
	group := []int{0, 1}
	s := &model.Schedule{Ranks: [][]model.Op{
		{{ID: "a"}, {ID: "ar", Kind: model.KindCollective, Group: group}, {ID: "b"}},
		{{ID: "a"}, {ID: "ar", Kind: model.KindCollective, Group: group}, {ID: "b"}},
	}}
	coll := engineOp{durUs: 3, depLo: -1, coll: true}
	// rank 0: 5 us of compute, rank 1: 10 us; all-reduce 3 us starts at
	// 10 on both, ends at 13; the next op (1 us) ends at 14 on both.
	e := engineFor([][]engineOp{{op(5, 0), coll, op(1, 0)}, {op(10, 0), coll, op(1, 0)}}, nil)
	if err := e.runRanks(s); err != nil {
		t.Fatal(err)
	}
	want := []struct{ start, end float64 }{{0, 5}, {10, 13}, {13, 14}, {0, 10}, {10, 13}, {13, 14}}
	for i, w := range want {
		if e.start[i] != w.start || e.end[i] != w.end {
			t.Errorf("op %d: [%v,%v], want [%v,%v]", i, e.start[i], e.end[i], w.start, w.end)
		}
	}
	if e.why[1] != waitPeer || e.pred[1] != 4 {
		t.Errorf("rank 0's all-reduce released by %s (pred %d), want peer (op 4)", waitNames[e.why[1]], e.pred[1])
	}
	if path := criticalPath(e, 2); len(path) != 4 || path[0] != 3 || path[3] != 2 {
		t.Errorf("critical path %v, want [3 4 1 2] (rank 1's compute, its all-reduce, rank 0's)", path)
	}
}

func TestEngineMismatchedCollectivesFail(t *testing.T) {
	group := []int{0, 1}
	s := &model.Schedule{Ranks: [][]model.Op{
		{{ID: "x", Kind: model.KindCollective, Group: group}, {ID: "y", Kind: model.KindCollective, Group: group}},
		{{ID: "y", Kind: model.KindCollective, Group: group}, {ID: "x", Kind: model.KindCollective, Group: group}},
	}}
	c := engineOp{durUs: 1, depLo: -1, coll: true}
	e := engineFor([][]engineOp{{c, c}, {c, c}}, nil)
	err := e.runRanks(s)
	if err == nil || !strings.Contains(err.Error(), "never completes") {
		t.Fatalf("err %v, want a deadlock naming the collective", err)
	}
}
