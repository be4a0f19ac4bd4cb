package sim

import (
	"errors"
	"fmt"
	"math"
	"math/bits"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
)

// Pricing of engine iterations (model.Iteration) for request-level
// simulation: one scheduler step mixes decode tokens and prefill chunks,
// and a simulated hour has about 10^5 of them, so each is priced from a
// memo.
//
// Memo and its error bound. Every feature of an iteration that its op
// costs depend on (decoding sequences, their cached tokens, prefill
// chunks, tokens, prefix tokens and both pair sums) is rounded UP to a
// grid that keeps bucketBits+1 significant bits: exact below
// 2^(bucketBits+1), above it the relative step is at most 2^-bucketBits
// (1/32 = 3.1 % at the default 5 bits). The rounded iteration is priced
// once and stands for every iteration of its bucket. Op costs grow with
// these features and at most in proportion (a roofline cost is a floor or
// a constant plus terms linear in them), so a bucket's price lies between
// the exact price and (1 + 2^-bucketBits) times it. Kernel-shape effects
// (wave quantization, the CTAs a GEMM launches) are not monotone, so the
// bound is checked, not assumed: TestIterationBucketBound prices random
// iterations of three models and plans exactly and bucketed and asserts
// IterationBucketBound. CUDA-graph padding is decided on the real token
// count and is part of the key, so bucketing never moves a step between
// graph sizes or from a graph to eager.
//
// Layers. As the Evaluator does (plan_eval.go), the memo prices a copy of
// the architecture with fastLayers MoE layers and extrapolates the time of
// an interior one (interiorLayerWindow) to the real layer count; TestIterationExtrapolation
// checks it against the whole engine within 0.5 %.
//
// CUDA graphs (Options.CUDAGraphs): a step whose tokens fit a capture size
// runs graphed, padded to that size (PadTokens), unless the engine replays
// decode steps only (model.GraphCapture.DecodeOnly: SGLang runs every step
// with prefill tokens eagerly); vLLM v1 runs a
// decode-only step as a full graph and a mixed step as piecewise graphs
// with the attention op's kernels launched eagerly between them
// (engineKernels.noteSchedule, cuda_graphs.piecewise_eager_prefill).
// Larger steps run eagerly.

// defaultIterationBucketBits is the memo's grid: 5 bits, steps of at most
// 1/32 of a value.
const defaultIterationBucketBits = 5

// IterationCoster prices engine iterations of one architecture, plan,
// build options and KV dtype on the Predictor's box and options. Not safe
// for concurrent use (it drives the Predictor).
type IterationCoster struct {
	p     *Predictor
	arch  *model.Arch
	short *model.Arch // fastLayers MoE layers; nil when the model is not longer
	plan  model.Plan
	build model.BuildOptions
	kv    model.Dtype
	bits  int
	memo  map[iterKey]float64
	stats IterationCostStats
	// spec is the speculative tokens each decoding sequence verifies (the
	// scenario's Workload.SpecTokens, with Build.Spec's method); capture
	// the CUDA-graph capture its steps run under (the engine's spec list
	// when it has one: Predictor.stepCapture).
	spec    int
	capture *model.GraphCapture
	// fullDecode: the scenario's decode steps capture full graphs (no
	// Scenario.PiecewiseGraphs reason), which the engine's capture rule
	// for speculative decoding reads (LimitCapture).
	fullDecode bool
}

// IterationCostStats counts the memo's work.
type IterationCostStats struct {
	Lookups int `json:"lookups"` // StepUs calls
	Priced  int `json:"priced"`  // distinct buckets priced (engine runs)
}

// iterKey is a bucket: the iteration that stands for it (rounded
// features, graph padding included) and the launch mode.
type iterKey struct {
	rep     model.Iteration
	graphed bool
}

