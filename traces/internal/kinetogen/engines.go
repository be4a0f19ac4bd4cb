package kinetogen

import (
	"fmt"

	"github.com/tpscope/tpscope/model"
)

// Model is a decoder's layer structure (DeepSeek-V3 family: MLA attention,
// the first DenseLayers layers with a dense MLP, the rest MoE with one
// shared expert).
type Model struct {
	Name        string
	Layers      int
	DenseLayers int
}

// Models of the fixtures (model/presets: kimi-k2.5.json, tiny-mla-moe.json).
var (
	KimiK25    = Model{Name: "kimi-k2.5", Layers: 61, DenseLayers: 1}
	TinyMLAMoE = Model{Name: "tiny-mla-moe", Layers: 4, DenseLayers: 1}
)

// Dur is the device time of each op, us, keyed by its role (the op ID
// without the layer), and of the small elementwise kernels the schedule
// has no op for (Glue). A program that runs an op as several kernels
// splits the op's time among them.
type Dur struct {
	Ops  map[model.Role]float64
	Glue float64
}

// KimiH200Decode32 are plausible times for rank 0 of Kimi-K2.5 at TP 8,
// decode batch 32, context 4096, on one H200: the medians over 3 steps of
// the project's own recording (exec/cuda/testdata/h200/
// h200-kimi-k2.5-tp8-rank0-graph.otlp.jsonl.gz, tpscope.device_us per op),
// except where the engines' kernels differ from tpscope's executor:
// attention is FlashMLA's (the cache of 32 x 4096 tokens x 576 values x 2
// bytes = 151 MB at the ~3 TB/s FlashMLA reports memory-bound on H800:
// 50 us, plus its combine), the collectives (skipped in that one-GPU
// recording) are tpscope's predictions for the custom all-reduce of
// 32 x 7168 x 2 bytes and NCCL's all-gather of the logits, and glue
// kernels (adds, copies, fills of a few hundred KB) take 2-3 us, the
// minimum time of a kernel launch on the GPU.
var KimiH200Decode32 = Dur{Glue: 2.5, Ops: map[model.Role]float64{
	model.RoleEmbedLookup: 21.25, model.RoleEmbedAllReduce: 8.0,
	model.RoleInputNorm: 8.45, model.RoleFusedQKVAProj: 16.16, model.RoleQANorm: 4.82, model.RoleKVANorm: 4.70,
	model.RoleQBProj: 8.42, model.RoleWUK: 6.21, model.RoleRope: 4.03, model.RoleKVCacheWrite: 4.00,
	model.RoleMLADecode: 54.0, model.RoleWUV: 6.14, model.RoleOProj: 9.36, model.RoleAttnAllReduce: 8.0,
	model.RoleMoEPostAttnNorm: 8.29, model.RoleMoEGate: 9.89, model.RoleMoETopK: 6.91, model.RoleExpertsGateUp: 96.32,
	model.RoleExpertsAct: 4.98, model.RoleExpertsDown: 52.50, model.RoleSharedGateUp: 10.30, model.RoleSharedAct: 4.29,
	model.RoleSharedDown: 6.72, model.RoleMoEAllReduce: 8.0,
	model.RoleMLPPostAttnNorm: 8.99, model.RoleMLPGateUp: 25.63, model.RoleMLPAct: 5.05, model.RoleMLPDown: 14.02, model.RoleMLPAllReduce: 8.0,
	model.RoleFinalNorm: 6.62, model.RoleLMHead: 79.23, model.RoleLogitsAllGather: 50.46,
}}

// TinyDecode are times for the tiny model: every op near the minimum
// kernel time (the tiny model's ops move a few KB).
var TinyDecode = Dur{Glue: 1.8, Ops: map[model.Role]float64{model.RoleMLADecode: 6.0, model.RoleMLPGateUp: 3.0, model.RoleExpertsGateUp: 4.0, model.RoleExpertsDown: 3.5,
	model.RoleLMHead: 4.0, model.RoleEmbedLookup: 2.6, model.RoleAttnAllReduce: 5.0, model.RoleMoEAllReduce: 5.0, model.RoleMLPAllReduce: 5.0,
	model.RoleEmbedAllReduce: 5.0, model.RoleLogitsAllGather: 6.0, model.RoleMLAPrefill: 30.0}}

