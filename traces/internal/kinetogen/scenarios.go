package kinetogen

import (
	"fmt"

	"github.com/tpscope/tpscope/model"
)

// vLLM's prefill layer in three parts: before the attention custom op,
// the op itself (the splitting op of piecewise CUDA graphs: the cache
// write, kv_b_proj and FlashAttention over the prompt), and after it.
func vllmPrefillLayer(l int, dense bool, d Dur, ar string, moe moeKernels) (pre, attn, post []Kernel) {
	inNorm := vllmFusedAddNorm
	if l == 0 {
		inNorm = vllmRMSNorm
	}
	pre = []Kernel{
		k(inNorm, lop(l, model.RoleInputNorm), model.RoleInputNorm, d, 1),
		k(nvjetA, lop(l, model.RoleFusedQKVAProj), model.RoleFusedQKVAProj, d, 1),
		k(vllmRMSNorm, lop(l, model.RoleQANorm), model.RoleQANorm, d, 1),
		k(nvjetB, lop(l, model.RoleQBProj), model.RoleQBProj, d, 1),
		k(vllmRMSNorm, lop(l, model.RoleKVANorm), model.RoleKVANorm, d, 1),
		k(vllmRotary, lop(l, model.RoleRope), model.RoleRope, d, 1),
	}
	attn = []Kernel{
		k(vllmCacheMLA, lop(l, model.RoleKVCacheWrite), model.RoleKVCacheWrite, d, 1),
		k(nvjetA, lop(l, model.RoleKVBProj), model.RoleKVBProj, d, 1),
		k(fa3Prefill, lop(l, model.RoleMLAPrefill), model.RoleMLAPrefill, d, 1),
	}
	post = []Kernel{
		k(nvjetA, lop(l, model.RoleOProj), model.RoleOProj, d, 1),
		k(ar, lop(l, model.RoleAttnAllReduce), model.RoleAttnAllReduce, d, 1),
	}
	return pre, attn, append(post, vllmFFN(l, dense, d, ar, moe)...)
}

// moeKernels names a routed-expert implementation.
type moeKernels struct{ gemm, sum string }

var (
	// Triton fused_moe (bf16 / FP8 models): moe_align_block_size, two
	// fused_moe_kernel launches around silu_and_mul, moe_sum.
	moeTriton = moeKernels{gemm: tritonFusedMoE, sum: vllmMoeSum}
	// Marlin INT4 (compressed-tensors W4A16, Kimi-K2.5's experts).
	moeMarlin = moeKernels{gemm: vllmMarlinMoE, sum: vllmMoeSum}
)

// vllmFFN is the post-attention norm and the dense MLP or MoE of layer l.
func vllmFFN(l int, dense bool, d Dur, ar string, m moeKernels) []Kernel {
	if dense {
		return []Kernel{
			k(vllmFusedAddNorm, lop(l, model.RoleMLPPostAttnNorm), model.RoleMLPPostAttnNorm, d, 1),
			k(nvjetA, lop(l, model.RoleMLPGateUp), model.RoleMLPGateUp, d, 1),
			k(vllmSiluMul, lop(l, model.RoleMLPAct), model.RoleMLPAct, d, 1),
			k(nvjetA, lop(l, model.RoleMLPDown), model.RoleMLPDown, d, 1),
			k(ar, lop(l, model.RoleMLPAllReduce), model.RoleMLPAllReduce, d, 1),
		}
	}
	return []Kernel{
		k(vllmFusedAddNorm, lop(l, model.RoleMoEPostAttnNorm), model.RoleMoEPostAttnNorm, d, 1),
		k(nvjetB, lop(l, model.RoleMoEGate), model.RoleMoEGate, d, 1),
		k(nvjetB, lop(l, model.RoleSharedGateUp), model.RoleSharedGateUp, d, 1),
		k(vllmSiluMul, lop(l, model.RoleSharedAct), model.RoleSharedAct, d, 1),
		k(nvjetB, lop(l, model.RoleSharedDown), model.RoleSharedDown, d, 1),
		k(vllmGroupedTopk, lop(l, model.RoleMoETopK), model.RoleMoETopK, d, 0.65),
		k(vllmAlign, lop(l, model.RoleMoETopK), model.RoleMoETopK, d, 0.35),
		k(m.gemm, lop(l, model.RoleExpertsGateUp), model.RoleExpertsGateUp, d, 1),
		k(vllmSiluMul, lop(l, model.RoleExpertsAct), model.RoleExpertsAct, d, 1),
		k(m.gemm, lop(l, model.RoleExpertsDown), model.RoleExpertsDown, d, 0.95),
		k(m.sum, lop(l, model.RoleExpertsDown), model.RoleExpertsDown, d, 0.05),
		glue(torchAdd, d),
		k(ar, lop(l, model.RoleMoEAllReduce), model.RoleMoEAllReduce, d, 1),
	}
}

