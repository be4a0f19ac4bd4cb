package sim

import (
	"errors"
	"fmt"
	"math"
	"strings"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

// Predictor predicts steps of schedules on one box under one set of
// Options. Build it once (New) and call Predict many times: the per-(kind,
// dtype) cost table, the collective model and the engine's arrays are
// reused, so a repeated prediction allocates only its result. A Predictor
// is not safe for concurrent use; sweeps on several cores use one per
// goroutine.
type Predictor struct {
	topo *topology.Topology
	dev  *topology.Device
	opts Options
	// captures are opts' CUDA-graph capture on the box's GPU by the
	// engine's size in GPUs (Options.GraphCapture: SGLang's largest
	// captured batch depends on both), built on first use (captureOf).
	captures map[int]*model.GraphCapture
	cm       *computeModel
	coll     collectiveCoster
	// runScratch is what a run writes and the next one reuses; an
	// Evaluator's predictors share one (it runs one at a time).
	*runScratch
	// named: the cost memo matches ops by role and name too (a cost
	// source is in use; costMemo.get).
	named bool
	// collCache indexes collCosts, the collective costs of earlier runs
	// (collectiveCost); UseCostSource empties it.
	collCache map[collCacheKey]int32
	collCosts []OpCost
	// spanGapUs is OpResult.SpanGapUs of the current run.
	spanGapUs float64

	// Measured costs (costsource.go): the source, its collective
	// capability, and NCCL's model under default protocol and algorithm
	// choice (to tell when NCCL_PROTO / NCCL_ALGO change what a table
	// measured). graphed is the current run's CUDA-graph decision.
	src     CostSource
	srcColl CollectiveSource
	refColl *CollectiveModel
	graphed bool
	// mods are the modules of the schedule being priced (a cost source
	// that measured a module finds its ops by them); nil between runs.
	mods model.Modules
}

// New returns a Predictor for the box under opts, with NCCL's collective
// model (NewCollectiveModel) for the options' NCCL settings.
func New(topo *topology.Topology, opts Options) (*Predictor, error) {
	return newPredictor(topo, opts, nil)
}

// newPredictor is New writing its runs into scratch (nil: its own).
func newPredictor(topo *topology.Topology, opts Options, scratch *runScratch) (*Predictor, error) {
	if topo == nil {
		return nil, errors.New("sim: nil topology")
	}
	coll, err := NewCollectiveModel(topo, opts.NCCL)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return newWithScratch(topo, opts, coll, scratch)
}

// newWithCollectives is New with an explicit collective cost model (a
// calibrated one, or a test double).
func newWithCollectives(topo *topology.Topology, opts Options, coll collectiveCoster) (*Predictor, error) {
	return newWithScratch(topo, opts, coll, nil)
}

// newWithScratch is newWithCollectives writing its runs into scratch
// (nil: its own).
func newWithScratch(topo *topology.Topology, opts Options, coll collectiveCoster, scratch *runScratch) (*Predictor, error) {
	if topo == nil || topo.NumGPUs() == 0 {
		return nil, errors.New("sim: topology has no GPUs")
	}
	if coll == nil {
		return nil, errors.New("sim: nil collective cost model")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	dev := topo.DeviceOf(0)
	if dev == nil {
		return nil, fmt.Errorf("sim: topology %s: GPU 0 has no device spec", topo.Name)
	}
	for i := 1; i < topo.NumGPUs(); i++ {
		if d := topo.DeviceOf(i); d == nil || d.Name != dev.Name {
			return nil, fmt.Errorf("sim: topology %s: GPU %d is not a %s (mixed devices are not modeled)", topo.Name, i, dev.Name)
		}
	}
	prof, err := profileOf(&opts)
	if err != nil {
		return nil, err
	}
	if scratch == nil {
		scratch = new(runScratch)
	}
	return &Predictor{topo: topo, dev: dev, opts: opts, coll: coll, runScratch: scratch,
		cm: newComputeModel(dev, prof, &opts)}, nil
}

// captureOf is the options' CUDA-graph capture for a plan of world GPUs on
// the Predictor's GPU (Options.GraphCapture; nil when graphs are off),
// handed to the schedule's builder.
func (p *Predictor) captureOf(world int) *model.GraphCapture {
	if !p.opts.CUDAGraphs {
		return nil
	}
	if c, ok := p.captures[world]; ok {
		return c
	}
	if p.captures == nil {
		p.captures = make(map[int]*model.GraphCapture)
	}
	c := p.opts.GraphCapture(p.dev.MemBytes, world)
	p.captures[world] = c
	return c
}

// runScratch is the memory of one prediction run that the next run
// overwrites: the engine's arrays, the per-op costs and the memos. The
// memos hold pointers into the schedule being predicted and are cleared
// after every run, so no schedule is retained and predictors that run
// one after another may share one scratch.
type runScratch struct {
	memo     collMemo
	cmemo    costMemo
	eng      engine
	costs    []OpCost // per simulated op
	costs0   []OpCost // rank 0's, before norm fusion (run: ranks that are copies)
	overhead []float64
	// layerKernels counts, per decoder layer, the kernels the host
	// launches in an eager prefill step (spreadPrefillHost).
	layerKernels []float64
}

// OpResult is one simulated op: when it ran, for how long, why, and the
// inputs of its cost.
type OpResult struct {
	ID    string       `json:"id"`
	Kind  model.OpKind `json:"kind"`
	Block string       `json:"block"`
	// Cost holds the parameters that produced Us (roofline terms, peak,
	// efficiency, fill, bandwidth; or collective algorithm, protocol,
	// latency and link parts).
	Cost  OpCost `json:"cost"`
	Layer int    `json:"layer"`
	Rank  int    `json:"rank"`

	StartUs float64 `json:"start_us"`
	// Us is the op's device time: Cost.Us plus OverheadUs.
	Us         float64 `json:"us"`
	OverheadUs float64 `json:"overhead_us,omitempty"` // per-kernel device-side launch gap (eager stream or graph node)
	// SpanGapUs is the part of OverheadUs that a measuring harness's span
	// of the op does not hold: with timing events (Options.
	// TimingEventsPerOp) the span runs from the op's opening event to its
	// closing one, so the gap between its closing event and the next op's
	// opening one lies between spans (one per op; 0 without events).
	// Compare matches spans against SpanUs.
	SpanGapUs float64 `json:"span_gap_us,omitempty"`
	LaunchUs  float64 `json:"launch_us,omitempty"` // host launch cost charged (eager)
	// WaitedOn is what released the op (see Wait).
	WaitedOn Wait  `json:"waited_on"`
	Bound    Bound `json:"bound"`

	FLOPs     float64 `json:"flops"`
	Bytes     float64 `json:"bytes"`
	CommBytes int64   `json:"comm_bytes"`
}

// SpanUs is the part of the op's device time its measured span can hold:
// Us less SpanGapUs, in us. Every predicted figure set beside measured
// spans (per op, per kind, per layer) is a sum of it, so they add up to
// one another.
func (o *OpResult) SpanUs() float64 { return o.Us - o.SpanGapUs }

// Share is time attributed to a group of ops (a kind, a block, an op name).
type Share struct {
	Name      string  `json:"name"`
	Us        float64 `json:"us"`
	ShareFrac float64 `json:"share_frac"` // Us / StepUs
	Count     int     `json:"count"`
}

// Prediction is the predicted step.
type Prediction struct {
	Model    string         `json:"model"`
	Topology string         `json:"topology"`
	Plan     model.Plan     `json:"plan"`
	Workload model.Workload `json:"workload"`
	Options  Options        `json:"options"`
	// Engine says which engine profile priced the step and which of its
	// kernels (attention backend, MoE kernel, all-reduce) ran the ops
	// (Predictor.EngineSummary; PredictScenario only).
	Engine string `json:"engine,omitempty"`
	// MoERouting is the routing the schedule's MoE layers were built
	// under (model.BuildOptions.Routing; omitted when uniform).
	MoERouting model.Routing `json:"moe_routing,omitzero"`
	// CostSource names the measured tables consulted before the priors
	// ("" = priors only); MeasuredOps counts the ops priced from them
	// (OpCost.Source of each says which table and row).
	CostSource  string `json:"cost_source,omitempty"`
	MeasuredOps int    `json:"measured_ops,omitempty"`
	// DSA says how a DSA model's attention was priced, dense or sparse,
	// and whether --dense-dsa chose it (Scenario.DenseDSAChosen); nil for
	// a model without DSA (PredictScenario only).
	DSA *DSAAttention `json:"dsa,omitempty"`
	// KVDefault says the engine chose the workload's KV dtype
	// (Scenario.KVDefault; PredictScenario only).
	KVDefault *KVDefault `json:"kv_default,omitempty"`
	// MoEDispatch and DispatchDtype are how the tokens reached the
	// experts and in which dtype (model.BuildOptions), set only when the
	// step dispatches them (model.Plan.DispatchesMoE; PredictScenario
	// only). MoEDispatchChosen: --moe-dispatch chose it; otherwise it is
	// what the engine runs by default on the box (MoEDispatchOf).
	// DispatchDtypeChosen: --dispatch-dtype chose it; otherwise it is the
	// engine's for that dispatch (vLLM's all-gather: its experts' input
	// format).
	MoEDispatch         string      `json:"moe_dispatch,omitempty"`
	MoEDispatchChosen   bool        `json:"moe_dispatch_chosen,omitempty"`
	DispatchDtype       model.Dtype `json:"dispatch_dtype,omitempty"`
	DispatchDtypeChosen bool        `json:"dispatch_dtype_chosen,omitempty"`

	// Summary: StepUs is the time of one step (the latest op end over
	// all ranks); Sequences the requests the step serves (Workload.Batch
	// before CUDA-graph padding); TokensPerStep the expected tokens each
	// gains (1 + accepted MTP tokens); TokensPerSPerRequest =
	// TokensPerStep / step; TokensPerS the aggregate over all sequences;
	// CommShareFrac = CommUs / StepUs; Graphed whether the step ran as a CUDA
	// graph; Memory the per-GPU memory fit (PredictScenario only).
	Summary

	// CommUs is the device time of collectives on the representative
	// rank (rank 0). IdleUs is time rank 0's device waited (for the host,
	// or for peers).
	CommUs float64 `json:"comm_us"`
	IdleUs float64 `json:"idle_us"`
	// HostUs is rank 0's host launch time (eager mode); when it is close to
	// StepUs the host is the bottleneck.
	HostUs float64 `json:"host_us"`
	// Kernels counts rank 0's kernels (ops not fused away, and the
	// companion kernels the engine launches with them, OpCost.ExtraKernels).
	Kernels int `json:"kernels"`

	ByKind  []Share `json:"by_kind"`  // per op kind, plus "idle"
	ByBlock []Share `json:"by_block"` // attn, moe, mlp, embed, head, mtp
	ByName  []Share `json:"by_name"`  // per block.name over all layers, largest first

	// Symmetric is true when every rank had the same op list and only
	// rank 0 was simulated; Ops then holds rank 0's ops and stands for
	// every rank. Otherwise Ops holds every rank's ops, rank by rank.
	Symmetric bool       `json:"symmetric"`
	Ops       []OpResult `json:"ops"`
	// TopOps are indices into Ops of the longest ops, longest first.
	TopOps []int `json:"top_ops"`
	// CriticalPath lists indices into Ops from the first op to the one
	// that ends the step, each released by the previous one.
	CriticalPath []int `json:"critical_path"`
	// Spec is what a speculative step yields and what priced it (its
	// method, drafter and acceptance; PredictScenario only), nil without
	// speculation.
	Spec *SpecStep `json:"spec,omitempty"`
	// Caveats: known gaps of this prediction on this box and the
	// measurement that would close each (Predictor.Caveats;
	// PredictScenario only).
	Caveats []string `json:"caveats,omitempty"`
}

// DSAAttention is how a DSA model's attention was priced.
type DSAAttention struct {
	// Dense: as dense MLA over the whole context without the indexer;
	// false: DSA sparse attention.
	Dense bool `json:"dense"`
	// Chosen: by --dense-dsa; false: as the engine runs the model on the
	// box (ImpliedDenseDSA).
	Chosen bool `json:"chosen"`
}

// OptionsLabel is the prediction's options for people: the run-time
// options (Options.Label) and the build options that priced the step
// and were chosen or differ from their defaults: dense-dsa or
// dense-dsa=false when --dense-dsa chose it, moe-dispatch when
// --moe-dispatch chose it (unchosen it is the engine's, which the engine
// line names) and dispatch-dtype when --dispatch-dtype chose it (likewise).
func (pr *Prediction) OptionsLabel() string {
	var b []string
	if d := pr.DSA; d != nil && d.Chosen {
		if d.Dense {
			b = append(b, "dense-dsa")
		} else {
			b = append(b, "dense-dsa=false")
		}
	}
	if pr.MoEDispatch != "" && pr.MoEDispatchChosen {
		b = append(b, "moe-dispatch="+pr.MoEDispatch)
	}
	if pr.DispatchDtype != "" && pr.DispatchDtypeChosen {
		b = append(b, "dispatch-dtype="+string(pr.DispatchDtype))
	}
	l := pr.Options.Label()
	if len(b) == 0 {
		return l
	}
	if l == "none" {
		return strings.Join(b, " ")
	}
	return l + " " + strings.Join(b, " ")
}

// MemoryFit is the per-GPU memory budget of a plan and workload.
type MemoryFit struct {
	DeviceBytes     int64 `json:"device_bytes"`     // GPU memory
	UsableBytes     int64 `json:"usable_bytes"`     // what the engine's budget covers (Budget): weights, activations where counted, pool
	WeightBytes     int64 `json:"weight_bytes"`     // weights per GPU
	KVBytes         int64 `json:"kv_bytes"`         // KV cache the workload needs per GPU
	ActivationBytes int64 `json:"activation_bytes"` // workspace estimate (0: in the reserve the fraction leaves, SGLang)
	// CUDAGraphBytes is the engine's CUDA-graph estimate taken off the
	// pool (Budget.CUDAGraphBytes; 0 where none is, or none was given:
	// Budget.GraphUnpriced).
	CUDAGraphBytes  int64   `json:"cuda_graph_bytes,omitempty"`
	KVBytesPerToken float64 `json:"kv_bytes_per_token"`
	// KVCapacityTokens is how many tokens of KV fit after weights and
	// workspace; KVTokensNeeded how many the workload holds (sequences per
	// attention group x (context + new tokens)).
	KVCapacityTokens int64 `json:"kv_capacity_tokens"`
	KVTokensNeeded   int64 `json:"kv_tokens_needed"`
	Fits             bool  `json:"fits"`
	// ShortfallGB is how much is missing (GB, 1e9 B) when it does not fit.
	ShortfallGB float64 `json:"shortfall_gb"`
	// Budget is the engine's KV-pool rule and the fraction it ran at.
	Budget KVBudget `json:"kv_budget"`
}

// Predict simulates one step of s. The schedule's ranks map to GPUs 0..n-1
// of the topology.
func (p *Predictor) Predict(s *model.Schedule) (*Prediction, error) {
	return p.predict(s, symCheck, p.graphedAsBuilt(s))
}

func (p *Predictor) predict(s *model.Schedule, mode int, graphed bool) (*Prediction, error) {
	if err := p.run(s, mode, graphed); err != nil {
		return nil, err
	}
	return p.assemble(s, graphed), nil
}

// graphedAsBuilt is whether s, as built (its batch already padded, or
// not), replays a CUDA graph under the Predictor's capture
// (model.Schedule.GraphedUnder), for callers that hand the Predictor a
// schedule rather than a Scenario.
func (p *Predictor) graphedAsBuilt(s *model.Schedule) bool {
	return s.GraphedUnder(p.captureOf(s.Plan.World()))
}

// StepUsBuilt is Predict without the per-op result, the step time only,
// for a schedule that model.Build / BuildWith returned and nobody
// modified: the representative-rank shortcut is then decided by comparing
// collective groups only (see builtSymmetric), not every rank's ops,
// which saves a pass over ranks x ops. It allocates nothing once the
// Predictor has warmed up.
func (p *Predictor) StepUsBuilt(s *model.Schedule) (float64, error) {
	return p.stepUs(s, symBuilt, p.graphedAsBuilt(s))
}

func (p *Predictor) stepUs(s *model.Schedule, mode int, graphed bool) (float64, error) {
	if err := p.run(s, mode, graphed); err != nil {
		return 0, err
	}
	return latestEnd(p.eng.end[:len(p.eng.ops)]), nil
}

// latestEnd is math.Max folded over ends from 0, without math.Max's
// per-call sign and NaN tests (the step's hottest loop after pricing):
// without a NaN, > picks what math.Max picks (+Inf included, +0 over
// -0); with one, the fold with math.Max decides.
func latestEnd(ends []float64) float64 {
	step, nan := 0.0, false
	for _, e := range ends {
		if e > step {
			step = e
		} else if e != e {
			nan = true
		}
	}
	if nan {
		step = 0
		for _, e := range ends {
			step = math.Max(step, e)
		}
	}
	return step
}

// symmetric reports whether every rank's op list has the same costs and
// dependencies as rank 0's (only Rank and ID may differ), with the same
// collective groups, so that one rank's timeline stands for all.
func symmetric(s *model.Schedule) bool {
	r0 := s.Ranks[0]
	for r := 1; r < len(s.Ranks); r++ {
		rr := s.Ranks[r]
		if len(rr) != len(r0) {
			return false
		}
		for i := range r0 {
			if !sameCost(&r0[i], &rr[i]) {
				return false
			}
		}
	}
	return true
}

func sameCost(a, b *model.Op) bool {
	// Fast path: ranks that model.Build copies from one template share the
	// string data of their dtypes, so the cost fields compare equal as raw
	// memory. A difference there falls back to the field-by-field check.
	if rawCostEqual(a, b) && a.Kind == b.Kind {
		return sameSlices(a, b)
	}
	if a.FLOPs != b.FLOPs || a.BytesRead != b.BytesRead || a.BytesWritten != b.BytesWritten ||
		a.CommBytes != b.CommBytes || a.M != b.M || a.N != b.N || a.K != b.K || a.Batch != b.Batch ||
		a.KVBytes != b.KVBytes {
		return false
	}
	if a.Kind != b.Kind || a.WeightDtype != b.WeightDtype || a.KVDtype != b.KVDtype || a.Collective != b.Collective {
		return false
	}
	return sameSlices(a, b)
}

func sameSlices(a, b *model.Op) bool {
	if len(a.Deps) != len(b.Deps) || len(a.Group) != len(b.Group) {
		return false
	}
	for i, d := range a.Deps {
		if b.Deps[i] != d {
			return false
		}
	}
	if len(a.Group) > 0 && &a.Group[0] != &b.Group[0] {
		for i, g := range a.Group {
			if b.Group[i] != g {
				return false
			}
		}
	}
	return true
}

// How run decides whether one rank can stand for all.
const (
	symCheck = iota // compare every rank's ops with rank 0's (any schedule)
	symBuilt        // the schedule comes from model.BuildWith: compare collective groups only
	symNever        // simulate every rank (tests)
)

// simulateRanks prices every op and runs the engine without the
// representative-rank shortcut (tests compare it with Predict).
func (p *Predictor) simulateRanks(s *model.Schedule) error {
	return p.run(s, symNever, p.graphedAsBuilt(s))
}

// builtSymmetric is symmetric for a schedule made by model.BuildWith,
// whose ranks are copies of one op template that differ only in Rank and
// in the Group of collectives (model/build.go: every rank's ops are copied
// from the template, then Rank and Group are set). Comparing the groups
// of rank 0's collectives is then enough; TestBuiltSymmetricMatchesCheck
// guards the assumption over plans.
func builtSymmetric(s *model.Schedule) bool {
	r0 := s.Ranks[0]
	for r := 1; r < len(s.Ranks); r++ {
		if len(s.Ranks[r]) != len(r0) {
			return false
		}
	}
	for i := range r0 {
		if r0[i].Kind != model.KindCollective {
			continue
		}
		g0 := r0[i].Group
		for r := 1; r < len(s.Ranks); r++ {
			g := s.Ranks[r][i].Group
			if len(g) != len(g0) {
				return false
			}
			if len(g) > 0 && &g[0] == &g0[0] {
				continue
			}
			for k := range g {
				if g[k] != g0[k] {
					return false
				}
			}
		}
	}
	return true
}

// endRun drops what a run held of its schedule (the cost memo's op
// pointers, the modules), so that no schedule is retained.
func (p *Predictor) endRun() {
	p.cmemo.clear()
	p.memo.reset() // the scratch may be the next predictor's
	p.mods = nil
}

// run prices every op of s and runs the engine, launching the step as a
// CUDA graph when graphed (the schedule's Deploy.Graphed, or
// graphedAsBuilt).
func (p *Predictor) run(s *model.Schedule, mode int, graphed bool) error {
	if s == nil || len(s.Ranks) == 0 {
		return errors.New("sim: empty schedule")
	}
	if len(s.Ranks) > p.topo.NumGPUs() {
		return fmt.Errorf("sim: schedule has %d ranks but topology %s has %d GPUs", len(s.Ranks), p.topo.Name, p.topo.NumGPUs())
	}
	defer p.endRun()
	p.memo.reset()
	p.graphed = graphed
	p.mods = s.Modules
	p.cm.noteSchedule(s)
	var sym bool
	switch {
	case mode == symNever:
	case len(s.Ranks) == 1:
		sym = true // nothing to compare (the evaluator's one-rank views)
	case mode == symCheck:
		sym = symmetric(s)
	case mode == symBuilt:
		sym = builtSymmetric(s)
	}
	nSim := 1
	total := len(s.Ranks[0])
	if !sym {
		nSim = len(s.Ranks)
		total = s.NumOps()
	}
	e := &p.eng
	e.reset(total)
	p.costs = grow(p.costs, total)
	p.overhead = grow(p.overhead, total)

	e.queueDepth = p.topo.Host.LaunchQueueDepth
	e.stepLaunchUs = 0
	// Launch model (see engine.go). Eager: every op costs LaunchEagerUs of
	// host time (an NCCL collective ncclHostExtraUs more) and the device
	// pays the stream-launch gap per kernel. Graph: one cudaGraphLaunch per
	// step, priced as one eager launch (assumption), no host time per op,
	// and the smaller per-node gap LaunchGraphUs on the device. The eager
	// gap is never below the graph's, so for the same ops a graph is never
	// slower than eager.
	// The per-kernel host cost of an eager launch is the engine's
	// (engineKernels.eagerHostUs); a graph's launch is one call, priced at
	// the device's.
	eagerHostUs := p.cm.eagerHostUs(p.dev)
	launchUs, overUs, collExtraUs := eagerHostUs, eagerKernelGapUs(p.dev), ncclHostExtraUs
	// An eager step with prompt tokens under an engine that states its
	// prefill iteration's host time per layer (SGLang) takes that instead,
	// spread over the kernels the host launches (spreadPrefillHost).
	var prefillLayerUs float64
	if graphed {
		e.stepLaunchUs, launchUs, overUs, collExtraUs = p.dev.LaunchEagerUs, 0, p.dev.LaunchGraphUs, 0
	} else if s.HasPrefillTokens() {
		prefillLayerUs = p.cm.eagerPrefillLayerHostUs(p.dev)
	}
	// A harness's timing events are nodes of their own (see
	// Options.TimingEventsPerOp): in a graph each adds TimingEventUs to
	// its op, and the transition from one op's closing event to the next
	// op's opening one lies between their spans; in an eager stream each
	// is a command of its own, the gap between two events apiece, and the
	// kernel's own gap lies between the spans.
	events := float64(p.opts.TimingEventsPerOp)
	eventUs, eventGapUs := p.dev.TimingEventCosts()
	p.spanGapUs = 0
	if events > 0 {
		p.spanGapUs = overUs
		if graphed {
			p.spanGapUs = eventGapUs
		}
	}
	// The events bracket the op, once whatever kernels it launches.
	evUs := events * eventGapUs
	if graphed {
		evUs = events * eventUs
	}
	// A piecewise graph (engineKernels.piecewise) launches the ops of the
	// engine's attention custom op eagerly between its captured pieces:
	// each such kernel pays an eager launch on the host and the eager gap
	// on the device, an NCCL one its host extra, and the piece after them
	// one more graph launch, priced as one eager launch as the step's is.
	eagerOverUs, eagerEvUs := eagerKernelGapUs(p.dev), events*eventGapUs
	piecewise := graphed && p.cm.piecewise
	// Every rank of a built schedule is a copy of one template but for its
	// collectives' groups (builtSymmetric's premise): rank r's compute op
	// i has rank 0's op i's cost fields, so ranks after the first take
	// rank 0's compute costs (as priced, before norm fusion: costs0) and
	// price only their collectives.
	copies := mode == symBuilt && nSim > 1
	// fuseAR: the norm after an all-reduce goes to its kernel to fuse
	// (--ar-norm-fusion on, or the engine's default): the fusion op the
	// engine's all-reduce strategy choice keys on (ARMessage.Fused).
	fuseAR, caps := p.arFusion(s)
	g := 0
	for r := 0; r < nSim; r++ {
		ops := s.Ranks[r]
		fromRank0 := copies && r > 0 && len(ops) == len(s.Ranks[0])
		inPiece := true // the step's graph launch opens the first piece
		for i := range ops {
			op := &ops[i]
			var c OpCost
			if op.IsCollective() {
				var err error
				c, err = p.collectiveCost(op, fuseAR && normFusable(ops, i+1, caps))
				if err != nil {
					return fmt.Errorf("sim: op %s on rank %d: %w", op.ID, r, err)
				}
			} else if fromRank0 {
				c = p.costs0[i]
			} else {
				if cp, h := p.cmemo.get(op, p.named); cp != nil {
					c = *cp
				} else {
					c = p.computeCost(ops, i)
					p.cmemo.put(h, op, c)
				}
			}
			p.costs[g+i] = c
			// Kernels the engine launches with the op (OpCost.ExtraKernels)
			// pay the same gap and host launch as the op's own; a
			// harness's timing events bracket the op once.
			k := float64(1 + c.ExtraKernels)
			opOver, opEv, opLaunch, opColl := overUs, evUs, launchUs, collExtraUs
			var pieceUs float64
			if piecewise {
				if p.cm.eagerRoles[op.Role] {
					opOver, opEv, opLaunch, opColl, inPiece = eagerOverUs, eagerEvUs, eagerHostUs, ncclHostExtraUs, false
				} else if !inPiece {
					pieceUs, inPiece = p.dev.LaunchEagerUs, true
				}
			}
			p.overhead[g+i] = opOver*k + opEv
			// A GEMM library's split-K reduction is launched within the
			// GEMM's own call (cuBLAS), not by the engine's host path: it
			// pays the device's node gap, no host launch of its own.
			eop := engineOp{durUs: c.Us + p.overhead[g+i], launchUs: opLaunch*hostKernels(c) + pieceUs, depLo: -1, coll: op.IsCollective()}
			if eop.coll && ncclAlgo(c.Algo) {
				eop.launchUs += opColl
			}
			if op.IsCollective() && p.opts.Overlap {
				eop.stream = 1
			}
			if op.Deps != nil {
				eop.depLo = int32(len(e.deps))
				for _, d := range op.Deps {
					if d < 0 || d >= i {
						return fmt.Errorf("sim: op %s on rank %d: dependency %d is not an earlier op of the rank (index %d)", op.ID, r, d, i)
					}
					e.deps = append(e.deps, int32(d))
				}
				eop.depHi = int32(len(e.deps))
			}
			e.ops = append(e.ops, eop)
		}
		if copies && r == 0 {
			p.costs0 = append(p.costs0[:0], p.costs[:len(ops)]...)
		}
		// --ar-norm-fusion fuses every norm it may; the engine's default
		// fusion only those its custom kernel carries (fuseNorms).
		if fuseAR {
			p.fuseNorms(ops, g, caps, p.opts.ARNormFusion != ToggleOn)
		}
		// After the fusion: a norm gone into its all-reduce launches nothing.
		if prefillLayerUs > 0 {
			p.layerKernels = spreadPrefillHost(e.ops[g:], ops, p.costs[g:g+len(ops)], launchUs, prefillLayerUs, p.layerKernels)
		}
		g += len(ops)
		e.rankOff = append(e.rankOff, int32(g))
	}
	if sym {
		e.runSymmetric()
		return nil
	}
	return e.runRanks(s)
}

// spreadPrefillHost gives one rank's eager prefill step its engine's host
// time: layerUs for every decoder layer, shared by the kernels the host
// launches for that layer's ops (a split-K reduction is launched within
// its GEMM's call, and a norm fused into its all-reduce launches none),
// each kernel an equal part; an NCCL collective keeps its enqueue path's
// extra (what it paid beyond kernelUs a kernel as built), and the ops
// outside the layers (embedding, head) keep kernelUs a kernel. The
// engine's Python forward runs layer by layer ahead of the device, so a
// step whose kernels are short is host-bound at about layers x layerUs,
// one whose kernels take longer hides it; and every layer costs the same
// on the host, as a copy of the model with fewer layers extrapolates it
// (IterationCoster). scratch is reused for the per-layer kernel counts and
// returned.
func spreadPrefillHost(eops []engineOp, ops []model.Op, costs []OpCost, kernelUs, layerUs float64, scratch []float64) []float64 {
	kernels := scratch[:0]
	for i := range ops {
		l := ops[i].Layer
		if l < 0 || costs[i].Fused {
			continue
		}
		for len(kernels) <= l {
			kernels = append(kernels, 0)
		}
		kernels[l] += hostKernels(costs[i])
	}
	for i := range ops {
		l := ops[i].Layer
		if l < 0 || costs[i].Fused || kernels[l] == 0 {
			continue
		}
		extra := eops[i].launchUs - kernelUs*hostKernels(costs[i])
		eops[i].launchUs = layerUs/kernels[l]*hostKernels(costs[i]) + extra
	}
	return kernels
}

// hostKernels is how many kernels the host launches for an op of cost c:
// its own and its companions, less a split-K reduction, which its GEMM
// library launches within the GEMM's call.
func hostKernels(c OpCost) float64 {
	k := float64(1 + c.ExtraKernels)
	if c.SplitKReduce {
		k--
	}
	return k
}

// ncclHostExtraUs is the host time an NCCL collective costs in eager mode
// on top of a plain op's LaunchEagerUs: the communicator wrapper (vLLM's
// PyNcclCommunicator: a ctypes call, stream and buffer lookups) and NCCL's
// own enqueue path (argument checks, ncclGroupEnd building the kernel's
// work list and plan, proxy bookkeeping) before its cuLaunchKernelEx.
// Assumption: 10 us (same order as a framework op; NCCL publishes no
// figure); calibrate from the host-launch attribute of collective spans.
// Under a CUDA graph the call was captured once and costs nothing per step.
const ncclHostExtraUs = 10.0

// eagerKernelGapUs is the device-side gap per stream-launched kernel:
// Device.KernelGapEagerUs, never below the graph's per-node gap (a stream
// launch does at least the front-end work of a graph node; 0 in older
// topology files means "as in a graph").
func eagerKernelGapUs(d *topology.Device) float64 {
	return max(d.KernelGapEagerUs, d.LaunchGraphUs)
}

// customAlgo reports whether a collective's algorithm is an engine's own
// all-reduce kernel (custom one-shot or two-shot, symmetric-memory
// multimem), not NCCL's.
func customAlgo(algo string) bool {
	switch algo {
	case "OneShot", "TwoShot", "Multimem":
		return true
	}
	return false
}

// ncclAlgo reports whether a collective's algorithm is NCCL's (not a
// custom all-reduce kernel, not a no-op).
func ncclAlgo(algo string) bool {
	switch algo {
	case "Ring", "Tree", "P2P":
		return true
	}
	return false
}

// fuseNorms folds every RMSNorm that directly follows an all-reduce into
// it: the norm costs no launch and no kernel; its memory traffic is added
// to the all-reduce at the device's streaming bandwidth. With customOnly
// (the engine's own default fusion, not --ar-norm-fusion) only an
// all-reduce the engine's custom kernel carries is fused: the fusion is
// that kernel's (TensorRT-LLM's RESIDUAL_RMS_NORM), and an all-reduce
// NCCL carries leaves the residual add and the norm to a kernel of their
// own.
func (p *Predictor) fuseNorms(ops []model.Op, off int, caps fusionCaps, customOnly bool) {
	for i := 1; i < len(ops); i++ {
		if !normFusable(ops, i, caps) {
			continue
		}
		n, ar := off+i, off+i-1
		if customOnly && !customAlgo(p.costs[ar].Algo) {
			continue
		}
		// The fused op is FlashInfer's all-reduce + RMSNorm kernel (both
		// engines' fusion calls trtllm_allreduce_fusion), not the engine's
		// standalone all-reduce that a perf DB's custom_allreduce table
		// measured: it keeps the priors' IPC price (one-shot or two-shot as
		// the engine's rule picks), which on 8 x B200 at a decode batch is
		// 8.8 us where the fused kernel was measured at 8.7 (sglang PR
		// #7621) and vLLM 0.24's custom all-reduce table holds 21.6.
		if c := &p.costs[ar]; c.Source != SourcePrior && c.PriorUs > 0 && customAlgo(c.Algo) {
			p.eng.ops[ar].durUs += c.PriorUs - c.Us
			c.Us, c.PriorUs, c.Source = c.PriorUs, 0, SourcePrior
		}
		// The norm's traffic at the streaming bandwidth (the fused kernel
		// has the all-reduce's CTAs, not the norm's one per token).
		extra := 0.0
		if bw := p.cm.cells[kindIndex(model.KindNorm)][0].memGBps; bw > 0 {
			extra = (ops[i].BytesRead + ops[i].BytesWritten) / (bw * 1e3)
		}
		p.costs[ar].Us += extra
		p.costs[ar].LinkUs += extra
		p.eng.ops[ar].durUs += extra
		p.costs[n] = OpCost{Fused: true, Bound: BoundNone, MemoryUs: extra, Source: SourcePrior}
		p.eng.ops[n].durUs, p.eng.ops[n].launchUs = 0, 0
		p.overhead[n] = 0
	}
}

// fusionCaps are the engine's limits on the all-reduce + RMSNorm fusion
// for a step at one TP degree on this device, looked up once a step:
// maxTokens the most tokens a fused step may carry, maxBytes the largest
// all-reduce message fused (0: no limit).
type fusionCaps struct{ maxTokens, maxBytes int64 }

// arFusion reports whether schedule s hands the norm after an
// all-reduce to its kernel (--ar-norm-fusion on, or the engine's default
// there: the fusion op the engine's all-reduce strategy choice keys on,
// engine.ARMessage.Fused) and, where it does, the engine's limits on the
// fusion at s's TP degree on this device.
func (p *Predictor) arFusion(s *model.Schedule) (bool, fusionCaps) {
	f := p.opts.ARNormFusion
	if f != ToggleOn && (f != ToggleDefault || !p.cm.arFused(s.Plan, s.ModelType)) {
		return false, fusionCaps{}
	}
	return true, fusionCaps{
		maxTokens: int64(p.cm.prof.FusionMaxTokens(engprof.FuseAllReduceRMSNorm)),
		maxBytes:  p.cm.prof.FusionMaxInputBytes(engprof.FuseAllReduceRMSNorm, p.cm.cc, s.Plan.Normalized().TP),
	}
}

// normFusable reports whether norm ops[i] may run in the kernel of the
// all-reduce ops[i-1] before it: it follows the all-reduce directly and
// waits for nothing else, within the engine's caps.
func normFusable(ops []model.Op, i int, caps fusionCaps) bool {
	if i < 1 || i >= len(ops) || ops[i].Kind != model.KindNorm || !ops[i-1].IsCollective() || ops[i-1].Collective != model.AllReduce {
		return false
	}
	if ops[i].Deps != nil && (len(ops[i].Deps) != 1 || ops[i].Deps[0] != i-1) {
		return false
	}
	// Above the engine's token cap the fused kernel does not run: the
	// all-reduce and the norm stay apart (the norm's rows are the step's
	// tokens).
	if caps.maxTokens > 0 && ops[i].M > caps.maxTokens {
		return false
	}
	// Above the engine's size cap for this device and TP degree the same
	// (vLLM: the pass runs only on compile ranges up to the cap over the
	// hidden size).
	if caps.maxBytes > 0 && ops[i-1].CommBytes > caps.maxBytes {
		return false
	}
	return true
}

// collectiveCost prices a collective op with the configured all-reduce
// implementation (or the cost source's measurement where it applies,
// collectiveMeasured), memoized per (op, group, bytes).
//
// fused: the engine hands an all-reduce its norm to fuse, which its
// strategy choice keys on (engine.ARMessage); with the op's tokens (M) it
// is part of the key.
func (p *Predictor) collectiveCost(op *model.Op, fused bool) (OpCost, error) {
	mk := collMsg{bytes: op.CommBytes, tokens: op.M, fused: fused}
	if c, ok := p.memo.get(op.Collective, op.Group, mk); ok {
		return c, nil
	}
	// Across runs (a sweep's configurations share collective sizes: every
	// context and KV dtype of a batch moves the same bytes), by the
	// group's members: the cost depends on which GPUs, not their order.
	key, keyed := collCacheKey{op: op.Collective, msg: mk, graphed: p.graphed}, false
	key.mask, keyed = groupBits(op.Group, p.topo.NumGPUs())
	if keyed {
		if i, ok := p.collCache[key]; ok {
			c := p.collCosts[i]
			p.memo.put(op.Collective, op.Group, mk, c)
			return c, nil
		}
	}
	if len(op.Group) == 0 {
		return OpCost{}, errors.New("collective has an empty group")
	}
	for _, m := range op.Group {
		if m < 0 || m >= p.topo.NumGPUs() {
			return OpCost{}, fmt.Errorf("group member %d is not a GPU of topology %s (%d GPUs)", m, p.topo.Name, p.topo.NumGPUs())
		}
	}
	for i, a := range op.Group {
		for _, b := range op.Group[:i] {
			if a == b {
				return OpCost{}, fmt.Errorf("group %v names rank %d twice", op.Group, a)
			}
		}
	}
	c := OpCost{Bound: BoundNone, Algo: "none", Source: SourcePrior}
	if len(op.Group) > 1 {
		cc, err := p.priceCollective(op, fused)
		if err != nil {
			return OpCost{}, err
		}
		c = OpCost{Us: cc.TimeUs, Algo: cc.Algo, Proto: cc.Proto, LatencyUs: cc.LatencyUs, LinkUs: cc.LinkUs, Bound: BoundLatency, Source: SourcePrior}
		if cc.LinkUs > cc.LatencyUs {
			c.Bound = BoundLink
		}
		if mc, ok := p.collectiveMeasured(op, cc); ok {
			c = mc
		}
	}
	p.memo.put(op.Collective, op.Group, mk, c)
	if keyed {
		switch {
		case p.collCache == nil:
			p.collCache = make(map[collCacheKey]int32, 512)
			p.collCosts = make([]OpCost, 0, 512)
		case len(p.collCache) >= maxCollCache:
			// Full: start again in the same memory (a sweep that moves
			// past these sizes rarely comes back to them).
			clear(p.collCache)
			p.collCosts = p.collCosts[:0]
		}
		// The costs in a slice, the map holding their index: a map stores
		// a value as large as an OpCost out of line, one allocation per
		// entry.
		p.collCache[key] = int32(len(p.collCosts))
		p.collCosts = append(p.collCosts, c)
	}
	return c, nil
}

// collCacheKey is a collective's cost across runs: the call, its group's
// members as a bit set, and the run's launch mode (a measured table can
// tell graphs from eager).
type collCacheKey struct {
	op      model.Collective
	mask    uint64
	msg     collMsg
	graphed bool
}

// maxCollCache bounds a Predictor's cache of collective costs; a sweep
// that exceeds it starts over (costs are recomputed, results do not
// change).
const maxCollCache = 1 << 14

// groupBits is group's members as a bit set; ok is false for a group
// that collectiveCost refuses (empty, a member outside the n GPUs, a
// member twice), which is never cached.
func groupBits(group []int, n int) (mask uint64, ok bool) {
	if len(group) == 0 || n > 64 {
		return 0, false
	}
	for _, m := range group {
		if m < 0 || m >= n || mask&(1<<uint(m)) != 0 {
			return 0, false
		}
		mask |= 1 << uint(m)
	}
	return mask, true
}

// priceCollective picks the implementation (custom all-reduce, the
// engine's symmetric-memory all-reduce, or NCCL). A custom all-reduce
// needs P2P between every pair of the group (the driver's;
// NCCL_P2P_LEVEL does not restrict it, NCCL_P2P_DISABLE does): without it
// CustomAllReduce reports ok false and NCCL carries the op.
func (p *Predictor) priceCollective(op *model.Op, fused bool) (CollectiveCost, error) {
	if op.Collective == model.AllReduce {
		twoShot, custom := false, false
		switch p.opts.CustomAR {
		case CustomAROneShot, CustomARTwoShot:
			custom, twoShot = op.CommBytes <= customARMaxBytes, p.opts.CustomAR == CustomARTwoShot
		case CustomARAuto:
			// The engine's rule (its profile): vLLM's and SGLang's custom
			// all-reduce runs on 2 GPUs or on GPUs with NVLink between
			// every pair; vLLM's symmetric memory where they share an
			// NVSwitch, above the custom all-reduce's cap there.
			switch p.cm.prof.AllReducePath(p.cm.arch, p.cm.cc, len(op.Group), p.topo.AllNVLink(op.Group), p.topo.NVSwitchJoined(op.Group),
				engprof.ARMessage{Bytes: op.CommBytes, Tokens: op.M, Hidden: op.N, Fused: fused}) {
			case engprof.ARCustomOneShot:
				custom = true
			case engprof.ARCustomTwoShot, engprof.ARSymmTwoShot:
				// Torch's two-shot kernel (symmetric memory on the world
				// sizes without multimem) is priced as the custom two-shot
				// over P2P: no measurement of it was found.
				custom, twoShot = true, true
			case engprof.ARSymmMultimem:
				if mm, ok := p.coll.(multimemAllReducer); ok {
					if c, ok := mm.MultimemAllReduce(op.Group, op.CommBytes); ok {
						return c, nil
					}
				}
			}
		}
		if custom {
			if car, ok := p.coll.(customAllReducer); ok {
				if c, ok := car.CustomAllReduce(op.Group, op.CommBytes, twoShot); ok {
					return c, nil
				}
			}
		}
	}
	return p.coll.Cost(op.Collective, op.Group, op.CommBytes), nil
}
