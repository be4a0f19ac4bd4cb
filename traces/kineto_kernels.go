package traces

import (
	"strings"

	"github.com/tpscope/tpscope/model"
)

// Kernel names of the serving engines, and what each family computes.
//
// ClassifyKernel gives a kernel's op kind from its name; kernelClassOf
// refines the matched rule into the class the layer placement
// (kineto_layers.go) works with. Names were checked against the engines'
// sources:
//
//   - vLLM csrc/layernorm_kernels.cu (rms_norm_kernel,
//     fused_add_rms_norm_kernel), csrc/activation_kernels.cu
//     (act_and_mul_kernel with silu_kernel), csrc/pos_encoding_kernels.cu
//     (rotary_embedding_kernel), csrc/cache_kernels.cu
//     (concat_and_cache_mla_kernel, reshape_and_cache_flash_kernel),
//     csrc/moe/topk_softmax_kernels.cu (topkGatingSoftmax),
//     csrc/moe/grouped_topk_kernels.cu (vllm::moe::grouped_topk_fused_kernel),
//     csrc/moe/moe_align_sum_kernels.cu (moe_align_block_size_kernel,
//     count_and_sort_expert_tokens_kernel, moe_sum_kernel),
//     csrc/moe/dsv3_router_gemm.cu (router_gemm_kernel_float_output: the
//     DeepSeek/Kimi router GEMM for 256 or 384 experts),
//     csrc/moe/marlin_moe_wna16/marlin_template.h (marlin_moe_wna16::Marlin,
//     the INT4/INT8 grouped GEMM), csrc/moe/moe_permute_unpermute_op.cu
//     (expandInputRowsKernel / finalizeMoeRoutingKernel, from TensorRT-LLM),
//     csrc/custom_all_reduce.cuh (cross_device_reduce_1stage/2stage),
//     vllm/model_executor/layers/fused_moe/fused_moe.py (Triton
//     fused_moe_kernel), vllm/attention/ops/triton_decode_attention.py
//     (TRITON_MLA: _fwd_grouped_kernel_stage1, _fwd_kernel_stage2),
//     csrc/quantization (per_token_group_quant_8bit_kernel,
//     scaled_fp8_quant_kernel, cvt_fp16_to_fp4).
//   - FlashMLA (flash_fwd_splitkv_mla_kernel, smxx::decode::
//     flash_fwd_mla_combine_kernel, get_mla_metadata_kernel); CUTLASS MLA
//     for SM100 (cutlass::fmha::kernel::Sm100FmhaMlaKernelTmaWarpspecialized
//     and its reduction kernel); FlashInfer include/flashinfer/attention/mla.cuh
//     (flashinfer::mla::BatchMLAPagedAttentionKernel) and the trtllm-gen MLA
//     kernels it ships for SM100 (fmhaSm100fKernel_...), FlashInfer norm and
//     activation kernels (flashinfer::norm::RMSNormKernel,
//     FusedAddRMSNormKernel, flashinfer::activation::act_and_mul_kernel,
//     BatchQKApplyRotaryPosIdsCosSinCacheKernel).
//   - SGLang python/sglang/srt (set_mla_kv_buffer_kernel, moe_fused_gate
//     from sgl-kernel, _moe_sum_reduce_kernel, the same Triton fused_moe and
//     decode-attention kernels as vLLM, sglang::cross_device_reduce_*).
//   - TensorRT-LLM and FlashInfer's trtllm-gen fused MoE for SM100
//     (moe::dev::routing::routingDeepSeek::routingMainKernel,
//     routingIndices*Kernel, moe::dev::activation::activationDeepSeekKernel,
//     moe::dev::finalize::finalizeKernel*, the batched GEMMs bmm_E2m1_...
//     (NVFP4), bmm_E4m3_... (FP8), bmm_Bfloat16_...), the all-reduce +
//     RMSNorm fusion (allreduce_fusion_kernel_oneshot_lamport / twoshot),
//     the CUTLASS MoE path (expandInputRowsKernel, doActivationKernel,
//     finalizeMoeRoutingKernel, fusedBuildExpertMapsSortFirstTokenKernel).
//   - NCCL (ncclDevKernel_<Coll>_<RedOp>_<type>_<algo>_<proto>), cuBLAS and
//     cuBLASLt (nvjet_*, sm90_xmma_*, cublasLt::splitKreduce_kernel),
//     CUTLASS, DeepGEMM (fp8_gemm_kernel, m_grouped_*), Marlin and Machete
//     (mixed-precision dense GEMMs), PyTorch Inductor (triton_red_fused_*
//     with rsqrt is an RMSNorm, triton_poi_fused_* with silu the
//     activation).

