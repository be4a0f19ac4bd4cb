package model

import "sync"

// The block tables: the op order of every block of a step, in one place.
// BuildWith and BuildIteration follow them (build.go: builder.block walks
// a table, keeps the slots whose conditions hold at the site and fills
// each op by its role); readers that need to know the order of a block
// (a trace's kernels matched to ops, a measured module's members) select
// from the same tables.
//
// A step is laid out as: the embedding (EmbeddingTable); per decoder
// layer the attention block (AttentionTable) and the MoE block
// (MoETable) or, for the first first_k_dense_replace layers, the dense
// MLP (DenseMLPTable); the head (HeadTable); then, with speculative
// tokens on a model with an MTP layer, each draft pass: its embedding,
// its own input ops (MTPTable), a decoder layer with a MoE block and its
// head.

// Cond is a set of conditions of a slot: its op is in a step when every
// condition holds where the block is laid (the zero Cond: always).
type Cond uint16

const (
	// CondTP: the tensor-parallel group has more than one rank, so its
	// collectives run.
	CondTP Cond = 1 << iota
	// CondDP: data-parallel attention (DP > 1): tokens reach the experts
	// by dispatch and combine.
	CondDP
	// CondNoDP: one attention group (DP = 1).
	CondNoDP
	// CondDCP: decode context parallelism (DCP > 1).
	CondDCP
	// CondSparse: DSA sparse attention, the lightning indexer runs.
	CondSparse
	// CondDecode: tokens decode, absorbed attention over the latent cache
	// (a decode step, an MTP pass after the first, an engine iteration
	// with decoding sequences).
	CondDecode
	// CondPrefill: tokens prefill, non-absorbed causal attention (a
	// prefill step and its first MTP pass, an iteration with chunks).
	CondPrefill
	// CondPrefix: prefill chunks after cached prefix tokens (iterations).
	CondPrefix
	// CondShared: the model has shared experts.
	CondShared
	// CondMain: the main model, not an MTP draft pass.
	CondMain
	// CondMTP: an MTP draft pass.
	CondMTP
	// CondActQuant: the Linear in the next slot has FP8 block-scaled
	// weights, so its input is quantized by an op of its own first (see
	// builder.linearShape).
	CondActQuant
	// CondFirstPass: the first draft pass of a speculative step, which
	// reads every token the target model just verified.
	CondFirstPass
)

// Slot is one op of a block's table.
type Slot struct {
	Role Role
	Kind OpKind
	// Module is the module inside the block the op also belongs to
	// (ModIndexer, ModRoutedExperts, ModSharedExperts); "" for none.
	Module ModuleKind
	// When the op is in a step.
	When Cond
}

