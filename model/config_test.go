package model

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestParseReferenceConfigs parses the real Hugging Face files and checks
// dims and per-component quantization against what the files say (the
// expected values were read off the JSON by hand; see SOURCES.md there).
func TestParseReferenceConfigs(t *testing.T) {
	type want struct {
		modelType                                         string
		layers, dense, heads, hidden, experts, vocab, mtp int
		qlora, nope, v                                    int
		indexHeads, indexDim, indexTopK                   int
		attn, shared, dense_, routed, lmHead, indexer     Dtype
		mtpExcluded                                       bool
		kv                                                Dtype
	}
	cases := []struct {
		name       string
		cfg, quant string
		want       want
	}{
		{
			// text_config dims; text_config.quantization_config INT4 g32 with
			// ignore lm_head, self_attn, shared_experts, dense mlp; kv null.
			name: "kimi-k2.5-int4", cfg: "moonshotai--Kimi-K2.5_config.json",
			want: want{modelType: "kimi_k25", layers: 61, dense: 1, heads: 64, hidden: 7168, experts: 384, vocab: 163840,
				qlora: 1536, nope: 128, v: 128,
				attn: BF16, shared: BF16, dense_: BF16, routed: INT4G32, lmHead: BF16, indexer: BF16, kv: BF16},
		},
		{
			// top-level ModelOpt NVFP4; ignore only lm_head and self_attn, so
			// shared experts and the dense layer are NVFP4; kv_cache_scheme fp8.
			name: "kimi-k2.5-nvfp4", cfg: "nvidia--Kimi-K2.5-NVFP4_config.json",
			want: want{modelType: "kimi_k25", layers: 61, dense: 1, heads: 64, hidden: 7168, experts: 384, vocab: 163840,
				qlora: 1536, nope: 128, v: 128,
				attn: BF16, shared: NVFP4, dense_: NVFP4, routed: NVFP4, lmHead: BF16, indexer: BF16, kv: FP8},
		},
		{
			// hf_quant_config.json decides: excludes layers.0* (dense layer),
			// every shared_experts and self_attn, lm_head; kv FP8.
			name: "kimi-k2.6-nvfp4+hf_quant", cfg: "nvidia--Kimi-K2.6-NVFP4_config.json", quant: "nvidia--Kimi-K2.6-NVFP4_hf_quant_config.json",
			want: want{modelType: "kimi_k25", layers: 61, dense: 1, heads: 64, hidden: 7168, experts: 384, vocab: 163840,
				qlora: 1536, nope: 128, v: 128,
				attn: BF16, shared: BF16, dense_: BF16, routed: NVFP4, lmHead: BF16, indexer: BF16, kv: FP8},
		},
		{
			// fp8 e4m3 weight_block_size [128,128]; lm_head stays bf16 in
			// DeepSeek's checkpoint; no kv quantization; one MTP layer.
			name: "deepseek-v3", cfg: "deepseek-ai--DeepSeek-V3_config.json",
			want: want{modelType: "deepseek_v3", layers: 61, dense: 3, heads: 128, hidden: 7168, experts: 256, vocab: 129280, mtp: 1,
				qlora: 1536, nope: 128, v: 128,
				attn: FP8Block128, shared: FP8Block128, dense_: FP8Block128, routed: FP8Block128, lmHead: BF16, indexer: BF16, kv: BF16},
		},
		{
			name: "kimi-k2-instruct", cfg: "moonshotai--Kimi-K2-Instruct_config.json",
			want: want{modelType: "kimi_k2", layers: 61, dense: 1, heads: 64, hidden: 7168, experts: 384, vocab: 163840,
				qlora: 1536, nope: 128, v: 128,
				attn: FP8Block128, shared: FP8Block128, dense_: FP8Block128, routed: FP8Block128, lmHead: BF16, indexer: BF16, kv: BF16},
		},
		{
			// hf_quant: NVFP4, kv_cache_quant_algo null, excludes self_attn*,
			// gates, norms, layer 61 (MTP), lm_head, embed_tokens.
			name: "deepseek-v3-0324-nvfp4", cfg: "nvidia--DeepSeek-V3-0324-NVFP4_config.json", quant: "nvidia--DeepSeek-V3-0324-NVFP4_hf_quant_config.json",
			want: want{modelType: "deepseek_v3", layers: 61, dense: 3, heads: 128, hidden: 7168, experts: 256, vocab: 129280, mtp: 1,
				qlora: 1536, nope: 128, v: 128,
				attn: BF16, shared: NVFP4, dense_: NVFP4, routed: NVFP4, lmHead: BF16, indexer: BF16, mtpExcluded: true, kv: BF16},
		},
		{
			name: "glm-5-bf16", cfg: "zai-org--GLM-5_config.json",
			want: want{modelType: "glm_moe_dsa", layers: 78, dense: 3, heads: 64, hidden: 6144, experts: 256, vocab: 154880, mtp: 1,
				qlora: 2048, nope: 192, v: 256, indexHeads: 32, indexDim: 128, indexTopK: 2048,
				attn: BF16, shared: BF16, dense_: BF16, routed: BF16, lmHead: BF16, indexer: BF16, kv: BF16},
		},
		{
			// hf_quant: NVFP4, kv FP8, excludes attention projections, indexer*,
			// layer 78 (MTP), lm_head.
			name: "glm-5-nvfp4", cfg: "zai-org--GLM-5_config.json", quant: "nvidia--GLM-5-NVFP4_hf_quant_config.json",
			want: want{modelType: "glm_moe_dsa", layers: 78, dense: 3, heads: 64, hidden: 6144, experts: 256, vocab: 154880, mtp: 1,
				qlora: 2048, nope: 192, v: 256, indexHeads: 32, indexDim: 128, indexTopK: 2048,
				attn: BF16, shared: NVFP4, dense_: NVFP4, routed: NVFP4, lmHead: BF16, indexer: BF16, mtpExcluded: true, kv: FP8},
		},
		{
			// fp8 block-128 with modules_to_not_convert listing norms, gates,
			// indexers_proj, eh_proj, embed, lm_head: the indexer's wq_b/wk and
			// the MTP layer's experts are FP8.
			name: "glm-5-fp8", cfg: "zai-org--GLM-5-FP8_config.json",
			want: want{modelType: "glm_moe_dsa", layers: 78, dense: 3, heads: 64, hidden: 6144, experts: 256, vocab: 154880, mtp: 1,
				qlora: 2048, nope: 192, v: 256, indexHeads: 32, indexDim: 128, indexTopK: 2048,
				attn: FP8Block128, shared: FP8Block128, dense_: FP8Block128, routed: FP8Block128, lmHead: BF16, indexer: FP8Block128, kv: BF16},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := parseRef(t, c.cfg, c.quant)
			got := want{modelType: a.ModelType, layers: a.Layers, dense: a.DenseLayers, heads: a.Heads, hidden: a.Hidden,
				experts: a.RoutedExperts, vocab: a.Vocab, mtp: a.MTPLayers, qlora: a.QLoraRank, nope: a.QKNopeHeadDim, v: a.VHeadDim,
				indexHeads: a.IndexHeads, indexDim: a.IndexHeadDim, indexTopK: a.IndexTopK,
				attn: a.Quant.Attention, shared: a.Quant.SharedExperts, dense_: a.Quant.DenseMLP, routed: a.Quant.RoutedExperts,
				lmHead: a.Quant.LMHead, indexer: a.Quant.Indexer, mtpExcluded: a.Quant.MTPExcluded, kv: a.Quant.KV}
			if got != c.want {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
			// Shared by all: top-8 routing, 1 shared expert, 512 + 64 latent,
			// moe_intermediate 2048; embedding and router never quantized.
			if a.TopK != 8 || a.SharedExperts != 1 || a.KVLoraRank != 512 || a.QKRopeHeadDim != 64 || a.MoEIntermediate != 2048 {
				t.Errorf("common dims: topk %d shared %d kv_lora %d rope %d moe_inter %d", a.TopK, a.SharedExperts, a.KVLoraRank, a.QKRopeHeadDim, a.MoEIntermediate)
			}
			if a.Quant.Embedding != BF16 || a.Quant.Router != BF16 {
				t.Errorf("embedding %s router %s, want bf16", a.Quant.Embedding, a.Quant.Router)
			}
		})
	}
}

