package sim

import (
	"sort"

	"github.com/tpscope/tpscope/model"
)

// topOpsN is how many of the longest ops a Prediction lists.
const topOpsN = 10

// assemble turns the engine's arrays into a Prediction.
func (p *Predictor) assemble(s *model.Schedule, graphed bool) *Prediction {
	e := &p.eng
	n := len(e.ops)
	pr := &Prediction{Model: s.Model, Topology: p.topo.Name, Plan: s.Plan, Workload: s.Workload,
		Options: p.opts, MoERouting: s.Options.Routing, Symmetric: len(e.rankOff) == 2}
	if p.src != nil {
		pr.CostSource = p.src.Name()
	}
	pr.Sequences = s.Workload.Batch
	pr.TokensPerStep = 1
	if y := specYield(p.opts, s.Options.Spec, s.Workload, nil); y != nil {
		pr.TokensPerStep, pr.TokensPerStepVar = y.TokensPerStep, y.TokensVar
	}
	pr.Graphed = graphed
	last := 0
	for i := 0; i < n; i++ {
		if e.end[i] > pr.StepUs {
			pr.StepUs, last = e.end[i], i
		}
	}
	pr.Ops = make([]OpResult, n)
	rank0 := int(e.rankOff[1])
	var kindUs [numKinds]float64
	var kindN [numKinds]int
	busy := 0.0
	names := nameAgg{}
	blocks := nameAgg{}
	g := 0
	for r := 0; r+1 < len(e.rankOff); r++ {
		ops := s.Ranks[r]
		for i := range ops {
			op := &ops[i]
			c := &p.costs[g]
			res := &pr.Ops[g]
			if c.Source != SourcePrior && c.Source != "" {
				pr.MeasuredOps++
			}
			res.ID, res.Kind, res.Block, res.Cost = op.ID, op.Kind, op.Block, *c
			res.Layer, res.Rank = op.Layer, r
			res.StartUs, res.Us, res.OverheadUs, res.LaunchUs = e.start[g], e.ops[g].durUs, p.overhead[g], e.ops[g].launchUs
			res.SpanGapUs = p.spanGapUs
			res.WaitedOn, res.Bound = Wait(e.why[g]), c.Bound
			res.FLOPs, res.Bytes, res.CommBytes = op.FLOPs, op.BytesRead+op.BytesWritten, op.CommBytes
			if g < rank0 {
				k := kindIndex(op.Kind)
				kindUs[k] += res.Us
				if !c.Fused {
					kindN[k]++
					pr.Kernels += 1 + c.ExtraKernels
				}
				if op.IsCollective() {
					pr.CommUs += res.Us
				}
				busy += res.Us
				pr.HostUs += res.LaunchUs
				names.add(op.Block, op.Name, res.Us)
				blocks.add(op.Block, "", res.Us)
			}
			g++
		}
	}
	if pr.StepUs > 0 {
		pr.TokensPerSPerRequest = pr.TokensPerStep / (pr.StepUs * 1e-6)
		pr.TokensPerS = pr.TokensPerSPerRequest * float64(pr.Sequences)
		pr.CommShareFrac = pr.CommUs / pr.StepUs
	}
	pr.HostUs += e.stepLaunchUs
	if !p.opts.Overlap {
		// One stream: the device is idle whenever it is not running an op.
		pr.IdleUs = max(0, endOfRank0(e, rank0)-busy)
	}
	for k := 0; k < numKinds; k++ {
		if kindN[k] > 0 || kindUs[k] > 0 {
			pr.ByKind = append(pr.ByKind, Share{Name: string(kindNames[k]), Us: kindUs[k], Count: kindN[k]})
		}
	}
	if pr.IdleUs > 0 {
		pr.ByKind = append(pr.ByKind, Share{Name: "idle", Us: pr.IdleUs})
	}
	pr.ByBlock = blocks.shares()
	pr.ByName = names.shares()
	for _, l := range [][]Share{pr.ByKind, pr.ByBlock, pr.ByName} {
		for i := range l {
			if pr.StepUs > 0 {
				l[i].ShareFrac = l[i].Us / pr.StepUs
			}
		}
	}
	sortShares(pr.ByKind)
	sortShares(pr.ByName)
	pr.TopOps = topOps(pr.Ops[:rank0], topOpsN)
	pr.CriticalPath = criticalPath(e, last)
	return pr
}

