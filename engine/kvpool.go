package engine

import (
	"math"
)

// KVPoolFacts are how the engine sizes its KV-cache pool on each GPU
// (Rule). A profile that states none sizes it as vLLM does, at
// DefaultGPUMemUtilFrac.
type KVPoolFacts struct {
	// Rule is KVPoolGPUMemUtil, KVPoolMemFractionStatic,
	// KVPoolFreeGPUMemFrac or KVPoolStepCache.
	Rule string `yaml:"rule"`
	// UtilFrac is the default fraction under KVPoolGPUMemUtil and
	// KVPoolFreeGPUMemFrac.
	UtilFrac float64 `yaml:"util_frac"`
	// Reserve is the default fraction's formula under
	// KVPoolMemFractionStatic.
	Reserve StaticReserve `yaml:"reserve"`
	// CUDAGraphEstimate says the engine takes an estimate of its CUDA
	// graphs' memory off the pool before sizing it, where it captures
	// graphs (vLLM from 0.21.0: Worker.determine_available_memory less
	// GPUModelRunner.profile_cudagraph_memory, on by default through
	// VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS). Only under
	// KVPoolGPUMemUtil. tpscope captures no graph, so the estimate is the
	// one the engine's start-up log prints, given by the user.
	CUDAGraphEstimate bool `yaml:"cuda_graph_estimate"`
	// IndexerWorkspacePerMaxLen is, for a DSA model (GLM-5) run sparse,
	// the entries per token of max_model_len of the indexer's K-gather
	// workspace the engine's profiling run reserves and keeps, so that it
	// comes off the pool with the activations (vLLM:
	// get_max_prefill_buffer_size, max_model_len x 40; model.
	// IndexerWorkspaceBytes); 0: none. Only under KVPoolGPUMemUtil.
	IndexerWorkspacePerMaxLen int      `yaml:"indexer_workspace_per_max_len"`
	Cite                      []string `yaml:"cite"`
}

// The KV-pool rules a profile may state.
const (
	// KVPoolGPUMemUtil is vLLM's gpu_memory_utilization: the pool is
	// the fraction of the GPU's memory less the weights and the peak
	// activations of a profiling forward of max_num_batched_tokens.
	KVPoolGPUMemUtil = "gpu_memory_utilization"
	// KVPoolMemFractionStatic is SGLang's mem_fraction_static: the
	// fraction of the GPU's memory held by the weights and the pool
	// (ModelRunner.profile_max_num_token: the free memory after loading
	// less total x (1 - fraction)), so the pool is fraction x memory less
	// the weights; the activations and CUDA graphs live in the rest,
	// which the default fraction reserves (StaticReserve).
	KVPoolMemFractionStatic = "mem_fraction_static"
	// KVPoolFreeGPUMemFrac is TensorRT-LLM's
	// KvCacheConfig.free_gpu_memory_fraction: the pool is the fraction of
	// the memory still free after the weights load and a profiling
	// forward of max_num_tokens (KvCacheCreator._cal_max_memory: (total -
	// peak) x fraction), so the activations are taken before the fraction,
	// not from the pool as under KVPoolGPUMemUtil.
	KVPoolFreeGPUMemFrac = "free_gpu_memory_fraction"
	// KVPoolStepCache is tpscope's executor: no serving engine's pool and
	// no fraction of the memory held back; it allocates the weights, its
	// activation workspace and the step's own KV cache in the GPU's whole
	// memory, so what fits is the memory less the weights and activations.
	KVPoolStepCache = "step_cache"
)

// kvPoolRules lists the rules for an error.
const kvPoolRules = KVPoolGPUMemUtil + ", " + KVPoolMemFractionStatic + ", " + KVPoolFreeGPUMemFrac + " or " + KVPoolStepCache

// DefaultGPUMemUtilFrac is vLLM's gpu_memory_utilization, the rule of a
// profile that states no kv_pool.
const DefaultGPUMemUtilFrac = 0.9

// StaticReserve is SGLang's default mem_fraction_static
// (ServerArgs._handle_gpu_memory_settings): round((gpu_mem - reserved) /
// gpu_mem, 3) with gpu_mem the GPU's memory in MiB and reserved, in MiB,
//
//	BaseMiB + MiBPerChunkToken x max(chunked_prefill_size, MinChunkTokens)
//	+ MiBPerGraphSeq x cuda_graph_max_bs + MiBPer8Ranks x tp_size x pp_size / 8
//	[DP attention: + DPAttnMiBPerGraphSeqRank x cuda_graph_max_bs x dp_size,
//	 and + DPAttnLargeMiBPerGraphSeqRank x cuda_graph_max_bs x dp_size above
//	 DPAttnLargeGraphBS]
//
// raised to FloorMiB on a GPU of more than FloorAboveMiB, then the draft
// model's DraftMiB (by speculative method) added.
type StaticReserve struct {
	BaseMiB                       float64            `yaml:"base_mib"`
	MiBPerChunkToken              float64            `yaml:"mib_per_chunk_token"`
	MinChunkTokens                int                `yaml:"min_chunk_tokens"`
	MiBPerGraphSeq                float64            `yaml:"mib_per_graph_seq"`
	MiBPer8Ranks                  float64            `yaml:"mib_per_8_ranks"`
	DPAttnMiBPerGraphSeqRank      float64            `yaml:"dp_attention_mib_per_graph_seq_rank"`
	DPAttnLargeGraphBS            int                `yaml:"dp_attention_large_graph_bs"`
	DPAttnLargeMiBPerGraphSeqRank float64            `yaml:"dp_attention_large_mib_per_graph_seq_rank"`
	FloorMiB                      float64            `yaml:"floor_mib"`
	FloorAboveMiB                 float64            `yaml:"floor_above_mib"`
	DraftMiB                      map[string]float64 `yaml:"draft_mib"`
	Digits                        int                `yaml:"digits"`
}

