package sim

import (
	"fmt"
	"slices"
	"strings"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/internal/units"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/topology"
)

// engineKernels is the part of the compute model that comes from the
// engine profile (package engine): which attention backend, MoE kernel and
// dense-GEMM kernel runs each op on this GPU family, resolved once per
// (KV dtype, model) or weight format and kept, so the per-op path reads a
// pointer.
type engineKernels struct {
	prof *engprof.Profile
	arch engprof.Arch
	// cc is the GPU's compute capability ("10.3"): engines key some
	// tables by it within a family (engprof.SymmMemRule.Capabilities).
	cc string
	// device is the GPU's name (nvidia-smi's): an engine may leave a
	// default fusion off on a device (engprof.Fusion.ExceptDevices).
	device string
	// attnOverride, moeOverride: the user's --attention-backend and
	// --moe-kernel ("" = the engine's choice).
	attnOverride, moeOverride string
	// qkNope and dcp describe the schedule being priced (set by the
	// Predictor before each run: Predictor.noteSchedule): the model's
	// qk_nope_head_dim (some backends take only 128) and whether decode
	// context parallelism merges partial attention.
	qkNope int
	dcp    bool
	// ep: the schedule spreads the routed experts over more than one GPU
	// by expert parallelism (model.Plan.ExpertRanks > 1, vLLM's ep_size
	// > 1), which some engines pick their MoE kernel by.
	ep bool
	// modelType is the schedule's model_type, which an engine rule may
	// pick a backend by (engprof.AttentionRule.ModelTypes).
	modelType string
	// sparse: the schedule runs DSA sparse attention (it has the
	// indexer's ops) and the engine runs it sparse on this family
	// (runsSparse), so only a sparse backend can run its decode.
	sparse bool
	// seqs is the sequences each rank's attention serves in the schedule
	// (Deploy.SeqsPerGroup: the real ones; a CUDA graph's padding tokens
	// attend to nothing): an attention op's query tokens over it
	// are the tokens per sequence a split launch's blocks group
	// (mergeUs).
	seqs int
	// eagerRoles are the roles a piecewise graph launches eagerly
	// (the profile's cuda_graphs.piecewise_eager and
	// piecewise_eager_prefill); piecewise says whether the schedule about
	// to be priced is captured piecewise: its decode attention backend
	// captures piecewise only, DCP, or it has prefill tokens under a mode
	// that captures those piecewise (noteSchedule).
	eagerRoles map[model.Role]bool
	piecewise  bool

	attnMemo []attnSlot
	moeMemo  [numDtypes]*engprof.MoEKernel
	moeDone  [numDtypes]bool
	// moeAsked: the memo's kernel is what --moe-kernel resolved to (the
	// named kernel, or the one its Runs hands the weights to), not the
	// default taken after the name was refused.
	moeAsked [numDtypes]bool
	linMemo  [numDtypes]*engprof.LinearKernel
	linDone  [numDtypes]bool
}

type attnSlot struct {
	use engprof.MLAUse
	b   *engprof.AttentionBackend
}

func (k *engineKernels) init(dev *topology.Device, prof *engprof.Profile, opts *Options) {
	k.prof = prof
	k.arch, _ = engprof.ArchOf(dev.ComputeCapability)
	k.cc = dev.ComputeCapability
	k.device = dev.Name
	k.attnOverride = string(opts.AttentionBackend)
	k.moeOverride = opts.MoEKernel
	k.eagerRoles = map[model.Role]bool{}
	// A decode schedule holds none of the prefill roles and a prefill one
	// none of the decode attention's, so one set serves every step.
	for _, r := range slices.Concat(prof.Graphs.PiecewiseEager, prof.Graphs.PiecewiseEagerPrefill) {
		k.eagerRoles[model.Role(r)] = true
	}
}

// eagerHostUs is the host time per kernel launched outside a graph: the
// device's launch_eager_us where a trace calibrated it (calibrate.
// ApplyCompute's source "calibrated: ..."; the user's measurement wins),
// else the engine profile's (cuda_graphs.eager_host_us: its Python
// forward), else the device's.
func (k *engineKernels) eagerHostUs(dev *topology.Device) float64 {
	if launchCalibrated(dev) {
		return dev.LaunchEagerUs
	}
	if k.prof != nil && k.prof.Graphs.EagerHostUs > 0 {
		return k.prof.Graphs.EagerHostUs
	}
	return dev.LaunchEagerUs
}

// eagerPrefillLayerHostUs is the host time per decoder layer of an eager
// step that carries prompt tokens (cuda_graphs.eager_prefill_layer_host_us),
// 0 where the profile states none or a trace calibrated the device's
// launch_eager_us (the user's measurement wins, as in eagerHostUs).
func (k *engineKernels) eagerPrefillLayerHostUs(dev *topology.Device) float64 {
	if k.prof == nil || launchCalibrated(dev) {
		return 0
	}
	return k.prof.Graphs.EagerPrefillLayerHostUs
}

// launchCalibrated reports whether a trace calibrated dev's eager launch
// cost (calibrate.ApplyCompute's source "calibrated: ..."): the user's
// measurement, which every engine figure for it gives way to.
func launchCalibrated(dev *topology.Device) bool {
	return strings.HasPrefix(dev.Sources["launch_eager_us"], "calibrated")
}

// kvOf is the attention backends' view of a KV dtype.
func kvOf(d model.Dtype) engprof.KVDtype {
	if d == model.FP8 || d == model.FP8Block128 {
		return engprof.KVFP8
	}
	return engprof.KV16
}