// vllmLogits is compute_logits: the LM head and the all-gather of the
// vocab shards.
func vllmLogits(d Dur) []Kernel {
	return []Kernel{
		k(nvjetC, oid(model.RoleLMHead), model.RoleLMHead, d, 0.94),
		k(splitK, oid(model.RoleLMHead), model.RoleLMHead, d, 0.06),
		k(ncclAllGather, oid(model.RoleLogitsAllGather), model.RoleLogitsAllGather, d, 1),
	}
}

func vllmSampler(d Dur) []Kernel { return []Kernel{glue(torchSoftmax, d), glue(torchArgmax, d)} }

// StepKind is what one step of a mixed scenario runs.
type StepKind int

const (
	PrefillPiecewise StepKind = iota // a prefill forward in piecewise CUDA graphs
	DecodeFullGraph                  // a decode forward in one CUDA graph
)

// VLLMPiecewise writes vLLM V1 steps under FULL_AND_PIECEWISE CUDA
// graphs: prefill forwards in pieces split at the attention op (each
// piece one cudaGraphLaunch, the attention op eager between them), decode
// forwards as one graph. ranges: write Worker.annotate_profile's
// execute_context ranges (false: a trace with no step marks).
func VLLMPiecewise(w *Writer, sc Scenario, kinds []StepKind, ranges bool) {
	j := jitter{sc.Seed + 7}
	m, d, ar := sc.Model, sc.Dur, sc.ar()
	for s, kind := range kinds {
		ext := w.NextExt()
		lo := w.CPU()
		// Without ranges, only graph replays (and the attention run eagerly
		// between the pieces of one forward) make a step.
		eagerStep := s
		if !ranges {
			eagerStep = -1
		}
		w.Memcpy(8*sc.Batch, 1.5)
		g0, _ := w.Eager(scaled([]Kernel{glue(slotMapping, d)}, &j), eagerStep)
		name := ""
		switch kind {
		case PrefillPiecewise:
			name = fmt.Sprintf("execute_context_%d(%d)_generation_0(0)", sc.Batch, sc.Batch*512)
			piece := VLLMEmbed(d, ar)
			for l := 0; l < m.Layers; l++ {
				pre, attn, post := vllmPrefillLayer(l, l < m.DenseLayers, d, ar, moeTriton)
				piece = append(piece, pre...)
				w.Graph(scaled(piece, &j), s)
				w.Eager(scaled(attn, &j), s)
				piece = post
			}
			piece = append(piece, k(vllmRMSNorm, oid(model.RoleFinalNorm), model.RoleFinalNorm, d, 1))
			w.Graph(scaled(piece, &j), s)
		case DecodeFullGraph:
			name = fmt.Sprintf("execute_context_0(0)_generation_%d(%d)", sc.Batch, sc.Batch)
			fwd := VLLMEmbed(d, ar)
			for l := 0; l < m.Layers; l++ {
				fwd = append(fwd, VLLMDecodeLayer(l, l < m.DenseLayers, d, ar)...)
			}
			fwd = append(fwd, k(vllmRMSNorm, oid(model.RoleFinalNorm), model.RoleFinalNorm, d, 1))
			w.Graph(scaled(fwd, &j), s)
		}
		w.Eager(scaled(vllmLogits(d), &j), eagerStep)
		if ranges {
			w.CPURange(name, lo, w.CPU()+2, ext)
			w.GPURange(name, g0, w.GPU(), ext)
		}
		w.Idle(10)
		w.Eager(scaled(vllmSampler(d), &j), -1)
		w.SyncGPU()
		w.Idle(150)
	}
}