// TestLoadDirAndFile: Load accepts a directory (config.json plus an
// optional hf_quant_config.json) or a single file.
func TestLoadDirAndFile(t *testing.T) {
	cfg := readRef(t, "zai-org--GLM-5_config.json")
	quant := readRef(t, "nvidia--GLM-5-NVFP4_hf_quant_config.json")
	dir := t.TempDir()
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("config.json", cfg)
	write("hf_quant_config.json", quant)
	write("other.json", cfg)
	write("zai-org--GLM-5_config.json", cfg)
	sibling := filepath.Join(dir, "hf_quant_config.json")
	cases := []struct {
		name, path string
		routed     Dtype  // NVFP4 when hf_quant_config.json was picked up
		source     string // Quant.Source.File: the file that set it
	}{
		{"dir", dir, NVFP4, sibling},
		{"config.json picks up its sibling", filepath.Join(dir, "config.json"), NVFP4, sibling},
		{"*config.json under another name picks up its sibling", filepath.Join(dir, "zai-org--GLM-5_config.json"), NVFP4, sibling},
		{"other file alone", filepath.Join(dir, "other.json"), BF16, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := Load(c.path)
			if err != nil {
				t.Fatal(err)
			}
			if a.Quant.RoutedExperts != c.routed || a.Layers != 78 {
				t.Errorf("routed %s layers %d, want %s 78", a.Quant.RoutedExperts, a.Layers, c.routed)
			}
			if a.Quant.Source.File != c.source {
				t.Errorf("quantization source %q, want %q", a.Quant.Source.File, c.source)
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		_, err := Load(filepath.Join(dir, "nope"))
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Fatalf("err %v, want *ConfigError", err)
		}
	})
}

// TestLoadPairedHFQuant: a config kept under a prefix reads the
// quantization file kept under the same prefix, as aiconfigurator's
// model_configs/ keeps nvidia/DeepSeek-V3-0324-FP4's two files
// (nvidia--DeepSeek-V3-0324-NVFP4_config.json, whose config has no
// quantization_config, and nvidia--DeepSeek-V3-0324-NVFP4_hf_quant_config.json:
// NVFP4 group 16, kv_cache_quant_algo null). Without it the checkpoint
// loaded as BF16. Beside a plain hf_quant_config.json of another
// checkpoint (FP8 here), the paired file is still the one read.
func TestLoadPairedHFQuant(t *testing.T) {
	const cfgName, quantName = "nvidia--DeepSeek-V3-0324-NVFP4_config.json", "nvidia--DeepSeek-V3-0324-NVFP4_hf_quant_config.json"
	dir := t.TempDir()
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(cfgName, readRef(t, cfgName))
	write(quantName, readRef(t, quantName))
	check := func(t *testing.T) {
		a, err := Load(filepath.Join(dir, cfgName))
		if err != nil {
			t.Fatal(err)
		}
		if a.Quant.RoutedExperts != NVFP4 || a.Quant.KV != BF16 {
			t.Errorf("routed experts %s, KV %s, want nvfp4 bf16 (kv_cache_quant_algo null)", a.Quant.RoutedExperts, a.Quant.KV)
		}
		if want := filepath.Join(dir, quantName); a.Quant.Source.File != want {
			t.Errorf("quantization source %q, want %q", a.Quant.Source.File, want)
		}
	}
	t.Run("alone", check)
	write("hf_quant_config.json", []byte(`{"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}`))
	t.Run("beside another checkpoint's hf_quant_config.json", check)
}