// attention is the backend that runs attention op op: the user's choice
// when it can run here, else the engine's; nil when the engine has none
// (CheckEngine refuses such a scenario before any work; priced then as an
// SM-filling kernel without companions).
func (k *engineKernels) attention(op *model.Op) *engprof.AttentionBackend {
	u := engprof.MLAUse{Arch: k.arch, KV: kvOf(op.KVDtype), QKNope: k.qkNope, DCP: k.dcp, Sparse: k.sparse, ModelType: k.modelType}
	for i := range k.attnMemo {
		if s := &k.attnMemo[i]; s.use == u {
			return s.b
		}
	}
	b, err := k.prof.Backend(u, k.attnOverride)
	if err != nil && k.attnOverride != "" {
		b, _ = k.prof.Backend(u, "")
	}
	k.attnMemo = append(k.attnMemo, attnSlot{use: u, b: b})
	return b
}

// moeKernel is the fused-MoE kernel for experts stored in d, nil when the
// engine has none (priced then as the generic tiled GEMM without
// companions; CheckEngine refuses such a scenario).
func (k *engineKernels) moeKernel(d model.Dtype) *engprof.MoEKernel {
	di := dtypeIndex(d)
	if k.moeDone[di] {
		return k.moeMemo[di]
	}
	var mk *engprof.MoEKernel
	if f, err := engprof.ParseWeightFormat(string(d)); err == nil {
		var e error
		mk, e = k.prof.MoEKernel(k.arch, f, k.ep, k.moeOverride)
		k.moeAsked[di] = e == nil && k.moeOverride != ""
		if e != nil && k.moeOverride != "" {
			mk, _ = k.prof.MoEKernel(k.arch, f, k.ep, "")
		}
	}
	k.moeMemo[di], k.moeDone[di] = mk, true
	return mk
}

// linearCompanions is how many kernels the engine's dense GEMM for op's
// weight format launches beside it: the input quantization of a W4A4
// kernel (vLLM's scaled_fp4_quant before an NVFP4 linear), unless the
// profile's fusion named in FusedBy folds it into the op before, which
// for act_quant is SiLU-and-mul: the down projections of the dense MLP
// and the shared experts take their input from one.
func (k *engineKernels) linearCompanions(op *model.Op) int {
	lk := k.linearKernel(op.WeightDtype)
	if lk == nil {
		return 0
	}
	if lk.FusedBy == engprof.FuseActQuant && k.prof.Fused(engprof.FuseActQuant, k.arch, 0) && (op.Role == model.RoleMLPDown || op.Role == model.RoleSharedDown) {
		return 0
	}
	return len(lk.Companions)
}

// splitKReduce reports whether the engine's dense GEMM for op runs its
// split-K reduction as a kernel of its own (engprof.SplitKReduce): by its
// tokens (M), K and outputs (N).
func (k *engineKernels) splitKReduce(op *model.Op) bool {
	lk := k.linearKernel(op.WeightDtype)
	return lk != nil && lk.SplitKReduce.Splits(k.arch, op.M, op.K, op.N)
}

// linearKernel is the engine's dense-GEMM kernel for weights stored in
// d, nil when the profile states none (the GEMM runs as the schedule
// lists it).
func (k *engineKernels) linearKernel(d model.Dtype) *engprof.LinearKernel {
	di := dtypeIndex(d)
	if !k.linDone[di] {
		if f, err := engprof.ParseWeightFormat(string(d)); err == nil {
			k.linMemo[di] = k.prof.LinearKernel(k.arch, f)
		}
		k.linDone[di] = true
	}
	return k.linMemo[di]
}

// paddedTiles are the padded tiles (engprof.PaddedTiles) of the kernel
// that runs GEMM or MoE GEMM op on this family, nil when its kernel
// states none for the op's weight format.
func (k *engineKernels) paddedTiles(op *model.Op) *engprof.PaddedTiles {
	var t *engprof.PaddedTiles
	switch op.Kind {
	case model.KindGEMM:
		if lk := k.linearKernel(op.WeightDtype); lk != nil {
			t = lk.Padded
		}
	case model.KindMoEGEMM:
		if mk := k.moeKernel(op.WeightDtype); mk != nil {
			t = mk.Padded
		}
	default:
		return nil
	}
	if t == nil {
		return nil
	}
	f, err := engprof.ParseWeightFormat(string(op.WeightDtype))
	if err != nil || !t.On(k.arch, f) {
		return nil
	}
	return t
}

// setEP records whether plan spreads the routed experts over more than
// one GPU by expert parallelism (k.ep).
func (k *engineKernels) setEP(plan model.Plan) {
	if ep := plan.Normalized().ExpertRanks() > 1; ep != k.ep {
		// The MoE kernels memoized for the other parallelism may not
		// be this one's.
		k.ep, k.moeDone = ep, [numDtypes]bool{}
	}
}

// noteSchedule records what the backends' validity depends on in the
// schedule about to be priced: the model's qk_nope_head_dim (the K of
// the absorbed W_UK GEMM, the first "w_uk" op; prefill: the attention's
// K less the rope dims is not known here, so 0) and DCP; then whether
// its graph is captured piecewise (the decode backend's CUDAGraph, DCP
// where the engine captures piecewise under it, or prefill tokens where
// the engine's mode captures such a step piecewise: vLLM's
// FULL_AND_PIECEWISE replays a FULL graph for uniform decode batches only).
func (k *engineKernels) noteSchedule(s *model.Schedule) {
	k.dcp = s.Plan.Normalized().DCP > 1
	k.setEP(s.Plan)
	k.modelType = s.ModelType
	k.qkNope = 0
	k.sparse = false
	k.seqs = s.Deploy.SeqsPerGroup
	k.piecewise = (k.dcp && k.prof.Graphs.DCPPiecewise) || (s.HasPrefillTokens() && k.prof.Graphs.MixedPiecewise())
	if len(s.Ranks) == 0 {
		return
	}
	ops := s.Ranks[0]
	// The builder lays out the indexer's ops only for sparse attention
	// (model.CondSparse): their presence is the schedule's word on it.
	sparse := slices.ContainsFunc(ops, func(o model.Op) bool { return o.Role.Module() == model.ModIndexer })
	k.sparse = runsSparse(k.prof, k.arch, sparse)
	for i := range ops {
		if ops[i].Role == model.RoleWUK {
			k.qkNope = int(ops[i].K)
			break
		}
		if ops[i].Kind == model.KindAttention {
			break
		}
	}
	for i := range ops {
		if ops[i].Role == model.RoleMLADecode {
			if b := k.attention(&ops[i]); b != nil && b.CUDAGraph == "piecewise" {
				k.piecewise = true
			}
			break
		}
	}
}

