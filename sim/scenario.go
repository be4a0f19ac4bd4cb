package sim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/internal/jsonerr"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

// Scenario is one deployment, end to end: which model (Arch, and how its
// schedule is built), laid out by which plan, serving which workload, run
// with which options, on which box (Topo). It is the one value every verb
// binds its flags to, that a run records on its step spans (its JSON, see
// MarshalJSON) and that a comparison decodes to re-predict exactly what
// ran. It is also the point advise's catalog entries transform and plan's
// sweeps enumerate.
//
// Predictor methods read Arch, Plan, Workload and Build; the Predictor's
// own topology and options (New(sc.Topo, sc.Options)) stand for Topo and
// Options there. PredictScenario (the function) uses all of it.
type Scenario struct {
	Arch     *model.Arch
	Build    model.BuildOptions
	Plan     model.Plan
	Workload model.Workload
	Options  Options
	Topo     *topology.Topology
	// TopoRef finds Topo again (preset name, or file path and hash);
	// zero means Topo's name, which must then be resolvable.
	TopoRef topology.Ref
	// RunTokens is the tokens per DP group the schedule's token ops ran
	// (model.Deployment.TokensPerGroup: the captured size under a CUDA
	// graph), recorded by run; 0 before a run. A comparison checks that
	// the schedule it rebuilds runs as many.
	RunTokens int64
	// RunBatch is what runs recorded before a graphed step padded tokens
	// instead of sequences: the batch of whole sequences the schedule ran
	// (padded for CUDA graphs). Read from such a trace, never written; a
	// comparison refuses a rebuilt step of another batch.
	RunBatch int
	// Costs prices ops from measured tables before the priors (a perf
	// DB, see UseCostSource); nil: priors only. The JSON records its name
	// (CostsName after decoding), since the tables live outside the
	// scenario: whoever re-predicts a recorded scenario must bring them.
	Costs CostSource
	// CostsName is the name of the cost source the scenario was priced
	// with when it was recorded ("" = priors only).
	CostsName string
	// DenseDSAChosen says Build.DenseDSA was chosen (--dense-dsa given)
	// rather than taken from how the engine runs a DSA model on the box
	// (ImpliedDenseDSA): the prediction shows a chosen value among its
	// options, since it may differ from what the engine runs.
	DenseDSAChosen bool
	// KVDefault says the engine chose Workload.KVDtype (the user named
	// none and its profile's kv_default decided, ImpliedKVDefault); nil
	// when the user named it or tpscope's rule holds (the checkpoint's
	// KV scheme, else the model's dtype).
	KVDefault *KVDefault
	// MaxRunning is the engine's limit on running requests over every DP
	// rank (SGLang's max_running_requests, the size of its request pool,
	// which its capture lists stop at) where the caller serves the
	// step under one: a serving run's, given or the engine's default for
	// the method (serving.Simulator.RequestPool). 0: the step's own
	// (specRequestPool). Not recorded.
	MaxRunning int
}

// CostSourceName is the name of the scenario's cost source, "" for
// priors only.
func (sc *Scenario) CostSourceName() string {
	if sc.Costs != nil {
		return sc.Costs.Name()
	}
	return sc.CostsName
}

// NewPredictor returns a Predictor for the scenario's box and options
// that consults its cost source first (New, then UseCostSource).
func (sc *Scenario) NewPredictor() (*Predictor, error) {
	return sc.newPredictor(nil)
}

// newPredictor is NewPredictor writing its runs into scratch (nil: its
// own).
func (sc *Scenario) newPredictor(scratch *runScratch) (*Predictor, error) {
	p, err := newPredictor(sc.Topo, sc.Options, scratch)
	if err != nil {
		return nil, err
	}
	if err := p.UseCostSource(sc.Costs); err != nil {
		return nil, err
	}
	return p, nil
}

