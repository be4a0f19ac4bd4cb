package model

import (
	"math"
	"testing"
)

// TestParams checks parameter counts against sums written out by hand from
// each config's dims (per layer: fused q_a+kv_a = hidden x (q_lora +
// kv_lora + rope); q_b = q_lora x heads x (nope + rope); kv_b = kv_lora x
// heads x (nope + v); o_proj = heads x v x hidden; norms 2 x hidden +
// q_lora + kv_lora; router = experts x hidden + experts (bias); one expert
// or shared expert = 3 x hidden x moe_inter; dense MLP = 3 x hidden x
// intermediate; embedding and lm_head = vocab x hidden; final norm hidden)
// and against the published headline figures.
func TestParams(t *testing.T) {
	cases := []struct {
		preset              string
		total, active       float64 // hand sums
		headline            float64 // published total
		headlineTol         float64
		activeHeadline      float64
		activeTol, mtpTotal float64
	}{
		{
			// Kimi-K2.5: attention 15,138,816 + 18,874,368 + 8,388,608 +
			// 58,720,256 = 101,122,048; norms 16,384; 1 dense layer
			// 396,361,728; 60 MoE layers of router 2,752,896 + shared
			// 44,040,192 + 384 x 44,040,192; embed + head 2 x 1,174,405,120.
			// Headline: model card "1T total, 32B activated"; issue: ~1.03T
			// and 32-33B.
			preset:         "kimi-k2.5-nvfp4",
			total:          61*(101122048+16384) + 396361728 + 60*(2752896+44040192+384*44040192) + 2*1174405120 + 7168,
			active:         61*(101122048+16384) + 396361728 + 60*(2752896+44040192+8*44040192) + 2*1174405120 + 7168,
			headline:       1.03e12,
			headlineTol:    0.01,
			activeHeadline: 32.5e9, activeTol: 0.02,
		},
		{
			// DeepSeek-V3: attention 15,138,816 + 37,748,736 + 16,777,216 +
			// 117,440,512 = 187,105,280; 3 dense layers; 58 MoE layers of
			// router 1,835,264 + shared 44,040,192 + 256 x 44,040,192; embed +
			// head 2 x 926,679,040. Headline: "671B total, 37B activated"
			// (DeepSeek-V3 README), MTP module 14B.
			preset:         "deepseek-v3",
			total:          61*(187105280+16384) + 3*396361728 + 58*(1835264+44040192+256*44040192) + 2*926679040 + 7168,
			active:         61*(187105280+16384) + 3*396361728 + 58*(1835264+44040192+8*44040192) + 2*926679040 + 7168,
			headline:       671e9,
			headlineTol:    0.002,
			activeHeadline: 37e9, activeTol: 0.03,
			// MTP: one MoE layer (187,105,280 + 16,384 + 1,835,264 + 44,040,192
			// + 256 x 44,040,192) + eh_proj 2 x 7168^2 + 3 norms x 7168 + its
			// own embed and head 2 x 926,679,040 (~13.5B; README "14B").
			mtpTotal: 187105280 + 16384 + 1835264 + 44040192 + 256*44040192 + 2*7168*7168 + 3*7168 + 2*926679040,
		},
		{
			// GLM-5: attention 6144 x 2624 + 2048 x 64 x 256 + 512 x 64 x 448 +
			// 64 x 256 x 6144 = 16,121,856 + 33,554,432 + 14,680,064 +
			// 100,663,296; indexer 2048 x 32 x 128 + 6144 x 128 + 6144 x 32 =
			// 9,371,648; norms 2 x 6144 + 2048 + 512 + 2 x 128 = 15,104; 3
			// dense layers of 3 x 6144 x 12288; 75 MoE layers of router
			// 256 x 6144 + 256, shared 37,748,736, 256 experts of 37,748,736;
			// embed + head 2 x 154,880 x 6144. Headline: ~744B (issue).
			preset: "glm-5",
			total: 78*(16121856+33554432+14680064+100663296+9371648+15104) + 3*226492416 +
				75*(1573120+37748736+256*37748736) + 2*951582720 + 6144,
			active: 78*(16121856+33554432+14680064+100663296+9371648+15104) + 3*226492416 +
				75*(1573120+37748736+8*37748736) + 2*951582720 + 6144,
			headline:    744e9,
			headlineTol: 0.002,
		},
	}
	for _, c := range cases {
		t.Run(c.preset, func(t *testing.T) {
			p := mustPreset(t, c.preset).Params()
			if !near(p.Total, c.total, 1e-12) {
				t.Errorf("total %.0f, want %.0f", p.Total, c.total)
			}
			if !near(p.Active, c.active, 1e-12) {
				t.Errorf("active %.0f, want %.0f", p.Active, c.active)
			}
			if !near(p.Total, c.headline, c.headlineTol) {
				t.Errorf("total %.4g not within %.1f%% of headline %.4g", p.Total, 100*c.headlineTol, c.headline)
			}
			if c.activeHeadline > 0 && !near(p.Active, c.activeHeadline, c.activeTol) {
				t.Errorf("active %.4g not within %.0f%% of headline %.4g", p.Active, 100*c.activeTol, c.activeHeadline)
			}
			if c.mtpTotal > 0 && !near(p.MTP, c.mtpTotal, 1e-12) {
				t.Errorf("mtp %.0f, want %.0f", p.MTP, c.mtpTotal)
			}
			sum := 0.0
			for _, bc := range p.ByComponent {
				if bc.Component != CompMTP {
					sum += bc.Params
				}
			}
			if !near(sum, p.Total, 1e-12) {
				t.Errorf("components sum %.0f != total %.0f", sum, p.Total)
			}
		})
	}
}

