package compare

import (
	"fmt"
	"sort"

	"github.com/tpscope/tpscope/calibrate"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/traces"
)

// samples are the even steps' measurements of every scenario of a
// calibration: compute ops with the prior cost that priced them, and
// collectives keyed by (op, ranks, NCCL setting), since a calibration
// applies under the setting it was measured with.
type samples struct {
	compute   []calibrate.ComputeSample
	coll      map[collKey][]calibrate.CollectiveSample
	collKeys  []collKey // in a fixed order
	collCount int
	// eager holds the traces of the scenarios that ran without CUDA
	// graphs: their spans hold host delay (see fitCompute); fit says which
	// of their steps are fitted.
	eager [][]traces.Span
	fit   func(step int) bool
	notes []string
}

type collKey struct {
	op    model.Collective
	ranks int
	nccl  ncclenv.Settings
}

// collectSamples gathers the samples of the steps fit keeps.
func collectSamples(scens []*calScenario, fit func(step int) bool) *samples {
	smp := &samples{coll: map[collKey][]calibrate.CollectiveSample{}, fit: fit}
	grouped, badGroup, notNCCL := 0, 0, 0
	for _, sc := range scens {
		if !sc.g.sc.Options.CUDAGraphs {
			smp.eager = append(smp.eager, sc.g.traces...)
		}
		opAt := scheduleIndex(sc.pr, sc.sched)
		for _, s := range sc.al.Samples {
			if !fit(int(s.Step)) {
				continue
			}
			u := &sc.al.Units[s.Unit]
			if len(u.Ops) != 1 {
				grouped++
				continue
			}
			res := &sc.pr.Ops[u.Ops[0]]
			op := opAt(u.Ops[0])
			if !op.IsCollective() {
				// The span holds the op's overhead less the gap after its
				// closing timing event (OpResult.SpanGapUs).
				smp.compute = append(smp.compute, calibrate.ComputeSample{Family: sc.p.CostFamily(op), Cost: res.Cost, OverheadUs: res.OverheadUs - res.SpanGapUs, MeasuredUs: s.Us})
				continue
			}
			if !firstRanks(op.Group) || (op.Collective != model.AllReduce && op.Collective != model.AllGather && op.Collective != model.ReduceScatter) {
				badGroup++
				continue
			}
			if a := res.Cost.Algo; a != "Ring" && a != "Tree" {
				// The engine's own kernel carried it (a custom one-shot or
				// two-shot all-reduce, torch's multimem one): its time says
				// nothing of NCCL's constants, which the fit sets.
				notNCCL++
				continue
			}
			k := collKey{op.Collective, len(op.Group), sc.g.sc.Options.NCCL}
			if _, ok := smp.coll[k]; !ok {
				smp.collKeys = append(smp.collKeys, k)
			}
			smp.coll[k] = append(smp.coll[k], calibrate.CollectiveSample{Bytes: op.CommBytes, TimeUs: s.Us})
			smp.collCount++
		}
	}
	sort.SliceStable(smp.collKeys, func(i, j int) bool {
		if smp.collKeys[i].op != smp.collKeys[j].op {
			return smp.collKeys[i].op < smp.collKeys[j].op
		}
		return smp.collKeys[i].ranks < smp.collKeys[j].ranks
	})
	if grouped > 0 {
		smp.notes = append(smp.notes, fmt.Sprintf("%d samples stand for several ops (kernels matched per layer or per step) and were not used to fit", grouped))
	}
	if notNCCL > 0 {
		smp.notes = append(smp.notes, fmt.Sprintf("%d collective samples ran the engine's own all-reduce kernel (custom or symmetric-memory), not NCCL, and were not used to fit NCCL's constants", notNCCL))
	}
	if badGroup > 0 {
		smp.notes = append(smp.notes, fmt.Sprintf("%d collective samples are all-to-all or run on a group other than ranks 0..n-1 and were not used to fit", badGroup))
	}
	return smp
}

// scheduleIndex maps an index into pr.Ops to its schedule op: rank 0's
// list when the prediction is symmetric, else the ranks concatenated.
func scheduleIndex(pr *sim.Prediction, s *model.Schedule) func(i int) *model.Op {
	if pr.Symmetric {
		return func(i int) *model.Op { return &s.Ranks[0][i] }
	}
	off := make([]int, len(s.Ranks)+1)
	for r := range s.Ranks {
		off[r+1] = off[r] + len(s.Ranks[r])
	}
	return func(i int) *model.Op {
		r := sort.SearchInts(off, i+1) - 1
		return &s.Ranks[r][i-off[r]]
	}
}

func firstRanks(g []int) bool {
	for i, r := range g {
		if r != i {
			return false
		}
	}
	return len(g) >= 2
}
