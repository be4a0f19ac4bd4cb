package sim

import (
	"fmt"
	"strconv"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/topology"
)

// SourcePrior is OpCost.Source of an op priced by tpscope's own models
// (the roofline of compute.go, the collective model of collective.go),
// with the topology's parameters, calibrated or not.
const SourcePrior = "prior"

// CostSource prices ops from measurements (a measured per-op database of
// a serving engine, such as package perfdb's). The Predictor consults it
// for every compute op before its roofline prior; an op the source does
// not cover keeps the prior.
//
// Contract: the Predictor calls OpCost from the goroutine running
// Predict, once per distinct op shape of a step (repeats are memoized
// within a prediction); OpCost must be deterministic, must not retain
// ops, mods or dev, and must not modify them. It may block on its first calls
// (loading a table); errors of its own (a table that cannot be read) are
// reported by answering ok false for the ops it cannot price, never by
// panicking. Implementations used by several Predictors on several
// goroutines must be safe for concurrent use.
type CostSource interface {
	// Name identifies the source in OpCost.Source, e.g.
	// "perfdb rtx_pro_6000_server/vllm/0.24.0".
	Name() string
	// OpCost prices ops[i], a compute op of one rank's op list in issue
	// order, on dev; mods are the schedule's modules (their op ranges
	// hold in ops), so that a source that measured a whole module (an MLA
	// block, a layer's routed experts) finds the module's other ops. A
	// schedule not made by model's builder may have none. ok false: no
	// measurement covers it.
	OpCost(ops []model.Op, mods model.Modules, i int, dev *topology.Device) (m Measured, ok bool)
}

// Measured is a measurement a CostSource answers with.
type Measured struct {
	// Us is the measured device time of what the measurement covers,
	// microseconds.
	Us float64
	// First and Last (indices into the op list, inclusive) bound a module
	// measurement: the table timed the module's kernels together (an MLA
	// block, the routed experts of a MoE layer) and Us covers every
	// non-collective op in ops[First..Last]. The Predictor gives each of
	// those ops the share of Us its prior time has in the module's prior
	// time, so the module sums to the measurement. First == Last == i for
	// a measurement of op i alone.
	First, Last int
	// GapsIncluded: Us includes the device-side gap between consecutive
	// kernels of the measuring loop (aiconfigurator times an op as a CUDA
	// graph replay, or nccl-tests back to back). The Predictor then
	// removes one Device.LaunchGraphUs per covered op, since its engine
	// adds its own per-kernel gap to every op.
	GapsIncluded bool
	// Where says where the number came from: the table, and the exact
	// row or the interpolation / hold (the op's OpCost.Source).
	Where string
}

// CollectiveSource is the optional capability of a CostSource to price
// collectives from measurements. The Predictor asks only when the
// measurement's conditions hold on the box: see collectiveMeasured.
type CollectiveSource interface {
	CollectiveCost(q CollectiveQuery) (m Measured, ok bool)
}

// CollectiveQuery is one collective call to price.
type CollectiveQuery struct {
	Op    model.Collective
	Bytes int64 // nccl-tests convention (Op.CommBytes)
	Ranks int   // group size
	// Fabric is the group's link class on the topology: FabricNVLink when
	// NVLink joins every pair, FabricPCIe otherwise.
	Fabric Fabric
	// Custom: the engine's own (custom) all-reduce runs it, not NCCL.
	Custom bool
	// Graphed: the step runs as a CUDA graph.
	Graphed bool
}

// Fabric is the class of link a collective runs over.
type Fabric string

const (
	FabricPCIe   Fabric = "pcie"
	FabricNVLink Fabric = "nvlink"
)

// SourceChecker is the optional capability of a CostSource to refuse a
// device it was not measured on; UseCostSource calls it once.
type SourceChecker interface {
	Check(dev *topology.Device) error
}

// UseCostSource makes the Predictor consult src before its priors (nil
// removes it). With a CollectiveSource it also prices collectives whose
// measurement conditions hold. The error is SourceChecker's: src was not
// measured on this topology's GPU.
func (p *Predictor) UseCostSource(src CostSource) error {
	p.collCache, p.collCosts = nil, nil // costs priced with the old source
	if src == nil {
		p.src, p.srcColl, p.refColl = nil, nil, nil
		p.named = false
		return nil
	}
	if ch, ok := src.(SourceChecker); ok {
		if err := ch.Check(p.dev); err != nil {
			return fmt.Errorf("sim: cost source %s: %w", src.Name(), err)
		}
	}
	p.src = src
	p.named = true
	p.srcColl, _ = src.(CollectiveSource)
	p.refColl = nil
	if p.srcColl != nil {
		if cm, ok := p.coll.(*CollectiveModel); ok {
			o := cm.Options()
			ref, err := NewCollectiveModel(p.topo, ncclenv.Settings{P2PLevel: o.P2PLevel, P2PDisable: o.P2PDisable, IgnoreCalibration: o.IgnoreCalibration})
			if err != nil {
				return fmt.Errorf("sim: cost source %s: %w", src.Name(), err)
			}
			p.refColl = ref
		}
	}
	return nil
}