// Summary is the cheap part of a prediction: what a sweep keeps per
// configuration.
type Summary struct {
	StepUs        float64 `json:"step_us"`
	Sequences     int     `json:"sequences"`
	TokensPerStep float64 `json:"tokens_per_step"`
	// TokensPerStepVar is the variance of the tokens a step yields a
	// sequence (speculative decoding; 0 without): what spreads one
	// request's time per output token (SpecYield).
	TokensPerStepVar float64 `json:"tokens_per_step_var,omitempty"`
	// SpecHostUs is the host's drafting time included in StepUs (ngram,
	// suffix; 0 otherwise).
	SpecHostUs           float64 `json:"spec_host_us,omitempty"`
	TokensPerSPerRequest float64 `json:"tokens_per_s_per_request"`
	TokensPerS           float64 `json:"tokens_per_s"`
	CommShareFrac        float64 `json:"comm_share_frac"`
	Graphed              bool    `json:"graphed"`
	// GraphTokens is the tokens per DP group of the CUDA graph the step
	// replays (its token ops run them; attention serves the Sequences);
	// 0 when eager.
	GraphTokens int        `json:"graph_tokens,omitempty"`
	Memory      *MemoryFit `json:"memory,omitempty"`
}

// ErrDoesNotFit is wrapped by the error of a scenario whose weights and KV
// cache do not fit in device memory (see MemoryFit.ShortfallGB).
var ErrDoesNotFit = errors.New("does not fit in GPU memory")

// schedule builds the schedule the engine runs for the scenario: the
// options' CUDA-graph capture goes to the builder, which pads a graphed
// decode step's tokens up to its captured size (vLLM pads decode steps;
// serving-facts.md) and says so on the schedule (Schedule.Deploy). The
// builder validates the plan, workload and build options (a
// *model.PlanError naming the field); the box must hold the plan's GPUs.
func (p *Predictor) schedule(sc Scenario) (*model.Schedule, error) {
	return p.scheduleWith(nil, sc)
}

// scheduleWith is schedule built by bd (model.Builder: into its memory,
// valid until its next build), or by model.BuildWith when bd is nil.
func (p *Predictor) scheduleWith(bd *model.Builder, sc Scenario) (*model.Schedule, error) {
	if sc.Arch == nil {
		return nil, errors.New("sim: scenario has no architecture")
	}
	plan := sc.Plan.Normalized()
	if world := plan.World(); p.topo != nil && world > p.topo.NumGPUs() {
		return nil, fmt.Errorf("sim: plan %s needs %d GPUs; topology %s has %d", plan, world, p.topo.Name, p.topo.NumGPUs())
	}
	if err := HostRouteRefusal(p.topo, p.opts.NCCL, FirstRanks(plan.World())); err != nil {
		return nil, err
	}
	o, err := p.withDispatch(sc.Build, sc.Arch, plan)
	if err != nil {
		return nil, err
	}
	o.Graphs = p.stepCapture(sc)
	if bd != nil {
		return bd.Build(sc.Arch, sc.Plan, sc.Workload, o)
	}
	return model.BuildWith(sc.Arch, sc.Plan, sc.Workload, o)
}

// Predict predicts one step of the whole scenario on its box with its
// options (New(sc.Topo, sc.Options), then PredictScenarioSchedule): the
// prediction and the schedule priced, which is the schedule BuildSchedule
// returns and a run executes.
func Predict(sc Scenario) (*Prediction, *model.Schedule, error) {
	if sc.Topo == nil {
		return nil, nil, errors.New("sim: scenario has no topology")
	}
	p, err := sc.NewPredictor()
	if err != nil {
		return nil, nil, err
	}
	return p.PredictScenarioSchedule(sc)
}

// BuildSchedule returns the schedule the serving engine runs for the
// scenario: model.BuildWith under the options' CUDA-graph capture, so a
// graphed decode step's tokens are padded up to its captured size
// (Schedule.Deploy says whether it is graphed and of how many tokens). It is
// what Predict prices and what a run executes, so both see one schedule.
// With CUDA graphs on it needs sc.Topo: the capture is the GPU's (SGLang's
// cuda_graph_max_bs by its memory).
func BuildSchedule(sc Scenario) (*model.Schedule, error) {
	if err := sc.Options.Validate(); err != nil {
		return nil, err
	}
	p := &Predictor{opts: sc.Options, topo: sc.Topo}
	if sc.Options.CUDAGraphs {
		// The capture depends on the GPU (captureOf); an eager step's
		// schedule does not.
		dev, err := sc.gpu()
		if err != nil {
			return nil, err
		}
		p.dev = dev
	}
	return p.schedule(sc)
}

