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
	// DispatchDtype is the payload dtype of the MoE all-to-all dispatch
	// under DP attention + EP; "" means bf16 (vLLM's default; DeepEP's
	// low-latency mode can dispatch FP8). Combine always moves bf16.
	DispatchDtype Dtype `json:"dispatch_dtype,omitempty"`
	// MoEDispatch is how tokens reach the experts under DP attention + EP:
	// DispatchAllToAll ("" = default; DeepEP-style all-to-all dispatch and
	// combine, as serving-facts.md describes) or DispatchAllGather (vLLM's
	// allgather_reducescatter all2all backend: all-gather of every rank's
	// tokens, reduce-scatter of the outputs).
	MoEDispatch string `json:"moe_dispatch,omitempty"`
	// Routing is how the router spreads tokens over the routed experts
	// (see Routing): the zero value is uniform routing; a perf DB's MoE
	// tables were measured under balanced or power-law routing, which a
	// schedule priced from them should assume too. Every routed-expert
	// op's MoEShape carries it.
	Routing Routing `json:"moe_routing,omitzero"`
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
	gWorld           // all TP x DP ranks (MoE all-to-all under DP + EP)
)

// Build lays one step of workload w on architecture a under plan p and
// returns every rank's ops (see BuildWith for the options).
func Build(a *Arch, p Plan, w Workload) (*Schedule, error) {
	return BuildWith(a, p, w, BuildOptions{})
}

// BuildWith is Build with options. The op list per rank follows vLLM's
// DeepSeek-V2/V3 model (model_executor/models/deepseek_v2.py) as
// ../shared/reference/serving-facts.md describes it:
//
// Decode, per layer: attn.input_norm, attn.fused_qkv_a_proj (replicated),
// attn.q_a_norm, attn.kv_a_norm, attn.q_b_proj (column-parallel, heads/TP),
// [DSA: attn.indexer_wq_b, indexer_wk, indexer_k_norm, indexer_weights_proj,
// indexer_rope, indexer_cache_write, indexer_score, indexer_topk — all
// replicated], attn.w_uk (absorbed, batched over local heads), attn.rope,
// attn.kv_cache_write, [DCP: attn.dcp_q_allgather], attn.mla_decode,
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
// <name>_quant (see linear).
//
// Prefill (M = batch x context tokens) uses the non-absorbed MLA form:
// attn.kv_b_proj expands K and V, attn.mla_prefill runs causal attention.
//
// Op.Layer is the decoder layer index, -1 for the main embed.* and head.*
// ops; every mtp.* op (its embedding and head included) carries the MTP
// layer's index as the checkpoint numbers it (num_hidden_layers + i, e.g.
// 61 for DeepSeek-V3). Op.Group slices are shared by the members of a
// group and must not be modified.
//
// Token counts: decode T = ceil(batch/DP) x (1 + SpecTokens) per attention
// group (the slowest DP group, which vLLM pads the others to); prefill
// T = ceil(batch/DP) x context. Logits are computed for every decode token
// (all speculative positions are verified) and for one token per prompt in
// prefill.
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
// distinctRanks).
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
func BuildWith(a *Arch, p Plan, w Workload, o BuildOptions) (*Schedule, error) {
	if a == nil {
		return nil, fmt.Errorf("build: nil architecture")
	}
	if err := p.Validate(a); err != nil {
		return nil, err
	}
	if err := w.ValidateFor(a); err != nil {
		return nil, err
	}
	p, w = p.Normalized(), w.Normalized()
	w.KVDtype = w.KVDtypeFor(a)
	o, err := o.normalized()
	if err != nil {
		return nil, err
	}
	if p.DCP > 1 && w.Phase != Decode {
		return nil, &PlanError{What: "plan", Field: "dcp", Value: strconv.Itoa(p.DCP), Want: "1 in prefill (decode context parallelism is modelled for decode only)"}
	}
	sparse := a.HasIndexer() && !o.DenseDSA
	if p.DCP > 1 && sparse {
		return nil, &PlanError{What: "plan", Field: "dcp", Value: strconv.Itoa(p.DCP), Want: "1 with DSA sparse attention (use the dense-DSA option to model DCP on GLM-5)"}
	}

	b := &builder{a: a, p: p, w: w, o: o, sparse: sparse, kvBytes: w.KVDtype.BytesPerValue()}
	b.bg = ceilDiv(w.Batch, p.DP)
	if w.Phase == Decode {
		b.tokens = int64(b.bg) * int64(1+w.SpecTokens)
		b.outTokens = b.tokens
	} else {
		b.tokens = int64(b.bg) * int64(w.Context)
		b.outTokens = int64(b.bg)
	}
	return b.build(), nil
}

