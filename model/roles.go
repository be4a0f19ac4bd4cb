package model

import "strings"

// Role is what an op does in its decoder layer or part of the step: its
// op ID without the layer prefix ("L07.") or the MTP draft pass's
// ("mtp.s0."), e.g. RoleMLADecode = "attn.mla_decode". Every op carries
// one (Op.Role); the builder's block tables (table.go) list them in issue
// order. Other packages name an op by these constants, never by their
// text, so that renaming one is a compile error there rather than an op
// silently left unpriced, unplaced or unexecuted.
type Role string

// The embedding (Op.Layer -1; an MTP pass's embedding carries its layer).
const (
	RoleEmbedLookup    Role = "embed.lookup"    // vocab-parallel embedding lookup of the step's tokens
	RoleEmbedAllReduce Role = "embed.allreduce" // all-reduce that assembles the embeddings from the vocabulary shards
)

// MLA attention (model.BuildWith's doc lists when each runs).
const (
	RoleInputNorm              Role = "attn.input_norm"                  // RMSNorm (with the residual add) before attention
	RoleFusedQKVAProjQuant     Role = "attn.fused_qkv_a_proj_quant"      // FP8 per-token-group quantization of fused_qkv_a_proj's input
	RoleFusedQKVAProj          Role = "attn.fused_qkv_a_proj"            // replicated fused q_a / kv_a down-projection
	RoleQANorm                 Role = "attn.q_a_norm"                    // RMSNorm of the query latent
	RoleKVANorm                Role = "attn.kv_a_norm"                   // RMSNorm of the KV latent
	RoleQBProjQuant            Role = "attn.q_b_proj_quant"              // FP8 quantization of q_b_proj's input
	RoleQBProj                 Role = "attn.q_b_proj"                    // column-parallel query up-projection (heads / TP)
	RoleWUK                    Role = "attn.w_uk"                        // absorbed W_UK: batched per-head GEMM of the decode queries
	RoleKVBProjQuant           Role = "attn.kv_b_proj_quant"             // FP8 quantization of kv_b_proj's input
	RoleKVBProj                Role = "attn.kv_b_proj"                   // prefill: K and V expanded from the latent
	RoleRope                   Role = "attn.rope"                        // rotary embedding of the local heads' q_pe and the shared k_pe
	RoleKVCacheWrite           Role = "attn.kv_cache_write"              // the new tokens' latents written into the KV cache
	RoleMLAPrefill             Role = "attn.mla_prefill"                 // causal attention of the prompt (chunk) over its own tokens
	RolePrefillCtxGather       Role = "attn.prefill_ctx_gather"          // a chunk's cached prefix read from the cache into a bf16 workspace
	RolePrefillCtxKVBProjQuant Role = "attn.prefill_ctx_kv_b_proj_quant" // FP8 quantization of prefill_ctx_kv_b_proj's input
	RolePrefillCtxKVBProj      Role = "attn.prefill_ctx_kv_b_proj"       // K and V of the cached prefix expanded from the latent
	RoleMLAPrefillCtx          Role = "attn.mla_prefill_ctx"             // the chunk's queries against the cached prefix
	RolePrefillCtxMerge        Role = "attn.prefill_ctx_merge"           // merge of the two partial outputs by log-sum-exp
	RoleDCPQAllGather          Role = "attn.dcp_q_allgather"             // DCP: the query heads of the DCP group gathered
	RoleMLADecode              Role = "attn.mla_decode"                  // absorbed attention of the decode tokens over the latent cache
	RoleDCPLSEAllGather        Role = "attn.dcp_lse_allgather"           // DCP: the partial outputs' log-sum-exps gathered
	RoleDCPOutReduceScatter    Role = "attn.dcp_out_reducescatter"       // DCP: the rescaled partial outputs reduce-scattered
	RoleWUV                    Role = "attn.w_uv"                        // absorbed W_UV: batched per-head GEMM back from the latent
	RoleOProjQuant             Role = "attn.o_proj_quant"                // FP8 quantization of o_proj's input
	RoleOProj                  Role = "attn.o_proj"                      // row-parallel output projection
	RoleAttnAllReduce          Role = "attn.allreduce"                   // all-reduce of o_proj's partial sums over the TP group
	RoleIndexerWQBQuant        Role = "attn.indexer_wq_b_quant"          // FP8 quantization of indexer_wq_b's input
	RoleIndexerWQB             Role = "attn.indexer_wq_b"                // DSA indexer: query projection (replicated)
	RoleIndexerWKQuant         Role = "attn.indexer_wk_quant"            // FP8 quantization of indexer_wk's input
	RoleIndexerWK              Role = "attn.indexer_wk"                  // DSA indexer: key projection
	RoleIndexerKNorm           Role = "attn.indexer_k_norm"              // DSA indexer: LayerNorm of the keys
	RoleIndexerWeightsProj     Role = "attn.indexer_weights_proj"        // DSA indexer: per-head weights of the scores
	RoleIndexerRope            Role = "attn.indexer_rope"                // DSA indexer: rotary embedding of its queries and keys
	RoleIndexerCacheWrite      Role = "attn.indexer_cache_write"         // DSA indexer: FP8 key-cache write
	RoleIndexerScore           Role = "attn.indexer_score"               // DSA indexer: every cached key scored by every index head
	RoleIndexerTopK            Role = "attn.indexer_topk"                // DSA indexer: the index_topk keys each query attends to
)

