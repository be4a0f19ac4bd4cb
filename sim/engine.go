package sim

import (
	"fmt"

	"github.com/tpscope/tpscope/model"
)

// The discrete-event engine.
//
// Model: every rank has a host thread that launches its ops in issue order
// (a CPU launch queue), and two device streams, compute and communication.
// An op starts on the device at
//
//	start = max(launch done on the host, every dependency finished, its stream free)
//
// and a collective additionally waits until every member of its group has
// reached it (then it starts and finishes for all members together). The
// host may run at most Host.LaunchQueueDepth launches ahead of the device
// (0: unlimited). Eager mode charges Device.LaunchEagerUs of host time per
// op (more for an NCCL call), so a host slower than the device becomes the
// bottleneck, and the per-kernel front-end gap of a stream launch,
// max(Device.KernelGapEagerUs, Device.LaunchGraphUs), of device time;
// CUDA-graph mode charges one graph launch per step on the host and
// Device.LaunchGraphUs of device time per kernel node. The device-side gap
// exists in both modes, and is smaller in a graph (its nodes were set up
// at instantiation), so a graph never runs the same ops slower.
//
// Ops are processed rank by rank in issue order, which is exact because a
// stream is a FIFO and dependencies point backwards; collectives are the
// only cross-rank events and block a rank until the group has arrived. The
// engine is deterministic: no maps, no goroutines, ties resolved by rank
// order. Complexity O(ops + deps) per step.

// Why an op started when it did (for the critical path).
const (
	waitNone   uint8 = iota // started at time 0
	waitLaunch              // the host launch finished last
	waitDep                 // a dependency finished last
	waitStream              // the previous op on its stream finished last
	waitPeer                // a collective peer arrived last
)

var waitNames = [...]string{"start", "launch", "dep", "stream", "peer"}

// Wait is what released an op: "start" (time 0), "launch" (its host
// launch finished last), "dep" (a dependency), "stream" (the previous op
// of its stream) or "peer" (the last member of its collective's group).
type Wait uint8

func (w Wait) String() string {
	if int(w) < len(waitNames) {
		return waitNames[w]
	}
	return "unknown"
}

// MarshalText writes the name (JSON uses it).
func (w Wait) MarshalText() ([]byte, error) { return []byte(w.String()), nil }

// engineOp is one op prepared for the engine: costs resolved, deps flattened.
type engineOp struct {
	durUs    float64 // device time, incl. the per-kernel launch gap
	launchUs float64 // host time to launch it
	depLo    int32   // deps[depLo:depHi] are rank-local indices; depLo < 0: previous op
	depHi    int32
	stream   uint8 // 0 compute, 1 communication
	coll     bool
}

// engine holds the flat arrays of one step; reused across predictions.
type engine struct {
	ops     []engineOp
	deps    []int32
	rankOff []int32 // ops of rank r are ops[rankOff[r]:rankOff[r+1]]

	start, end []float64
	pred       []int32 // global index of the op that released this one (-1 none)
	why        []uint8

	queueDepth   int
	stepLaunchUs float64 // host time before the first op (graph launch)

	// per-rank state of the multi-rank run
	ptr        []int32
	hostT      []float64
	streamLast [][2]int32
	arrived    []int32   // rank-local index of the collective the rank waits at, -1 none
	arrivedAt  []float64 // its ready time
	arrivedWhy []uint8
	arrivedPre []int32
}

func (e *engine) reset(nOps int) {
	e.ops = e.ops[:0]
	e.deps = e.deps[:0]
	e.rankOff = append(e.rankOff[:0], 0)
	e.start = grow(e.start, nOps)
	e.end = grow(e.end, nOps)
	e.pred = grow(e.pred, nOps)
	e.why = grow(e.why, nOps)
}

// grow returns s resized to n, reusing its array when it is large enough
// (the contents are not cleared: every caller overwrites them).
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// ready computes when op g (rank-local index i, rank offset off) may start,
// given the rank's host clock and stream state, and charges its launch.
func (e *engine) ready(g, i, off int32, hostT *float64, streamLast *[2]int32) (float64, int32, uint8) {
	op := &e.ops[g]
	hs := *hostT
	if d := int32(e.queueDepth); d > 0 && i >= d {
		if t := e.start[g-d]; t > hs {
			hs = t
		}
	}
	*hostT = hs + op.launchUs
	t, pred, why := *hostT, int32(-1), waitLaunch
	if *hostT == 0 {
		why = waitNone
	}
	if op.depLo < 0 {
		if i > 0 {
			if f := e.end[g-1]; f > t {
				t, pred, why = f, g-1, waitDep
			}
		}
	} else {
		for _, d := range e.deps[op.depLo:op.depHi] {
			if f := e.end[off+d]; f > t {
				t, pred, why = f, off+d, waitDep
			}
		}
	}
	if p := streamLast[op.stream]; p >= 0 {
		if f := e.end[p]; f > t {
			t, pred, why = f, p, waitStream
		}
	}
	return t, pred, why
}