// arFused reports whether the engine fuses every all-reduce with the
// RMSNorm after it by default under plan for a model of modelType
// (vLLM's fuse_allreduce_rms on SM90/SM100 at TP > 1, DP attention or
// not; SGLang's for the DeepSeek-V3 and Kimi-K2.5 architectures without
// DP attention; engprof.Profile.FusedOn).
func (k *engineKernels) arFused(plan model.Plan, modelType string) bool {
	return k.prof.FusedOn(engprof.FuseAllReduceRMSNorm, k.fusionUse(plan, modelType))
}

// modelType is the scenario's config model_type ("" without a model).
func (sc Scenario) modelType() string {
	if sc.Arch == nil {
		return ""
	}
	return sc.Arch.ModelType
}

// fusionUse is what a fusion's default depends on for a model of
// modelType under plan (its TP degree and DP attention) on this device.
func (k *engineKernels) fusionUse(plan model.Plan, modelType string) engprof.FusionUse {
	plan = plan.Normalized()
	return engprof.FusionUse{CC: k.cc, Device: k.device, TP: plan.TP, DP: plan.DP, ModelType: modelType}
}

// profileOf resolves o's engine profile (the default engine for the
// zero Ref).
func profileOf(o *Options) (*engprof.Profile, error) {
	p, err := engprof.Lookup(o.Engine)
	if err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return p, nil
}

// archOf is the engine family of the topology's GPUs.
func archOf(t *topology.Topology) engprof.Arch {
	if t == nil || t.NumGPUs() == 0 || t.DeviceOf(0) == nil {
		return engprof.ArchUnknown
	}
	a, _ := engprof.ArchOf(t.DeviceOf(0).ComputeCapability)
	return a
}

// ImpliedDenseDSA reports whether engine eng runs a's DSA sparse
// attention as dense MLA on box t (no indexer, attention over the whole
// context): the engine profile's DSA fact for the box's GPU family (vLLM
// and SGLang on SM12x, for which they build no sparse-MLA kernels; the
// executor runs whatever the schedule has). A scenario whose user did not
// choose --dense-dsa takes this value; one that chose otherwise is priced
// as chosen and its prediction carries a caveat (Caveats).
func ImpliedDenseDSA(a *model.Arch, t *topology.Topology, eng engprof.Ref) bool {
	if a == nil || !a.HasIndexer() {
		return false
	}
	p, err := engprof.Lookup(eng)
	if err != nil {
		return false
	}
	return p.DenseDSA(archOf(t))
}

// KVDefault says why a scenario's KV-cache dtype is its engine's own
// choice rather than tpscope's rule (the checkpoint's KV scheme, else the
// model's dtype: model.Workload.KVDtypeFor): the user named none and the
// engine profile's kv_default decided (engine.KVDefaultFacts).
type KVDefault struct {
	Dtype model.Dtype `json:"dtype"`
	// Engine is the engine version whose default it is (sglang@0.5).
	Engine string `json:"engine"`
	// Why completes "<engine>'s default ...": "for a DSA model on
	// SM100", or "for a compressed-tensors KV scheme, which its auto does
	// not read: the model's dtype".
	Why string `json:"why"`
}

// String is "sglang@0.5's default for a DSA model on SM100".
func (d *KVDefault) String() string { return d.Engine + "'s default " + d.Why }

// ImpliedKVDefault is the KV-cache dtype engine eng runs a on box t with
// when the user names none, where the engine's profile decides it
// (engine.Profile.KVDefault): a rule of its own (SGLang sets a DSA
// model's before reading the checkpoint), or a checkpoint KV scheme its
// 'auto' does not read (the model's dtype then). nil: tpscope's rule
// holds (model.Workload.KVDtypeFor). A scenario whose user named no KV
// dtype takes this value, as it takes ImpliedDenseDSA's.
func ImpliedKVDefault(a *model.Arch, t *topology.Topology, eng engprof.Ref) *KVDefault {
	if a == nil {
		return nil
	}
	p, err := engprof.Lookup(eng)
	if err != nil {
		return nil
	}
	fam := archOf(t)
	c := p.KVDefault(engprof.KVDefaultUse{Arch: fam, DSA: a.HasIndexer(), Scheme: a.Quant.KVScheme(), Method: a.Quant.Method})
	switch {
	case c.Rule != nil:
		d := model.BF16
		if c.Rule.KV == engprof.KVFP8 {
			d = model.FP8
		}
		why := "on " + strings.ToUpper(fam.String())
		if c.Rule.DSA {
			why = "for a DSA model " + why
		}
		return &KVDefault{Dtype: d, Engine: p.Name(), Why: why}
	case c.IgnoresScheme:
		return &KVDefault{Dtype: a.Quant.Base, Engine: p.Name(),
			Why: fmt.Sprintf("for a %s KV scheme, which its auto does not read: the model's dtype", a.Quant.Method)}
	}
	return nil
}

// runsSparse reports whether the engine runs a model's DSA sparse
// attention (sparse: the scenario prices it sparse) with a sparse
// backend on family a: not where the profile runs DSA dense (SM12x),
// where --dense-dsa=false prices kernels the engine lacks and its dense
// backend stands in (the caveat says so).
func runsSparse(p *engprof.Profile, a engprof.Arch, sparse bool) bool {
	return sparse && !p.DenseDSA(a)
}