// TestKVBytesPerToken: (kv_lora 512 + rope 64) = 576 values per layer.
// Kimi/DeepSeek 61 layers: 576 x 61 x 2 = 70,272 B bf16, x 1 = 35,136 fp8
// (serving-facts.md gives the same). GLM-5 78 layers: 89,856 / 44,928, plus
// the DSA indexer cache 78 x (128 + 4) = 10,296 B when DSA runs sparse;
// an FP8 cache run sparse takes the sparse kernels' scaled layout, 656 B a
// layer for the latent, not 576. Replicated under TP (unchanged by TP), divided by k under DCP = k.
func TestKVBytesPerToken(t *testing.T) {
	cases := []struct {
		name    string
		preset  string
		plan    Plan
		kv      Dtype
		mtp     bool
		dsa     bool
		want    float64
		comment string
	}{
		{"kimi bf16 tp1", "kimi-k2.5-nvfp4", Plan{}, BF16, false, false, 70272, ""},
		{"kimi bf16 tp8", "kimi-k2.5-nvfp4", Plan{TP: 8}, BF16, false, false, 70272, "replicated"},
		{"kimi fp8 tp8", "kimi-k2.5-nvfp4", Plan{TP: 8}, FP8, false, false, 35136, ""},
		{"kimi bf16 tp8 dcp8", "kimi-k2.5-nvfp4", Plan{TP: 8, DCP: 8}, BF16, false, false, 70272.0 / 8, ""},
		{"kimi fp8 tp8 dcp2", "kimi-k2.5-nvfp4", Plan{TP: 8, DCP: 2}, FP8, false, false, 35136.0 / 2, ""},
		{"deepseek bf16 +mtp", "deepseek-v3", Plan{TP: 8}, BF16, true, false, 62 * 576 * 2, "61 + 1 MTP layer"},
		{"glm-5 bf16 dense", "glm-5", Plan{TP: 8}, BF16, false, false, 89856, ""},
		{"glm-5 fp8 dense", "glm-5", Plan{TP: 8}, FP8, false, false, 44928, ""},
		{"glm-5 bf16 dsa", "glm-5", Plan{TP: 8}, BF16, false, true, 89856 + 78*132, ""},
		// Run sparse with an FP8 cache: FlashMLA's scaled layout, 512 FP8
		// values + 4 FP32 scales (one per 128) + 64 BF16 RoPE values.
		{"glm-5 fp8 dsa", "glm-5", Plan{TP: 8}, FP8, false, true, 78 * ((512 + 4*4 + 64*2) + 132), "fp8_ds_mla"},
		{"glm-5 fp8 dsa +mtp", "glm-5", Plan{TP: 8}, FP8, true, true, 79 * (656 + 132), "78 + 1 MTP layer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := kvBytesPerToken(mustPreset(t, c.preset), c.plan, c.kv, c.mtp, c.dsa)
			if !near(got, c.want, 1e-12) {
				t.Errorf("got %.2f B/token, want %.2f", got, c.want)
			}
		})
	}
}