// TestConfigQuantizationWinsOverHFQuant: a config.json with a
// quantization_config of its own keeps it when an hf_quant_config.json lies
// beside it, as vLLM's get_config reads the latter only for a config
// without one. DeepSeek-V3's config.json is FP8 block-128 (its
// quantization_config: quant_method fp8, weight_block_size [128, 128]);
// the NVFP4 hf_quant_config.json beside it is not read, and the source
// says so.
func TestConfigQuantizationWinsOverHFQuant(t *testing.T) {
	dir := t.TempDir()
	cfgPath, quantPath := filepath.Join(dir, "config.json"), filepath.Join(dir, "hf_quant_config.json")
	if err := os.WriteFile(cfgPath, readRef(t, "deepseek-ai--DeepSeek-V3_config.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(quantPath, readRef(t, "nvidia--DeepSeek-V3-0324-NVFP4_hf_quant_config.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if a.Quant.Method != "fp8" || a.Quant.RoutedExperts != FP8Block128 || a.Quant.Attention != FP8Block128 {
		t.Errorf("method %q routed %s attention %s, want fp8 fp8-block128 fp8-block128", a.Quant.Method, a.Quant.RoutedExperts, a.Quant.Attention)
	}
	want := QuantSource{File: cfgPath, Field: "quantization_config", Unread: quantPath}
	if a.Quant.Source != want {
		t.Errorf("source %+v, want %+v", a.Quant.Source, want)
	}
	if s := a.Quant.Source.String(); !strings.Contains(s, quantPath+" not read") {
		t.Errorf("source %q does not say %s was not read", s, quantPath)
	}
}

// tinyConfig is a valid deepseek_v3 config as a map for mutation.
func tinyConfig() map[string]any {
	return map[string]any{
		"model_type": "deepseek_v3", "hidden_size": 256, "num_hidden_layers": 4, "first_k_dense_replace": 1,
		"num_attention_heads": 8, "q_lora_rank": 128, "kv_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
		"v_head_dim": 32, "intermediate_size": 512, "moe_intermediate_size": 128, "n_routed_experts": 16,
		"n_shared_experts": 1, "num_experts_per_tok": 4, "vocab_size": 1024,
	}
}

func mustJSON(t testing.TB, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseErrors: each malformed or unsupported config gets a one-line
// *ConfigError naming the file, the field and the expectation.
func TestParseErrors(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(m map[string]any)
		raw    string // used instead of the mutated map when set
		quant  string
		file   string
		field  string
		msg    string // substring of Error()
	}{
		{name: "missing heads", mutate: func(m map[string]any) { delete(m, "num_attention_heads") },
			file: "config.json", field: "num_attention_heads",
			msg: `config.json: field "num_attention_heads": missing, want a positive integer`},
		{name: "negative hidden", mutate: func(m map[string]any) { m["hidden_size"] = -3 },
			file: "config.json", field: "hidden_size", msg: "got -3, want a positive integer"},
		{name: "string layers", mutate: func(m map[string]any) { m["num_hidden_layers"] = "61" },
			file: "config.json", field: "num_hidden_layers", msg: `got string "61"`},
		{name: "fractional", mutate: func(m map[string]any) { m["kv_lora_rank"] = 64.5 },
			file: "config.json", field: "kv_lora_rank", msg: "got 64.5"},
		{name: "unknown model_type", mutate: func(m map[string]any) { m["model_type"] = "llama" },
			file: "config.json", field: "model_type", msg: `"llama", want one of deepseek_v3`},
		{name: "missing model_type", mutate: func(m map[string]any) { delete(m, "model_type") },
			file: "config.json", field: "model_type", msg: "missing, want a string"},
		{name: "kimi_k25 without text_config", mutate: func(m map[string]any) { m["model_type"] = "kimi_k25" },
			file: "config.json", field: "text_config", msg: "missing"},
		{name: "kimi_k25 text_config missing field", mutate: func(m map[string]any) {
			inner := tinyConfig()
			delete(inner, "vocab_size")
			for k := range m {
				delete(m, k)
			}
			m["model_type"] = "kimi_k25"
			m["text_config"] = inner
		}, file: "config.json", field: "text_config.vocab_size", msg: "missing"},
		{name: "glm without indexer", mutate: func(m map[string]any) { m["model_type"] = "glm_moe_dsa" },
			file: "config.json", field: "index_n_heads", msg: "missing"},
		{name: "topk above experts", mutate: func(m map[string]any) { m["num_experts_per_tok"] = 17 },
			file: "config.json", field: "num_experts_per_tok", msg: "at most n_routed_experts (16)"},
		{name: "moe_layer_freq 2", mutate: func(m map[string]any) { m["moe_layer_freq"] = 2 },
			file: "config.json", field: "moe_layer_freq", msg: "want 1"},
		{name: "unknown quant method", mutate: func(m map[string]any) { m["quantization_config"] = map[string]any{"quant_method": "gptq"} },
			file: "config.json", field: "quantization_config.quant_method", msg: `"gptq"`},
		{name: "fp8 block 64", mutate: func(m map[string]any) {
			m["quantization_config"] = map[string]any{"quant_method": "fp8", "weight_block_size": []int{64, 64}}
		}, file: "config.json", field: "quantization_config.weight_block_size", msg: "want [128, 128]"},
		{name: "bad ignore regexp", mutate: func(m map[string]any) {
			m["quantization_config"] = map[string]any{"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": []string{"re:(unclosed"}}
		}, file: "config.json", field: "quantization_config.ignore[0]", msg: "want a valid pattern"},
		{name: "int8 groups unsupported", mutate: func(m map[string]any) {
			m["quantization_config"] = map[string]any{"quant_method": "compressed-tensors",
				"config_groups": map[string]any{"g": map[string]any{"weights": map[string]any{"num_bits": 8, "type": "int"}}}}
		}, file: "config.json", field: "quantization_config.config_groups.g.weights", msg: `type "int" num_bits 8`},
		{name: "sparse 2:4 format", mutate: func(m map[string]any) {
			m["quantization_config"] = map[string]any{"quant_method": "compressed-tensors", "format": "marlin-24",
				"config_groups": map[string]any{"g": map[string]any{"targets": []string{"Linear"}, "weights": map[string]any{"num_bits": 4, "type": "int", "group_size": 32, "symmetric": true}}}}
		}, file: "config.json", field: "quantization_config.format", msg: `"marlin-24", want a dense format (pack-quantized`},
		{name: "sparsity config", mutate: func(m map[string]any) {
			m["quantization_config"] = map[string]any{"quant_method": "compressed-tensors", "format": "pack-quantized",
				"sparsity_config": map[string]any{"format": "sparse-24-bitmask", "sparsity_structure": "2:4"},
				"config_groups":   map[string]any{"g": map[string]any{"targets": []string{"Linear"}, "weights": map[string]any{"num_bits": 4, "type": "int", "group_size": 32, "symmetric": true}}}}
		}, file: "config.json", field: "quantization_config.sparsity_config", msg: "want null: sparse weights are not modelled"},
		{name: "asymmetric int4", mutate: func(m map[string]any) {
			m["quantization_config"] = map[string]any{"quant_method": "compressed-tensors", "format": "pack-quantized",
				"config_groups": map[string]any{"g": map[string]any{"targets": []string{"Linear"}, "weights": map[string]any{"num_bits": 4, "type": "int", "group_size": 32, "symmetric": false}}}}
		}, file: "config.json", field: "quantization_config.config_groups.g.weights.symmetric", msg: "got false, want true: asymmetric INT4"},
		{name: "truncated", raw: "{\"model_type\": ", file: "config.json", msg: "config.json: truncated: the JSON ends inside a value"},
		{name: "empty", raw: " ", file: "config.json", msg: "config.json: empty: want a JSON object"},
		{name: "not json", raw: "model_type: deepseek_v3", file: "config.json", msg: "config.json: line 1: not JSON: invalid character 'm'"},
		// Per-dim bounds (far above real models: see maxHeadDim, maxRank).
		{name: "head dim above its bound", mutate: func(m map[string]any) { m["qk_nope_head_dim"] = 8192 },
			file: "config.json", field: "qk_nope_head_dim", msg: "got 8192, want a positive integer (at most 4096)"},
		{name: "lora rank above its bound", mutate: func(m map[string]any) { m["kv_lora_rank"] = 1 << 17 },
			file: "config.json", field: "kv_lora_rank", msg: "want a positive integer (at most 65536)"},
		{name: "index_topk above the longest context", mutate: func(m map[string]any) {
			m["model_type"], m["index_n_heads"], m["index_head_dim"], m["index_topk"] = "glm_moe_dsa", 4, 32, 1<<25
		}, file: "config.json", field: "index_topk", msg: "at most 16777216"},
		// Products: every dim within its bound, the product not. Routed
		// experts: 1023 MoE layers x 2^14 experts x 3 x 2^20 x 2^20 =
		// 3069 x 2^54 = 5.53e19 parameters > 2^50 = 1.13e15.
		{name: "parameters overflow", mutate: func(m map[string]any) {
			m["num_hidden_layers"], m["n_routed_experts"], m["hidden_size"], m["moe_intermediate_size"] = 1024, 1<<14, 1<<20, 1<<20
		}, file: "config.json", field: "num_hidden_layers x n_routed_experts x hidden_size x moe_intermediate_size",
			msg: "5.53e+19 of them in routed experts, want at most 1125899906842624 (2^50) parameters"},
		// KV per token: 1024 layers x (65536 + 4096) values x 4 B =
		// 285,212,672 B > 4 MiB (parameters stay small: hidden 256).
		{name: "kv cache per token overflow", mutate: func(m map[string]any) {
			m["num_hidden_layers"], m["kv_lora_rank"], m["qk_rope_head_dim"] = 1024, 1<<16, 1<<12
		}, file: "config.json", field: "(num_hidden_layers + num_nextn_predict_layers) x (kv_lora_rank + qk_rope_head_dim)",
			msg: "got 285212672 bytes of KV cache per token at 4 bytes per value, want at most 4194304"},
		{name: "array", raw: "[1,2]", file: "config.json", msg: "got an array, want a JSON object"},
		{name: "hf_quant unknown algo", quant: `{"quantization": {"quant_algo": "INT8"}}`,
			file: "hf_quant_config.json", field: "quantization.quant_algo", msg: `"INT8", want "NVFP4" or "FP8"`},
		{name: "hf_quant without quantization", quant: `{"producer": {}}`,
			file: "hf_quant_config.json", field: "quantization", msg: "missing, want an object"},
		{name: "hf_quant nvfp4 group 32", quant: `{"quantization": {"quant_algo": "NVFP4", "group_size": 32}}`,
			file: "hf_quant_config.json", field: "quantization.group_size", msg: "want 16 for NVFP4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := tinyConfig()
			if c.mutate != nil {
				c.mutate(m)
			}
			data := mustJSON(t, m)
			if c.raw != "" {
				data = []byte(c.raw)
			}
			var quant []byte
			if c.quant != "" {
				quant = []byte(c.quant)
			}
			_, err := parse("dir/config.json", data, "dir/hf_quant_config.json", quant)
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("err = %v, want *ConfigError", err)
			}
			if ce.File != c.file || ce.Field != c.field {
				t.Errorf("file %q field %q, want %q %q", ce.File, ce.Field, c.file, c.field)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("message %q lacks %q", err.Error(), c.msg)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("message is not one line: %q", err.Error())
			}
		})
	}
}