// The MoE block of a MoE layer.
const (
	RoleMoEPostAttnNorm   Role = "moe.post_attn_norm"       // RMSNorm (with the residual add) after attention
	RoleMoEGate           Role = "moe.gate"                 // the router's GEMM (hidden -> experts)
	RoleMoETopK           Role = "moe.topk"                 // the router's top-k selection of each token's experts
	RoleMoEDispatch       Role = "moe.dispatch"             // DP attention + EP: tokens sent to their experts' ranks
	RoleExpertsGateUp     Role = "moe.experts_gate_up"      // routed experts: grouped gate/up GEMM
	RoleExpertsAct        Role = "moe.experts_act"          // routed experts: SiLU-and-mul
	RoleExpertsDown       Role = "moe.experts_down"         // routed experts: grouped down GEMM
	RoleMoECombine        Role = "moe.combine"              // DP attention + EP: the experts' outputs sent back
	RoleSharedGateUpQuant Role = "moe.shared_gate_up_quant" // FP8 quantization of shared_gate_up's input
	RoleSharedGateUp      Role = "moe.shared_gate_up"       // shared experts: gate/up GEMM
	RoleSharedAct         Role = "moe.shared_act"           // shared experts: SiLU-and-mul
	RoleSharedDownQuant   Role = "moe.shared_down_quant"    // FP8 quantization of shared_down's input
	RoleSharedDown        Role = "moe.shared_down"          // shared experts: down GEMM
	RoleMoEAllGather      Role = "moe.allgather"            // sequence-parallel MoE: the TP group's token slices gathered
	RoleMoEAllReduce      Role = "moe.allreduce"            // all-reduce of the experts' partial sums over the TP group
)

// The dense MLP of the first_k_dense_replace layers.
const (
	RoleMLPPostAttnNorm Role = "mlp.post_attn_norm" // RMSNorm (with the residual add) after attention
	RoleMLPGateUpQuant  Role = "mlp.gate_up_quant"  // FP8 quantization of gate_up's input
	RoleMLPGateUp       Role = "mlp.gate_up"        // column-parallel gate/up GEMM
	RoleMLPAct          Role = "mlp.act"            // SiLU-and-mul
	RoleMLPDownQuant    Role = "mlp.down_quant"     // FP8 quantization of down's input
	RoleMLPDown         Role = "mlp.down"           // row-parallel down GEMM
	RoleMLPAllReduce    Role = "mlp.allreduce"      // all-reduce of down's partial sums over the TP group
)