func (d Dur) of(op model.Role) float64 {
	if v, ok := d.Ops[op]; ok {
		return v
	}
	return 2.2 // ops a table leaves out run near the minimum kernel time
}

// oid is the op ID of an op outside the layers (the embedding's, the
// head's): its role.
func oid(op model.Role) string { return string(op) }

// lop is the op ID of op in layer l.
func lop(l int, op model.Role) string { return fmt.Sprintf("L%02d.%s", l, op) }

// k makes a kernel implementing op (an op ID) in frac of the op's time.
func k(name, op string, key model.Role, d Dur, frac float64) Kernel {
	return Kernel{Name: name, Op: op, Us: d.of(key) * frac}
}

// glue is a kernel with no schedule op.
func glue(name string, d Dur) Kernel { return Kernel{Name: name, Us: d.Glue} }

// Kernel names, as the engines' kernels are named in profiler traces.
const (
	// vLLM csrc/layernorm_kernels.cu, csrc/activation_kernels.cu,
	// csrc/pos_encoding_kernels.cu, csrc/cache_kernels.cu,
	// csrc/custom_all_reduce.cuh, csrc/moe/*.
	vllmRMSNorm      = "void vllm::rms_norm_kernel<c10::BFloat16, 8, 4>(c10::BFloat16*, c10::BFloat16 const*, long, c10::BFloat16 const*, float, int, int)"
	vllmFusedAddNorm = "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, float, int, int)"
	vllmSiluMul      = "void vllm::act_and_mul_kernel<c10::BFloat16, &(c10::BFloat16 vllm::silu_kernel<c10::BFloat16>(c10::BFloat16 const&)), true>(c10::BFloat16*, c10::BFloat16 const*, int)"
	vllmRotary       = "void vllm::rotary_embedding_kernel<c10::BFloat16, false>(long const*, c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, int, long, long, long, int, int, int)"
	vllmCacheMLA     = "void vllm::concat_and_cache_mla_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(__nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, long const*, int, int, int, int, int, int, float const*)"
	vllmCustomAR8    = "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)"
	vllmCustomAR4    = "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 4>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)"
	vllmGroupedTopk  = "void vllm::moe::grouped_topk_fused_kernel<float, float, int, (vllm::moe::ScoringFunc)1>(float*, float*, int*, float const*, long, long, long, long, long, bool, double)"
	vllmAlign        = "void vllm::moe::moe_align_block_size_kernel<int>(int const*, int*, int*, int*, int, int, int, int, unsigned long, int*)"
	vllmMoeSum       = "void vllm::moe::moe_sum_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16 const*, int)"
	vllmMarlinMoE    = "void marlin_moe_wna16::Marlin<__nv_bfloat16, 4, 8, 8, 8, 4, 8, 256, 8, 8, 4, false, true, 4, false>(int4 const*, int4 const*, int4*, int4*, int4 const*, int4 const*, int const*, int const*, int const*, int const*, float const*, int, bool, int, int, int, int, int, int*, bool, bool, bool, int)"
	// vllm/model_executor/layers/fused_moe/fused_moe.py (Triton).
	tritonFusedMoE = "fused_moe_kernel"
	// FlashMLA (vLLM's FLASHMLA backend on SM90).
	flashMLA        = "void flash::flash_fwd_splitkv_mla_kernel<Flash_fwd_kernel_traits_mla<576, 64, 64, 8, cutlass::bfloat16_t, 512>, true, false>(Flash_fwd_mla_params)"
	flashMLACombine = "void flash::flash_fwd_splitkv_mla_combine_kernel<cutlass::bfloat16_t, float, 512, 64>(Flash_fwd_mla_params)"
	flashMLAMeta    = "void get_mla_metadata_kernel<64>(Mla_metadata_params)"
	// vLLM TRITON_MLA (vllm/attention/ops/triton_decode_attention.py).
	tritonMLA1 = "_fwd_grouped_kernel_stage1"
	tritonMLA2 = "_fwd_kernel_stage2"
	// FlashAttention-3 varlen (vLLM's MLA prefill on SM90).
	fa3Prefill = "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90<2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cute::tuple<cute::C<128>, cute::C<128>, cute::C<192> >, 192, cutlass::bfloat16_t, float, cutlass::arch::Sm90, true, false, false, true, false, false, false, true, false, true, false, false>>>>(...)"
	// cuBLAS / cuBLASLt.
	nvjetA   = "nvjet_tst_128x64_64x8_2x1_v_bz_TNT"
	nvjetB   = "nvjet_tst_64x8_64x16_4x1_v_bz_TNT"
	nvjetC   = "nvjet_tst_192x8_64x10_2x1_v_bz_splitK_TNN"
	splitK   = "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, false, true, false>(cublasLt::cublasSplitKParams<float>, float const*, __nv_bfloat16 const*, __nv_bfloat16*, float const*, float const*, __nv_bfloat16 const*, float const*, __nv_bfloat16*, void*, long, float*, int*)"
	cublasBM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize64x32x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
	// NCCL.
	ncclAllGather = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
	ncclAllReduce = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
	// PyTorch glue.
	torchIndexSelect = "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)"
	torchMaskFill    = "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, bool)#1}, std::array<char*, 3ul> >(int, at::native::(anonymous namespace)::masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#4}::operator()() const::{lambda(c10::BFloat16, bool)#1}, std::array<char*, 3ul>)"
	torchCat         = "void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 3, 64, 64>(at::native::(anonymous namespace)::OpaqueType<2u>*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 64, 64>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)"
	torchCopy        = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(c10::BFloat16)#1} const&)::{lambda(int)#1})"
	torchFillInt     = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>, std::array<char*, 1ul> >(int, at::native::FillFunctor<int>, std::array<char*, 1ul>)"
	torchAdd         = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"
	torchSoftmax     = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)"
	torchArgmax      = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4> >(at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4>)"
	inductorMask     = "triton_poi_fused_add_bitwise_and_ge_lt_mul_sub_0"
	slotMapping      = "_compute_slot_mapping_kernel"
)