// TestWeightMemory checks per-GPU bytes of components against hand sums for
// Kimi-K2.5-NVFP4 at TP 8 (NVFP4 = 0.5 + 1/16 B per value):
//   - routed experts: 60 layers x 384 x 44,040,192 / 8 x 0.5625
//   - the same under EP (48 whole experts per rank): identical total
//   - attention (BF16): 61 x (15,138,816 + 85,983,232 / 8) x 2
//   - embedding and lm_head: 163,840 / 8 x 7168 x 2 each
func TestWeightMemory(t *testing.T) {
	a := mustPreset(t, "kimi-k2.5-nvfp4")
	routed := 60 * 384 * 44040192.0 / 8 * 0.5625
	attn := 61 * (15138816 + 85983232.0/8) * 2
	emb := 163840.0 / 8 * 7168 * 2
	cases := []struct {
		name string
		plan Plan
		want map[Component]float64
	}{
		{"tp8", Plan{TP: 8}, map[Component]float64{CompRoutedExperts: routed, CompAttention: attn, CompEmbedding: emb, CompLMHead: emb, CompIndexer: 0, CompMTP: 0}},
		{"tp8-ep", Plan{TP: 8, EP: true}, map[Component]float64{CompRoutedExperts: 60 * 48 * 44040192.0 * 0.5625, CompAttention: attn}},
		{"tp1-dp8-ep", Plan{TP: 1, DP: 8, EP: true}, map[Component]float64{CompRoutedExperts: routed, CompAttention: 61 * 101122048.0 * 2, CompEmbedding: 163840 * 7168 * 2.0}},
		// DP attention replicates the shared experts: 60 x 44,040,192 x 0.5625.
		{"tp2-dp4-ep", Plan{TP: 2, DP: 4, EP: true}, map[Component]float64{CompRoutedExperts: routed, CompSharedExperts: 60 * 44040192 * 0.5625,
			CompAttention: 61 * (15138816 + 85983232.0/2) * 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, cm := range a.WeightMemory(c.plan, false) {
				if want, ok := c.want[cm.Component]; ok && !near(cm.BytesPerGPU, want, 1e-12) {
					t.Errorf("%s: %.0f B, want %.0f", cm.Component, cm.BytesPerGPU, want)
				}
			}
		})
	}
	// Under EP with E divisible by the ranks, whole experts per rank hold
	// exactly the bytes of 1/TP of every expert.
	if !near(routed, 60*48*44040192.0*0.5625, 1e-12) {
		t.Fatal("hand arithmetic inconsistent")
	}
}

// TestWeightMemoryDequantCopy: DeepSeek-V3's FP8 attention at TP 8 holds
// 61 x (15,138,816 replicated + (37,748,736 + 16,777,216 + 117,440,512)/8
// sharded) FP8-block values (1 + 4/128^2 B each), plus the BF16 copy of
// kv_b_proj (16,777,216 / 8 values x 2 B per layer) vLLM makes for the
// absorbed W_UK/W_UV.
func TestWeightMemoryDequantCopy(t *testing.T) {
	a := mustPreset(t, "deepseek-v3")
	want := 61 * ((15138816+171966464.0/8)*(1+4.0/16384) + 16777216.0/8*2)
	for _, c := range a.WeightMemory(Plan{TP: 8}, false) {
		if c.Component == CompAttention && !near(c.BytesPerGPU, want, 1e-12) {
			t.Errorf("attention %.0f B, want %.0f", c.BytesPerGPU, want)
		}
	}
}