// StaticFracInput is what SGLang's default mem_fraction_static depends
// on.
type StaticFracInput struct {
	GPUMemBytes int64
	// ChunkTokens is chunked_prefill_size (or max_prefill_tokens with
	// chunking off): the step's token budget.
	ChunkTokens int
	// GraphMaxBS is cuda_graph_max_bs, the largest capture size (counted
	// whether graphs are on or not, as SGLang does).
	GraphMaxBS int
	// Ranks is SGLang's tp_size: every GPU of one engine (its DP
	// attention ranks included).
	Ranks int
	// DPAttention is the DP attention size (0 or 1: none).
	DPAttention int
	// Draft is the speculative method ("": none).
	Draft string
}

// StaticFrac is the default fraction and the reserve it leaves, MiB.
func (r *StaticReserve) StaticFrac(in StaticFracInput) (frac, reservedMiB float64) {
	// nvidia-smi reports whole MiB.
	gpuMiB := float64(in.GPUMemBytes / MiB)
	res := r.BaseMiB
	res += r.MiBPerChunkToken * float64(max(in.ChunkTokens, r.MinChunkTokens))
	res += r.MiBPerGraphSeq * float64(in.GraphMaxBS)
	res += r.MiBPer8Ranks * float64(max(1, in.Ranks)) / 8
	if in.DPAttention > 1 {
		res += r.DPAttnMiBPerGraphSeqRank * float64(in.GraphMaxBS*in.DPAttention)
		if in.GraphMaxBS > r.DPAttnLargeGraphBS {
			res += r.DPAttnLargeMiBPerGraphSeqRank * float64(in.GraphMaxBS*in.DPAttention)
		}
	}
	if gpuMiB > r.FloorAboveMiB {
		res = math.Max(res, r.FloorMiB)
	}
	if in.Draft != "" {
		res += r.DraftMiB[in.Draft]
	}
	scale := math.Pow(10, float64(r.Digits))
	// Python's round() on the quotient: ties to even.
	return math.RoundToEven((gpuMiB-res)/gpuMiB*scale) / scale, res
}

// KVPoolRule is the profile's rule ("" stated: vLLM's).
func (k *KVPoolFacts) KVPoolRule() string {
	if k.Rule == "" {
		return KVPoolGPUMemUtil
	}
	return k.Rule
}

// validateKVPool checks the KV pool's rule.
func (p *Profile) validateKVPool(bad func(field, format string, a ...any) error, cite func(string, []string) error) error {
	k := &p.KVPool
	switch k.Rule {
	case "":
		if len(k.Cite) > 0 || k.UtilFrac != 0 || k.CUDAGraphEstimate || k.IndexerWorkspacePerMaxLen != 0 {
			return bad("kv_pool.rule", "missing: want %s", kvPoolRules)
		}
		return nil
	case KVPoolGPUMemUtil, KVPoolFreeGPUMemFrac:
		if !(k.UtilFrac > 0 && k.UtilFrac <= 1) {
			return bad("kv_pool.util_frac", "%v: want a fraction in (0, 1]", k.UtilFrac)
		}
	case KVPoolStepCache:
		if k.UtilFrac != 0 {
			return bad("kv_pool.util_frac", "%v: want none: the step's own cache takes no fraction of the memory", k.UtilFrac)
		}
	case KVPoolMemFractionStatic:
		r := &k.Reserve
		if !(r.BaseMiB >= 0 && r.MiBPerChunkToken > 0 && r.MinChunkTokens >= 0 && r.MiBPerGraphSeq >= 0 && r.MiBPer8Ranks >= 0 &&
			r.DPAttnMiBPerGraphSeqRank >= 0 && r.DPAttnLargeMiBPerGraphSeqRank >= 0 && r.FloorMiB >= 0 && r.FloorAboveMiB >= 0) {
			return bad("kv_pool.reserve", "want MiB and MiB per token >= 0 (mib_per_chunk_token > 0)")
		}
		if r.Digits < 1 || r.Digits > 6 {
			return bad("kv_pool.reserve.digits", "%d: want the decimals the fraction is rounded to, 1 to 6", r.Digits)
		}
		for m, v := range r.DraftMiB {
			if _, ok := p.SpecMethod(m); !ok || v < 0 {
				return bad("kv_pool.reserve.draft_mib", "%s: %v: want a speculative method of the profile and MiB >= 0", m, v)
			}
		}
	default:
		return bad("kv_pool.rule", "%q: want %s", k.Rule, kvPoolRules)
	}
	if k.CUDAGraphEstimate && k.Rule != KVPoolGPUMemUtil {
		return bad("kv_pool.cuda_graph_estimate", "true under %s: want it only under %s, whose pool is the fraction less what the profiling run measured", k.Rule, KVPoolGPUMemUtil)
	}
	if k.IndexerWorkspacePerMaxLen < 0 {
		return bad("kv_pool.indexer_workspace_per_max_len", "%d: want the workspace's entries per token of max_model_len, >= 0", k.IndexerWorkspacePerMaxLen)
	}
	if k.IndexerWorkspacePerMaxLen > 0 && k.Rule != KVPoolGPUMemUtil {
		return bad("kv_pool.indexer_workspace_per_max_len", "%d under %s: want it only under %s, whose pool is the fraction less what the profiling run reserved", k.IndexerWorkspacePerMaxLen, k.Rule, KVPoolGPUMemUtil)
	}
	return cite("kv_pool", k.Cite)
}