// The head (Op.Layer -1; an MTP pass's head carries its layer), and a
// speculative step's own ops: the MTP draft pass's and the EAGLE-3 head's
// inputs (their decoder layers, heads and embeddings reuse the roles
// above under the pass's prefix, "mtp.s0.", "eagle.s0.") and the rejection
// sampler after the target's head.
const (
	RoleFinalNorm       Role = "head.final_norm"       // the main model's final RMSNorm
	RoleSharedHeadNorm  Role = "head.shared_head_norm" // an MTP pass's RMSNorm before its head
	RoleLMHead          Role = "head.lm_head"          // vocab-sharded output projection of the tokens that need logits
	RoleLogitsAllGather Role = "head.logits_allgather" // the logits' vocabulary shards gathered
	RoleMTPENorm        Role = "mtp.enorm"             // MTP: RMSNorm of the draft token's embedding
	RoleMTPHNorm        Role = "mtp.hnorm"             // MTP: RMSNorm of the previous hidden state
	RoleMTPEHProj       Role = "mtp.eh_proj"           // MTP: concat(embedding, hidden) 2H -> H projection

	RoleEagleFC          Role = "eagle.fc"              // EAGLE-3: the target's auxiliary hidden states (3 layers) projected to the head's width (first pass only)
	RoleEagleENorm       Role = "eagle.enorm"           // EAGLE-3: RMSNorm of the draft token's embedding (input_layernorm)
	RoleEagleHNorm       Role = "eagle.hnorm"           // EAGLE-3: RMSNorm of the carried hidden state (hidden_norm)
	RoleSpecRejectSample Role = "spec.rejection_sample" // the rejection sampler over the verify pass's logits
)

// Block is the sub-block part of the role: "attn", "moe", "mlp", "embed",
// "head", "mtp", "eagle" or "spec" (Op.Block is "mtp", "eagle" or "draft"
// for every op of a draft pass).
func (r Role) Block() string {
	if i := strings.IndexByte(string(r), '.'); i >= 0 {
		return string(r[:i])
	}
	return ""
}

// Name is the role without its block: the last part of the op ID
// (Op.Name), e.g. "mla_decode".
func (r Role) Name() string {
	if i := strings.IndexByte(string(r), '.'); i >= 0 {
		return string(r[i+1:])
	}
	return string(r)
}

// OfLayer reports whether the role's ops belong to a decoder layer: false
// for the embedding's and the head's (Op.Layer -1 in the main model).
func (r Role) OfLayer() bool {
	m := r.Module()
	return m != ModEmbedding && m != ModLMHead && m != ModSpecVerify
}

// Kind is the kernel family of the role's ops ("" for a string that is no
// role).
func (r Role) Kind() OpKind { return roleInfos()[r].kind }

// Module is the innermost module the role's ops belong to: the sub-module
// its table slot names (ModIndexer, ModRoutedExperts, ModSharedExperts),
// else its block's (ModAttention, ModMoE, ModDenseMLP, ModEmbedding,
// ModLMHead, ModMTP); "" for a string that is no role.
func (r Role) Module() ModuleKind { return roleInfos()[r].module }

// ActQuant is the role of the op that quantizes the input of the Linear
// r when its weights are FP8 block-scaled (q_b_proj -> q_b_proj_quant),
// "" when r is no such Linear.
func (r Role) ActQuant() Role { return roleInfos()[r].quant }

// Quantizes is the Linear whose input an FP8 quantization role quantizes
// (q_b_proj_quant -> q_b_proj), "" when r is none.
func (r Role) Quantizes() Role { return roleInfos()[r].linear }

// SiLUMul reports whether the role's op computes SiLU(gate) x up between a
// gate/up and a down GEMM (the dense MLP's, the routed and the shared
// experts' activations).
func (r Role) SiLUMul() bool {
	switch r {
	case RoleMLPAct, RoleExpertsAct, RoleSharedAct:
		return true
	}
	return false
}

// RoPE reports whether the role's op applies rotary position embedding
// (attention's and the DSA indexer's).
func (r Role) RoPE() bool { return r == RoleRope || r == RoleIndexerRope }

// CacheWrite reports whether the role's op writes the new tokens into a
// cache: the latent KV cache (attention) or the indexer's key cache (its
// Module is ModIndexer).
func (r Role) CacheWrite() bool { return r == RoleKVCacheWrite || r == RoleIndexerCacheWrite }

// Roles lists every role, in the order of the block tables (embedding,
// attention with the indexer, MoE, dense MLP, head, MTP input), each once.
// The slice is shared: callers must not modify it.
func Roles() []Role { return roleList() }