// NewIterationCoster returns a coster for the scenario's architecture,
// plan, build options and KV dtype (Workload.KVDtype; its batch, context
// and phase are not used). With speculative tokens every iteration's
// decoding sequences verify that many drafts and the draft passes follow
// (model.BuildIteration); the iterations StepUs is given carry them
// (Iteration.SpecTokens, serving's scheduler sets it).
func NewIterationCoster(p *Predictor, sc Scenario) (*IterationCoster, error) {
	if p == nil {
		return nil, errors.New("sim: nil predictor")
	}
	if sc.Arch == nil {
		return nil, errors.New("sim: scenario has no architecture")
	}
	plan := sc.Plan.Normalized()
	if world := plan.World(); world > p.topo.NumGPUs() {
		return nil, fmt.Errorf("sim: plan %s needs %d GPUs; topology %s has %d", plan, world, p.topo.Name, p.topo.NumGPUs())
	}
	kv := sc.Workload.KVDtypeFor(sc.Arch)
	// Unchosen, the MoE dispatch is the engine's, as in a step's schedule.
	build, err := p.withDispatch(sc.Build, sc.Arch, plan)
	if err != nil {
		return nil, err
	}
	c := &IterationCoster{p: p, arch: sc.Arch, plan: plan, build: build, kv: kv,
		bits: defaultIterationBucketBits, memo: make(map[iterKey]float64),
		spec: sc.Workload.SpecTokens, capture: p.stepCapture(sc), fullDecode: sc.PiecewiseGraphs() == ""}
	if sc.Arch.MoELayers() > fastLayers {
		short := *sc.Arch
		short.Layers = sc.Arch.DenseLayers + fastLayers
		c.short = &short
	}
	// Build one step now so that an invalid option or plan fails here
	// (the builder's *model.PlanError), before any simulation starts.
	if _, err := c.ExactStepUs(model.Iteration{DecodeSeqs: 1, DecodeKVTokens: 1, SpecTokens: c.spec}); err != nil {
		return nil, err
	}
	return c, nil
}

// LimitCapture sets the CUDA-graph capture the iterations run under to
// the engine's for a scheduler of at most maxNumSeqs running requests and
// maxNumBatchedTokens tokens a step, in an engine whose request pool
// holds requestPool requests (its running limit over every DP rank:
// SGLang's max_running_requests, 48 under speculation unless given),
// where graphs are on: where the engine has sizes of its own for the
// step, those (Predictor.engineCaptureSizes, the rule a step's capture
// reads: with speculation SGLang's speculative list up to the pool,
// without its decode list, or the sizes given, up to the pool); else,
// where sizes were given, those (Options.GraphSizes win, as vLLM's
// cudagraph_capture_sizes and SGLang's --cuda-graph-bs do); else by the
// profile's serving rule
// (engprof.Profile.ServingCaptureSizes: vLLM captures up to
// min(max_num_seqs x (1 + k) x 2, 512, max_num_batched_tokens) and runs a
// larger step eagerly) where it states one; else the capture stands. The
// serving layer calls it once its limits are known; the memo is cleared.
func (c *IterationCoster) LimitCapture(maxNumSeqs, maxNumBatchedTokens, requestPool int) {
	if c.capture == nil {
		return
	}
	sizes, ok := c.p.engineCaptureSizes(c.capture, c.spec, c.plan.World(), requestPool)
	if !ok && len(c.p.opts.GraphSizes) > 0 {
		return // the given sizes stand
	}
	if !ok {
		prof, err := engprof.Lookup(c.p.opts.Engine)
		if err != nil {
			return
		}
		if sizes, ok = prof.ServingCaptureSizes(maxNumSeqs, maxNumBatchedTokens, c.spec, c.fullDecode); !ok {
			return
		}
	}
	g := *c.capture
	g.Sizes = sizes
	c.capture = &g
	clear(c.memo)
}

// CaptureSizes are the CUDA-graph capture sizes the iterations run under
// (nil when graphs are off): a step of more tokens than the last runs
// eagerly.
func (c *IterationCoster) CaptureSizes() []int {
	if c.capture == nil {
		return nil
	}
	return c.capture.Sizes
}

// IterationBucketBound is the relative error the memo's bucketing may add
// to a step's price: StepUs(it) / ExactStepUs(it) - 1 lies in
// [-IterationBucketBound.Below, IterationBucketBound.Above] (see the
// memo's model above; TestIterationBucketBound checks it), before the
// layer extrapolation's own 0.5 %.
var IterationBucketBound = struct{ Below, Above float64 }{Below: 0.005, Above: 1.0 / (1 << defaultIterationBucketBits)}

// KVDtype is the KV-cache dtype the iterations run with.
func (c *IterationCoster) KVDtype() model.Dtype { return c.kv }

// Stats returns the memo's counters.
func (c *IterationCoster) Stats() IterationCostStats { return c.stats }

