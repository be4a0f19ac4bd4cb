package model

import (
	"fmt"
	"math"
	"strconv"
)

// BuildOptions are the switches of Build that are not part of the plan or
// the workload. The zero value is the default serving behaviour.
type BuildOptions struct {
	// DenseDSA runs a DSA model (GLM-5) as dense MLA: attention over the
	// whole context and no indexer ops, as engines on SM120 have run GLM-5
	// for lack of a sparse MLA kernel (serving-facts.md). Default false:
	// the indexer scores every cached token and attention reads
	// min(context, index_topk) tokens.
	DenseDSA bool `json:"dense_dsa,omitempty"`
	// DispatchDtype is the payload dtype of the MoE dispatch under DP
	// attention + EP, each value costing its ActivationBytesPerValue
	// (scales included); "" means bf16. Which one an engine moves is the
	// engine's fact: package sim fills "" with it (vLLM's all-gather
	// moves its experts' input format; DeepEP's low-latency mode can
	// dispatch FP8). Combine always moves bf16.
	DispatchDtype Dtype `json:"dispatch_dtype,omitempty"`
	// MoEDispatch is how tokens reach the experts under DP attention + EP:
	// DispatchAllToAll (DeepEP-style all-to-all dispatch and combine; ""
	// builds it too) or DispatchAllGather (all-gather of every rank's
	// tokens, reduce-scatter of the outputs). Which one an engine runs is
	// the engine's fact, not the model's: package sim fills "" with the
	// scenario's engine's default before building (sim.MoEDispatchOf;
	// vLLM's and SGLang's is DispatchAllGather).
	MoEDispatch string `json:"moe_dispatch,omitempty"`
	// Routing is how the router spreads tokens over the routed experts
	// (see Routing): the zero value is uniform routing; a perf DB's MoE
	// tables were measured under balanced or power-law routing, which a
	// schedule priced from them should assume too. Every routed-expert
	// op's MoEShape carries it.
	Routing Routing `json:"moe_routing,omitzero"`
	// Graphs is the engine's CUDA-graph capture (nil: none, every step
	// eager). A decode step that fits a captured size is padded to it and
	// marked graphed (NewDeployment; Schedule.Deploy). Not part of the
	// JSON: the scenario's options carry the capture (sim.Options).
	Graphs *GraphCapture `json:"-"`
	// Spec is the speculative-decoding method of steps with speculative
	// tokens (spec.go); the zero value is MTP, as before methods had names.
	Spec Spec `json:"spec,omitzero"`
}

// MoE dispatch implementations under DP attention + EP (BuildOptions.MoEDispatch).
const (
	DispatchAllToAll  = "alltoall"
	DispatchAllGather = "allgather_reducescatter"
)

// groupKind says which group of ranks a collective spans.
type groupKind uint8

const (
	gNone  groupKind = iota
	gTP              // the rank's tensor-parallel (attention) group
	gDCP             // the rank's decode-context-parallel subgroup of its TP group
	gWorld           // all TP x DP ranks (MoE dispatch and combine under DP + EP)
	gDraft           // a draft model's TP group (consecutive Spec.DraftTP ranks)
	numGroupKinds
)

// Build lays one step of workload w on architecture a under plan p and
// returns every rank's ops (see BuildWith for the options).
func Build(a *Arch, p Plan, w Workload) (*Schedule, error) {
	return BuildWith(a, p, w, BuildOptions{})
}

