package model

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// quantSpec is a checkpoint's quantization before it is resolved per
// component: one quantized weight dtype for the Linear layers, or
// compressed-tensors' config groups each with its targets; the patterns of
// modules left unquantized, and the KV-cache dtype.
type quantSpec struct {
	method  string
	weights Dtype // "" when unquantized or when groups decide
	// groups, when set, decide each module's dtype by their targets
	// (groupFor); groupsField names them in errors (file is the file).
	groups      []quantGroup
	file        string
	groupsField string
	kv          Dtype // "" when the checkpoint asks for no KV quantization
	ignore      []*regexp.Regexp
}

// quantGroup is one compressed-tensors config group: the modules it
// targets and the dtype it stores their weights in.
type quantGroup struct {
	name    string
	weights Dtype
	// linear: a target names the Linear class, which vLLM matches against
	// every linear layer's class name (ColumnParallelLinear, ...; the
	// FusedMoE experts are added under it); names are the "re:" patterns
	// (matched from the start, as re.match) and exact module names.
	linear bool
	names  []*regexp.Regexp
}

// quantized reports whether the checkpoint quantizes any weights.
func (s *quantSpec) quantized() bool { return s.weights != "" || len(s.groups) > 0 }

// parseQuantConfig reads config.json's quantization_config (field names
// the JSON path for errors). Supported: quant_method "fp8" (DeepSeek
// block-128 or per-tensor), "compressed-tensors" (pack-quantized INT4
// group 32, FP8, NVFP4) and "modelopt" (NVFP4, FP8).
func parseQuantConfig(file, field string, v any) (quantSpec, error) {
	if v == nil {
		return quantSpec{}, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return quantSpec{}, &ConfigError{File: file, Field: field, Got: describe(v), Want: "an object"}
	}
	p := &parser{file: file}
	pre := field + "."
	method := p.str(m, pre, "quant_method", true)
	if p.err != nil {
		return quantSpec{}, p.err
	}
	spec := quantSpec{method: method}
	var ignoreKey string
	switch method {
	case "fp8":
		spec.weights = FP8
		if bs, ok := m["weight_block_size"]; ok && bs != nil {
			arr, ok := bs.([]any)
			if !ok || len(arr) != 2 {
				return quantSpec{}, &ConfigError{File: file, Field: pre + "weight_block_size", Got: describe(bs), Want: "[128, 128]"}
			}
			b0, ok0 := asInt(arr[0])
			b1, ok1 := asInt(arr[1])
			if !ok0 || !ok1 || b0 != 128 || b1 != 128 {
				return quantSpec{}, &ConfigError{File: file, Field: pre + "weight_block_size",
					Got: fmt.Sprintf("got [%v, %v]", arr[0], arr[1]), Want: "[128, 128] (the only FP8 block size modelled)"}
			}
			spec.weights = FP8Block128
		}
		if f := p.str(m, pre, "fmt", false); f != "" && f != "e4m3" {
			return quantSpec{}, &ConfigError{File: file, Field: pre + "fmt", Got: strconv.Quote(f), Want: `"e4m3"`}
		}
		ignoreKey = "modules_to_not_convert"
		if _, ok := m[ignoreKey]; !ok {
			ignoreKey = "ignored_layers"
		}
	case "compressed-tensors":
		if err := checkCTFormat(file, pre, m); err != nil {
			return quantSpec{}, err
		}
		g, err := parseConfigGroups(file, pre+"config_groups", m["config_groups"])
		if err != nil {
			return quantSpec{}, err
		}
		spec.groups, spec.file, spec.groupsField = g, file, pre+"config_groups"
		ignoreKey = "ignore"
	case "modelopt":
		algo := p.str(m, pre, "quant_algo", false)
		switch algo {
		case "NVFP4":
			spec.weights = NVFP4
		case "FP8":
			spec.weights = FP8
		case "":
			g, err := parseConfigGroups(file, pre+"config_groups", m["config_groups"])
			if err != nil {
				return quantSpec{}, err
			}
			spec.groups, spec.file, spec.groupsField = g, file, pre+"config_groups"
		default:
			return quantSpec{}, &ConfigError{File: file, Field: pre + "quant_algo", Got: strconv.Quote(algo), Want: `"NVFP4" or "FP8"`}
		}
		ignoreKey = "ignore"
		if _, ok := m[ignoreKey]; !ok {
			ignoreKey = "exclude_modules"
		}
		if kv := p.str(m, pre, "kv_cache_quant_algo", false); kv != "" {
			d, err := kvAlgo(file, pre+"kv_cache_quant_algo", kv)
			if err != nil {
				return quantSpec{}, err
			}
			spec.kv = d
		}
	default:
		return quantSpec{}, &ConfigError{File: file, Field: pre + "quant_method", Got: strconv.Quote(method),
			Want: `one of "fp8", "compressed-tensors", "modelopt"`}
	}
	if p.err != nil {
		return quantSpec{}, p.err
	}
	if kvs, ok := m["kv_cache_scheme"]; ok && kvs != nil {
		d, err := kvScheme(file, pre+"kv_cache_scheme", kvs)
		if err != nil {
			return quantSpec{}, err
		}
		spec.kv = d
	}
	ig, err := parsePatterns(file, pre+ignoreKey, m[ignoreKey])
	if err != nil {
		return quantSpec{}, err
	}
	spec.ignore = ig
	return spec, nil
}

