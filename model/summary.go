package model

import "slices"

// Summary is what `tpscope model show` reports: the architecture, its
// quantization, parameter counts and the memory picture of one GPU under a
// plan. JSON field names are part of the CLI's contract.
type Summary struct {
	Model  string `json:"model"`
	Source string `json:"source"`
	// QuantSource names the file and field that set the quantization of
	// a loaded config (QuantSource.String); "" for a preset.
	QuantSource string `json:"quant_source,omitempty"`
	ModelType   string `json:"model_type"`
	Plan        string `json:"plan"`
	GPUs        int    `json:"gpus"`

	Dims SummaryDims `json:"dims"`
	// Defaults are the optional fields the config left out and the
	// defaults used for them (Arch.Defaults).
	Defaults []FieldDefault `json:"defaults,omitempty"`
	// MaxModelLenTokens is the longest sequence vLLM serves the model at
	// (Arch.MaxModelLenTokens), the bound of a workload's context.
	MaxModelLenTokens int               `json:"max_model_len_tokens,omitempty"`
	Quant             map[string]string `json:"quant"` // component -> dtype, plus "kv_cache" and "method"

	ParamsTotal  float64 `json:"params_total"`
	ParamsActive float64 `json:"params_active"`
	ParamsMTP    float64 `json:"params_mtp"`

	WeightBytesPerGPU float64         `json:"weight_bytes_per_gpu"`
	WeightComponents  []SummaryWeight `json:"weight_bytes_per_gpu_by_component"`
	// KVBytesPerToken is per GPU and per KV dtype (bf16, fp8), all layers,
	// DSA indexer cache included when used, divided by DCP.
	KVBytesPerToken map[string]float64 `json:"kv_bytes_per_token"`
	KVDtype         string             `json:"kv_dtype"` // the dtype the capacity below is for
	ActivationBytes float64            `json:"activation_bytes"`
	GPUMemBytes     float64            `json:"gpu_mem_bytes"`
	GPUMemUtilFrac  float64            `json:"gpu_mem_util_frac"`
	// KVPool is the engine's pool rule and fraction in words, set by the
	// caller that knows the engine ("": vLLM's gpu_memory_utilization).
	KVPool string `json:"kv_pool,omitempty"`
	// ProfileStep is vLLM's profiling step whose activations the pool is
	// sized less, in words (its tokens and sequences and where each came
	// from), set by the caller; "" under another rule.
	ProfileStep string `json:"profile_step,omitempty"`
	// CUDAGraphBytes is the engine's CUDA-graph estimate taken off the
	// pool (LessCUDAGraphs); CUDAGraphCaveat, set by the caller that knows
	// the engine, says the engine takes one that was not given.
	CUDAGraphBytes  float64 `json:"cuda_graph_bytes,omitempty"`
	CUDAGraphCaveat string  `json:"cuda_graph_caveat,omitempty"`
	KVCacheBytes    float64 `json:"kv_cache_bytes_per_gpu"`
	// KVCapacityTokens is for KVDtype; KVCapacityByDtype for each dtype.
	KVCapacityTokens  int64            `json:"kv_capacity_tokens"`
	KVCapacityByDtype map[string]int64 `json:"kv_capacity_tokens_by_dtype"`
	WeightsShortBytes float64          `json:"weights_do_not_fit_by_bytes,omitempty"`
}

// SummaryDims are the config dims a reader checks first.
type SummaryDims struct {
	Hidden          int `json:"hidden_size"`
	Layers          int `json:"num_hidden_layers"`
	DenseLayers     int `json:"first_k_dense_replace"`
	Heads           int `json:"num_attention_heads"`
	QLoraRank       int `json:"q_lora_rank"`
	KVLoraRank      int `json:"kv_lora_rank"`
	QKNopeHeadDim   int `json:"qk_nope_head_dim"`
	QKRopeHeadDim   int `json:"qk_rope_head_dim"`
	VHeadDim        int `json:"v_head_dim"`
	Intermediate    int `json:"intermediate_size"`
	MoEIntermediate int `json:"moe_intermediate_size"`
	RoutedExperts   int `json:"n_routed_experts"`
	SharedExperts   int `json:"n_shared_experts"`
	TopK            int `json:"num_experts_per_tok"`
	Vocab           int `json:"vocab_size"`
	MTPLayers       int `json:"num_nextn_predict_layers"`
	MaxPositions    int `json:"max_position_embeddings,omitempty"`
	IndexHeads      int `json:"index_n_heads,omitempty"`
	IndexHeadDim    int `json:"index_head_dim,omitempty"`
	IndexTopK       int `json:"index_topk,omitempty"`
}

// SummaryWeight is one component's bytes on one GPU.
type SummaryWeight struct {
	Component string  `json:"component"`
	Dtype     string  `json:"dtype"`
	Placement string  `json:"placement"`
	Bytes     float64 `json:"bytes"`
}

// KVDtypeRows are the dtypes KVBytesPerToken and KVCapacityByDtype hold:
// KVDtypes, with the selected KVDtype after its 16-bit peer where it is
// not one of them (fp16).
func (s *Summary) KVDtypeRows() []Dtype {
	rows := slices.Clone(KVDtypes)
	if sel := Dtype(s.KVDtype); sel != "" && !slices.Contains(rows, sel) {
		rows = slices.Insert(rows, 1, sel)
	}
	return rows
}

// KVDtypes are the KV-cache dtypes reports compare.
var KVDtypes = []Dtype{BF16, FP8}