// VLLMDecodeLayer is one decoder layer of vLLM's DeepSeek-V2/V3 model
// (vllm/model_executor/models/deepseek_v2.py DeepseekV2DecoderLayer,
// layers/mla.py MultiHeadLatentAttentionWrapper, v1/attention/backends/
// mla/common.py MLACommonImpl._forward_decode with the FLASHMLA backend,
// DeepseekV2MoE with the routed experts in INT4 through Marlin
// (fused_marlin_moe) and the custom all-reduce on 8 NVLink GPUs), as its
// kernels run in decode. ar is the all-reduce kernel's name.
func VLLMDecodeLayer(l int, dense bool, d Dur, ar string) []Kernel {
	inNorm := vllmFusedAddNorm
	if l == 0 {
		inNorm = vllmRMSNorm // no residual before the first layer
	}
	ks := []Kernel{
		k(inNorm, lop(l, model.RoleInputNorm), model.RoleInputNorm, d, 1),
		k(nvjetA, lop(l, model.RoleFusedQKVAProj), model.RoleFusedQKVAProj, d, 1),
		k(vllmRMSNorm, lop(l, model.RoleQANorm), model.RoleQANorm, d, 1),
		k(nvjetB, lop(l, model.RoleQBProj), model.RoleQBProj, d, 1),
		k(vllmRMSNorm, lop(l, model.RoleKVANorm), model.RoleKVANorm, d, 1),
		k(vllmRotary, lop(l, model.RoleRope), model.RoleRope, d, 1),
		k(vllmCacheMLA, lop(l, model.RoleKVCacheWrite), model.RoleKVCacheWrite, d, 1),
		k(cublasBM, lop(l, model.RoleWUK), model.RoleWUK, d, 1),
		glue(torchCat, d), // q = cat(ql_nope, q_pe) for FlashMLA
		k(flashMLA, lop(l, model.RoleMLADecode), model.RoleMLADecode, d, 0.92),
		k(flashMLACombine, lop(l, model.RoleMLADecode), model.RoleMLADecode, d, 0.08),
		k(cublasBM, lop(l, model.RoleWUV), model.RoleWUV, d, 1),
		glue(torchCopy, d), // transpose back after the per-head W_UV
		k(nvjetA, lop(l, model.RoleOProj), model.RoleOProj, d, 1),
		k(ar, lop(l, model.RoleAttnAllReduce), model.RoleAttnAllReduce, d, 1),
	}
	if dense {
		return append(ks,
			k(vllmFusedAddNorm, lop(l, model.RoleMLPPostAttnNorm), model.RoleMLPPostAttnNorm, d, 1),
			k(nvjetA, lop(l, model.RoleMLPGateUp), model.RoleMLPGateUp, d, 1),
			k(vllmSiluMul, lop(l, model.RoleMLPAct), model.RoleMLPAct, d, 1),
			k(nvjetA, lop(l, model.RoleMLPDown), model.RoleMLPDown, d, 1),
			k(ar, lop(l, model.RoleMLPAllReduce), model.RoleMLPAllReduce, d, 1),
		)
	}
	return append(ks,
		k(vllmFusedAddNorm, lop(l, model.RoleMoEPostAttnNorm), model.RoleMoEPostAttnNorm, d, 1),
		k(nvjetB, lop(l, model.RoleMoEGate), model.RoleMoEGate, d, 1),
		// SharedFusedMoE runs the shared expert first.
		k(nvjetB, lop(l, model.RoleSharedGateUp), model.RoleSharedGateUp, d, 1),
		k(vllmSiluMul, lop(l, model.RoleSharedAct), model.RoleSharedAct, d, 1),
		k(nvjetB, lop(l, model.RoleSharedDown), model.RoleSharedDown, d, 1),
		k(vllmGroupedTopk, lop(l, model.RoleMoETopK), model.RoleMoETopK, d, 0.65),
		k(vllmAlign, lop(l, model.RoleMoETopK), model.RoleMoETopK, d, 0.35),
		glue(torchFillInt, d), // Marlin's zeroed workspace
		k(vllmMarlinMoE, lop(l, model.RoleExpertsGateUp), model.RoleExpertsGateUp, d, 1),
		k(vllmSiluMul, lop(l, model.RoleExpertsAct), model.RoleExpertsAct, d, 1),
		k(vllmMarlinMoE, lop(l, model.RoleExpertsDown), model.RoleExpertsDown, d, 0.95),
		k(vllmMoeSum, lop(l, model.RoleExpertsDown), model.RoleExpertsDown, d, 0.05),
		glue(torchAdd, d), // shared + routed
		k(ar, lop(l, model.RoleMoEAllReduce), model.RoleMoEAllReduce, d, 1),
	)
}