// TestIgnorePatterns checks the three pattern forms against module names.
func TestIgnorePatterns(t *testing.T) {
	cases := []struct {
		pattern, name string
		match         bool
	}{
		{"lm_head", "lm_head", true},
		{"lm_head", "language_model.lm_head", true}, // dotted suffix
		{"lm_head", "model.lm_head_extra", false},
		{"model.layers.*.self_attn*", "model.layers.7.self_attn.o_proj", true},
		{"model.layers.1*", "model.layers.12.mlp.gate_proj", true}, // fnmatch: * crosses dots
		{"model.layers.0*", "model.layers.1.mlp.gate_proj", false},
		{`re:.*mlp\.(gate|up|gate_up|down)_proj.*`, "model.layers.0.mlp.gate_proj", true},
		{`re:.*mlp\.(gate|up|gate_up|down)_proj.*`, "model.layers.1.mlp.experts.3.gate_proj", false},
		{`re:.*shared_experts.*`, "model.layers.1.mlp.shared_experts.down_proj", true},
		{"model.layers.3.mlp.gate", "model.layers.3.mlp.gate_proj", false},
	}
	for _, c := range cases {
		t.Run(c.pattern+"~"+c.name, func(t *testing.T) {
			res, err := parsePatterns("f", "ignore", []any{c.pattern})
			if err != nil {
				t.Fatal(err)
			}
			s := quantSpec{ignore: res}
			if got := s.excluded(c.name); got != c.match {
				t.Errorf("match = %v, want %v", got, c.match)
			}
		})
	}
}

// FuzzParse: no input makes the parser panic; every failure is a
// *ConfigError; every success has positive dims and consistent counts.
// Seeds: the built-in presets, the tiny config, a few broken files, and the
// reference configs when present (testdata/fuzz/FuzzParse holds more).
func FuzzParse(f *testing.F) {
	entries, _ := presetFS.ReadDir("presets")
	for _, e := range entries {
		b, _ := presetFS.ReadFile("presets/" + e.Name())
		f.Add(b, []byte(nil))
	}
	tiny, _ := json.Marshal(tinyConfig())
	f.Add(tiny, []byte(`{"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head", "re:["]}}`))
	f.Add([]byte(`{"model_type":"kimi_k25","text_config":{"model_type":"kimi_k2"}}`), []byte(nil))
	f.Add([]byte(`{"model_type":"glm_moe_dsa","hidden_size":1e400}`), []byte(`[]`))
	// Every dim within its bound, their products not (parameters, KV).
	huge := tinyConfig()
	huge["num_hidden_layers"], huge["n_routed_experts"], huge["hidden_size"], huge["moe_intermediate_size"] = 1024, 1<<14, 1<<20, 1<<20
	b, _ := json.Marshal(huge)
	f.Add(b, []byte(nil))
	huge = tinyConfig()
	huge["num_hidden_layers"], huge["kv_lora_rank"], huge["qk_rope_head_dim"] = 1024, 1<<16, 1<<12
	b, _ = json.Marshal(huge)
	f.Add(b, []byte(nil))
	f.Add([]byte(""), []byte(nil))
	f.Add([]byte(`{"model_type":`), []byte(`{"quantization":`))
	// The checkpoints' configs the serving tests run (DeepSeek-R1-0528-FP4
	// with its hf_quant_config.json, GLM-5-FP8), and the first with an
	// empty quantization file beside it.
	for _, d := range []string{"deepseek-r1-0528-fp4", "glm-5-fp8"} {
		dir := filepath.Join("..", "serving", "testdata", "models", d)
		cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
		if err != nil {
			continue
		}
		quant, err := os.ReadFile(filepath.Join(dir, quantConfigName))
		if err != nil {
			quant = nil
		}
		f.Add(cfg, quant)
		f.Add(cfg, []byte{})
	}
	if ents, err := os.ReadDir(refDir); err == nil {
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), "_config.json") && !strings.Contains(e.Name(), "hf_quant") {
				b, _ := os.ReadFile(filepath.Join(refDir, e.Name()))
				f.Add(b, []byte(nil))
			}
		}
	}
	f.Fuzz(func(t *testing.T, cfg, quant []byte) {
		a, err := parse("config.json", cfg, "hf_quant_config.json", quant)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *ConfigError", err)
			}
			if ce.File == "" || strings.Contains(err.Error(), "\n") {
				t.Fatalf("bad error message %q", err.Error())
			}
			return
		}
		if a.Hidden < 1 || a.Layers < 1 || a.Heads < 1 || a.TopK > a.RoutedExperts || a.DenseLayers > a.Layers {
			t.Fatalf("accepted inconsistent arch %+v", a)
		}
		for _, c := range Components {
			if !a.Quant.Dtype(c).Valid() {
				t.Fatalf("component %s has invalid dtype %q", c, a.Quant.Dtype(c))
			}
		}
		if p := a.Params(); !(p.Total > 0 && p.Active > 0 && p.Active <= p.Total) {
			t.Fatalf("params %+v", p)
		}
		// Whatever parses must build and summarize without panicking
		// (small models only, to keep fuzzing fast).
		if a.Layers <= 64 && a.Hidden <= 8192 {
			w := Workload{Batch: 2, Context: 3}
			if a.MTPLayers > 0 {
				w.SpecTokens = 1
			}
			if _, err := Build(a, Plan{}, w); err != nil {
				t.Fatalf("TP-1 build of an accepted config failed: %v", err)
			}
			_ = Summarize(a, Plan{}, w, BuildOptions{}, 96e9, 0, nil)
		}
	})
}