// mlaUse is what sc's MLA decode backend is chosen by on engine p's
// family a with KV dtype kv.
func (sc Scenario) mlaUse(p *engprof.Profile, a engprof.Arch, kv engprof.KVDtype) engprof.MLAUse {
	u := engprof.MLAUse{Arch: a, KV: kv, DCP: sc.Plan.Normalized().DCP > 1}
	if sc.Arch != nil {
		u.QKNope, u.ModelType = sc.Arch.QKNopeHeadDim, sc.Arch.ModelType
		u.Sparse = runsSparse(p, a, sc.Arch.HasIndexer() && !sc.Build.DenseDSA)
	}
	return u
}

// FP8KVBackend is the MLA decode backend sc's engine runs with an FP8
// cache on sc's box (its --attention-backend honoured) and what that
// needs of the engine's build there (engprof.AttentionBackend.FP8KVNeeds;
// nil when nothing), whatever KV dtype sc has; an error when no backend
// of the engine reads an FP8 cache there.
func (sc Scenario) FP8KVBackend() (string, *engprof.Condition, error) {
	p, err := engprof.Lookup(sc.Options.Engine)
	if err != nil {
		return "", nil, err
	}
	a := archOf(sc.Topo)
	b, err := p.Backend(sc.mlaUse(p, a, engprof.KVFP8), string(sc.Options.AttentionBackend))
	if err != nil {
		return "", nil, err
	}
	if !b.FP8KVNeeds.On(a) {
		return b.Name, nil, nil
	}
	return b.Name, b.FP8KVNeeds, nil
}

// piecewiseWhy says why sc's decode graphs on engine p, with MLA decode
// backend b, are captured piecewise, the attention's ops eager between
// the pieces: b captures piecewise only, or p captures piecewise under
// DCP (vLLM overrides its mode there); "" when p's own mode stands.
func (sc Scenario) piecewiseWhy(p *engprof.Profile, b *engprof.AttentionBackend) string {
	switch {
	case b.CUDAGraph == "piecewise":
		return b.Name + " captures piecewise only"
	case sc.Plan.Normalized().DCP > 1 && p.Graphs.DCPPiecewise:
		return p.Name() + " captures piecewise under DCP"
	}
	return ""
}

// PiecewiseGraphs is why sc's decode graphs are captured piecewise on its
// box (piecewiseWhy of its engine and MLA decode backend, its
// --attention-backend honoured), "" when the engine's own capture mode
// stands: a model without MLA, or an engine or backend that does not
// resolve here (CheckEngine says why).
func (sc Scenario) PiecewiseGraphs() string {
	if sc.Arch == nil || sc.Arch.KVLoraRank == 0 {
		return ""
	}
	p, err := engprof.Lookup(sc.Options.Engine)
	if err != nil {
		return ""
	}
	b, err := p.Backend(sc.mlaUse(p, archOf(sc.Topo), kvOf(sc.Workload.KVDtypeFor(sc.Arch))), string(sc.Options.AttentionBackend))
	if err != nil {
		return ""
	}
	return sc.piecewiseWhy(p, b)
}

