package model

import "fmt"

// Arch is an MLA + MoE decoder architecture of the DeepSeek-V3 family
// (DeepSeek-V3/R1, Kimi-K2/K2.5) or GLM-5 (MLA + DSA indexer + MoE), with
// the quantization of its checkpoint. Field names follow the Hugging Face
// config.json keys they come from.
//
// An Arch is produced by Load, Preset or Ref.Resolve and is read-only afterwards;
// Build and the memory functions never modify it.
type Arch struct {
	Name      string // preset name, or the path it was loaded from
	ModelType string // config model_type: deepseek_v3, kimi_k2, kimi_k25, glm_moe_dsa, deepseek_v32
	Source    string // where the numbers come from (HF repo or file path)
	Ref       Ref    // how to find this architecture again (set by Preset, Load, ScaleArch)

	Hidden          int // hidden_size
	Layers          int // num_hidden_layers (main model, without MTP layers)
	DenseLayers     int // first_k_dense_replace: layers 0..DenseLayers-1 use a dense MLP
	Heads           int // num_attention_heads
	QLoraRank       int // q_lora_rank
	KVLoraRank      int // kv_lora_rank (the latent cached per token)
	QKNopeHeadDim   int // qk_nope_head_dim
	QKRopeHeadDim   int // qk_rope_head_dim (also cached per token, shared by all heads)
	VHeadDim        int // v_head_dim
	Intermediate    int // intermediate_size of the dense MLP layers
	MoEIntermediate int // moe_intermediate_size of one expert
	RoutedExperts   int // n_routed_experts
	SharedExperts   int // n_shared_experts
	TopK            int // num_experts_per_tok
	Vocab           int // vocab_size
	TieEmbeddings   bool
	MTPLayers       int // num_nextn_predict_layers

	// MaxPositionEmbeddings is max_position_embeddings; MaxModelLenTokens
	// the longest sequence vLLM serves the model at, derived from it and
	// rope_scaling (parser.maxModelLen); 0 when not known (an EAGLE-3
	// head), when no workload length is checked.
	MaxPositionEmbeddings int
	MaxModelLenTokens     int

	// Defaults lists the optional fields the config left out and the
	// defaults used for them, in the order they are read.
	Defaults []FieldDefault

	// DSA lightning indexer (glm_moe_dsa, deepseek_v32); all zero when absent.
	IndexHeads   int // index_n_heads
	IndexHeadDim int // index_head_dim
	IndexTopK    int // index_topk: tokens each query attends to

	// eagle3 is set when the config is an EAGLE-3 draft head, not a model
	// (drafter.go; IsEagle3Head); nil for a model.
	eagle3 *eagle3Head

	Quant Quant
}

// FieldDefault is an optional config field the file did not state and
// the value used for it: its config class's default.
type FieldDefault struct {
	Field string `json:"field"` // dotted JSON path: "first_k_dense_replace", "text_config.num_nextn_predict_layers"
	Value int    `json:"value"`
	From  string `json:"from"` // whose default: "transformers' DeepseekV3Config"
}

// String reads "first_k_dense_replace = 3 (transformers' DeepseekV3Config)".
func (d FieldDefault) String() string {
	return fmt.Sprintf("%s = %d (%s)", d.Field, d.Value, d.From)
}

// Component is a group of weights that a checkpoint quantizes (or leaves in
// 16 bits) as a whole.
type Component string

// The components, in the fixed order used by reports (Components).
const (
	CompEmbedding     Component = "embedding"      // embed_tokens (vocab-parallel)
	CompAttention     Component = "attention"      // MLA projections q_a/kv_a (fused), q_b, kv_b, o_proj
	CompIndexer       Component = "indexer"        // DSA indexer wq_b, wk, weights_proj (GLM-5)
	CompDenseMLP      Component = "dense_mlp"      // MLP of the first_k_dense_replace layers
	CompRouter        Component = "router"         // MoE gate (hidden -> experts); vLLM never quantizes it
	CompSharedExperts Component = "shared_experts" // shared experts of MoE layers
	CompRoutedExperts Component = "routed_experts" // routed experts of MoE layers
	CompNorms         Component = "norms"          // RMSNorm weights, always 16-bit
	CompLMHead        Component = "lm_head"        // output projection (vocab-sharded)
	CompMTP           Component = "mtp"            // the MTP (next-n predict) layers, all of their weights
)

// Components lists every component in report order.
var Components = []Component{CompEmbedding, CompAttention, CompIndexer, CompDenseMLP, CompRouter,
	CompSharedExperts, CompRoutedExperts, CompNorms, CompLMHead, CompMTP}

