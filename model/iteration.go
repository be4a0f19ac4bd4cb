package model

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Iteration is one engine step of continuous batching with chunked
// prefill, as vLLM v1's scheduler forms it, for one attention (DP) group:
// decode tokens of DecodeSeqs sequences and prefill chunks of prompts, all
// run through the GEMMs together as one token batch, with attention split
// into the decode path over each sequence's cache and the prefill path
// over each chunk and its cached prefix (vLLM's MLACommonImpl.forward,
// v1/attention/backends/mla/common.py).
//
// It holds totals, not lists: what the ops' costs depend on. AddDecode
// and AddChunk accumulate them from per-sequence lengths; a caller that
// knows only totals (a memo key) fills the fields directly. All token
// counts are per attention group; speculative tokens are not modelled in
// an iteration.
type Iteration struct {
	// DecodeSeqs sequences decode one token each; DecodeKVTokens is the
	// sum of their contexts (tokens already in their caches, as
	// Workload.Context counts them).
	DecodeSeqs     int   `json:"decode_seqs"`
	DecodeKVTokens int64 `json:"decode_kv_tokens"`
	// PrefillSeqs prompts contribute a chunk each: PrefillTokens new
	// tokens in all, after PrefillPrefixTokens tokens of those prompts
	// already cached (earlier chunks, or a recomputed request's progress).
	PrefillSeqs         int   `json:"prefill_seqs"`
	PrefillTokens       int64 `json:"prefill_tokens"`
	PrefillPrefixTokens int64 `json:"prefill_prefix_tokens"`
	// PrefillCausalPairs is the sum over chunks of n(n+1)/2 for a chunk of
	// n tokens: the query-key pairs of causal attention among the chunk's
	// own tokens. PrefillPrefixPairs is the sum of n x prefix: each chunk
	// query against every cached token of its prompt.
	PrefillCausalPairs float64 `json:"prefill_causal_pairs"`
	PrefillPrefixPairs float64 `json:"prefill_prefix_pairs"`
	// PadTokens ride along every op outside attention without belonging to
	// a sequence: the CUDA-graph padding of the step's token count. Rope,
	// the KV-cache write and attention see the real tokens only (vLLM
	// slices attention inputs to num_actual_tokens).
	PadTokens int `json:"pad_tokens,omitempty"`
	// KVDtype is the KV-cache dtype; "" means the checkpoint's choice.
	KVDtype Dtype `json:"kv_dtype,omitempty"`
}

// AddDecode adds a sequence decoding one token over context cached tokens.
func (it *Iteration) AddDecode(context int) {
	it.DecodeSeqs++
	it.DecodeKVTokens += int64(context)
}

// AddChunk adds a prefill chunk of tokens new tokens after prefix cached
// tokens of the same prompt.
func (it *Iteration) AddChunk(tokens, prefix int) {
	n, x := float64(tokens), float64(prefix)
	it.PrefillSeqs++
	it.PrefillTokens += int64(tokens)
	it.PrefillPrefixTokens += int64(prefix)
	it.PrefillCausalPairs += n * (n + 1) / 2
	it.PrefillPrefixPairs += n * x
}

// Tokens is the number of real tokens the step computes: one per decoding
// sequence plus every prefill token (padding excluded).
func (it *Iteration) Tokens() int64 { return int64(it.DecodeSeqs) + it.PrefillTokens }

// Requests is the number of sequences the step serves (decoding
// sequences plus prompts with a chunk); vLLM computes logits for the last
// token of each.
func (it *Iteration) Requests() int { return it.DecodeSeqs + it.PrefillSeqs }

// Limits of an iteration's fields (Validate).
const (
	maxIterSeqs      = 1 << 20
	maxIterKVTokens  = 1 << 40
	maxIterPrefill   = 1 << 26 // as a Workload prefill step: batch x context
	maxIterPadTokens = 1 << 20
)