var (
	embeddingTable = []Slot{
		{Role: RoleEmbedLookup, Kind: KindEmbedding},
		{Role: RoleEmbedAllReduce, Kind: KindCollective, When: CondTP},
	}
	attentionTable = []Slot{
		{Role: RoleInputNorm, Kind: KindNorm},
		{Role: RoleFusedQKVAProjQuant, Kind: KindElementwise, When: CondActQuant},
		{Role: RoleFusedQKVAProj, Kind: KindGEMM},
		{Role: RoleQANorm, Kind: KindNorm},
		{Role: RoleKVANorm, Kind: KindNorm},
		{Role: RoleQBProjQuant, Kind: KindElementwise, When: CondActQuant},
		{Role: RoleQBProj, Kind: KindGEMM},
		{Role: RoleRope, Kind: KindElementwise},
		{Role: RoleIndexerWQBQuant, Kind: KindElementwise, Module: ModIndexer, When: CondSparse | CondActQuant},
		{Role: RoleIndexerWQB, Kind: KindGEMM, Module: ModIndexer, When: CondSparse},
		{Role: RoleIndexerWKQuant, Kind: KindElementwise, Module: ModIndexer, When: CondSparse | CondActQuant},
		{Role: RoleIndexerWK, Kind: KindGEMM, Module: ModIndexer, When: CondSparse},
		{Role: RoleIndexerKNorm, Kind: KindNorm, Module: ModIndexer, When: CondSparse},
		{Role: RoleIndexerWeightsProj, Kind: KindGEMM, Module: ModIndexer, When: CondSparse},
		{Role: RoleIndexerRope, Kind: KindElementwise, Module: ModIndexer, When: CondSparse},
		{Role: RoleIndexerCacheWrite, Kind: KindElementwise, Module: ModIndexer, When: CondSparse},
		{Role: RoleIndexerScore, Kind: KindAttention, Module: ModIndexer, When: CondSparse},
		{Role: RoleIndexerTopK, Kind: KindRouter, Module: ModIndexer, When: CondSparse},
		{Role: RoleKVCacheWrite, Kind: KindElementwise},
		{Role: RoleWUK, Kind: KindGEMM, When: CondDecode},
		{Role: RoleKVBProjQuant, Kind: KindElementwise, When: CondPrefill | CondActQuant},
		{Role: RoleKVBProj, Kind: KindGEMM, When: CondPrefill},
		{Role: RoleMLAPrefill, Kind: KindAttention, When: CondPrefill},
		{Role: RolePrefillCtxGather, Kind: KindElementwise, When: CondPrefill | CondPrefix},
		{Role: RolePrefillCtxKVBProjQuant, Kind: KindElementwise, When: CondPrefill | CondPrefix | CondActQuant},
		{Role: RolePrefillCtxKVBProj, Kind: KindGEMM, When: CondPrefill | CondPrefix},
		{Role: RoleMLAPrefillCtx, Kind: KindAttention, When: CondPrefill | CondPrefix},
		{Role: RolePrefillCtxMerge, Kind: KindElementwise, When: CondPrefill | CondPrefix},
		{Role: RoleDCPQAllGather, Kind: KindCollective, When: CondDecode | CondDCP},
		{Role: RoleMLADecode, Kind: KindAttention, When: CondDecode},
		{Role: RoleDCPLSEAllGather, Kind: KindCollective, When: CondDecode | CondDCP},
		{Role: RoleDCPOutReduceScatter, Kind: KindCollective, When: CondDecode | CondDCP},
		{Role: RoleWUV, Kind: KindGEMM, When: CondDecode},
		{Role: RoleOProjQuant, Kind: KindElementwise, When: CondActQuant},
		{Role: RoleOProj, Kind: KindGEMM},
		{Role: RoleAttnAllReduce, Kind: KindCollective, When: CondTP},
	}
	moeTable = []Slot{
		{Role: RoleMoEPostAttnNorm, Kind: KindNorm},
		{Role: RoleMoEGate, Kind: KindGEMM},
		{Role: RoleMoETopK, Kind: KindRouter},
		{Role: RoleMoEDispatch, Kind: KindCollective, When: CondDP},
		{Role: RoleExpertsGateUp, Kind: KindMoEGEMM, Module: ModRoutedExperts},
		{Role: RoleExpertsAct, Kind: KindElementwise, Module: ModRoutedExperts},
		{Role: RoleExpertsDown, Kind: KindMoEGEMM, Module: ModRoutedExperts},
		{Role: RoleMoECombine, Kind: KindCollective, When: CondDP},
		{Role: RoleSharedGateUpQuant, Kind: KindElementwise, Module: ModSharedExperts, When: CondShared | CondActQuant},
		{Role: RoleSharedGateUp, Kind: KindGEMM, Module: ModSharedExperts, When: CondShared},
		{Role: RoleSharedAct, Kind: KindElementwise, Module: ModSharedExperts, When: CondShared},
		{Role: RoleSharedDownQuant, Kind: KindElementwise, Module: ModSharedExperts, When: CondShared | CondActQuant},
		{Role: RoleSharedDown, Kind: KindGEMM, Module: ModSharedExperts, When: CondShared},
		{Role: RoleMoEAllGather, Kind: KindCollective, When: CondDP | CondTP},
		{Role: RoleMoEAllReduce, Kind: KindCollective, When: CondNoDP | CondTP},
	}
	denseMLPTable = []Slot{
		{Role: RoleMLPPostAttnNorm, Kind: KindNorm},
		{Role: RoleMLPGateUpQuant, Kind: KindElementwise, When: CondActQuant},
		{Role: RoleMLPGateUp, Kind: KindGEMM},
		{Role: RoleMLPAct, Kind: KindElementwise},
		{Role: RoleMLPDownQuant, Kind: KindElementwise, When: CondActQuant},
		{Role: RoleMLPDown, Kind: KindGEMM},
		{Role: RoleMLPAllReduce, Kind: KindCollective, When: CondTP},
	}
	headTable = []Slot{
		{Role: RoleFinalNorm, Kind: KindNorm, When: CondMain},
		{Role: RoleSharedHeadNorm, Kind: KindNorm, When: CondMTP},
		{Role: RoleLMHead, Kind: KindGEMM},
		{Role: RoleLogitsAllGather, Kind: KindCollective, When: CondTP},
	}
	mtpTable = []Slot{
		{Role: RoleMTPENorm, Kind: KindNorm},
		{Role: RoleMTPHNorm, Kind: KindNorm},
		{Role: RoleMTPEHProj, Kind: KindGEMM},
	}
	// eagleTable is an EAGLE-3 draft pass's own input (vLLM
	// deepseek_eagle3.py): the first pass combines the target's auxiliary
	// hidden states (fc); every pass normalizes the token's embedding and
	// the carried hidden state, whose concatenation (2 x hidden) feeds the
	// head's attention.
	eagleTable = []Slot{
		{Role: RoleEagleFC, Kind: KindGEMM, When: CondFirstPass},
		{Role: RoleEagleENorm, Kind: KindNorm},
		{Role: RoleEagleHNorm, Kind: KindNorm},
	}
	// specTable follows the target's head in a speculative step.
	specTable = []Slot{
		{Role: RoleSpecRejectSample, Kind: KindElementwise},
	}
	// blockTables pairs each block's module with its table, in step order.
	blockTables = []struct {
		module ModuleKind
		slots  []Slot
	}{
		{ModEmbedding, embeddingTable}, {ModAttention, attentionTable}, {ModMoE, moeTable},
		{ModDenseMLP, denseMLPTable}, {ModLMHead, headTable}, {ModMTP, mtpTable},
		{ModEagle3, eagleTable}, {ModSpecVerify, specTable},
	}
)

