package traces

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
)

// scheduleKernels are the kernels an engine runs for one op of
// model.Build's schedule, named as vLLM names them (kinetogen's names,
// from the engines' source); attention runs as FlashMLA's split-KV kernel
// and its combine, the top-k as the grouped top-k and moe_align, the
// experts' down GEMM with moe_sum: several kernels for one op.
func scheduleKernels(op *model.Op, sglangAR bool) []string {
	const (
		norm      = "void vllm::rms_norm_kernel<c10::BFloat16, 8, 4>(c10::BFloat16*, c10::BFloat16 const*, long, c10::BFloat16 const*, float, int, int)"
		addNorm   = "void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, float, int, int)"
		gemm      = "nvjet_tst_64x8_64x16_4x1_v_bz_TNT"
		bmm       = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize64x32x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
		silu      = "void vllm::act_and_mul_kernel<c10::BFloat16, &(c10::BFloat16 vllm::silu_kernel<c10::BFloat16>(c10::BFloat16 const&)), true>(c10::BFloat16*, c10::BFloat16 const*, int)"
		nccl      = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
		ncclGathr = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
	)
	switch op.Name {
	case "lookup":
		return []string{"void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(...)"}
	case "allreduce":
		if sglangAR {
			return []string{"void sglang::cross_device_reduce_1stage<__nv_bfloat16, 8>(sglang::RankData*, sglang::RankSignals, sglang::Signal*, __nv_bfloat16*, int, int)"}
		}
		return []string{nccl}
	case "logits_allgather":
		return []string{ncclGathr}
	case "input_norm", "post_attn_norm":
		if op.Layer == 0 && op.Name == "input_norm" {
			return []string{norm}
		}
		return []string{addNorm}
	case "q_a_norm", "kv_a_norm", "final_norm":
		return []string{norm}
	case "w_uk", "w_uv":
		return []string{bmm}
	case "rope":
		return []string{"void vllm::rotary_embedding_kernel<c10::BFloat16, false>(...)"}
	case "kv_cache_write":
		return []string{"void vllm::concat_and_cache_mla_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(...)"}
	case "mla_decode":
		return []string{"void flash::flash_fwd_splitkv_mla_kernel<Flash_fwd_kernel_traits_mla<576, 64, 64, 8, cutlass::bfloat16_t, 512>, true, false>(Flash_fwd_mla_params)",
			"void flash::flash_fwd_splitkv_mla_combine_kernel<cutlass::bfloat16_t, float, 512, 64>(Flash_fwd_mla_params)"}
	case "mla_prefill":
		return []string{"void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<...>>>(...)"}
	case "topk":
		return []string{"void vllm::moe::grouped_topk_fused_kernel<float, float, int, (vllm::moe::ScoringFunc)1>(...)", "void vllm::moe::moe_align_block_size_kernel<int>(...)"}
	case "experts_gate_up":
		return []string{"fused_moe_kernel"}
	case "experts_down":
		return []string{"fused_moe_kernel", "void vllm::moe::moe_sum_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16 const*, int)"}
	case "experts_act", "shared_act", "act":
		return []string{silu}
	}
	if op.Kind == model.KindGEMM {
		return []string{gemm}
	}
	if strings.HasSuffix(op.Name, "_quant") {
		return []string{"void per_token_group_quant_8bit_kernel<c10::BFloat16, c10::Float8_e4m3fn, true, true, float>(...)"}
	}
	return []string{"unexpected op " + op.ID}
}

// writeScheduleTrace writes rank 0's ops of sched as `steps` eager steps
// in ProfilerStep#N ranges, each op's kernels in schedule order
// (reorder, when set, permutes an MoE block's op names first), and
// returns each kernel's op ID in writing order.
func writeScheduleTrace(t *testing.T, sched *model.Schedule, steps int, reorder func([]model.Op) []model.Op, sglangAR bool) (string, []string) {
	t.Helper()
	ops := sched.Ranks[0]
	if reorder != nil {
		ops = reorder(ops)
	}
	var ev []string
	var want []string
	ts := 1000.0
	for step := 0; step < steps; step++ {
		start := ts
		for i := range ops {
			for _, name := range scheduleKernels(&ops[i], sglangAR) {
				ev = append(ev, fmt.Sprintf(`{"ph":"X","cat":"kernel","name":%q,"pid":0,"tid":7,"ts":%.3f,"dur":2.5,"args":{"device":0,"stream":7}}`, name, ts))
				want = append(want, ops[i].ID)
				ts += 3
			}
		}
		ev = append(ev, fmt.Sprintf(`{"ph":"X","cat":"gpu_user_annotation","name":"ProfilerStep#%d","pid":0,"tid":7,"ts":%.3f,"dur":%.3f}`, step, start-0.1, ts-start+0.2))
		ts += 200
	}
	doc := `{"schemaVersion":1,"distributedInfo":{"backend":"nccl","rank":0,"world_size":8},"traceEvents":[` + strings.Join(ev, ",\n") + "]}"
	path := filepath.Join(t.TempDir(), "rank0.pt.trace.json")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, want
}