// GraphSizesUnused says why the capture sizes (Options.GraphSizes) price
// nothing of sc, "" where they price something: they pad a decode step
// that replays graphs (model.NewDeployment) and size the KV reserve of an
// engine whose default pool counts its largest captured batch (SGLang's
// mem_fraction_static, KVBudget), whether graphs are on or not; an eager
// step (graphs off, or a prefill step of an engine that replays decode
// steps only) under a budget that does not read them is priced the same
// under any list.
func (sc Scenario) GraphSizesUnused() string {
	prof, err := engprof.Lookup(sc.Options.Engine)
	if err != nil {
		return ""
	}
	step := ""
	switch {
	case !sc.Options.CUDAGraphs:
		step = "the step runs eagerly (--cuda-graphs=false)"
	case !sc.Workload.ReplaysGraphs(&model.GraphCapture{DecodeOnly: prof.Graphs.PrefillEager}):
		step = fmt.Sprintf("a %s step runs eagerly (%s replays CUDA graphs for decode steps only)", sc.Workload.Normalized().Phase, prof.Name())
	default:
		return ""
	}
	b, fixed := FixedKVBudget(prof, sc.Options)
	if !fixed {
		return ""
	}
	return fmt.Sprintf("%s and the KV pool is %s, which no capture size enters", step, b)
}

// CUDAGraphsUnused says why CUDA graphs on or off (Options.CUDAGraphs)
// price nothing of sc, "" where they price something. A decode step
// replays a graph or runs eagerly by it. A prefill step replays one only
// under an engine that graphs steps with prefill tokens (vLLM's piecewise
// graphs, the executor's whole-step graph; not SGLang's or TensorRT-LLM's,
// cuda_graphs.prefill_eager) and only where its tokens fit a capture size
// (model.NewDeployment); elsewhere it runs eagerly either way, and the KV
// pool is the same (SGLang's reserve counts the largest captured batch
// whether graphs run or not, GraphSizesUnused), so --cuda-graphs would be
// printed among the options and priced nowhere. Never under an engine that
// takes its graphs' memory estimate off its KV pool (vLLM from 0.21.0):
// graphs on or off size another pool.
func (sc Scenario) CUDAGraphsUnused() string {
	w := sc.Workload.Normalized()
	if w.Phase == model.Decode || sc.Topo == nil || sc.Topo.DeviceOf(0) == nil {
		return ""
	}
	prof, err := engprof.Lookup(sc.Options.Engine)
	if err != nil {
		return ""
	}
	// An engine that takes its graphs' estimate off its KV pool sizes
	// another pool with graphs off (vLLM profiles no graph under
	// cudagraph_mode NONE), whatever the step replays.
	if prof.KVPool.CUDAGraphEstimate {
		return ""
	}
	if prof.Graphs.PrefillEager {
		return fmt.Sprintf("a %s step runs eagerly (%s replays CUDA graphs for decode steps only)", w.Phase, prof.Name())
	}
	o := sc.Options
	o.CUDAGraphs = true
	g := o.GraphCapture(sc.Topo.DeviceOf(0).MemBytes, sc.Plan.Normalized().World())
	d := model.NewDeployment(sc.Plan, sc.Workload, g)
	if d.Graphed || len(g.Sizes) == 0 {
		return ""
	}
	return fmt.Sprintf("a %s step of %d tokens a group is above %s's largest CUDA-graph capture size (%d tokens): it runs eagerly with graphs on or off", w.Phase, d.TokensPerGroup, prof.Name(), g.Sizes[len(g.Sizes)-1])
}