// kernelRule is one name rule of ClassifyKernel: the first rule with a
// substring (case-insensitive) in the kernel name wins.
type kernelRule struct {
	name string
	kind model.OpKind
	subs []string
}

// kernelRules are ordered so that specific families come before the
// generic words they contain: "allreduce_fusion" (all-reduce + RMSNorm) is a
// collective, not a norm; "router_gemm" is the router's GEMM, not the top-k;
// "finalizeMoeRouting" is the MoE output reduction, not the router;
// "grouped_topk" is the router, not a grouped GEMM; PyTorch's
// "prepare_grouped_gemm_data" (torch._grouped_mm's argument set-up) belongs
// to the grouped GEMM after it, not a GEMM of its own; "activationDeepSeek"
// is the MoE activation although it lives in a moe:: namespace;
// trtllm-gen's batched GEMMs ("bmm_E2m1...swiGlu") are the MoE GEMM
// although their names mention the fused activation; "concat_and_cache_mla"
// is the KV-cache write, not attention; "applyMLARopeAndAssignQKV" is RoPE;
// "flash_fwd_splitkv_combine" and triton "_fwd_grouped_kernel_stage1" are
// attention; "splitKreduce" belongs to the GEMM before it; "rotary_embedding"
// is RoPE, not the embedding. A word that contains a word checked before it
// (of its own rule or an earlier one) could never decide, and is left out.
var kernelRules = []kernelRule{
	{"nccl", model.KindCollective, []string{"nccldevkernel_", "ncclkernel_", "nccl"}},
	{"custom_allreduce", model.KindCollective, []string{"cross_device_reduce", "custom_all_reduce", "allreduce_fusion", "all_reduce", "allreduce", "oneshot_all", "twoshot_all", "lamport"}},
	{"deepep", model.KindCollective, []string{"deep_ep", "deepep"}},
	{"router_gemm", model.KindGEMM, []string{"router_gemm", "routergemm"}},
	{"gemm_prep", model.KindElementwise, []string{"prepare_grouped_gemm"}},
	{"moe_finalize", model.KindElementwise, []string{"moe_sum", "finalize", "unpermute"}},
	{"moe_permute", model.KindElementwise, []string{"expandinputrows", "moe_permute", "shuffle_rows"}},
	{"router", model.KindRouter, []string{"topk", "top_k", "router", "gating", "moe_align", "align_block_size", "count_and_sort_expert", "moe_fused_gate", "routing", "buildexpertmaps", "compute_problem_sizes", "compute_expert_offsets", "compute_arg_sorts"}},
	{"moe_gemm_tg", model.KindMoEGEMM, []string{"bmm_e2m1", "bmm_e4m3", "bmm_bfloat16", "bmm_mxe"}},
	{"act", model.KindElementwise, []string{"act_and_mul", "silu", "gelu", "swiglu", "activation"}},
	{"kv_cache_write", model.KindElementwise, []string{"reshape_and_cache", "concat_and_cache", "set_mla_kv", "store_kvcache"}},
	{"norm", model.KindNorm, []string{"rms_norm", "rmsnorm", "layernorm", "layer_norm", "norm_kernel", "rsqrt"}},
	{"rope", model.KindElementwise, []string{"rotary", "rope"}},
	{"attention", model.KindAttention, []string{"flash_fwd", "flash_attn", "flash::", "flashmla", "flash_mla", "mla", "attn", "attention", "fmha", "_fwd_kernel_stage", "_fwd_grouped_kernel_stage", "paged", "decode_kernel", "mha_", "xqa"}},
	{"moe_gemm", model.KindMoEGEMM, []string{"fused_moe", "moe", "grouped", "groupproblemshape", "group_gemm", "expert"}},
	{"gemm_splitk", model.KindGEMM, []string{"splitkreduce", "splitk_reduce"}},
	{"gemm", model.KindGEMM, []string{"gemm", "gemv", "cutlass", "cublas", "xmma", "nvjet", "matmul", "s16816", "wgmma", "marlin", "machete"}},
	{"quant", model.KindElementwise, []string{"quant", "cvt_fp16_to_fp4"}},
	{"embedding", model.KindEmbedding, []string{"embedding", "embed"}},
	{"elementwise", model.KindElementwise, []string{"elementwise", "softmax", "reduce_kernel", "copy", "fill", "cat", "index", "argmax", "sampl"}},
}

// ClassifyKernel maps a GPU kernel name to an op kind, the collective it
// performs (for collectives: allreduce, allgather, reducescatter, alltoall,
// or "" when the name does not say) and the rule that matched; names no
// rule knows are elementwise with rule "default".
func ClassifyKernel(name string) (kind model.OpKind, coll model.Collective, rule string) {
	r, coll := classifyRule(name)
	if r == nil {
		return model.KindElementwise, "", "default"
	}
	return r.kind, coll, r.name
}

