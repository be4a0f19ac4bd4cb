package sim

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

// Fast evaluation for sweeps (plan, advise grids).
//
// Model: every MoE decoder layer of an architecture builds the same ops
// (model.Build lays identical layers), and a rank's ops run in issue order,
// so once the engine has left its start-up transient (the host launch
// queue filling, the first graph launch) each further MoE layer adds the
// same time. The evaluator therefore simulates two short copies of the
// architecture, with m1 and m2 MoE layers (the dense layers, embedding,
// head and MTP passes unchanged), and extrapolates linearly:
//
//	step(n) = step(m1) + (n - m1) x (step(m2) - step(m1)) / (m2 - m1)
//
// with n the real number of MoE layers. The full engine on the full
// schedule is the reference; TestFastEvalAgreesWithEngine checks the two
// agree within 0.5 % over eager and graph runs, TP/EP/DP/DCP plans and
// small and large batches. Architectures with at most m2 MoE layers are
// simulated whole. The memory fit is always computed for the full
// architecture.
//
// Cost: one build of the m2-layer copy, from which rank 0's op list is
// kept (every rank of a model.Build schedule is a copy of one template,
// checked once with the engine's own symmetry test, so rank 0 stands for
// all, as in Predictor.simulate), and the m1 view is that list without
// its last MoE layer. Two engine runs of about (m2 + dense) layers replace
// one of 61-78 layers on 8 ranks. The views are cached per (architecture,
// plan, workload, padded batch), so one build serves every topology and
// option set of a sweep.
const (
	fastLayersLo = 2 // m1: MoE layers of the shorter view (the launch-queue transient ends within it)
	fastLayersHi = 3 // m2: MoE layers of the short copy that is built
)

// Config is one point of the space advise and plan explore: what runs
// (the Scenario: architecture, plan, workload, build options), how
// (Options) and where (Topo). It is the value the catalog's entries
// transform.
type Config struct {
	Scenario
	Options Options
	Topo    *topology.Topology
}

// Evaluator predicts Configs quickly (see the model above). It keeps one
// Predictor per (topology, options) and a cache of schedule views. Not
// safe for concurrent use; the zero value is ready.
type Evaluator struct {
	preds   []evalPredictor
	reduced []reducedArch
	views   map[schedKey]*schedViews
	// Full disables the layer extrapolation: every Config is simulated
	// with its whole schedule on every rank (the reference path).
	Full bool
}

type evalPredictor struct {
	topo *topology.Topology
	opts Options
	p    *Predictor
}

type reducedArch struct {
	full *model.Arch
	hi   *model.Arch // DenseLayers + fastLayersHi layers
}

type schedKey struct {
	arch   *model.Arch
	plan   model.Plan
	w      model.Workload
	build  model.BuildOptions
	padded int
}

// schedViews are one-rank schedules standing for every rank: hi (the
// built short copy) and lo (hi without its last MoE layer; nil when hi is
// the whole architecture). world is the plan's rank count.
type schedViews struct {
	hi, lo *model.Schedule
	world  int
}

// maxCachedSchedules bounds the view cache; a sweep that exceeds it starts
// over (views are rebuilt, results do not change).
const maxCachedSchedules = 8192

// Predictor returns the cached Predictor for (topo, opts), building it on
// first use.
func (e *Evaluator) Predictor(topo *topology.Topology, opts Options) (*Predictor, error) {
	for i := range e.preds {
		if e.preds[i].topo == topo && optionsEqual(&e.preds[i].opts, &opts) {
			return e.preds[i].p, nil
		}
	}
	p, err := New(topo, opts)
	if err != nil {
		return nil, err
	}
	e.preds = append(e.preds, evalPredictor{topo: topo, opts: opts, p: p})
	return p, nil
}

// optionsEqual compares every field (reflect, so that a field added to
// Options later is never ignored by the cache).
func optionsEqual(a, b *Options) bool { return reflect.DeepEqual(a, b) }

// shortArch returns the copy of a with fastLayersHi MoE layers, or nil when
// a is too short to gain from extrapolation.
func (e *Evaluator) shortArch(a *model.Arch) *model.Arch {
	if e.Full || a.MoELayers() <= fastLayersHi {
		return nil
	}
	for i := range e.reduced {
		if e.reduced[i].full == a {
			return e.reduced[i].hi
		}
	}
	c := *a
	c.Layers = a.DenseLayers + fastLayersHi
	e.reduced = append(e.reduced, reducedArch{full: a, hi: &c})
	return &c
}

// paddedBatch is the batch the schedule is built for under CUDA graphs,
// as Predictor.schedule computes it.
func paddedBatch(o *Options, plan model.Plan, w model.Workload) int {
	if !o.CUDAGraphs || w.Phase == model.Prefill {
		return w.Batch
	}
	perGroup := (w.Batch + plan.DP - 1) / plan.DP
	tok := perGroup * (1 + w.SpecTokens)
	if pt, ok := o.GraphTokens(tok); ok && pt != tok {
		return (pt + w.SpecTokens) / (1 + w.SpecTokens) * plan.DP
	}
	return w.Batch
}

