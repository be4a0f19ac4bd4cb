package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tpscope/tpscope/internal/jsonerr"
)

// Supported config model_type values. kimi_k25 is a multimodal wrapper whose
// text model (text_config) is one of the others.
var supportedModelTypes = []string{"deepseek_v3", "kimi_k2", "kimi_k25", "glm_moe_dsa", "deepseek_v32"}

// Upper bounds on config integers: far above any real model (DeepSeek-V3,
// Kimi-K2.5, GLM-5: hidden 6144-7168, ranks 512-2048, head dims 64-192, 61-78
// layers, 64-128 heads, 256-384 experts, vocab 129K-164K), low enough that
// the products Build and the memory model form from them stay exact in
// int64 and float64 (the products are bounded again by Arch.CheckSize) and
// a hostile file cannot make Build allocate without bound.
const (
	maxDim     = 1 << 20 // hidden and intermediate sizes
	maxRank    = 1 << 16 // q_lora_rank, kv_lora_rank
	maxHeadDim = 1 << 12 // qk_nope/qk_rope/v/index head dims
	maxLayers  = 1024
	maxHeads   = 1 << 12
	maxVocab   = 1 << 24
	maxExpert  = 1 << 14
	maxTopK    = 1 << 24 // index_topk: tokens, at most the longest context a workload may have
)

// Load reads an architecture from path: a directory holding config.json
// (and optionally hf_quant_config.json), or a single config.json-style file.
// When path is a file named *config.json and a sibling hf_quant_config.json
// exists, it is read too; it sets the quantization only when the config
// states none (parse). Errors are *ConfigError naming the file and field.
func Load(path string) (*Arch, error) {
	cfgPath, quantPath, err := configFiles(path)
	if err != nil {
		return nil, err
	}
	cfg, err := os.ReadFile(cfgPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &ConfigError{File: cfgPath, Got: "no such file", Want: "a config.json (a Hugging Face model directory or its config file)"}
	}
	if err != nil {
		return nil, &ConfigError{File: cfgPath, Want: "a readable config.json", Err: err}
	}
	var quant []byte
	if quantPath != "" {
		quant, err = os.ReadFile(quantPath)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, &ConfigError{File: quantPath, Want: "a readable hf_quant_config.json", Err: err}
		}
	}
	a, err := parse(cfgPath, cfg, quantPath, quant)
	if err != nil {
		// Parse names files by base name; name the path the user gave.
		var ce *ConfigError
		if errors.As(err, &ce) {
			for _, full := range []string{cfgPath, quantPath} {
				if full != "" && ce.File == filepath.Base(full) {
					ce.File = full
				}
			}
		}
		return nil, err
	}
	a.Name = path
	a.Source = path
	// Name the quantization's file as the user gave it (parse knows only
	// base names).
	switch a.Quant.Source.File {
	case filepath.Base(cfgPath):
		a.Quant.Source.File = cfgPath
	case filepath.Base(quantPath):
		a.Quant.Source.File = quantPath
	}
	if a.Quant.Source.Unread != "" {
		a.Quant.Source.Unread = quantPath
	}
	if a.Ref, err = refOfFile(path, cfg, quant); err != nil {
		return nil, err
	}
	return a, nil
}

// quantConfigName is ModelOpt's separate quantization file, read beside a
// model's config.
const quantConfigName = "hf_quant_config.json"