// VLLMEager writes vLLM steps with --enforce-eager: every kernel launched
// on its own, the sampler inside the range (versions that annotate with
// execute_new_{n}_cached_{m} sample inside execute_model). ranges false: a
// bare eager trace without step marks.
func VLLMEager(w *Writer, sc Scenario, ranges bool) {
	j := jitter{sc.Seed + 13}
	m, d, ar := sc.Model, sc.Dur, sc.ar()
	for s := 0; s < sc.Steps; s++ {
		ext := w.NextExt()
		lo := w.CPU()
		w.Memcpy(8*sc.Batch, 1.5)
		fwd := []Kernel{glue(slotMapping, d)}
		fwd = append(fwd, VLLMEmbed(d, ar)...)
		for l := 0; l < m.Layers; l++ {
			fwd = append(fwd, VLLMDecodeLayer(l, l < m.DenseLayers, d, ar)...)
		}
		fwd = append(fwd, k(vllmRMSNorm, oid(model.RoleFinalNorm), model.RoleFinalNorm, d, 1))
		fwd = append(fwd, vllmLogits(d)...)
		fwd = append(fwd, vllmSampler(d)...)
		g0, _ := w.Eager(scaled(fwd, &j), s)
		name := fmt.Sprintf("execute_new_0_cached_%d", sc.Batch)
		if ranges {
			w.CPURange(name, lo, w.CPU()+2, ext)
			w.GPURange(name, g0, w.GPU(), ext)
		}
		w.SyncGPU()
		w.Idle(400) // the host's turn: scheduling, detokenizing
	}
}

// SGLang kernel names (python/sglang/srt: FlashInfer norms, activation and
// MLA; sgl-kernel's custom all-reduce, top-k and alignment; Triton
// fused_moe and its sum).
const (
	fiFusedAddNorm = "void flashinfer::norm::FusedAddRMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, unsigned int, unsigned int, unsigned int, float, float)"
	fiRMSNorm      = "void flashinfer::norm::RMSNormKernel<8u, __nv_bfloat16>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, unsigned int, unsigned int, unsigned int, float, float)"
	fiSiluMul      = "void flashinfer::activation::act_and_mul_kernel<__nv_bfloat16, &(float silu<float>(float const&))>(__nv_bfloat16*, __nv_bfloat16 const*, int)"
	fiRope         = "void flashinfer::BatchQKApplyRotaryPosIdsCosSinCacheKernel<true, 64u, 8u, 16u, __nv_bfloat16, long>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16*, float*, long*, unsigned int, unsigned int, unsigned int, unsigned int, unsigned long, unsigned long, unsigned long, unsigned long, unsigned long, unsigned long, unsigned long, unsigned long)"
	fiMLA          = "void flashinfer::mla::BatchMLAPagedAttentionKernel<flashinfer::mla::KernelTraits<false, 2u, 2u, 8u, 64u, 64u, 512u, 64u, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, int>, flashinfer::mla::Params<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int> >(flashinfer::mla::Params<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int>)"
	sglSetKV       = "set_mla_kv_buffer_kernel"
	sglAR2         = "void sglang::cross_device_reduce_1stage<__nv_bfloat16, 2>(sglang::RankData*, sglang::RankSignals, sglang::Signal*, __nv_bfloat16*, int, int)"
	sglScore       = "triton_poi_fused__to_copy_add_sigmoid_unsqueeze_0"
	sglTopk1       = "void topk_with_k2_kernel<float>(float*, float const*, int, int)"
	sglTopk2       = "void group_idx_and_topk_idx_kernel<float, int>(float*, float const*, float*, int*, float*, long, long, long, long, long, bool, double)"
	sglAlign       = "void moe_align_block_size_kernel<int>(int*, int*, int*, int*, int, int, int, unsigned long, int*)"
	sglSort        = "void count_and_sort_expert_tokens_kernel<int>(int const*, int*, int*, unsigned long)"
	sglMoeSum      = "_moe_sum_reduce_kernel"
)

