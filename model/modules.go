package model

// ModuleKind names a module of a step: a group of consecutive ops that
// implement one part of the model (an MLA block, the routed experts of a
// MoE layer), as serving engines and measured tables know them.
type ModuleKind string

const (
	ModEmbedding     ModuleKind = "embedding"      // embed.*: the vocab-parallel lookup and its all-reduce
	ModDecoderLayer  ModuleKind = "decoder_layer"  // one decoder layer: its attention block and its MoE block or dense MLP
	ModAttention     ModuleKind = "mla"            // the MLA attention block: attn.* from input_norm to the all-reduce
	ModIndexer       ModuleKind = "indexer"        // the DSA lightning indexer inside the attention block: attn.indexer_*
	ModMoE           ModuleKind = "moe"            // the MoE block: moe.* from post_attn_norm to the all-reduce (or all-gather)
	ModRoutedExperts ModuleKind = "routed_experts" // the routed experts inside the MoE block: experts_gate_up, experts_act, experts_down
	ModSharedExperts ModuleKind = "shared_experts" // the shared experts inside the MoE block, their input quantization included
	ModDenseMLP      ModuleKind = "dense_mlp"      // the dense MLP block of a first_k_dense_replace layer: mlp.*
	ModLMHead        ModuleKind = "lm_head"        // head.*: the final (or shared-head) norm, lm_head, the logits gather
	ModMTP           ModuleKind = "mtp"            // one MTP draft pass: its embedding, mtp.enorm/hnorm/eh_proj, decoder layer and head
	ModEagle3        ModuleKind = "eagle3"         // one EAGLE-3 draft pass: eagle.fc (first pass), its embedding, eagle.enorm/hnorm, the head's decoder layer and head
	ModDraftPass     ModuleKind = "draft_pass"     // one pass of a draft model: its embedding, every decoder layer, its head
	ModSpecVerify    ModuleKind = "spec_verify"    // the rejection sampler of a speculative step
)

// Module is one module of a schedule: its kind, where it sits and the ops
// it spans. Every rank's op list is a copy of one template
// (model.BuildWith), so the op indices hold on every rank.
type Module struct {
	Kind ModuleKind `json:"kind"`
	// Layer is its ops' Op.Layer: the decoder layer, -1 for the main
	// model's embedding and head, the MTP layer for a draft pass.
	Layer int `json:"layer"`
	// Pass is the draft pass its ops belong to (mtp.s{Pass}.*,
	// eagle.s{Pass}.*, draft.s{Pass}.*), -1 in the main model.
	Pass int `json:"pass"`
	// First is the index of its first op in each rank's op list, End one
	// past its last.
	First int `json:"first"`
	End   int `json:"end"`
}

// Contains reports whether op index i is in the module.
func (m Module) Contains(i int) bool { return i >= m.First && i < m.End }

// Modules are a schedule's modules, ordered by First, an enclosing module
// before the modules inside it (a decoder layer, then its attention block,
// then the indexer in it).
type Modules []Module

// At returns the module of kind k that holds op index i.
func (ms Modules) At(i int, k ModuleKind) (Module, bool) {
	for _, m := range ms {
		if m.First > i {
			break
		}
		if m.Kind == k && m.Contains(i) {
			return m, true
		}
	}
	return Module{}, false
}

// Find returns the module of kind k at layer and MTP pass (-1: the main
// model).
func (ms Modules) Find(k ModuleKind, layer, pass int) (Module, bool) {
	for _, m := range ms {
		if m.Kind == k && m.Layer == layer && m.Pass == pass {
			return m, true
		}
	}
	return Module{}, false
}
