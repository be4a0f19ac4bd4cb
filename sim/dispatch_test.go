package sim

import (
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

// resolveBox is a preset or a box description ("nvswitch:8xb200").
func resolveBox(t *testing.T, box string) *topology.Topology {
	t.Helper()
	tp, err := topology.Resolve(box, 0)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// dpDispatchOps predicts one decode step of preset on box under DP 8 + EP
// (TP 1) with engine eng and MoE dispatch chosen ("" for the engine's),
// and returns the prediction and the first moe.dispatch and moe.combine
// of rank 0 of the schedule priced.
func dpDispatchOps(t *testing.T, preset, box, eng, chosen string, batch int) (*Prediction, model.Op, model.Op) {
	t.Helper()
	a, err := model.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := engprof.ParseRef(eng)
	if err != nil {
		t.Fatal(err)
	}
	sc := Scenario{Arch: a, Plan: model.Plan{TP: 1, DP: 8, EP: true}, Build: model.BuildOptions{MoEDispatch: chosen},
		Workload: model.Workload{Phase: model.Decode, Batch: batch, Context: 4096},
		Options:  Options{CUDAGraphs: true, Engine: ref}, Topo: resolveBox(t, box)}
	pr, s, err := Predict(sc)
	if err != nil {
		t.Fatal(err)
	}
	var dispatch, combine model.Op
	for _, o := range s.Ranks[0] {
		switch {
		case dispatch.ID == "" && o.Role == model.RoleMoEDispatch:
			dispatch = o
		case combine.ID == "" && o.Role == model.RoleMoECombine:
			combine = o
		}
	}
	if dispatch.ID == "" || combine.ID == "" {
		t.Fatalf("%s %s: no moe.dispatch / moe.combine in the step", preset, eng)
	}
	return pr, dispatch, combine
}

// Under DP attention + EP each engine moves the tokens to the experts
// its own way when nothing is chosen: vLLM 0.24 by its default
// all2all_backend, allgather_reducescatter (ParallelConfig; the
// AgRsAll2AllManager all-gathers the DP group's tokens and
// reduce-scatters the outputs); SGLang 0.5 without --moe-a2a-backend by
// DP attention's MAX_LEN gather (all_gather_into_tensor) and
// reduce_scatter_tensor; TensorRT-LLM 1.3 by its NVLink one-sided
// all-to-all where NVLink joins the GPUs (the communication factory's
// first choice). The executor runs the schedule's all-to-all.
//
// Bytes, by hand (nccl-tests sizes: an all-gather or reduce-scatter
// counts the gathered buffer). DeepSeek-V3 and Kimi-K2.5 have hidden
// 7168 and bf16 activations, 2 B a value. A decode batch of 64 over 8 DP
// groups is 8 tokens a group, a captured graph size of vLLM's, SGLang's
// and TensorRT-LLM's lists alike, so the gathered buffer holds 8 x 8 = 64
// tokens: 64 x 7168 x 2 = 917,504 B, gathered and reduce-scattered
// alike. Batch 8 is one token a group: 8 x 7168 x 2 = 114,688 B.
//
// The all-to-all sends each of a rank's 8 tokens once to each distinct
// rank its top-8 experts live on: DeepSeek-V3's 256 experts are 32 a rank
// on 8 ranks; a token's 8 experts, drawn without replacement, all miss a
// given rank with probability (224/256)(223/255)...(217/249) = 0.33817,
// so it reaches 8 x (1 - 0.33817) = 5.2947 ranks: 8 x 5.2947 x 7168 x 2
// = 607,233 B each way.
//
// vLLM quantizes the activations to its experts' input format before the
// all-gather and gathers the scales with them (naive_dp_ep.py
// _quantize_and_setup_dispatch); the reduce-scatter moves the experts'
// bf16 outputs. DeepSeek-V3's FP8 block-128 experts run FlashInfer's
// trtllm-gen MoE on B200, which takes FP8 values and one FP32 scale per
// 128 of a token: 7168 x 1 + 7168 / 128 x 4 = 7168 + 224 = 7,392 B a
// token, 64 x 7,392 = 473,088 B gathered. On H200 under EP they run
// FlashInfer's CUTLASS MoE (vLLM's FP8 oracle on Hopper, ep_size > 1),
// which quantizes block-scaled FP8 inputs itself (FlashInferExperts
// defers them), so the gather moves bf16: 917,504 B. Kimi-K2.5-NVFP4 on RTX PRO 6000 (SM120, FlashInfer CUTLASS)
// takes NVFP4: 7168 / 2 + 7168 / 16 = 3,584 + 448 = 4,032 B a token,
// 8 x 4,032 = 32,256 B; on H200 its experts run Marlin (weight-only FP4),
// which takes bf16 activations: 8 x 7168 x 2 = 114,688 B. Kimi-K2.5's
// INT4 experts run Marlin everywhere: bf16.
func TestEngineDefaultDispatch(t *testing.T) {
	const hidden = 7168
	miss := 1.0
	for i := 0.0; i < 8; i++ {
		miss *= (224 - i) / (256 - i)
	}
	a2a := int64(8*8*(1-miss)*hidden*2 + 0.5)
	if a2a != 607233 {
		t.Fatalf("the all-to-all's bytes come to %d, not the 607,233 derived above", a2a)
	}
	for _, c := range []struct {
		preset, box, eng string
		batch            int
		kind             string
		coll             [2]model.Collective
		bytes            int64
		line             string
		// payload and gathered: the dispatch's dtype and bytes where
		// they are not bf16 and bytes ("": as the combine).
		payload  model.Dtype
		gathered int64
	}{
		{"deepseek-v3", "nvswitch:8xb200", "vllm@0.24", 64, model.DispatchAllGather, [2]model.Collective{model.AllGather, model.ReduceScatter}, 64 * hidden * 2,
			"DP 8 MoE dispatch all-gather + reduce-scatter (its default: --all2all-backend allgather_reducescatter), fp8-block128 tokens (the experts' input quantization, before the gather)",
			model.FP8Block128, 64 * (hidden*1 + hidden/128*4)},
		{"deepseek-v3", "h200-nvswitch", "vllm@0.24", 64, model.DispatchAllGather, [2]model.Collective{model.AllGather, model.ReduceScatter}, 64 * hidden * 2,
			"MoE flashinfer_cutlass for fp8-block128 experts (5 companion kernels), DP 8 MoE dispatch all-gather + reduce-scatter (its default: --all2all-backend allgather_reducescatter), bf16 tokens", "", 0},
		{"kimi-k2.5-nvfp4", "rtxpro6000-2s", "vllm@0.24", 8, model.DispatchAllGather, [2]model.Collective{model.AllGather, model.ReduceScatter}, 8 * hidden * 2,
			"DP 8 MoE dispatch all-gather + reduce-scatter (its default: --all2all-backend allgather_reducescatter), nvfp4 tokens (the experts' input quantization, before the gather)",
			model.NVFP4, 8 * (hidden/2 + hidden/16)},
		{"kimi-k2.5-nvfp4", "h200-nvswitch", "vllm@0.24", 8, model.DispatchAllGather, [2]model.Collective{model.AllGather, model.ReduceScatter}, 8 * hidden * 2,
			"DP 8 MoE dispatch all-gather + reduce-scatter (its default: --all2all-backend allgather_reducescatter), bf16 tokens", "", 0},
		{"deepseek-v3", "h200-nvswitch", "sglang@0.5", 64, model.DispatchAllGather, [2]model.Collective{model.AllGather, model.ReduceScatter}, 64 * hidden * 2,
			"DP 8 MoE dispatch all-gather + reduce-scatter (its default: --moe-a2a-backend none)", "", 0},
		{"deepseek-v3", "h200-nvswitch", "trtllm@1.3", 64, model.DispatchAllToAll, [2]model.Collective{model.AllToAll, model.AllToAll}, a2a,
			"DP 8 MoE dispatch all-to-all (its default where NVLink joins the GPUs: TRTLLM_FORCE_COMM_METHOD NVLINK_ONE_SIDED)", "", 0},
		{"deepseek-v3", "h200-nvswitch", "executor", 64, model.DispatchAllToAll, [2]model.Collective{model.AllToAll, model.AllToAll}, a2a,
			"DP 8 MoE dispatch all-to-all (its default: --moe-dispatch alltoall)", "", 0},
		{"kimi-k2.5", "rtxpro6000-2s", "vllm@0.24", 8, model.DispatchAllGather, [2]model.Collective{model.AllGather, model.ReduceScatter}, 8 * hidden * 2,
			"DP 8 MoE dispatch all-gather + reduce-scatter (its default: --all2all-backend allgather_reducescatter)", "", 0},
		{"kimi-k2.5", "rtxpro6000-2s", "sglang@0.5", 8, model.DispatchAllGather, [2]model.Collective{model.AllGather, model.ReduceScatter}, 8 * hidden * 2,
			"DP 8 MoE dispatch all-gather + reduce-scatter (its default: --moe-a2a-backend none)", "", 0},
	} {
		name := c.preset + " " + c.box + " " + c.eng
		pr, d, cb := dpDispatchOps(t, c.preset, c.box, c.eng, "", c.batch)
		if pr.MoEDispatch != c.kind || pr.MoEDispatchChosen {
			t.Errorf("%s: moe_dispatch %q (chosen %v), want the engine's %q", name, pr.MoEDispatch, pr.MoEDispatchChosen, c.kind)
		}
		payload, gathered := c.payload, c.gathered
		if payload == "" {
			payload, gathered = model.BF16, c.bytes
		}
		for i, o := range []model.Op{d, cb} {
			want, dt := c.bytes, model.BF16
			if i == 0 {
				want, dt = gathered, payload
			}
			if o.Collective != c.coll[i] || o.CommBytes != want || o.ActDtype != dt {
				t.Errorf("%s: %s is %s of %d B in %s, want %s of %d B in %s", name, o.ID, o.Collective, o.CommBytes, o.ActDtype, c.coll[i], want, dt)
			}
		}
		if pr.DispatchDtype != payload || pr.DispatchDtypeChosen || strings.Contains(pr.OptionsLabel(), "dispatch-dtype") {
			t.Errorf("%s: dispatch_dtype %q (chosen %v, options %q), want the engine's %q unnamed on the options line", name, pr.DispatchDtype, pr.DispatchDtypeChosen, pr.OptionsLabel(), payload)
		}
		if !strings.Contains(pr.Engine, c.line) {
			t.Errorf("%s: engine line %q\nwant it to name %q", name, pr.Engine, c.line)
		}
		if strings.Contains(pr.OptionsLabel(), "moe-dispatch") {
			t.Errorf("%s: options %q name a dispatch nobody chose", name, pr.OptionsLabel())
		}
	}
}

// --moe-dispatch alltoall prices vLLM's opt-in all-to-all (its
// --all2all-backend deepep_* / flashinfer_nvlink_*) where the engine
// would gather: the collectives are all-to-all of the bytes
// TestEngineDefaultDispatch derives, the options line names the choice
// and the engine line says it is not the engine's default; the reverse
// choice under TensorRT-LLM prices its ALLGATHER method.
func TestChosenDispatch(t *testing.T) {
	pr, d, cb := dpDispatchOps(t, "deepseek-v3", "h200-nvswitch", "vllm@0.24", model.DispatchAllToAll, 64)
	if d.Collective != model.AllToAll || cb.Collective != model.AllToAll || d.CommBytes != cb.CommBytes {
		t.Errorf("vLLM --moe-dispatch alltoall: %s %s %d B, %s %s %d B, want all-to-all both ways", d.ID, d.Collective, d.CommBytes, cb.ID, cb.Collective, cb.CommBytes)
	}
	if !pr.MoEDispatchChosen || pr.MoEDispatch != model.DispatchAllToAll || !strings.Contains(pr.OptionsLabel(), "moe-dispatch=alltoall") {
		t.Errorf("vLLM --moe-dispatch alltoall: moe_dispatch %q chosen %v, options %q", pr.MoEDispatch, pr.MoEDispatchChosen, pr.OptionsLabel())
	}
	if want := "DP 8 MoE dispatch all-to-all (--moe-dispatch: --all2all-backend deepep_high_throughput | deepep_low_latency | flashinfer_nvlink_one_sided | flashinfer_nvlink_two_sided; its default is all-gather + reduce-scatter)"; !strings.Contains(pr.Engine, want) {
		t.Errorf("engine line %q\nwant %q", pr.Engine, want)
	}
	pr, d, _ = dpDispatchOps(t, "deepseek-v3", "h200-nvswitch", "trtllm@1.3", model.DispatchAllGather, 64)
	if d.Collective != model.AllGather || d.CommBytes != 64*7168*2 {
		t.Errorf("TensorRT-LLM --moe-dispatch allgather_reducescatter: %s %d B, want an all-gather of 917504 B", d.Collective, d.CommBytes)
	}
	if want := "all-gather + reduce-scatter (--moe-dispatch: TRTLLM_FORCE_COMM_METHOD ALLGATHER; its default where NVLink joins the GPUs is all-to-all)"; !strings.Contains(pr.Engine, want) {
		t.Errorf("engine line %q\nwant %q", pr.Engine, want)
	}
}

// --dispatch-dtype bf16 under vLLM prices the gather of bf16 tokens
// where the engine would gather DeepSeek-V3's FP8 (64 x 7168 x 2 =
// 917,504 B, as the combine), and the options and engine lines say who
// chose it.
func TestChosenDispatchDtype(t *testing.T) {
	a, err := model.Preset("deepseek-v3")
	if err != nil {
		t.Fatal(err)
	}
	sc := Scenario{Arch: a, Plan: model.Plan{TP: 1, DP: 8, EP: true}, Build: model.BuildOptions{DispatchDtype: model.BF16},
		Workload: model.Workload{Phase: model.Decode, Batch: 64, Context: 4096},
		Options:  Options{CUDAGraphs: true, Engine: engprof.Ref{Name: "vllm"}}, Topo: mustTopo(t, "h200-nvswitch")}
	pr, s, err := Predict(sc)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range s.Ranks[0] {
		if o.Role == model.RoleMoEDispatch && (o.CommBytes != 64*7168*2 || o.ActDtype != model.BF16) {
			t.Fatalf("%s: %d B in %s, want 917504 B in bf16", o.ID, o.CommBytes, o.ActDtype)
		}
	}
	if !pr.DispatchDtypeChosen || !strings.Contains(pr.OptionsLabel(), "dispatch-dtype=bf16") ||
		!strings.Contains(pr.Engine, "allgather_reducescatter), bf16 tokens (--dispatch-dtype)") {
		t.Errorf("chosen bf16: chosen %v, options %q, engine %q", pr.DispatchDtypeChosen, pr.OptionsLabel(), pr.Engine)
	}
}

// A dispatch kind the engine has no implementation of is refused before
// any work, in one line naming the flag, the engine and what it offers.
func TestCheckEngineDispatch(t *testing.T) {
	a, err := model.Preset("deepseek-v3")
	if err != nil {
		t.Fatal(err)
	}
	prof, err := engprof.Lookup(engprof.Ref{Name: "sglang"})
	if err != nil {
		t.Fatal(err)
	}
	// SGLang states both kinds; a profile that lists no all-to-all is
	// the case to refuse.
	saved := prof.Dispatch.AllToAll
	prof.Dispatch.AllToAll = nil
	defer func() { prof.Dispatch.AllToAll = saved }()
	sc := Scenario{Arch: a, Plan: model.Plan{TP: 1, DP: 8, EP: true}, Build: model.BuildOptions{MoEDispatch: model.DispatchAllToAll},
		Workload: model.Workload{Phase: model.Decode, Batch: 8, Context: 4096},
		Options:  Options{CUDAGraphs: true, Engine: engprof.Ref{Name: "sglang"}}, Topo: mustTopo(t, "h200-nvswitch")}
	err = sc.CheckEngine()
	want := "--moe-dispatch alltoall: sglang@0.5 has no all-to-all MoE dispatch: it offers allgather_reducescatter (--moe-a2a-backend none)"
	if err == nil || err.Error() != want {
		t.Errorf("CheckEngine: %v\nwant %s", err, want)
	}
	sc.Build.MoEDispatch = model.DispatchAllGather
	if err := sc.CheckEngine(); err != nil {
		t.Errorf("allgather_reducescatter under sglang: %v", err)
	}
}

// The serving simulation prices its steps with the engine's dispatch too:
// the iteration coster's build options carry the default a predicted
// step takes (vLLM: all-gather + reduce-scatter; TensorRT-LLM on NVLink:
// all-to-all), and a chosen one stays.
func TestIterationCosterDispatch(t *testing.T) {
	a, err := model.Preset("deepseek-v3")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		box, eng, chosen, want string
		payload                model.Dtype
	}{
		// vLLM's gather moves DeepSeek-V3's tokens as its experts'
		// kernel takes them (TestEngineDefaultDispatch): FP8 block-128
		// for FlashInfer's trtllm-gen MoE on B200, bf16 for its CUTLASS
		// MoE, which runs them on H200 under EP.
		{"nvswitch:8xb200", "vllm@0.24", "", model.DispatchAllGather, model.FP8Block128},
		{"h200-nvswitch", "vllm@0.24", "", model.DispatchAllGather, model.BF16},
		{"h200-nvswitch", "trtllm@1.3", "", model.DispatchAllToAll, model.BF16},
		{"h200-nvswitch", "vllm@0.24", model.DispatchAllToAll, model.DispatchAllToAll, model.BF16},
		{"nvswitch:8xb200", "vllm@0.24", model.DispatchAllGather, model.DispatchAllGather, model.FP8Block128},
	} {
		ref, err := engprof.ParseRef(c.eng)
		if err != nil {
			t.Fatal(err)
		}
		p, err := New(resolveBox(t, c.box), Options{CUDAGraphs: true, Engine: ref})
		if err != nil {
			t.Fatal(err)
		}
		ic, err := NewIterationCoster(p, Scenario{Arch: a, Plan: model.Plan{TP: 1, DP: 8, EP: true}, Build: model.BuildOptions{MoEDispatch: c.chosen}})
		if err != nil {
			t.Fatal(err)
		}
		if ic.build.MoEDispatch != c.want || ic.build.DispatchDtype != c.payload {
			t.Errorf("%s %s chosen %q: iterations built with %q of %s, want %q of %s", c.box, c.eng, c.chosen, ic.build.MoEDispatch, ic.build.DispatchDtype, c.want, c.payload)
		}
	}
}

// TensorRT-LLM's all-to-all methods all need NVLink between the EP
// group's GPUs (communication_factory.py: a forced
// TRTLLM_FORCE_COMM_METHOD raises where its strategy cannot construct;
// NVLinkOneSided and NVLinkTwoSided keep their workspace in MnnvlMemory,
// and DeepEP.is_platform_supported asks supports_mnnvl, which
// _mnnvl_utils.py answers from the GPU's NVLinks: none active on a PCIe
// GPU, so false). --moe-dispatch alltoall on a PCIe box is refused in one
// line naming the flag, as any option the engine cannot run; on the
// NVLink box it is the engine's default and runs.
func TestCheckEngineDispatchNeedsNVLink(t *testing.T) {
	a, err := model.Preset("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	sc := Scenario{Arch: a, Plan: model.Plan{TP: 1, DP: 8, EP: true}, Build: model.BuildOptions{MoEDispatch: model.DispatchAllToAll},
		Workload: model.Workload{Phase: model.Decode, Batch: 8, Context: 4096},
		Options:  Options{CUDAGraphs: true, Engine: engprof.Ref{Name: "trtllm"}}, Topo: collTopo(t, "pcie-switch:8xh100-pcie", 0)}
	err = sc.CheckEngine()
	if err == nil || !strings.HasPrefix(err.Error(), "--moe-dispatch alltoall: trtllm@1.3's all-to-all") ||
		!strings.Contains(err.Error(), "needs NVLink between the GPUs") || strings.Contains(err.Error(), "\n") {
		t.Errorf("trtllm all-to-all on a PCIe box: %v\nwant one line naming --moe-dispatch and the NVLink it needs", err)
	}
	sc.Build.MoEDispatch = model.DispatchAllGather
	if err := sc.CheckEngine(); err != nil {
		t.Errorf("trtllm all-gather on a PCIe box: %v", err)
	}
	sc.Build.MoEDispatch = model.DispatchAllToAll
	sc.Topo = mustTopo(t, "h200-nvswitch")
	if err := sc.CheckEngine(); err != nil {
		t.Errorf("trtllm all-to-all on the NVLink box: %v", err)
	}
	// vLLM states no such limit: its all-to-all stays priced.
	sc.Options.Engine = engprof.Ref{Name: "vllm"}
	sc.Topo = collTopo(t, "pcie-switch:8xh100-pcie", 0)
	if err := sc.CheckEngine(); err != nil {
		t.Errorf("vllm all-to-all on a PCIe box: %v", err)
	}
}