// configFiles returns the config.json and hf_quant_config.json (maybe
// absent) Load reads for path, a directory or a config file: a file named
// *config.json (config.json, or a copy kept under another name such as
// nvidia--DeepSeek-V3-0324-NVFP4_config.json) has its directory's
// hf_quant_config.json beside it, as the directory would. A copy kept
// under a prefix reads the quantization file kept under the same prefix
// when there is one (PREFIX_config.json with PREFIX_hf_quant_config.json,
// as aiconfigurator's model_configs/ keeps a checkpoint's two files side
// by side with those of other checkpoints): that one is the checkpoint's,
// where the directory's plain hf_quant_config.json may be another's.
func configFiles(path string) (cfgPath, quantPath string, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", "", &ConfigError{File: path, Want: "a directory with config.json or a config file", Err: err}
	}
	cfgPath = path
	switch base := filepath.Base(path); {
	case !st.IsDir() && strings.HasSuffix(base, quantConfigName):
		return "", "", quantFileError(path)
	case st.IsDir():
		cfgPath = filepath.Join(path, "config.json")
		quantPath = filepath.Join(path, quantConfigName)
	case strings.HasSuffix(base, "config.json") && base != quantConfigName:
		dir := filepath.Dir(path)
		quantPath = filepath.Join(dir, quantConfigName)
		if prefix := strings.TrimSuffix(base, "config.json"); prefix != "" {
			paired := filepath.Join(dir, prefix+quantConfigName)
			if _, err := os.Stat(paired); err == nil {
				quantPath = paired
			}
		}
	}
	return cfgPath, quantPath, nil
}

// quantFileError refuses a quantization file (PREFIX_hf_quant_config.json
// or hf_quant_config.json) given as the model's config, naming the
// config it belongs beside: the one that reads it (configFiles).
func quantFileError(path string) error {
	dir, base := filepath.Split(path)
	cfg := filepath.Join(dir, strings.TrimSuffix(base, quantConfigName)+"config.json")
	name := cfg
	if base == quantConfigName {
		name = fmt.Sprintf("%s (or %s)", cfg, filepath.Clean(dir))
	}
	want := fmt.Sprintf("the model's config: pass %s, the config beside it, which reads it", name)
	if _, err := os.Stat(cfg); err != nil {
		want = fmt.Sprintf("the model's config: pass %s, the config it belongs beside; it is not there", name)
	}
	return &ConfigError{File: path, Got: "a quantization file (ModelOpt's hf_quant_config.json), not a model config", Want: want}
}

// isQuantFile reports whether a decoded file is ModelOpt's quantization
// file (a producer and a quantization block, no model_type), whatever its
// name.
func isQuantFile(root map[string]any) bool {
	_, mt := root["model_type"]
	_, producer := root["producer"]
	q, _ := root["quantization"].(map[string]any)
	return !mt && producer && q != nil
}