// CheckEngine refuses, before any work, a scenario its engine cannot run:
// an engine with no profile, an attention backend the engine lacks or
// that cannot run the box's GPU family, KV dtype or model, a model whose
// experts' weight format has no MoE kernel of the engine there, a
// --moe-dispatch the engine has no implementation of, or an option the
// profile lists as unsupported. The error is one line naming the flag
// (--engine, --attention-backend, --moe-kernel, --moe-dispatch, --dcp or
// the option's).
func (sc Scenario) CheckEngine() error {
	o := sc.Options
	p, err := engprof.Lookup(o.Engine)
	if err != nil {
		return fmt.Errorf("--engine %s: %w", o.Engine, err)
	}
	a := archOf(sc.Topo)
	flag := func(name, value string, err error) error {
		return fmt.Errorf("--%s %s: %w", name, value, err)
	}
	// A GPU of no family the profiles state (compute capability 7.5,
	// 11.0): its kernels, their grids and their companions are no
	// engine's, so nothing here prices it.
	if t := sc.Topo; a == engprof.ArchUnknown && t != nil && t.NumGPUs() > 0 && !t.IsCPUBox() {
		dev := t.DeviceOf(0)
		return fmt.Errorf("--topo %s: its GPU %s has compute capability %s, of no architecture family the engine profiles state (want %s)",
			t.Name, dev.Name, dev.ComputeCapability, engprof.ArchCCs)
	}
	if sc.Arch != nil && sc.Arch.KVLoraRank > 0 {
		kv := kvOf(sc.Workload.KVDtypeFor(sc.Arch))
		plan := sc.Plan.Normalized()
		u := sc.mlaUse(p, a, kv)
		if _, err := p.Backend(u, string(o.AttentionBackend)); err != nil {
			// DCP is at fault only where a backend runs the step
			// without it: an engine with no MLA backend on the GPU at
			// all is refused by its name, whatever the plan.
			noDCP := u
			noDCP.DCP = false
			switch {
			case o.AttentionBackend != "":
				return flag("attention-backend", string(o.AttentionBackend), err)
			case plan.DCP > 1:
				if _, nerr := p.Backend(noDCP, ""); nerr == nil {
					return flag("dcp", fmt.Sprint(plan.DCP), err)
				}
			}
			return flag("engine", p.Name(), err)
		}
	}
	if sc.Arch != nil && sc.Arch.RoutedExperts > 0 {
		f, ferr := engprof.ParseWeightFormat(string(sc.Arch.Quant.Dtype(model.CompRoutedExperts)))
		if ferr == nil {
			if _, err := p.MoEKernel(a, f, sc.Plan.Normalized().ExpertRanks() > 1, o.MoEKernel); err != nil {
				if o.MoEKernel != "" {
					return flag("moe-kernel", o.MoEKernel, err)
				}
				return flag("engine", p.Name(), err)
			}
		}
	} else if o.MoEKernel != "" {
		return flag("moe-kernel", o.MoEKernel, fmt.Errorf("the model has no routed experts"))
	}
	if sc.Build.MoEDispatch != "" && sc.Plan.DispatchesMoE(sc.Arch) {
		// A kind that does not parse is model.Validate's to refuse.
		if k, err := engprof.ParseDispatch(sc.Build.MoEDispatch); err == nil {
			if err := p.CheckDispatch(k); err != nil {
				return flag("moe-dispatch", sc.Build.MoEDispatch, err)
			}
			if err := p.NeedsNVLink(k, NVLinkAmong(sc.Topo, sc.Plan.Normalized().World())); sc.Topo != nil && err != nil {
				return flag("moe-dispatch", sc.Build.MoEDispatch, err)
			}
		}
	}
	// Off where the engine fuses by default needs the engine's switch:
	// without one the engine would fuse whatever the flag said.
	if plan := sc.Plan.Normalized(); o.ARNormFusion == ToggleOff && sc.Topo != nil && sc.Topo.DeviceOf(0) != nil {
		dev := sc.Topo.DeviceOf(0)
		if off, fused := p.FusionOff(engprof.FuseAllReduceRMSNorm, engprof.FusionUse{CC: dev.ComputeCapability, Device: dev.Name, TP: plan.TP, DP: plan.DP, ModelType: sc.modelType()}); fused && off == "" {
			return fmt.Errorf("--ar-norm-fusion false: %s fuses each all-reduce with the RMSNorm after it by default on %s, and its profile states no switch that turns the fusion off", p.Name(), a)
		}
	}
	// The CUDA-graph estimate is a figure of an engine that takes one off
	// its pool (kv_pool.cuda_graph_estimate); under another it would be
	// printed among the options and priced nowhere. No estimate exceeds
	// the memory it is taken from.
	if g := o.CUDAGraphMem; g.Given {
		if !p.KVPool.CUDAGraphEstimate {
			return fmt.Errorf("--cuda-graph-mem-gib %s: %s takes no CUDA-graph memory estimate off its KV pool (vLLM does from 0.21.0), so the figure prices nothing: leave it out", g, p.Name())
		}
		if t := sc.Topo; t != nil && t.DeviceOf(0) != nil && g.Bytes() > float64(t.DeviceOf(0).MemBytes) {
			dev := t.DeviceOf(0)
			return fmt.Errorf("--cuda-graph-mem-gib %s: more than the %.4g GiB of memory of %s's %s: want the estimate the engine's log prints", g, float64(dev.MemBytes)/float64(1<<30), t.Name, dev.Name)
		}
	}
	if err := checkMaxModelLen(sc); err != nil {
		return err
	}
	if err := sc.checkNCCLGathers(); err != nil {
		return err
	}
	// The plan's GPUs (the first World of the box: its TP groups, and the
	// all-to-all and gathers of DP attention across them) need a route for
	// each hop P2P settings send through host memory.
	if err := HostRouteRefusal(sc.Topo, sc.Options.NCCL, FirstRanks(sc.Plan.Normalized().World())); sc.Topo != nil && err != nil {
		return err
	}
	for _, n := range o.Names() {
		name, val, _ := strings.Cut(n, "=")
		if err := p.Refuse(name, val, a); err != nil {
			return err
		}
	}
	if d := sc.Plan.Normalized().DCP; d > 1 {
		if err := p.Refuse("dcp", fmt.Sprint(d), a); err != nil {
			return err
		}
	}
	return checkSpecEngine(sc, p)
}

// checkNCCLGathers refuses an NCCL_ALGO that leaves NCCL no algorithm,
// an NCCL_PROTO that leaves it no protocol, or the two together no pair
// (NVLS alone without Simple), for an all-gather or reduce-scatter sc's
// step runs through it (every
// engine's, the executor's included): the logits' all-gather of a TP
// group (and, beside it, DCP's and DP attention's gathers), or the MoE
// dispatch's all-gather and reduce-scatter under DP attention at TP 1.
// NCCL fails the call (ncclInvalidUsage), so the server does not start;
// the step had been priced with Ring for them.
func (sc Scenario) checkNCCLGathers() error {
	nvls := NVLSAmong(sc.Topo, sc.Plan.Normalized().World())
	if !sc.Options.NCCL.GathersFail(nvls) {
		return nil
	}
	what := ""
	if plan := sc.Plan.Normalized(); plan.TP > 1 {
		what = "all-gather of the logits over the TP group (head.logits_allgather)"
	} else if d, ok, err := MoEDispatchOf(sc); err == nil && ok && d.Kind == engprof.DispatchAllGather {
		what = "MoE dispatch, an all-gather and a reduce-scatter (moe.dispatch, moe.combine),"
	}
	if what == "" {
		return nil
	}
	if n := sc.Options.NCCL; n.GathersNVLSWithoutSimple(nvls) {
		op, fn := "an all-gather", ncclenv.AllGather
		if !n.NVLSWithoutSimple(fn, nvls) {
			op, fn = "a reduce-scatter", ncclenv.ReduceScatter
		}
		return fmt.Errorf("--nccl-algo %s with --nccl-proto %s leaves NCCL no algorithm/protocol pair for %s: the algorithms leave it NVLS alone, which NCCL runs with Simple only (src/graph/tuning.cc), and the protocols turn Simple off for it, so the step's %s has none and NCCL fails it (\"no algorithm/protocol available\", ncclInvalidUsage): keep Simple for it (%s:Simple) or Ring among its algorithms", n.Algo, n.Proto, op, what, fn)
	}
	if sc.Options.NCCL.GathersLackProtocol() {
		return fmt.Errorf("--nccl-proto %s leaves NCCL no protocol for an all-gather or reduce-scatter (its clause for allgather or reducescatter), so the step's %s has none and NCCL fails it (\"no algorithm/protocol available for function AllGather\", ncclInvalidUsage): keep a protocol for them (allgather:Simple;reducescatter:Simple) or leave it out", sc.Options.NCCL.Proto, what)
	}
	return fmt.Errorf("--nccl-algo %s leaves NCCL no algorithm for an all-gather or reduce-scatter %s, so the step's %s has none and NCCL fails it (\"no algorithm/protocol available for function AllGather\", ncclInvalidUsage): keep Ring among them (--nccl-algo Ring,Tree) or leave it out", sc.Options.NCCL.Algo, gatherAlgosHere(nvls), what)
}