// BuildWith is Build with options. The op list per rank follows vLLM's
// DeepSeek-V2/V3 model (model_executor/models/deepseek_v2.py) as
// ../shared/reference/serving-facts.md describes it, laid out by the block
// tables of table.go (each op's Role names its slot):
//
// Decode, per layer: attn.input_norm, attn.fused_qkv_a_proj (replicated),
// attn.q_a_norm, attn.kv_a_norm, attn.q_b_proj (column-parallel, heads/TP),
// attn.rope, [DSA: attn.indexer_wq_b, indexer_wk, indexer_k_norm,
// indexer_weights_proj, indexer_rope, indexer_cache_write, indexer_score,
// indexer_topk — all replicated], attn.kv_cache_write, attn.w_uk
// (absorbed, batched over local heads), [DCP: attn.dcp_q_allgather],
// attn.mla_decode,
// [DCP: attn.dcp_lse_allgather, attn.dcp_out_reducescatter], attn.w_uv,
// attn.o_proj (row-parallel), attn.allreduce; then for MoE layers
// moe.post_attn_norm, moe.gate (router GEMM), moe.topk, [DP>1:
// moe.dispatch], moe.experts_gate_up, moe.experts_act, moe.experts_down,
// [DP>1: moe.combine], moe.shared_gate_up, moe.shared_act, moe.shared_down,
// moe.allreduce; for dense layers mlp.post_attn_norm, mlp.gate_up, mlp.act,
// mlp.down, mlp.allreduce. Around them embed.lookup, embed.allreduce,
// head.final_norm, head.lm_head, head.logits_allgather, and with
// speculative tokens on a model with an MTP layer the draft passes
// mtp.s{i}.* (embedding, enorm/hnorm, eh_proj, a full decoder layer,
// shared-head norm, lm_head). Collectives are omitted when their group
// has one rank. A Linear with FP8 block-scaled weights (fp8-block128:
// fused_qkv_a_proj, q_b_proj, kv_b_proj, o_proj, the indexer's wq_b and
// wk, the dense MLP's and shared experts' gate_up and down) has the
// quantization of its input as an op of its own right before it,
// <name>_quant (see linearShape).
//
// Prefill (M = batch x context tokens) uses the non-absorbed MLA form:
// attn.kv_b_proj expands K and V, attn.mla_prefill runs causal attention.
//
// Op.Layer is the decoder layer index, -1 for the main embed.* and head.*
// ops; every mtp.* op (its embedding and head included) carries the MTP
// layer's index as the checkpoint numbers it (num_hidden_layers + i, e.g.
// 61 for DeepSeek-V3). Op.Group slices are shared by the members of a
// group and must not be modified. Schedule.Modules lists the modules
// (embedding, decoder layers, MLA blocks, indexers, MoE blocks, routed and
// shared experts, dense MLPs, heads, MTP passes) with their op ranges.
//
// Token counts (Schedule.Deploy, NewDeployment): decode
// T = ceil(batch/DP) x (1 + SpecTokens) per attention group (the slowest
// DP group, which vLLM pads the others to); prefill T = ceil(batch/DP) x
// context. Under a CUDA-graph capture (BuildOptions.Graphs) a decode step
// that fits a captured size runs that many tokens through its token ops,
// the padding beside the batch's sequences; attention, RoPE, the KV-cache
// write, the logits and the draft passes' per-sequence work serve the
// sequences alone (Deployment). Logits are computed for every real decode
// token (all speculative positions are verified) and for one token per
// prompt in prefill.
//
// Expert parallelism: without EP every rank holds all experts with 1/TP of
// each expert's intermediate dim. With EP and DP = 1 each rank holds
// E/TP whole experts and runs all T tokens through them; one all-reduce
// still combines the layer (no all-to-all). With DP > 1 (tpscope's
// reading of vLLM's DP-attention + EP path): attention runs per DP group
// of TP ranks (all-reduce #1 inside the group when TP > 1); the routed
// experts are spread as E/(TP x DP) whole experts over all ranks; each
// rank dispatches its tokens to the experts' ranks and gets the outputs
// back (moe.dispatch / moe.combine over all ranks, see
// BuildOptions.MoEDispatch); the shared experts are replicated and run on
// the rank's own tokens; no MoE all-reduce. When TP > 1 as well, vLLM's
// sequence-parallel MoE (ParallelConfig.use_sequence_parallel_moe) gives
// each TP rank ceil(T/TP) of its group's tokens for router, dispatch and
// shared experts, and moe.allgather over the TP group (T x hidden x 2 B)
// restores the full token set. All-to-all bytes per rank = tokens x
// expected distinct destination ranks per token x hidden x 2 (bf16; see
// distinctRanks); under all-gather + reduce-scatter both move the
// gathered buffer, every rank's tokens x hidden x 2 (nccl-tests sizes).
//
// The rows and the expected number of distinct experts a rank's grouped
// GEMM touches follow BuildOptions.Routing (see Routing): under uniform
// routing (the default) E_local x (1 - (1 - k/E)^T) experts (each token
// picks k of E experts, so an expert is missed by one token with
// probability 1-k/E); weight bytes are touched experts x one expert's
// shard. The all-to-all's distinct destination ranks keep uniform
// routing's expectation under every routing.
//
// DCP = k (decode only): the latent cache is split by tokens over k
// consecutive ranks of the TP group; the query heads of the k ranks are
// all-gathered first (each rank then attends hl x k heads over context/k
// tokens), and the partial outputs are merged by log-sum-exp: an
// all-gather of the LSEs and a reduce-scatter of the outputs (vLLM's
// cp_lse_ag_out_rs).
//
// Errors are Validate's: a *PlanError naming the field.
func BuildWith(a *Arch, p Plan, w Workload, o BuildOptions) (*Schedule, error) {
	return buildWith(a, p, w, o, nil)
}

// Builder builds schedules as BuildWith does into memory it keeps from
// one build to the next, for callers that build thousands of schedules
// and are done with each before the next (capacity sweeps): a Schedule a
// Builder returns is valid until its next Build, which overwrites it. The
// zero value is ready; a Builder is not safe for concurrent use.
type Builder struct {
	// OneRank lays rank 0's op list alone when it stands for every rank:
	// every rank's list is a copy of rank 0's but for Op.Rank and
	// MoEShape.FirstExpert, and every collective's group is the same on
	// every rank (a single TP, DCP or world group; not DP attention, nor
	// DCP below the world). The Schedule's Ranks then has one entry while
	// its Plan keeps every rank; otherwise every rank's list is laid.
	OneRank bool

	a buildArena
}

// Build is BuildWith into the Builder's memory (see Builder).
func (bd *Builder) Build(a *Arch, p Plan, w Workload, o BuildOptions) (*Schedule, error) {
	return buildWith(a, p, w, o, bd)
}

// buildArena is the memory a Builder keeps: the builder's template
// buffers and the schedule laid from them.
type buildArena struct {
	tmpl       []Op
	kinds      []groupKind
	shapes     []MoEShape
	moeOf      []int32
	idBuf      []byte
	idEnd      []int
	mods       Modules
	all        []Op
	rankShapes []MoEShape
	ranks      [][]Op
	sched      Schedule
	groupsKey  [4]int // TP, DCP, world and draft TP of groups
	groups     [numGroupKinds][][]int
	ids        string // the last build's op IDs, end to end (strings are immutable: shared)
}