// parse builds an Arch from the bytes of a config.json (named cfgName in
// errors) and optionally of an hf_quant_config.json (quant nil: no such
// file; an empty one is refused).
// config.json's quantization_config, when it has one, decides the weight
// quantization and the KV dtype; hf_quant_config.json does only for a
// config without one (ModelOpt 0.29 and earlier wrote it there), as vLLM
// reads them: vllm/transformers_utils/config.py get_config takes
// config_dict["quantization_config"] and opens hf_quant_config.json only
// "if quantization_config is None". Quant.Source says which file decided.
func parse(cfgName string, cfg []byte, quantName string, quant []byte) (*Arch, error) {
	cfgFile := filepath.Base(cfgName)
	root, err := decodeObject(cfgFile, cfg)
	if err != nil {
		return nil, err
	}
	if isEagle3Config(root) {
		return parseEagle3(cfgFile, root)
	}
	if isQuantFile(root) {
		return nil, &ConfigError{File: cfgFile, Got: "a quantization file (ModelOpt's hf_quant_config.json: producer and quantization, no model_type), not a model config",
			Want: "the model's config, which reads the quantization file beside it (hf_quant_config.json, or PREFIX_hf_quant_config.json beside PREFIX_config.json)"}
	}
	p := &parser{file: cfgFile}
	mt := p.str(root, "", "model_type", true)
	if p.err != nil {
		return nil, p.err
	}
	if !slices.Contains(supportedModelTypes, mt) {
		return nil, &ConfigError{File: cfgFile, Field: "model_type", Got: strconv.Quote(mt),
			Want: "one of " + strings.Join(supportedModelTypes, ", ")}
	}
	text, prefix := root, ""
	if tc, ok := root["text_config"]; ok && tc != nil {
		m, ok := tc.(map[string]any)
		if !ok {
			return nil, &ConfigError{File: cfgFile, Field: "text_config", Got: describe(tc), Want: "an object"}
		}
		text, prefix = m, "text_config."
	} else if mt == "kimi_k25" {
		return nil, &ConfigError{File: cfgFile, Field: "text_config", Got: "missing", Want: "an object (kimi_k25 keeps its text model there)"}
	}
	if prefix != "" {
		if tmt := p.str(text, prefix, "model_type", false); tmt != "" && !slices.Contains(supportedModelTypes, tmt) {
			return nil, &ConfigError{File: cfgFile, Field: prefix + "model_type", Got: strconv.Quote(tmt),
				Want: "one of " + strings.Join(supportedModelTypes, ", ")}
		}
	}
	a := &Arch{ModelType: mt, Name: cfgName, Source: cfgName}
	a.Hidden = p.posInt(text, prefix, "hidden_size", maxDim)
	a.Layers = p.posInt(text, prefix, "num_hidden_layers", maxLayers)
	a.Heads = p.posInt(text, prefix, "num_attention_heads", maxHeads)
	a.QLoraRank = p.nullablePosInt(text, prefix, "q_lora_rank", maxRank)
	a.KVLoraRank = p.posInt(text, prefix, "kv_lora_rank", maxRank)
	a.QKNopeHeadDim = p.posInt(text, prefix, "qk_nope_head_dim", maxHeadDim)
	a.QKRopeHeadDim = p.posInt(text, prefix, "qk_rope_head_dim", maxHeadDim)
	a.VHeadDim = p.posInt(text, prefix, "v_head_dim", maxHeadDim)
	a.Intermediate = p.posInt(text, prefix, "intermediate_size", maxDim)
	a.MoEIntermediate = p.posInt(text, prefix, "moe_intermediate_size", maxDim)
	a.RoutedExperts = p.posInt(text, prefix, "n_routed_experts", maxExpert)
	a.TopK = p.posInt(text, prefix, "num_experts_per_tok", maxExpert)
	a.Vocab = p.posInt(text, prefix, "vocab_size", maxVocab)
	// An optional field the file leaves out takes the default of the
	// config class the engine reads the file with (configDefaults), and
	// Arch.Defaults says so.
	def := defaultsFor(mt)
	opt := func(key string, v, max int) int {
		n, stated := p.optIntStated(text, prefix, key, v, max)
		if !stated && p.err == nil {
			a.Defaults = append(a.Defaults, FieldDefault{Field: prefix + key, Value: v, From: def.class})
		}
		return n
	}
	a.DenseLayers = opt("first_k_dense_replace", def.firstKDense, maxLayers)
	a.SharedExperts = opt("n_shared_experts", def.sharedExperts, 64)
	a.MTPLayers = opt("num_nextn_predict_layers", def.mtpLayers, 16)
	a.MaxPositionEmbeddings = opt("max_position_embeddings", def.maxPositions, maxTopK)
	a.MaxModelLenTokens = p.maxModelLen(text, prefix, a.MaxPositionEmbeddings)
	if f := p.optInt(text, prefix, "moe_layer_freq", 1, maxLayers); p.err == nil && f != 1 {
		p.fail(prefix+"moe_layer_freq", strconv.Itoa(f), "1 (every layer after first_k_dense_replace is MoE)")
	}
	a.TieEmbeddings = p.optBool(root, "", "tie_word_embeddings") || p.optBool(text, prefix, "tie_word_embeddings")
	if mt == "glm_moe_dsa" || mt == "deepseek_v32" {
		a.IndexHeads = p.posInt(text, prefix, "index_n_heads", maxHeads)
		a.IndexHeadDim = p.posInt(text, prefix, "index_head_dim", maxHeadDim)
		a.IndexTopK = p.posInt(text, prefix, "index_topk", maxTopK)
	}
	if p.err != nil {
		return nil, p.err
	}
	if a.TopK > a.RoutedExperts {
		return nil, &ConfigError{File: cfgFile, Field: prefix + "num_experts_per_tok", Got: strconv.Itoa(a.TopK),
			Want: fmt.Sprintf("at most n_routed_experts (%d)", a.RoutedExperts)}
	}
	if a.DenseLayers > a.Layers {
		return nil, &ConfigError{File: cfgFile, Field: prefix + "first_k_dense_replace", Got: strconv.Itoa(a.DenseLayers),
			Want: fmt.Sprintf("at most num_hidden_layers (%d)", a.Layers)}
	}

	base, baseFrom := BF16, ""
	for _, k := range []string{"dtype", "torch_dtype"} {
		if s := p.str(text, prefix, k, false); s != "" {
			switch s {
			case "bfloat16":
				base = BF16
			case "float16":
				base = FP16
			case "float32":
				// No engine serves a float32 checkpoint in 32 bits under
				// its default --dtype auto: vLLM downcasts float32 models
				// to the platform's first dtype, bfloat16 on CUDA
				// (config/model.py _resolve_auto_dtype), as it does a
				// config that names no dtype; SGLang to float16 (its
				// model_config.py _get_and_verify_dtype), the same
				// width. Its weights and KV cache take 2 bytes a value.
				base, baseFrom = BF16, prefix+k+" float32 served as bf16: vLLM's --dtype auto downcasts float32 models"
			default:
				return nil, &ConfigError{File: cfgFile, Field: prefix + k, Got: strconv.Quote(s), Want: "bfloat16, float16 or float32"}
			}
			break
		}
	}
	if p.err != nil {
		return nil, p.err
	}

	// quantization_config may sit at the top (nvidia/Kimi-K2.5-NVFP4) or in
	// text_config (moonshotai/Kimi-K2.5); the top-level one wins.
	qc, qfield := root["quantization_config"], "quantization_config"
	if qc == nil && prefix != "" {
		qc, qfield = text["quantization_config"], prefix+"quantization_config"
	}
	spec, err := parseQuantConfig(cfgFile, qfield, qc)
	if err != nil {
		return nil, err
	}
	src := QuantSource{}
	qfile := filepath.Base(quantName)
	if qfile == "" || qfile == "." {
		qfile = quantConfigName
	}
	switch {
	case qc != nil:
		src = QuantSource{File: cfgFile, Field: qfield}
		if len(quant) > 0 {
			src.Unread = qfile
		}
	case quant != nil:
		// Present, even empty (nil is no file): an empty file states no
		// quantization, and read as none it would price the weights as
		// unquantized without a word.
		if spec, err = parseHFQuantConfig(qfile, quant); err != nil {
			return nil, err
		}
		src = QuantSource{File: qfile, Field: "quantization"}
	}
	if a.Quant, err = spec.resolve(a, base); err != nil {
		return nil, err
	}
	a.Quant.Source, a.Quant.BaseFrom = src, baseFrom
	if err := a.checkSize(cfgFile, prefix); err != nil {
		return nil, err
	}
	return a, nil
}