// gatherAlgosHere says which algorithms NCCL has for an all-gather or a
// reduce-scatter on the box (ncclenv.Settings.Algorithms), for the line
// that refuses an NCCL_ALGO leaving none of them.
func gatherAlgosHere(nvls bool) string {
	if nvls {
		return "here (it has Ring and NVLS for them)"
	}
	return "here (it has Ring alone for them: this box has no NVLink SHARP for NVLS)"
}

// EngineSummary says which kernels the engine prices sc's step with: the
// profile, the attention backend and its grid, the MoE kernel for the
// experts' format, how the tokens reach the experts under DP attention
// (built: the build options of the schedule priced, which hold the
// dispatch it ran), the all-reduce the TP group gets, and the DSA choice.
// One line, for the CLI's "engine" row. graphed: whether the step
// replays a CUDA graph (its deployment's); an eager step (graphs off, or
// more tokens than the largest capture size) captures no pieces for the
// attention to run between.
func (p *Predictor) EngineSummary(sc Scenario, built model.BuildOptions, graphed bool) string {
	k := &p.cm.engineKernels
	name := k.prof.Name()
	if p.opts.Engine.IsZero() {
		name += " (the default engine; --engine picks another)"
	}
	parts := []string{name}
	if sc.Arch != nil && sc.Arch.KVLoraRank > 0 {
		kv := kvOf(sc.Workload.KVDtypeFor(sc.Arch))
		if b, err := k.prof.Backend(sc.mlaUse(k.prof, k.arch, kv), k.attnOverride); err == nil {
			g := string(b.Grid.Kind)
			if b.Grid.Kind == engprof.GridSplitKV {
				n := p.cm.tritonFixedSplits
				if n == 0 {
					n = b.Grid.FixedSplits
				}
				if n > 0 {
					g = fmt.Sprintf("%d KV splits", n)
				} else {
					g = fmt.Sprintf("KV splits by length, up to %dx SMs", b.Grid.SplitOccupancy)
				}
			}
			parts = append(parts, fmt.Sprintf("attention %s (%s, %s)", b.Name, g, companions(len(b.Companions))))
			// A piecewise capture launches the attention's ops eagerly
			// between the captured pieces (noteSchedule), which is where
			// the step's host launch time goes.
			// So does a graphed step with prefill tokens under a mode that
			// captures such a step piecewise (vLLM's FULL_AND_PIECEWISE).
			why := sc.piecewiseWhy(k.prof, b)
			if why == "" && sc.Workload.Normalized().Phase == model.Prefill && k.prof.Graphs.MixedPiecewise() && sc.CUDAGraphsUnused() == "" {
				why = fmt.Sprintf("%s replays a step with prefill tokens as piecewise graphs, %s", k.prof.Name(), k.prof.Graphs.Mode)
			}
			if p.opts.CUDAGraphs && graphed && why != "" {
				parts = append(parts, fmt.Sprintf("CUDA graphs piecewise: attention eager between captured pieces (%s)", why))
			}
		}
	}
	if p.opts.CUDAGraphs && len(p.opts.GraphSizes) == 0 && len(k.prof.Graphs.MaxBS) > 0 {
		// The engine's largest captured batch is the GPU's and the
		// engine size's (SGLang's cuda_graph_max_bs): a larger decode
		// batch runs eagerly.
		world := sc.Plan.World()
		maxBS := k.prof.GraphMaxBS(p.dev.MemBytes, world)
		tier := fmt.Sprintf("cuda_graph_max_bs %d for %d MiB at tp_size %d", maxBS, p.dev.MemBytes/engprof.MiB, world)
		parts = append(parts, p.graphsWords(sc, k.prof.Name()+"'s list", maxBS, tier))
	}
	if l := k.eagerPrefillLayerHostUs(p.dev); l > 0 && sc.Workload.Normalized().Phase == model.Prefill {
		// Its prefill steps run eagerly at the host time a layer the
		// profile measured (spreadPrefillHost): say so where the step
		// priced is one.
		parts = append(parts, fmt.Sprintf("prefill eager, the host's iteration %.0f us a decoder layer", l))
	}
	if given := p.opts.GraphSizes; p.opts.CUDAGraphs && len(given) > 0 && sc.Workload.SpecTokens <= 0 {
		// The sizes given are the engine's list, which its request pool
		// still stops (engineCaptureSizes): said where it does, as for
		// the engine's own list.
		maxBS := given[len(given)-1]
		if pool := requestPool(sc); pool > 0 && pool < maxBS {
			if _, ok := p.engineCaptureSizes(p.captureOf(sc.Plan.World()), 0, sc.Plan.World(), pool); ok {
				parts = append(parts, p.graphsWords(sc, "--graph-sizes", maxBS, fmt.Sprintf("the largest size given, %d", maxBS)))
			}
		}
	}
	if sc.Arch != nil && sc.Arch.RoutedExperts > 0 {
		d := sc.Arch.Quant.Dtype(model.CompRoutedExperts)
		if mk := k.moeKernel(d); mk != nil {
			runs := ""
			if k.moeAsked[dtypeIndex(d)] && !mk.Is(k.moeOverride) {
				// The engine hands these weights to another kernel
				// when the named one is asked for (MoEKernel.Runs).
				runs = fmt.Sprintf("what --moe-kernel %s runs for them, ", k.moeOverride)
			}
			parts = append(parts, fmt.Sprintf("MoE %s for %s experts (%s%s)", mk.Name, d, runs, companions(len(mk.Companions))))
		}
	}
	if plan := sc.Plan.Normalized(); sc.Plan.DispatchesMoE(sc.Arch) {
		if d, err := dispatchOn(k.prof, p.topo, plan, sc.Build.MoEDispatch); err == nil {
			// The kind the schedule ran (its build options), which is
			// the engine's default unless --moe-dispatch chose it.
			if kind, err := engprof.ParseDispatch(built.MoEDispatch); err == nil {
				d.Kind = kind
			}
			parts = append(parts, fmt.Sprintf("DP %d MoE dispatch %s%s", plan.DP, d, payloadWords(d.Kind, built.DispatchDtype, sc.Build.DispatchDtype != "")))
		}
	}
	if plan := sc.Plan.Normalized(); plan.TP > 1 {
		// custom: an engine's own all-reduce kernel carries the TP
		// all-reduces, the kernel an engine's default fusion runs in
		// (fuseNorms).
		custom := true
		tabled := false
		switch {
		case p.opts.CustomAR == CustomARAuto:
			g := FirstRanks(plan.TP)
			nvl, nvs := p.topo.AllNVLink(g), p.topo.NVSwitchJoined(g)
			if ok, _ := k.prof.AllReduce.Runs(plan.TP, nvl, 0); ok && len(k.prof.AllReduce.StrategyTable) > 0 && sc.Arch != nil {
				// The engine's strategy table picks by the step's tokens:
				// its bands for the all-reduce the norm fuses into (or
				// the plain one where the engine fuses none).
				f := engprof.ARFusionNone
				if p.opts.ARNormFusion == ToggleOn || (p.opts.ARNormFusion == ToggleDefault && k.arFused(plan, sc.modelType())) {
					f = engprof.ARFusionResidualRMSNorm
				}
				bands := k.prof.AllReduce.TableBands(k.cc, plan.TP, f, int64(sc.Arch.Hidden))
				what := "custom all-reduce"
				if f == engprof.ARFusionResidualRMSNorm {
					what = "all-reduce + RMSNorm fused in the custom kernel"
				}
				parts = append(parts, fmt.Sprintf("%s by the engine's AUTO table: %s", what, bands))
				tabled = true
			} else if ok {
				parts = append(parts, "custom all-reduce")
			} else {
				parts = append(parts, "NCCL all-reduce")
				custom = false
			}
			if k.prof.SymmMem.Runs(k.arch, k.cc, plan.TP, nvs) {
				parts = append(parts, "symmetric-memory all-reduce above the custom one's cap")
				custom = true
			}
		case p.opts.CustomAR == CustomAROff:
			parts = append(parts, "NCCL all-reduce")
			custom = false
		default:
			parts = append(parts, string(p.opts.CustomAR)+" all-reduce (forced)")
		}
		if custom && k.arFused(plan, sc.modelType()) {
			capB := k.prof.FusionMaxInputBytes(engprof.FuseAllReduceRMSNorm, k.cc, plan.TP)
			switch {
			case p.opts.ARNormFusion == ToggleOff:
				off, _ := k.prof.FusionOff(engprof.FuseAllReduceRMSNorm, k.fusionUse(plan, sc.modelType()))
				parts = append(parts, "all-reduce + RMSNorm apart ("+off+")")
			case tabled:
				// The table's bands said where it is fused.
			case capB > 0:
				parts = append(parts, fmt.Sprintf("all-reduce + RMSNorm fused for messages up to %s", units.BinaryBytes(capB)))
			default:
				parts = append(parts, "all-reduce + RMSNorm fused")
			}
		}
	}
	if sc.Arch != nil && sc.Arch.HasIndexer() {
		parts = append(parts, dsaSummary(sc.Build.DenseDSA, sc.DenseDSAChosen, k.prof.DenseDSA(k.arch)))
	}
	return strings.Join(parts, ", ")
}