// Validate checks the iteration's fields against each other: counts are
// non-negative and bounded, a decoding sequence has at least one cached
// token, a chunk at least one token, and the pair sums lie between what
// the token counts allow (PrefillCausalPairs from PrefillTokens to
// PrefillTokens(PrefillTokens+1)/2, PrefillPrefixPairs from 0 to
// PrefillTokens x PrefillPrefixTokens, relative tolerance 1e-9). Errors are
// *PlanError naming the field.
func (it Iteration) Validate() error {
	ierr := func(field, v, want string) error {
		return &PlanError{What: "iteration", Field: field, Value: v, Want: want}
	}
	d, c := it.DecodeSeqs, it.PrefillSeqs
	p, x := it.PrefillTokens, it.PrefillPrefixTokens
	switch {
	case d < 0 || d > maxIterSeqs:
		return ierr("decode_seqs", strconv.Itoa(d), "an integer from 0 to 1048576")
	case c < 0 || c > maxIterSeqs:
		return ierr("prefill_seqs", strconv.Itoa(c), "an integer from 0 to 1048576")
	case d+c == 0:
		return ierr("decode_seqs", "0", "at least one decoding sequence or prefill chunk (prefill_seqs is 0 too)")
	case it.DecodeKVTokens < int64(d) || it.DecodeKVTokens > maxIterKVTokens || (d == 0 && it.DecodeKVTokens != 0):
		return ierr("decode_kv_tokens", strconv.FormatInt(it.DecodeKVTokens, 10),
			fmt.Sprintf("at least decode_seqs (%d): every decoding sequence has a cached token; 0 without decoding sequences; at most 2^40", d))
	case p < int64(c) || p > maxIterPrefill || (c == 0 && p != 0):
		return ierr("prefill_tokens", strconv.FormatInt(p, 10),
			fmt.Sprintf("at least prefill_seqs (%d), 0 without chunks, at most 67108864", c))
	case x < 0 || x > maxIterKVTokens || (c == 0 && x != 0):
		return ierr("prefill_prefix_tokens", strconv.FormatInt(x, 10), "from 0 to 2^40, 0 without chunks")
	case it.PadTokens < 0 || it.PadTokens > maxIterPadTokens:
		return ierr("pad_tokens", strconv.Itoa(it.PadTokens), "an integer from 0 to 1048576")
	}
	fp, fx := float64(p), float64(x)
	within := func(v, lo, hi float64) bool {
		tol := 1e-9 * math.Max(1, hi)
		return !math.IsNaN(v) && v >= lo-tol && v <= hi+tol
	}
	if hi := fp * (fp + 1) / 2; !within(it.PrefillCausalPairs, fp, hi) {
		return ierr("prefill_causal_pairs", strconv.FormatFloat(it.PrefillCausalPairs, 'g', -1, 64),
			fmt.Sprintf("from prefill_tokens (%d) to prefill_tokens(prefill_tokens+1)/2 (%.0f)", p, hi))
	}
	if hi := fp * fx; !within(it.PrefillPrefixPairs, 0, hi) {
		return ierr("prefill_prefix_pairs", strconv.FormatFloat(it.PrefillPrefixPairs, 'g', -1, 64),
			fmt.Sprintf("from 0 to prefill_tokens x prefill_prefix_tokens (%.0f)", hi))
	}
	if it.KVDtype != "" {
		switch it.KVDtype {
		case BF16, FP16, FP8:
		default:
			return ierr("kv_dtype", strconv.Quote(string(it.KVDtype)), "bf16, fp16 or fp8")
		}
	}
	return nil
}

// String renders the iteration compactly: "d12/kv49152 + p2x3000/pre1024 (+pad4)".
func (it Iteration) String() string {
	var b strings.Builder
	if it.DecodeSeqs > 0 {
		fmt.Fprintf(&b, "d%d/kv%d", it.DecodeSeqs, it.DecodeKVTokens)
	}
	if it.PrefillSeqs > 0 {
		if b.Len() > 0 {
			b.WriteString(" + ")
		}
		fmt.Fprintf(&b, "p%dx%d", it.PrefillSeqs, it.PrefillTokens)
		if it.PrefillPrefixTokens > 0 {
			fmt.Fprintf(&b, "/pre%d", it.PrefillPrefixTokens)
		}
	}
	if it.PadTokens > 0 {
		fmt.Fprintf(&b, " (+pad%d)", it.PadTokens)
	}
	if it.KVDtype != "" {
		fmt.Fprintf(&b, " kv=%s", it.KVDtype)
	}
	return b.String()
}