func endOfRank0(e *engine, rank0 int) float64 {
	t := 0.0
	for i := 0; i < rank0; i++ {
		t = max(t, e.end[i])
	}
	return t
}

// nameAgg sums time per (block, name). Ops repeat in the same order every
// layer, so the search starts after the previous hit: almost always one
// comparison per op.
type nameAgg struct {
	block, name []string
	us          []float64
	count       []int
	hint        int
}

func (a *nameAgg) add(block, name string, us float64) {
	n := len(a.block)
	if j := a.hint - 1; j >= 0 && j < n && a.name[j] == name && a.block[j] == block {
		a.us[j] += us
		a.count[j]++
		return
	}
	for k := 0; k < n; k++ {
		j := a.hint + k
		if j >= n {
			j -= n
		}
		if a.name[j] == name && a.block[j] == block {
			a.us[j] += us
			a.count[j]++
			a.hint = j + 1
			return
		}
	}
	a.block = append(a.block, block)
	a.name = append(a.name, name)
	a.us = append(a.us, us)
	a.count = append(a.count, 1)
	a.hint = 0
}

func (a *nameAgg) shares() []Share {
	out := make([]Share, len(a.block))
	for i := range a.block {
		nm := a.block[i]
		if a.name[i] != "" {
			nm += "." + a.name[i]
		}
		out[i] = Share{Name: nm, Us: a.us[i], Count: a.count[i]}
	}
	return out
}

// sortShares orders by time, largest first; ties by name (deterministic).
func sortShares(s []Share) {
	sort.SliceStable(s, func(i, j int) bool {
		if s[i].Us != s[j].Us {
			return s[i].Us > s[j].Us
		}
		return s[i].Name < s[j].Name
	})
}

// FirstRankOps is the ops of the first rank pr holds, in order (every
// rank's, for a symmetric schedule): pr.Ops lists the ranks one after
// another.
func (pr *Prediction) FirstRankOps() []OpResult {
	for i := range pr.Ops {
		if pr.Ops[i].Rank != pr.Ops[0].Rank {
			return pr.Ops[:i]
		}
	}
	return pr.Ops
}

// LongestOps is the indices into pr.Ops of rank 0's n longest ops,
// longest first (n <= 0: every op of rank 0), as TopOps lists the
// first topOpsN of them.
func (pr *Prediction) LongestOps(n int) []int {
	rank0 := len(pr.Ops)
	for i := range pr.Ops {
		if pr.Ops[i].Rank != 0 {
			rank0 = i
			break
		}
	}
	if n <= 0 || n > rank0 {
		n = rank0
	}
	return topOps(pr.Ops[:rank0], n)
}

// topOps returns the indices of the k longest ops, longest first (ties:
// earlier op first).
func topOps(ops []OpResult, k int) []int {
	if k <= 0 {
		return nil
	}
	top := make([]int, 0, k+1)
	for i := range ops {
		if len(top) == k && ops[i].Us <= ops[top[k-1]].Us {
			continue
		}
		j := len(top)
		top = append(top, i)
		for j > 0 && ops[top[j-1]].Us < ops[i].Us {
			top[j] = top[j-1]
			j--
		}
		top[j] = i
		if len(top) > k {
			top = top[:k]
		}
	}
	return top
}

// criticalPath walks back from the op that ends the step along the op
// that released each one, and returns the path first to last.
func criticalPath(e *engine, last int) []int {
	var rev []int
	// Every release points to an op that ended no later than this one
	// started; the bound on the walk guards against a malformed chain.
	for g, steps := int32(last), 0; g >= 0 && steps <= len(e.ops); steps++ {
		rev = append(rev, int(g))
		p := e.pred[g]
		if p < 0 && e.why[g] == waitLaunch {
			// Released by the host: the host was busy launching the
			// previous op of the rank, which is the path's predecessor on
			// the host timeline.
			if g > 0 && !isRankStart(e, g) {
				p = g - 1
			}
		}
		g = p
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev
}

func isRankStart(e *engine, g int32) bool {
	for _, o := range e.rankOff {
		if o == g {
			return true
		}
	}
	return false
}