// dsaSummary says how a DSA model's attention was priced (dense or
// sparse), whether --dense-dsa chose it, and, where the choice is not
// what the engine runs on the box (engineDense), that it is not.
func dsaSummary(dense, chosen, engineDense bool) string {
	s, flag, engine := "DSA sparse", "--dense-dsa=false", "dense"
	if dense {
		s, flag, engine = "DSA run dense", "--dense-dsa", "sparse"
	}
	switch {
	case !chosen:
		return s
	case dense == engineDense:
		return s + " (" + flag + ")"
	}
	return s + " (" + flag + "; the engine runs it " + engine + " here)"
}

// Kernels names the attention backend sc's decode runs with and the
// fused-MoE kernel of its routed experts on this Predictor's engine and
// GPU, as EngineSummary names them; "" for a model without MLA or without
// routed experts.
func (p *Predictor) Kernels(sc Scenario) (attention, moe string) {
	if b := p.decodeBackend(sc); b != nil {
		attention = b.Name
	}
	if sc.Arch != nil && sc.Arch.RoutedExperts > 0 {
		if mk := p.cm.engineKernels.moeKernel(sc.Arch.Quant.Dtype(model.CompRoutedExperts)); mk != nil {
			moe = mk.Name
		}
	}
	return attention, moe
}

