package traces

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tpscope/tpscope/model"
)

func TestClassifyKernel(t *testing.T) {
	// Expected kinds assigned by hand from what each kernel computes.
	tests := []struct {
		name string
		kind model.OpKind
		coll model.Collective
	}{
		{"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", model.KindCollective, model.AllReduce},
		{"ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", model.KindCollective, model.AllGather},
		{"ncclDevKernel_ReduceScatter_Sum_bf16_RING_SIMPLE", model.KindCollective, model.ReduceScatter},
		{"ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)", model.KindCollective, model.AllToAll},
		{"ncclKernel_AllReduce_RING_LL_Sum_half(ncclWorkElem)", model.KindCollective, model.AllReduce},
		{"void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)", model.KindCollective, model.AllReduce},
		{"void vllm::cross_device_reduce_2stage<__nv_bfloat16, 8>(...)", model.KindCollective, model.AllReduce},
		// torch's symmetric-memory all-reduce kernels, which vLLM runs above
		// its custom all-reduce's cap on NVSwitch boxes (the multimem name
		// as a public vLLM H200 profile's kernel table records it, the
		// two-shot one as a public DCP cost study names it).
		{"void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*, unsigned long, unsigned int**, unsigned long, unsigned long)", model.KindCollective, model.AllReduce},
		{"two_shot_all_reduce_kernel_inplace", model.KindCollective, model.AllReduce},
		{"void flashinfer::trtllm_allreduce_fusion::allreduce_fusion_kernel_oneshot_lamport<__nv_bfloat16, 8>", model.KindCollective, model.AllReduce},
		{"void deep_ep::intranode::dispatch<8, 768, 8192>(...)", model.KindCollective, model.AllToAll},
		{"void vllm::moe::grouped_topk_kernel<float>(float*, ...)", model.KindRouter, ""},
		{"void vllm::moe::topkGatingSoftmax<8, 256, 4, 16>(...)", model.KindRouter, ""},
		{"void vllm::moe::moe_align_block_size_kernel<int>(...)", model.KindRouter, ""},
		{"void vllm::concat_and_cache_mla_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>", model.KindElementwise, ""},
		{"void vllm::reshape_and_cache_flash_kernel<...>", model.KindElementwise, ""},
		{"void flash::flash_fwd_splitkv_mla_kernel<Flash_fwd_kernel_traits_mla<576, 64, 64, 8, cutlass::bfloat16_t, 512>, true>", model.KindAttention, ""},
		{"void flash::flash_fwd_splitkv_mla_combine_kernel<cutlass::bfloat16_t, float, 512, 64>", model.KindAttention, ""},
		{"_fwd_grouped_kernel_stage1", model.KindAttention, ""},
		{"triton_mla_decode_kernel", model.KindAttention, ""},
		{"void flashinfer::BatchDecodeWithPagedKVCacheKernel<...>", model.KindAttention, ""},
		{"fused_moe_kernel", model.KindMoEGEMM, ""},
		{"void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cutlass::gemm::GroupProblemShape<...>>>", model.KindMoEGEMM, ""},
		{"void vllm::moe::moe_sum_kernel<c10::BFloat16, 8>", model.KindElementwise, ""},
		{"void vllm::rms_norm_kernel<c10::BFloat16, 8, 4>(...)", model.KindNorm, ""},
		{"void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(...)", model.KindNorm, ""},
		{"void flashinfer::norm::RMSNormKernel<8u, __nv_bfloat16>(...)", model.KindNorm, ""},
		{"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>", model.KindNorm, ""},
		{"nvjet_tst_64x8_64x16_4x1_v_bz_TNT", model.KindGEMM, ""},
		{"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", model.KindGEMM, ""},
		{"cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>", model.KindGEMM, ""},
		{"void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>", model.KindGEMM, ""},
		{"void deep_gemm::fp8_gemm_kernel<128, 128>", model.KindGEMM, ""},
		{"void deep_gemm::m_grouped_fp8_gemm_nt_contiguous<128, 128>", model.KindMoEGEMM, ""},
		{"void vllm::apply_rope_kernel<c10::BFloat16>", model.KindElementwise, ""},
		{"void vllm::act_and_mul_kernel<c10::BFloat16, &(vllm::silu_kernel<c10::BFloat16>), true>", model.KindElementwise, ""},
		{"void vllm::rotary_embedding_kernel<c10::BFloat16, true>", model.KindElementwise, ""},
		{"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", model.KindElementwise, ""},
		{"some_unknown_kernel_xyz", model.KindElementwise, ""},
		// Engines' MoE, routing and fused kernels (kineto_kernels.go lists
		// the sources): what each computes decides the kind.
		{"void vllm::router_gemm_kernel_float_output<__nv_bfloat16, 128, 8, 16, 384, 7168>(float*, __nv_bfloat16 const*, __nv_bfloat16 const*)", model.KindGEMM, ""},
		{"void vllm::moe::grouped_topk_fused_kernel<float, float, int, (vllm::moe::ScoringFunc)1>(float*, float*, int*, float const*, long, long, long, long, long, bool, double)", model.KindRouter, ""},
		{"void marlin_moe_wna16::Marlin<__nv_bfloat16, 4, 8, 8, 8, 4, 8, 256, 8, 8, 4, false, true, 4, false>(int4 const*)", model.KindMoEGEMM, ""},
		{"void marlin::Marlin<256, 1, 8, 8, 4, 8>(int4 const*, int4 const*, int4*, int4 const*, int, int, int, int*)", model.KindGEMM, ""},
		{"void machete::MacheteKernelTemplate<cutlass::bfloat16_t, vllm::kU4B8>", model.KindGEMM, ""},
		{"void moe::dev::routing::routingDeepSeek::routingMainKernel<moe::dev::routing::routingDeepSeek::KernelParams<__nv_bfloat16, float, 256, true> >(...)", model.KindRouter, ""},
		{"void moe::dev::routing::routingDeepSeek::routingIndicesClusterKernel<...>(...)", model.KindRouter, ""},
		{"void moe::dev::activation::activationDeepSeekKernel<moe::dev::activation::KernelParams<cutlass::float_e4m3_t> >(...)", model.KindElementwise, ""},
		{"void moe::dev::finalize::finalizeKernelVecLoad<moe::dev::finalize::KernelParams<__nv_bfloat16, __nv_bfloat16> >(...)", model.KindElementwise, ""},
		{"bmm_E2m1_E2m1E2m1_Fp32_t128x8x512u2_s4_et128x8_m128x8x64_cga1x1x1_16dp256b_rM_TN_transOut_schedS_bN_swiGlu_dsFp8_sm100f", model.KindMoEGEMM, ""},
		{"bmm_Bfloat16_E2m1E2m1_Fp32_t128x8x512u2_s4_et128x8_m128x8x64_cga1x1x1_16dp256b_rM_TN_transOut_schedS_bN_sm100f", model.KindMoEGEMM, ""},
		{"void tensorrt_llm::kernels::expandInputRowsKernel<__nv_bfloat16, __nv_bfloat16>(...)", model.KindElementwise, ""},
		{"void tensorrt_llm::kernels::finalizeMoeRoutingKernel<__nv_bfloat16, __nv_bfloat16>(...)", model.KindElementwise, ""},
		{"void tensorrt_llm::kernels::applyMLARopeAndAssignQKVKernelGeneration<__nv_bfloat16, 256, 512, 64, tensorrt_llm::kernels::KVBlockArray>(...)", model.KindElementwise, ""},
		{"fmhaSm100fKernel_QkvBfloat16OBfloat16HQk576HV512HVPerCta256PagedKvDenseP64MultiCtasKvCgaVarSeqQ16Kv128PersistentSwapsAbForGen", model.KindAttention, ""},
		{"void cutlass::device_kernel<cutlass::fmha::kernel::Sm100FmhaMlaKernelTmaWarpspecialized<...> >(...)", model.KindAttention, ""},
		{"void flashinfer::mla::BatchMLAPagedAttentionKernel<flashinfer::mla::KernelTraits<false, 2u, 2u, 8u, 64u, 64u, 512u, 64u, __nv_bfloat16, __nv_bfloat16, __nv_bfloat16, float, int>, flashinfer::mla::Params<__nv_bfloat16, __nv_bfloat16, __nv_bfloat16, int> >(...)", model.KindAttention, ""},
		{"void smxx::decode::flash_fwd_mla_combine_kernel<cutlass::bfloat16_t, 512, 8, 160, 256>(...)", model.KindAttention, ""},
		{"_fwd_kernel_stage2", model.KindAttention, ""},
		{"set_mla_kv_buffer_kernel", model.KindElementwise, ""},
		{"void per_token_group_quant_8bit_kernel<c10::BFloat16, c10::Float8_e4m3fn, true, true, float>(c10::BFloat16 const*, void*, float*, int, int, int, float, float, float, int, int)", model.KindElementwise, ""},
		{"void vllm::cvt_fp16_to_fp4<__nv_bfloat16, false>(int, int, long const*, __nv_bfloat16 const*, float const*, unsigned int*, unsigned int*)", model.KindElementwise, ""},
		{"triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", model.KindNorm, ""},
		{"triton_poi_fused_mul_silu_slice_1", model.KindElementwise, ""},
		{"void sglang::cross_device_reduce_1stage<__nv_bfloat16, 8>(sglang::RankData*, sglang::RankSignals, sglang::Signal*, __nv_bfloat16*, int, int)", model.KindCollective, model.AllReduce},
		{"void tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_oneshot_lamport<__nv_bfloat16, 4, true, false>(tensorrt_llm::kernels::ar_fusion::AllReduceFusionParams<__nv_bfloat16>)", model.KindCollective, model.AllReduce},
		{"void moe_fused_gate_kernel<float, 8, 256, 1, 32>(...)", model.KindRouter, ""},
		{"void vllm::moe::count_and_sort_expert_tokens_kernel<int>(...)", model.KindRouter, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name[:min(len(tc.name), 48)], func(t *testing.T) {
			kind, coll, rule := ClassifyKernel(tc.name)
			if kind != tc.kind || coll != tc.coll {
				t.Errorf("ClassifyKernel(%q) = %s/%q (rule %s), want %s/%q", tc.name, kind, coll, rule, tc.kind, tc.coll)
			}
		})
	}
}