// VLLMEmbed is the vocab-parallel embedding (VocabParallelEmbedding: the
// compiled mask, F.embedding's indexSelect, the masked fill) and its
// all-reduce.
func VLLMEmbed(d Dur, ar string) []Kernel {
	return []Kernel{
		k(inductorMask, oid(model.RoleEmbedLookup), model.RoleEmbedLookup, d, 0.2),
		k(torchIndexSelect, oid(model.RoleEmbedLookup), model.RoleEmbedLookup, d, 0.6),
		k(torchMaskFill, oid(model.RoleEmbedLookup), model.RoleEmbedLookup, d, 0.2),
		k(ar, oid(model.RoleEmbedAllReduce), model.RoleEmbedAllReduce, d, 1),
	}
}

// Scenario parameters.
type Scenario struct {
	Model Model
	Dur   Dur
	Rank  int
	World int
	Steps int
	Batch int
	Seed  uint64
	// AllReduce names the all-reduce kernel (default NCCL's).
	AllReduce string
	// PythonEvents per step (with_stack=True traces), written before the
	// launches of the step.
	PythonEvents int
	// More, when set, is asked before each step whether to write it
	// (Steps is then ignored): streams of any length.
	More func(step int) bool
}

func (sc *Scenario) more(s int) bool {
	if sc.More != nil {
		return sc.More(s)
	}
	return s < sc.Steps
}