// SGLangLayer is one decoder layer of SGLang's DeepseekV2 model
// (python/sglang/srt/models/deepseek_v2.py: DeepseekV2AttentionMLA's
// absorbed decode with the FlashInfer MLA backend; DeepseekV2MoE's
// forward_normal, which runs the shared expert before the router).
func SGLangLayer(l int, dense bool, d Dur, ar string) []Kernel {
	inNorm := fiFusedAddNorm
	if l == 0 {
		inNorm = fiRMSNorm
	}
	ks := []Kernel{
		k(inNorm, lop(l, model.RoleInputNorm), model.RoleInputNorm, d, 1),
		k(nvjetA, lop(l, model.RoleFusedQKVAProj), model.RoleFusedQKVAProj, d, 1),
		k(fiRMSNorm, lop(l, model.RoleQANorm), model.RoleQANorm, d, 1),
		k(fiRMSNorm, lop(l, model.RoleKVANorm), model.RoleKVANorm, d, 1),
		k(nvjetB, lop(l, model.RoleQBProj), model.RoleQBProj, d, 1),
		k(cublasBM, lop(l, model.RoleWUK), model.RoleWUK, d, 1),
		k(fiRope, lop(l, model.RoleRope), model.RoleRope, d, 1),
		k(sglSetKV, lop(l, model.RoleKVCacheWrite), model.RoleKVCacheWrite, d, 1),
		k(fiMLA, lop(l, model.RoleMLADecode), model.RoleMLADecode, d, 1),
		k(cublasBM, lop(l, model.RoleWUV), model.RoleWUV, d, 1),
		glue(torchCopy, d),
		k(nvjetA, lop(l, model.RoleOProj), model.RoleOProj, d, 1),
		k(ar, lop(l, model.RoleAttnAllReduce), model.RoleAttnAllReduce, d, 1),
	}
	if dense {
		return append(ks,
			k(fiFusedAddNorm, lop(l, model.RoleMLPPostAttnNorm), model.RoleMLPPostAttnNorm, d, 1),
			k(nvjetA, lop(l, model.RoleMLPGateUp), model.RoleMLPGateUp, d, 1),
			k(fiSiluMul, lop(l, model.RoleMLPAct), model.RoleMLPAct, d, 1),
			k(nvjetA, lop(l, model.RoleMLPDown), model.RoleMLPDown, d, 1),
			k(ar, lop(l, model.RoleMLPAllReduce), model.RoleMLPAllReduce, d, 1),
		)
	}
	return append(ks,
		k(fiFusedAddNorm, lop(l, model.RoleMoEPostAttnNorm), model.RoleMoEPostAttnNorm, d, 1),
		k(nvjetB, lop(l, model.RoleSharedGateUp), model.RoleSharedGateUp, d, 1),
		k(fiSiluMul, lop(l, model.RoleSharedAct), model.RoleSharedAct, d, 1),
		k(nvjetB, lop(l, model.RoleSharedDown), model.RoleSharedDown, d, 1),
		k(nvjetB, lop(l, model.RoleMoEGate), model.RoleMoEGate, d, 1),
		k(sglScore, lop(l, model.RoleMoETopK), model.RoleMoETopK, d, 0.2),
		k(sglTopk1, lop(l, model.RoleMoETopK), model.RoleMoETopK, d, 0.2),
		k(sglTopk2, lop(l, model.RoleMoETopK), model.RoleMoETopK, d, 0.3),
		k(sglAlign, lop(l, model.RoleMoETopK), model.RoleMoETopK, d, 0.2),
		k(sglSort, lop(l, model.RoleMoETopK), model.RoleMoETopK, d, 0.1),
		k(tritonFusedMoE, lop(l, model.RoleExpertsGateUp), model.RoleExpertsGateUp, d, 1),
		k(fiSiluMul, lop(l, model.RoleExpertsAct), model.RoleExpertsAct, d, 1),
		k(tritonFusedMoE, lop(l, model.RoleExpertsDown), model.RoleExpertsDown, d, 0.95),
		k(sglMoeSum, lop(l, model.RoleExpertsDown), model.RoleExpertsDown, d, 0.05),
		glue(torchAdd, d),
		k(ar, lop(l, model.RoleMoEAllReduce), model.RoleMoEAllReduce, d, 1),
	)
}