// TestKVCapacity: tokens = floor((util x mem - weights - activations) /
// KV bytes per token), DCP = 8 gives 8x the tokens (weights unchanged),
// FP8 KV gives 2x, and a plan whose weights do not fit reports it.
func TestKVCapacity(t *testing.T) {
	a := mustPreset(t, "kimi-k2.5-nvfp4")
	mem := 97887.0 * (1 << 20) // RTX PRO 6000 Blackwell, nvidia-smi 97,887 MiB (hardware.md)
	bf := KVCapacity(a, Plan{TP: 8}, Workload{KVDtype: BF16}, BuildOptions{}, mem, 0)
	left := 0.9*mem - bf.WeightBytes - bf.ActivationBytes
	if want := int64(left / 70272); bf.KVCapacityTokens != want {
		t.Errorf("bf16 tokens %d, want %d", bf.KVCapacityTokens, want)
	}
	fp8 := KVCapacity(a, Plan{TP: 8}, Workload{KVDtype: FP8}, BuildOptions{}, mem, 0)
	dcp := KVCapacity(a, Plan{TP: 8, DCP: 8}, Workload{KVDtype: BF16}, BuildOptions{}, mem, 0)
	cases := []struct {
		name  string
		got   int64
		ratio float64
	}{{"fp8 doubles", fp8.KVCapacityTokens, 2}, {"dcp8 x8", dcp.KVCapacityTokens, 8}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// floor() loses at most one token of the multiplied figure.
			if math.Abs(float64(c.got)-c.ratio*float64(bf.KVCapacityTokens)) > c.ratio {
				t.Errorf("tokens %d, want %.0f x %d", c.got, c.ratio, bf.KVCapacityTokens)
			}
		})
	}
	t.Run("does not fit", func(t *testing.T) {
		c := KVCapacity(a, Plan{TP: 1}, Workload{}, BuildOptions{}, mem, 0.9)
		if c.KVCapacityTokens != 0 || c.WeightsDoNotFitBy <= 0 {
			t.Errorf("capacity %+v: a 1T-parameter model cannot fit one 96 GB GPU", c)
		}
	})
}

// TestLessCUDAGraphs: vLLM from 0.21.0 takes its CUDA-graph estimate off
// what the fraction leaves after the weights and activations
// (gpu_worker.py: requested_memory - non_kv_cache_memory -
// cudagraph_memory_estimate_applied), so the pool is floor((0.92 x mem -
// weights - activations - estimate) / KV bytes per token); the weights
// and activations are the rule's own, the estimate taken once; an
// estimate above what is left leaves no KV and says by how much; 0 is
// the rule itself.
func TestLessCUDAGraphs(t *testing.T) {
	a := mustPreset(t, "glm-5-nvfp4")
	mem := 97887.0 * (1 << 20) // RTX PRO 6000 Blackwell, nvidia-smi 97,887 MiB
	w, p := Workload{KVDtype: FP8}, Plan{TP: 8}
	graph := 4.77 * (1 << 30) // "Estimated CUDA graph memory: 4.77 GiB total" (GLM-5.1-NVFP4, 8x RTX PRO 6000)
	base := KVCapacity(a, p, w, BuildOptions{}, mem, 0.92)
	c := LessCUDAGraphs(KVCapacity, graph)(a, p, w, BuildOptions{}, mem, 0.92)
	left := 0.92*mem - base.WeightBytes - base.ActivationBytes - graph
	if want := int64(left / base.KVBytesPerToken); c.KVCapacityTokens != want || c.KVBytes != left || c.CUDAGraphBytes != graph {
		t.Errorf("pool %d tokens, %.0f B, graphs %.0f B; want %d tokens of (0.92 x mem - weights - activations - 4.77 GiB) = %.0f B", c.KVCapacityTokens, c.KVBytes, c.CUDAGraphBytes, want, left)
	}
	if c.WeightBytes != base.WeightBytes || c.ActivationBytes != base.ActivationBytes || c.UsableBytes != base.UsableBytes {
		t.Errorf("weights, activations or budget moved with the estimate: %+v vs %+v", c, base)
	}
	over := base.KVBytes + 1<<30
	if c := LessCUDAGraphs(KVCapacity, over)(a, p, w, BuildOptions{}, mem, 0.92); c.KVCapacityTokens != 0 || c.KVBytes != 0 || math.Abs(c.WeightsDoNotFitBy-(1<<30)) > 1 {
		t.Errorf("an estimate 1 GiB above the pool: %d tokens, %.0f B, short %.0f B; want none, short 1 GiB", c.KVCapacityTokens, c.KVBytes, c.WeightsDoNotFitBy)
	}
	if c := LessCUDAGraphs(KVCapacity, 0)(a, p, w, BuildOptions{}, mem, 0.92); c != base {
		t.Errorf("no estimate: %+v, want the rule's %+v", c, base)
	}
}