// CheckCollectiveOptions refuses an option of the collectives where sc's
// step runs none it applies to: NCCL's settings (the fields with an Env)
// on a plan of one GPU, which runs no collective, and the TP
// all-reduce's (--custom-ar other than auto, --ar-norm-fusion) on a plan
// of TP 1, which has no TP all-reduce (DP attention's dispatch is no
// all-reduce). Each would be printed among the options and priced
// nowhere.
func (sc Scenario) CheckCollectiveOptions() error {
	plan := sc.Plan.Normalized()
	o := sc.Options
	if plan.World() <= 1 {
		for _, f := range optionFields {
			if v := f.Get(&o); f.Env != "" && v != "" {
				return fmt.Errorf("--%s %s: plan %s runs on one GPU, with no collective for NCCL's settings to price: leave it out", f.Name, v, plan)
			}
		}
	}
	if plan.TP <= 1 {
		switch {
		case o.CustomAR != "" && o.CustomAR != CustomARAuto:
			return fmt.Errorf("--custom-ar %s: plan %s has no TP all-reduce (TP 1) for it to carry: leave it out", o.CustomAR, plan)
		case o.ARNormFusion != ToggleDefault:
			flag := "--ar-norm-fusion"
			if o.ARNormFusion == ToggleOff {
				flag += "=false"
			}
			return fmt.Errorf("%s: plan %s has no TP all-reduce (TP 1) to fuse with the RMSNorm after it: leave it out", flag, plan)
		}
	}
	return nil
}

// CheckCustomAR refuses a forced custom all-reduce (--custom-ar oneshot
// or twoshot) where it would price nothing: the step's TP all-reduces
// are all above the custom kernel's buffer (customARMaxBytes, vLLM's
// max_size), so NCCL carries every one (priceCollective) and the step is
// priced as without the flag, while the options, the engine line and the
// custom all-reduce's caveats would speak of a kernel that runs nowhere
// (a prefill of 4096 tokens of a 7168-wide model: 58.7 MB a call); where
// the engine's own rule would run its symmetric-memory all-reduce on
// them, NCCL in its place is --custom-ar off's step, not a custom one. A
// plan without a TP all-reduce is CheckCollectiveOptions's; a schedule
// that does not build is left to the prediction to report.
func (sc Scenario) CheckCustomAR() error {
	o := sc.Options
	if o.CustomAR != CustomAROneShot && o.CustomAR != CustomARTwoShot || sc.Plan.Normalized().TP <= 1 {
		return nil
	}
	s, err := BuildSchedule(sc)
	if err != nil || len(s.Ranks) == 0 {
		return nil
	}
	smallest := int64(-1)
	for i := range s.Ranks[0] {
		op := &s.Ranks[0][i]
		if op.Kind != model.KindCollective || op.Collective != model.AllReduce {
			continue
		}
		if op.CommBytes <= customARMaxBytes {
			return nil
		}
		if smallest < 0 || op.CommBytes < smallest {
			smallest = op.CommBytes
		}
	}
	if smallest < 0 {
		return nil
	}
	return fmt.Errorf("--custom-ar %s: every all-reduce of the step is above the custom all-reduce's %d MiB buffer (the smallest %.1f MB a call), so none runs the %s kernel: NCCL carries each; leave it out (--custom-ar off prices NCCL alone)", o.CustomAR, customARMaxBytes>>20, float64(smallest)/1e6, o.CustomAR)
}

// CheckARNormFusion refuses --ar-norm-fusion (or =false) where the step is
// priced the same fused or not: no all-reduce of it is followed by an
// RMSNorm within the engine's fusion limits (its most tokens a fused step
// carries, its largest message at this TP degree on this GPU), as in a
// prefill of 4096 tokens under vLLM's 512 KiB cap, so the flag would be
// printed among the options and price nothing. A plan without a TP
// all-reduce is CheckCollectiveOptions's; a step that cannot be priced is
// left to the prediction to report.
func (sc Scenario) CheckARNormFusion() error {
	f := sc.Options.ARNormFusion
	if f == ToggleDefault || sc.Plan.Normalized().TP <= 1 {
		return nil
	}
	on, off := sc, sc
	on.Options.ARNormFusion, off.Options.ARNormFusion = ToggleOn, ToggleOff
	pOn, _, err := Predict(on)
	if err != nil {
		return nil
	}
	pOff, _, err := Predict(off)
	if err != nil || pOn.StepUs != pOff.StepUs || pOn.Kernels != pOff.Kernels {
		return nil
	}
	flag := "--ar-norm-fusion"
	if f == ToggleOff {
		flag += "=false"
	}
	limits := "its fusion limits"
	if prof, err := engprof.Lookup(sc.Options.Engine); err == nil {
		var l []string
		if n := prof.FusionMaxTokens(engprof.FuseAllReduceRMSNorm); n > 0 {
			l = append(l, fmt.Sprintf("at most %d tokens a step", n))
		}
		if dev := sc.Topo.DeviceOf(0); dev != nil {
			if b := prof.FusionMaxInputBytes(engprof.FuseAllReduceRMSNorm, dev.ComputeCapability, sc.Plan.Normalized().TP); b > 0 {
				l = append(l, fmt.Sprintf("messages up to %d KiB", b>>10))
			}
		}
		if len(l) > 0 {
			limits = prof.Name() + "'s fusion limits (" + strings.Join(l, ", ") + ")"
		} else {
			limits = prof.Name() + "'s fusion limits"
		}
	}
	return fmt.Errorf("%s: no all-reduce of the step is followed by an RMSNorm within %s, so the step is priced the same fused or not: leave it out", flag, limits)
}

