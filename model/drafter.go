package model

import (
	"embed"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Drafters: the models a speculative step drafts with besides the target's
// own MTP layers. Two kinds are Arch values:
//
//   - an EAGLE-3 head (Arch.eagle3 set): one decoder layer over the
//     target's hidden states with the target's MLA attention and a dense
//     MLP, its own embedding and LM head (vLLM
//     model_executor/models/deepseek_eagle3.py, Eagle3DeepseekV2ForCausalLM;
//     SGLang's Eagle3DeepseekV2ForCausalLM). Its config.json names an
//     Eagle3 architecture; the config parser reads it as a head
//     (parseEagle3).
//   - a whole small model of the family's vocabulary (the "draft" method:
//     vLLM's draft_model, SGLang's STANDALONE), parsed like any model.
//
// Built-in drafters are presets of their own (presets/drafts/*.json),
// apart from the models --model takes:
//
//   - kimi-k2.5-eagle3-mla: the EAGLE-3 MLA head for Kimi-K2.5
//     (lightseekorg/kimi-k2.5-eagle3-mla). Dims from the
//     Eagle3DeepseekV2ForCausalLM config.json published for Kimi-K2.5
//     (huggingface.co/k-l-lambda/Kimi-K2.5-Eagle3: hidden 7168, one layer,
//     64 heads, q_lora 1536, kv_lora 512 + rope 64, nope 128, v 128,
//     intermediate 18432, vocab and draft vocab 163840, auxiliary hidden
//     states of target layers 2, 30 and 58); lightseekorg's K2.6 head of
//     the same architecture is a 6.03 GB bf16 safetensors file, the
//     3.02 B parameters these dims give.
//   - moonlight-16b-a3b: moonshotai/Moonlight-16B-A3B-Instruct config.json
//     (revision 4e735b07): DeepSeek-V3 structure, 27 layers (first dense),
//     hidden 2048, 16 heads, q_lora_rank null, kv_lora 512 + rope 64,
//     64 routed experts top-6 + 2 shared, expert dim 1408, dense dim
//     11264, Kimi's 163840-token vocabulary, bf16: a whole small model
//     that can draft for Kimi-K2.x. max_position_embeddings 8192 and no
//     rope_scaling, so vLLM serves it at 8192 tokens (the config.json at
//     that revision states "max_position_embeddings": 8192; the model
//     cards and NVIDIA's Megatron-Bridge page for Moonlight-16B-A3B give
//     an 8K context); without it the preset took DeepSeekV3Config's 4096.
//   - tiny-mla-moe-eagle3: tpscope's own EAGLE-3 head of tiny-mla-moe's
//     dims, for tests and CPU runs; not a published checkpoint.
//
// A drafter may also be any target preset (tiny-mla-moe drafts for
// itself in tests) or a config.json path.

// eagle3Head is what an EAGLE-3 head's config adds to its decoder dims.
type eagle3Head struct {
	// AuxLayers is the number of target layers whose hidden states the
	// head's fc combines (eagle_config.eagle_aux_hidden_state_layer_ids;
	// vLLM's default 3).
	AuxLayers int
	// TargetHidden is the target's hidden size the aux states have
	// (target_hidden_size; default the head's own hidden size).
	TargetHidden int
	// DraftVocab is the rows of the head's LM head (draft_vocab_size,
	// default vocab_size; a pruned head maps them back with d2t).
	DraftVocab int
}

//go:embed presets/drafts/*.json
var drafterFS embed.FS

var (
	drafterOnce sync.Once
	drafterMap  map[string]*Arch
	drafterErr  error
)

func loadDrafters() {
	drafterMap = map[string]*Arch{}
	entries, err := drafterFS.ReadDir("presets/drafts")
	if err != nil {
		drafterErr = err
		return
	}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".json")
		data, err := drafterFS.ReadFile("presets/drafts/" + e.Name())
		if err != nil {
			drafterErr = err
			return
		}
		a, err := parse("preset "+name, data, "", nil)
		if err != nil {
			drafterErr = fmt.Errorf("built-in drafter %s: %w", name, err)
			return
		}
		a.Name, a.Ref = name, Ref{Name: name}
		if root, err := decodeObject(name, data); err == nil {
			if s, ok := root["_source"].(string); ok {
				a.Source = s
			}
		}
		drafterMap[name] = a
	}
}

// DrafterPresetNames lists the built-in drafters (EAGLE-3 heads and draft
// models), sorted.
func DrafterPresetNames() []string {
	drafterOnce.Do(loadDrafters)
	return slices.Sorted(maps.Keys(drafterMap))
}