// jitter scales durations by a deterministic factor in [1-a, 1+a].
type jitter struct{ s uint64 }

func (j *jitter) next(a float64) float64 {
	j.s = j.s*6364136223846793005 + 1442695040888963407
	u := float64(j.s>>11) / float64(1<<53)
	return 1 + a*(2*u-1)
}

func scaled(ks []Kernel, j *jitter) []Kernel {
	out := make([]Kernel, len(ks))
	for i, kk := range ks {
		kk.Us *= j.next(0.03)
		out[i] = kk
	}
	return out
}

func (sc *Scenario) ar() string {
	if sc.AllReduce != "" {
		return sc.AllReduce
	}
	return ncclAllReduce
}

func (sc *Scenario) meta(extra string) Meta {
	return Meta{Rank: sc.Rank, World: sc.World, BaseNs: 1764633600000000000, Device: "NVIDIA H200", SM: [2]int{9, 0}, Extra: extra}
}

// VLLMGraphDecode writes vLLM (V1, FULL CUDA graphs for decode) serving
// steps: per step the execute_context range of Worker.annotate_profile
// around execute_model — input copies, FlashMLA's scheduling metadata and
// the slot mapping eagerly, the model forward (embedding to final norm) as
// one cudaGraphLaunch, the logits (compute_logits: LM head and the
// all-gather of the vocab shards) eagerly — then the sampler
// (sample_tokens) outside the range, and the host's turn.
func VLLMGraphDecode(w *Writer, sc Scenario) {
	j := jitter{sc.Seed + 1}
	m, d := sc.Model, sc.Dur
	name := fmt.Sprintf("execute_context_0(0)_generation_%d(%d)", sc.Batch, sc.Batch)
	var fwd []Kernel
	for s := 0; sc.more(s); s++ {
		ext := w.NextExt()
		lo := w.CPU()
		w.Python(sc.PythonEvents, 3)
		w.CPUOp("aten::copy_", 6)
		w.Memcpy(8*sc.Batch, 1.5)
		w.Memcpy(8*sc.Batch, 1.4)
		g0, _ := w.Eager(scaled([]Kernel{glue(flashMLAMeta, d), glue(slotMapping, d)}, &j), s)
		if fwd == nil {
			fwd = VLLMEmbed(d, sc.ar())
			for l := 0; l < m.Layers; l++ {
				fwd = append(fwd, VLLMDecodeLayer(l, l < m.DenseLayers, d, sc.ar())...)
			}
			fwd = append(fwd, k(vllmRMSNorm, oid(model.RoleFinalNorm), model.RoleFinalNorm, d, 1))
		}
		w.Idle(20)
		w.Graph(scaled(fwd, &j), s)
		w.Eager(scaled([]Kernel{
			k(nvjetC, oid(model.RoleLMHead), model.RoleLMHead, d, 0.94),
			k(splitK, oid(model.RoleLMHead), model.RoleLMHead, d, 0.06),
			k(ncclAllGather, oid(model.RoleLogitsAllGather), model.RoleLogitsAllGather, d, 1),
		}, &j), s)
		hi := w.CPU() + 2
		w.CPURange(name, lo, hi, ext)
		w.GPURange(name, g0, w.GPU(), ext)
		w.Idle(15)
		// sample_tokens: outside the execute range.
		w.Eager(scaled([]Kernel{glue(torchSoftmax, d), glue(torchArgmax, d)}, &j), -1)
		w.SyncGPU()
		w.Idle(180) // scheduler, output processing
	}
}