// CheckOverlap refuses Options.Overlap where it would price nothing: a
// communication stream overlaps only compute the schedule marks
// independent of the collective before it (model.Schedule.
// MarksIndependentOps), and a schedule laid as one chain per rank, as
// every schedule the builder lays is, runs each collective between the
// op that feeds it and the op that reads it, on either stream. A
// schedule that does not build is left to the prediction to report.
func (sc Scenario) CheckOverlap() error {
	if !sc.Options.Overlap {
		return nil
	}
	s, err := BuildSchedule(sc)
	if err != nil || s.MarksIndependentOps() {
		return nil
	}
	return fmt.Errorf("--overlap: the step's schedule marks no op independent of the collective before it (each op of a rank waits for the one before, as the engines launch a rank's kernels on one stream), so a communication stream would overlap nothing and price the step as one stream does: leave it out")
}

// gpu is the GPU of sc's box, whose memory sets the engine's defaults
// (GPU 0's: a Predictor refuses a box of mixed GPUs).
func (sc Scenario) gpu() (*topology.Device, error) {
	if sc.Topo == nil {
		return nil, errors.New("sim: scenario has no topology")
	}
	dev := sc.Topo.DeviceOf(0)
	if dev == nil {
		return nil, fmt.Errorf("sim: topology %s: GPU 0 has no device spec", sc.Topo.Name)
	}
	return dev, nil
}

// CaptureSizes are the CUDA-graph capture sizes of sc's engine on its box
// (Options.CaptureSizes for the GPU of sc.Topo and sc.Plan's GPUs), or
// the engine's own for the step where it has them (SGLang: with
// speculation its speculative list, without its decode list, each up to
// the step's request pool), in tokens: the sizes the step is priced with
// (engineCaptureSizes).
func (sc Scenario) CaptureSizes() ([]int, error) {
	dev, err := sc.gpu()
	if err != nil {
		return nil, err
	}
	world := sc.Plan.World()
	if s, ok := engineCaptureSizesOn(&sc.Options, dev.MemBytes, sc.Workload.SpecTokens, world, requestPool(sc)); ok {
		return s, nil
	}
	return sc.Options.CaptureSizes(dev.MemBytes, world), nil
}

// GraphCapture is the CUDA-graph capture sc's decode steps replay under
// on its box (Options.GraphCapture for the GPU of sc.Topo and sc.Plan's
// GPUs; nil when graphs are off).
func (sc Scenario) GraphCapture() (*model.GraphCapture, error) {
	dev, err := sc.gpu()
	if err != nil {
		return nil, err
	}
	return sc.Options.GraphCapture(dev.MemBytes, sc.Plan.World()), nil
}

// PredictScenario predicts one step of the scenario with per-op detail and
// the memory fit. A scenario that does not fit is still predicted; its
// Memory says so (Fits false, ShortfallGB), and the error is nil: callers
// decide (the CLI refuses, a planner reports the shortfall).
func (p *Predictor) PredictScenario(sc Scenario) (*Prediction, error) {
	pr, _, err := p.PredictScenarioSchedule(sc)
	return pr, err
}

