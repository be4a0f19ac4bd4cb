package model

import (
	"embed"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
)

// Built-in architectures. Each preset is a small hand-written config in
// presets/NAME.json, in Hugging Face config.json form (so it goes through
// the same parser as users' files), holding only the fields tpscope reads
// and a "_source" line. Where the numbers come from:
//
//   - kimi-k2.5-nvfp4 (default): nvidia/Kimi-K2.5-NVFP4 config.json —
//     text_config dims (61 layers, first 1 dense, 64 heads, hidden 7168,
//     384 experts top-8, moe_inter 2048, vocab 163840) and the top-level
//     ModelOpt quantization_config (NVFP4 W4A4 group 16, FP8 KV via
//     kv_cache_scheme, ignore lm_head and all self_attn: shared experts and
//     the dense layer are NVFP4 in this checkpoint).
//   - kimi-k2.5: moonshotai/Kimi-K2.5 config.json — same dims,
//     compressed-tensors INT4 W4A16 group 32 on routed experts only
//     (ignore lm_head, self_attn, shared_experts, dense MLP), no KV scheme.
//   - deepseek-v3: deepseek-ai/DeepSeek-V3 config.json — 61 layers, first
//     3 dense, 128 heads, 256 experts top-8, vocab 129280, one MTP layer,
//     FP8 e4m3 with weight_block_size [128, 128].
//   - glm-5: zai-org/GLM-5 config.json — glm_moe_dsa, 78 layers, first 3
//     dense, 64 heads, hidden 6144, q_lora 2048, qk_nope 192, v_head 256,
//     256 experts top-8, vocab 154880, DSA indexer 32 x 128 top-2048, one
//     MTP layer, BF16.
//   - glm-5-nvfp4: glm-5's dims with nvidia/GLM-5-NVFP4
//     hf_quant_config.json (NVFP4 group 16, FP8 KV, exclude lm_head, the
//     attention projections and indexer of every layer, the MTP layer 78).
//   - tiny-mla-moe: tpscope's own small model with DeepSeek-V3's structure
//     (4 layers, first 1 dense, hidden 256, 8 heads, q_lora 128, kv_lora 64,
//     rope 16, nope 32, v 32, 16 experts top-4, moe_inter 128, 1 shared,
//     vocab 1024, one MTP layer, BF16) so CPU tests run in seconds.
//
// Each states max_position_embeddings and rope_scaling as its file does
// (the max_model_len vLLM derives from them bounds a workload's context);
// tiny-mla-moe takes DeepSeek-V3's 163840.
//
//go:embed presets/*.json
var presetFS embed.FS

// DefaultPreset is the architecture tpscope uses when none is named.
const DefaultPreset = "kimi-k2.5-nvfp4"

var (
	presetOnce sync.Once
	presetMap  map[string]*Arch
	presetErr  error
)

func loadPresets() {
	presetMap = map[string]*Arch{}
	entries, err := presetFS.ReadDir("presets")
	if err != nil {
		presetErr = err
		return
	}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".json")
		data, err := presetFS.ReadFile("presets/" + e.Name())
		if err != nil {
			presetErr = err
			return
		}
		a, err := parse("preset "+name, data, "", nil)
		if err != nil {
			presetErr = fmt.Errorf("built-in preset %s: %w", name, err)
			return
		}
		a.Name = name
		a.Ref = Ref{Name: name}
		// A preset has no file; its _source line says where its
		// quantization comes from.
		a.Quant.Source = QuantSource{}
		if root, err := decodeObject(name, data); err == nil {
			if s, ok := root["_source"].(string); ok {
				a.Source = s
			}
		}
		presetMap[name] = a
	}
}

// PresetNames lists the built-in architectures, sorted.
func PresetNames() []string {
	presetOnce.Do(loadPresets)
	return slices.Sorted(maps.Keys(presetMap))
}

// Preset returns a copy of the named built-in architecture.
func Preset(name string) (*Arch, error) {
	presetOnce.Do(loadPresets)
	if presetErr != nil {
		return nil, presetErr
	}
	a, ok := presetMap[name]
	if !ok {
		if d, ok, err := drafterPreset(name); ok || err != nil {
			return d, err
		}
		return nil, fmt.Errorf("unknown model %q: want a preset (%s) or a path to a config.json or its directory",
			name, strings.Join(PresetNames(), ", "))
	}
	c := *a
	return &c, nil
}

// presetCheckpoints maps the Hugging Face id of each checkpoint a preset
// is the config of (the ids its doc above cites) to the preset: what a
// serving benchmark names as its model (vllm bench serve's model_id,
// InferenceX's model) becomes a preset by it. An id of another
// quantization or revision (nvidia/DeepSeek-R1-0528-FP4, zai-org/GLM-5-FP8)
// is no preset's: its config differs.
var presetCheckpoints = map[string]string{
	"nvidia/kimi-k2.5-nvfp4":  "kimi-k2.5-nvfp4",
	"moonshotai/kimi-k2.5":    "kimi-k2.5",
	"deepseek-ai/deepseek-v3": "deepseek-v3",
	"zai-org/glm-5":           "glm-5",
	"nvidia/glm-5-nvfp4":      "glm-5-nvfp4",
}

// PresetOf returns the preset whose config is the checkpoint's, given its
// Hugging Face id ("deepseek-ai/DeepSeek-V3", case ignored) or a local
// path ending in that id ("/models/deepseek-ai/DeepSeek-V3"); ok is false
// for a checkpoint no preset is of.
func PresetOf(checkpoint string) (name string, ok bool) {
	id := strings.ToLower(strings.TrimRight(strings.TrimSpace(checkpoint), "/"))
	if name, ok := presetCheckpoints[id]; ok {
		return name, true
	}
	for k, name := range presetCheckpoints {
		if strings.HasSuffix(id, "/"+k) {
			return name, true
		}
	}
	return "", false
}

// Resolve returns the preset called nameOrPath, or loads the config file or
// directory at that path when no preset has that name.
func Resolve(nameOrPath string) (*Arch, error) {
	if nameOrPath == "" {
		nameOrPath = DefaultPreset
	}
	presetOnce.Do(loadPresets)
	if _, ok := presetMap[nameOrPath]; ok {
		return Preset(nameOrPath)
	}
	if _, err := os.Stat(nameOrPath); err == nil {
		return Load(nameOrPath)
	}
	return Preset(nameOrPath)
}