// decodeObject decodes a JSON object with numbers kept exact.
func decodeObject(file string, data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &ConfigError{File: file, Err: jsonerr.Wrap(data, err, "a JSON object")}
	}
	if dec.More() {
		return nil, &ConfigError{File: file, Got: "trailing data after the JSON object", Want: "one JSON object"}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &ConfigError{File: file, Got: describe(v), Want: "a JSON object"}
	}
	return m, nil
}

// parser reads typed fields of a decoded JSON object and keeps the first
// error.
type parser struct {
	file string
	err  error
}

func (p *parser) fail(field, got, want string) {
	if p.err == nil {
		p.err = &ConfigError{File: p.file, Field: field, Got: got, Want: want}
	}
}

func (p *parser) posInt(m map[string]any, prefix, key string, max int) int {
	want := fmt.Sprintf("a positive integer (at most %d)", max)
	v, ok := m[key]
	if !ok || v == nil {
		p.fail(prefix+key, "missing", want)
		return 0
	}
	n, ok := asInt(v)
	if !ok || n < 1 || n > int64(max) {
		p.fail(prefix+key, describe(v), want)
		return 0
	}
	return int(n)
}

// nullablePosInt is posInt that also accepts an explicit null as 0: a
// config that states no value (q_lora_rank null: DeepSeek-V2-Lite and
// Moonlight project the query directly from the hidden state). A missing
// key is still an error.
func (p *parser) nullablePosInt(m map[string]any, prefix, key string, max int) int {
	if v, ok := m[key]; ok && v == nil {
		return 0
	}
	return p.posInt(m, prefix, key, max)
}