// measuredCost prices compute op ops[i] from the cost source, or returns
// ok false. A module measurement is shared over the module's ops in
// proportion to their prior times:
//
//	share_i = prior_i / sum_module(prior) x (Us - gaps)
//
// where gaps is one Device.LaunchGraphUs per covered op when the
// measurement includes them. The op keeps its prior terms (ComputeUs,
// MemoryUs, Bound...) for reference; Us, PriorUs and Source say what
// replaced them.
func (p *Predictor) measuredCost(ops []model.Op, i int) (OpCost, bool) {
	m, ok := p.src.OpCost(ops, p.mods, i, p.dev)
	if !ok || !(m.Us > 0) {
		return OpCost{}, false
	}
	first, last := m.First, m.Last
	if first < 0 || last >= len(ops) || first > i || last < i || ops[i].IsCollective() {
		return OpCost{}, false // a source bug: ignore the measurement
	}
	own := p.cm.cost(&ops[i])
	sum, n := 0.0, 0
	for j := first; j <= last; j++ {
		if ops[j].IsCollective() {
			continue
		}
		n++
		if j == i {
			sum += own.Us
		} else {
			sum += p.cm.cost(&ops[j]).Us
		}
	}
	net := m.Us
	if m.GapsIncluded {
		net -= float64(n) * p.dev.LaunchGraphUs
	}
	if !(net > 0) || !(sum > 0) {
		return OpCost{}, false
	}
	frac := own.Us / sum
	c := own
	c.PriorUs = own.Us
	c.Us = net * frac
	// The measurement holds the engine's companion kernels and their gaps.
	c.ExtraKernels, c.ExtraKernelsUs, c.SerialWalkUs, c.CallLatencyUs, c.SplitKReduce = 0, 0, 0, 0, false
	c.Source = m.Where
	if n > 1 {
		c.Source = m.Where + ", share " + strconv.FormatFloat(frac, 'f', 3, 64) + " of " + strconv.Itoa(n) + " ops"
	}
	return c, true
}

// collectiveMeasured prices a collective from the cost source when the
// measurement's conditions hold on this box, else ok false (the model's
// cc stands). Conditions (a table is one node's nccl-tests or engine
// runs, with NCCL choosing freely and P2P between every pair):
//   - the group's size and link class (PCIe / NVLink) are the table's
//     (checked by the source: it knows its system);
//   - NCCL carries it with every ring hop over P2P (no host-memory
//     hops), and the NCCL_PROTO / NCCL_ALGO settings leave NCCL's own
//     choice unchanged (the model's pick under the settings equals its
//     pick under NCCL's defaults at the same P2P level), and the ring runs
//     the channels NCCL picks itself (NCCL_MIN_NCHANNELS /
//     NCCL_MAX_NCHANNELS leave the count unchanged: the table ran NCCL's
//     own);
//   - or the engine's custom or symmetric-memory all-reduce carries it
//     under its own rule (CustomAR auto: 2 GPUs or all NVLink; symmetric
//     memory on an NVSwitch), which is what the engine's table measured
//     (its all-reduce entry point; vLLM falls back to NCCL elsewhere);
//   - the topology carries no calibrated collective constants (a box's
//     own measurements beat another box's table), and the collective
//     model is tpscope's.
func (p *Predictor) collectiveMeasured(op *model.Op, cc CollectiveCost) (OpCost, bool) {
	if p.srcColl == nil || p.refColl == nil || cc.Calibrated || len(op.Group) < 2 {
		return OpCost{}, false
	}
	q := CollectiveQuery{Op: op.Collective, Bytes: op.CommBytes, Ranks: len(op.Group), Fabric: FabricPCIe, Graphed: p.graphed}
	if p.topo.AllNVLink(op.Group) {
		q.Fabric = FabricNVLink
	}
	switch {
	case customAlgo(cc.Algo):
		if p.opts.CustomAR != CustomARAuto {
			return OpCost{}, false // a forced custom kernel where the engine would not run one
		}
		q.Custom = true
	case ncclAlgo(cc.Algo):
		if cc.SHMHops > 0 || p.opts.NCCL.P2PDisable {
			return OpCost{}, false
		}
		ref := p.refColl.Cost(op.Collective, op.Group, op.CommBytes)
		if ref.Algo != cc.Algo || ref.Proto != cc.Proto || ref.Channels != cc.Channels {
			return OpCost{}, false
		}
	default:
		return OpCost{}, false
	}
	m, ok := p.srcColl.CollectiveCost(q)
	if !ok || !(m.Us > 0) {
		return OpCost{}, false
	}
	c := OpCost{Algo: cc.Algo, Proto: cc.Proto, Bound: BoundLatency, PriorUs: cc.TimeUs, LatencyUs: cc.LatencyUs, LinkUs: cc.LinkUs,
		Source: m.Where, Us: m.Us}
	if cc.LinkUs > cc.LatencyUs {
		c.Bound = BoundLink
	}
	if m.GapsIncluded {
		c.Us -= p.dev.LaunchGraphUs
	}
	if !(c.Us > 0) {
		return OpCost{}, false
	}
	return c, true
}

// computeCost prices compute op ops[i]: the cost source's measurement
// when it covers the op, else the roofline prior.
func (p *Predictor) computeCost(ops []model.Op, i int) OpCost {
	if p.src != nil {
		if c, ok := p.measuredCost(ops, i); ok {
			return c
		}
	}
	return p.cm.cost(&ops[i])
}