// Quant is a checkpoint's quantization, resolved per component from its
// quantization_config / hf_quant_config.json and their ignore (exclude)
// lists.
type Quant struct {
	Method string // "" (unquantized), "fp8", "compressed-tensors", "modelopt"
	Base   Dtype  // the unquantized dtype the engine serves (bf16 unless dtype says otherwise)
	// BaseFrom says why Base is not the config's own dtype ("" when it
	// is): a float32 checkpoint, which the engines serve in 16 bits.
	BaseFrom string

	Embedding, Attention, Indexer, DenseMLP, Router, SharedExperts, RoutedExperts, LMHead Dtype
	// MTP is the dtype of the MTP layer's quantizable linears (its experts
	// and attention follow the main layers' dtypes unless the whole MTP
	// layer is excluded, in which case all of it is Base).
	MTP Dtype
	// MTPExcluded reports the whole MTP layer stays in Base.
	MTPExcluded bool
	// KV is the checkpoint's KV-cache dtype (kv_cache_quant_algo /
	// kv_cache_scheme), Base when it asks for none.
	KV Dtype
	// Source is the file and field that set the quantization (zero for an
	// unquantized config).
	Source QuantSource
}

// KVScheme reports whether the checkpoint names a KV-cache scheme of its
// own (KV other than the model's dtype): the scheme an engine's 'auto'
// may take or ignore by the checkpoint's Method.
func (q Quant) KVScheme() bool { return q.KV != "" && q.KV != q.Base }

// QuantSource names where a checkpoint's quantization was read: config.json's
// quantization_config or hf_quant_config.json's quantization object.
type QuantSource struct {
	File  string // the file as Load was given it (base name for a preset or a recorded config)
	Field string // "quantization_config", "text_config.quantization_config" or "quantization"
	// Unread is an hf_quant_config.json beside the config that was not
	// read because the config has a quantization_config of its own.
	Unread string
}

// String says it in one phrase for the source line of model show:
// "quantization_config of /m/config.json (/m/hf_quant_config.json not
// read: the config's own quantization_config decides, as in vLLM)".
func (s QuantSource) String() string {
	if s.File == "" {
		return ""
	}
	msg := s.Field + " of " + s.File
	if s.Unread != "" {
		msg += " (" + s.Unread + " not read: the config's own quantization_config decides, as in vLLM)"
	}
	return msg
}

// Dtype returns the weight dtype of component c.
func (q *Quant) Dtype(c Component) Dtype {
	switch c {
	case CompEmbedding:
		return q.Embedding
	case CompAttention:
		return q.Attention
	case CompIndexer:
		return q.Indexer
	case CompDenseMLP:
		return q.DenseMLP
	case CompRouter:
		return q.Router
	case CompSharedExperts:
		return q.SharedExperts
	case CompRoutedExperts:
		return q.RoutedExperts
	case CompLMHead:
		return q.LMHead
	case CompMTP:
		return q.MTP
	}
	return q.Base
}

// mtpDtype is the dtype of a main-layer component when it appears inside
// the MTP layer.
func (q *Quant) mtpDtype(c Component) Dtype {
	if q.MTPExcluded {
		return q.Base
	}
	return q.Dtype(c)
}

// HasIndexer reports whether the architecture has a DSA lightning indexer.
func (a *Arch) HasIndexer() bool { return a.IndexHeads > 0 }

// MoELayers is the number of main-model layers with an MoE block.
func (a *Arch) MoELayers() int { return a.Layers - a.DenseLayers }

// KVLatentDim is the number of values cached per token per layer by MLA:
// kv_lora_rank + qk_rope_head_dim (576 for DeepSeek-V3, Kimi-K2.5, GLM-5).
func (a *Arch) KVLatentDim() int { return a.KVLoraRank + a.QKRopeHeadDim }

// QKHeadDim is qk_nope_head_dim + qk_rope_head_dim.
func (a *Arch) QKHeadDim() int { return a.QKNopeHeadDim + a.QKRopeHeadDim }

// IndexerCacheBytesPerTokenLayer is the DSA indexer's key cache per token
// per layer: index_head_dim FP8 values plus one FP32 scale per 128 values
// (vLLM's DeepSeek-V3.2 indexer cache layout; serving-facts.md: "about
// 132 B per token per layer" for GLM-5's 128-dim indexer). It does not
// depend on the KV dtype of the MLA cache.
func (a *Arch) IndexerCacheBytesPerTokenLayer() int {
	if !a.HasIndexer() {
		return 0
	}
	return a.IndexHeadDim + 4*ceilDiv(a.IndexHeadDim, 128)
}

// SparseFP8LatentBytesPerTokenLayer is one token's MLA cache per layer in
// the FP8 format of DeepSeek's sparse MLA kernels, which vLLM (its
// fp8_ds_mla cache dtype, FLASHMLA_SPARSE) and SGLang (NSA) store for a
// DSA model run sparse with an FP8 cache: the kv_lora_rank values in FP8,
// one FP32 scale per 128 of them, and the RoPE part left in BF16 (FlashMLA's
// layout: 512 + 16 + 128 = 656 B for DeepSeek-V3.2 and GLM-5, against the
// 576 of a plain FP8 latent).
func (a *Arch) SparseFP8LatentBytesPerTokenLayer() int {
	return a.KVLoraRank + 4*ceilDiv(a.KVLoraRank, 128) + 2*a.QKRopeHeadDim
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