// drafterPreset returns a copy of a built-in drafter, false when none has
// the name.
func drafterPreset(name string) (*Arch, bool, error) {
	drafterOnce.Do(loadDrafters)
	if drafterErr != nil {
		return nil, false, drafterErr
	}
	a, ok := drafterMap[name]
	if !ok {
		return nil, false, nil
	}
	c := *a
	return &c, true, nil
}

// ResolveDrafter returns the drafter called nameOrPath: a built-in
// drafter, a target preset, or the config at that path (an EAGLE-3 head's
// or a model's config.json, or its directory).
func ResolveDrafter(nameOrPath string) (*Arch, error) {
	if a, ok, err := drafterPreset(nameOrPath); err != nil || ok {
		return a, err
	}
	presetOnce.Do(loadPresets)
	if _, ok := presetMap[nameOrPath]; ok {
		return Preset(nameOrPath)
	}
	if _, err := os.Stat(nameOrPath); err == nil {
		return Load(nameOrPath)
	}
	return nil, fmt.Errorf("unknown draft model %q: want a built-in drafter (%s), a model preset (%s) or a path to a config.json",
		nameOrPath, strings.Join(DrafterPresetNames(), ", "), strings.Join(PresetNames(), ", "))
}

// drafterCheckpoints maps each built-in drafter that is a published
// checkpoint to its Hugging Face id (the ids the Drafters doc above
// cites), the checkpoint a serving engine loads; tiny-mla-moe-eagle3 is
// tpscope's own and has none.
var drafterCheckpoints = map[string]string{
	"kimi-k2.5-eagle3-mla": "lightseekorg/kimi-k2.5-eagle3-mla",
	"moonlight-16b-a3b":    "moonshotai/Moonlight-16B-A3B-Instruct",
}

// DrafterCheckpoint returns the Hugging Face id of the built-in drafter
// called name; ok is false for a name that is no published checkpoint's.
func DrafterCheckpoint(name string) (id string, ok bool) {
	id, ok = drafterCheckpoints[name]
	return id, ok
}

// DrafterOf returns the built-in drafter whose config is the checkpoint's,
// given its Hugging Face id (case ignored) or a local path ending in that
// id, as PresetOf does for --model; ok is false for a checkpoint no
// built-in drafter is of.
func DrafterOf(checkpoint string) (name string, ok bool) {
	id := strings.ToLower(strings.TrimRight(strings.TrimSpace(checkpoint), "/"))
	for name, k := range drafterCheckpoints {
		k = strings.ToLower(k)
		if id == k || strings.HasSuffix(id, "/"+k) {
			return name, true
		}
	}
	return "", false
}

// IsEagle3Head reports whether a is an EAGLE-3 head, not a whole model.
func (a *Arch) IsEagle3Head() bool { return a != nil && a.eagle3 != nil }

// isEagle3Config reports whether a config's architectures name an EAGLE-3
// draft class (Eagle3DeepseekV2ForCausalLM, LlamaForCausalLMEagle3, ...).
func isEagle3Config(root map[string]any) bool {
	archs, _ := root["architectures"].([]any)
	for _, v := range archs {
		if s, ok := v.(string); ok && strings.Contains(strings.ToLower(s), "eagle3") {
			return true
		}
	}
	return false
}