// BuildIteration lays one mixed engine step of it on architecture a under
// plan p: every op of every rank, as BuildWith does for a Workload step,
// with the same op IDs. Every token of the step (decode tokens, prefill
// tokens and padding) goes through the embedding, the projections, the
// MoE or dense MLP, o_proj, the collectives and the norms; logits are
// computed for one token per request (vLLM's logits_indices). Attention
// follows vLLM's MLACommonImpl.forward:
//
//   - attn.w_uk (decode tokens, absorbed), attn.kv_b_proj (prefill
//     tokens, non-absorbed K/V expansion), attn.rope and
//     attn.kv_cache_write (all real tokens);
//   - prefill: attn.mla_prefill, causal attention of each chunk over its
//     own tokens (PrefillCausalPairs); with a cached prefix, the context
//     pass: attn.prefill_ctx_gather (the prefix's latents read from the
//     cache into a bf16 workspace), attn.prefill_ctx_kv_b_proj (their K/V
//     expansion), attn.mla_prefill_ctx (chunk queries against the prefix,
//     PrefillPrefixPairs) and attn.prefill_ctx_merge (merge_attn_states of
//     the two partial outputs by log-sum-exp). vLLM runs the context pass
//     in workspace-sized pieces; it is one op of the same total work here;
//   - decode: attn.mla_decode over DecodeKVTokens cached tokens (each
//     sequence's cache read once) and attn.w_uv, with DCP's collectives
//     around them as in a decode step.
//
// A decode-only iteration of sequences of equal context c builds the same
// ops as BuildWith's decode step of that batch at context c; a prefill-only
// iteration of equal prompts without prefix the same as its prefill step
// (TestIterationMatchesWorkloadSteps).
//
// DSA sparse attention (a model with an indexer, without
// BuildOptions.DenseDSA): the indexer scores every cached key of every
// query; attention reads at most index_topk keys per query, applied to the
// totals: the decode part reads min(DecodeKVTokens, DecodeSeqs x topk)
// tokens, the prefill pairs are scaled down to at most PrefillTokens x
// topk. Both are upper bounds of the per-sequence caps (equal when no
// sequence or every sequence exceeds topk).
//
// DCP > 1 is modelled for decode-only iterations, as for Workload steps.
func BuildIteration(a *Arch, p Plan, it Iteration, o BuildOptions) (*Schedule, error) {
	if a == nil {
		return nil, fmt.Errorf("build: nil architecture")
	}
	if err := p.Validate(a); err != nil {
		return nil, err
	}
	if err := it.Validate(); err != nil {
		return nil, err
	}
	p = p.Normalized()
	it.KVDtype = Workload{KVDtype: it.KVDtype}.KVDtypeFor(a)
	o, err := o.normalized()
	if err != nil {
		return nil, err
	}
	if p.DCP > 1 && it.PrefillSeqs > 0 {
		return nil, &PlanError{What: "plan", Field: "dcp", Value: strconv.Itoa(p.DCP),
			Want: "1 in an iteration with prefill chunks (decode context parallelism is modelled for decode only)"}
	}
	sparse := a.HasIndexer() && !o.DenseDSA
	if p.DCP > 1 && sparse {
		return nil, &PlanError{What: "plan", Field: "dcp", Value: strconv.Itoa(p.DCP), Want: "1 with DSA sparse attention (use the dense-DSA option to model DCP on GLM-5)"}
	}
	// The Workload carries the KV dtype the shared layer code reads; phase
	// decode keeps the step's sites out of the Workload prefill form.
	w := Workload{Phase: Decode, KVDtype: it.KVDtype}
	b := &builder{a: a, p: p, w: w, o: o, sparse: sparse, kvBytes: it.KVDtype.BytesPerValue(), it: &it}
	b.bg = it.DecodeSeqs
	b.tokens = it.Tokens() + int64(it.PadTokens)
	b.outTokens = int64(it.Requests())
	s := b.build()
	s.Workload = Workload{KVDtype: it.KVDtype}
	return s, nil
}

