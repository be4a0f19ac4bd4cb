package model

import (
	"reflect"
	"testing"
)

// TestPresetsMatchReferenceConfigs: every preset written for the project
// must resolve to the same architecture and quantization as the real
// Hugging Face files it cites (read from ../shared/reference/configs).
func TestPresetsMatchReferenceConfigs(t *testing.T) {
	cases := []struct {
		preset, cfg, quant string
	}{
		{"kimi-k2.5-nvfp4", "nvidia--Kimi-K2.5-NVFP4_config.json", ""},
		{"kimi-k2.5", "moonshotai--Kimi-K2.5_config.json", ""},
		{"deepseek-v3", "deepseek-ai--DeepSeek-V3_config.json", ""},
		{"glm-5", "zai-org--GLM-5_config.json", ""},
		{"glm-5-nvfp4", "zai-org--GLM-5_config.json", "nvidia--GLM-5-NVFP4_hf_quant_config.json"},
	}
	for _, c := range cases {
		t.Run(c.preset, func(t *testing.T) {
			ref := parseRef(t, c.cfg, c.quant)
			got := mustPreset(t, c.preset)
			// Names and provenance differ by design; the model type of
			// kimi-k2.5 presets is the wrapper's, as in the file.
			ref.Name, ref.Source, ref.Ref, ref.Quant.Source = got.Name, got.Source, got.Ref, got.Quant.Source
			if !reflect.DeepEqual(*ref, *got) {
				t.Errorf("preset differs from %s:\n got %+v\nwant %+v", c.cfg, *got, *ref)
			}
		})
	}
}

// TestPresetList: the presets the issues ask for exist, the default among
// them, and every preset builds a TP-1 decode step.
func TestPresetList(t *testing.T) {
	want := []string{"deepseek-v3", "glm-5", "glm-5-nvfp4", "kimi-k2.5", "kimi-k2.5-nvfp4", "tiny-mla-moe"}
	got := PresetNames()
	if len(got) != len(want) {
		t.Fatalf("presets %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("preset %d = %q, want %q", i, got[i], want[i])
		}
	}
	if _, err := Preset(DefaultPreset); err != nil {
		t.Errorf("default preset: %v", err)
	}
	for _, name := range got {
		t.Run(name, func(t *testing.T) {
			a := mustPreset(t, name)
			if a.Source == "" || a.Source == a.Name {
				t.Errorf("preset %s cites no source", name)
			}
			if _, err := Build(a, Plan{}, Workload{Batch: 1, Context: 16}); err != nil {
				t.Error(err)
			}
		})
	}
	if _, err := Preset("nope"); err == nil {
		t.Error("unknown preset accepted")
	}
}

// TestTinyPreset pins the tiny model's dims (issue 6 item 5: a few layers,
// MLA + MoE with DeepSeek-V3's structure) so exec's CPU tests stay small.
func TestTinyPreset(t *testing.T) {
	a := mustPreset(t, "tiny-mla-moe")
	got := [...]int{a.Layers, a.DenseLayers, a.Hidden, a.Heads, a.QLoraRank, a.KVLoraRank, a.QKRopeHeadDim, a.QKNopeHeadDim,
		a.VHeadDim, a.RoutedExperts, a.TopK, a.MoEIntermediate, a.SharedExperts, a.Vocab, a.MTPLayers}
	want := [...]int{4, 1, 256, 8, 128, 64, 16, 32, 32, 16, 4, 128, 1, 1024, 1}
	if got != want {
		t.Errorf("dims %v, want %v", got, want)
	}
	if a.Quant.RoutedExperts != BF16 || a.Quant.KV != BF16 {
		t.Errorf("quant %+v, want all bf16", a.Quant)
	}
}