// TestKVCapacityFree: TensorRT-LLM's pool is free_gpu_memory_fraction of
// the memory left after the weights and the activations, frac x (mem -
// weights - activations), where vLLM's is frac x mem - weights -
// activations. DeepSeek-V3 at TP 8 on an H200 (141 GB; about 85.4 GB of
// weights and 2.1 GB of activations a GPU): vLLM's 0.9 x 141 - 85.4 - 2.1
// = 39.4 GB, TensorRT-LLM's 0.9 x (141 - 85.4 - 2.1) = 48.15 GB, the
// difference 0.1 x (85.4 + 2.1) = 8.75 GB.
func TestKVCapacityFree(t *testing.T) {
	a := mustPreset(t, "deepseek-v3")
	const mem = 141e9
	w := Workload{KVDtype: BF16}
	v := KVCapacity(a, Plan{TP: 8}, w, BuildOptions{}, mem, 0.9)
	f := KVCapacityFree(a, Plan{TP: 8}, w, BuildOptions{}, mem, 0.9)
	if f.WeightBytes != v.WeightBytes || f.ActivationBytes != v.ActivationBytes || f.ActivationBytes <= 0 {
		t.Fatalf("weights %v / %v, activations %v / %v: the rules share both, the activations counted", f.WeightBytes, v.WeightBytes, f.ActivationBytes, v.ActivationBytes)
	}
	wa := f.WeightBytes + f.ActivationBytes
	if want := 0.9 * (mem - wa); math.Abs(f.KVBytes-want) > 1 {
		t.Errorf("pool %.0f B, want 0.9 x (%.0f - %.0f) = %.0f", f.KVBytes, mem, wa, want)
	}
	// 61 layers x 576 x 2 B = 70,272 B a token.
	if want := int64(0.9 * (mem - wa) / 70272); f.KVCapacityTokens != want {
		t.Errorf("tokens %d, want %d", f.KVCapacityTokens, want)
	}
	if d, want := f.KVBytes-v.KVBytes, 0.1*wa; math.Abs(d-want) > 1 {
		t.Errorf("TensorRT-LLM's pool exceeds vLLM's by %.0f B, want 0.1 x (weights + activations) = %.0f", d, want)
	}
	if f.KVBytes < 47.5e9 || f.KVBytes > 48.8e9 || v.KVBytes < 38.8e9 || v.KVBytes > 40e9 {
		t.Errorf("pools %.2f GB (TensorRT-LLM) and %.2f GB (vLLM), want about 48.15 and 39.4", f.KVBytes/1e9, v.KVBytes/1e9)
	}
	// The memory the engine's budget covers: everything but (1 - 0.9) of
	// the free memory.
	if want := wa + f.KVBytes; math.Abs(f.UsableBytes-want) > 1 {
		t.Errorf("usable %.0f B, want weights + activations + pool %.0f", f.UsableBytes, want)
	}
	if want := 0.9 * mem; math.Abs(v.UsableBytes-want) > 1 {
		t.Errorf("vLLM's usable %.0f B, want 0.9 x memory %.0f", v.UsableBytes, want)
	}
	t.Run("does not fit", func(t *testing.T) {
		// Weights and activations over the memory: short by their excess,
		// not by a fraction of it.
		c := KVCapacityFree(a, Plan{TP: 8}, w, BuildOptions{}, 80e9, 0.9)
		if want := wa - 80e9; c.KVCapacityTokens != 0 || math.Abs(c.WeightsDoNotFitBy-want) > 1 {
			t.Errorf("capacity %d tokens, short %.0f B, want 0 tokens, short %.0f", c.KVCapacityTokens, c.WeightsDoNotFitBy, want)
		}
	})
}