// SGLangGraphDecode writes SGLang decode steps: ModelRunner.forward's
// step[DECODE bs=B] range around the CUDA-graph replay of the whole
// forward (CudaGraphRunner captures the model with its logits
// processor), the batch's input copies before it and the sampler after
// it, outside the range.
func SGLangGraphDecode(w *Writer, sc Scenario) {
	j := jitter{sc.Seed + 17}
	m, d, ar := sc.Model, sc.Dur, sc.ar()
	if sc.AllReduce == "" {
		ar = sglAR2
	}
	name := fmt.Sprintf("step[DECODE bs=%d]", sc.Batch)
	for s := 0; s < sc.Steps; s++ {
		w.Memcpy(8*sc.Batch, 1.5)
		w.Eager(scaled([]Kernel{glue(torchCopy, d)}, &j), -1) // ForwardBatch preparation
		ext := w.NextExt()
		lo := w.CPU()
		fwd := VLLMEmbed(d, ar) // VocabParallelEmbedding: the same PyTorch kernels
		for l := 0; l < m.Layers; l++ {
			fwd = append(fwd, SGLangLayer(l, l < m.DenseLayers, d, ar)...)
		}
		fwd = append(fwd,
			k(fiRMSNorm, oid(model.RoleFinalNorm), model.RoleFinalNorm, d, 1),
			k(nvjetC, oid(model.RoleLMHead), model.RoleLMHead, d, 1),
			k(ncclAllGather, oid(model.RoleLogitsAllGather), model.RoleLogitsAllGather, d, 1),
		)
		g0, _ := w.Graph(scaled(fwd, &j), s)
		w.CPURange(name, lo, w.CPU()+1, ext)
		w.GPURange(name, g0, w.GPU(), ext)
		w.Idle(8)
		w.Eager(scaled(vllmSampler(d), &j), -1)
		w.SyncGPU()
		w.Idle(120)
	}
}