func classifyRule(name string) (*kernelRule, model.Collective) {
	lower := strings.ToLower(name)
	for i := range kernelRules {
		r := &kernelRules[i]
		for _, s := range r.subs {
			if strings.Contains(lower, s) {
				var coll model.Collective
				if r.kind == model.KindCollective {
					coll = collectiveOf(lower, r.name)
				}
				return r, coll
			}
		}
	}
	return nil, ""
}

func collectiveOf(lower, rule string) model.Collective {
	switch {
	case rule == "custom_allreduce":
		return model.AllReduce
	case rule == "deepep":
		return model.AllToAll
	case strings.Contains(lower, "allreduce") || strings.Contains(lower, "all_reduce"):
		return model.AllReduce
	case strings.Contains(lower, "allgather") || strings.Contains(lower, "all_gather"):
		return model.AllGather
	case strings.Contains(lower, "reducescatter") || strings.Contains(lower, "reduce_scatter"):
		return model.ReduceScatter
	case strings.Contains(lower, "sendrecv") || strings.Contains(lower, "alltoall"):
		return model.AllToAll
	}
	return ""
}

// kernelClass is what the layer placement knows of a kernel: a finer cut
// than the op kind (an all-reduce that also applies the next RMSNorm, the
// router's GEMM, the MoE's permutation and reduction kernels).
type kernelClass uint8

const (
	clsOther       kernelClass = iota // elementwise glue (adds, copies, casts, fills): no schedule op
	clsColl                           // a collective
	clsNorm                           // an RMSNorm (optionally with the residual add)
	clsGEMM                           // a dense GEMM (cuBLAS, CUTLASS, DeepGEMM, Marlin, Machete)
	clsSplitK                         // the split-K reduction of the GEMM before it
	clsRouterGEMM                     // a GEMM kernel made for the MoE router (moe.gate)
	clsMoEGEMM                        // a grouped / batched GEMM over the experts
	clsRouter                         // top-k selection and the routing bookkeeping (sort, align, expert maps)
	clsMoEPermute                     // gathers tokens into expert order for the grouped GEMM
	clsMoEFinalize                    // sums each token's top-k expert outputs (moe_sum, finalize)
	clsAct                            // SiLU/GELU x mul
	clsAttn                           // attention (and its split-KV combine / metadata kernels)
	clsKVWrite                        // writes the new tokens' latents into the KV cache
	clsRope                           // rotary position embedding
	clsQuant                          // quantizes a GEMM's input (FP8 per-token-group, NVFP4)
	clsEmbed                          // the vocabulary embedding lookup
	clsPrep                           // sets up the arguments of the GEMM after it (torch._grouped_mm's prepare_grouped_gemm_data)
)

// kernelInfo is the per-name result the reader caches.
type kernelInfo struct {
	kind  model.OpKind
	coll  model.Collective
	rule  string
	class kernelClass
	// fusedNorm: an all-reduce kernel that also applies the residual add
	// and RMSNorm that follow it (FlashInfer/TensorRT-LLM allreduce_fusion).
	fusedNorm bool
	// lookup: a gather that can be the embedding lookup (PyTorch's
	// indexSelect kernels run F.embedding).
	lookup bool
	// ropeCache: a RoPE kernel that also writes the KV cache
	// (TensorRT-LLM's applyMLARopeAndAssignQKV*).
	ropeCache bool
	// groupQuant: a per-token-group FP8 quantization (vLLM's
	// per_token_group_quant_8bit_kernel, the Triton
	// _per_token_group_quant_fp8 kernels), the input quantization of an
	// FP8 block-scaled Linear.
	groupQuant bool
	// scoring: an elementwise kernel computing sigmoid scores, the
	// router's scoring when it runs before the top-k in a MoE block
	// (DeepSeek/Kimi noaux_tc routing compiled by Inductor:
	// triton_poi_fused_..._sigmoid_...).
	scoring bool

	// What PyTorch's own kernels do, for layers a model runs op by op in
	// PyTorch (no engine kernels: Hugging Face transformers, a plain port;
	// testdata/real/kimi-stack). Their names say the ATen operator, not
	// the model's op; the placement reads them by position
	// (kineto_glue.go).
	//
	// softmax: a softmax kernel (cunn_SoftMaxForward*): between two GEMMs,
	// unfused attention (scores, softmax, probabilities x values).
	softmax bool
	// sort: a sort (bitonicSortKVInPlace, radixSortKVInPlace, cub's radix
	// sort): in a MoE block, the routing's bookkeeping (tokens sorted by
	// expert).
	sort bool
	// gather: an indexed gather (vectorized_gather_kernel, the index
	// kernel of x[idx]): right before the experts' first grouped GEMM,
	// the tokens gathered into expert order.
	gather bool
	// indexCopy: index_copy_ (Hugging Face's StaticCache.update writes the
	// new keys and values with it): in an attention block, the cache write.
	indexCopy bool
	// indexAdd: index_add_ (indexFuncSmallIndex / indexFuncLargeIndex):
	// in a MoE block after the experts, the sum of each token's weighted
	// expert outputs (Hugging Face's DeepseekV3MoE.moe).
	indexAdd bool
	// torchTopK: PyTorch's own top-k (at::native sbtopk / radixSelect):
	// the router written in PyTorch, its scoring and bookkeeping kernels
	// generic ones around it.
	torchTopK bool
	// plainAct: an activation kernel without the multiply (PyTorch's
	// silu_kernel, not act_and_mul): the elementwise multiply after it is
	// the rest of SiLU-and-mul.
	plainAct bool
	// addNorm: a norm kernel that also adds the residual
	// (fused_add_rms_norm, FusedAddRMSNorm); PyTorch's layer/RMS norm
	// kernels do not, so the residual add before them is a kernel of its own.
	addNorm bool
}