// ctDenseFormats are the compressed-tensors formats whose weights are
// dense and priced as the groups' dtypes say (compressed-tensors
// CompressionFormat): INT4 packed, integer, FP8, NVFP4 packed, unpacked.
var ctDenseFormats = []string{"pack-quantized", "int-quantized", "float-quantized", "nvfp4-pack-quantized", "naive-quantized", "dense"}

// checkCTFormat refuses a compressed-tensors checkpoint whose weights are
// not the dense ones tpscope prices: a sparse format (marlin-24, 2:4
// sparse INT4, runs vLLM's sparse Marlin kernels and streams about half
// the weight bytes; sparse-24-bitmask, sparse-bitmask) or a
// sparsity_config beside the quantization. A missing format is that of
// the groups (older checkpoints write none).
func checkCTFormat(file, pre string, m map[string]any) error {
	if v, ok := m["format"]; ok && v != nil {
		f, isStr := v.(string)
		if !isStr || !slices.Contains(ctDenseFormats, f) {
			return &ConfigError{File: file, Field: pre + "format", Got: describe(v),
				Want: "a dense format (" + strings.Join(ctDenseFormats, ", ") + "); sparse formats such as marlin-24 (2:4 sparse INT4) are not modelled"}
		}
	}
	if v, ok := m["sparsity_config"]; ok && v != nil {
		return &ConfigError{File: file, Field: pre + "sparsity_config", Got: describe(v),
			Want: "null: sparse weights are not modelled (their kernels read fewer bytes than the dense weights tpscope prices)"}
	}
	return nil
}