// PredictScenarioSchedule is PredictScenario that also returns the
// schedule it predicted (tokens padded as under CUDA graphs), for callers
// that align predicted ops with measured ones or read op fields a
// Prediction does not carry (advise).
func (p *Predictor) PredictScenarioSchedule(sc Scenario) (*Prediction, *model.Schedule, error) {
	s, err := p.schedule(sc)
	if err != nil {
		return nil, nil, err
	}
	pr, err := p.predict(s, symBuilt, s.Deploy.Graphed)
	if err != nil {
		return nil, nil, err
	}
	pr.SpecHostUs = specHostUs(sc)
	pr.StepUs += pr.SpecHostUs
	pr.Spec = specStepOf(sc)
	// Sequences counts the batch's sequences; GraphTokens the graph's
	// tokens per DP group.
	p.fixTokens(&pr.Summary, sc, s.Deploy)
	pr.Memory = p.memoryFit(sc, s.Deploy)
	pr.Caveats = p.Caveats(sc)
	pr.Engine = p.EngineSummary(sc, s.Options, s.Deploy.Graphed)
	if sc.Arch.HasIndexer() {
		pr.DSA = &DSAAttention{Dense: sc.Build.DenseDSA, Chosen: sc.DenseDSAChosen}
	}
	pr.KVDefault = sc.KVDefault
	if sc.Plan.DispatchesMoE(sc.Arch) {
		// The schedule's build options, defaults filled (the dispatch
		// the engine's when none was chosen: scheduleWith).
		pr.MoEDispatch, pr.DispatchDtype = s.Options.MoEDispatch, s.Options.DispatchDtype
		pr.MoEDispatchChosen = sc.Build.MoEDispatch != ""
		pr.DispatchDtypeChosen = sc.Build.DispatchDtype != ""
	}
	return pr, s, nil
}

// Evaluate is PredictScenario without per-op results, for sweeps.
func (p *Predictor) Evaluate(sc Scenario) (Summary, error) {
	s, err := p.schedule(sc)
	if err != nil {
		return Summary{}, err
	}
	step, err := p.stepUs(s, symBuilt, s.Deploy.Graphed)
	if err != nil {
		return Summary{}, err
	}
	sum := Summary{StepUs: step, Graphed: s.Deploy.Graphed, SpecHostUs: specHostUs(sc)}
	step += sum.SpecHostUs
	sum.StepUs = step
	if step > 0 {
		comm := 0.0
		for g := int32(0); g < p.eng.rankOff[1]; g++ {
			if p.eng.ops[g].coll {
				comm += p.eng.ops[g].durUs
			}
		}
		sum.CommShareFrac = comm / step
	}
	p.fixTokens(&sum, sc, s.Deploy)
	sum.Memory = p.memoryFit(sc, s.Deploy)
	return sum, nil
}

// fixTokens counts tokens of the real sequences (d.Batch), not the
// padding.
func (p *Predictor) fixTokens(sum *Summary, sc Scenario, d model.Deployment) {
	sum.Sequences = d.Batch
	sum.GraphTokens = d.GraphTokens
	sum.TokensPerStep, sum.TokensPerStepVar = 1, 0
	if y := specYield(p.opts, sc.Build.Spec, sc.Workload, sc.Arch); y != nil {
		sum.TokensPerStep, sum.TokensPerStepVar = y.TokensPerStep, y.TokensVar
	}
	if sum.StepUs > 0 {
		sum.TokensPerSPerRequest = sum.TokensPerStep / (sum.StepUs * 1e-6)
		sum.TokensPerS = sum.TokensPerSPerRequest * float64(sum.Sequences)
	}
}

// scenarioJSON is the encoded form of a Scenario: references instead of
// the architecture's and the box's numbers.
type scenarioJSON struct {
	Model    model.Ref          `json:"model"`
	Build    model.BuildOptions `json:"build"`
	Plan     model.Plan         `json:"plan"`
	Workload model.Workload     `json:"workload"`
	Options  Options            `json:"options"`
	Topology topology.Ref       `json:"topology"`
	// Box is the topology by value (its compact JSON) and BoxSHA256 that
	// text's hash: a trace compares on the box it ran on wherever it is
	// read, with or without the file Topology names. Absent in scenarios
	// recorded before boxes travelled by value.
	Box       json.RawMessage `json:"box,omitempty"`
	BoxSHA256 string          `json:"box_sha256,omitempty"`
	RunTokens int64           `json:"run_tokens,omitempty"`
	RunBatch  int             `json:"run_batch,omitempty"`
	Costs     string          `json:"cost_source,omitempty"`
	// DenseDSAChosen: Build.DenseDSA was chosen, not the engine's
	// (Scenario.DenseDSAChosen).
	DenseDSAChosen bool `json:"dense_dsa_chosen,omitempty"`
	// KVDefault: the engine chose the workload's KV dtype
	// (Scenario.KVDefault).
	KVDefault *KVDefault `json:"kv_default,omitempty"`
}