// KVCapacityTokens is how many tokens of KV cache one attention group
// holds (every GPU of the group holds the same latent cache) when its
// steps take up to chunkTokens tokens and maxSeqs sequences (0: the
// engine's defaults; vLLM's profiling step runs them):
// sim's memory budget under the engine's KV-pool rule (memoryFit), and
// that rule. An error when the weights and workspace do not fit.
func (c *IterationCoster) KVCapacityTokens(chunkTokens, maxSeqs int) (int64, KVBudget, error) {
	sc := Scenario{Arch: c.arch, Plan: c.plan, Build: c.build,
		Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 1, KVDtype: c.kv, SpecTokens: c.spec}}
	m := c.p.memoryFitChunk(sc, model.NewDeployment(sc.Plan, sc.Workload, nil), chunkTokens, maxSeqs)
	if err := m.Budget.NoPool(); err != nil {
		return 0, m.Budget, fmt.Errorf("sim: %s %s on %s: %w", c.arch.Name, c.plan, c.p.topo.Name, err)
	}
	if m.KVCapacityTokens <= 0 {
		short := float64(m.WeightBytes+m.ActivationBytes-m.UsableBytes) / 1e9
		return 0, m.Budget, fmt.Errorf("sim: %s %s on %s: weights %.1f GB + activations %.1f GB exceed the usable %.1f GB per GPU (%s) by %.1f GB: %w",
			c.arch.Name, c.plan, c.p.topo.Name, float64(m.WeightBytes)/1e9, float64(m.ActivationBytes)/1e9, float64(m.UsableBytes)/1e9, m.Budget, short, ErrDoesNotFit)
	}
	return m.KVCapacityTokens, m.Budget, nil
}

// KVMemory is the per-GPU memory fit KVCapacityTokens sizes the pool
// from, for a step budget of chunkTokens and maxSeqs: the GPU's memory, the weights,
// the activations and the KV bytes of one token, which bound any pool the
// engine can allocate (a block count given outright included).
func (c *IterationCoster) KVMemory(chunkTokens, maxSeqs int) *MemoryFit {
	sc := Scenario{Arch: c.arch, Plan: c.plan, Build: c.build,
		Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 1, KVDtype: c.kv, SpecTokens: c.spec}}
	return c.p.memoryFitChunk(sc, model.NewDeployment(sc.Plan, sc.Workload, nil), chunkTokens, maxSeqs)
}

// StepUs is the predicted time of one iteration, from the memo (see the
// bucketing bound above). it.PadTokens must be 0: the padding is the
// coster's decision.
func (c *IterationCoster) StepUs(it model.Iteration) (float64, error) {
	c.stats.Lookups++
	rep, key, graphed, err := c.bucket(it)
	if err != nil {
		return 0, err
	}
	if us, ok := c.memo[key]; ok {
		return us, nil
	}
	us, err := c.price(rep, graphed, false)
	if err != nil {
		return 0, err
	}
	c.memo[key] = us
	c.stats.Priced++
	return us, nil
}

// ExactStepUs prices it without bucketing and without layer
// extrapolation: the whole schedule through the engine (the reference
// StepUs is checked against). it.PadTokens must be 0.
func (c *IterationCoster) ExactStepUs(it model.Iteration) (float64, error) {
	padded, graphed, err := c.graph(it)
	if err != nil {
		return 0, err
	}
	it.PadTokens = int(padded - it.Tokens())
	return c.price(it, graphed, true)
}

// graph decides whether the step runs as a CUDA graph and the token count
// it is padded to.
func (c *IterationCoster) graph(it model.Iteration) (padded int64, graphed bool, err error) {
	if it.PadTokens != 0 {
		return 0, false, fmt.Errorf("sim: iteration %s: pad_tokens = %d: want 0, the coster pads for CUDA graphs", it, it.PadTokens)
	}
	if err := it.Validate(); err != nil {
		return 0, false, err
	}
	padded, graphed = c.capture.Step(&it)
	return padded, graphed, nil
}

