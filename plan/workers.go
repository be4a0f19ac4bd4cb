package plan

import (
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/tpscope/tpscope/sim"
)

// The parallel driver of a sweep.
//
// Work: configurations come from Enumerate with the boxes of one GPU
// count innermost, so consecutive configurations share a schedule (same
// plan and workload) and differ only in the box. Evaluate cuts cfgs into
// blocks at those shape boundaries, at least blockConfigs long, and hands
// blocks out in order through one atomic counter: a worker that finishes
// early takes the next block, so uneven blocks (a DP plan simulates every
// rank) never leave a core idle while another works through a fixed half.
//
// State: each worker owns a sim.Evaluator, so its predictors (one per box
// and options), their cost memos and engine arrays, and its cache of
// schedules by shape are its own scratch; no lock or shared map is on the
// path of a configuration. Workers write disjoint ranges of the points.
// The result does not depend on the worker count (a configuration's point
// is a function of the configuration alone; TestEvaluateWorkersDeterministic).

// blockConfigs is the smallest block a worker takes at once: large
// enough that the atomic counter and the progress call are rare next to
// the configurations' work (a configuration costs tens of us), small
// enough to balance a sweep of a few thousand over a few cores.
const blockConfigs = 64

// Evaluate evaluates cfgs on workers goroutines (at least 1) and returns
// their points, index-aligned with cfgs. progress (if set) gets (done,
// total) after each block, from the workers' goroutines, one call at a
// time.
func Evaluate(cfgs []Config, slo float64, workers int, progress func(done, total int)) []Point {
	defer paceGC()()
	out := make([]Point, len(cfgs))
	blocks := blocksOf(cfgs)
	workers = max(1, min(workers, len(blocks)-1))
	var (
		next atomic.Int64
		mu   sync.Mutex // serializes progress calls only
		done int
		wg   sync.WaitGroup
	)
	work := func() {
		defer wg.Done()
		// A worker's blocks follow Enumerate's order, which visits each
		// schedule once over its boxes: a few cached schedules serve it.
		ev := sim.Evaluator{Schedules: 2}
		for {
			b := int(next.Add(1)) - 1
			if b >= len(blocks)-1 {
				return
			}
			lo, hi := blocks[b], blocks[b+1]
			evaluateRange(&ev, cfgs[lo:hi], out[lo:hi], slo, nil)
			if progress != nil {
				mu.Lock()
				done += hi - lo
				progress(done, len(cfgs))
				mu.Unlock()
			}
		}
	}
	wg.Add(workers)
	for range workers - 1 {
		go work()
	}
	work()
	wg.Wait()
	return out
}

// sweepGCPercent is the collector's pace during a sweep. A sweep keeps
// little alive (the points, each worker's few schedules and memos: a few
// MB) and makes a few MB of garbage per thousand configurations, so at
// Go's default 100 % the collector runs every few milliseconds, and on two
// cores its mark phase takes a worker's core and turns on write barriers
// in both: BenchmarkPlan measured 2 workers at x1.63 one worker at 100 %,
// x1.83 at 400 %. The heap's peak stays a few times the live set.
const sweepGCPercent = 400

// gcPace counts the sweeps running, so that the first to start sets the
// pace and the last to end puts back what was there.
var gcPace struct {
	sync.Mutex
	running int
	prev    int
}

// paceGC sets the collector's pace to sweepGCPercent for a sweep, unless
// the process already runs it slower (GOGC above it, or off), and returns
// the function that puts it back.
func paceGC() (restore func()) {
	gcPace.Lock()
	defer gcPace.Unlock()
	if gcPace.running == 0 {
		gcPace.prev = debug.SetGCPercent(sweepGCPercent)
		if gcPace.prev < 0 || gcPace.prev >= sweepGCPercent {
			debug.SetGCPercent(gcPace.prev)
		}
	}
	gcPace.running++
	return func() {
		gcPace.Lock()
		defer gcPace.Unlock()
		if gcPace.running--; gcPace.running == 0 {
			debug.SetGCPercent(gcPace.prev)
		}
	}
}

// blocksOf returns the block boundaries of cfgs: 0, ..., len(cfgs), each
// block at least blockConfigs long (but the last) and ending where the
// next configuration has another schedule shape.
func blocksOf(cfgs []Config) []int {
	bounds := []int{0}
	for i := 1; i < len(cfgs); i++ {
		if i-bounds[len(bounds)-1] >= blockConfigs && !sameShape(&cfgs[i-1].Scenario, &cfgs[i].Scenario) {
			bounds = append(bounds, i)
		}
	}
	return append(bounds, len(cfgs))
}

// sameShape reports whether a and b lay the same schedule on boxes of
// the same size (the Evaluator builds it once for both).
func sameShape(a, b *sim.Scenario) bool {
	return a.Arch == b.Arch && a.Plan == b.Plan && a.Workload == b.Workload && a.Build == b.Build &&
		a.Topo.NumGPUs() == b.Topo.NumGPUs()
}