// KVPage is the page rules the engine applies to the KV block size of
// sc's MLA model on this Predictor's engine and GPU (engprof.Profile.KVPage:
// SGLang's flashmla, trtllm_mla and DSA backends: 64; vLLM's FlashMLA,
// FlashInfer-MLA, CUTLASS_MLA and sparse pages, and FlashMLA's on Hopper
// when it picks the backend itself); nil when it forces none, so the
// scheduler's block size stands.
func (p *Predictor) KVPage(sc Scenario) engprof.KVPage {
	if sc.Arch == nil || sc.Arch.KVLoraRank == 0 {
		return nil
	}
	k := &p.cm.engineKernels
	u := sc.mlaUse(k.prof, k.arch, kvOf(sc.Workload.KVDtypeFor(sc.Arch)))
	if _, err := k.prof.Backend(u, k.attnOverride); err == nil {
		return k.prof.KVPage(u, k.attnOverride)
	}
	return k.prof.KVPage(u, "") // as decodeBackend falls back
}

// decodeBackend is the attention backend sc's decode runs with on this
// Predictor's engine and GPU, nil when none (or no MLA).
func (p *Predictor) decodeBackend(sc Scenario) *engprof.AttentionBackend {
	if sc.Arch == nil || sc.Arch.KVLoraRank == 0 {
		return nil
	}
	k := &p.cm.engineKernels
	u := sc.mlaUse(k.prof, k.arch, kvOf(sc.Workload.KVDtypeFor(sc.Arch)))
	b, err := k.prof.Backend(u, k.attnOverride)
	if err != nil {
		b, _ = k.prof.Backend(u, "")
	}
	return b
}

// companions is "n companion kernels" for people.
func companions(n int) string {
	if n == 1 {
		return "1 companion kernel"
	}
	return fmt.Sprintf("%d companion kernels", n)
}

// payloadWords says, for the engine line, what a dispatch of kind moves
// each token in (dt, the schedule's; chosen: by --dispatch-dtype): the
// all-gather's payload always (vLLM's is its experts' input format,
// quantized before the gather), an all-to-all's when not bf16.
func payloadWords(kind engprof.Dispatch, dt model.Dtype, chosen bool) string {
	switch {
	case chosen:
		return fmt.Sprintf(", %s tokens (--dispatch-dtype)", dt)
	case kind != engprof.DispatchAllGather && dt == model.BF16:
		return ""
	case dt == model.BF16:
		return ", bf16 tokens"
	}
	return fmt.Sprintf(", %s tokens (the experts' input quantization, before the gather)", dt)
}

// checkMaxModelLen refuses a --max-model-len below 0, above the model's
// own (vLLM's _get_and_verify_max_len: "User-specified max_model_len ...
// is greater than the derived max_model_len") or shorter than the
// workload's context, which the engine would then not serve.
func checkMaxModelLen(sc Scenario) error {
	n := sc.Options.MaxModelLen
	if n == 0 {
		return nil
	}
	if n < 0 {
		return fmt.Errorf("--max-model-len %d: want tokens > 0 (0: the model's)", n)
	}
	a := sc.Arch
	if a == nil {
		return nil
	}
	if lim := a.MaxModelLenTokens; lim > 0 && n > lim {
		return fmt.Errorf("--max-model-len %d: above the %d tokens %s is served at, which vLLM derives from its config and refuses a longer max_model_len than ('model show' gives it)", n, lim, a.Name)
	}
	if c := sc.Workload.Context; c > n {
		return fmt.Errorf("--max-model-len %d: shorter than the --context %d, which the engine would not serve: want at least the context", n, c)
	}
	return nil
}

// graphsWords says, for the engine line, what sc's engine captures where
// its list (list: its words, the engine's own or the sizes given) stops
// at cuda_graph_max_bs or the largest size given (maxBS; tier: its
// words): with speculation where it has a capture list of its own for it
// (SGLang), the
// largest verify batch and its tokens a sequence and that the draft
// passes capture the same batches (a method that drafts on the host has
// none); else the largest decode batch. Either list's end says whether
// the request pool or cuda_graph_max_bs stops it, and a pool the user
// gave is said to be given. The sizes are the ones the step is priced
// with (engineCaptureSizes).
func (p *Predictor) graphsWords(sc Scenario, list string, maxBS int, tier string) string {
	k, world, pool := sc.Workload.SpecTokens, sc.Plan.World(), requestPool(sc)
	sizes, ok := p.engineCaptureSizes(p.captureOf(world), k, world, pool)
	if !ok || len(sizes) == 0 || (k <= 0 && (pool <= 0 || pool >= maxBS)) {
		// The decode list as cuda_graph_max_bs ends it.
		return fmt.Sprintf("decode graphs to batch %d (cuda_graph_max_bs for %d MiB at tp_size %d; larger batches eager)",
			maxBS, p.dev.MemBytes/engprof.MiB, world)
	}
	top := sizes[len(sizes)-1] / (1 + k)
	_, f, spec := specFactsOf(sc)
	stop := tier
	switch {
	case pool > 0 && pool < maxBS:
		stop = fmt.Sprintf("the request pool, max_running_requests %d", pool)
		switch {
		case sc.Options.MaxNumSeqs > 0 && pool == sc.Options.MaxNumSeqs:
			// The user's limit (a serving run's pool is the one given),
			// even where it equals the method's default.
			stop += " as given"
		case spec && pool == f.MaxRunning:
			stop += fmt.Sprintf(" for %s", f.Name)
		}
		stop += ", below " + tier
	case pool > 0 && k > 0:
		stop += fmt.Sprintf(", at most the request pool of %d", pool)
	}
	if k <= 0 {
		return fmt.Sprintf("decode graphs to batch %d (%s up to %s; larger batches eager)", top, list, stop)
	}
	draft := ""
	if sc.Build.Spec.MethodFor(sc.Workload).OnDevice() {
		draft = ", the draft passes at the same batches"
	}
	return fmt.Sprintf("verify graphs to batch %d of %d tokens a sequence%s (%s up to %s; larger batches eager)",
		top, 1+k, draft, strings.Replace(list, "'s list", "'s speculative list", 1), stop)
}