var ruleClass = map[string]kernelClass{
	"nccl": clsColl, "custom_allreduce": clsColl, "deepep": clsColl,
	"router_gemm": clsRouterGEMM, "moe_finalize": clsMoEFinalize, "moe_permute": clsMoEPermute,
	"router": clsRouter, "moe_gemm_tg": clsMoEGEMM, "act": clsAct, "kv_cache_write": clsKVWrite,
	"norm": clsNorm, "rope": clsRope, "attention": clsAttn, "moe_gemm": clsMoEGEMM,
	"gemm_splitk": clsSplitK, "gemm": clsGEMM, "quant": clsQuant, "embedding": clsEmbed,
	"elementwise": clsOther, "gemm_prep": clsPrep,
}

func kernelInfoOf(name string) kernelInfo {
	r, coll := classifyRule(name)
	ki := kernelInfo{kind: model.KindElementwise, rule: "default", class: clsOther}
	if r != nil {
		ki = kernelInfo{kind: r.kind, coll: coll, rule: r.name, class: ruleClass[r.name]}
	}
	lower := strings.ToLower(name)
	switch ki.class {
	case clsColl:
		ki.fusedNorm = strings.Contains(lower, "fusion") || strings.Contains(lower, "norm")
	case clsOther:
		ki.lookup = strings.Contains(lower, "indexselect") || strings.Contains(lower, "index_select")
		ki.scoring = strings.Contains(lower, "sigmoid")
		ki.softmax = strings.Contains(lower, "softmax")
		ki.sort = strings.Contains(lower, "sort")
		ki.gather = strings.Contains(lower, "gather_kernel") || strings.Contains(lower, "gpu_index_kernel")
		ki.indexCopy = strings.Contains(lower, "index_copy")
		ki.indexAdd = strings.Contains(lower, "indexfunc") || strings.Contains(lower, "index_add")
	case clsRouter:
		ki.torchTopK = strings.Contains(lower, "at::native")
	case clsAct:
		ki.plainAct = !strings.Contains(lower, "and_mul") && !strings.Contains(lower, "andmul") && !strings.Contains(lower, "swiglu")
	case clsNorm:
		ki.addNorm = strings.Contains(lower, "fused_add") || strings.Contains(lower, "fusedadd") || strings.Contains(lower, "add_rms")
	case clsRope:
		ki.ropeCache = strings.Contains(lower, "cache") || strings.Contains(lower, "assign")
	case clsQuant:
		ki.groupQuant = strings.Contains(lower, "per_token_group")
	case clsAttn:
		// Scheduling metadata for split-KV attention (FlashMLA's
		// get_mla_metadata) runs once per step, not per layer.
		if strings.Contains(lower, "metadata") {
			ki.class = clsOther
		}
	}
	return ki
}

// classify is kernelInfoOf with a per-read cache: a trace repeats a few
// hundred kernel names a million times.
func (o *reader) classify(name string) kernelInfo {
	if o.kinds == nil {
		o.kinds = map[string]kernelInfo{}
	}
	if r, ok := o.kinds[name]; ok {
		return r
	}
	ki := kernelInfoOf(name)
	if len(o.kinds) < 1<<16 {
		o.kinds[name] = ki
	}
	return ki
}