// sglangMoEOrder moves each MoE layer's shared expert before its router
// gate, as SGLang's DeepseekV2MoE.forward_normal runs them.
func sglangMoEOrder(ops []model.Op) []model.Op {
	out := slices.Clone(ops)
	for i := range out {
		if out[i].Name != "gate" || out[i].Block != "moe" {
			continue
		}
		var shared []int
		for j := i; j < len(out) && out[j].Layer == out[i].Layer; j++ {
			if strings.HasPrefix(out[j].Name, "shared_") {
				shared = append(shared, j)
			}
		}
		// The shared expert's ops (gate_up, act, down, and with FP8 block
		// weights the input quantizations) run together at the block's end.
		ns := len(shared)
		if ns < 3 || shared[ns-1]-shared[0] != ns-1 {
			continue
		}
		// gate, topk, experts..., shared... -> shared..., gate, topk, experts...
		block := slices.Clone(out[i : shared[ns-1]+1])
		n := copy(out[i:], block[len(block)-ns:])
		copy(out[i+n:], block[:len(block)-ns])
	}
	return out
}

// TestKinetoPlacementMatchesSchedule writes a trace from model.Build's
// own op list (one or more kernels per op, names by role) and checks that
// every kernel is placed on exactly the op it was written for: the role
// rules reproduce the schedule's op order independently of the
// generator's fixtures.
func TestKinetoPlacementMatchesSchedule(t *testing.T) {
	tests := []struct {
		name     string
		model    string
		plan     model.Plan
		work     model.Workload
		reorder  func([]model.Op) []model.Op
		sglangAR bool
	}{
		{"kimi tp8 decode b32", "kimi-k2.5", model.Plan{TP: 8}, model.Workload{Phase: model.Decode, Batch: 32, Context: 4096}, nil, false},
		{"kimi tp8 prefill", "kimi-k2.5", model.Plan{TP: 8}, model.Workload{Phase: model.Prefill, Batch: 1, Context: 1024}, nil, false},
		{"deepseek-v3 tp4 decode sglang order", "deepseek-v3", model.Plan{TP: 4}, model.Workload{Phase: model.Decode, Batch: 8, Context: 2048}, sglangMoEOrder, true},
		{"tiny tp1 decode (no collectives)", "tiny-mla-moe", model.Plan{TP: 1}, model.Workload{Phase: model.Decode, Batch: 4, Context: 512}, nil, false},
		{"tiny tp2 decode", "tiny-mla-moe", model.Plan{TP: 2}, model.Workload{Phase: model.Decode, Batch: 4, Context: 512}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := model.Preset(tc.model)
			if err != nil {
				t.Fatal(err)
			}
			sched, err := model.Build(a, tc.plan, tc.work)
			if err != nil {
				t.Fatal(err)
			}
			path, want := writeScheduleTrace(t, sched, 2, tc.reorder, tc.sglangAR)
			res, err := ReadAll(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Spans) != len(want) {
				t.Fatalf("%d spans, want %d", len(res.Spans), len(want))
			}
			bad := 0
			for i := range res.Spans {
				s := &res.Spans[i]
				w := want[i]
				if s.OpID != w {
					if bad < 8 {
						t.Errorf("kernel %d %q (step %d): op %q, want %q", i, truncName(s.Name), s.Step, s.OpID, w)
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d kernels misplaced; notes: %+v", bad, len(want), res.Kineto[0].Steps)
			}
			for _, st := range res.Kineto[0].Steps {
				if st.Layers != a.Layers || st.PlacedNs != st.KernelNs {
					t.Errorf("step %d: %d layers (want %d), %d of %d ns placed: %s", st.Step, st.Layers, a.Layers, st.PlacedNs, st.KernelNs, st.Note)
				}
			}
		})
	}
}

// TestKinetoPlacementRefuses: steps whose structure is not the layer
// pattern place nothing rather than guess, and say why.
func TestKinetoPlacementRefuses(t *testing.T) {
	const (
		attn = "void flash::flash_fwd_splitkv_mla_kernel<Flash_fwd_kernel_traits_mla<576, 64, 64, 8, cutlass::bfloat16_t, 512>, true, false>(Flash_fwd_mla_params)"
		ar   = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
		gemm = "nvjet_tst_64x8_64x16_4x1_v_bz_TNT"
		norm = "void vllm::rms_norm_kernel<c10::BFloat16, 8, 4>(...)"
	)
	tests := []struct {
		name    string
		kernels []string
		note    string
	}{
		{"no attention", []string{gemm, ar, gemm, ar}, "no attention kernel"},
		// Every segment between all-reduces holds attention: not two
		// all-reduces per layer (the read benchmark's cyclic kernels).
		{"attention in every block", []string{attn, ar, attn, ar, attn, ar, attn, ar}, "attention kernels in the MLP/MoE block"},
		{"one layer", []string{norm, gemm, attn, gemm, ar, norm, gemm, ar}, "1 decoder layer found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var ev []string
			for i, n := range tc.kernels {
				ev = append(ev, fmt.Sprintf(`{"ph":"X","cat":"kernel","name":%q,"ts":%d,"dur":2,"args":{"device":0}}`, n, 100+3*i))
			}
			path := filepath.Join(t.TempDir(), "t.json")
			os.WriteFile(path, []byte("["+strings.Join(ev, ",")+"]"), 0o644)
			res, err := ReadAll(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range res.Spans {
				if s.OpID != "" {
					t.Errorf("%s placed on %s", truncName(s.Name), s.OpID)
				}
			}
			if st := res.Kineto[0].Steps; len(st) != 1 || !strings.Contains(st[0].Note, tc.note) {
				t.Errorf("steps %+v, want one with a note containing %q", st, tc.note)
			}
		})
	}
}