// bucket rounds it's features up to the memo's grid (see above) and
// returns the iteration that stands for the bucket (its own key) and
// whether it runs graphed.
//
// Token counts that set a GEMM's rows (the step's tokens T, the decoding
// sequences of the batched W_UK/W_UV GEMMs, the prefix tokens of the
// context K/V expansion) are rounded up only within their 128-row tile
// (gemmTileM): a rounding that crossed into the next tile row would add a
// row of CTAs and could tip the grid into another wave, a change of up to
// half an op's time that no grid step bounds. The representative keeps
// T' = D' + P' (+ graph padding): the prefill tokens are what T' leaves
// after the decode tokens.
func (c *IterationCoster) bucket(it model.Iteration) (model.Iteration, iterKey, bool, error) {
	padded, graphed, err := c.graph(it)
	if err != nil {
		return model.Iteration{}, iterKey{}, false, err
	}
	if it.SpecTokens > 0 {
		return c.bucketSpec(it, padded, graphed)
	}
	b := c.bits
	t := rowUp(it.Tokens(), b)
	if graphed {
		t = min(t, padded)
	}
	rep := model.Iteration{KVDtype: it.KVDtype}
	if it.PrefillSeqs == 0 {
		rep.DecodeSeqs = int(t)
	} else {
		rep.PrefillSeqs = int(roundUpBits(int64(it.PrefillSeqs), b))
		if it.DecodeSeqs > 0 {
			rep.DecodeSeqs = int(max(1, min(rowUp(int64(it.DecodeSeqs), b), t-int64(rep.PrefillSeqs))))
		}
		rep.PrefillTokens = t - int64(rep.DecodeSeqs)
		rep.PrefillPrefixTokens = rowUp(it.PrefillPrefixTokens, b)
		fp, fx := float64(rep.PrefillTokens), float64(rep.PrefillPrefixTokens)
		// Keep the rounded pair sums within what the rounded token counts
		// allow.
		rep.PrefillCausalPairs = math.Min(math.Max(float64(roundUpBits(int64(math.Ceil(it.PrefillCausalPairs)), b)), fp), fp*(fp+1)/2)
		rep.PrefillPrefixPairs = math.Min(float64(roundUpBits(int64(math.Ceil(it.PrefillPrefixPairs)), b)), fp*fx)
	}
	if rep.DecodeSeqs > 0 {
		rep.DecodeKVTokens = max(roundUpBits(it.DecodeKVTokens, b), int64(rep.DecodeSeqs))
	}
	if graphed {
		rep.PadTokens = int(max(0, padded-rep.Tokens()))
	}
	return rep, iterKey{rep: rep, graphed: graphed}, graphed, nil
}

// rowUp is roundUpBits kept within v's 128-row GEMM tile: never past the
// next multiple of gemmTileM at or above v.
func rowUp(v int64, nbits int) int64 {
	return min(roundUpBits(v, nbits), (v+gemmTileM-1)/gemmTileM*gemmTileM)
}

// roundUpBits rounds v >= 0 up to the nearest value with at most bits+1
// significant bits: v itself below 2^(bits+1), otherwise at most
// v x (1 + 2^-bits).
func roundUpBits(v int64, nbits int) int64 {
	if v < 1<<(nbits+1) {
		return v
	}
	shift := bits.Len64(uint64(v)) - (nbits + 1)
	step := int64(1) << shift
	return (v + step - 1) &^ (step - 1)
}

// price builds it (padding included) on the short architecture
// (extrapolated) or the full one and runs the engine, launched as a CUDA
// graph when graphed (the coster's decision, graph: its tokens fit a
// captured size, which the schedule's Deploy repeats).
func (c *IterationCoster) price(it model.Iteration, graphed, full bool) (float64, error) {
	if it.KVDtype == "" {
		it.KVDtype = c.kv
	}
	arch := c.short
	if full || arch == nil {
		arch = c.arch
	}
	o := c.build
	o.Graphs = c.capture
	s, err := model.BuildIteration(arch, c.plan, it, o)
	if err != nil {
		return 0, err
	}
	if builtSymmetric(s) {
		s = s.WithRanks(s.Ranks[:1])
	}
	step, err := c.p.stepUs(s, symBuilt, graphed)
	if err != nil {
		return 0, err
	}
	if arch == c.short {
		prev, last, err := interiorLayerWindow(s, arch, "iteration")
		if err != nil {
			return 0, err
		}
		// Rank 0's ops come first in the engine's arrays.
		step += float64(c.arch.MoELayers()-fastLayers) * (c.p.eng.end[last] - c.p.eng.end[prev])
	}
	// A method that drafts on the host (ngram, suffix) has the step wait
	// for its decoding sequences' drafts, as predict's step does.
	if m := c.build.Spec.MethodFor(model.Workload{SpecTokens: it.SpecTokens}); it.DecodeSeqs > 0 && draftsOnHost(c.p.opts.Engine, m) {
		step += specHostDraftUs(m, it.DecodeSeqs, float64(it.DecodeKVTokens)/float64(it.DecodeSeqs))
	}
	return step, nil
}