// Table returns the slots of the block whose module is m, in issue order:
// ModEmbedding, ModAttention (the indexer's slots inside it), ModMoE,
// ModDenseMLP, ModLMHead, ModMTP (a draft pass's own ops between its
// embedding and its decoder layer), ModEagle3 (the same of an EAGLE-3
// pass) or ModSpecVerify (the rejection sampler); nil for another module. The slice is
// shared: callers must not modify it.
func (m ModuleKind) Table() []Slot {
	for _, t := range blockTables {
		if t.module == m {
			return t.slots
		}
	}
	return nil
}

// Select returns the slots of m's block (Table) present where have holds:
// those whose conditions are all in have. CondActQuant in have stands for
// FP8 block-scaled weights on every Linear.
func (m ModuleKind) Select(have Cond) []Slot {
	var out []Slot
	for _, s := range m.Table() {
		if s.When&have == s.When {
			out = append(out, s)
		}
	}
	return out
}

// roleInfo is what the tables say about one role.
type roleInfo struct {
	kind   OpKind
	module ModuleKind
	quant  Role // the FP8 quantization op of this Linear's input
	linear Role // the Linear this quantization op feeds
}

var (
	rolesOnce sync.Once
	roleByKey map[Role]roleInfo
	allRoles  []Role
)

func indexRoles() {
	roleByKey = map[Role]roleInfo{}
	for _, t := range blockTables {
		for i, s := range t.slots {
			if _, dup := roleByKey[s.Role]; dup {
				panic("model: role " + string(s.Role) + " in two table slots")
			}
			in := roleInfo{kind: s.Kind, module: t.module}
			if s.Module != "" {
				in.module = s.Module
			}
			if s.When&CondActQuant != 0 {
				in.linear = t.slots[i+1].Role
			}
			roleByKey[s.Role] = in
			allRoles = append(allRoles, s.Role)
		}
	}
	for r, in := range roleByKey {
		if in.linear != "" {
			l := roleByKey[in.linear]
			l.quant = r
			roleByKey[in.linear] = l
		}
	}
}

func roleInfos() map[Role]roleInfo {
	rolesOnce.Do(indexRoles)
	return roleByKey
}

func roleList() []Role {
	rolesOnce.Do(indexRoles)
	return allRoles
}