// TestLoadNamesPath: errors of a loaded file name the path the user gave,
// not only its base name, and a directory without config.json says so.
func TestLoadNamesPath(t *testing.T) {
	dir := t.TempDir()
	m := tinyConfig()
	m["hidden_size"] = -1
	path := filepath.Join(dir, "my-config.json")
	if err := os.WriteFile(path, mustJSON(t, m), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+`: field "hidden_size": got -1`) {
		t.Errorf("Load(%s): %v", path, err)
	}
	_, err = Load(dir)
	want := filepath.Join(dir, "config.json") + ": no such file, want a config.json"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Load(dir without config.json): %v, want %q", err, want)
	}
}

// TestWorkloadBounds: batch x context is bounded so that the KV cache of
// the workload (tokens x at most maxKVBytesPerToken) fits int64 bytes.
func TestWorkloadBounds(t *testing.T) {
	cases := []struct {
		name string
		w    Workload
		want string // "" for valid
	}{
		{"2^40 tokens", Workload{Batch: 1 << 16, Context: 1 << 24}, ""},
		{"2^41 tokens", Workload{Batch: 1 << 17, Context: 1 << 24}, `field "batch" = 131072: want batch x context at most 1099511627776 cached tokens`},
		{"prefill 2^27 tokens", Workload{Phase: Prefill, Batch: 8, Context: 1 << 24}, "at most 67108864 tokens in one prefill step"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.w.Validate()
			if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
				t.Errorf("Validate() = %v, want %q", err, c.want)
			}
		})
	}
	// The bound times the per-token bound fits int64.
	if float64(maxKVTokens)*maxKVBytesPerToken >= math.MaxInt64 {
		t.Error("maxKVTokens x maxKVBytesPerToken overflows int64")
	}
}

// ctConfig is tinyConfig with a compressed-tensors quantization_config of
// the given config_groups and ignore list.
func ctConfig(groups map[string]any, ignore ...string) map[string]any {
	m := tinyConfig()
	qc := map[string]any{"quant_method": "compressed-tensors", "format": "float-quantized", "config_groups": groups}
	if ignore != nil {
		qc["ignore"] = ignore
	}
	m["quantization_config"] = qc
	return m
}

// fp8BlockGroup is llm-compressor's FP8_BLOCK scheme: e4m3 weights with one
// scale per 128 x 128 block, activations quantized dynamically per group of
// 128.
func fp8BlockGroup(targets ...string) map[string]any {
	return map[string]any{"targets": targets,
		"weights":           map[string]any{"num_bits": 8, "type": "float", "strategy": "block", "block_structure": []int{128, 128}, "symmetric": true, "dynamic": false},
		"input_activations": map[string]any{"num_bits": 8, "type": "float", "strategy": "group", "group_size": 128, "symmetric": true, "dynamic": true}}
}