// parseEagle3 reads an EAGLE-3 head's config.json: the MLA dims of its
// decoder layer(s) (num_hidden_layers, 1 in every published head), a
// dense MLP of intermediate_size, its vocabularies and the auxiliary
// hidden states its fc combines. The head has no routed experts
// (vLLM's DeepseekV2Eagle3DecoderLayer: "Always uses MLP (not MoE)").
func parseEagle3(cfgFile string, root map[string]any) (*Arch, error) {
	p := &parser{file: cfgFile}
	mt := p.str(root, "", "model_type", false)
	a := &Arch{ModelType: mt, Name: cfgFile, Source: cfgFile}
	a.Hidden = p.posInt(root, "", "hidden_size", maxDim)
	a.Layers = p.posInt(root, "", "num_hidden_layers", 4)
	a.Heads = p.posInt(root, "", "num_attention_heads", maxHeads)
	a.QLoraRank = p.nullablePosInt(root, "", "q_lora_rank", maxRank)
	a.KVLoraRank = p.posInt(root, "", "kv_lora_rank", maxRank)
	a.QKNopeHeadDim = p.posInt(root, "", "qk_nope_head_dim", maxHeadDim)
	a.QKRopeHeadDim = p.posInt(root, "", "qk_rope_head_dim", maxHeadDim)
	a.VHeadDim = p.posInt(root, "", "v_head_dim", maxHeadDim)
	a.Intermediate = p.posInt(root, "", "intermediate_size", maxDim)
	a.Vocab = p.posInt(root, "", "vocab_size", maxVocab)
	a.DenseLayers = a.Layers
	h := &eagle3Head{AuxLayers: 3, TargetHidden: a.Hidden, DraftVocab: a.Vocab}
	h.DraftVocab = p.optInt(root, "", "draft_vocab_size", a.Vocab, maxVocab)
	h.TargetHidden = p.optInt(root, "", "target_hidden_size", a.Hidden, maxDim)
	if n := p.optInt(root, "", "num_aux_hidden_states", 0, 16); n > 0 {
		h.AuxLayers = n
	} else if ec, ok := root["eagle_config"].(map[string]any); ok {
		if ids, ok := ec["eagle_aux_hidden_state_layer_ids"].([]any); ok && len(ids) > 0 {
			h.AuxLayers = len(ids)
		}
	}
	if p.err != nil {
		return nil, p.err
	}
	if h.DraftVocab < 1 {
		return nil, &ConfigError{File: cfgFile, Field: "draft_vocab_size", Got: strconv.Itoa(h.DraftVocab), Want: "a positive integer"}
	}
	a.eagle3 = h
	base := BF16
	if s := p.str(root, "", "torch_dtype", false); s == "float16" {
		base = FP16
	}
	if s := p.str(root, "", "dtype", false); s == "float16" {
		base = FP16
	}
	q := Quant{Base: base, KV: base}
	q.Embedding, q.Attention, q.Indexer, q.DenseMLP, q.Router, q.SharedExperts, q.RoutedExperts, q.LMHead, q.MTP = base, base, base, base, base, base, base, base, base
	a.Quant = q
	if err := a.checkSize(cfgFile, ""); err != nil {
		return nil, err
	}
	return a, nil
}

// draftLayerBase is the Op.Layer of a drafter's first layer in a
// schedule of target a: past the target's layers and MTP layers, as vLLM
// numbers an EAGLE head's layer (start_layer_id = the target's layer
// count). A draft model's layer l is draftLayerBase + l.
func draftLayerBase(a *Arch) int { return a.Layers + a.MTPLayers }

// DefaultDrafter is the drafter method m uses for target a without one
// named: the built-in EAGLE-3 head whose target width and vocabulary are
// a's (eagle3), the built-in draft model of a's vocabulary with fewer
// parameters (draft), scaled by a's scale; nil for the methods without a
// drafter; an error naming what is missing when no built-in fits.
func (m SpecMethod) DefaultDrafter(a *Arch) (*Arch, error) {
	if m != SpecEagle3 && m != SpecDraftModel {
		return nil, nil
	}
	if a == nil {
		return nil, fmt.Errorf("no model to draft for")
	}
	scale := a.Ref.Scale
	unscaledHidden := a.Hidden
	base := a
	if scale > 1 {
		if b, err := (Ref{Name: a.Ref.Name, Path: a.Ref.Path, SHA256: a.Ref.SHA256, Config: a.Ref.Config, QuantConfig: a.Ref.QuantConfig}).Resolve(); err == nil {
			base, unscaledHidden = b, b.Hidden
		}
	}
	for _, name := range DrafterPresetNames() {
		d, err := ResolveDrafter(name)
		if err != nil {
			return nil, err
		}
		ok := false
		switch m {
		case SpecEagle3:
			ok = d.IsEagle3Head() && d.eagle3.TargetHidden == unscaledHidden && d.Vocab == base.Vocab
		case SpecDraftModel:
			ok = !d.IsEagle3Head() && d.Vocab == base.Vocab && d.Params().Total < base.Params().Total
		}
		if !ok {
			continue
		}
		if scale > 1 {
			if d, err = ScaleArch(d, scale); err != nil {
				return nil, err
			}
		}
		return d, nil
	}
	what := map[SpecMethod]string{SpecEagle3: "EAGLE-3 head", SpecDraftModel: "draft model"}[m]
	return nil, fmt.Errorf("no built-in %s for %s (built-in drafters: %s): pass --spec %s --draft-model with its config.json", what, a.Name, strings.Join(DrafterPresetNames(), ", "), m)
}
