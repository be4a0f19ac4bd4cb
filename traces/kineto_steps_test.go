package traces

import (
	"bytes"
	"context"
	"math"
	"testing"

	"github.com/tpscope/tpscope/traces/internal/kinetogen"
)

func TestParseStepRange(t *testing.T) {
	// Expected values read off each name by hand (formats: kineto_steps.go).
	tests := []struct {
		name string
		ok   bool
		want rangeInfo
	}{
		{"execute_context_0(0)_generation_32(32)", true, rangeInfo{kind: rangeEngine, engine: EngineVLLM, phase: PhaseDecode, genReqs: 32, genTok: 32}},
		{"execute_context_2(8192)_generation_30(30)", true, rangeInfo{kind: rangeEngine, engine: EngineVLLM, phase: PhaseMixed, ctxReqs: 2, ctxTok: 8192, genReqs: 30, genTok: 30}},
		{"execute_context_1(512)_generation_0(0)", true, rangeInfo{kind: rangeEngine, engine: EngineVLLM, phase: PhasePrefill, ctxReqs: 1, ctxTok: 512}},
		{"execute_context_0(0)_generation_0(0)", true, rangeInfo{kind: rangeEngine, engine: EngineVLLM, phase: PhaseIdle}},
		{"execute_context_1(512)_generation_0", false, rangeInfo{}},
		{"execute_context_x(1)_generation_0(0)", false, rangeInfo{}},
		// Real traces' forms (testdata/real): tokens then the sum of
		// sq x sk (888 x 888), and TraceLens' extended form.
		{"execute_context_1(888_788544)_generation_0(0)", true, rangeInfo{kind: rangeEngine, engine: EngineVLLM, phase: PhasePrefill, ctxReqs: 1, ctxTok: 888}},
		{"execute_8192_context_9(sq8155sk8430sqsq7475785sqsk7671310)_generation_37(sq37sk34489sqsq37sqsk34489)", true, rangeInfo{kind: rangeEngine, engine: EngineVLLM, phase: PhaseMixed, ctxReqs: 9, ctxTok: 8155, genReqs: 37, genTok: 37}},
		{"execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk32785sqsq32sqsk32785)", true, rangeInfo{kind: rangeEngine, engine: EngineVLLM, phase: PhaseDecode, genReqs: 32, genTok: 32}},
		{"execute_x_context_0(0)_generation_1(1)", false, rangeInfo{}},
		{"execute_context_1(512x)_generation_0(0)", false, rangeInfo{}},
		{"execute_model", false, rangeInfo{}},
		{"execute_new_3_cached_29", true, rangeInfo{kind: rangeEngine, engine: EngineVLLM, phase: PhaseMixed, ctxReqs: 3, genReqs: 29}},
		{"execute_new_0_cached_8", true, rangeInfo{kind: rangeEngine, engine: EngineVLLM, phase: PhaseDecode, genReqs: 8}},
		{"execute_new_-1_cached_8", false, rangeInfo{}},
		{"step[DECODE bs=32]", true, rangeInfo{kind: rangeEngine, engine: EngineSGLang, phase: PhaseDecode, genReqs: 32, genTok: 32}},
		{"step[EXTEND bs=4 toks=8192]", true, rangeInfo{kind: rangeEngine, engine: EngineSGLang, phase: PhasePrefill, ctxReqs: 4, ctxTok: 8192}},
		{"step[DECODE bs=2 g_sq=2 g_sqsq=2 g_sqsk=30 g_sk=30]", true, rangeInfo{kind: rangeEngine, engine: EngineSGLang, phase: PhaseDecode, genReqs: 2, genTok: 2}},
		{"draft step[DECODE bs=32]", true, rangeInfo{kind: rangeDraft, engine: EngineSGLang, phase: PhaseDecode, genReqs: 32, genTok: 32}},
		{"step[WARP bs=1]", false, rangeInfo{}},
		{"step[DECODE]", false, rangeInfo{}},
		{"[Executor] _forward_step 17: 0 ctx reqs, 32 gen reqs", true, rangeInfo{kind: rangeEngine, engine: EngineTRTLLM, phase: PhaseDecode, genReqs: 32}},
		{"[Executor] _forward_step 3: 2 ctx reqs, 4096 ctx tokens, 6 gen reqs", true, rangeInfo{kind: rangeEngine, engine: EngineTRTLLM, phase: PhaseMixed, ctxReqs: 2, ctxTok: 4096, genReqs: 6}},
		{"[Executor] _forward_step 3: 2 ctx reqs", false, rangeInfo{}},
		{"ProfilerStep#12", true, rangeInfo{kind: rangeProfilerStep, profStep: 12}},
		{"ProfilerStep#-1", false, rangeInfo{}},
		{"gpu_model_runner: forward", false, rangeInfo{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseStepRange([]byte(tc.name))
			if ok != tc.ok || got != tc.want {
				t.Errorf("parseStepRange(%q) = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestParseStepFrame(t *testing.T) {
	tests := []struct {
		name string
		want rangeInfo
		ok   bool
	}{
		{"vllm/v1/worker/gpu_model_runner.py(2907): execute_model", rangeInfo{kind: rangeFrame, engine: EngineVLLM}, true},
		{"/sgl-workspace/sglang/python/sglang/srt/managers/tp_worker.py(445): forward_batch_generation", rangeInfo{kind: rangeFrame, engine: EngineSGLang}, true},
		{"vllm/v1/worker/gpu_model_runner.py(2726): _model_forward", rangeInfo{}, false},
		{"vllm/v1/worker/gpu_worker.py(600): execute_model", rangeInfo{}, false},
		{"sglang/srt/model_executor/model_runner.py(3123): forward", rangeInfo{}, false},
		{"execute_model", rangeInfo{}, false},
	}
	for _, tc := range tests {
		got, ok := parseStepFrame([]byte(tc.name))
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseStepFrame(%q) = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestKernelClasses(t *testing.T) {
	// The flags the placement relies on, by what each kernel does.
	tests := []struct {
		name  string
		class kernelClass
		check func(kernelInfo) bool
	}{
		{"void tensorrt_llm::kernels::ar_fusion::allreduce_fusion_kernel_oneshot_lamport<__nv_bfloat16, 4, true, false>(...)", clsColl, func(k kernelInfo) bool { return k.fusedNorm }},
		{"void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(...)", clsColl, func(k kernelInfo) bool { return !k.fusedNorm }},
		{"void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(...)", clsOther, func(k kernelInfo) bool { return k.lookup }},
		{"void tensorrt_llm::kernels::applyMLARopeAndAssignQKVKernelGeneration<__nv_bfloat16, 256, 512, 64, tensorrt_llm::kernels::KVBlockArray>(...)", clsRope, func(k kernelInfo) bool { return k.ropeCache }},
		{"void vllm::rotary_embedding_kernel<c10::BFloat16, false>(...)", clsRope, func(k kernelInfo) bool { return !k.ropeCache }},
		{"triton_poi_fused__to_copy_add_sigmoid_unsqueeze_0", clsOther, func(k kernelInfo) bool { return k.scoring }},
		{"void get_mla_metadata_kernel<64>(Mla_metadata_params)", clsOther, func(kernelInfo) bool { return true }},
		{"void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16>(...)", clsSplitK, func(kernelInfo) bool { return true }},
		{"void vllm::router_gemm_kernel_bf16_output<__nv_bfloat16, 128, 8, 4, 256, 7168>(...)", clsRouterGEMM, func(kernelInfo) bool { return true }},
		{"void vllm::moe::moe_align_block_size_kernel<int>(...)", clsRouter, func(kernelInfo) bool { return true }},
		{"_moe_sum_reduce_kernel", clsMoEFinalize, func(kernelInfo) bool { return true }},
		{"void tensorrt_llm::kernels::expandInputRowsKernel<__nv_bfloat16>(...)", clsMoEPermute, func(kernelInfo) bool { return true }},
		{"void per_token_group_quant_8bit_kernel<c10::BFloat16, c10::Float8_e4m3fn, true, true, float>(...)", clsQuant, func(kernelInfo) bool { return true }},
	}
	for _, tc := range tests {
		t.Run(truncName(tc.name), func(t *testing.T) {
			k := kernelInfoOf(tc.name)
			if k.class != tc.class || !tc.check(k) {
				t.Errorf("%+v, want class %d and the flag", k, tc.class)
			}
		})
	}
}

// TestKinetoGraphReplaysAreSteps is the case of the issue: a trace of one
// rank without step ranges where the whole forward is a CUDA graph
// replayed twice (one cudaGraphLaunch each, every kernel carrying its
// correlation ID) reads as two steps, each holding exactly its replay's
// kernels; the eager sampler between them belongs to neither.
func TestKinetoGraphReplaysAreSteps(t *testing.T) {
	var buf bytes.Buffer
	w := kinetogen.NewWriter(&buf, kinetogen.Meta{Rank: 0, World: 8, BaseNs: 1764633600000000000, Device: "NVIDIA H200", SM: [2]int{9, 0}})
	var fwd []kinetogen.Kernel
	for l := 0; l < kinetogen.KimiK25.Layers; l++ {
		fwd = append(fwd, kinetogen.VLLMDecodeLayer(l, l == 0, kinetogen.KimiH200Decode32, "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)")...)
	}
	sampler := []kinetogen.Kernel{{Name: "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float>(...)", Us: 3}}
	var wantNs [2]int64
	for replay := 0; replay < 2; replay++ {
		w.Graph(fwd, replay)
		w.Eager(sampler, -1)
		w.SyncGPU()
		w.Idle(200)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, kt := range w.Truth {
		if kt.Step >= 0 {
			wantNs[kt.Step] += kt.DurNs
		}
	}
	res := &Result{Source: "two-replays"}
	if _, err := readBody(context.Background(), &buf, "two-replays", "", res); err != nil {
		t.Fatal(err)
	}
	res.finish()
	kf := res.Kineto[0]
	if kf.StepRule != StepRuleGraphLaunch || len(kf.Steps) != 2 {
		t.Fatalf("rule %s, %d steps; want %s, 2", kf.StepRule, len(kf.Steps), StepRuleGraphLaunch)
	}
	for _, s := range kf.Steps {
		if s.KernelNs != wantNs[s.Step] || s.Kernels != len(fwd) || s.GraphLaunches != 1 {
			t.Errorf("step %d: %d kernels, %d ns, %d launches; want %d, %d, 1", s.Step, s.Kernels, s.KernelNs, s.GraphLaunches, len(fwd), wantNs[s.Step])
		}
		if s.Layers != kinetogen.KimiK25.Layers {
			t.Errorf("step %d: %d layers, want 61 (%s)", s.Step, s.Layers, s.Note)
		}
	}
}

// TestKernelOpTimes: the op time of an op run as several kernels is
// their sum (FlashMLA's split-KV kernel and its combine for
// attn.mla_decode, written as 92 % and 8 % of 54 us with the fixture's
// per-kernel jitter: the check sums what the generator wrote).
func TestKernelOpTimes(t *testing.T) {
	f := kinetogen.Fixtures()[0]
	res, truth := readFixture(t, f)
	want := map[[2]any]float64{}
	for _, kt := range truth {
		if kt.Step >= 0 && kt.Op != "" {
			want[[2]any{kt.Step, kt.Op}] += float64(kt.DurNs) / 1e3
		}
	}
	got := KernelOpTimes(SplitTraces(res.Spans))
	if len(got) != len(want) {
		t.Errorf("%d op times, want %d", len(got), len(want))
	}
	n := 0
	for _, o := range got {
		w := want[[2]any{o.Step, o.OpID}]
		if math.Abs(o.Us-w) > 1e-6 {
			t.Errorf("step %d %s: %.4f us, want %.4f", o.Step, o.OpID, o.Us, w)
		}
		if o.OpID == "L05.attn.mla_decode" && o.Kernels == 2 {
			n++
		}
	}
	if n != 4 {
		t.Errorf("L05.attn.mla_decode as 2 kernels in %d steps, want 4", n)
	}
}