// parseConfigGroups reads compressed-tensors config_groups: each group's
// weight dtype and targets, in the order of their names (no result
// depends on map order; checkpoints name them group_0, group_1, ... in
// the order they are written).
func parseConfigGroups(file, field string, v any) ([]quantGroup, error) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return nil, &ConfigError{File: file, Field: field, Got: describeMissing(v), Want: "an object of quantization groups"}
	}
	var out []quantGroup
	for _, name := range slices.Sorted(maps.Keys(m)) {
		g, ok := m[name].(map[string]any)
		if !ok {
			return nil, &ConfigError{File: file, Field: field + "." + name, Got: describe(m[name]), Want: "an object"}
		}
		w, ok := g["weights"].(map[string]any)
		if !ok {
			return nil, &ConfigError{File: file, Field: field + "." + name + ".weights", Got: describeMissing(g["weights"]), Want: "an object"}
		}
		bits, _ := asInt(w["num_bits"])
		typ, _ := w["type"].(string)
		gs, _ := asInt(w["group_size"])
		wf := field + "." + name + ".weights"
		qg := quantGroup{name: name}
		switch {
		case typ == "int" && bits == 4 && gs == 32:
			if sym, ok := w["symmetric"]; ok && sym != true {
				// Zero points per group (vLLM's Marlin takes them as
				// uint4 with a zero-point tensor) add bytes and work the
				// symmetric INT4 price leaves out.
				return nil, &ConfigError{File: file, Field: wf + ".symmetric", Got: describe(sym), Want: "true: asymmetric INT4 (zero points per group) is not modelled"}
			}
			qg.weights = INT4G32
		case typ == "float" && bits == 4 && gs == 16:
			qg.weights = NVFP4
		case typ == "float" && bits == 8:
			d, err := fp8Strategy(file, wf, w)
			if err != nil {
				return nil, err
			}
			qg.weights = d
		default:
			return nil, &ConfigError{File: file, Field: wf, Got: fmt.Sprintf("type %q num_bits %d group_size %d", typ, bits, gs),
				Want: "int 4-bit group 32, float 4-bit group 16 or float 8-bit"}
		}
		if err := checkActivations(file, field+"."+name+".input_activations", qg.weights, g["input_activations"]); err != nil {
			return nil, err
		}
		if err := qg.parseTargets(file, field+"."+name+".targets", g["targets"]); err != nil {
			return nil, err
		}
		out = append(out, qg)
	}
	return out, nil
}

// checkActivations refuses a group's input_activations (field names it)
// that would make its weights d a scheme other than the one d prices.
// vLLM picks the compressed-tensors scheme from weights and activations
// together (compressed_tensors.py _get_scheme_from_parts): NVFP4 weights
// without input_activations are NVFP4A16 (CompressedTensorsW4A16Fp4) and
// FP8 weights without them W8A16 (CompressedTensorsW8A16Fp8), both
// weight-only Marlin kernels that dequantize to 16 bits, where NVFP4 and
// FP8 price W4A4 and W8A8 tensor-core kernels; INT4 g32 prices W4A16,
// so quantized activations (W4A8) are not it either.
func checkActivations(file, field string, d Dtype, v any) error {
	if d == INT4G32 {
		if v != nil {
			return &ConfigError{File: file, Field: field, Got: describe(v),
				Want: "null (INT4 group 32 is priced as W4A16, weights only; quantized activations are not modelled)"}
		}
		return nil
	}
	bitsWant, what := int64(8), "FP8 W8A8"
	if d == NVFP4 {
		bitsWant, what = 4, "NVFP4 W4A4"
	}
	if v == nil {
		weightOnly := "FP8 weights only: vLLM runs them as W8A16 with Marlin's weight-only FP8 kernels (CompressedTensorsW8A16Fp8)"
		if d == NVFP4 {
			weightOnly = "NVFP4 weights only: vLLM runs them as NVFP4A16 with Marlin's weight-only FP4 kernels (CompressedTensorsW4A16Fp4)"
		}
		return &ConfigError{File: file, Field: field, Got: "null (" + weightOnly + ")",
			Want: fmt.Sprintf("float %d-bit activations (%s): weight-only kernels are not modelled", bitsWant, what)}
	}
	m, ok := v.(map[string]any)
	bits, _ := asInt(m["num_bits"])
	typ, _ := m["type"].(string)
	if !ok || typ != "float" || bits != bitsWant {
		return &ConfigError{File: file, Field: field, Got: fmt.Sprintf("type %q num_bits %d", typ, bits),
			Want: fmt.Sprintf("float %d-bit activations (%s)", bitsWant, what)}
	}
	return nil
}