// Summarize computes the Summary of a under plan p for workload w (its KV
// dtype and speculative tokens matter) on GPUs of gpuMemBytes at
// utilization util (<= 0: DefaultGPUMemUtilization), the KV pool sized by
// the engine's rule (nil: KVCapacity, vLLM's). The plan must be valid for
// a (Plan.Validate).
func Summarize(a *Arch, p Plan, w Workload, o BuildOptions, gpuMemBytes, util float64, rule CapacityRule) Summary {
	p = p.Normalized()
	if util <= 0 {
		util = DefaultGPUMemUtilization
	}
	if rule == nil {
		rule = KVCapacity
	}
	params := a.Params()
	withMTP := withMTPLayers(a, w, o)
	dsa := a.HasIndexer() && !o.DenseDSA
	s := Summary{
		Model: a.Name, Source: a.Source, QuantSource: a.Quant.Source.String(), ModelType: a.ModelType, Plan: p.String(), GPUs: p.World(),
		Dims: SummaryDims{a.Hidden, a.Layers, a.DenseLayers, a.Heads, a.QLoraRank, a.KVLoraRank, a.QKNopeHeadDim,
			a.QKRopeHeadDim, a.VHeadDim, a.Intermediate, a.MoEIntermediate, a.RoutedExperts, a.SharedExperts, a.TopK,
			a.Vocab, a.MTPLayers, a.MaxPositionEmbeddings, a.IndexHeads, a.IndexHeadDim, a.IndexTopK},
		Defaults: a.Defaults, MaxModelLenTokens: a.MaxModelLenTokens,
		Quant:          map[string]string{"method": a.Quant.Method, "kv_cache": string(a.Quant.KV)},
		ParamsTotal:    params.Total,
		ParamsActive:   params.Active,
		ParamsMTP:      params.MTP,
		GPUMemBytes:    gpuMemBytes,
		GPUMemUtilFrac: util,
	}
	if a.Quant.BaseFrom != "" {
		s.Quant["base_from"] = a.Quant.BaseFrom
	}
	if s.Quant["method"] == "" {
		s.Quant["method"] = "none"
	}
	for _, c := range Components {
		if c == CompNorms || (c == CompIndexer && !a.HasIndexer()) || (c == CompMTP && a.MTPLayers == 0) {
			continue
		}
		s.Quant[string(c)] = string(a.Quant.Dtype(c))
	}
	if a.Quant.MTPExcluded {
		s.Quant[string(CompMTP)] = string(a.Quant.Base)
	}
	wm := a.WeightMemory(p, withMTP)
	for _, c := range wm {
		s.WeightComponents = append(s.WeightComponents, SummaryWeight{string(c.Component), string(c.Dtype), c.Placement, c.BytesPerGPU})
	}
	s.WeightBytesPerGPU = totalBytes(wm)
	if db := drafterWeightBytes(p, w, o); db > 0 {
		s.WeightComponents = append(s.WeightComponents, SummaryWeight{"drafter (" + string(o.Spec.MethodFor(w)) + ")", string(o.Spec.Drafter.Quant.Base), "mixed", db})
		s.WeightBytesPerGPU += db
	}
	s.KVBytesPerToken = map[string]float64{}
	s.KVCapacityByDtype = map[string]int64{}
	// KVCapacity depends on the workload only through its KV dtype and
	// speculative tokens, so the selected dtype's capacity is one of the
	// per-dtype ones unless it is not in KVDtypes.
	sel := w.KVDtypeFor(a)
	var c Capacity
	found := false
	for _, d := range KVDtypes {
		s.KVBytesPerToken[string(d)] = kvBytesPerToken(a, p, d, withMTP, dsa) + drafterKVBytesPerToken(p, w, o, d)
		wd := w
		wd.KVDtype = d
		cd := rule(a, p, wd, o, gpuMemBytes, util)
		s.KVCapacityByDtype[string(d)] = cd.KVCapacityTokens
		if d == sel {
			c, found = cd, true
		}
	}
	if !found {
		// Another dtype than the compared ones (fp16): its own row, so
		// the dtype the capacity is for is one of the rows shown.
		c = rule(a, p, w, o, gpuMemBytes, util)
		s.KVBytesPerToken[string(sel)] = kvBytesPerToken(a, p, sel, withMTP, dsa) + drafterKVBytesPerToken(p, w, o, sel)
		s.KVCapacityByDtype[string(sel)] = c.KVCapacityTokens
	}
	s.KVDtype = string(sel)
	s.ActivationBytes = c.ActivationBytes
	s.KVCacheBytes = c.KVBytes
	s.CUDAGraphBytes = c.CUDAGraphBytes
	s.KVCapacityTokens = c.KVCapacityTokens
	s.WeightsShortBytes = c.WeightsDoNotFitBy
	return s
}

// Totals sums one rank's ops (rank < 0: all ranks).
type Totals struct {
	Ops         int
	FLOPs       float64
	Bytes       float64
	WeightBytes float64
	KVBytes     float64
	Collectives int
	CommBytes   int64
}

// Totals sums the ops of rank r, or of every rank when r < 0.
func (s *Schedule) Totals(r int) Totals {
	var t Totals
	for i, ops := range s.Ranks {
		if r >= 0 && i != r {
			continue
		}
		for j := range ops {
			op := &ops[j]
			t.Ops++
			t.FLOPs += op.FLOPs
			t.Bytes += op.Bytes()
			t.WeightBytes += op.WeightBytes
			t.KVBytes += op.KVBytes
			if op.IsCollective() {
				t.Collectives++
				t.CommBytes += op.CommBytes
			}
		}
	}
	return t
}