// TestCompressedTensorsFP8Block: compressed-tensors FP8 with
// block_structure [128, 128] is the block-scaled format DeepSeek's fp8
// quantization_config with weight_block_size [128, 128] is (FP8Block128 on
// every linear), not per-tensor FP8; another block shape is refused naming
// the field.
func TestCompressedTensorsFP8Block(t *testing.T) {
	a, err := parse("config.json", mustJSON(t, ctConfig(map[string]any{"group_0": fp8BlockGroup("Linear")}, "lm_head")), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	ds := tinyConfig()
	ds["quantization_config"] = map[string]any{"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": []int{128, 128}}
	want, err := parse("config.json", mustJSON(t, ds), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Component{CompAttention, CompDenseMLP, CompSharedExperts, CompRoutedExperts, CompLMHead} {
		if got := a.Quant.Dtype(c); got != want.Quant.Dtype(c) {
			t.Errorf("%s: %s, want %s (as fp8 with weight_block_size [128, 128])", c, got, want.Quant.Dtype(c))
		}
	}
	if a.Quant.RoutedExperts != FP8Block128 {
		t.Errorf("routed experts %s, want fp8-block128", a.Quant.RoutedExperts)
	}
	g := fp8BlockGroup("Linear")
	g["weights"].(map[string]any)["block_structure"] = []int{64, 64}
	_, err = parse("config.json", mustJSON(t, ctConfig(map[string]any{"group_0": g})), "", nil)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "quantization_config.config_groups.group_0.weights.block_structure" || !strings.Contains(err.Error(), "[128, 128]") {
		t.Errorf("block [64, 64]: err %v, want one naming weights.block_structure and [128, 128]", err)
	}
}

// TestCompressedTensorsTargets: each component takes the dtype of the
// config group whose targets match its modules, as vLLM's
// find_matched_target does (a module-name target first, in group order,
// then "Linear"; no match leaves the module unquantized); a component whose
// modules land in different dtypes is refused naming config_groups.
func TestCompressedTensorsTargets(t *testing.T) {
	int4 := func(targets ...string) map[string]any {
		return map[string]any{"targets": targets, "input_activations": nil,
			"weights": map[string]any{"num_bits": 4, "type": "int", "group_size": 32, "strategy": "group", "symmetric": true}}
	}
	nvfp4 := func(targets ...string) map[string]any {
		return map[string]any{"targets": targets,
			"weights":           map[string]any{"num_bits": 4, "type": "float", "group_size": 16, "strategy": "tensor_group"},
			"input_activations": map[string]any{"num_bits": 4, "type": "float", "group_size": 16, "strategy": "tensor_group", "dynamic": "local"}}
	}
	type dtypes struct{ attn, dense, shared, routed, lmHead, mtp Dtype }
	cases := []struct {
		name   string
		groups map[string]any
		ignore []string
		want   dtypes
	}{
		// Only the routed experts are targeted: everything else matches
		// no group and stays bf16, as Kimi-K2.5's Linear + ignore list
		// (lm_head, self_attn, shared_experts, dense mlp) says it.
		{"experts only", map[string]any{"group_0": int4(`re:.*mlp\.experts.*`)}, nil,
			dtypes{BF16, BF16, BF16, INT4G32, BF16, INT4G32}},
		{"Linear with an ignore list", map[string]any{"group_0": int4("Linear")},
			[]string{"lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", `re:.*mlp\.(gate|up|gate_up|down)_proj.*`},
			dtypes{BF16, BF16, BF16, INT4G32, BF16, INT4G32}},
		// A name target wins over Linear whatever the group order:
		// attention FP8 block-128, every other linear NVFP4; lm_head is
		// no Linear and no name targets it.
		{"fp8-block attention, nvfp4 elsewhere", map[string]any{"group_0": nvfp4("Linear"), "group_1": fp8BlockGroup(`re:.*self_attn.*`)}, nil,
			dtypes{FP8Block128, NVFP4, NVFP4, NVFP4, BF16, NVFP4}},
		{"fp8-block attention, nvfp4 experts", map[string]any{"group_0": fp8BlockGroup(`re:.*self_attn.*`), "group_1": nvfp4(`re:.*mlp\.experts.*`)}, nil,
			dtypes{FP8Block128, BF16, BF16, NVFP4, BF16, NVFP4}},
		{"lm_head by name", map[string]any{"group_0": int4("Linear", "lm_head")}, nil,
			dtypes{INT4G32, INT4G32, INT4G32, INT4G32, INT4G32, INT4G32}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := parse("config.json", mustJSON(t, ctConfig(c.groups, c.ignore...)), "", nil)
			if err != nil {
				t.Fatal(err)
			}
			q := a.Quant
			got := dtypes{q.Attention, q.DenseMLP, q.SharedExperts, q.RoutedExperts, q.LMHead, q.MTP}
			if got != c.want {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}

	refused := []struct {
		name   string
		groups map[string]any
		field  string
		msg    string
	}{
		{"attention split over two dtypes", map[string]any{"group_0": nvfp4("Linear"), "group_1": fp8BlockGroup(`re:.*self_attn\.q_(a|b)_proj`)},
			"quantization_config.config_groups", "self_attn.q_a_proj in group_1 (fp8-block128) but model.layers.1.self_attn.kv_a_proj_with_mqa in group_0 (nvfp4)"},
		{"part of the experts left out", map[string]any{"group_0": int4(`re:.*experts\.\d+\.gate_proj`)},
			"quantization_config.config_groups", "gate_proj in group_0 (int4-g32) but model.layers.1.mlp.experts.0.down_proj in no group (bf16)"},
		{"no targets", map[string]any{"group_0": map[string]any{"weights": map[string]any{"num_bits": 4, "type": "int", "group_size": 32}}},
			"quantization_config.config_groups.group_0.targets", "missing, want an array of targets"},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse("config.json", mustJSON(t, ctConfig(c.groups)), "", nil)
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.File != "config.json" || ce.Field != c.field || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err %v, want config.json field %s with %q", err, c.field, c.msg)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("not one line: %q", err)
			}
		})
	}
}

// TestKimiTargetsEqualIgnoreList: moonshotai/Kimi-K2.5's INT4 checkpoint
// written with a group targeting only the routed experts (no ignore list)
// is the same quantization as the published file (Linear minus its ignore
// list): the same dtypes, so the same weights and KV capacity.
func TestKimiTargetsEqualIgnoreList(t *testing.T) {
	raw := readRef(t, "moonshotai--Kimi-K2.5_config.json")
	want, err := parse("config.json", raw, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	qc := m["text_config"].(map[string]any)["quantization_config"].(map[string]any)
	g := qc["config_groups"].(map[string]any)["group_0"].(map[string]any)
	g["targets"] = []any{`re:.*mlp\.experts.*`}
	delete(qc, "ignore")
	got, err := parse("config.json", mustJSON(t, m), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	got.Quant.Source, want.Quant.Source = QuantSource{}, QuantSource{}
	if got.Quant != want.Quant {
		t.Errorf("targets only:\n got  %+v\nwant %+v", got.Quant, want.Quant)
	}
}

// TestCompressedTensorsWeightOnlyRefused: NVFP4 or FP8 weights without
// input_activations are vLLM's weight-only Marlin schemes (NVFP4A16:
// CompressedTensorsW4A16Fp4; W8A16: CompressedTensorsW8A16Fp8), not the W4A4
// and W8A8 kernels nvfp4 and fp8 price, and INT4 g32 with quantized
// activations is not the W4A16 int4-g32 prices: each is refused in one line
// naming the group's input_activations.
func TestCompressedTensorsWeightOnlyRefused(t *testing.T) {
	group := func(weights, acts map[string]any) map[string]any {
		g := map[string]any{"targets": []string{"Linear"}, "weights": weights}
		if acts != nil {
			g["input_activations"] = acts
		} else {
			g["input_activations"] = nil
		}
		return map[string]any{"group_0": g}
	}
	fp4 := map[string]any{"num_bits": 4, "type": "float", "group_size": 16, "strategy": "tensor_group"}
	fp8 := map[string]any{"num_bits": 8, "type": "float", "strategy": "channel"}
	int4 := map[string]any{"num_bits": 4, "type": "int", "group_size": 32, "strategy": "group"}
	cases := []struct {
		name   string
		groups map[string]any
		msg    string
	}{
		{"nvfp4a16", group(fp4, nil), "NVFP4 weights only: vLLM runs them as NVFP4A16 with Marlin's weight-only FP4 kernels (CompressedTensorsW4A16Fp4)), want float 4-bit activations (NVFP4 W4A4)"},
		{"fp8 w8a16", group(fp8, nil), "(CompressedTensorsW8A16Fp8)), want float 8-bit activations (FP8 W8A8)"},
		{"nvfp4 weights, fp8 activations", group(fp4, map[string]any{"num_bits": 8, "type": "float"}), `type "float" num_bits 8, want float 4-bit activations`},
		{"int4 w4a8", group(int4, map[string]any{"num_bits": 8, "type": "int"}), "want null (INT4 group 32 is priced as W4A16"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse("config.json", mustJSON(t, ctConfig(c.groups)), "", nil)
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != "quantization_config.config_groups.group_0.input_activations" || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err %v, want one naming group_0.input_activations with %q", err, c.msg)
			}
		})
	}
	// With its activations each is the format it prices.
	for _, ok := range []struct {
		weights, acts map[string]any
		want          Dtype
	}{
		{fp4, map[string]any{"num_bits": 4, "type": "float", "group_size": 16}, NVFP4},
		{fp8, map[string]any{"num_bits": 8, "type": "float", "dynamic": true}, FP8},
		{int4, nil, INT4G32},
	} {
		a, err := parse("config.json", mustJSON(t, ctConfig(group(ok.weights, ok.acts))), "", nil)
		if err != nil || a.Quant.RoutedExperts != ok.want {
			t.Errorf("%v: err %v, want routed experts %s", ok.weights, err, ok.want)
		}
	}
}

// TestMaxModelLen: the longest sequence is derived as vLLM's
// _get_and_verify_max_len does: max_position_embeddings, times a
// rope_scaling factor (yarn: original_max_position_embeddings x factor;
// su, longrope and llama3 leave it). The reference files: DeepSeek-V3 yarn
// 4096 x 40 = 163840, Kimi-K2.5 4096 x 64 = 262144, Kimi-K2-Instruct 4096
// x 32 = 131072, GLM-5 max_position_embeddings 202752 without scaling.
func TestMaxModelLen(t *testing.T) {
	for _, c := range []struct {
		cfg  string
		want int
	}{
		{"deepseek-ai--DeepSeek-V3_config.json", 163840},
		{"moonshotai--Kimi-K2.5_config.json", 262144},
		{"moonshotai--Kimi-K2-Instruct_config.json", 131072},
		{"zai-org--GLM-5_config.json", 202752},
	} {
		if a := parseRef(t, c.cfg, ""); a.MaxModelLenTokens != c.want || len(a.Defaults) != 0 {
			t.Errorf("%s: max_model_len %d (defaults %v), want %d", c.cfg, a.MaxModelLenTokens, a.Defaults, c.want)
		}
	}
	cases := []struct {
		name   string
		mutate func(m map[string]any)
		want   int
	}{
		{"no scaling", func(m map[string]any) { m["max_position_embeddings"] = 8192 }, 8192},
		{"linear x4", func(m map[string]any) {
			m["max_position_embeddings"], m["rope_scaling"] = 8192, map[string]any{"type": "linear", "factor": 4}
		}, 32768},
		// yarn extends original_max_position_embeddings, whatever
		// max_position_embeddings says.
		{"yarn", func(m map[string]any) {
			m["max_position_embeddings"] = 4096
			m["rope_scaling"] = map[string]any{"rope_type": "yarn", "factor": 40, "original_max_position_embeddings": 4096}
		}, 163840},
		{"llama3 leaves it", func(m map[string]any) {
			m["max_position_embeddings"], m["rope_scaling"] = 131072, map[string]any{"rope_type": "llama3", "factor": 8}
		}, 131072},
		// Absent: DeepseekV3Config's default 4096.
		{"absent", func(m map[string]any) {}, 4096},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := tinyConfig()
			c.mutate(m)
			a, err := parse("config.json", mustJSON(t, m), "", nil)
			if err != nil {
				t.Fatal(err)
			}
			if a.MaxModelLenTokens != c.want {
				t.Errorf("max_model_len %d, want %d", a.MaxModelLenTokens, c.want)
			}
		})
	}
	m := tinyConfig()
	m["rope_scaling"] = map[string]any{"type": "yarn", "factor": 40}
	_, err := parse("config.json", mustJSON(t, m), "", nil)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "rope_scaling.original_max_position_embeddings" {
		t.Errorf("yarn without original_max_position_embeddings: err %v, want one naming it", err)
	}
}

