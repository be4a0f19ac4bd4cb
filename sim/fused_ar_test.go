package sim

import (
	"fmt"
	"math"
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

// An all-reduce fused with the RMSNorm after it runs as FlashInfer's
// all-reduce + RMSNorm kernel, not as the engine's standalone all-reduce:
// a table of the latter (vLLM's custom_allreduce_perf) does not price it.
// The fused op keeps the priors' price, the same as with no tables at
// all; without the fusion the same all-reduces take the table's.
func TestFusedAllReduceNotFromCustomTable(t *testing.T) {
	fusion := Options{CUDAGraphs: true, ARNormFusion: ToggleOn}
	priors := tinyPredict(t, "h200-nvswitch", fusion, nil)
	tables := tinyPredict(t, "h200-nvswitch", fusion, &fakeSource{checkOK: true, collUs: 7})
	apart := tinyPredict(t, "h200-nvswitch", Options{CUDAGraphs: true, ARNormFusion: ToggleOff}, &fakeSource{checkOK: true, collUs: 7})
	if len(priors.Ops) != len(tables.Ops) || len(apart.Ops) != len(tables.Ops) {
		t.Fatalf("%d / %d / %d ops", len(priors.Ops), len(tables.Ops), len(apart.Ops))
	}
	n := 0
	for i, o := range tables.Ops {
		if o.Kind != model.KindCollective || !strings.HasSuffix(o.ID, ".allreduce") {
			continue
		}
		if i+1 >= len(tables.Ops) || !tables.Ops[i+1].Cost.Fused {
			t.Errorf("%s: no norm fused after it under --ar-norm-fusion", o.ID)
			continue
		}
		n++
		if o.Cost.Source != SourcePrior || math.Abs(o.Cost.Us-priors.Ops[i].Cost.Us) > 1e-9 {
			t.Errorf("%s fused: %.3f us from %q, want the priors' %.3f us", o.ID, o.Cost.Us, o.Cost.Source, priors.Ops[i].Cost.Us)
		}
		if src := apart.Ops[i].Cost.Source; src != "fake collective" {
			t.Errorf("%s unfused: priced from %q, want the table", o.ID, src)
		}
	}
	if n == 0 {
		t.Fatal("no all-reduce found")
	}
}

// SGLang fuses an all-reduce with its RMSNorm only up to 2,048 tokens a
// step (its profile's max_tokens, FUSE_ALLREDUCE_MAX_BATCH_SIZE): a
// longer prefill keeps its norms.
func TestFusionTokenCap(t *testing.T) {
	a, err := model.Preset("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{CUDAGraphs: true, ARNormFusion: ToggleOn, Engine: engprof.Ref{Name: "sglang"}}
	p, err := New(mustTopo(t, "h200-nvswitch"), opts)
	if err != nil {
		t.Fatal(err)
	}
	prof, err := engprof.Lookup(opts.Engine)
	if err != nil {
		t.Fatal(err)
	}
	limit := prof.FusionMaxTokens(engprof.FuseAllReduceRMSNorm)
	if limit != 2048 {
		t.Fatalf("sglang's all-reduce + RMSNorm fusion caps at %d tokens, want 2048", limit)
	}
	for _, tc := range []struct {
		tokens int
		fused  bool
	}{{limit, true}, {limit + 1, false}} {
		pr, err := p.PredictScenario(Scenario{Arch: a, Plan: model.Plan{TP: 8},
			Workload: model.Workload{Phase: model.Prefill, Batch: 1, Context: tc.tokens, KVDtype: model.BF16}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i, o := range pr.Ops {
			if o.Kind == model.KindNorm && i > 0 && pr.Ops[i-1].Kind == model.KindCollective {
				n++
				if o.Cost.Fused != tc.fused {
					t.Errorf("%d tokens: %s fused %v, want %v", tc.tokens, o.ID, o.Cost.Fused, tc.fused)
				}
			}
		}
		if n == 0 {
			t.Fatalf("%d tokens: no norm after an all-reduce", tc.tokens)
		}
	}
}

// TestTRTLLMFusesARNormByDefault: TensorRT-LLM's DeepSeek-V3 decoder layer
// fuses the all-reduce with the residual add and RMSNorm after it by
// default wherever the layer has TP and no attention DP
// (modeling_deepseekv3.py: enable_fusion unless
// TRTLLM_DEEPSEEK_EAGER_FUSION_DISABLED, PRE_MOE_FUSION / POST_MOE_FUSION
// = enable_fusion and has_tp; AllReduceFusionOp.RESIDUAL_RMS_NORM). The
// fused op is its custom all-reduce kernel: where NCCL carries the
// all-reduce (--custom-ar off, TensorRT-LLM's NCCL strategy; a PCIe box,
// where its profile runs no custom all-reduce) the norm runs apart. So
// without --ar-norm-fusion the step on an H200 box is the fused one, the
// engine line says so and no caveat calls the fusion out of tree; with
// NCCL every norm after an all-reduce is its own kernel.
func TestTRTLLMFusesARNormByDefault(t *testing.T) {
	trt := engprof.Ref{Name: "trtllm"}
	predict := func(topo string, o Options) *Prediction {
		t.Helper()
		return fusionStep(t, topo, "deepseek-v3", o)
	}
	def := predict("h200-nvswitch", Options{CUDAGraphs: true, Engine: trt})
	if yes, no := normsAfterAllReduce(def); yes == 0 || no != 0 {
		t.Errorf("trtllm on h200-nvswitch: %d norms after an all-reduce fused, %d apart; want all fused", yes, no)
	}
	if !strings.Contains(def.Engine, "all-reduce + RMSNorm fused") {
		t.Errorf("engine line %q: want it to name the fusion", def.Engine)
	}
	asked := predict("h200-nvswitch", Options{CUDAGraphs: true, Engine: trt, ARNormFusion: ToggleOn})
	for _, c := range asked.Caveats {
		if strings.Contains(c, "--ar-norm-fusion") {
			t.Errorf("--ar-norm-fusion: caveat %q: the engine runs the fusion itself", c)
		}
	}
	if def.StepUs != asked.StepUs {
		t.Errorf("trtllm step %.1f us by default, %.1f with --ar-norm-fusion: want the same (its default)", def.StepUs, asked.StepUs)
	}
	// --ar-norm-fusion=false is the engine's own switch
	// (TRTLLM_DEEPSEEK_EAGER_FUSION_DISABLED=1): every norm apart, each
	// a kernel of its own, the step longer, and the engine line names
	// the switch; under vLLM, which does not fuse by default, off is its
	// default.
	off := predict("h200-nvswitch", Options{CUDAGraphs: true, Engine: trt, ARNormFusion: ToggleOff})
	yes, _ := normsAfterAllReduce(def)
	if y, no := normsAfterAllReduce(off); y != 0 || no != yes {
		t.Errorf("trtllm --ar-norm-fusion=false: %d norms fused, %d apart; want none fused, %d apart", y, no, yes)
	}
	if off.StepUs <= def.StepUs {
		t.Errorf("trtllm step %.1f us with the fusion off, %.1f by default: want longer", off.StepUs, def.StepUs)
	}
	if !strings.Contains(off.Engine, "all-reduce + RMSNorm apart (TRTLLM_DEEPSEEK_EAGER_FUSION_DISABLED=1)") {
		t.Errorf("engine line %q: want it to name the engine's switch", off.Engine)
	}
	nightly := engprof.Ref{Name: "vllm", Version: "0.16-nightly"}
	if v, vOff := predict("h200-nvswitch", Options{CUDAGraphs: true, Engine: nightly}), predict("h200-nvswitch", Options{CUDAGraphs: true, Engine: nightly, ARNormFusion: ToggleOff}); v.StepUs != vOff.StepUs {
		t.Errorf("vllm@0.16-nightly step %.1f us by default, %.1f with the fusion off: want the same (its default)", v.StepUs, vOff.StepUs)
	}
	for name, pr := range map[string]*Prediction{
		"--custom-ar off":        predict("h200-nvswitch", Options{CUDAGraphs: true, Engine: trt, CustomAR: CustomAROff}),
		"pcie-switch:8xh200-nvl": predict("pcie-switch:8xh200-nvl", Options{CUDAGraphs: true, Engine: trt}),
	} {
		if yes, no := normsAfterAllReduce(pr); yes != 0 || no == 0 {
			t.Errorf("trtllm, %s (NCCL all-reduce): %d norms fused, %d apart; want none fused", name, yes, no)
		}
		if strings.Contains(pr.Engine, "RMSNorm fused") {
			t.Errorf("trtllm, %s: engine line %q names a fusion NCCL does not run", name, pr.Engine)
		}
	}
}

// TestVLLMFusesARNormByDefault: vLLM fuses each TP all-reduce with the
// RMSNorm after it by default at -O2 since 0.17 (PR #34299) on compute
// capability 9.0 and the 10.x family, FlashInfer's kernel taking messages
// up to FI_ALLREDUCE_FUSION_MAX_SIZE_MB[capability][TP] (9.0 at TP 8:
// 0.5 MiB; 10.0: 1 MiB; 10.3: 4 MiB), so with DeepSeek-V3's 7,168-wide
// bf16 hidden state a step of up to 36 / 73 / 292 tokens is fused and a
// larger one is not; no fusion on SM120 or at TP 1; the engine line says
// so with the cap; the February-March 2026 nightly (before or about PR
// #34299) does not fuse by default. The step's tokens are its CUDA
// graph's (vLLM's capture sizes ..., 32, 40, ..., 72, 80, ..., 288, 304):
// a padded graph above the cap runs apart, as vLLM compiles the fused
// pattern only into graphs of at most that many tokens.
func TestVLLMFusesARNormByDefault(t *testing.T) {
	a, err := model.Preset("deepseek-v3")
	if err != nil {
		t.Fatal(err)
	}
	count := func(pr *Prediction) (fused, apart int) {
		for i, o := range pr.Ops {
			if o.Rank == 0 && o.Kind == model.KindNorm && i > 0 && pr.Ops[i-1].Kind == model.KindCollective && strings.HasSuffix(pr.Ops[i-1].ID, "allreduce") {
				if o.Cost.Fused {
					fused++
				} else {
					apart++
				}
			}
		}
		return fused, apart
	}
	const hiddenBytes = 7168 * 2
	for _, c := range []struct {
		topo         string
		capMiB       float64 // vLLM's cap at TP 8 for the box's capability; 0: no fusion there
		under, above int     // the capture sizes either side of the cap's token count
		eng          engprof.Ref
	}{
		{"nvswitch:8xh200-sxm", 0.5, 32, 40, engprof.Ref{}},
		{"nvswitch:8xb200", 1, 72, 80, engprof.Ref{}},
		{"nvswitch:8xb300", 4, 288, 304, engprof.Ref{}},
		{"rtxpro6000-2s", 0, 1, 8, engprof.Ref{}},
		{"nvswitch:8xh200-sxm", 0, 1, 8, engprof.Ref{Name: "vllm", Version: "0.16-nightly"}},
	} {
		box, err := topology.Resolve(c.topo, 0)
		if err != nil {
			t.Fatal(err)
		}
		p, err := New(box, Options{CUDAGraphs: true, Engine: c.eng})
		if err != nil {
			t.Fatal(err)
		}
		maxTokens := int(c.capMiB * (1 << 20) / hiddenBytes)
		if c.capMiB > 0 && (c.under > maxTokens || c.above <= maxTokens) {
			t.Fatalf("%s: capture sizes %d and %d do not straddle the cap's %d tokens", c.topo, c.under, c.above, maxTokens)
		}
		for _, batch := range []int{1, c.under, c.above} {
			pr, err := p.PredictScenario(Scenario{Arch: a, Plan: model.Plan{TP: 8}, Workload: model.Workload{Batch: batch, Context: 4096, KVDtype: model.BF16}})
			if err != nil {
				t.Fatal(err)
			}
			fused, apart := count(pr)
			want := c.capMiB > 0 && batch <= maxTokens
			if want && (fused == 0 || apart != 0) || !want && fused != 0 {
				t.Errorf("%s %s batch %d: %d norms fused, %d apart; want fused %v (cap %g MiB at TP 8: %d tokens)", c.topo, c.eng, batch, fused, apart, want, c.capMiB, maxTokens)
			}
			capText := fmt.Sprintf("all-reduce + RMSNorm fused for messages up to %g MiB", c.capMiB)
			if c.capMiB < 1 {
				capText = fmt.Sprintf("all-reduce + RMSNorm fused for messages up to %g KiB", c.capMiB*1024)
			}
			if named := strings.Contains(pr.Engine, capText); named != (c.capMiB > 0) {
				t.Errorf("%s %s batch %d: engine line %q, want %q %v", c.topo, c.eng, batch, pr.Engine, capText, c.capMiB > 0)
			}
		}
	}
}

// TestSGLangFusesARNormByDefault: SGLang 0.5.x turns its FlashInfer
// all-reduce + RMSNorm fusion on by itself (server_args.py
// _handle_model_specific_adjustments: enable_flashinfer_allreduce_fusion
// = True for DeepseekV3ForCausalLM and KimiK25ForConditionalGeneration on
// SM90 or SM100, without DP attention, on one node, not on an H20, with
// no all-to-all MoE backend). So a DeepSeek-V3 or Kimi-K2.5 decode step
// on 8 x H200 fuses every norm after an all-reduce without
// --ar-norm-fusion, the same step as with it; GLM-5
// (GlmMoeDsaForCausalLM, not in the list) and the H20 keep the norms
// apart; --ar-norm-fusion=false is the engine's
// --enforce-disable-flashinfer-allreduce-fusion (PR #21446).
func TestSGLangFusesARNormByDefault(t *testing.T) {
	sgl := engprof.Ref{Name: "sglang"}
	predict := func(topo, preset string, o Options) *Prediction {
		t.Helper()
		o.CUDAGraphs, o.Engine = true, sgl
		return fusionStep(t, topo, preset, o)
	}
	for _, c := range []struct {
		topo, preset string
		want         bool
	}{
		{"h200-nvswitch", "deepseek-v3", true},
		{"h200-nvswitch", "kimi-k2.5", true},
		{"nvswitch:8xb200", "deepseek-v3", true},
		{"h200-nvswitch", "glm-5", false},
		{"nvswitch:8xh20", "deepseek-v3", false},
	} {
		pr := predict(c.topo, c.preset, Options{})
		yes, no := normsAfterAllReduce(pr)
		if yes+no == 0 {
			t.Fatalf("%s on %s: no norm after an all-reduce", c.preset, c.topo)
		}
		if got := no == 0; got != c.want || (c.want && yes == 0) {
			t.Errorf("sglang, %s on %s by default: %d norms after an all-reduce fused, %d apart; want fused %v", c.preset, c.topo, yes, no, c.want)
		}
		if got := strings.Contains(pr.Engine, "all-reduce + RMSNorm fused"); got != c.want {
			t.Errorf("sglang, %s on %s: engine line %q, want it to name the fusion: %v", c.preset, c.topo, pr.Engine, c.want)
		}
		if c.want {
			if asked := predict(c.topo, c.preset, Options{ARNormFusion: ToggleOn}); asked.StepUs != pr.StepUs {
				t.Errorf("sglang, %s on %s: step %.1f us by default, %.1f with --ar-norm-fusion: want the same (its default)", c.preset, c.topo, pr.StepUs, asked.StepUs)
			}
		}
	}
	off := predict("h200-nvswitch", "deepseek-v3", Options{ARNormFusion: ToggleOff})
	if yes, no := normsAfterAllReduce(off); yes != 0 || no == 0 {
		t.Errorf("sglang --ar-norm-fusion=false: %d norms fused, %d apart; want none fused", yes, no)
	}
	if !strings.Contains(off.Engine, "all-reduce + RMSNorm apart (--enforce-disable-flashinfer-allreduce-fusion)") {
		t.Errorf("engine line %q: want it to name the engine's switch", off.Engine)
	}
}

// vLLM 0.24 fuses each all-reduce with the RMSNorm after it under DP
// attention too: enable_allreduce_rms_fusion lost its
// data_parallel_size == 1 gate in PR #41458 (2026-05-01), and PR #45917
// (in 0.24.0) fixed the TP > 1 / DP > 1 hang the default fusion caused
// in 0.22-0.23. At TP 2 x DP 4 on an H200 (SM 9.0, cap 64 MiB at TP 2)
// every TP all-reduce of a decode step is fused by default, as under
// --ar-norm-fusion; TensorRT-LLM's profile keeps its fusion off there.
func TestARNormFusionUnderDPAttention(t *testing.T) {
	a, err := model.Preset("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	sc := Scenario{Arch: a, Plan: model.Plan{TP: 2, DP: 4, EP: true},
		Workload: model.Workload{Phase: model.Decode, Batch: 16, Context: 1000, KVDtype: model.BF16}}
	fusedNorms := func(opts Options) (fused, reduces int) {
		t.Helper()
		p, err := New(mustTopo(t, "h200-nvswitch"), opts)
		if err != nil {
			t.Fatal(err)
		}
		pr, err := p.PredictScenario(sc)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range pr.Ops {
			if o.Kind != model.KindCollective || !strings.HasSuffix(o.ID, ".allreduce") {
				continue
			}
			reduces++
			if i+1 < len(pr.Ops) && pr.Ops[i+1].Cost.Fused {
				fused++
			}
		}
		return fused, reduces
	}
	def, n := fusedNorms(Options{CUDAGraphs: true, Engine: engprof.Ref{Name: "vllm", Version: "0.24"}})
	on, _ := fusedNorms(Options{CUDAGraphs: true, Engine: engprof.Ref{Name: "vllm", Version: "0.24"}, ARNormFusion: ToggleOn})
	if n == 0 || on == 0 {
		t.Fatalf("%d all-reduces, %d fused under --ar-norm-fusion: the scenario has none to fuse", n, on)
	}
	if def != on {
		t.Errorf("vllm@0.24 TP 2 x DP 4: %d of %d all-reduces fused by default, want %d as under --ar-norm-fusion", def, n, on)
	}
	if trt, _ := fusedNorms(Options{CUDAGraphs: true, Engine: engprof.Ref{Name: "trtllm"}}); trt != 0 {
		t.Errorf("trtllm TP 2 x DP 4: %d all-reduces fused by default, want none (its fusion is off under DP attention)", trt)
	}
}

// normsAfterAllReduce counts the norm ops that follow a TP all-reduce in
// pr's step: yes those priced fused into it, no those priced apart.
func normsAfterAllReduce(pr *Prediction) (yes, no int) {
	for i, o := range pr.Ops {
		if o.Kind == model.KindNorm && i > 0 && pr.Ops[i-1].Kind == model.KindCollective && strings.HasSuffix(pr.Ops[i-1].ID, "allreduce") {
			if o.Cost.Fused {
				yes++
			} else {
				no++
			}
		}
	}
	return yes, no
}

// TestTRTLLMAllReduceTableInStep: TensorRT-LLM's AUTO all-reduce follows
// its strategy table (engine profile custom_allreduce.strategy_table,
// customAllReduceUtils.h): DeepSeek-V3 at TP 8 on H200 (SM90) with the
// fused RESIDUAL_RMS_NORM op runs one-shot up to 127 tokens and NCCL from
// 128, where the residual add and RMSNorm run apart (the fusion is the
// custom kernel's). A decode step of 32 tokens is one-shot and fused; one
// of 128 is NCCL with every norm after an all-reduce its own kernel.
func TestTRTLLMAllReduceTableInStep(t *testing.T) {
	a, err := model.Preset("deepseek-v3")
	if err != nil {
		t.Fatal(err)
	}
	box, err := topology.Resolve("h200-nvswitch", 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(box, Options{CUDAGraphs: true, Engine: engprof.Ref{Name: "trtllm"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		batch int
		algo  string // of every attention and MoE all-reduce
		fused bool
	}{{32, "OneShot", true}, {127, "OneShot", true}, {128, "", false}} {
		pr, err := p.PredictScenario(Scenario{Arch: a, Plan: model.Plan{TP: 8},
			Workload: model.Workload{Phase: model.Decode, Batch: c.batch, Context: 1024, KVDtype: model.BF16}})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for i, o := range pr.Ops {
			if !strings.HasSuffix(o.ID, "attn.allreduce") && !strings.HasSuffix(o.ID, "moe.allreduce") {
				continue
			}
			n++
			custom := o.Cost.Algo == "OneShot" || o.Cost.Algo == "TwoShot"
			if (c.algo == "" && custom) || (c.algo != "" && o.Cost.Algo != c.algo) {
				t.Fatalf("batch %d: %s carried by %s; want %s", c.batch, o.ID, o.Cost.Algo, map[bool]string{true: c.algo, false: "NCCL"}[c.algo != ""])
			}
			if i+1 < len(pr.Ops) && pr.Ops[i+1].Kind == model.KindNorm && pr.Ops[i+1].Cost.Fused != c.fused {
				t.Fatalf("batch %d: norm after %s fused %v; want %v", c.batch, o.ID, pr.Ops[i+1].Cost.Fused, c.fused)
			}
		}
		if n == 0 {
			t.Fatalf("batch %d: no attention or MoE all-reduce", c.batch)
		}
		want := "one-shot up to 127 tokens, NCCL (norm apart) from 128 tokens"
		if !strings.Contains(pr.Engine, want) {
			t.Errorf("batch %d: engine line %q; want it to give the table's bands %q", c.batch, pr.Engine, want)
		}
	}
}

// fusionStep is preset's decode step at batch 8, context 4096, BF16 KV,
// TP 8 on box topo under o: the step the fusion tests compare.
func fusionStep(t *testing.T, topo, preset string, o Options) *Prediction {
	t.Helper()
	box, err := topology.Resolve(topo, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(box, o)
	if err != nil {
		t.Fatal(err)
	}
	pr, err := p.PredictScenario(Scenario{Arch: mustPreset(t, preset), Plan: model.Plan{TP: 8},
		Workload: model.Workload{Phase: model.Decode, Batch: 8, Context: 4096, KVDtype: model.BF16}})
	if err != nil {
		t.Fatal(err)
	}
	return pr
}
