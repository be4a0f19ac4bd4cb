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
	// SpecTokens is the speculative tokens each decoding sequence
	// verifies in the step (1 + SpecTokens query tokens each; spec.go):
	// the scheduler's speculative decoding, its draft passes laid after
	// the head by the BuildOptions' Spec method. 0: none.
	SpecTokens int `json:"spec_tokens,omitempty"`
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

// Tokens is the number of real tokens the step computes: 1 + SpecTokens
// per decoding sequence plus every prefill token (padding excluded).
func (it *Iteration) Tokens() int64 { return it.DecodeTokens() + it.PrefillTokens }

// DecodeTokens is the decode part's query tokens: 1 + SpecTokens per
// decoding sequence.
func (it *Iteration) DecodeTokens() int64 { return int64(it.DecodeSeqs) * int64(1+it.SpecTokens) }

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
	case it.SpecTokens < 0 || it.SpecTokens > 16:
		return ierr("spec_tokens", strconv.Itoa(it.SpecTokens), "an integer from 0 to 16")
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
	if it.KVDtype != "" && !IsKVDtype(it.KVDtype) {
		return ierr("kv_dtype", strconv.Quote(string(it.KVDtype)), KVDtypesAccepted)
	}
	return nil
}

// String renders the iteration compactly: "d12/kv49152 + p2x3000/pre1024 (+pad4)".
func (it Iteration) String() string {
	var b strings.Builder
	if it.DecodeSeqs > 0 {
		fmt.Fprintf(&b, "d%d/kv%d", it.DecodeSeqs, it.DecodeKVTokens)
		if it.SpecTokens > 0 {
			fmt.Fprintf(&b, "+spec%d", it.SpecTokens)
		}
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
//   - attn.rope (all real tokens, before the attention op, in
//     MultiHeadLatentAttentionWrapper.forward), then inside the op
//     attn.kv_cache_write (all real tokens), attn.w_uk (decode tokens,
//     absorbed) and attn.kv_b_proj (prefill tokens, non-absorbed K/V
//     expansion);
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
// tokens (an upper bound of the per-sequence caps, equal when no sequence
// or every sequence exceeds topk), the prefill pairs are scaled down to
// sparsePrefillPairs (a query at position i of its prompt attends min(i,
// topk) keys: exact for one chunk, an upper bound otherwise), so a
// prefill-only iteration of one prompt prices as its Workload step.
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
	if err := validateDCPSparse(a, p, o); err != nil {
		return nil, err
	}
	// The Workload carries the KV dtype the shared layer code reads and the
	// speculative tokens the draft passes follow; phase decode keeps the
	// step's sites out of the Workload prefill form.
	w := Workload{Phase: Decode, KVDtype: it.KVDtype, SpecTokens: it.SpecTokens}
	if it.SpecTokens > 0 {
		if err := validateSpec(a, p, w, o.Spec); err != nil {
			return nil, err
		}
	}
	b := &builder{a: a, p: p, w: w, o: o, d: iterationDeployment(&it, o.Graphs), sparse: a.HasIndexer() && !o.DenseDSA,
		kvBytes: it.KVDtype.BytesPerValue(), it: &it}
	b.bg = it.DecodeSeqs
	b.tokens = b.d.TokensPerGroup
	// Logits for one token per request, and for every speculative token a
	// decoding sequence verifies.
	b.outTokens = int64(it.Requests()) + int64(it.DecodeSeqs)*int64(it.SpecTokens)
	s := b.build()
	s.Workload = Workload{KVDtype: it.KVDtype, SpecTokens: it.SpecTokens}
	return s, nil
}

func ceilDiv64(a, b int64) int64 {
	if b <= 0 {
		return 0
	}
	return (a + b - 1) / b
}