func buildWith(a *Arch, p Plan, w Workload, o BuildOptions, bd *Builder) (*Schedule, error) {
	if err := Validate(a, p, w, o); err != nil {
		return nil, err
	}
	p, w = p.Normalized(), w.Normalized()
	w.KVDtype = w.KVDtypeFor(a)
	o, _ = o.normalized()
	d := NewDeployment(p, w, o.Graphs)

	b := &builder{a: a, p: p, w: w, o: o, d: d, sparse: a.HasIndexer() && !o.DenseDSA, kvBytes: w.KVDtype.BytesPerValue()}
	if bd != nil {
		b.arena, b.oneRank = &bd.a, bd.OneRank
	}
	// The real sequences attend and get logits; the token ops run the
	// graph's tokens, padding included (Deployment).
	b.bg = d.SeqsPerGroup
	b.tokens = d.TokensPerGroup
	b.outTokens = d.RealTokensPerGroup()
	if w.Phase == Prefill {
		b.outTokens = int64(b.bg)
	}
	return b.build(), nil
}

// Validate checks a plan, a workload and build options against an
// architecture as BuildWith does before it lays a step: the plan
// (Plan.Validate), the workload (Workload.ValidateFor), the options, and
// what they allow together (DCP is modelled for decode only, and not with
// DSA sparse attention). The error is a *PlanError naming the field (its
// What says whose: "plan", "workload" or "options"), so that a caller can
// name the flag or key that set it.
func Validate(a *Arch, p Plan, w Workload, o BuildOptions) error {
	if a == nil {
		return fmt.Errorf("build: nil architecture")
	}
	if a.IsEagle3Head() {
		return &PlanError{What: "plan", Field: "model", Value: a.Name, Want: "a model to serve: an EAGLE-3 head drafts for one (--spec eagle3 --draft-model)"}
	}
	if err := p.Validate(a); err != nil {
		return err
	}
	if err := w.Validate(); err != nil {
		return err
	}
	if _, err := o.normalized(); err != nil {
		return err
	}
	p, w = p.Normalized(), w.Normalized()
	if err := w.CheckMaxModelLen(a); err != nil {
		return err
	}
	if err := validateSpec(a, p, w, o.Spec); err != nil {
		return err
	}
	if p.DCP > 1 && w.Phase != Decode {
		return &PlanError{What: "plan", Field: "dcp", Value: strconv.Itoa(p.DCP), Want: "1 in prefill (decode context parallelism is modelled for decode only)"}
	}
	return validateDCPSparse(a, p, o)
}

// validateDCPSparse refuses DCP with DSA sparse attention.
func validateDCPSparse(a *Arch, p Plan, o BuildOptions) error {
	if p.DCP > 1 && a.HasIndexer() && !o.DenseDSA {
		return &PlanError{What: "plan", Field: "dcp", Value: strconv.Itoa(p.DCP), Want: "1 with DSA sparse attention (use the dense-DSA option to model DCP on GLM-5)"}
	}
	return nil
}

// normalized returns o with defaults filled (bf16 dispatch) or an error
// naming the invalid field.
func (o BuildOptions) normalized() (BuildOptions, error) {
	if o.DispatchDtype == "" {
		o.DispatchDtype = BF16
	}
	if o.DispatchDtype.ActivationBytesPerValue() <= 0 {
		return o, &PlanError{What: "options", Field: "dispatch_dtype", Value: strconv.Quote(string(o.DispatchDtype)), Want: "a dtype activations travel in (bf16, fp16, fp8, fp8-block128, nvfp4, fp32)"}
	}
	switch o.MoEDispatch {
	case "", DispatchAllToAll, DispatchAllGather:
	default:
		return o, &PlanError{What: "options", Field: "moe_dispatch", Value: strconv.Quote(o.MoEDispatch),
			Want: strconv.Quote(DispatchAllToAll) + " or " + strconv.Quote(DispatchAllGather)}
	}
	if err := o.Routing.Validate(); err != nil {
		return o, &PlanError{What: "options", Field: "moe_routing", Value: strconv.Quote(o.Routing.String()), Want: RoutingAccepted}
	}
	return o, nil
}