// normalized returns o with defaults filled (bf16 dispatch) or an error
// naming the invalid field.
func (o BuildOptions) normalized() (BuildOptions, error) {
	if o.DispatchDtype == "" {
		o.DispatchDtype = BF16
	}
	if !o.DispatchDtype.Valid() {
		return o, &PlanError{What: "options", Field: "dispatch_dtype", Value: strconv.Quote(string(o.DispatchDtype)), Want: "a known dtype"}
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
// rank, setting each rank's index, collective groups and MoE shapes.
func (b *builder) build() *Schedule {
	a, p, w, o := b.a, b.p, b.w, b.o
	b.tmpl = make([]Op, 0, b.estimateOps())
	b.kinds = make([]groupKind, 0, cap(b.tmpl))
	b.moeOf = make([]int32, 0, cap(b.tmpl))
	b.idBuf = make([]byte, 0, 32*cap(b.tmpl))
	b.idEnd = make([]int, 0, cap(b.tmpl))
	b.buildStep()
	ids, start := string(b.idBuf), 0
	for i, end := range b.idEnd {
		b.tmpl[i].ID = ids[start:end]
		start = end
	}

	world := p.World()
	groups := b.groups(world)
	s := &Schedule{Model: a.Name, Plan: p, Workload: w, Options: o, Ranks: make([][]Op, world)}
	if b.it != nil {
		it := *b.it
		s.Iteration = &it
	}
	all := make([]Op, world*len(b.tmpl))
	shapes := make([]MoEShape, world*len(b.shapes))
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
	a       *Arch
	p       Plan
	w       Workload
	o       BuildOptions
	sparse  bool
	kvBytes float64

	bg        int   // sequences per attention (DP) group
	tokens    int64 // T: tokens through the main model per attention group
	outTokens int64 // tokens whose logits are computed
	// it is the mixed iteration being built (BuildIteration), nil for a
	// Workload step; attention then follows iterAttention.
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
	if b.a.MTPLayers == 0 {
		return 0
	}
	return b.w.SpecTokens
}

// groups returns, per group kind, each rank's sorted member list. Members
// of one group share one slice; callers must not modify Op.Group.
func (b *builder) groups(world int) [4][][]int {
	var g [4][][]int
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
	return g
}

// add appends an op and returns it for filling; the pointer is valid until
// the next add.
func (b *builder) add(prefix, idBlock string, layer int, block, name string, kind OpKind, gk groupKind) *Op {
	b.idBuf = append(b.idBuf, prefix...)
	b.idBuf = append(b.idBuf, idBlock...)
	b.idBuf = append(b.idBuf, '.')
	b.idBuf = append(b.idBuf, name...)
	b.idEnd = append(b.idEnd, len(b.idBuf))
	b.tmpl = append(b.tmpl, Op{Kind: kind, Layer: layer, Block: block, Name: name})
	b.kinds = append(b.kinds, gk)
	b.moeOf = append(b.moeOf, -1)
	return &b.tmpl[len(b.tmpl)-1]
}

// site names where ops go: main layer l ("L07." prefix, Block = the
// sub-block) or an MTP draft pass ("mtp.s0." prefix, Block = "mtp").
type site struct {
	prefix string
	layer  int
	mtp    bool
	tokens int64 // tokens through this layer
	seqs   int64 // sequences whose cache attention reads
	// prefill: attention in the non-absorbed causal form over the prompt
	// (the prefill step and the MTP pass that follows it over the same
	// tokens); otherwise absorbed decode attention over the cache.
	prefill bool
	dtype   func(Component) Dtype
}

func (b *builder) op(s *site, block, name string, kind OpKind, gk groupKind) *Op {
	blk := block
	if s.mtp {
		blk = "mtp"
	}
	return b.add(s.prefix, block, s.layer, blk, name, kind, gk)
}

const actBytes = 2 // activations move in bf16 between kernels

func (b *builder) buildStep() {
	a := b.a
	main := func(c Component) Dtype { return a.Quant.Dtype(c) }
	b.embed("", -1, false, b.tokens, main)
	for l := 0; l < a.Layers; l++ {
		s := &site{prefix: layerPrefix(l), layer: l, tokens: b.tokens, seqs: int64(b.bg), dtype: main, prefill: b.w.Phase == Prefill}
		b.layer(s, l < a.DenseLayers)
	}
	b.head("", -1, false, b.tokens, b.outTokens, main)

	// MTP draft passes (vLLM v1 spec_decode/eagle.py proposer): the first
	// pass runs over every token the target model just processed, the
	// following SpecTokens-1 passes over one token per sequence.
	mtpD := func(c Component) Dtype { return a.Quant.mtpDtype(c) }
	for i := 0; i < b.mtpSteps(); i++ {
		t := int64(b.bg)
		if i == 0 {
			t = b.tokens
		}
		pre := "mtp.s" + strconv.Itoa(i) + "."
		ml := a.Layers + i%a.MTPLayers
		b.embed(pre, ml, true, t, mtpD)
		s := &site{prefix: pre, layer: ml, mtp: true, tokens: t, seqs: int64(b.bg), dtype: mtpD,
			prefill: b.w.Phase == Prefill && i == 0}
		b.norm(b.op(s, "mtp", "enorm", KindNorm, gNone), t, a.Hidden, false)
		b.norm(b.op(s, "mtp", "hnorm", KindNorm, gNone), t, a.Hidden, false)
		// eh_proj: concat(embedding, hidden) 2H -> H, replicated nn.Linear.
		b.gemm(b.op(s, "mtp", "eh_proj", KindGEMM, gNone), t, int64(a.Hidden), 2*int64(a.Hidden), 1, a.Quant.Base)
		b.layer(s, false)
		b.head(pre, ml, true, t, int64(b.bg), mtpD)
	}
}

func layerPrefix(l int) string {
	if l < 10 {
		return "L0" + strconv.Itoa(l) + "."
	}
	return "L" + strconv.Itoa(l) + "."
}

// embed: vocab-parallel lookup (each rank holds V/TP rows, zeros the rest)
// and the all-reduce that assembles the embeddings.
func (b *builder) embed(pre string, layer int, mtp bool, t int64, dt func(Component) Dtype) {
	s := &site{prefix: pre, layer: layer, mtp: mtp, tokens: t, dtype: dt}
	h := int64(b.a.Hidden)
	op := b.op(s, "embed", "lookup", KindEmbedding, gNone)
	op.M, op.N = t, h
	op.WeightDtype, op.ActDtype = dt(CompEmbedding), BF16
	op.WeightBytes = float64(t*h) * dt(CompEmbedding).BytesPerValue() / float64(b.p.TP)
	op.BytesRead = op.WeightBytes + float64(t*8)
	op.BytesWritten = float64(t * h * actBytes)
	b.allreduce(s, "embed", "allreduce", gTP, t*h*actBytes)
}

// head: final norm, vocab-sharded lm_head over the tokens that need
// logits, and the gather of the logits shards.
func (b *builder) head(pre string, layer int, mtp bool, t, out int64, dt func(Component) Dtype) {
	s := &site{prefix: pre, layer: layer, mtp: mtp, tokens: t, dtype: dt}
	a := b.a
	name := "final_norm"
	if mtp {
		name = "shared_head_norm"
	}
	b.norm(b.op(s, "head", name, KindNorm, gNone), t, a.Hidden, false)
	vloc := int64(ceilDiv(a.Vocab, b.p.TP))
	b.gemm(b.op(s, "head", "lm_head", KindGEMM, gNone), out, vloc, int64(a.Hidden), 1, dt(CompLMHead))
	if b.p.TP > 1 {
		op := b.op(s, "head", "logits_allgather", KindCollective, gTP)
		op.Collective = AllGather
		op.CommBytes = out * vloc * int64(b.p.TP) * actBytes
		op.BytesRead = float64(out * vloc * actBytes)
		op.BytesWritten = float64(op.CommBytes)
	}
}

func (b *builder) allreduce(s *site, block, name string, gk groupKind, bytes int64) {
	size := b.p.TP
	if gk == gWorld {
		size = b.p.World()
	}
	if size <= 1 {
		return
	}
	op := b.op(s, block, name, KindCollective, gk)
	op.Collective = AllReduce
	op.CommBytes = bytes
	op.ActDtype = BF16
	op.BytesRead = float64(bytes)
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

// linear appends a Linear layer: its GEMM (see gemm) of m tokens through
// weights k x n of dtype wd, and, for FP8 block-scaled weights, the
// kernel that quantizes its input first. vLLM runs every Linear of an FP8
// checkpoint with weight_block_size [128, 128] through
// W8A8BlockFp8LinearOp.apply
// (vllm/model_executor/layers/quantization/utils/fp8_utils.py), whose
// every GEMM path (_run_deepgemm, _run_cutlass, _run_triton) first turns
// the bf16 input into FP8 with one scale per token and group of 128
// values (QuantFP8 / per_token_group_quant_fp8, a kernel of its own:
// torch.ops._C.per_token_group_fp8_quant) and then launches the
// block-scaled GEMM. That kernel is the op "<name>_quant" (ActQuantSuffix) before the GEMM
// (actQuant). vLLM's torch.compile fusion passes can fold it into a
// preceding RMSNorm or SiLU-and-mul when enabled; the schedule keeps the
// kernel the layer itself launches.
func (b *builder) linear(s *site, block, name string, m, n, k int64, wd Dtype) {
	if wd == FP8Block128 {
		actQuant(b.op(s, block, name+ActQuantSuffix, KindElementwise, gNone), m, k)
	}
	b.gemm(b.op(s, block, name, KindGEMM, gNone), m, n, k, 1, wd)
}

// ActQuantSuffix ends the name of the op that quantizes a Linear's input
// (see linear): "q_b_proj" + ActQuantSuffix.
const ActQuantSuffix = "_quant"

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

// layer appends one decoder layer (attention + MoE or dense MLP).
func (b *builder) layer(s *site, dense bool) {
	b.attention(s)
	if dense {
		b.denseMLP(s)
	} else {
		b.moe(s)
	}
}

func (b *builder) attention(s *site) {
	a, p := b.a, b.p
	t := s.tokens
	h := int64(a.Hidden)
	hl := int64(a.Heads / p.TP)
	kvl := int64(a.KVLoraRank)
	rope, nope, v := int64(a.QKRopeHeadDim), int64(a.QKNopeHeadDim), int64(a.VHeadDim)
	lat := kvl + rope
	attnDt := s.dtype(CompAttention)
	ctx := int64(b.w.Context)

	b.attnProjections(s)
	if b.it != nil {
		b.iterAttention(s)
		return
	}

	// Tokens each query attends to (per sequence, decode) under DSA.
	attended := ctx
	if b.sparse {
		b.indexer(s)
		attended = min(ctx, int64(a.IndexTopK))
	}

	if s.prefill {
		b.linear(s, "attn", "kv_b_proj", t, hl*(nope+v), kvl, attnDt)
		b.rope(s, t, hl)
		b.kvWrite(s, t, lat)
		op := b.op(s, "attn", "mla_prefill", KindAttention, gNone)
		// Causal attention per prompt of length ctx: query position i sees
		// min(i, attended) keys; pairs = sum over i of that.
		pairs := causalPairs(ctx, attended)
		qk := nope + rope
		op.M, op.N, op.K, op.Batch = t, ctx, qk, float64(hl)
		op.ActDtype, op.KVDtype = BF16, b.w.KVDtype
		op.FLOPs = float64(s.seqs) * float64(hl) * pairs * 2 * float64(qk+v)
		op.BytesRead = float64(t*hl*(qk+qk+v)) * actBytes
		op.BytesWritten = float64(t*hl*v) * actBytes
		b.linear(s, "attn", "o_proj", t, h, hl*v, attnDt)
		b.allreduce(s, "attn", "allreduce", gTP, t*h*actBytes)
		return
	}

	// Absorbed decode. W_UK and W_UV are kv_b_proj split per head and kept
	// in bf16 by vLLM (MLACommonImpl dequantizes kv_b_proj for them). Each
	// is one batched GEMM kernel: the transposes around them are views that
	// torch.bmm reads and writes in place as strided batches
	// (vllm/model_executor/layers/attention/mla_attention.py,
	// MLAAttention.forward_impl's decode branch: torch.bmm(decode_q_nope,
	// self.W_UK_T, out=decode_ql_nope) on decode_q.transpose(0, 1);
	// _v_up_proj: torch.bmm(x, self.W_UV, out=out) into a transposed view
	// of the output), so no copy kernel goes with them.
	b.gemm(b.op(s, "attn", "w_uk", KindGEMM, gNone), t, kvl, nope, float64(hl), a.Quant.Base)
	b.rope(s, t, hl)
	b.kvWrite(s, t, lat)
	dcp := int64(p.DCP)
	heads := hl * dcp // heads each rank attends for after the DCP gather
	if dcp > 1 {
		op := b.op(s, "attn", "dcp_q_allgather", KindCollective, gDCP)
		op.Collective = AllGather
		op.CommBytes = t * heads * lat * actBytes
		op.BytesRead = float64(t*hl*lat) * actBytes
		op.BytesWritten = float64(op.CommBytes)
	}
	cached := (attended + dcp - 1) / dcp // tokens of each sequence's cache on this rank
	op := b.op(s, "attn", "mla_decode", KindAttention, gNone)
	op.M, op.N, op.K, op.Batch = t, cached, lat, float64(heads)
	op.ActDtype, op.KVDtype = BF16, b.w.KVDtype
	// Scores over kv_lora + rope values and output in latent space
	// (kv_lora), per head and cached token.
	op.FLOPs = float64(t) * float64(heads) * float64(cached) * 2 * float64(lat+kvl)
	// All heads (and all speculative positions of a sequence) share the
	// latent cache: it is read once per sequence.
	op.KVBytes = float64(s.seqs) * float64(cached) * float64(lat) * b.kvBytes
	op.BytesRead = op.KVBytes + float64(t*heads*lat)*actBytes
	op.BytesWritten = float64(t*heads*kvl) * actBytes
	if dcp > 1 {
		op := b.op(s, "attn", "dcp_lse_allgather", KindCollective, gDCP)
		op.Collective = AllGather
		op.CommBytes = dcp * t * heads * 4 // fp32 LSE per head and token, gathered from dcp ranks
		op.BytesRead = float64(t * heads * 4)
		op.BytesWritten = float64(op.CommBytes)
		op = b.op(s, "attn", "dcp_out_reducescatter", KindCollective, gDCP)
		op.Collective = ReduceScatter
		op.CommBytes = t * heads * kvl * actBytes // input buffer; each rank keeps its hl heads
		op.BytesRead = float64(op.CommBytes)
		op.BytesWritten = float64(t*hl*kvl) * actBytes
	}
	b.gemm(b.op(s, "attn", "w_uv", KindGEMM, gNone), t, v, kvl, float64(hl), a.Quant.Base)
	b.linear(s, "attn", "o_proj", t, h, hl*v, attnDt)
	b.allreduce(s, "attn", "allreduce", gTP, t*h*actBytes)
}

// attnProjections appends the projections every attention token goes
// through (all T tokens of the site, padding included): input norm, the
// replicated fused q_a/kv_a projection, the latent norms and the
// column-parallel q_b_proj.
func (b *builder) attnProjections(s *site) {
	a := b.a
	t := s.tokens
	h := int64(a.Hidden)
	hl := int64(a.Heads / b.p.TP)
	ql, kvl := int64(a.QLoraRank), int64(a.KVLoraRank)
	rope, nope := int64(a.QKRopeHeadDim), int64(a.QKNopeHeadDim)
	attnDt := s.dtype(CompAttention)
	b.norm(b.op(s, "attn", "input_norm", KindNorm, gNone), t, a.Hidden, true)
	b.linear(s, "attn", "fused_qkv_a_proj", t, ql+kvl+rope, h, attnDt)
	b.norm(b.op(s, "attn", "q_a_norm", KindNorm, gNone), t, a.QLoraRank, false)
	b.norm(b.op(s, "attn", "kv_a_norm", KindNorm, gNone), t, a.KVLoraRank, false)
	b.linear(s, "attn", "q_b_proj", t, hl*(nope+rope), ql, attnDt)
}

// causalPairs is sum_{i=1..n} min(i, cap): query-key pairs of causal
// attention over n tokens when each query sees at most cap keys.
func causalPairs(n, cap int64) float64 {
	if cap >= n {
		return float64(n) * float64(n+1) / 2
	}
	return float64(cap)*float64(cap+1)/2 + float64(n-cap)*float64(cap)
}

func (b *builder) rope(s *site, t, hl int64) {
	r := int64(b.a.QKRopeHeadDim)
	n := float64(t * (hl + 1) * r) // q_pe of local heads + the shared k_pe
	op := b.op(s, "attn", "rope", KindElementwise, gNone)
	elementwise(op, 6*n, n*actBytes, n*actBytes)
	op.M, op.N = t, (hl+1)*r
}

func (b *builder) kvWrite(s *site, t, lat int64) {
	// Under DCP each token's latent is stored by one rank of the DCP group.
	share := float64(t) / float64(b.p.DCP)
	op := b.op(s, "attn", "kv_cache_write", KindElementwise, gNone)
	elementwise(op, 0, share*float64(lat)*actBytes, share*float64(lat)*b.kvBytes)
	op.M, op.N = int64(math.Ceil(share)), lat
	op.KVDtype = b.w.KVDtype
}

// indexer appends GLM-5's DSA lightning indexer (DeepSeek-V3.2's design):
// wq_b q_lora -> index_heads x index_head_dim, wk hidden -> index_head_dim,
// k LayerNorm, weights_proj hidden -> index_heads, RoPE, the FP8 key-cache
// write, scoring of every cached token by every index head, and the top-k
// selection. vLLM builds these as ReplicatedLinear: no TP sharding, no
// communication.
func (b *builder) indexer(s *site) {
	a := b.a
	t := s.tokens
	h, ql := int64(a.Hidden), int64(a.QLoraRank)
	ih, id := int64(a.IndexHeads), int64(a.IndexHeadDim)
	dt := s.dtype(CompIndexer)
	b.linear(s, "attn", "indexer_wq_b", t, ih*id, ql, dt)
	b.linear(s, "attn", "indexer_wk", t, id, h, dt)
	b.norm(b.op(s, "attn", "indexer_k_norm", KindNorm, gNone), t, a.IndexHeadDim, false)
	b.gemm(b.op(s, "attn", "indexer_weights_proj", KindGEMM, gNone), t, ih, h, 1, a.Quant.Base)
	n := float64(t * (ih + 1) * int64(a.QKRopeHeadDim))
	elementwise(b.op(s, "attn", "indexer_rope", KindElementwise, gNone), 6*n, n*actBytes, n*actBytes)
	cb := float64(a.IndexerCacheBytesPerTokenLayer())
	op := b.op(s, "attn", "indexer_cache_write", KindElementwise, gNone)
	elementwise(op, float64(t*id)*2, float64(t*id)*actBytes, float64(t)*cb)
	op.KVDtype = FP8

	if b.it != nil {
		b.iterIndexerScore(s)
		return
	}
	ctx := int64(b.w.Context)
	var pairs float64 // (query, key) pairs scored
	if s.prefill {
		pairs = float64(s.seqs) * causalPairs(ctx, ctx)
	} else {
		pairs = float64(t) * float64(ctx)
	}
	b.indexerScore(s, t, ctx, pairs, float64(s.seqs)*float64(ctx), float64(t*min(ctx, int64(a.IndexTopK))))
}

// indexerScore appends the indexer's scoring of pairs (query, key) pairs
// of t query tokens (keys per query shaped as n), reading keys cached keys
// from the indexer cache, and the top-k selection writing selected indices.
func (b *builder) indexerScore(s *site, t, n int64, pairs, keys, selected float64) {
	a := b.a
	ih, id := int64(a.IndexHeads), int64(a.IndexHeadDim)
	cb := float64(a.IndexerCacheBytesPerTokenLayer())
	op := b.op(s, "attn", "indexer_score", KindAttention, gNone)
	op.ActDtype, op.KVDtype = FP8, FP8
	op.M, op.N, op.K, op.Batch = t, n, id, float64(ih)
	// Per pair: ih dot products of id values, ReLU, weighted sum over heads.
	op.FLOPs = pairs * float64(ih) * (2*float64(id) + 2)
	op.KVBytes = keys * cb
	op.BytesRead = op.KVBytes + float64(t*ih*id) // FP8 queries
	op.BytesWritten = pairs * 4                  // fp32 index scores
	op = b.op(s, "attn", "indexer_topk", KindRouter, gNone)
	op.M, op.N, op.K = t, n, int64(a.IndexTopK)
	op.ActDtype = FP32
	op.FLOPs = pairs
	op.BytesRead = pairs * 4
	op.BytesWritten = selected * 4
}

func (b *builder) denseMLP(s *site) {
	a, p := b.a, b.p
	t, h := s.tokens, int64(a.Hidden)
	il := int64(a.Intermediate / p.TP)
	dt := s.dtype(CompDenseMLP)
	b.norm(b.op(s, "mlp", "post_attn_norm", KindNorm, gNone), t, a.Hidden, true)
	b.linear(s, "mlp", "gate_up", t, 2*il, h, dt)
	siluMul(b.op(s, "mlp", "act", KindElementwise, gNone), float64(t), il)
	b.linear(s, "mlp", "down", t, h, il, dt)
	b.allreduce(s, "mlp", "allreduce", gTP, t*h*actBytes)
}

func siluMul(op *Op, rows float64, inter int64) {
	n := rows * float64(inter)
	elementwise(op, 5*n, 2*n*actBytes, n*actBytes)
	op.N = inter
	op.M = int64(math.Ceil(rows))
}

func (b *builder) moe(s *site) {
	a, p := b.a, b.p
	t, h := s.tokens, int64(a.Hidden)
	e, k := int64(a.RoutedExperts), int64(a.TopK)
	dp := p.DP > 1
	// vLLM's use_sequence_parallel_moe (EP, TP > 1, DP > 1): the MoE runs
	// on each TP rank's ceil(T/TP) slice of the tokens, with replicated
	// router and shared experts, and an all-gather over the TP group
	// restores the full token set afterwards.
	sp := dp && p.TP > 1
	tm := t // tokens this rank's router and shared experts see
	if sp {
		tm = (t + int64(p.TP) - 1) / int64(p.TP)
	}

	b.norm(b.op(s, "moe", "post_attn_norm", KindNorm, gNone), t, a.Hidden, true)
	b.gemm(b.op(s, "moe", "gate", KindGEMM, gNone), tm, e, h, 1, s.dtype(CompRouter))
	op := b.op(s, "moe", "topk", KindRouter, gNone)
	op.M, op.N, op.K = tm, e, k
	op.ActDtype = FP32
	op.FLOPs = float64(tm * e * 4) // sigmoid, bias, grouped top-k compare
	op.BytesRead = float64(tm*e) * 4
	op.BytesWritten = float64(tm*k) * 8 // expert ids + weights

	// Which tokens reach this rank's experts, how many experts it holds,
	// and the slice of each expert's intermediate dim it computes.
	var (
		eLocal   = e
		inter    = int64(a.MoEIntermediate / p.TP)
		routeTok = t // tokens routed over this rank's expert pool
	)
	if p.EP {
		eLocal = e / int64(p.World())
		inter = int64(a.MoEIntermediate)
	}
	if dp {
		routeTok = tm * int64(p.World())
	}
	// Every MoE layer of a step routes the same pool, so the shape is
	// computed once (a power-law shape costs an integral).
	if n := len(b.shapes); n > 0 && b.shapes[n-1].RoutedTokens == routeTok && b.shapes[n-1].LocalExperts == int(eLocal) &&
		b.shapes[n-1].TopK == int(k) && b.shapes[n-1].Experts == int(e) {
		b.shapes = append(b.shapes, b.shapes[n-1])
	} else {
		b.shapes = append(b.shapes, b.o.Routing.Shape(routeTok, int(k), int(e), int(eLocal), 0))
	}
	shape := int32(len(b.shapes) - 1)
	var dispatchBytes, combineBytes int64
	if dp {
		dd := b.o.DispatchDtype.BytesPerValue()
		var c1, c2 Collective
		if b.o.MoEDispatch == DispatchAllGather {
			// Every rank gathers every rank's tokens (sizes as nccl-tests
			// counts them: the gathered buffer) and reduce-scatters the
			// expert outputs back.
			c1, c2 = AllGather, ReduceScatter
			dispatchBytes = int64(math.Round(float64(routeTok) * float64(h) * dd))
			combineBytes = routeTok * h * actBytes
		} else {
			c1, c2 = AllToAll, AllToAll
			dr := distinctRanks(e, k, eLocal, int64(p.World()))
			dispatchBytes = int64(math.Round(float64(tm) * dr * float64(h) * dd))
			combineBytes = int64(math.Round(float64(tm) * dr * float64(h) * actBytes))
		}
		op := b.op(s, "moe", "dispatch", KindCollective, gWorld)
		op.Collective, op.ActDtype, op.CommBytes = c1, b.o.DispatchDtype, dispatchBytes
		op.BytesRead, op.BytesWritten = float64(dispatchBytes), float64(dispatchBytes)
		b.moeOf[len(b.moeOf)-1] = shape
		b.experts(s, shape, inter)
		op = b.op(s, "moe", "combine", KindCollective, gWorld)
		op.Collective, op.ActDtype, op.CommBytes = c2, BF16, combineBytes
		op.BytesRead, op.BytesWritten = float64(combineBytes), float64(combineBytes)
		b.moeOf[len(b.moeOf)-1] = shape
	} else {
		b.experts(s, shape, inter)
	}

	if a.SharedExperts > 0 {
		sl := int64(a.SharedExperts * a.MoEIntermediate)
		if !dp {
			sl /= int64(p.TP) // TP-sharded; replicated under DP attention
		}
		sd := s.dtype(CompSharedExperts)
		b.linear(s, "moe", "shared_gate_up", tm, 2*sl, h, sd)
		siluMul(b.op(s, "moe", "shared_act", KindElementwise, gNone), float64(tm), sl)
		b.linear(s, "moe", "shared_down", tm, h, sl, sd)
	}
	switch {
	case sp:
		op := b.op(s, "moe", "allgather", KindCollective, gTP)
		op.Collective = AllGather
		op.ActDtype = BF16
		op.CommBytes = t * h * actBytes
		op.BytesRead = float64(tm * h * actBytes)
		op.BytesWritten = float64(op.CommBytes)
	case !dp:
		b.allreduce(s, "moe", "allreduce", gTP, t*h*actBytes)
	}
}

// experts appends the routed experts' grouped GEMMs over the layer's
// routing shape b.shapes[shape] (its Rows token-expert assignments spread
// over ExpertsTouched experts; see MoEShape), inter of each expert's
// intermediate dim.
func (b *builder) experts(s *site, shape int32, inter int64) {
	h := int64(b.a.Hidden)
	sh := &b.shapes[shape]
	assign, touched := sh.Rows, sh.ExpertsTouched
	dt := s.dtype(CompRoutedExperts)
	b.groupedGEMM(b.op(s, "moe", "experts_gate_up", KindMoEGEMM, gNone), assign, touched, 2*inter, h, dt)
	b.moeOf[len(b.moeOf)-1] = shape
	siluMul(b.op(s, "moe", "experts_act", KindElementwise, gNone), assign, inter)
	b.moeOf[len(b.moeOf)-1] = shape
	b.groupedGEMM(b.op(s, "moe", "experts_down", KindMoEGEMM, gNone), assign, touched, h, inter, dt)
	b.moeOf[len(b.moeOf)-1] = shape
}

// groupedGEMM fills a grouped MoE GEMM: assign token-expert rows spread
// over touched experts, each expert's [K, N] shard streamed once.
func (b *builder) groupedGEMM(op *Op, assign, touched float64, n, k int64, wd Dtype) {
	op.N, op.K, op.Batch = n, k, touched
	if touched > 0 {
		op.M = int64(math.Ceil(assign / touched))
	}
	op.WeightDtype = wd
	op.ActDtype = wd.ComputeDtype()
	fn, fk := float64(n), float64(k)
	op.FLOPs = 2 * assign * fn * fk
	op.WeightBytes = touched * fn * fk * wd.BytesPerValue()
	op.BytesRead = op.WeightBytes + assign*fk*actBytes
	op.BytesWritten = assign * fn * actBytes
}

// distinctRanks is the expected number of distinct ranks a token's k
// experts live on, when each of ranks holds eLocal of e experts and the k
// experts are a uniform draw without replacement:
// ranks x (1 - C(e-eLocal, k) / C(e, k)).
func distinctRanks(e, k, eLocal, ranks int64) float64 {
	miss := 1.0
	for i := int64(0); i < k; i++ {
		if e-eLocal-i <= 0 {
			miss = 0
			break
		}
		miss *= float64(e-eLocal-i) / float64(e-i)
	}
	return float64(ranks) * (1 - miss)
}