// MarshalJSON encodes the scenario with the model as a reference
// (model.Ref: preset name, or config path, hash and content, and scale),
// the topology as a reference (topology.Ref: preset name, or file path
// and hash, and GPU subset) and by value (Box, the subset as priced, with
// its hash), the plan and the workload in their text forms, the options
// and build options as objects. DecodeScenario reads it back.
func (sc Scenario) MarshalJSON() ([]byte, error) {
	if sc.Arch == nil {
		return nil, errors.New("scenario: no architecture to encode")
	}
	mr := sc.Arch.Ref
	if mr.Name == "" && mr.Path == "" {
		mr.Name = sc.Arch.Name
	}
	tr := sc.TopoRef
	if tr.IsZero() && sc.Topo != nil {
		tr = topology.Ref{Name: sc.Topo.Name}
	}
	j := scenarioJSON{Model: mr, Build: sc.Build, Plan: sc.Plan.Normalized(), Workload: sc.Workload.Normalized(),
		Options: sc.Options, Topology: tr, RunTokens: sc.RunTokens, RunBatch: sc.RunBatch, Costs: sc.CostSourceName(), DenseDSAChosen: sc.DenseDSAChosen,
		KVDefault: sc.KVDefault}
	if sc.Topo != nil {
		box, err := json.Marshal(sc.Topo)
		if err != nil {
			return nil, fmt.Errorf("scenario: encode box %s: %w", sc.Topo.Name, err)
		}
		j.Box, j.BoxSHA256 = box, boxHash(box)
	}
	return json.Marshal(j)
}

// boxHash is the hex SHA-256 of a box's recorded JSON.
func boxHash(box []byte) string {
	sum := sha256.Sum256(box)
	return hex.EncodeToString(sum[:])
}

// DecodeRecordedBox is the box a recorded scenario carries by value (its
// "box", compact or not, hashed compact in "box_sha256"; ref its
// "topology"), read without the
// file ref names: a box whose content does not hash to the recorded hash
// is an error wrapping ErrEdited. A reader that resolves nothing else of
// a scenario (a saved comparison, which names its scenarios) names the
// box by it, as the scenario was priced.
func DecodeRecordedBox(ref topology.Ref, box json.RawMessage, sha string) (*topology.Topology, error) {
	// The hash is of the compact JSON the scenario wrote; a result
	// written indented (compare --output json) holds it re-spaced.
	var compact bytes.Buffer
	if err := json.Compact(&compact, box); err != nil {
		return nil, fmt.Errorf("scenario box %s: %w", ref, err)
	}
	box = compact.Bytes()
	if got := boxHash(box); got != sha {
		return nil, fmt.Errorf("scenario box %s: recorded sha256 %s, its content hashes to %s: %w", ref, sha, got, ErrEdited)
	}
	return topology.Parse(box, "scenario box "+ref.String())
}

// ErrEdited is wrapped by DecodeScenario's error for a recorded box whose
// content does not hash to the hash recorded beside it: the trace holding
// it was changed since it was written, which makes it damaged input.
var ErrEdited = errors.New("the trace was edited or damaged")