// TestPresetOf: a benchmark's model id names a preset only when the
// preset is that checkpoint's config (the ids of
// TestPresetsMatchReferenceConfigs); another quantization or revision of
// the same family is none.
func TestPresetOf(t *testing.T) {
	cases := []struct {
		checkpoint, want string
	}{
		{"deepseek-ai/DeepSeek-V3", "deepseek-v3"},
		{"DEEPSEEK-AI/deepseek-v3", "deepseek-v3"},
		{"/models/deepseek-ai/DeepSeek-V3/", "deepseek-v3"},
		{"nvidia/Kimi-K2.5-NVFP4", "kimi-k2.5-nvfp4"},
		{"moonshotai/Kimi-K2.5", "kimi-k2.5"},
		{"zai-org/GLM-5", "glm-5"},
		{"nvidia/GLM-5-NVFP4", "glm-5-nvfp4"},
		{"nvidia/DeepSeek-R1-0528-FP4", ""},
		{"zai-org/GLM-5-FP8", ""},
		{"nvidia/DeepSeek-V3-0324-NVFP4", ""},
		{"DeepSeek-V3", ""},
		{"other/deepseek-ai/DeepSeek-V3x", ""},
		{"", ""},
	}
	for _, c := range cases {
		got, ok := PresetOf(c.checkpoint)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("PresetOf(%q) = %q, %v; want %q", c.checkpoint, got, ok, c.want)
		}
	}
	// Every preset a checkpoint names exists.
	for id, name := range presetCheckpoints {
		if _, err := Preset(name); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
}

// TestDrafterOf: a built-in drafter's Hugging Face id (case ignored) or a
// local checkout ending in it is that drafter; another id is none, and
// every drafter a checkpoint names exists.
func TestDrafterOf(t *testing.T) {
	for _, c := range []struct{ checkpoint, want string }{
		{"lightseekorg/kimi-k2.5-eagle3-mla", "kimi-k2.5-eagle3-mla"},
		{"/models/LightSeekOrg/Kimi-K2.5-Eagle3-MLA/", "kimi-k2.5-eagle3-mla"},
		{"moonshotai/Moonlight-16B-A3B-Instruct", "moonlight-16b-a3b"},
		{"moonshotai/Moonlight-16B-A3B", ""},
		{"moonshotai/Kimi-K2.5", ""},
	} {
		got, ok := DrafterOf(c.checkpoint)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("DrafterOf(%q) = %q, %v; want %q", c.checkpoint, got, ok, c.want)
		}
	}
	for name := range drafterCheckpoints {
		if _, err := ResolveDrafter(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestPresetsStateMaxPositions: a built-in model or draft model states
// its max_position_embeddings (the bound of every workload's context)
// rather than taking its config class's default. Moonlight-16B-A3B's
// config.json (moonshotai/Moonlight-16B-A3B-Instruct, revision 4e735b07)
// has "max_position_embeddings": 8192 and no rope_scaling: an 8K context,
// not DeepseekV3Config's default 4096.
func TestPresetsStateMaxPositions(t *testing.T) {
	for _, name := range PresetNames() {
		if a := mustPreset(t, name); len(a.Defaults) != 0 {
			t.Errorf("%s: fields from its class's defaults: %v", name, a.Defaults)
		}
	}
	for _, name := range DrafterPresetNames() {
		a := mustDrafter(t, name)
		if a.IsEagle3Head() {
			continue // a head serves the target's context
		}
		if len(a.Defaults) != 0 {
			t.Errorf("%s: fields from its class's defaults: %v", name, a.Defaults)
		}
	}
	moon := mustDrafter(t, "moonlight-16b-a3b")
	if moon.MaxPositionEmbeddings != 8192 || moon.MaxModelLenTokens != 8192 {
		t.Errorf("moonlight-16b-a3b: max_position_embeddings %d, max_model_len %d, want 8192 8192", moon.MaxPositionEmbeddings, moon.MaxModelLenTokens)
	}
	if err := Validate(moon, Plan{TP: 8}, Workload{Batch: 1, Context: 8192}, BuildOptions{}); err != nil {
		t.Errorf("moonlight-16b-a3b at context 8192: %v", err)
	}
}