// build lays the step's op template (buildStep) and copies it to every
// rank, setting each rank's index, collective groups and MoE shapes. With
// an arena (Builder) every buffer comes from it and goes back to it.
func (b *builder) build() *Schedule {
	a, p, w, o := b.a, b.p, b.w, b.o
	n := b.estimateOps()
	// At most 6 modules a layer (the layer, attention, indexer, MoE, routed
	// and shared experts), the embedding and the head, and per draft pass
	// those of a layer, its embedding, its head and the pass itself.
	nMods := 6*b.a.Layers + 2 + 9*b.mtpSteps()
	if ar := b.arena; ar != nil {
		b.tmpl, b.kinds, b.moeOf = reuse(ar.tmpl, n), reuse(ar.kinds, n), reuse(ar.moeOf, n)
		b.idBuf, b.idEnd, b.mods, b.shapes = reuse(ar.idBuf, 32*n), reuse(ar.idEnd, n), reuse(ar.mods, nMods), ar.shapes[:0]
		defer func() {
			ar.tmpl, ar.kinds, ar.moeOf, ar.idBuf, ar.idEnd, ar.mods, ar.shapes = b.tmpl, b.kinds, b.moeOf, b.idBuf, b.idEnd, b.mods, b.shapes
		}()
	} else {
		b.tmpl = make([]Op, 0, n)
		b.kinds = make([]groupKind, 0, n)
		b.moeOf = make([]int32, 0, n)
		b.idBuf = make([]byte, 0, 32*n)
		b.idEnd = make([]int, 0, n)
		b.mods = make(Modules, 0, nMods)
	}
	b.pass = -1
	b.buildStep()
	var ids string
	if ar := b.arena; ar != nil && string(b.idBuf) == ar.ids {
		ids = ar.ids // the same op list as the last build's (another batch or context): its IDs
	} else {
		ids = string(b.idBuf)
		if ar != nil {
			ar.ids = ids
		}
	}
	start := 0
	for i, end := range b.idEnd {
		b.tmpl[i].ID = ids[start:end]
		start = end
	}

	world := p.World()
	var groups [numGroupKinds][][]int
	if ar := b.arena; ar != nil {
		// Groups depend on the degrees alone and are never modified:
		// the arena keeps the last plan's.
		if k := [4]int{p.TP, p.DCP, world, b.draftTP}; ar.groupsKey != k || ar.groups[gWorld] == nil {
			ar.groupsKey, ar.groups = k, b.groups(world)
		}
		groups = ar.groups
	} else {
		groups = b.groups(world)
	}
	var s *Schedule
	var all []Op
	var shapes []MoEShape
	if ar := b.arena; ar != nil {
		ar.sched = Schedule{Model: a.Name, ModelType: a.ModelType, Plan: p, Workload: w, Options: o, Deploy: b.d, Modules: b.mods}
		s = &ar.sched
		b.noteIteration(s)
		if b.oneRank && b.ranksAlike(groups, world) {
			// Rank 0's list is the template itself: its groups and shapes
			// are rank 0's (FirstExpert 0).
			for i := range b.tmpl {
				if k := b.kinds[i]; k != gNone {
					b.tmpl[i].Group = groups[k][0]
				}
				if j := b.moeOf[i]; j >= 0 {
					b.tmpl[i].MoE = &b.shapes[j]
				}
			}
			ar.ranks = append(ar.ranks[:0], b.tmpl)
			s.Ranks = ar.ranks
			return s
		}
		ar.all = grow(ar.all, world*len(b.tmpl))
		ar.rankShapes = grow(ar.rankShapes, world*len(b.shapes))
		ar.ranks = grow(ar.ranks, world)
		all, shapes, s.Ranks = ar.all, ar.rankShapes, ar.ranks
	} else {
		s = &Schedule{Model: a.Name, ModelType: a.ModelType, Plan: p, Workload: w, Options: o, Deploy: b.d, Modules: b.mods, Ranks: make([][]Op, world)}
		b.noteIteration(s)
		all = make([]Op, world*len(b.tmpl))
		shapes = make([]MoEShape, world*len(b.shapes))
	}
	for r := 0; r < world; r++ {
		ops := all[r*len(b.tmpl) : (r+1)*len(b.tmpl) : (r+1)*len(b.tmpl)]
		copy(ops, b.tmpl)
		rs := shapes[r*len(b.shapes) : (r+1)*len(b.shapes)]
		copy(rs, b.shapes)
		for j := range rs {
			if rs[j].LocalExperts < rs[j].Experts { // EP: contiguous shards by rank
				rs[j].FirstExpert = r * rs[j].LocalExperts
			}
		}
		for i := range ops {
			ops[i].Rank = r
			if k := b.kinds[i]; k != gNone {
				ops[i].Group = groups[k][r]
			}
			if j := b.moeOf[i]; j >= 0 {
				ops[i].MoE = &rs[j]
			}
		}
		s.Ranks[r] = ops
	}
	return s
}

type builder struct {
	// arena, when set (Builder), provides and keeps every buffer; oneRank
	// is Builder.OneRank.
	arena   *buildArena
	oneRank bool

	a       *Arch
	p       Plan
	w       Workload
	o       BuildOptions
	d       Deployment
	sparse  bool
	kvBytes float64

	bg        int   // sequences per attention (DP) group (Deploy.SeqsPerGroup): what attention serves
	tokens    int64 // T: tokens through the main model's token ops per attention group, padding included (Deploy.TokensPerGroup)
	outTokens int64 // tokens whose logits are computed (the real ones)
	// it is the mixed iteration being built (BuildIteration), nil for a
	// Workload step; attention then follows its decode and prefill parts
	// (attnDims).
	it *Iteration

	tmpl  []Op // rank-independent op list
	kinds []groupKind
	// shapes holds each MoE layer's routing shape (FirstExpert 0; set per
	// rank at the end); moeOf[i] indexes it for template op i, -1 for none.
	shapes []MoEShape
	moeOf  []int32
	// IDs are written into one buffer and sliced from one string at the
	// end (one allocation instead of one per op).
	idBuf []byte
	idEnd []int
	// mods are the modules laid so far; pass is the draft pass being
	// laid (-1: the main model).
	mods Modules
	pass int
	// draftTP is the draft model's TP group size (0: none, or the
	// target's); its collectives are laid over gDraft groups.
	draftTP int

	// The block being laid: its attention or MoE quantities, computed once
	// when the block starts (attnDims, moeDims).
	ad attnDims
	md moeDims
}