// DecodeScenario reads a scenario MarshalJSON wrote and resolves its model
// and its topology; topo, when not nil, is used instead of the recorded
// topology (a box the caller resolved, e.g. a calibrated one). The box
// recorded by value is the topology otherwise, wherever the file its
// reference names is (or whether it still exists); a scenario recorded
// before boxes travelled by value resolves its reference. Errors are one
// line naming the field: a model or topology that cannot be found, a file
// whose content changed since it was recorded, a recorded box whose hash
// does not match it, an invalid plan, workload or option.
func DecodeScenario(data []byte, topo *topology.Topology) (Scenario, error) {
	var j scenarioJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return Scenario{}, fmt.Errorf("scenario: %w", jsonerr.Wrap(data, err, "a JSON object"))
	}
	a, err := j.Model.Resolve()
	if err != nil {
		return Scenario{}, fmt.Errorf("scenario model %s: %w", j.Model, err)
	}
	if err := j.Plan.Validate(a); err != nil {
		return Scenario{}, fmt.Errorf("scenario plan %s: %w", j.Plan, err)
	}
	if err := j.Options.Validate(); err != nil {
		return Scenario{}, fmt.Errorf("scenario %w", err)
	}
	sc := Scenario{Arch: a, Build: j.Build, Plan: j.Plan, Workload: j.Workload, Options: j.Options, TopoRef: j.Topology, RunTokens: j.RunTokens, RunBatch: j.RunBatch, Topo: topo, CostsName: j.Costs,
		DenseDSAChosen: j.DenseDSAChosen, KVDefault: j.KVDefault}
	if d := j.KVDefault; d != nil && (d.Dtype == "" || d.Dtype != j.Workload.KVDtype || d.Engine == "" || d.Why == "") {
		return Scenario{}, fmt.Errorf("scenario kv_default: dtype %q by %q: want the workload's kv_dtype (%q), the engine and why", d.Dtype, d.Engine, j.Workload.KVDtype)
	}
	if d := j.Build.Spec.Draft; d != (model.Ref{}) {
		if sc.Build.Spec.Drafter, err = d.Resolve(); err != nil {
			return Scenario{}, fmt.Errorf("scenario draft model %s: %w", d, err)
		}
	}
	if topo != nil {
		return sc, nil
	}
	if len(j.Box) > 0 {
		if sc.Topo, err = DecodeRecordedBox(j.Topology, j.Box, j.BoxSHA256); err != nil {
			return Scenario{}, err
		}
		return sc, nil
	}
	if sc.Topo, err = j.Topology.Resolve(); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Scenario{}, fmt.Errorf("scenario topology %s: the file is gone, and this trace was recorded before boxes travelled with it: pass --topo with that box", j.Topology)
		}
		return Scenario{}, fmt.Errorf("scenario topology %s: %w", j.Topology, err)
	}
	return sc, nil
}

// String is the scenario in one line for people: model, plan, workload,
// options and box.
func (sc Scenario) String() string {
	name := "?"
	if sc.Arch != nil {
		name = sc.Arch.Ref.String()
		if name == "" {
			name = sc.Arch.Name
		}
	}
	// The box as predict names it: the priced topology's name (a file's
	// "name", labelled "name (path)" where that names another box; the
	// GPU subset as "/Ngpu"). A file's path is a name only on the machine
	// that read it: a recorded scenario priced on its box by value, with
	// the file gone or another in its place, would name a file it did not
	// price.
	box := sc.TopoRef.String()
	if sc.Topo != nil {
		box = sc.Topo.Name
	}
	b := ""
	if sc.Build.DenseDSA {
		b += " dense-dsa"
	}
	// The dispatch exists only under DP attention (the MoE block's
	// dispatch and combine, model's CondDP); elsewhere the option prices
	// nothing and the line leaves it out.
	if sc.Build.MoEDispatch != "" && sc.Plan.Normalized().DP > 1 {
		b += " moe-dispatch=" + sc.Build.MoEDispatch
	}
	if !sc.Build.Routing.IsZero() {
		b += " moe-routing=" + sc.Build.Routing.String()
	}
	if sp := sc.Build.Spec; sp.Method != "" && sp.Method != model.SpecMTP {
		b += " spec=" + sp.String(sc.Workload)
	}
	costs := ""
	if n := sc.CostSourceName(); n != "" {
		costs = ", costs " + n
	}
	// The KV dtype the step ran with, always: the checkpoint's when the
	// workload names none, so that a scenario recorded with it named and
	// one without read alike.
	w := sc.Workload
	if sc.Arch != nil {
		w.KVDtype = w.KVDtypeFor(sc.Arch)
	}
	return fmt.Sprintf("%s%s %s %s on %s, options %s%s", name, b, sc.Plan.Normalized(), w.Normalized(), box, sc.Options.Label(), costs)
}