func (p *parser) optInt(m map[string]any, prefix, key string, def, max int) int {
	n, _ := p.optIntStated(m, prefix, key, def, max)
	return n
}

// optIntStated is optInt that also reports whether the file stated the
// field (a null counts as not stated: the class default applies).
func (p *parser) optIntStated(m map[string]any, prefix, key string, def, max int) (int, bool) {
	v, ok := m[key]
	if !ok || v == nil {
		return def, false
	}
	n, ok := asInt(v)
	if !ok || n < 0 || n > int64(max) {
		p.fail(prefix+key, describe(v), fmt.Sprintf("an integer from 0 to %d", max))
		return 0, true
	}
	return int(n), true
}

// configDefaults are the defaults of the optional fields tpscope reads, as
// the config class vLLM reads a model type with sets them: transformers'
// DeepseekV3Config for deepseek_v3 and for kimi_k25's text model
// (first_k_dense_replace 3, n_shared_experts 1, max_position_embeddings
// 4096, and no num_nextn_predict_layers, which vLLM's DeepSeek MTP reads
// as getattr(config, "num_nextn_predict_layers", 0)); vLLM's own
// DeepseekV3Config (vllm/transformers_utils/configs/deepseek_v3.py, which
// its _CONFIG_REGISTRY maps kimi_k2 and deepseek_v32 to), the same but
// num_nextn_predict_layers 1; transformers' GlmMoeDsaConfig for
// glm_moe_dsa (first_k_dense_replace 3, n_shared_experts 1,
// max_position_embeddings 202752, no num_nextn_predict_layers).
type configDefaults struct {
	class                                               string
	firstKDense, sharedExperts, mtpLayers, maxPositions int
}

func defaultsFor(modelType string) configDefaults {
	switch modelType {
	case "kimi_k2", "deepseek_v32":
		return configDefaults{"vLLM's DeepseekV3Config", 3, 1, 1, 4096}
	case "glm_moe_dsa":
		return configDefaults{"transformers' GlmMoeDsaConfig", 3, 1, 0, 202752}
	}
	return configDefaults{"transformers' DeepseekV3Config", 3, 1, 0, 4096}
}

// maxModelLen is the longest sequence vLLM serves the model at, derived
// as vLLM's _get_and_verify_max_len does from max_position_embeddings
// (maxPos) and the RoPE scaling (ropeLen). Newer transformers write that
// scaling as rope_parameters, older ones as rope_scaling; vLLM reads
// rope_parameters, into which it moves rope_scaling when the installed
// transformers predates it (vllm-project/vllm, vllm/config/model.py
// _get_and_verify_max_len and vllm/transformers_utils/config.py
// patch_rope_parameters at 0052a5b8 / 0036026e). A file stating both is
// read from both, and they must give one length. DeepSeek-V3: yarn 4096 x
// 40 = 163840; Kimi-K2.5: yarn 4096 x 64 = 262144; GLM-5: rope_parameters
// of the default type, 202752.
func (p *parser) maxModelLen(m map[string]any, prefix string, maxPos int) int {
	if p.err != nil {
		return 0
	}
	scaling, hasScaling := m["rope_scaling"]
	params, hasParams := m["rope_parameters"]
	hasScaling, hasParams = hasScaling && scaling != nil, hasParams && params != nil
	n := maxPos
	if hasScaling {
		n = p.ropeLen(scaling, prefix+"rope_scaling", maxPos)
	}
	if hasParams {
		fromParams := p.ropeParametersLen(params, prefix+"rope_parameters", maxPos)
		if hasScaling && p.err == nil && fromParams != n {
			p.fail(prefix+"rope_parameters", fmt.Sprintf("%d tokens, rope_scaling %d", fromParams, n), "one RoPE scaling: rope_parameters and rope_scaling giving one max_model_len (or one of them)")
			return 0
		}
		n = fromParams
	}
	if p.err != nil {
		return 0
	}
	return n
}

