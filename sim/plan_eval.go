package sim

import (
	"errors"
	"fmt"
	"slices"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

// Fast evaluation for sweeps (plan, advise grids).
//
// Model: every MoE decoder layer of an architecture builds the same ops
// (model.Build lays identical layers), and a rank's ops run in issue order,
// so once the engine has left its start-up transient (the host launch
// queue filling, the first graph launch) each further MoE layer adds the
// same time. The evaluator therefore simulates a short copy of the
// architecture with m = fastLayers MoE layers (dense layers, embedding,
// head and MTP passes unchanged), reads the time its second-to-last MoE
// layer added (the end of its last op minus the end of the previous
// layer's last op: an interior layer, whose closing all-reduce carries
// the next layer's input norm where the engine fuses the two, where the
// last layer's carries the head's final norm; interiorLayerWindow) and
// extrapolates:
//
//	step(n) = step(m) + (n - m) x layerUs
//
// with n the real number of MoE layers. The full engine on the full
// schedule is the reference; TestFastEvalAgreesWithEngine checks the two
// agree within 0.5 % over eager and graph runs, TP/EP/DP/DCP plans, MTP,
// overlap and small and large batches. Architectures with at most m MoE
// layers are simulated whole. The memory fit is always computed for the
// full architecture.
//
// Cost: one build of the short copy, of which only rank 0's op list is
// laid when every rank is a copy of one template (model.Builder.OneRank:
// every collective spans all ranks, the condition of the engine's own
// symmetry shortcut for built schedules, builtSymmetric; rank 0 then
// stands for all, as in Predictor.run), and one engine run of about
// (m + dense) layers instead of 61-78 layers. The short schedule is
// cached per (architecture, plan, workload, captured size, graphed), so
// one build serves every topology and option set of a sweep; each cache
// slot keeps its own model.Builder, so a build after the first reuses
// the memory of the schedule it evicts and a sweep allocates little.
const fastLayers = 3

// Evaluator predicts Configs quickly (see the model above). It keeps one
// Predictor per (topology, options) and a cache of schedule views. Not
// safe for concurrent use; the zero value is ready.
type Evaluator struct {
	preds []evalPredictor
	// scratch is the run memory its predictors share.
	scratch *runScratch
	reduced []reducedArch
	// views maps a schedule's key to its slot (nil: few slots, searched
	// in order); slots are evicted in order (next), their Builders'
	// memory reused.
	views map[schedKey]int
	slots []*viewSlot
	next  int
	// Full disables the layer extrapolation: every Scenario is simulated
	// with its whole schedule on every rank (the reference path).
	Full bool
	// Schedules is how many short schedules the Evaluator keeps for
	// reuse (0 = maxCachedSchedules, a batch x context grid's worth); a
	// sweep that visits each schedule once, over its boxes (plan), needs
	// a few, and so keeps less memory warm.
	Schedules int
}

type evalPredictor struct {
	topo  *topology.Topology
	opts  Options
	costs CostSource
	p     *Predictor
}

type reducedArch struct {
	full  *model.Arch
	short *model.Arch // DenseLayers + fastLayers layers
}

type schedKey struct {
	arch  *model.Arch
	plan  model.Plan
	w     model.Workload
	build model.BuildOptions
	// graphTokens is the captured size the step replays (0: eager).
	graphTokens int
	graphed     bool
}

// schedViews is the short schedule (one rank standing for all when
// symmetric) and the rank-0 indices of the last ops of its last two main
// layers (-1 when the schedule is the whole architecture).
type schedViews struct {
	s            *model.Schedule
	prevEnd, end int
}

// viewSlot is one cached schedule and the Builder whose memory holds it;
// cached is false while it holds none.
type viewSlot struct {
	key    schedKey
	cached bool
	v      schedViews
	bd     model.Builder
}

// maxCachedSchedules bounds the view cache. A plan sweep visits each
// schedule once, over its boxes, so a handful of slots serve it; advise
// sweeps a grid of batch x context (60 cells by default) per entry, and
// entries that change only options come back to the baseline's cells,
// so the bound keeps one grid. A key evicted is rebuilt when it comes
// back; results do not change. Each slot keeps its schedule's memory
// (a short schedule of every rank: about 200 KB at 8 ranks).
const maxCachedSchedules = 64

// Predictor returns the cached Predictor for c's box, options and cost
// source (Scenario.NewPredictor), building it on first use. The
// Evaluator's predictors share their run memory: use them one at a time
// (a Prediction they return is the caller's; the engine's arrays are the
// next run's).
func (e *Evaluator) Predictor(c *Scenario) (*Predictor, error) {
	topo, opts := c.Topo, c.Options
	for i := range e.preds {
		if e.preds[i].topo == topo && e.preds[i].costs == c.Costs && optionsEqual(&e.preds[i].opts, &opts) {
			return e.preds[i].p, nil
		}
	}
	// One run at a time: every predictor of the Evaluator writes the same
	// scratch, so a sweep over many boxes keeps one set of run arrays.
	if e.scratch == nil {
		e.scratch = new(runScratch)
	}
	p, err := c.newPredictor(e.scratch)
	if err != nil {
		return nil, err
	}
	e.preds = append(e.preds, evalPredictor{topo: topo, opts: opts, costs: c.Costs, p: p})
	return p, nil
}

// optionsEqual compares every field of Options, the capture sizes by
// their elements (TestOptionsEqualSeesEveryField fails when a field is
// added to Options and not here). A cache hit must never hand one
// configuration another's options; reflect.DeepEqual would say the same
// but allocates on every call of a sweep's hot path.
func optionsEqual(a, b *Options) bool {
	return a.NCCL == b.NCCL && a.CUDAGraphs == b.CUDAGraphs && slices.Equal(a.GraphSizes, b.GraphSizes) &&
		a.CustomAR == b.CustomAR && a.ARNormFusion == b.ARNormFusion && a.Overlap == b.Overlap &&
		a.MTPAcceptFrac == b.MTPAcceptFrac && specAcceptEqual(&a.SpecAccept, &b.SpecAccept) && a.GPUMemUtilFrac == b.GPUMemUtilFrac && a.CUDAGraphMem == b.CUDAGraphMem && a.MaxModelLen == b.MaxModelLen &&
		a.MaxNumBatchedTokens == b.MaxNumBatchedTokens && a.MaxNumSeqs == b.MaxNumSeqs && a.Engine == b.Engine &&
		a.MoEKernel == b.MoEKernel && a.TimingEventsPerOp == b.TimingEventsPerOp && a.AttentionBackend == b.AttentionBackend
}

func specAcceptEqual(a, b *SpecAccept) bool {
	return a.PerToken == b.PerToken && slices.Equal(a.PerPosition, b.PerPosition) && a.MeanLength == b.MeanLength &&
		a.DraftRate == b.DraftRate && a.AtTokens == b.AtTokens && a.Source == b.Source
}

// shortArch returns the copy of a with fastLayers MoE layers, or nil when
// a is too short to gain from extrapolation.
func (e *Evaluator) shortArch(a *model.Arch) *model.Arch {
	if e.Full || a.MoELayers() <= fastLayers {
		return nil
	}
	for i := range e.reduced {
		if e.reduced[i].full == a {
			return e.reduced[i].short
		}
	}
	c := *a
	c.Layers = a.DenseLayers + fastLayers
	e.reduced = append(e.reduced, reducedArch{full: a, short: &c})
	return &c
}

// viewsFor returns the (cached) one-rank schedules of the scenario and
// their deployment. The cache is keyed on the deployment the builder will
// decide (model.NewDeployment under the capture the Predictor builds the
// scenario's step with, Predictor.stepCapture: the captured size it
// replays and whether it is graphed), so one build serves every topology and option
// set that lays the same step.
func (e *Evaluator) viewsFor(p *Predictor, sc Scenario, short *model.Arch) (*schedViews, error) {
	plan := sc.Plan.Normalized()
	d := model.NewDeployment(plan, sc.Workload, p.stepCapture(sc))
	key := schedKey{arch: sc.Arch, plan: plan, w: sc.Workload.Normalized(), build: sc.Build, graphTokens: d.GraphTokens, graphed: d.Graphed}
	capacity := e.Schedules
	if capacity <= 0 {
		capacity = maxCachedSchedules
	}
	// A few slots are searched in order; more through a map (a key this
	// large is stored out of line in a map, one allocation per insert).
	if e.views == nil && capacity > linearSlots {
		e.views = make(map[schedKey]int)
	}
	if i, ok := e.lookup(key); ok {
		return &e.slots[i].v, nil
	}
	bsc := sc
	if short != nil {
		bsc.Arch = short
	}
	// The slot to fill: a new one until the cache is full, then the
	// oldest, whose schedule the build overwrites.
	i := e.next
	if i < len(e.slots) {
		if e.views != nil && e.slots[i].cached {
			delete(e.views, e.slots[i].key)
		}
	} else {
		e.slots = append(e.slots, &viewSlot{bd: model.Builder{OneRank: true}})
	}
	e.next = (i + 1) % capacity
	slot := e.slots[i]
	slot.cached = false
	// One rank stands for all exactly when builtSymmetric would say so
	// of the whole schedule (model.Builder.OneRank).
	s, err := p.scheduleWith(&slot.bd, bsc)
	if err != nil {
		e.next = i
		return nil, err
	}
	slot.key = key
	slot.v = schedViews{s: s, prevEnd: -1, end: -1}
	v := &slot.v
	if short != nil {
		if v.prevEnd, v.end, err = interiorLayerWindow(v.s, short, "evaluator"); err != nil {
			e.next = i
			return nil, err
		}
	}
	slot.cached = true
	if e.views != nil {
		e.views[key] = i
	}
	return v, nil
}

// linearSlots is the most slots lookup searches in order.
const linearSlots = 8

// lookup finds the slot caching key.
func (e *Evaluator) lookup(key schedKey) (int, bool) {
	if e.views != nil {
		i, ok := e.views[key]
		return i, ok
	}
	for i, s := range e.slots {
		if s.cached && s.key == key {
			return i, true
		}
	}
	return 0, false
}

// lastOpOfLayer is the index of the last op of main decoder layer l in s
// (its module's end; -1 none).
// interiorLayerWindow is the window of the short architecture's
// second-to-last layer in s: the last op of the layer before it (prev)
// and its own (last), whose ends differ by the time one interior MoE
// layer adds. Not the last layer: its closing all-reduce carries the
// head's final norm where the engine fuses an all-reduce with the norm
// after it, an interior layer's the next layer's input norm, whose bytes
// differ.
func interiorLayerWindow(s *model.Schedule, short *model.Arch, who string) (prev, last int, err error) {
	l := short.Layers - 2
	prev, last = lastOpOfLayer(s, l-1), lastOpOfLayer(s, l)
	if prev < 0 || last <= prev {
		return -1, -1, fmt.Errorf("sim: %s: layers %d and %d of %s not found in order", who, l-1, l, short.Name)
	}
	return prev, last, nil
}

func lastOpOfLayer(s *model.Schedule, l int) int {
	m, ok := s.Modules.Find(model.ModDecoderLayer, l, -1)
	if !ok || m.End <= m.First {
		return -1
	}
	return m.End - 1
}

// Evaluate predicts the step of c: StepUs, tokens per second (per request
// and aggregate over the real sequences, MTP acceptance included) and the
// memory fit of the full architecture. CommShareFrac is not computed (0).
// A Scenario that does not fit in memory is evaluated all the same (Memory
// says so); an invalid plan or workload is an error.
func (e *Evaluator) Evaluate(c Scenario) (Summary, error) {
	if c.Topo == nil {
		return Summary{}, errors.New("sim: config has no topology")
	}
	if c.Arch == nil {
		return Summary{}, errors.New("sim: config has no architecture")
	}
	p, err := e.Predictor(&c)
	if err != nil {
		return Summary{}, err
	}
	// The view cache serves every box: check this one holds the plan (the
	// builder checks the plan, workload and options when a view is built;
	// an invalid scenario never has one).
	if w := c.Plan.World(); w > c.Topo.NumGPUs() {
		return Summary{}, fmt.Errorf("sim: plan %s needs %d GPUs; topology %s has %d", c.Plan.Normalized(), w, c.Topo.Name, c.Topo.NumGPUs())
	}
	short := e.shortArch(c.Arch)
	v, err := e.viewsFor(p, c, short)
	if err != nil {
		return Summary{}, err
	}
	// v.s is model.BuildWith's schedule or its rank-0 copy, unmodified:
	// symBuilt skips the ranks x ops symmetry pass.
	d := v.s.Deploy
	step, err := p.stepUs(v.s, symBuilt, d.Graphed)
	if err != nil {
		return Summary{}, err
	}
	if short != nil {
		// Rank 0's ops come first in the engine's arrays.
		layerUs := p.eng.end[v.end] - p.eng.end[v.prevEnd]
		step += float64(c.Arch.MoELayers()-fastLayers) * layerUs
	}
	sum := Summary{StepUs: step, Graphed: d.Graphed, SpecHostUs: specHostUs(c)}
	sum.StepUs += sum.SpecHostUs
	p.fixTokens(&sum, c, d)
	sum.Memory = p.memoryFit(c, d)
	return sum, nil
}