// viewsFor returns the (cached) one-rank schedules of the scenario.
func (e *Evaluator) viewsFor(p *Predictor, sc Scenario, short *model.Arch) (*schedViews, int, error) {
	plan := sc.Plan.Normalized()
	padded := paddedBatch(&p.opts, plan, sc.Workload)
	key := schedKey{arch: sc.Arch, plan: plan, w: sc.Workload.Normalized(), build: sc.Build, padded: padded}
	if v := e.views[key]; v != nil {
		return v, padded, nil
	}
	bsc := sc
	if short != nil {
		bsc.Arch = short
	}
	s, got, err := p.schedule(bsc)
	if err != nil {
		return nil, 0, err
	}
	if got != padded {
		return nil, 0, fmt.Errorf("sim: evaluator padding %d disagrees with the predictor's %d", padded, got)
	}
	v := &schedViews{world: len(s.Ranks)}
	if !symmetric(s) {
		// Not one template for all ranks: keep the whole schedule.
		v.hi = s
	} else {
		r0 := append([]model.Op(nil), s.Ranks[0]...)
		v.hi = &model.Schedule{Model: s.Model, Plan: s.Plan, Workload: s.Workload, Options: s.Options, Ranks: [][]model.Op{r0}}
		if short != nil {
			v.lo = dropLayer(v.hi, short.Layers-1)
		}
	}
	if short != nil && v.lo == nil {
		// Fall back: build the m1 copy too.
		c := *short
		c.Layers--
		bsc.Arch = &c
		s, _, err := p.schedule(bsc)
		if err != nil {
			return nil, 0, err
		}
		v.lo = s
	}
	if e.views == nil || len(e.views) >= maxCachedSchedules {
		e.views = make(map[schedKey]*schedViews)
	}
	e.views[key] = v
	return v, padded, nil
}

// dropLayer returns a one-rank schedule without the ops of main layer l,
// or nil when that is not a contiguous run of in-order ops (explicit
// dependencies would then point at the wrong ops).
func dropLayer(s *model.Schedule, l int) *model.Schedule {
	ops := s.Ranks[0]
	lo, hi := -1, -1
	for i := range ops {
		if ops[i].Deps != nil {
			return nil
		}
		if ops[i].Layer == l && ops[i].Block != "mtp" {
			if lo < 0 {
				lo = i
			} else if hi != i {
				return nil
			}
			hi = i + 1
		}
	}
	if lo < 0 {
		return nil
	}
	out := make([]model.Op, 0, len(ops)-(hi-lo))
	out = append(append(out, ops[:lo]...), ops[hi:]...)
	c := *s
	c.Ranks = [][]model.Op{out}
	return &c
}

// Evaluate predicts the step of c: StepUs, tokens per second (per request
// and aggregate over the real sequences, MTP acceptance included) and the
// memory fit of the full architecture. CommShare is not computed (0).
// A Config that does not fit in memory is evaluated all the same (Memory
// says so); an invalid plan or workload is an error.
func (e *Evaluator) Evaluate(c Config) (Summary, error) {
	if c.Topo == nil {
		return Summary{}, errors.New("sim: config has no topology")
	}
	if c.Arch == nil {
		return Summary{}, errors.New("sim: config has no architecture")
	}
	if c.Workload.Batch <= 0 {
		return Summary{}, fmt.Errorf("sim: workload batch %d: want at least 1 sequence", c.Workload.Batch)
	}
	p, err := e.Predictor(c.Topo, c.Options)
	if err != nil {
		return Summary{}, err
	}
	if err := c.Plan.Validate(c.Arch); err != nil {
		return Summary{}, err
	}
	if w := c.Plan.World(); w > c.Topo.NumGPUs() {
		return Summary{}, fmt.Errorf("sim: plan %s needs %d GPUs; topology %s has %d", c.Plan.Normalized(), w, c.Topo.Name, c.Topo.NumGPUs())
	}
	short := e.shortArch(c.Arch)
	v, padded, err := e.viewsFor(p, c.Scenario, short)
	if err != nil {
		return Summary{}, err
	}
	step, err := p.StepUs(v.hi)
	if err != nil {
		return Summary{}, err
	}
	if short != nil {
		s1, err := p.StepUs(v.lo)
		if err != nil {
			return Summary{}, err
		}
		n := float64(c.Arch.MoELayers())
		step = s1 + (n-fastLayersLo)*(step-s1)/(fastLayersHi-fastLayersLo)
	}
	sum := Summary{StepUs: step}
	// Graphed as the engine decides it (Predictor.simulate): on the
	// schedule's whole batch.
	if p.opts.CUDAGraphs {
		_, sum.Graphed = p.opts.GraphTokens(padded * (1 + c.Workload.SpecTokens))
	}
	p.fixTokens(&sum, c.Scenario, padded)
	sum.Memory = p.memoryFit(c.Scenario)
	return sum, nil
}