// iterAttention appends the attention core of a mixed iteration, after
// attnProjections (see BuildIteration for the op list and its source).
func (b *builder) iterAttention(s *site) {
	a, p, it := b.a, b.p, b.it
	h := int64(a.Hidden)
	hl := int64(a.Heads / p.TP)
	kvl := int64(a.KVLoraRank)
	rope, nope, v := int64(a.QKRopeHeadDim), int64(a.QKNopeHeadDim), int64(a.VHeadDim)
	lat, qk := kvl+rope, nope+rope
	attnDt := s.dtype(CompAttention)
	d, pt, c := int64(it.DecodeSeqs), it.PrefillTokens, int64(it.PrefillSeqs)
	real := d + pt

	kvd := float64(it.DecodeKVTokens)
	causal, prefix := it.PrefillCausalPairs, it.PrefillPrefixPairs
	if b.sparse {
		b.indexer(s)
		topk := float64(a.IndexTopK)
		kvd = math.Min(kvd, float64(d)*topk)
		if all, lim := causal+prefix, float64(pt)*topk; all > lim {
			causal, prefix = causal*lim/all, prefix*lim/all
		}
	}

	if d > 0 {
		b.gemm(b.op(s, "attn", "w_uk", KindGEMM, gNone), d, kvl, nope, float64(hl), a.Quant.Base)
	}
	if pt > 0 {
		b.linear(s, "attn", "kv_b_proj", pt, hl*(nope+v), kvl, attnDt)
	}
	b.rope(s, real, hl)
	b.kvWrite(s, real, lat)

	if pt > 0 {
		op := b.op(s, "attn", "mla_prefill", KindAttention, gNone)
		op.M, op.N, op.K, op.Batch = pt, ceilDiv64(pt, c), qk, float64(hl)
		op.ActDtype, op.KVDtype = BF16, b.w.KVDtype
		op.FLOPs = float64(hl) * causal * 2 * float64(qk+v)
		op.BytesRead = float64(pt*hl*(qk+qk+v)) * actBytes
		op.BytesWritten = float64(pt*hl*v) * actBytes
		if x := it.PrefillPrefixTokens; x > 0 {
			b.prefillContext(s, pt, c, x, prefix)
		}
	}

	if d > 0 {
		dcp := int64(p.DCP)
		heads := hl * dcp
		if dcp > 1 {
			op := b.op(s, "attn", "dcp_q_allgather", KindCollective, gDCP)
			op.Collective = AllGather
			op.CommBytes = d * heads * lat * actBytes
			op.BytesRead = float64(d*hl*lat) * actBytes
			op.BytesWritten = float64(op.CommBytes)
		}
		// Per sequence ceil(context/dcp) cached tokens on this rank, from
		// the average context (exact for equal contexts).
		cached := int64(math.Ceil(kvd / float64(d*dcp)))
		op := b.op(s, "attn", "mla_decode", KindAttention, gNone)
		op.M, op.N, op.K, op.Batch = d, cached, lat, float64(heads)
		op.ActDtype, op.KVDtype = BF16, b.w.KVDtype
		op.FLOPs = float64(d) * float64(heads) * float64(cached) * 2 * float64(lat+kvl)
		op.KVBytes = float64(d) * float64(cached) * float64(lat) * b.kvBytes
		op.BytesRead = op.KVBytes + float64(d*heads*lat)*actBytes
		op.BytesWritten = float64(d*heads*kvl) * actBytes
		if dcp > 1 {
			op := b.op(s, "attn", "dcp_lse_allgather", KindCollective, gDCP)
			op.Collective = AllGather
			op.CommBytes = dcp * d * heads * 4
			op.BytesRead = float64(d * heads * 4)
			op.BytesWritten = float64(op.CommBytes)
			op = b.op(s, "attn", "dcp_out_reducescatter", KindCollective, gDCP)
			op.Collective = ReduceScatter
			op.CommBytes = d * heads * kvl * actBytes
			op.BytesRead = float64(op.CommBytes)
			op.BytesWritten = float64(d*hl*kvl) * actBytes
		}
		b.gemm(b.op(s, "attn", "w_uv", KindGEMM, gNone), d, v, kvl, float64(hl), a.Quant.Base)
	}
	t := s.tokens
	b.linear(s, "attn", "o_proj", t, h, hl*v, attnDt)
	b.allreduce(s, "attn", "allreduce", gTP, t*h*actBytes)
}