// TestWorkloadAboveMaxModelLen: a context longer than the model is served
// at is refused naming the field and the limit (kimi-k2.5-nvfp4: 262144,
// nvidia/Kimi-K2.5-NVFP4's text_config max_position_embeddings, yarn 64 x
// 4096); the limit itself builds.
func TestWorkloadAboveMaxModelLen(t *testing.T) {
	a := mustPreset(t, "kimi-k2.5-nvfp4")
	if err := Validate(a, Plan{TP: 8}, Workload{Batch: 1, Context: 262144}, BuildOptions{}); err != nil {
		t.Errorf("context 262144: %v", err)
	}
	err := Validate(a, Plan{TP: 8}, Workload{Batch: 1, Context: 1 << 20}, BuildOptions{})
	var pe *PlanError
	if !errors.As(err, &pe) || pe.Field != "context" || pe.Value != "1048576" || !strings.Contains(pe.Want, "at most 262144 tokens") {
		t.Errorf("context 1M: err %v, want a context error naming 262144", err)
	}
}

// TestConfigDefaultsSaid: an optional field the config leaves out takes
// the default of the class vLLM reads the model type with, and
// Arch.Defaults says which: transformers' DeepseekV3Config has
// first_k_dense_replace 3, n_shared_experts 1 and no
// num_nextn_predict_layers (0 MTP layers); vLLM's own DeepseekV3Config,
// which it reads kimi_k2 with, has num_nextn_predict_layers 1;
// transformers' GlmMoeDsaConfig has max_position_embeddings 202752.
func TestConfigDefaultsSaid(t *testing.T) {
	cases := []struct {
		name      string
		modelType string
		drop      []string
		dense     int
		mtp       int
		maxPos    int
		defaults  []FieldDefault
	}{
		{"deepseek_v3", "deepseek_v3", []string{"first_k_dense_replace", "n_shared_experts"}, 3, 0, 4096, []FieldDefault{
			{"first_k_dense_replace", 3, "transformers' DeepseekV3Config"},
			{"n_shared_experts", 1, "transformers' DeepseekV3Config"},
			{"num_nextn_predict_layers", 0, "transformers' DeepseekV3Config"},
			{"max_position_embeddings", 4096, "transformers' DeepseekV3Config"}}},
		{"kimi_k2", "kimi_k2", nil, 1, 1, 4096, []FieldDefault{
			{"num_nextn_predict_layers", 1, "vLLM's DeepseekV3Config"},
			{"max_position_embeddings", 4096, "vLLM's DeepseekV3Config"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := tinyConfig()
			m["model_type"] = c.modelType
			for _, k := range c.drop {
				delete(m, k)
			}
			a, err := parse("config.json", mustJSON(t, m), "", nil)
			if err != nil {
				t.Fatal(err)
			}
			if a.DenseLayers != c.dense || a.MTPLayers != c.mtp || a.MaxPositionEmbeddings != c.maxPos || a.SharedExperts != 1 {
				t.Errorf("dense %d mtp %d max_pos %d shared %d, want %d %d %d 1", a.DenseLayers, a.MTPLayers, a.MaxPositionEmbeddings, a.SharedExperts, c.dense, c.mtp, c.maxPos)
			}
			if !slices.Equal(a.Defaults, c.defaults) {
				t.Errorf("defaults %v, want %v", a.Defaults, c.defaults)
			}
		})
	}
	m := tinyConfig()
	m["model_type"], m["index_n_heads"], m["index_head_dim"], m["index_topk"] = "glm_moe_dsa", 4, 32, 64
	a, err := parse("config.json", mustJSON(t, m), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.MaxModelLenTokens != 202752 {
		t.Errorf("glm_moe_dsa without max_position_embeddings: %d, want GlmMoeDsaConfig's 202752", a.MaxModelLenTokens)
	}
}

// TestMaxModelLenRopeParameters: a config written by newer transformers
// states its RoPE in rope_parameters, not rope_scaling, and vLLM derives
// max_model_len from it the same way (_get_and_verify_max_len): a factor
// times max_position_embeddings, or for yarn times
// original_max_position_embeddings; su, longrope and llama3 leave it; the
// legacy "type" key stands for rope_type; a block per layer type is read
// per type. Expected lengths are the products of the numbers written.
func TestMaxModelLenRopeParameters(t *testing.T) {
	yarn := func(factor int) map[string]any {
		return map[string]any{"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": 4096, "rope_theta": 50000, "beta_fast": 32, "beta_slow": 1}
	}
	for _, c := range []struct {
		name   string
		mutate func(m map[string]any)
		want   int
	}{
		// DeepseekV3Config's 4096 positions, yarn 4096 x 40.
		{"yarn", func(m map[string]any) { m["rope_parameters"] = yarn(40) }, 163840},
		// yarn below max_position_embeddings: vLLM serves 4096 x 10.
		{"yarn below max_position_embeddings", func(m map[string]any) {
			m["max_position_embeddings"], m["rope_parameters"] = 163840, yarn(10)
		}, 40960},
		{"legacy type key, linear x4", func(m map[string]any) {
			m["max_position_embeddings"], m["rope_parameters"] = 8192, map[string]any{"type": "linear", "factor": 4}
		}, 32768},
		{"default: rope_theta only", func(m map[string]any) {
			m["max_position_embeddings"], m["rope_parameters"] = 202752, map[string]any{"rope_type": "default", "rope_theta": 1000000}
		}, 202752},
		{"llama3 leaves it", func(m map[string]any) {
			m["max_position_embeddings"], m["rope_parameters"] = 131072, map[string]any{"rope_type": "llama3", "factor": 8}
		}, 131072},
		{"a block per layer type", func(m map[string]any) {
			m["rope_parameters"] = map[string]any{"full_attention": yarn(64), "sliding_attention": yarn(64)}
		}, 262144},
		{"rope_scaling beside it, the same", func(m map[string]any) {
			m["rope_parameters"], m["rope_scaling"] = yarn(32), map[string]any{"type": "yarn", "factor": 32, "original_max_position_embeddings": 4096}
		}, 131072},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := tinyConfig()
			c.mutate(m)
			a, err := parse("config.json", mustJSON(t, m), "", nil)
			if err != nil {
				t.Fatal(err)
			}
			if a.MaxModelLenTokens != c.want {
				t.Errorf("max_model_len %d, want %d", a.MaxModelLenTokens, c.want)
			}
		})
	}
	for _, c := range []struct {
		name   string
		mutate func(m map[string]any)
		field  string
	}{
		{"yarn without original_max_position_embeddings", func(m map[string]any) {
			m["rope_parameters"] = map[string]any{"rope_type": "yarn", "factor": 40}
		}, "rope_parameters.original_max_position_embeddings"},
		{"layer types scaled apart", func(m map[string]any) {
			m["rope_parameters"] = map[string]any{"full_attention": yarn(64), "sliding_attention": yarn(32)}
		}, "rope_parameters"},
		{"rope_scaling beside it, another", func(m map[string]any) {
			m["rope_parameters"], m["rope_scaling"] = yarn(32), map[string]any{"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096}
		}, "rope_parameters"},
		{"not an object", func(m map[string]any) { m["rope_parameters"] = 40 }, "rope_parameters"},
	} {
		m := tinyConfig()
		c.mutate(m)
		_, err := parse("config.json", mustJSON(t, m), "", nil)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field {
			t.Errorf("%s: err %v, want one naming %s", c.name, err, c.field)
		}
	}
	// Kimi-K2-Instruct's text config as transformers v5 writes it: its
	// rope_scaling (yarn 32 x 4096) and rope_theta in rope_parameters.
	var ref map[string]any
	if err := json.Unmarshal(readRef(t, "moonshotai--Kimi-K2-Instruct_config.json"), &ref); err != nil {
		t.Fatal(err)
	}
	rs := ref["rope_scaling"].(map[string]any)
	rs["rope_type"], rs["rope_theta"] = rs["type"], ref["rope_theta"]
	delete(rs, "type")
	ref["rope_parameters"], ref["max_position_embeddings"] = rs, 4096
	delete(ref, "rope_scaling")
	delete(ref, "rope_theta")
	a, err := parse("config.json", mustJSON(t, ref), "", nil)
	if err != nil {
		t.Fatalf("Kimi-K2-Instruct with rope_parameters: %v", err)
	}
	if a.MaxModelLenTokens != 131072 {
		t.Errorf("Kimi-K2-Instruct with rope_parameters: max_model_len %d, want 4096 x 32 = 131072", a.MaxModelLenTokens)
	}
}

// TestLoadQuantFileAsConfig: ModelOpt's quantization file given where a
// model config is wanted is refused as what it is, naming the config it
// belongs beside (the one that reads it): PREFIX_config.json beside
// PREFIX_hf_quant_config.json (aiconfigurator's pairs), config.json
// beside a plain hf_quant_config.json; when that config is not there the
// error says so. A quantization file under another name is told by its
// content (producer and quantization, no model_type). It had been read
// as a config: 'field "model_type": missing'.
func TestLoadQuantFileAsConfig(t *testing.T) {
	dir := t.TempDir()
	quant := readRef(t, "nvidia--DeepSeek-V3-0324-NVFP4_hf_quant_config.json")
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	paired := write("nvidia--DeepSeek-V3-0324-NVFP4_hf_quant_config.json", quant)
	write("nvidia--DeepSeek-V3-0324-NVFP4_config.json", readRef(t, "nvidia--DeepSeek-V3-0324-NVFP4_config.json"))
	sub := filepath.Join(dir, "ckpt")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(sub, "hf_quant_config.json")
	if err := os.WriteFile(plain, quant, 0o644); err != nil {
		t.Fatal(err)
	}
	renamed := write("quant.json", quant)
	for _, c := range []struct {
		path string
		want []string
	}{
		{paired, []string{paired + ": a quantization file (ModelOpt's hf_quant_config.json), not a model config",
			"pass " + filepath.Join(dir, "nvidia--DeepSeek-V3-0324-NVFP4_config.json") + ", the config beside it, which reads it"}},
		{plain, []string{plain + ": a quantization file", "pass " + filepath.Join(sub, "config.json") + " (or " + sub + "), the config it belongs beside; it is not there"}},
		{renamed, []string{renamed + ": a quantization file (ModelOpt's hf_quant_config.json: producer and quantization, no model_type), not a model config"}},
	} {
		_, err := Load(c.path)
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s: err %v, want a *ConfigError", c.path, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q, want %q", c.path, err, w)
			}
		}
		if strings.Contains(err.Error(), "model_type\": missing") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %q: want one line, not the missing model_type", c.path, err)
		}
	}
}