func (b *builder) estimateOps() int {
	perLayer := 30
	n := 10 + b.a.Layers*perLayer
	if b.mtpSteps() > 0 {
		n += b.mtpSteps() * (perLayer + 12)
	}
	return n
}

func (b *builder) mtpSteps() int {
	if b.a.MTPLayers == 0 || b.o.Spec.MethodFor(b.w) != SpecMTP {
		return 0
	}
	return b.o.Spec.DraftSteps(b.w)
}

// noteIteration records the mixed iteration built (BuildIteration) on s.
func (b *builder) noteIteration(s *Schedule) {
	if b.it != nil {
		it := *b.it
		s.Iteration = &it
	}
}

// ranksAlike reports whether rank 0's op list stands for every rank's:
// every collective of the template spans one group of all the ranks
// (groups of a kind are the same slice on every rank exactly when the
// kind's group size is the world; see groups).
func (b *builder) ranksAlike(groups [numGroupKinds][][]int, world int) bool {
	for _, k := range b.kinds {
		if k != gNone && len(groups[k][0]) != world {
			return false
		}
	}
	return true
}

// reuse returns s emptied, with room for n elements (its own array when
// large enough).
func reuse[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, 0, n)
	}
	return s[:0]
}

// grow returns s resized to n, reusing its array when large enough (the
// contents are left: every caller overwrites them).
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// groups returns, per group kind, each rank's sorted member list. Members
// of one group share one slice; callers must not modify Op.Group.
func (b *builder) groups(world int) [numGroupKinds][][]int {
	var g [numGroupKinds][][]int
	tp, dcp := b.p.TP, b.p.DCP
	mk := func(size int) [][]int {
		per := make([][]int, world)
		for start := 0; start < world; start += size {
			m := make([]int, size)
			for i := range m {
				m[i] = start + i
			}
			for i := range m {
				per[start+i] = m
			}
		}
		return per
	}
	g[gTP] = mk(tp)
	g[gDCP] = mk(dcp)
	g[gWorld] = mk(world)
	g[gDraft] = g[gTP]
	if b.draftTP > 0 && b.draftTP != tp {
		g[gDraft] = mk(b.draftTP)
	}
	return g
}

// site names where ops go: main layer l ("L07." prefix, Block = the
// sub-block) or an MTP draft pass ("mtp.s0." prefix, Block = "mtp").
type site struct {
	prefix string
	layer  int
	mtp    bool
	// pass is the draft pass the site lays, whose name every op of it
	// has as its block (passBlocks); passNone in the main model.
	pass passKind
	// first: the first draft pass of a step (over every verified token);
	// eagleIn: the EAGLE-3 head's layer, whose attention reads the
	// concatenated embedding and hidden state (2 x hidden).
	first, eagleIn bool
	// logits is the tokens a draft pass's head computes logits for (0:
	// logitTokens' default).
	logits int64
	tokens int64 // tokens through this layer
	// pad is the CUDA-graph padding among tokens (Deployment.PadTokens):
	// it rides along every op but attention, RoPE and the cache write,
	// which see tokens - pad (an iteration's attention follows b.it).
	pad  int64
	seqs int64 // sequences whose cache attention reads
	// prefill: attention in the non-absorbed causal form over the prompt
	// (the prefill step and the MTP pass that follows it over the same
	// tokens); otherwise absorbed decode attention over the cache.
	prefill bool
	dtype   func(Component) Dtype
	// have is what holds here for the tables' conditions (siteConds).
	have Cond
}

// siteConds sets s.have: the plan's, the model's and the site's facts the
// block tables' conditions test.
func (b *builder) siteConds(s *site) *site {
	p, a := b.p, b.a
	var c Cond
	if p.TP > 1 {
		c |= CondTP
	}
	if p.DP > 1 {
		c |= CondDP
	} else {
		c |= CondNoDP
	}
	if p.DCP > 1 {
		c |= CondDCP
	}
	if b.sparse {
		c |= CondSparse
	}
	if a.SharedExperts > 0 {
		c |= CondShared
	}
	if s.mtp {
		c |= CondMTP
	} else {
		c |= CondMain
	}
	if s.first {
		c |= CondFirstPass
	}
	switch it := b.it; {
	case it != nil:
		if it.DecodeSeqs > 0 {
			c |= CondDecode
		}
		if it.PrefillTokens > 0 {
			c |= CondPrefill
			if it.PrefillPrefixTokens > 0 {
				c |= CondPrefix
			}
		}
	case s.prefill:
		c |= CondPrefill
	default:
		c |= CondDecode
	}
	s.have = c
	return s
}

// block lays the ops of table tbl that are present at s, each filled by
// its role (fill), and records the block's module m ("" for none) and the
// sub-modules its slots name.
func (b *builder) block(s *site, m ModuleKind, tbl []Slot) {
	outer := b.open(m, s)
	sub, subKind := -1, ModuleKind("")
	for i := range tbl {
		sl := &tbl[i]
		if !b.present(s, tbl, i) {
			continue
		}
		if sl.Module != subKind {
			b.close(sub)
			sub, subKind = b.open(sl.Module, s), sl.Module
		}
		op := b.op(s, sl.Role, sl.Kind)
		if sl.When&CondActQuant != 0 {
			m, _, k, _ := b.linearShape(s, tbl[i+1].Role)
			actQuant(op, m, k)
			continue
		}
		b.fill(s, op, sl.Role)
	}
	b.close(sub)
	b.close(outer)
}