// parseTargets reads a group's targets: "Linear" (the class of every
// linear layer), "re:PATTERN" (a Python regexp on the module name, matched
// from its start) or an exact module name.
func (g *quantGroup) parseTargets(file, field string, v any) error {
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return &ConfigError{File: file, Field: field, Got: describeMissing(v), Want: `an array of targets ("Linear", "re:" patterns or module names)`}
	}
	for i, e := range arr {
		t, ok := e.(string)
		if !ok || t == "" {
			return &ConfigError{File: file, Field: fmt.Sprintf("%s[%d]", field, i), Got: describe(e), Want: "a target name"}
		}
		if strings.EqualFold(t, "Linear") {
			g.linear = true
			continue
		}
		expr := "^" + regexp.QuoteMeta(t) + "$"
		if strings.HasPrefix(t, "re:") {
			expr = "^(?:" + t[3:] + ")"
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return &ConfigError{File: file, Field: fmt.Sprintf("%s[%d]", field, i), Got: strconv.Quote(shorten(t)), Want: "a valid pattern", Err: err}
		}
		g.names = append(g.names, re)
	}
	return nil
}

// groupFor is the config group that quantizes module name (a linear layer
// unless lmHead), nil when none targets it, as vLLM's compressed-tensors
// find_matched_target decides (compressed_tensors/utils.py): first a
// target matching the module's name, in group order, then one matching its
// class (Linear: every linear layer; lm_head is a ParallelLMHead, which
// "Linear" does not match). vLLM leaves a module no target matches
// unquantized (older releases refused to load it).
func (s *quantSpec) groupFor(name string, lmHead bool) *quantGroup {
	for i := range s.groups {
		for _, re := range s.groups[i].names {
			if re.MatchString(name) || re.MatchString("language_model."+name) {
				return &s.groups[i]
			}
		}
	}
	if lmHead {
		return nil
	}
	for i := range s.groups {
		if s.groups[i].linear {
			return &s.groups[i]
		}
	}
	return nil
}

// fp8Strategy is the dtype of compressed-tensors FP8 weights w (field
// names them for errors): strategy "block" with block_structure [128, 128]
// (one FP32 scale per 128 x 128 block, DeepSeek's layout) is FP8Block128,
// which vLLM runs with the block-scaled kernels as it does fp8 with
// weight_block_size; "tensor" and "channel" scales are FP8 (a scale per
// matrix or per row: a negligible overhead). Another block shape is not
// modelled.
func fp8Strategy(file, field string, w map[string]any) (Dtype, error) {
	strategy, _ := w["strategy"].(string)
	bs, hasBlock := w["block_structure"]
	if bs == nil {
		hasBlock = false
	}
	if strategy != "block" && !hasBlock {
		return FP8, nil
	}
	arr, ok := bs.([]any)
	if ok && len(arr) == 2 {
		b0, ok0 := asInt(arr[0])
		b1, ok1 := asInt(arr[1])
		if ok0 && ok1 && b0 == 128 && b1 == 128 {
			return FP8Block128, nil
		}
	}
	return "", &ConfigError{File: file, Field: field + ".block_structure", Got: describeMissing(bs),
		Want: "[128, 128] (the only FP8 block size modelled)"}
}

func describeMissing(v any) string {
	if v == nil {
		return "missing"
	}
	return describe(v)
}

// kvScheme reads compressed-tensors/ModelOpt kv_cache_scheme
// ({"num_bits": 8, "type": "float"} is FP8 e4m3).
func kvScheme(file, field string, v any) (Dtype, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return "", &ConfigError{File: file, Field: field, Got: describe(v), Want: "an object or null"}
	}
	bits, _ := asInt(m["num_bits"])
	typ, _ := m["type"].(string)
	if bits == 8 && typ == "float" {
		return FP8, nil
	}
	return "", &ConfigError{File: file, Field: field, Got: fmt.Sprintf("type %q num_bits %d", typ, bits), Want: `{"num_bits": 8, "type": "float"} (FP8) or null`}
}

func kvAlgo(file, field, s string) (Dtype, error) {
	switch strings.ToUpper(s) {
	case "FP8":
		return FP8, nil
	}
	return "", &ConfigError{File: file, Field: field, Got: strconv.Quote(s), Want: `"FP8" or null`}
}

