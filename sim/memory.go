package sim

import (
	"fmt"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

// KVBudget is how the engine sizes its KV pool on one GPU (its profile's
// kv_pool): the rule, the fraction of the GPU's memory it runs at and
// where that came from.
type KVBudget struct {
	// Rule is engprof.KVPoolGPUMemUtil (vLLM's: the fraction less the
	// weights and the activations), engprof.KVPoolMemFractionStatic
	// (SGLang's: the fraction less the weights),
	// engprof.KVPoolFreeGPUMemFrac (TensorRT-LLM's: the fraction of the
	// memory free after the weights and the activations) or
	// engprof.KVPoolStepCache (the executor's: the whole memory less the
	// weights and the activations, Frac 1).
	Rule string  `json:"rule"`
	Frac float64 `json:"frac"`
	// From says where Frac came from: "given" (Options.GPUMemUtilFrac),
	// the engine's default, or the default's formula with its terms.
	From string `json:"from"`
	// CUDAGraphBytes is the engine's estimate of its CUDA graphs' memory
	// taken off the pool (Options.CUDAGraphMem, given), where its profile
	// deducts one (kv_pool.cuda_graph_estimate) and graphs are captured.
	CUDAGraphBytes float64 `json:"cuda_graph_bytes,omitempty"`
	// GraphFrom says where CUDAGraphBytes came from ("given": the
	// engine's log, Options.CUDAGraphMem).
	GraphFrom string `json:"cuda_graph_from,omitempty"`
	// GraphUnpriced says the engine deducts such an estimate and none was
	// given: tpscope captures no graph, so the pool is priced without it,
	// larger than the engine's by the estimate its log prints.
	GraphUnpriced bool `json:"cuda_graph_estimate_unpriced,omitempty"`
	// IndexerWorkspacePerMaxLen is the profile's
	// kv_pool.indexer_workspace_per_max_len and MaxModelLen the engine's
	// max_model_len (Options.MaxModelLen; 0: the model's): a DSA
	// model's indexer workspace the profiling run reserves comes off the
	// pool with the activations (model.WithIndexerWorkspace).
	IndexerWorkspacePerMaxLen int `json:"indexer_workspace_per_max_len,omitempty"`
	MaxModelLen               int `json:"max_model_len,omitempty"`
	// MoECachesShared says the scenario's MoE kernel takes its
	// intermediate caches from the same workspace buffer
	// (engprof.MoEKernel.WorkspaceCaches; ForScenario).
	MoECachesShared bool `json:"moe_caches_shared,omitempty"`
	// ProfileTokens and ProfileSeqs are the step of vLLM's profiling
	// run, whose activation peak comes off a gpu_memory_utilization pool:
	// a forward of its max_num_batched_tokens and a sampler over
	// min(that, max_num_seqs) rows (gpu_model_runner.py profile_run,
	// _dummy_sampler_run): the scheduler's limits where given
	// (Options.MaxNumBatchedTokens, MaxNumSeqs) or where a simulation
	// resolved them, else the engine's defaults for the GPU (its
	// profile's scheduler.batch_defaults); 0 under the other rules.
	// ProfileTokensFrom and ProfileSeqsFrom say where each came from:
	// "given", or the engine's default.
	ProfileTokens     int    `json:"profile_tokens,omitempty"`
	ProfileSeqs       int    `json:"profile_seqs,omitempty"`
	ProfileTokensFrom string `json:"profile_tokens_from,omitempty"`
	ProfileSeqsFrom   string `json:"profile_seqs_from,omitempty"`
}

// withProfileStep is b with the profiling step of vLLM's rule under prof
// and options o on a GPU of memBytes named devName, for a model served at
// maxModelLen tokens: tokens and seqs where > 0 (a simulation's resolved
// limits), else o's where given, else the engine's defaults as vLLM fills
// them (EngineArgs._set_default_max_num_seqs_and_batched_tokens_args: a
// budget left unset at most max_num_seqs x max_model_len, a running limit
// left unset at most the budget). Other rules, and a profile that states
// no batch defaults with none given, are left as they are.
func (b KVBudget) withProfileStep(prof *engprof.Profile, o Options, tokens, seqs int, memBytes int64, devName string, maxModelLen int) KVBudget {
	if b.Rule != engprof.KVPoolGPUMemUtil {
		return b
	}
	def, _ := prof.Scheduler.DefaultBatch(memBytes, devName)
	tokensFrom, seqsFrom := prof.DefaultFrom(), prof.DefaultFrom()
	if o.MaxNumBatchedTokens > 0 {
		tokens, tokensFrom = o.MaxNumBatchedTokens, "given"
	}
	if o.MaxNumSeqs > 0 {
		seqs, seqsFrom = o.MaxNumSeqs, "given"
	}
	if tokens <= 0 {
		tokens = def.MaxNumBatchedTokens
		if seqs > 0 && maxModelLen > 0 && tokens > 0 {
			tokens = int(min(int64(seqs)*int64(maxModelLen), int64(tokens)))
		}
	}
	if seqs <= 0 {
		seqs = min(def.MaxNumSeqs, tokens)
	}
	if tokens <= 0 {
		return b
	}
	b.ProfileTokens, b.ProfileSeqs, b.ProfileTokensFrom, b.ProfileSeqsFrom = tokens, seqs, tokensFrom, seqsFrom
	return b
}

// GivenBy is b with each figure the options gave ("given") named by its
// option's flag ("given by --gpu-mem-util"), for a line a person reads:
// every verb that prints a pool names its figures one way.
func (b KVBudget) GivenBy() KVBudget {
	for _, f := range []struct {
		from   *string
		option string
	}{{&b.From, "gpu-mem-util"}, {&b.GraphFrom, "cuda-graph-mem-gib"}, {&b.ProfileTokensFrom, "max-num-batched-tokens"}, {&b.ProfileSeqsFrom, "max-num-seqs"}} {
		if *f.from == "given" {
			*f.from = "given by --" + f.option
		}
	}
	return b
}

// ProfileStep is the profiling step in words ("" where the rule runs
// none): "profiling step of 8192 tokens and 1024 sequences, vllm@0.24's
// default", "profiling step of 4096 tokens (given) and 1024 sequences
// (vllm@0.24's default)".
func (b KVBudget) ProfileStep() string {
	if b.ProfileTokens <= 0 {
		return ""
	}
	if b.ProfileTokensFrom == b.ProfileSeqsFrom {
		return fmt.Sprintf("profiling step of %d tokens and %d sequences, %s", b.ProfileTokens, b.ProfileSeqs, b.ProfileTokensFrom)
	}
	return fmt.Sprintf("profiling step of %d tokens (%s) and %d sequences (%s)", b.ProfileTokens, b.ProfileTokensFrom, b.ProfileSeqs, b.ProfileSeqsFrom)
}

// ForScenario is b with what it depends on of sc's kernels: whether the
// MoE kernel the engine runs sc's routed experts with shares the
// workspace buffer of the indexer's profiling workspace (none where the
// profile reserves no such workspace, or the model has no indexer).
func (b KVBudget) ForScenario(prof *engprof.Profile, sc Scenario) KVBudget {
	b.MoECachesShared = false
	a := sc.Arch
	if b.IndexerWorkspacePerMaxLen <= 0 || a == nil || !a.HasIndexer() || a.RoutedExperts == 0 {
		return b
	}
	f, err := engprof.ParseWeightFormat(string(a.Quant.Dtype(model.CompRoutedExperts)))
	if err != nil {
		return b
	}
	if k, err := prof.MoEKernel(archOf(sc.Topo), f, sc.Plan.Normalized().ExpertRanks() > 1, sc.Options.MoEKernel); err == nil {
		b.MoECachesShared = k.WorkspaceCaches
	}
	return b
}

// CUDAGraphMemPublic is the range of vLLM's "Estimated CUDA graph memory"
// in public start-up logs, for the caveat of a pool priced without it:
// 0.17 GiB for a model at TP 4 on RTX 3090s (noonghunna/club-3090 PR #44
// and issue #127, vLLM of 2026-05), 4.77-6.84 GiB for GLM-5.1-NVFP4 on 8x RTX PRO 6000
// (sjug/rtx6kpro models/glm5.1/benchmarks/glm51-v2-full-68b3569f-20260514,
// DCP 1-8, MTP 0-1; 1.22 GiB captured where 4.77 was estimated) and
// 118.65 GiB for a 2.4T model on GB300 (vllm issue #53013, an
// overestimate).
const CUDAGraphMemPublic = "0.17 GiB (a model at TP 4 on RTX 3090s) to 4.77-6.84 GiB (GLM-5.1-NVFP4 on 8x RTX PRO 6000, DCP 1-8) in public logs, 118.65 GiB in one overestimate (vLLM issue #53013)"

// GraphCaveat is the caveat of a pool priced without the engine's
// CUDA-graph estimate (GraphUnpriced), "" when there is none to state.
func (b KVBudget) GraphCaveat() string {
	if !b.GraphUnpriced {
		return ""
	}
	return "KV pool priced without the engine's CUDA-graph memory estimate, which vLLM from 0.21.0 takes off the pool by default (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS; tpscope captures no graph): the pool is larger than the engine's by that estimate, " + CUDAGraphMemPublic + " (fix: --cuda-graph-mem-gib with the 'Estimated CUDA graph memory: X GiB total' the engine's start-up log prints, 0 where VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0)"
}

// Capacity is the model's arithmetic for the budget: its rule's, with
// the indexer workspace the profiling run reserves, less the CUDA-graph
// estimate it takes off the pool.
func (b KVBudget) Capacity() model.CapacityRule {
	return func(a *model.Arch, p model.Plan, w model.Workload, o model.BuildOptions, gpuMemBytes, frac float64) model.Capacity {
		b.Frac = frac
		return b.CapacityOf(a, p, w, o, gpuMemBytes)
	}
}

// CapacityOf is the capacity Capacity's rule gives at the budget's
// fraction, computed at once: the rule, the indexer workspace, then the
// CUDA-graph estimate, with no rule built (a plan sweep prices one a
// configuration).
func (b KVBudget) CapacityOf(a *model.Arch, p model.Plan, w model.Workload, o model.BuildOptions, gpuMemBytes float64) model.Capacity {
	var c model.Capacity
	if b.Rule == engprof.KVPoolGPUMemUtil && b.ProfileTokens > 0 {
		c = model.KVCapacityAt(a, p, w, o, gpuMemBytes, b.Frac, b.ProfileTokens, b.ProfileSeqs)
	} else {
		c = CapacityRule(b.Rule)(a, p, w, o, gpuMemBytes, b.Frac)
	}
	if b.IndexerWorkspacePerMaxLen > 0 {
		c = c.WithIndexerWorkspace(a, p, o, b.IndexerWorkspacePerMaxLen, b.MaxModelLen, b.MoECachesShared, b.ProfileTokens)
	}
	return c.LessCUDAGraphs(b.CUDAGraphBytes)
}

// withWorkspace is b with the profiling-run workspace prof's engine
// reserves (kv_pool.indexer_workspace_per_max_len) at the max_model_len
// of options o.
func withWorkspace(b KVBudget, prof *engprof.Profile, o Options) KVBudget {
	b.IndexerWorkspacePerMaxLen, b.MaxModelLen = prof.KVPool.IndexerWorkspacePerMaxLen, o.MaxModelLen
	return b
}

// withGraphs is b with the CUDA-graph estimate prof's engine takes off
// its pool under options o: none unless the profile deducts one and the
// scenario captures graphs (vLLM profiles them only where cudagraph_mode
// is not NONE), the estimate given, else marked unpriced.
func withGraphs(b KVBudget, prof *engprof.Profile, o Options) KVBudget {
	if !prof.KVPool.CUDAGraphEstimate || !o.CUDAGraphs {
		return b
	}
	if o.CUDAGraphMem.Given {
		b.CUDAGraphBytes, b.GraphFrom = o.CUDAGraphMem.Bytes(), "given"
		return b
	}
	b.GraphUnpriced = true
	return b
}

// String is the budget in one phrase: "mem_fraction_static 0.853,
// sglang@0.5's default: ...", "free_gpu_memory_fraction 0.9 of the memory
// free after weights and activations, trtllm@1.3's default".
func (b KVBudget) String() string {
	if b.Rule == engprof.KVPoolStepCache {
		// No fraction: the whole memory, of which the step's cache
		// takes what it needs.
		return "the whole GPU memory, " + b.From
	}
	of := ""
	if b.Rule == engprof.KVPoolFreeGPUMemFrac {
		// The fraction is not of the GPU's memory, as the others' are.
		of = " of the memory free after weights and activations"
	}
	s := fmt.Sprintf("%s %.3g%s, %s", b.Rule, b.Frac, of, b.From)
	switch {
	case b.CUDAGraphBytes > 0:
		s += fmt.Sprintf(", less %.3g GiB of CUDA graphs (the engine's estimate, %s)", b.CUDAGraphBytes/float64(1<<30), b.GraphFrom)
	case b.GraphUnpriced:
		s += ", less the engine's CUDA-graph estimate, not priced"
	}
	if step := b.ProfileStep(); step != "" {
		s += ", " + step
	}
	return s
}

// NoPool is the refusal of a budget whose fraction is 0 or less: SGLang's
// default mem_fraction_static, round((memory - reserve) / memory, 3)
// (ServerArgs._handle_gpu_memory_settings), where the reserve for the
// step budget's activations, the CUDA graphs and the ranks is the GPU's
// whole memory or more (a 24 GiB GPU at chunked_prefill_size 16384). SGLang
// takes the fraction as it comes, nothing clamps it, and its start-up then
// holds back more than the GPU's memory: ModelRunner's profiling finds no
// memory for the KV pool and stops with "Not enough memory. Please try to
// increase --mem-fraction-static". No pool is sized and nothing is served,
// so no capacity or shortfall of it is a number to print. nil for any
// other budget: a fraction given is in (0, 1] (Options), and the other
// rules' defaults are positive.
func (b KVBudget) NoPool() error {
	if why := b.NoPoolWhy(); why != "" {
		return fmt.Errorf("%s: %w", why, ErrDoesNotFit)
	}
	return nil
}

// NoPoolWhy is NoPool's reason in words ("" when the budget sizes a
// pool), for a footprint to carry.
func (b KVBudget) NoPoolWhy() string {
	if b.Rule != engprof.KVPoolMemFractionStatic || b.Frac > 0 {
		return ""
	}
	return fmt.Sprintf("%s: the reserve is the GPU's whole memory or more, so SGLang starts with no memory for the weights and the KV pool and stops (\"Not enough memory. Please try to increase --mem-fraction-static\"); give the fraction (--gpu-mem-util), or a smaller chunked_prefill_size or cuda_graph_max_bs (--graph-sizes)", b)
}

// PoolLess is what comes off the GPU's memory around the fraction, in
// words: "less the weights and activations".
func (b KVBudget) PoolLess() string {
	switch b.Rule {
	case engprof.KVPoolMemFractionStatic:
		return "that fraction of the GPU's memory less the weights (the activations and graphs are in the reserve)"
	case engprof.KVPoolFreeGPUMemFrac:
		return "that fraction of what the weights and activations leave of the GPU's memory"
	case engprof.KVPoolStepCache:
		return "the GPU's whole memory less the weights and activations"
	}
	if b.CUDAGraphBytes > 0 {
		return "that fraction of the GPU's memory less the weights, activations and the engine's CUDA-graph estimate"
	}
	return "that fraction of the GPU's memory less the weights and activations"
}

// CapacityRule is the model's arithmetic for the engine's KV-pool rule
// (the one place a rule name becomes a capacity); the executor's step
// cache is vLLM's arithmetic at the whole memory (its budget's Frac 1).
func CapacityRule(rule string) model.CapacityRule {
	switch rule {
	case engprof.KVPoolMemFractionStatic:
		return model.KVCapacityStatic
	case engprof.KVPoolFreeGPUMemFrac:
		return model.KVCapacityFree
	}
	return model.KVCapacity
}

// FixedKVBudget is prof's KV-pool budget under options o where it does
// not depend on the scenario: the fraction given (o.GPUMemUtilFrac > 0) or
// the profile's default fraction, vLLM's when it states none, with the
// CUDA-graph estimate the engine takes off the pool (withGraphs). ok is
// false for a default that needs the scenario's step budget, graphs and
// ranks (SGLang's mem_fraction_static).
func FixedKVBudget(prof *engprof.Profile, o Options) (b KVBudget, ok bool) {
	b, ok = fixedFrac(prof, o.GPUMemUtilFrac)
	return withWorkspace(withGraphs(b, prof, o), prof, o), ok
}

// fixedFrac is FixedKVBudget's fraction: given (> 0) or the profile's.
func fixedFrac(prof *engprof.Profile, given float64) (b KVBudget, ok bool) {
	rule := prof.KVPool.KVPoolRule()
	if rule == engprof.KVPoolStepCache {
		// The executor (CheckEngine refuses a fraction given for it).
		return KVBudget{Rule: rule, Frac: 1, From: prof.Name() + " allocates the step's own KV cache, no serving engine's pool"}, true
	}
	if given > 0 {
		return KVBudget{Rule: rule, Frac: given, From: "given"}, true
	}
	if rule == engprof.KVPoolMemFractionStatic {
		return KVBudget{Rule: rule}, false
	}
	if f := prof.KVPool.UtilFrac; f > 0 {
		return KVBudget{Rule: rule, Frac: f, From: prof.DefaultFrom()}, true
	}
	return KVBudget{Rule: rule, Frac: model.DefaultGPUMemUtilization, From: "vLLM's default"}, true
}

// kvBudget is the engine's KV-pool budget for scenario sc on the
// Predictor's GPU (KVBudgetFor).
func (p *Predictor) kvBudget(sc Scenario, w model.Workload, chunkTokens, maxSeqs int) KVBudget {
	return KVBudgetFor(p.cm.prof, p.opts, sc, w, p.dev.MemBytes, p.dev.Name, chunkTokens, maxSeqs)
}

// KVBudgetFor is the KV pool engine prof sizes for scenario sc and
// workload w under options o on a GPU of memBytes named devName: the
// options' fraction when given (GPUMemUtilFrac, vLLM's
// gpu_memory_utilization or SGLang's mem_fraction_static as the engine
// reads it), else the engine's default. chunkTokens is the step's token
// budget (SGLang's chunked_prefill_size, which its default reserves
// activations for, vLLM's max_num_batched_tokens, which its profiling
// forward runs; 0: the engine's default for the GPU) and maxSeqs the
// running limit (vLLM's max_num_seqs, its profiling sampler's rows; 0:
// the default). It is the one path from an engine's rule to its budget:
// a prediction's memory fit (Predictor) and a view that prices no step on
// the box's GPU or another memory (model show) both take it.
func KVBudgetFor(prof *engprof.Profile, o Options, sc Scenario, w model.Workload, memBytes int64, devName string, chunkTokens, maxSeqs int) KVBudget {
	if b, ok := FixedKVBudget(prof, o); ok {
		maxLen := o.MaxModelLen
		if maxLen <= 0 && sc.Arch != nil {
			maxLen = sc.Arch.MaxModelLenTokens
		}
		return b.withProfileStep(prof, o, chunkTokens, maxSeqs, memBytes, devName, maxLen).ForScenario(prof, sc)
	}
	rule := prof.KVPool.KVPoolRule()
	if chunkTokens <= 0 {
		// SGLang's chunked_prefill_size: given, else its default for
		// the GPU.
		chunkTokens = o.MaxNumBatchedTokens
	}
	if chunkTokens <= 0 {
		chunkTokens = prof.Scheduler.DefaultChunkTokens(memBytes)
	}
	plan := sc.Plan.Normalized()
	// cuda_graph_max_bs is the largest captured batch, the one fact the
	// capture list stops at (Options.CaptureSizes: the GPU's tier, or
	// the largest of --graph-sizes, as SGLang's --cuda-graph-bs sets it),
	// counted whether graphs are on or not, as SGLang does.
	graphMaxBS := 0
	if s := o.CaptureSizes(memBytes, plan.World()); len(s) > 0 {
		graphMaxBS = s[len(s)-1]
	}
	in := engprof.StaticFracInput{GPUMemBytes: memBytes, ChunkTokens: chunkTokens, GraphMaxBS: graphMaxBS,
		Ranks: plan.World(), DPAttention: plan.DP, Draft: string(sc.Build.Spec.MethodFor(w))}
	frac, reserved := prof.KVPool.Reserve.StaticFrac(in)
	from := fmt.Sprintf("%s's default: %d MiB GPU less %.0f MiB reserved for chunked_prefill_size %d, cuda_graph_max_bs %d, tp_size %d",
		prof.Name(), memBytes/engprof.MiB, reserved, chunkTokens, graphMaxBS, in.Ranks)
	if in.DPAttention > 1 {
		from += fmt.Sprintf(", dp attention %d", in.DPAttention)
	}
	if in.Draft != "" {
		from += ", draft " + in.Draft
	}
	return withWorkspace(withGraphs(KVBudget{Rule: rule, Frac: frac, From: from}, prof, o), prof, o).ForScenario(prof, sc)
}

// kvCapacity is the KV cache that fits one GPU under budget b.
func (p *Predictor) kvCapacity(sc Scenario, w model.Workload, b KVBudget) model.Capacity {
	return b.CapacityOf(sc.Arch, sc.Plan.Normalized(), w, sc.Build, float64(p.dev.MemBytes))
}

// memoryFit checks that the scenario's weights, activation workspace and
// the KV cache its sequences need fit in one GPU under the engine's
// KV-pool rule (kvBudget: vLLM's gpu_memory_utilization x memory less
// weights and activations, SGLang's mem_fraction_static x memory less
// weights, TensorRT-LLM's free_gpu_memory_fraction x what weights and
// activations leave). The KV cache needed is the real sequences per attention group
// (d.SeqsPerGroup: padding holds no cache) x (context + the step's new
// tokens) x bytes per token per GPU; every rank of a group holds the same
// latent cache (serving-facts.md), divided by DCP.
func (p *Predictor) memoryFit(sc Scenario, d model.Deployment) *MemoryFit {
	return p.memoryFitChunk(sc, d, 0, 0)
}

// MaxConcurrency is how many sequences of w's context (with its
// speculative tokens) the KV capacity m holds over all DP groups of plan:
// the capacity per attention group, each group holding its own
// sequences; 0 when no KV fits.
func (m *MemoryFit) MaxConcurrency(w model.Workload, plan model.Plan) int {
	if m == nil || m.KVCapacityTokens <= 0 {
		return 0
	}
	return int(m.KVCapacityTokens/int64(w.Context+1+w.SpecTokens)) * plan.Normalized().DP
}

// MaxConcurrency is MemoryFit.MaxConcurrency of sc's context under the
// engine's KV-pool rule (the capacity a prediction of sc states; its
// batch does not change it): the load at which the engine's KV cache is
// full.
func (p *Predictor) MaxConcurrency(sc Scenario) int {
	sc.Workload.Batch = 1
	return p.memoryFit(sc, model.NewDeployment(sc.Plan, sc.Workload, nil)).MaxConcurrency(sc.Workload, sc.Plan)
}

// RunningLimit is sc's running limit (Scenario.RunningLimitOf) with the
// KV pool an engine's default is sized by (SGLang's, per DP rank) priced
// as MaxConcurrency prices it: the limit the full load and the swept
// batches stop at.
func (p *Predictor) RunningLimit(sc Scenario) RunningLimit {
	if l := sc.RunningLimitOf(0); l.TotalSeqs > 0 || !l.Default || l.Knob != "max_running_requests" {
		return l
	}
	sc.Workload.Batch = 1
	m := p.memoryFit(sc, model.NewDeployment(sc.Plan, sc.Workload, nil))
	if m == nil {
		return RunningLimit{}
	}
	return sc.RunningLimitOf(m.KVCapacityTokens)
}

// memoryFitChunk is memoryFit for a step budget of chunkTokens and a
// running limit of maxSeqs (0: the engine's defaults).
func (p *Predictor) memoryFitChunk(sc Scenario, d model.Deployment, chunkTokens, maxSeqs int) *MemoryFit {
	w := sc.Workload
	b := p.kvBudget(sc, w, chunkTokens, maxSeqs)
	c := p.kvCapacity(sc, w, b)
	tokens := int64(d.SeqsPerGroup) * int64(w.Context+1+w.SpecTokens)
	m := &MemoryFit{
		DeviceBytes:      p.dev.MemBytes,
		UsableBytes:      int64(c.UsableBytes),
		WeightBytes:      int64(c.WeightBytes),
		ActivationBytes:  int64(c.ActivationBytes),
		CUDAGraphBytes:   int64(c.CUDAGraphBytes),
		KVBytesPerToken:  c.KVBytesPerToken,
		KVBytes:          int64(float64(tokens) * c.KVBytesPerToken),
		KVCapacityTokens: c.KVCapacityTokens,
		KVTokensNeeded:   tokens,
		Budget:           b,
	}
	short := c.WeightsDoNotFitBy
	if tokens > c.KVCapacityTokens {
		short += float64(m.KVBytes) - c.KVBytes
	}
	m.Fits = short <= 0
	if !m.Fits {
		m.ShortfallGB = short / 1e9
	}
	return m
}

// CheckSchedulerLimits refuses, for a verb that sizes the engine's KV pool
// without simulating its scheduler (predict, plan, advise, model show),
// scheduler limits (Options.MaxNumBatchedTokens, MaxNumSeqs) that price
// nothing of sc, limits vLLM refuses at start-up, and a decode batch
// above the running limit given, which the engine never steps
// (RunningLimitSeqs): under vLLM's rule both size its profiling step, and
// a budget below the running limit (either given, the other the engine's
// default for the GPU) is refused as vllm/config/scheduler.py
// SchedulerConfig.verify_max_model_len refuses it; SGLang's default
// mem_fraction_static reserves for its chunked_prefill_size (the budget),
// and a fraction given leaves it no part; its running limit
// (max_running_requests) sizes nothing of the pool but bounds the step's
// batch and is the request pool its capture lists stop at;
// TensorRT-LLM's pool is priced at an assumed step of 8,192 tokens and
// the executor has no scheduler, so neither takes them.
func (sc Scenario) CheckSchedulerLimits() error {
	return sc.CheckSchedulerLimitsOn(0)
}

// CheckSchedulerLimitsOn is CheckSchedulerLimits on a GPU of memBytes
// (0: the box's GPU's): vLLM's default step budget and running limit
// follow the GPU's memory (scheduler.batch_defaults), so a verb that sizes
// the pool at another memory (model show --gpu-mem-gb, KVBudgetFor)
// checks the limits against the defaults of that memory, the ones the
// pool's profiling step takes.
func (sc Scenario) CheckSchedulerLimitsOn(memBytes int64) error {
	o := sc.Options
	if o.MaxNumBatchedTokens == 0 && o.MaxNumSeqs == 0 {
		return nil
	}
	p, err := engprof.Lookup(o.Engine)
	if err != nil {
		return nil // CheckEngine's to refuse
	}
	flag, v := "--max-num-batched-tokens", o.MaxNumBatchedTokens
	if v == 0 {
		flag, v = "--max-num-seqs", o.MaxNumSeqs
	}
	switch p.KVPool.KVPoolRule() {
	case engprof.KVPoolGPUMemUtil:
		var dev *topology.Device
		if sc.Topo != nil {
			dev = sc.Topo.DeviceOf(0)
		}
		if dev == nil {
			return nil
		}
		if memBytes <= 0 {
			memBytes = dev.MemBytes
		}
		maxLen := o.MaxModelLen
		if maxLen <= 0 && sc.Arch != nil {
			maxLen = sc.Arch.MaxModelLenTokens
		}
		b := KVBudget{Rule: engprof.KVPoolGPUMemUtil}.withProfileStep(p, o, 0, 0, memBytes, dev.Name, maxLen)
		if b.ProfileTokens > 0 && b.ProfileTokens < b.ProfileSeqs {
			if o.MaxNumBatchedTokens == 0 {
				flag, v = "--max-num-seqs", o.MaxNumSeqs
			}
			return fmt.Errorf("%s %d: want max_num_batched_tokens (%d, %s) at least max_num_seqs (%d, %s): %s refuses a step budget below its running limit at start-up (vllm/config/scheduler.py verify_max_model_len)",
				flag, v, b.ProfileTokens, b.ProfileTokensFrom, b.ProfileSeqs, b.ProfileSeqsFrom, p.Name())
		}
		return sc.checkRunningLimit(p)
	case engprof.KVPoolMemFractionStatic:
		// Its running limit sizes nothing of the pool, but bounds the
		// step's batch and ends its capture lists (the request pool).
		if err := sc.checkRunningLimit(p); err != nil {
			return err
		}
		if o.MaxNumBatchedTokens == 0 {
			return nil
		}
		if o.GPUMemUtilFrac != 0 {
			return fmt.Errorf("--max-num-batched-tokens %d: with --gpu-mem-util %s's mem_fraction_static is given, and its step budget (--chunked-prefill-size) enters only the default fraction's reserve, so the flag prices nothing here: leave one out (simulate schedules by it)", o.MaxNumBatchedTokens, p.Name())
		}
		return nil
	}
	if !p.Serves() {
		return fmt.Errorf("%s %d: %s has no scheduler, so no step budget or running limit: leave it out", flag, v, p.Name())
	}
	return fmt.Errorf("%s %d: %s's KV pool (%s) is priced at an assumed profiling step of 8,192 tokens, not at the engine's limits, so the flag prices nothing here: leave it out (simulate schedules by it)", flag, v, p.Name(), p.KVPool.KVPoolRule())
}

// RunningLimitSeqs is the most sequences a decode step of sc runs over
// every DP group under the running limit given (Options.MaxNumSeqs), and
// each group's share: vLLM's max_num_seqs is each DP group's scheduler's
// own (N a group); SGLang's max_running_requests is the engine's, each DP
// rank's scheduler running max_running_requests // dp_size
// (scheduler.dp_divides_running). 0, 0 where none is given or the engine
// takes none (TensorRT-LLM, the executor: CheckSchedulerLimits refuses it
// there). The engine's own limit where none is given is RunningLimitOf's.
func (sc Scenario) RunningLimitSeqs() (total, perGroup int) {
	if sc.Options.MaxNumSeqs <= 0 {
		return 0, 0
	}
	l := sc.RunningLimitOf(0)
	return l.TotalSeqs, l.PerGroupSeqs
}

// RunningLimit is the most sequences a decode step runs under the
// engine's running limit: the one given (--max-num-seqs), else the
// engine's default, which the server launched without the flag runs.
type RunningLimit struct {
	// TotalSeqs over every DP group, PerGroupSeqs a scheduler's (DP
	// group's, DP rank's); 0 where the engine has none plan and predict
	// know (TensorRT-LLM, the executor) or its default needs a KV pool
	// that was not given.
	TotalSeqs    int
	PerGroupSeqs int
	// Default: none was given and the limit is the engine's own; Knob
	// names the engine's setting (max_num_seqs, max_running_requests),
	// Engine the engine (vllm@0.24).
	Default bool
	Knob    string
	Engine  string
}

// From says where the limit comes from: "--max-num-seqs 32", or
// "vllm@0.24's default max_num_seqs 256" (a scheduler's).
func (l RunningLimit) From() string {
	if !l.Default {
		return fmt.Sprintf("--max-num-seqs %d", l.PerGroupSeqs)
	}
	return fmt.Sprintf("%s's default %s %d", l.Engine, l.Knob, l.PerGroupSeqs)
}

// RunningLimitOf is the running limit sc's decode step runs under, given
// or the engine's default where none is given, one rule for both:
//
//   - vLLM: max_num_seqs, each DP group's scheduler's own; unset, the
//     default for the GPU (EngineArgs.get_batch_defaults: the profile's
//     scheduler.batch_defaults, 1024 on a GPU of 70 GiB or more not named
//     A100, else 256), at most the step budget
//     (_set_default_max_num_seqs_and_batched_tokens_args): the profiling
//     step's sequences (KVBudget.withProfileStep), the one rule the pool
//     and the serving simulation take.
//   - SGLang: max_running_requests, the engine's, each DP rank running
//     max_running_requests // dp_size (scheduler.dp_divides_running);
//     unset, each rank's own from its KV pool of kvTokens
//     (SchedulerFacts.DefaultMaxRunning at the model's
//     max_position_embeddings, as the serving simulation fills it),
//     none where kvTokens is 0.
//
// The zero RunningLimit for an engine that takes no --max-num-seqs
// (TensorRT-LLM, the executor).
func (sc Scenario) RunningLimitOf(kvTokens int64) RunningLimit {
	o := sc.Options
	p, err := engprof.Lookup(o.Engine)
	if err != nil {
		return RunningLimit{}
	}
	n := o.MaxNumSeqs
	dp := sc.Plan.Normalized().DP
	l := RunningLimit{Default: n <= 0, Engine: p.Name()}
	switch p.KVPool.KVPoolRule() {
	case engprof.KVPoolGPUMemUtil:
		l.Knob = "max_num_seqs"
		if n <= 0 {
			dev, err := sc.gpu()
			if err != nil {
				return RunningLimit{}
			}
			maxLen := o.MaxModelLen
			if maxLen <= 0 && sc.Arch != nil {
				maxLen = sc.Arch.MaxModelLenTokens
			}
			n = KVBudget{Rule: engprof.KVPoolGPUMemUtil}.withProfileStep(p, o, 0, 0, dev.MemBytes, dev.Name, maxLen).ProfileSeqs
		}
		if n <= 0 {
			return RunningLimit{}
		}
		l.TotalSeqs, l.PerGroupSeqs = n*dp, n
	case engprof.KVPoolMemFractionStatic:
		l.Knob = "max_running_requests"
		if n <= 0 {
			// Each rank's own from its pool: no share to take. Without
			// the pool, none yet (Predictor.RunningLimit prices it).
			if kvTokens <= 0 || sc.Arch == nil {
				return l
			}
			n = p.Scheduler.DefaultMaxRunning(kvTokens, sc.Arch.MaxPositionEmbeddings)
			if n <= 0 {
				return l
			}
			l.TotalSeqs, l.PerGroupSeqs = n*dp, n
			return l
		}
		if p.Scheduler.DPDividesRunning && dp > 1 {
			// At least one a rank, as the serving run takes it.
			per := max(1, n/dp)
			l.TotalSeqs, l.PerGroupSeqs = per*dp, per
			return l
		}
		l.TotalSeqs, l.PerGroupSeqs = n*dp, n
	default:
		return RunningLimit{}
	}
	return l
}

// CheckRunningLimitOf is the refusal of a decode step of sc above its
// running limit l (RunningLimitOf): predict's where the limit is given
// (CheckRunningLimit), the same where it is the engine's default, which
// plan leaves such a batch out with (predict prices it with a caveat
// that the server ran with a larger limit).
func (sc Scenario) CheckRunningLimitOf(l RunningLimit) error {
	w, dp := sc.Workload.Normalized(), sc.Plan.Normalized().DP
	if l.TotalSeqs <= 0 || w.Phase != model.Decode || (w.Batch+dp-1)/dp <= l.PerGroupSeqs {
		return nil
	}
	if l.Default {
		return fmt.Errorf("--batch %d: %d sequences a scheduler (DP %d), above %s on this GPU: the server launched without --max-num-seqs never runs a step of more; want a batch of at most %d", w.Batch, (w.Batch+dp-1)/dp, dp, l.From(), l.TotalSeqs)
	}
	share := ""
	if l.PerGroupSeqs != sc.Options.MaxNumSeqs {
		share = fmt.Sprintf(", %d a DP rank (max_running_requests // dp_size)", l.PerGroupSeqs)
	}
	return fmt.Errorf("--batch %d: %d sequences a scheduler (DP %d), above --max-num-seqs %d%s: %s never runs a step of more; want a batch of at most %d", w.Batch, (w.Batch+dp-1)/dp, dp, sc.Options.MaxNumSeqs, share, l.Engine, l.TotalSeqs)
}

// CheckRunningLimit is checkRunningLimit under sc's engine: the refusal
// predict gives a decode batch above the running limit given, which plan
// leaves such a batch out with.
func (sc Scenario) CheckRunningLimit() error {
	p, err := engprof.Lookup(sc.Options.Engine)
	if err != nil {
		return nil // CheckEngine's to refuse
	}
	return sc.checkRunningLimit(p)
}

// checkRunningLimit refuses a decode step of more sequences a scheduler
// (DP group) than the running limit given lets it run (RunningLimitSeqs):
// a step the engine never runs. A batch above the engine's default is
// predicted with a caveat instead (the server ran with a larger limit).
func (sc Scenario) checkRunningLimit(p *engprof.Profile) error {
	if sc.Options.MaxNumSeqs <= 0 {
		return nil
	}
	return sc.CheckRunningLimitOf(sc.RunningLimitOf(0))
}