// present reports whether slot i of tbl is in the step at s: every
// condition of its When holds, CondActQuant meaning the next slot's
// Linear is present with FP8 block-scaled weights.
func (b *builder) present(s *site, tbl []Slot, i int) bool {
	if tbl[i].Role == RoleQANorm && b.a.QLoraRank == 0 {
		return false // no query LoRA (q_lora_rank null): no query latent to normalize
	}
	w := tbl[i].When
	if w&CondActQuant != 0 {
		if i+1 >= len(tbl) || !b.present(s, tbl, i+1) {
			return false
		}
		if _, _, _, dt := b.linearShape(s, tbl[i+1].Role); dt != FP8Block128 {
			return false
		}
		w &^= CondActQuant
	}
	return s.have&w == w
}

// open starts a module of kind k at the next op and returns its index in
// b.mods (-1 for k "").
func (b *builder) open(k ModuleKind, s *site) int {
	if k == "" {
		return -1
	}
	b.mods = append(b.mods, Module{Kind: k, Layer: s.layer, Pass: b.pass, First: len(b.tmpl)})
	return len(b.mods) - 1
}

// close ends module i (from open) after the last op laid.
func (b *builder) close(i int) {
	if i >= 0 {
		b.mods[i].End = len(b.tmpl)
	}
}

// op appends the op of role r at s and returns it for filling; the pointer
// is valid until the next op.
func (b *builder) op(s *site, r Role, kind OpKind) *Op {
	blk := r.Block()
	if s.pass != passNone {
		blk = passBlocks[s.pass]
	}
	b.idBuf = append(b.idBuf, s.prefix...)
	b.idBuf = append(b.idBuf, r...)
	b.idEnd = append(b.idEnd, len(b.idBuf))
	b.tmpl = append(b.tmpl, Op{Kind: kind, Layer: s.layer, Block: blk, Name: r.Name(), Role: r})
	b.kinds = append(b.kinds, gNone)
	b.moeOf = append(b.moeOf, -1)
	return &b.tmpl[len(b.tmpl)-1]
}

const actBytes = 2 // activations move in bf16 between kernels

func (b *builder) buildStep() {
	a := b.a
	main := func(c Component) Dtype { return a.Quant.Dtype(c) }
	b.embed("", -1, false, b.tokens, main)
	for l := 0; l < a.Layers; l++ {
		s := &site{prefix: layerPrefix(l), layer: l, tokens: b.tokens, pad: b.d.PadTokens, seqs: int64(b.bg), dtype: main, prefill: b.w.Phase == Prefill}
		b.layer(b.siteConds(s), l < a.DenseLayers)
	}
	b.head("", -1, false, b.tokens, main)

	b.specPasses()
}

// passKind is the draft pass a site belongs to.
type passKind uint8

const (
	passNone passKind = iota // the main model
	passMTP
	passEagle
	passDraft
)

// passBlocks is the Op.Block of a draft pass's ops. A site's pass is an
// index, not the name itself: an op's block taken from the site would
// move every site (and its dtype function) to the heap.
var passBlocks = [...]string{passMTP: "mtp", passEagle: "eagle", passDraft: "draft"}

// mtpPass is the pass of an MTP site (passNone in the main model).
func mtpPass(mtp bool) passKind {
	if mtp {
		return passMTP
	}
	return passNone
}

// layerPrefixes are the prefixes of the first layers, made once: a
// sweep builds thousands of schedules.
var layerPrefixes = func() (p [128]string) {
	for l := range p {
		p[l] = layerPrefixOf(l)
	}
	return p
}()

func layerPrefix(l int) string {
	if l >= 0 && l < len(layerPrefixes) {
		return layerPrefixes[l]
	}
	return layerPrefixOf(l)
}

func layerPrefixOf(l int) string {
	if l < 10 {
		return "L0" + strconv.Itoa(l) + "."
	}
	return "L" + strconv.Itoa(l) + "."
}

// embed lays the embedding of t tokens (embeddingTable).
func (b *builder) embed(pre string, layer int, mtp bool, t int64, dt func(Component) Dtype) {
	b.block(b.siteConds(&site{prefix: pre, layer: layer, mtp: mtp, pass: mtpPass(mtp), tokens: t, dtype: dt}), ModEmbedding, embeddingTable)
}

// head lays the head of t tokens (headTable); logits are computed for
// b.outTokens in the main model and one token per sequence in a draft
// pass.
func (b *builder) head(pre string, layer int, mtp bool, t int64, dt func(Component) Dtype) {
	b.block(b.siteConds(&site{prefix: pre, layer: layer, mtp: mtp, pass: mtpPass(mtp), tokens: t, dtype: dt}), ModLMHead, headTable)
}

// layer lays one decoder layer: attention and the MoE block or dense MLP.
func (b *builder) layer(s *site, dense bool) {
	l := b.open(ModDecoderLayer, s)
	b.attnDims(s)
	b.block(s, ModAttention, attentionTable)
	if dense {
		b.block(s, ModDenseMLP, denseMLPTable)
	} else {
		b.moeDims(s)
		b.block(s, ModMoE, moeTable)
	}
	b.close(l)
}