// parseHFQuantConfig reads a ModelOpt hf_quant_config.json:
// {"quantization": {"quant_algo", "kv_cache_quant_algo", "group_size", "exclude_modules"}}.
func parseHFQuantConfig(file string, data []byte) (quantSpec, error) {
	root, err := decodeObject(file, data)
	if err != nil {
		return quantSpec{}, err
	}
	q, ok := root["quantization"].(map[string]any)
	if !ok {
		return quantSpec{}, &ConfigError{File: file, Field: "quantization", Got: describeMissing(root["quantization"]), Want: "an object"}
	}
	p := &parser{file: file}
	spec := quantSpec{method: "modelopt"}
	algo := p.str(q, "quantization.", "quant_algo", true)
	if p.err != nil {
		return quantSpec{}, p.err
	}
	switch algo {
	case "NVFP4":
		spec.weights = NVFP4
		if gs, ok := q["group_size"]; ok && gs != nil {
			if n, ok := asInt(gs); !ok || n != 16 {
				return quantSpec{}, &ConfigError{File: file, Field: "quantization.group_size", Got: describe(gs), Want: "16 for NVFP4"}
			}
		}
	case "FP8":
		spec.weights = FP8
	default:
		return quantSpec{}, &ConfigError{File: file, Field: "quantization.quant_algo", Got: strconv.Quote(algo), Want: `"NVFP4" or "FP8"`}
	}
	if kv := p.str(q, "quantization.", "kv_cache_quant_algo", false); kv != "" {
		d, err := kvAlgo(file, "quantization.kv_cache_quant_algo", kv)
		if err != nil {
			return quantSpec{}, err
		}
		spec.kv = d
	}
	if p.err != nil {
		return quantSpec{}, p.err
	}
	spec.ignore, err = parsePatterns(file, "quantization.exclude_modules", q["exclude_modules"])
	return spec, err
}

// parsePatterns compiles an ignore/exclude list. Entries are module names
// ("lm_head"), fnmatch globs ("model.layers.*.self_attn*", ModelOpt) or
// Python regexps prefixed "re:" (compressed-tensors, matched from the start
// of the name as re.match does).
func parsePatterns(file, field string, v any) ([]*regexp.Regexp, error) {
	if v == nil {
		return nil, nil
	}
	arr, ok := v.([]any)
	if !ok {
		return nil, &ConfigError{File: file, Field: field, Got: describe(v), Want: "an array of module names or patterns"}
	}
	out := make([]*regexp.Regexp, 0, len(arr))
	for i, e := range arr {
		s, ok := e.(string)
		if !ok {
			return nil, &ConfigError{File: file, Field: fmt.Sprintf("%s[%d]", field, i), Got: describe(e), Want: "a string"}
		}
		var expr string
		switch {
		case strings.HasPrefix(s, "re:"):
			expr = "^(?:" + s[3:] + ")"
		default:
			// Glob (or plain name): * and ? as in fnmatch, anchored at both
			// ends; a plain name also matches as a dotted suffix, so
			// "lm_head" covers "language_model.lm_head".
			var b strings.Builder
			b.WriteString("^(?:.*\\.)?")
			for _, r := range s {
				switch r {
				case '*':
					b.WriteString(".*")
				case '?':
					b.WriteString(".")
				default:
					b.WriteString(regexp.QuoteMeta(string(r)))
				}
			}
			b.WriteString("$")
			expr = b.String()
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return nil, &ConfigError{File: file, Field: fmt.Sprintf("%s[%d]", field, i), Got: strconv.Quote(shorten(s)), Want: "a valid pattern", Err: err}
		}
		out = append(out, re)
	}
	return out, nil
}

// excluded reports whether any of the module names (tried with and without
// the multimodal "language_model." prefix) matches the ignore list.
func (s *quantSpec) excluded(names ...string) bool {
	for _, n := range names {
		for _, full := range [2]string{n, "language_model." + n} {
			for _, re := range s.ignore {
				if re.MatchString(full) {
					return true
				}
			}
		}
	}
	return false
}