// TensorRT-LLM kernel names on SM100 (tensorrt_llm/_torch/models/
// modeling_deepseekv3.py with the all-reduce + RMSNorm fusion, the MLA
// RoPE/cache kernel of cpp/tensorrt_llm/kernels/mlaKernels.cu, trtllm-gen
// attention and the trtllm-gen fused MoE with NVFP4 experts).
const (
	trtARNorm   = "void tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_oneshot_lamport<__nv_bfloat16, 4, true, false>(tensorrt_llm::kernels::ar_fusion::AllReduceFusionParams<__nv_bfloat16>)"
	trtFusedA   = "void tensorrt_llm::kernels::dsv3MinLatencyKernels::fused_a_gemm_kernel<__nv_bfloat16, 128, 4, 16, 8, 2112, 7168, 16>(__nv_bfloat16*, __nv_bfloat16 const*, __nv_bfloat16 const*, int)"
	trtRopeKV   = "void tensorrt_llm::kernels::applyMLARopeAndAssignQKVKernelGeneration<__nv_bfloat16, 256, 512, 64, tensorrt_llm::kernels::KVBlockArray>(__nv_bfloat16*, __nv_bfloat16*, __nv_bfloat16 const*, void*, tensorrt_llm::kernels::KVBlockArray, float2 const*, unsigned long, int, int, int, int, int const*, int const*, int, int*, float const*, float const*, float*, float*)"
	trtFMHA     = "fmhaSm100fKernel_QkvBfloat16OBfloat16HQk576HV512HVPerCta256PagedKvDenseP64MultiCtasKvCgaVarSeqQ16Kv128PersistentSwapsAbForGen"
	trtFMHARed  = "void tensorrt_llm::kernels::fmhaReductionKernel<64, 256, 2, false, true, __nv_bfloat16>(tensorrt_llm::kernels::KernelParams)"
	trtRouting1 = "void moe::dev::routing::routingDeepSeek::routingMainKernel<moe::dev::routing::routingDeepSeek::KernelParams<__nv_bfloat16, float, 256, true> >(moe::dev::routing::routingDeepSeek::KernelParams<__nv_bfloat16, float, 256, true>)"
	trtRouting2 = "void moe::dev::routing::routingDeepSeek::routingIndicesClusterKernel<moe::dev::routing::routingDeepSeek::KernelParams<__nv_bfloat16, float, 256, true> >(moe::dev::routing::routingDeepSeek::KernelParams<__nv_bfloat16, float, 256, true>)"
	trtBmmUp    = "bmm_E2m1_E2m1E2m1_Fp32_t128x8x512u2_s4_et128x8_m128x8x64_cga1x1x1_16dp256b_rM_TN_transOut_schedS_bN_swiGlu_dsFp8_sm100f"
	trtBmmDown  = "bmm_Bfloat16_E2m1E2m1_Fp32_t128x8x512u2_s4_et128x8_m128x8x64_cga1x1x1_16dp256b_rM_TN_transOut_schedS_bN_sm100f"
	trtFinalize = "void moe::dev::finalize::finalizeKernelVecLoad<moe::dev::finalize::KernelParams<__nv_bfloat16, __nv_bfloat16> >(moe::dev::finalize::KernelParams<__nv_bfloat16, __nv_bfloat16>)"
	nvjetSM100  = "nvjet_sm100_tst_64x8_64x16_4x1_v_bz_TNT"
)