// ropeParametersLen is maxModelLen of a rope_parameters block: one block
// of RoPE parameters, or (transformers' form for models whose layer types
// run different RoPE) an object of blocks keyed by layer type, which vLLM
// reads per block with one factor for them all; blocks that give
// different lengths are refused rather than one picked.
func (p *parser) ropeParametersLen(v any, field string, maxPos int) int {
	rp, ok := v.(map[string]any)
	if !ok {
		p.fail(field, describe(v), "an object or null")
		return 0
	}
	blocks := 0
	for _, b := range rp {
		if _, ok := b.(map[string]any); ok {
			blocks++
		}
	}
	if blocks == 0 {
		return p.ropeLen(rp, field, maxPos)
	}
	if blocks < len(rp) {
		p.fail(field, "blocks beside other keys", "one block of RoPE parameters, or one block per layer type")
		return 0
	}
	types := make([]string, 0, len(rp))
	for k := range rp {
		types = append(types, k)
	}
	slices.Sort(types)
	n := 0
	for i, k := range types {
		l := p.ropeLen(rp[k], field+"."+k, maxPos)
		if p.err != nil {
			return 0
		}
		if i > 0 && l != n {
			p.fail(field, fmt.Sprintf("%s %d tokens, %s %d", types[0], n, k, l), "one scaling for every layer type (vLLM applies one factor to max_model_len)")
			return 0
		}
		n = l
	}
	return n
}

// ropeLen is the length one block of RoPE parameters (rope_scaling, or
// rope_parameters) serves: a scaling whose type is not su, longrope or
// llama3 multiplies by its factor (1 when absent) the length it extends,
// original_max_position_embeddings for yarn and max_position_embeddings
// otherwise. The type is rope_type, or the legacy type (vLLM's
// patch_legacy_rope_type).
func (p *parser) ropeLen(v any, field string, maxPos int) int {
	rs, ok := v.(map[string]any)
	if !ok {
		p.fail(field, describe(v), "an object or null")
		return 0
	}
	typ := p.str(rs, field+".", "rope_type", false)
	if typ == "" {
		typ = p.str(rs, field+".", "type", false)
	}
	if p.err != nil {
		return 0
	}
	if typ == "su" || typ == "longrope" || typ == "llama3" {
		return maxPos
	}
	factor := 1.0
	if f, ok := rs["factor"]; ok && f != nil {
		num, isNum := f.(json.Number)
		x, err := num.Float64()
		if !isNum || err != nil || !(x >= 1) || x > float64(maxTopK) {
			p.fail(field+".factor", describe(f), fmt.Sprintf("a number from 1 to %d", maxTopK))
			return 0
		}
		factor = x
	}
	base := maxPos
	if typ == "yarn" {
		base = p.posInt(rs, field+".", "original_max_position_embeddings", maxTopK)
	}
	n := float64(base) * factor
	if n > float64(maxTopK) {
		p.fail(field+".factor", fmt.Sprintf("%g x %d = %.0f tokens", factor, base, n), fmt.Sprintf("a max_model_len of at most %d tokens", maxTopK))
		return 0
	}
	return int(n)
}

func (p *parser) optBool(m map[string]any, prefix, key string) bool {
	v, ok := m[key]
	if !ok || v == nil {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		p.fail(prefix+key, describe(v), "true or false")
	}
	return b
}

func (p *parser) str(m map[string]any, prefix, key string, required bool) string {
	v, ok := m[key]
	if !ok || v == nil {
		if required {
			p.fail(prefix+key, "missing", "a string")
		}
		return ""
	}
	s, ok := v.(string)
	if !ok {
		p.fail(prefix+key, describe(v), "a string")
	}
	return s
}

// asInt accepts a JSON number with an integral value (7168 or 7168.0).
func asInt(v any) (int64, bool) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	if n, err := num.Int64(); err == nil {
		return n, true
	}
	f, err := num.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

// describe renders a JSON value for an error message, shortened.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case json.Number:
		return "got " + shorten(x.String())
	case string:
		return "got string " + strconv.Quote(shorten(x))
	case bool:
		return "got " + strconv.FormatBool(x)
	case []any:
		return "got an array"
	case map[string]any:
		return "got an object"
	}
	return fmt.Sprintf("got %T", v)
}

func shorten(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