// runSymmetric simulates the single rank in e (a representative of ranks
// whose op lists are identical): a collective starts as soon as this rank
// is ready, because every peer is ready at the same instant.
func (e *engine) runSymmetric() {
	n := int32(len(e.ops))
	hostT := e.stepLaunchUs
	last := [2]int32{-1, -1}
	for g := int32(0); g < n; g++ {
		t, pred, why := e.ready(g, g, 0, &hostT, &last)
		e.start[g], e.end[g], e.pred[g], e.why[g] = t, t+e.ops[g].durUs, pred, why
		last[e.ops[g].stream] = g
	}
}

// runRanks simulates every rank; collectives synchronize their groups. It
// returns an error when the ranks' collectives do not match (a deadlock in
// a real run).
func (e *engine) runRanks(s *model.Schedule) error {
	nr := len(e.rankOff) - 1
	e.ptr = grow(e.ptr, nr)
	e.arrived = grow(e.arrived, nr)
	e.arrivedPre = grow(e.arrivedPre, nr)
	e.arrivedAt = grow(e.arrivedAt, nr)
	e.arrivedWhy = grow(e.arrivedWhy, nr)
	e.hostT = grow(e.hostT, nr)
	if cap(e.streamLast) < nr {
		e.streamLast = make([][2]int32, nr)
	}
	e.streamLast = e.streamLast[:nr]
	for r := 0; r < nr; r++ {
		e.ptr[r], e.arrived[r], e.hostT[r] = 0, -1, e.stepLaunchUs
		e.streamLast[r] = [2]int32{-1, -1}
	}
	for {
		progress, done := false, true
		for r := 0; r < nr; r++ {
			off, hi := e.rankOff[r], e.rankOff[r+1]
			for e.ptr[r] < hi-off {
				i := e.ptr[r]
				g := off + i
				if !e.ops[g].coll {
					t, pred, why := e.ready(g, i, off, &e.hostT[r], &e.streamLast[r])
					e.start[g], e.end[g], e.pred[g], e.why[g] = t, t+e.ops[g].durUs, pred, why
					e.streamLast[r][e.ops[g].stream] = g
					e.ptr[r]++
					progress = true
					continue
				}
				if e.arrived[r] != i {
					t, pred, why := e.ready(g, i, off, &e.hostT[r], &e.streamLast[r])
					e.arrived[r], e.arrivedAt[r], e.arrivedPre[r], e.arrivedWhy[r] = i, t, pred, why
					progress = true
				}
				if !e.tryCollective(s, r) {
					break
				}
				progress = true
			}
			if e.ptr[r] < hi-off {
				done = false
			}
		}
		if done {
			return nil
		}
		if !progress {
			return e.deadlock(s)
		}
	}
}

// tryCollective completes the collective rank r waits at if every member of
// its group waits at the same op ID.
func (e *engine) tryCollective(s *model.Schedule, r int) bool {
	op := &s.Ranks[r][e.arrived[r]]
	for _, m := range op.Group {
		if m < 0 || m >= len(e.ptr) || e.arrived[m] < 0 || e.arrived[m] != e.ptr[m] {
			return false
		}
		if s.Ranks[m][e.arrived[m]].ID != op.ID {
			return false
		}
	}
	latest := r
	for _, m := range op.Group {
		if e.arrivedAt[m] > e.arrivedAt[latest] {
			latest = m
		}
	}
	t := e.arrivedAt[latest]
	peer := e.rankOff[latest] + e.arrived[latest]
	for _, m := range op.Group {
		g := e.rankOff[m] + e.arrived[m]
		p, w := e.arrivedPre[m], e.arrivedWhy[m]
		if e.arrivedAt[m] < t {
			p, w = peer, waitPeer
		}
		e.start[g], e.end[g], e.pred[g], e.why[g] = t, t+e.ops[g].durUs, p, w
		e.streamLast[m][e.ops[g].stream] = g
		e.ptr[m]++
		e.arrived[m] = -1
	}
	return true
}

// deadlock names the first blocked collective and what its peers wait at.
func (e *engine) deadlock(s *model.Schedule) error {
	for r := range e.ptr {
		if e.arrived[r] < 0 {
			continue
		}
		op := &s.Ranks[r][e.arrived[r]]
		for _, m := range op.Group {
			if m < 0 || m >= len(s.Ranks) {
				return fmt.Errorf("sim: op %s on rank %d: group member %d is not a rank of the schedule (%d ranks)", op.ID, r, m, len(s.Ranks))
			}
			at := "the end of its ops"
			if p := e.ptr[m]; int(p) < len(s.Ranks[m]) {
				at = s.Ranks[m][p].ID
			}
			if e.arrived[m] < 0 || s.Ranks[m][e.arrived[m]].ID != op.ID {
				return fmt.Errorf("sim: collective %s on rank %d never completes: rank %d of its group waits at %s (collectives must be issued in the same order on every member)", op.ID, r, m, at)
			}
		}
	}
	return fmt.Errorf("sim: schedule deadlocks (ranks wait on each other)")
}