// resolve decides each component's dtype by testing representative HF
// module names of the first MoE layer (attention, experts), layer 0 (dense
// MLP) and the MTP layer (index num_hidden_layers) against the ignore list
// and, for compressed-tensors, against the config groups' targets
// (groupFor). A component counts as unquantized if any of its modules is
// excluded (the larger, conservative footprint); modules of one component
// that config groups put in different dtypes (a q_b_proj in FP8, an o_proj
// in NVFP4, or one left out) are a mix the model does not price, refused
// naming the file and config_groups.
//
// Never quantized, whatever the list says, because vLLM does not: the
// embedding (not a Linear layer), the MoE router gate (ReplicatedLinear
// built without a quant config in vLLM's deepseek_v2.py) and the norms.
// DeepSeek FP8 checkpoints keep lm_head in BF16 (no weight_scale_inv for it).
func (s *quantSpec) resolve(a *Arch, base Dtype) (Quant, error) {
	q := Quant{Method: s.method, Base: base, KV: base}
	if s.kv != "" {
		q.KV = s.kv
	}
	q.Embedding, q.Router = base, base
	var err error
	set := func(d *Dtype, names ...string) {
		switch {
		case !s.quantized() || s.excluded(names...):
			*d = base
		case len(s.groups) == 0:
			*d = s.weights
		default:
			if e := s.setFromGroups(d, base, names); e != nil && err == nil {
				err = e
			}
		}
	}
	L := a.DenseLayers
	if L >= a.Layers {
		L = 0
	}
	ly := func(l int, m string) string { return fmt.Sprintf("model.layers.%d.%s", l, m) }
	set(&q.Attention, ly(L, "self_attn.q_a_proj"), ly(L, "self_attn.q_b_proj"), ly(L, "self_attn.kv_a_proj_with_mqa"),
		ly(L, "self_attn.kv_b_proj"), ly(L, "self_attn.o_proj"))
	q.Indexer = base
	if a.HasIndexer() {
		set(&q.Indexer, ly(L, "self_attn.indexer.wq_b"), ly(L, "self_attn.indexer.wk"))
	}
	set(&q.SharedExperts, ly(L, "mlp.shared_experts.gate_proj"), ly(L, "mlp.shared_experts.down_proj"))
	set(&q.RoutedExperts, ly(L, "mlp.experts.0.gate_proj"), ly(L, "mlp.experts.0.down_proj"))
	set(&q.DenseMLP, ly(0, "mlp.gate_proj"), ly(0, "mlp.down_proj"))
	if s.method == "fp8" {
		q.LMHead = base
	} else {
		set(&q.LMHead, "lm_head")
	}
	set(&q.MTP, ly(a.Layers, "mlp.experts.0.gate_proj"))
	// The MTP layer is excluded as a whole when its experts stay in Base
	// while the main layers' are quantized.
	q.MTPExcluded = s.quantized() && q.MTP == base && q.RoutedExperts != base
	return q, err
}

// setFromGroups sets *d to the dtype the config groups give the modules
// names (Base for a module no group targets): one dtype, or an error
// naming the two modules that differ.
func (s *quantSpec) setFromGroups(d *Dtype, base Dtype, names []string) error {
	scheme := func(n string) (Dtype, string) {
		g := s.groupFor(n, n == "lm_head")
		if g == nil {
			return base, "no group"
		}
		return g.weights, g.name
	}
	first, firstGroup := scheme(names[0])
	for _, n := range names[1:] {
		if dt, g := scheme(n); dt != first {
			return &ConfigError{File: s.file, Field: s.groupsField,
				Got:  fmt.Sprintf("%s in %s (%s) but %s in %s (%s)", names[0], firstGroup, first, n, g, dt),
				Want: "one dtype for the modules of one component (attention projections, dense MLP, shared experts, routed experts): a mix inside one is not modelled"}
		}
	}
	*d = first
	return nil
}