// TestKernelRuleWordsDecide: every word of kernelRules, as a kernel name
// of its own, is classified by its rule, so no word is shadowed by an
// earlier rule's (such a word could never decide).
func TestKernelRuleWordsDecide(t *testing.T) {
	for _, r := range kernelRules {
		for _, w := range r.subs {
			if kind, _, rule := ClassifyKernel(w); rule != r.name || kind != r.kind {
				t.Errorf("%q: rule %s (%s), want its own rule %s (%s)", w, rule, kind, r.name, r.kind)
			}
		}
	}
}

// TestKinetoFixture reads the hand-written two-step trace of one rank
// (testdata/kineto_two_steps.json: rank 3 of 8, step 1 eager launches,
// step 2 one cudaGraphLaunch whose kernels run after the CPU-side step
// annotation ends, a warm-up kernel before step 1, one memcpy).
func TestKinetoFixture(t *testing.T) {
	plain, err := os.ReadFile("testdata/kineto_two_steps.json")
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain)
	zw.Close()
	gzPath := filepath.Join(t.TempDir(), "rank3.pt.trace.json.gz")
	if err := os.WriteFile(gzPath, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	// Kinds in kernel order, by hand from the kernel names in the fixture.
	want := map[int][]model.OpKind{
		1: {model.KindNorm, model.KindGEMM, model.KindAttention, model.KindGEMM, model.KindCollective, model.KindNorm,
			model.KindRouter, model.KindMoEGEMM, model.KindElementwise, model.KindElementwise, model.KindCollective},
		2: {model.KindNorm, model.KindGEMM, model.KindAttention, model.KindGEMM, model.KindCollective, model.KindNorm,
			model.KindRouter, model.KindMoEGEMM, model.KindElementwise, model.KindMoEGEMM, model.KindCollective},
	}
	for _, src := range []string{"testdata/kineto_two_steps.json", gzPath} {
		t.Run(filepath.Base(src), func(t *testing.T) {
			res, err := ReadAll(context.Background(), src)
			if err != nil {
				t.Fatal(err)
			}
			if res.Format != FormatKineto {
				t.Errorf("format %q, want %q", res.Format, FormatKineto)
			}
			got := map[int][]model.OpKind{}
			for _, s := range res.Spans {
				if s.Rank != 3 {
					t.Errorf("span %s: rank %d, want 3 (distributedInfo.rank)", s.Name, s.Rank)
				}
				got[s.Step] = append(got[s.Step], model.OpKind(s.OpKind))
				g, _ := s.Attr(string(AttrKinetoGraph))
				if wantGraph := s.Step == 2; g.AsBool() != wantGraph {
					t.Errorf("step %d %s: graph=%v, want %v", s.Step, s.Name, g.AsBool(), wantGraph)
				}
				if s.TraceID != kinetoTraceID(s.Step) {
					t.Errorf("step %d: trace ID %s, want the step's derived ID", s.Step, s.TraceID)
				}
			}
			for step, kinds := range want {
				if strings.Join(kindStrings(got[step]), ",") != strings.Join(kindStrings(kinds), ",") {
					t.Errorf("step %d kinds\n got %v\nwant %v", step, got[step], kinds)
				}
			}
			if len(got) != 2 {
				t.Errorf("steps %v, want 1 and 2 only (warm-up kernel left out)", keys(got))
			}
			// First kernel of step 1: baseTimeNanoseconds + ts 1012.000 µs, dur 4.128 µs.
			first := res.Spans[0]
			for _, s := range res.Spans {
				if s.Step == 1 && s.Seq == 0 {
					first = s
				}
			}
			if wantStart := int64(1764633600000000000 + 1012000); first.Start != wantStart || first.Duration != 4128*time.Nanosecond {
				t.Errorf("first kernel start %d dur %v, want %d and 4.128µs", first.Start, first.Duration, wantStart)
			}
			// Step 2 has two fused_moe_kernel launches: KindSeq 0 and 1.
			var moeSeq []int
			for _, s := range res.Spans {
				if s.Step == 2 && s.OpKind == string(model.KindMoEGEMM) {
					moeSeq = append(moeSeq, s.KindSeq)
				}
			}
			if len(moeSeq) != 2 || moeSeq[0] != 0 || moeSeq[1] != 1 {
				t.Errorf("step 2 moe_gemm KindSeq %v, want [0 1]", moeSeq)
			}
			reasons := skipText(res)
			for _, w := range []string{"1 kernels run outside every ProfilerStep", "1 gpu_memcpy events"} {
				if !strings.Contains(reasons, w) {
					t.Errorf("skip report lacks %q:\n%s", w, reasons)
				}
			}
		})
	}
}