// TestIndexerWorkspace: vLLM's profiling run reserves a DSA model's
// indexer K-gather workspace of get_max_prefill_buffer_size = 40 x
// max_model_len entries, each index_head_dim fp8 bytes and a 4-byte scale
// (sparse_attn_indexer.py _gather_workspace_shapes), and keeps it, so the
// gpu_memory_utilization pool is that much smaller. GLM-5 (index_head_dim
// 128) at its max_model_len of 202,752: 40 x 202,752 x 132 B =
// 1,070,530,560 B; at --max-model-len 65,536: 346,030,080 B. Run dense
// (no indexer op) or for a model without an indexer: none.
func TestIndexerWorkspace(t *testing.T) {
	a := mustPreset(t, "glm-5-nvfp4")
	if a.IndexHeadDim != 128 || a.MaxModelLenTokens != 202752 {
		t.Fatalf("GLM-5 preset: index_head_dim %d, max_model_len %d; the expectations below assume 128 and 202,752", a.IndexHeadDim, a.MaxModelLenTokens)
	}
	const perEntryB = 128 + 4 // fp8 key values + fp32 scale
	for _, c := range []struct {
		name   string
		maxLen int
		o      BuildOptions
		want   float64
	}{
		{"model's max_model_len", 0, BuildOptions{}, 40 * 202752 * perEntryB},
		{"max_model_len 65536", 65536, BuildOptions{}, 40 * 65536 * perEntryB},
		{"dense DSA", 0, BuildOptions{DenseDSA: true}, 0},
	} {
		if got := IndexerWorkspaceBytes(a, c.o, 40, c.maxLen); got != c.want {
			t.Errorf("%s: %.0f B, want %.0f", c.name, got, c.want)
		}
	}
	if got := IndexerWorkspaceBytes(a, BuildOptions{}, 0, 0); got != 0 {
		t.Errorf("an engine that reserves none: %.0f B, want 0", got)
	}
	if got := IndexerWorkspaceBytes(mustPreset(t, "kimi-k2.5"), BuildOptions{}, 40, 0); got != 0 {
		t.Errorf("Kimi-K2.5 (no indexer): %.0f B, want 0", got)
	}

	mem := 97887.0 * (1 << 20) // RTX PRO 6000 Blackwell, nvidia-smi 97,887 MiB
	w, p := Workload{KVDtype: FP8}, Plan{TP: 8}
	base := KVCapacity(a, p, w, BuildOptions{}, mem, 0.865)
	c := WithIndexerWorkspace(KVCapacity, 40, 65536, false, 0)(a, p, w, BuildOptions{}, mem, 0.865)
	ws := 40.0 * 65536 * perEntryB
	left := 0.865*mem - base.WeightBytes - base.ActivationBytes - ws
	if want := int64(left / base.KVBytesPerToken); c.KVCapacityTokens != want || c.KVBytes != left || c.IndexerWSBytes != ws {
		t.Errorf("pool %d tokens, %.0f B, workspace %.0f B; want %d tokens of (0.865 x mem - weights - activations - %.0f) = %.0f B", c.KVCapacityTokens, c.KVBytes, c.IndexerWSBytes, want, ws, left)
	}
	if c.ActivationBytes != base.ActivationBytes+ws || c.WeightBytes != base.WeightBytes || c.UsableBytes != base.UsableBytes {
		t.Errorf("activations %.0f, want the rule's %.0f + the workspace %.0f; weights and budget unchanged: %+v vs %+v", c.ActivationBytes, base.ActivationBytes, ws, c, base)
	}
	if c := WithIndexerWorkspace(KVCapacity, 40, 0, false, 0)(a, p, w, BuildOptions{DenseDSA: true}, mem, 0.865); c != KVCapacity(a, p, w, BuildOptions{DenseDSA: true}, mem, 0.865) {
		t.Errorf("dense DSA: %+v, want the rule's own", c)
	}
	if c := WithIndexerWorkspace(KVCapacity, 40, 0, false, 0)(a, p, w, BuildOptions{}, 0.55*mem, 0.865); c.KVCapacityTokens != 0 || c.WeightsDoNotFitBy <= 0 {
		t.Errorf("weights alone over the budget: %d tokens, short %.0f B; want none, short", c.KVCapacityTokens, c.WeightsDoNotFitBy)
	}
	// Where the MoE kernel's intermediate caches live in the same
	// workspace buffer (vLLM's modular Triton and Marlin experts), the
	// buffer is the larger of the two: only the indexer's part above the
	// routed caches the activations count comes on top. GLM-5 at TP 8 and
	// the profile's 8,192 tokens: top-8 copies of the 6,144 hidden values
	// and 2 x 2,048 / 8 gate_up values a token, bf16: 8,192 x 8 x (6,144 +
	// 512) x 2 B = 872,415,232 B.
	routed := 8192.0 * 8 * (6144 + 2*2048/8) * 2
	for _, c := range []struct {
		maxLen int
		want   float64
	}{
		{0, 40*202752*perEntryB - routed},
		{65536, 0}, // 346,030,080 B, under the routed caches
	} {
		got := WithIndexerWorkspace(KVCapacity, 40, c.maxLen, true, 0)(a, p, w, BuildOptions{}, mem, 0.865)
		if got.IndexerWSBytes != c.want || got.ActivationBytes != base.ActivationBytes+c.want {
			t.Errorf("shared buffer, max_model_len %d: workspace on top %.0f B, activations %.0f; want %.0f on top of %.0f", c.maxLen, got.IndexerWSBytes, got.ActivationBytes, c.want, base.ActivationBytes)
		}
	}
}