// fill sets the shape, bytes and FLOPs of op, of role r at s (the
// quantization ops of Linears are filled by block).
func (b *builder) fill(s *site, op *Op, r Role) {
	a, p := b.a, b.p
	t, h := s.tokens, int64(a.Hidden)
	switch r {
	// Embedding: vocab-parallel lookup (each rank holds V/TP rows, zeros
	// the rest) and the all-reduce that assembles the embeddings.
	case RoleEmbedLookup:
		op.M, op.N = t, h
		op.WeightDtype, op.ActDtype = s.dtype(CompEmbedding), BF16
		op.WeightBytes = float64(t*h) * s.dtype(CompEmbedding).BytesPerValue() / float64(p.TP)
		op.BytesRead = op.WeightBytes + float64(t*8)
		op.BytesWritten = float64(t * h * actBytes)
	case RoleEmbedAllReduce, RoleAttnAllReduce, RoleMoEAllReduce, RoleMLPAllReduce:
		b.allreduce(op, t, h)

	// Head: final norm, vocab-sharded lm_head over the tokens that need
	// logits, and the gather of the logits shards.
	case RoleFinalNorm, RoleSharedHeadNorm:
		b.norm(op, t, a.Hidden, false)
	case RoleLMHead:
		b.gemm(op, b.logitTokens(s), int64(ceilDiv(b.headVocab(), p.TP)), h, 1, s.dtype(CompLMHead))
	case RoleLogitsAllGather:
		out, vloc := b.logitTokens(s), int64(ceilDiv(b.headVocab(), p.TP))
		if a.IsEagle3Head() {
			// vLLM's EAGLE-3 DeepSeek head (LocalArgmaxMixin) gathers each
			// rank's argmax (an fp32 value and an int64 index per token),
			// not its logits.
			b.collective(op, gTP, AllGather, out*12*int64(p.TP))
			op.BytesRead = float64(out * vloc * actBytes)
			break
		}
		b.collective(op, gTP, AllGather, out*vloc*int64(p.TP)*actBytes)
		op.BytesRead = float64(out * vloc * actBytes)

	// MTP input: enorm, hnorm and eh_proj, concat(embedding, hidden)
	// 2H -> H, a replicated nn.Linear.
	case RoleMTPENorm, RoleMTPHNorm:
		b.norm(op, t, a.Hidden, false)
	case RoleMTPEHProj:
		b.gemm(op, t, h, 2*h, 1, a.Quant.Base)

	case RoleMLPPostAttnNorm, RoleMoEPostAttnNorm:
		b.norm(op, t, a.Hidden, true)
	case RoleEagleFC, RoleEagleENorm, RoleEagleHNorm, RoleSpecRejectSample:
		b.fillSpec(s, op, r)
	case RoleMLPAct:
		siluMul(op, float64(t), int64(a.Intermediate/p.TP))

	default:
		if b.fillAttention(s, op, r) || b.fillMoE(s, op, r) {
			return
		}
		if m, n, k, dt := b.linearShape(s, r); dt != "" {
			b.gemm(op, m, n, k, 1, dt)
			return
		}
		panic("model: no fill for role " + string(r))
	}
}

// logitTokens is the tokens whose logits the head at s computes: the
// step's (b.outTokens) in the main model, one per sequence in a draft
// pass.
func (b *builder) logitTokens(s *site) int64 {
	if s.logits > 0 {
		return s.logits
	}
	if s.mtp {
		return int64(b.bg)
	}
	return b.outTokens
}

// linearShape is the GEMM of the Linear role r at s: m tokens through
// weights k x n of dtype dt; dt "" when r is no Linear. A Linear's input
// is quantized by an op of its own when dt is FP8 block-scaled: vLLM
// runs every Linear of an FP8 checkpoint with weight_block_size
// [128, 128] through W8A8BlockFp8LinearOp.apply
// (vllm/model_executor/layers/quantization/utils/fp8_utils.py), whose
// every GEMM path (_run_deepgemm, _run_cutlass, _run_triton) first turns
// the bf16 input into FP8 with one scale per token and group of 128
// values (QuantFP8 / per_token_group_quant_fp8, a kernel of its own:
// torch.ops._C.per_token_group_fp8_quant) and then launches the
// block-scaled GEMM. That kernel is the op "<name>_quant" (actQuantSuffix)
// before the GEMM (actQuant). vLLM's torch.compile fusion passes can fold
// it into a preceding RMSNorm or SiLU-and-mul when enabled; the schedule
// keeps the kernel the layer itself launches.
func (b *builder) linearShape(s *site, r Role) (m, n, k int64, dt Dtype) {
	a, p := b.a, b.p
	t, h := s.tokens, int64(a.Hidden)
	hl := int64(a.Heads / p.TP)
	ql, kvl := int64(a.QLoraRank), int64(a.KVLoraRank)
	rope, nope, v := int64(a.QKRopeHeadDim), int64(a.QKNopeHeadDim), int64(a.VHeadDim)
	switch r {
	case RoleFusedQKVAProj:
		if s.eagleIn {
			// EAGLE-3's layer 0 reads [embedding, hidden] (vLLM
			// DeepseekV2MLAAttention with input_size 2 x hidden).
			h *= 2
		}
		return t, ql + kvl + rope, h, s.dtype(CompAttention)
	case RoleQBProj:
		if ql == 0 {
			// No query LoRA (q_lora_rank null): vLLM's q_proj reads the
			// hidden state.
			return t, hl * (nope + rope), h, s.dtype(CompAttention)
		}
		return t, hl * (nope + rope), ql, s.dtype(CompAttention)
	case RoleKVBProj:
		pt := t
		if b.it != nil {
			pt = b.it.PrefillTokens
		}
		return pt, hl * (nope + v), kvl, s.dtype(CompAttention)
	case RolePrefillCtxKVBProj:
		return b.it.PrefillPrefixTokens, hl * (nope + v), kvl, s.dtype(CompAttention)
	case RoleOProj:
		return t, h, hl * v, s.dtype(CompAttention)
	case RoleIndexerWQB:
		return t, int64(a.IndexHeads) * int64(a.IndexHeadDim), ql, s.dtype(CompIndexer)
	case RoleIndexerWK:
		return t, int64(a.IndexHeadDim), h, s.dtype(CompIndexer)
	case RoleMLPGateUp, RoleMLPDown:
		il := int64(a.Intermediate / p.TP)
		if r == RoleMLPGateUp {
			return t, 2 * il, h, s.dtype(CompDenseMLP)
		}
		return t, h, il, s.dtype(CompDenseMLP)
	case RoleSharedGateUp, RoleSharedDown:
		tm, sl := b.md.tm, b.md.sharedInter
		if r == RoleSharedGateUp {
			return tm, 2 * sl, h, s.dtype(CompSharedExperts)
		}
		return tm, h, sl, s.dtype(CompSharedExperts)
	}
	return 0, 0, 0, ""
}