func kindStrings(k []model.OpKind) []string {
	s := make([]string, len(k))
	for i := range k {
		s[i] = string(k[i])
	}
	return s
}

func keys(m map[int][]model.OpKind) []int {
	var k []int
	for x := range m {
		k = append(k, x)
	}
	return k
}

func skipText(r *Result) string {
	var b strings.Builder
	for _, s := range r.Skipped {
		b.WriteString(s.String())
		b.WriteByte('\n')
	}
	return b.String()
}

func TestParseUsToNs(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1012", 1012000, true},
		{"1012.5", 1012500, true},
		{"4.128", 4128, true},
		{"0.0005", 0, true}, // below 1 ns: dropped
		{"1764633600000000.123", 1764633600000000123, true},
		{"-2.5", -2500, true},
		{"1e3", 1000000, true},
		{"abc", 0, false},
		{"1.2x", 0, false},
		{"", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := parseUsToNs([]byte(tc.in))
			if got != tc.want || ok != tc.ok {
				t.Errorf("parseUsToNs(%q) = %d,%v want %d,%v", tc.in, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestKinetoStepsAndDevices: GPU-side ProfilerStep annotations bound
// kernels by their own time; without distributedInfo the rank is the
// device; a bare event array (Chrome "JSON Array Format") reads too.
func TestKinetoStepsAndDevices(t *testing.T) {
	// Device 0: step 5 is [100, 200] µs on the GPU timeline, step 6 is
	// [300, 400]; the kernel at 250 µs lies between the steps. Device 1 has
	// one kernel in step 6. The CPU annotation of step 5 ([0, 50]) must not
	// be used for device kernels once GPU annotations exist.
	doc := `[
 {"ph":"X","cat":"user_annotation","name":"ProfilerStep#5","pid":9,"tid":9,"ts":0,"dur":50},
 {"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#5","pid":0,"tid":7,"ts":100,"dur":100},
 {"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#6","pid":0,"tid":7,"ts":300,"dur":100},
 {"ph":"X","cat":"kernel","name":"nvjet_tst_64x8_64x16_4x1_v_bz_TNT","pid":0,"tid":7,"ts":120.5,"dur":3,"args":{"device":0,"stream":7}},
 {"ph":"X","cat":"kernel","name":"fused_moe_kernel","pid":0,"tid":7,"ts":250,"dur":3,"args":{"device":0}},
 {"ph":"X","cat":"kernel","name":"ncclDevKernel_AllGather_RING_LL","pid":0,"tid":7,"ts":310,"dur":3,"args":{"device":0}},
 {"ph":"X","cat":"kernel","name":"ncclDevKernel_AllGather_RING_LL","pid":1,"tid":7,"ts":320,"dur":3}
]`
	res := &Result{Source: "x"}
	if _, err := readBody(context.Background(), strings.NewReader(doc), "x", "", res); err != nil {
		t.Fatal(err)
	}
	res.finish()
	type got struct {
		kind       string
		step, rank int
	}
	want := []got{{"gemm", 5, 0}, {"collective", 6, 0}, {"collective", 6, 1}}
	var have []got
	for _, s := range res.Spans {
		have = append(have, got{s.OpKind, s.Step, s.Rank})
	}
	if fmt.Sprint(have) != fmt.Sprint(want) {
		t.Errorf("kernels %v, want %v", have, want)
	}
	if !strings.Contains(skipText(res), "1 kernels run outside every ProfilerStep") {
		t.Errorf("the kernel between steps is not reported: %s", skipText(res))
	}
	if v, _ := res.Spans[0].Attr(string(AttrKinetoStream)); v.AsInt() != 7 {
		t.Errorf("stream %v, want 7", v)
	}
}