// TestLoadEmptyHFQuantConfig: an empty hf_quant_config.json beside a config
// without quantization_config is refused naming the file, not read as no
// quantization (which priced an NVFP4 checkpoint's weights as bf16).
func TestLoadEmptyHFQuantConfig(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), mustJSON(t, tinyConfig()), 0o644); err != nil {
		t.Fatal(err)
	}
	quant := filepath.Join(dir, "hf_quant_config.json")
	if err := os.WriteFile(quant, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := Load(dir)
	if err == nil {
		t.Fatalf("Load with an empty %s: accepted, quantization %q", quant, a.Quant.Method)
	}
	if want := quant + ": empty: want a JSON object"; err.Error() != want {
		t.Errorf("Load: %q, want %q", err, want)
	}
	// Without the file the same config loads unquantized.
	if err := os.Remove(quant); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err != nil {
		t.Errorf("Load without %s: %v", quant, err)
	}
}

// TestFloat32ConfigServedIn16Bits: a config whose torch_dtype is float32
// is served in 16 bits under the engines' default --dtype auto (vLLM's
// _resolve_auto_dtype downcasts float32 models to bfloat16 on CUDA), as a
// config that names no dtype is: its weights and KV cache take 2 bytes a
// value, not the 4 they had been priced at, and the summary says why its
// dtype is not the config's.
func TestFloat32ConfigServedIn16Bits(t *testing.T) {
	plain := tinyConfig()
	f32 := tinyConfig()
	f32["torch_dtype"] = "float32"
	a16, err := parse("config.json", mustJSON(t, plain), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	a32, err := parse("config.json", mustJSON(t, f32), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if a32.Quant.Base != BF16 || a32.Quant.KV != BF16 {
		t.Errorf("float32 config: base %s, KV %s; want bf16, bf16", a32.Quant.Base, a32.Quant.KV)
	}
	p := Plan{TP: 2}
	w16, w32 := a16.WeightMemory(p, false), a32.WeightMemory(p, false)
	for i := range w16 {
		if w32[i] != w16[i] {
			t.Errorf("%s: float32 config %+v, unnamed dtype %+v: want the same 16-bit bytes", w16[i].Component, w32[i], w16[i])
		}
	}
	if b := a32.Quant.BaseFrom; !strings.Contains(b, "torch_dtype float32") || !strings.Contains(b, "bf16") {
		t.Errorf("BaseFrom %q: want the config's float32 named and the bf16 it is served in", b)
	}
	if a16.Quant.BaseFrom != "" {
		t.Errorf("unnamed dtype: BaseFrom %q, want none", a16.Quant.BaseFrom)
	}
}