// TRTLLMLayer is one decoder layer of TensorRT-LLM's DeepseekV3 model on
// SM100: the all-reduce of each block also applies the RMSNorm after it
// (the next layer's input norm for the MoE all-reduce); the shared expert
// runs on an auxiliary stream; the routed experts' gate/up GEMM applies
// SwiGLU in its epilogue.
func TRTLLMLayer(l, layers int, dense bool, d Dur) []Kernel {
	var ks []Kernel
	if l == 0 {
		ks = append(ks, k(fiRMSNorm, lop(l, model.RoleInputNorm), model.RoleInputNorm, d, 1))
	}
	post := lop(l, model.RoleMoEPostAttnNorm)
	if dense {
		post = lop(l, model.RoleMLPPostAttnNorm)
	}
	ks = append(ks,
		k(trtFusedA, lop(l, model.RoleFusedQKVAProj), model.RoleFusedQKVAProj, d, 1),
		k(fiRMSNorm, lop(l, model.RoleQANorm), model.RoleQANorm, d, 1),
		k(fiRMSNorm, lop(l, model.RoleKVANorm), model.RoleKVANorm, d, 1),
		k(nvjetSM100, lop(l, model.RoleQBProj), model.RoleQBProj, d, 1),
		k(nvjetSM100, lop(l, model.RoleWUK), model.RoleWUK, d, 1),
		fused(trtRopeKV, d, model.RoleRope, lop(l, model.RoleRope), lop(l, model.RoleKVCacheWrite)),
		k(trtFMHA, lop(l, model.RoleMLADecode), model.RoleMLADecode, d, 0.9),
		k(trtFMHARed, lop(l, model.RoleMLADecode), model.RoleMLADecode, d, 0.1),
		k(nvjetSM100, lop(l, model.RoleWUV), model.RoleWUV, d, 1),
		k(nvjetSM100, lop(l, model.RoleOProj), model.RoleOProj, d, 1),
		fused(trtARNorm, d, model.RoleAttnAllReduce, lop(l, model.RoleAttnAllReduce), post),
	)
	next := oid(model.RoleFinalNorm)
	if l+1 < layers {
		next = lop(l+1, model.RoleInputNorm)
	}
	if dense {
		return append(ks,
			k(nvjetSM100, lop(l, model.RoleMLPGateUp), model.RoleMLPGateUp, d, 1),
			k(fiSiluMul, lop(l, model.RoleMLPAct), model.RoleMLPAct, d, 1),
			k(nvjetSM100, lop(l, model.RoleMLPDown), model.RoleMLPDown, d, 1),
			fused(trtARNorm, d, model.RoleMLPAllReduce, lop(l, model.RoleMLPAllReduce), next),
		)
	}
	shared := func(kk Kernel) Kernel { kk.Stream = 23; return kk }
	return append(ks,
		k(nvjetSM100, lop(l, model.RoleMoEGate), model.RoleMoEGate, d, 1),
		k(trtRouting1, lop(l, model.RoleMoETopK), model.RoleMoETopK, d, 0.6),
		k(trtRouting2, lop(l, model.RoleMoETopK), model.RoleMoETopK, d, 0.4),
		fused(trtBmmUp, d, model.RoleExpertsGateUp, lop(l, model.RoleExpertsGateUp), lop(l, model.RoleExpertsAct)),
		shared(k(nvjetSM100, lop(l, model.RoleSharedGateUp), model.RoleSharedGateUp, d, 1)),
		shared(k(fiSiluMul, lop(l, model.RoleSharedAct), model.RoleSharedAct, d, 1)),
		shared(k(nvjetSM100, lop(l, model.RoleSharedDown), model.RoleSharedDown, d, 1)),
		k(trtBmmDown, lop(l, model.RoleExpertsDown), model.RoleExpertsDown, d, 0.9),
		k(trtFinalize, lop(l, model.RoleExpertsDown), model.RoleExpertsDown, d, 0.1),
		fused(trtARNorm, d, model.RoleMoEAllReduce, lop(l, model.RoleMoEAllReduce), next),
	)
}

// fused is a kernel implementing several ops (ops[0] its own), taking the
// time of the op named key.
func fused(name string, d Dur, key model.Role, ops ...string) Kernel {
	return Kernel{Name: name, Us: d.of(key), Op: ops[0], Ops: ops}
}

// TRTLLMGraphDecode writes TensorRT-LLM's PyTorch-backend decode steps as
// its torch trace (TLLM_TORCH_PROFILE_TRACE) holds them: no step range
// (its step marker is an NVTX range), one CUDA-graph replay per step (the
// forward through the logits), input preparation and sampling eager.
func TRTLLMGraphDecode(w *Writer, sc Scenario) {
	j := jitter{sc.Seed + 23}
	m, d := sc.Model, sc.Dur
	for s := 0; s < sc.Steps; s++ {
		w.Memcpy(8*sc.Batch, 1.5)
		w.Eager(scaled([]Kernel{glue(torchFillInt, d), glue(torchCopy, d)}, &j), -1)
		fwd := VLLMEmbed(d, trtARNorm)
		for l := 0; l < m.Layers; l++ {
			fwd = append(fwd, TRTLLMLayer(l, m.Layers, l < m.DenseLayers, d)...)
		}
		fwd = append(fwd,
			k(nvjetSM100, oid(model.RoleLMHead), model.RoleLMHead, d, 1),
			k(ncclAllGather, oid(model.RoleLogitsAllGather), model.RoleLogitsAllGather, d, 1),
		)
		w.Graph(scaled(fwd, &j), s)
		w.Idle(6)
		w.Eager(scaled(vllmSampler(d), &j), -1)
		w.SyncGPU()
		w.Idle(90)
	}
}