// actQuantSuffix ends the name of the op that quantizes a Linear's input
// (see linearShape): "q_b_proj" + actQuantSuffix.
const actQuantSuffix = "_quant"

// actQuantGroup is the activation group of FP8 block-scaled Linear
// layers: one FP32 scale per token and 128 input values (the weights'
// 128 x 128 blocks along K).
const actQuantGroup = 128

// actQuant fills the per-token-group FP8 quantization of an m x k bf16
// activation (K = the group size): it reads the bf16 values and writes
// one FP8 byte per value and one FP32 scale per group; per value an
// absolute value and a max towards the group's scale and a multiply by
// its inverse, 3 FLOPs.
func actQuant(op *Op, m, k int64) {
	n := float64(m) * float64(k)
	groups := float64(m) * float64((k+actQuantGroup-1)/actQuantGroup)
	elementwise(op, 3*n, n*actBytes, n*FP8.BytesPerValue()+groups*4)
	op.M, op.N, op.K = m, k, actQuantGroup
}

// allreduce fills an all-reduce of tokens x hidden bf16 activations over
// the TP group; M and N carry the shape (an engine picks its all-reduce
// kernel by the token count and hidden size, engine.ARMessage).
func (b *builder) allreduce(op *Op, tokens, hidden int64) {
	bytes := tokens * hidden * actBytes
	b.collective(op, gTP, AllReduce, bytes)
	op.M, op.N = tokens, hidden
	op.ActDtype = BF16
	op.BytesRead = float64(bytes)
}

// collective fills collective op (the last laid) of kind c over the ranks
// of gk moving bytes per rank (nccl-tests' size); it writes what it
// moves. Callers set what it reads.
func (b *builder) collective(op *Op, gk groupKind, c Collective, bytes int64) {
	b.kinds[len(b.kinds)-1] = gk
	op.Collective = c
	op.CommBytes = bytes
	op.BytesWritten = float64(bytes)
}

// gemm fills a (batched) GEMM C[M,N] = A[M,K] x W[K,N] with weights of
// dtype wd streamed once per problem.
func (b *builder) gemm(op *Op, m, n, k int64, batch float64, wd Dtype) {
	op.M, op.N, op.K, op.Batch = m, n, k, batch
	op.WeightDtype = wd
	op.ActDtype = wd.ComputeDtype()
	fm, fn, fk := float64(m), float64(n), float64(k)
	op.FLOPs = 2 * fm * fn * fk * batch
	op.WeightBytes = fk * fn * batch * wd.BytesPerValue()
	op.BytesRead = op.WeightBytes + fm*fk*batch*actBytes
	op.BytesWritten = fm * fn * batch * actBytes
}

// norm fills an RMSNorm over rows x dim; fusedAdd adds the residual
// (vLLM's fused_add_rms_norm reads and writes both streams).
func (b *builder) norm(op *Op, rows int64, dim int, fusedAdd bool) {
	n := float64(rows) * float64(dim)
	op.M, op.N = rows, int64(dim)
	op.ActDtype = BF16
	op.FLOPs = 4 * n
	streams := 1.0
	if fusedAdd {
		streams = 2
	}
	op.BytesRead = streams*n*actBytes + float64(dim)*actBytes
	op.BytesWritten = streams * n * actBytes
	op.WeightBytes = float64(dim) * actBytes
	op.WeightDtype = BF16
}

// elementwise fills a memory-bound op reading and writing the given bytes.
func elementwise(op *Op, flops, read, written float64) {
	op.ActDtype = BF16
	op.FLOPs, op.BytesRead, op.BytesWritten = flops, read, written
}

func siluMul(op *Op, rows float64, inter int64) {
	n := rows * float64(inter)
	elementwise(op, 5*n, 2*n*actBytes, n*actBytes)
	op.N = inter
	op.M = int64(math.Ceil(rows))
}