// prefillContext appends the context pass of chunks of pt tokens (c
// chunks) over x cached prefix tokens, pairs query-key pairs in all.
func (b *builder) prefillContext(s *site, pt, c, x int64, pairs float64) {
	a := b.a
	hl := int64(a.Heads / b.p.TP)
	kvl := int64(a.KVLoraRank)
	rope, nope, v := int64(a.QKRopeHeadDim), int64(a.QKNopeHeadDim), int64(a.VHeadDim)
	lat, qk := kvl+rope, nope+rope

	op := b.op(s, "attn", "prefill_ctx_gather", KindElementwise, gNone)
	elementwise(op, 0, float64(x*lat)*b.kvBytes, float64(x*lat)*actBytes)
	op.KVBytes = float64(x*lat) * b.kvBytes
	op.M, op.N = x, lat
	op.KVDtype = b.w.KVDtype
	b.linear(s, "attn", "prefill_ctx_kv_b_proj", x, hl*(nope+v), kvl, s.dtype(CompAttention))
	op = b.op(s, "attn", "mla_prefill_ctx", KindAttention, gNone)
	op.M, op.N, op.K, op.Batch = pt, ceilDiv64(x, c), qk, float64(hl)
	op.ActDtype, op.KVDtype = BF16, b.w.KVDtype
	op.FLOPs = float64(hl) * pairs * 2 * float64(qk+v)
	// Queries of the chunk, expanded K and V of the prefix; output and
	// its fp32 log-sum-exp per head and query.
	op.BytesRead = float64(pt*hl*qk)*actBytes + float64(x*hl*(qk+v))*actBytes
	op.BytesWritten = float64(pt*hl*v)*actBytes + float64(pt*hl)*4
	op = b.op(s, "attn", "prefill_ctx_merge", KindElementwise, gNone)
	n := float64(pt * hl * v)
	elementwise(op, 4*n, 2*n*actBytes+2*float64(pt*hl)*4, n*actBytes)
	op.M, op.N = pt, hl*v
}

// iterIndexerScore appends the indexer's scoring and top-k selection of a
// mixed iteration: each decode token scores its sequence's cache, each
// chunk token its prompt's prefix and the chunk tokens before it.
func (b *builder) iterIndexerScore(s *site) {
	it := b.it
	topk := int64(b.a.IndexTopK)
	d, pt, c := int64(it.DecodeSeqs), it.PrefillTokens, int64(it.PrefillSeqs)
	real := d + pt
	pairs := float64(it.DecodeKVTokens) + it.PrefillCausalPairs + it.PrefillPrefixPairs
	keys := float64(it.DecodeKVTokens + it.PrefillPrefixTokens + pt)
	// Each query writes min(keys it may see, topk) indices: the longest
	// context of its part, from the part's average.
	var n, selected int64
	if d > 0 {
		dk := ceilDiv64(it.DecodeKVTokens, d)
		n = dk
		selected += d * min(dk, topk)
	}
	if pt > 0 {
		pk := ceilDiv64(it.PrefillPrefixTokens+pt, c)
		n = max(n, pk)
		selected += pt * min(pk, topk)
	}
	b.indexerScore(s, real, n, pairs, keys, float64(selected))
}

func ceilDiv64(a, b int64) int64 {
	if b <= 0 {
		return 0
	}
	return (a + b - 1) / b
}
