package model

import "math"

// The fills of the attention and MoE blocks' ops (builder.fill hands
// them the roles of those blocks). Each block's quantities are computed
// once when the block starts (attnDims, moeDims).

// attnDims are an attention block's quantities at one site.
type attnDims struct {
	hl, kvl, rope, nope, v int64 // local heads and MLA dims
	lat, qk                int64 // latent width (kv_lora + rope), query-key width (nope + rope)
	dcp, heads             int64 // DCP, and the heads each rank attends for after its gather
	ctx                    int64 // Workload.Context
	// The decode part: dTok query tokens of dSeqs sequences, each reading
	// cached tokens of its cache on this rank.
	dTok, dSeqs, cached int64
	// The prefill part's query tokens, and the tokens RoPE and the cache
	// write see (the real tokens of an iteration, without its padding).
	pTok, rTok int64
	// attended: keys each query of a Workload step attends to (its
	// context, at most index_topk under DSA).
	attended int64
	// causal, prefix: an iteration's pair sums (capped under DSA).
	causal, prefix float64
	// The indexer's scoring: idxT query tokens with idxN keys each,
	// idxPairs pairs scored, idxKeys cached keys read, idxSelected indices
	// written.
	idxT, idxN                     int64
	idxPairs, idxKeys, idxSelected float64
}

// attnDims sets b.ad for the attention block at s.
func (b *builder) attnDims(s *site) {
	a, p := b.a, b.p
	d := attnDims{hl: int64(a.Heads / p.TP), kvl: int64(a.KVLoraRank), rope: int64(a.QKRopeHeadDim),
		nope: int64(a.QKNopeHeadDim), v: int64(a.VHeadDim), dcp: int64(p.DCP), ctx: int64(b.w.Context)}
	d.lat, d.qk, d.heads = d.kvl+d.rope, d.nope+d.rope, d.hl*d.dcp
	topk := int64(a.IndexTopK)
	if it := b.it; it != nil {
		// BuildIteration: decode and prefill parts of one step.
		dd, pt, c := int64(it.DecodeSeqs), it.PrefillTokens, int64(it.PrefillSeqs)
		dq := it.DecodeTokens() // 1 + spec tokens per decoding sequence
		d.dTok, d.dSeqs, d.pTok, d.rTok = dq, dd, pt, dq+pt
		kvd := float64(it.DecodeKVTokens)
		d.causal, d.prefix = it.PrefillCausalPairs, it.PrefillPrefixPairs
		if b.sparse {
			// Attention reads at most index_topk keys per query, applied to
			// the totals (see BuildIteration).
			kvd = math.Min(kvd, float64(dd)*float64(topk))
			if all, lim := d.causal+d.prefix, sparsePrefillPairs(it, topk); all > lim {
				d.causal, d.prefix = d.causal*lim/all, d.prefix*lim/all
			}
			// The indexer scores: each decode token its sequence's cache,
			// each chunk token its prompt's prefix and the chunk tokens
			// before it; each query writes min(keys it may see, topk)
			// indices, the longest context of its part from the part's
			// average.
			d.idxT = dq + pt
			d.idxPairs = float64(it.DecodeKVTokens)*float64(1+it.SpecTokens) + it.PrefillCausalPairs + it.PrefillPrefixPairs
			d.idxKeys = float64(it.DecodeKVTokens + it.PrefillPrefixTokens + pt)
			var selected int64
			if dd > 0 {
				dk := ceilDiv64(it.DecodeKVTokens, dd)
				d.idxN = dk
				selected += dq * min(dk, topk)
			}
			if pt > 0 {
				pk := ceilDiv64(it.PrefillPrefixTokens+pt, c)
				d.idxN = max(d.idxN, pk)
				selected += pt * min(pk, topk)
			}
			d.idxSelected = float64(selected)
		}
		if dd > 0 {
			// Per sequence ceil(context/dcp) cached tokens on this rank,
			// from the average context (exact for equal contexts).
			d.cached = int64(math.Ceil(kvd / float64(dd*d.dcp)))
		}
		b.ad = d
		return
	}
	t := s.tokens - s.pad // the real sequences' tokens: the padding has no sequence to attend over
	d.dTok, d.dSeqs, d.pTok, d.rTok = t, s.seqs, t, t
	d.attended = d.ctx
	if b.sparse {
		d.attended = min(d.ctx, topk)
		d.idxT, d.idxN = t, d.ctx
		if s.prefill {
			d.idxPairs = float64(s.seqs) * causalPairs(d.ctx, d.ctx)
		} else {
			d.idxPairs = float64(t) * float64(d.ctx)
		}
		d.idxKeys = float64(s.seqs) * float64(d.ctx)
		d.idxSelected = float64(t * min(d.ctx, topk))
	}
	d.cached = (d.attended + d.dcp - 1) / d.dcp // tokens of each sequence's cache on this rank
	b.ad = d
}

// fillAttention fills op of attention role r at s (BuildWith's doc and
// BuildIteration's list the ops); false when r is no attention op it
// fills (the Linears are linearShape's).
func (b *builder) fillAttention(s *site, op *Op, r Role) bool {
	a, d := b.a, &b.ad
	t := s.tokens
	switch r {
	case RoleInputNorm:
		b.norm(op, t, a.Hidden, true)
	case RoleQANorm:
		b.norm(op, t, a.QLoraRank, false)
	case RoleKVANorm:
		b.norm(op, t, a.KVLoraRank, false)

	// GLM-5's DSA lightning indexer (DeepSeek-V3.2's design): wq_b
	// q_lora -> index_heads x index_head_dim, wk hidden -> index_head_dim,
	// k LayerNorm, weights_proj hidden -> index_heads, RoPE, the FP8
	// key-cache write, scoring of every cached token by every index head,
	// and the top-k selection. vLLM builds these as ReplicatedLinear: no
	// TP sharding, no communication.
	case RoleIndexerKNorm:
		b.norm(op, t, a.IndexHeadDim, false)
	case RoleIndexerWeightsProj:
		b.gemm(op, t, int64(a.IndexHeads), int64(a.Hidden), 1, a.Quant.Base)
	case RoleIndexerRope:
		// The rotary part of each index head's query and of the shared
		// key, a row of them per token (the row kernels' grid: M).
		n := float64(t * (int64(a.IndexHeads) + 1) * int64(a.QKRopeHeadDim))
		elementwise(op, 6*n, n*actBytes, n*actBytes)
		op.M, op.N = t, (int64(a.IndexHeads)+1)*int64(a.QKRopeHeadDim)
	case RoleIndexerCacheWrite:
		id, cb := int64(a.IndexHeadDim), float64(a.IndexerCacheBytesPerTokenLayer())
		elementwise(op, float64(t*id)*2, float64(t*id)*actBytes, float64(t)*cb)
		op.M, op.N = t, id
		op.KVDtype = FP8
	case RoleIndexerScore:
		ih, id := int64(a.IndexHeads), int64(a.IndexHeadDim)
		op.ActDtype, op.KVDtype = FP8, FP8
		op.M, op.N, op.K, op.Batch = d.idxT, d.idxN, id, float64(ih)
		// Per pair: ih dot products of id values, ReLU, weighted sum over heads.
		op.FLOPs = d.idxPairs * float64(ih) * (2*float64(id) + 2)
		op.KVBytes = d.idxKeys * float64(a.IndexerCacheBytesPerTokenLayer())
		op.BytesRead = op.KVBytes + float64(d.idxT*ih*id) // FP8 queries
		op.BytesWritten = d.idxPairs * 4                  // fp32 index scores
	case RoleIndexerTopK:
		op.M, op.N, op.K = d.idxT, d.idxN, int64(a.IndexTopK)
		op.ActDtype = FP32
		op.FLOPs = d.idxPairs
		op.BytesRead = d.idxPairs * 4
		op.BytesWritten = d.idxSelected * 4

	// Absorbed decode. W_UK and W_UV are kv_b_proj split per head and kept
	// in bf16 by vLLM (MLACommonImpl dequantizes kv_b_proj for them). Each
	// is one batched GEMM kernel: the transposes around them are views that
	// torch.bmm reads and writes in place as strided batches
	// (vllm/model_executor/layers/attention/mla_attention.py,
	// MLAAttention.forward_impl's decode branch: torch.bmm(decode_q_nope,
	// self.W_UK_T, out=decode_ql_nope) on decode_q.transpose(0, 1);
	// _v_up_proj: torch.bmm(x, self.W_UV, out=out) into a transposed view
	// of the output), so no copy kernel goes with them.
	case RoleWUK:
		b.gemm(op, d.dTok, d.kvl, d.nope, float64(d.hl), a.Quant.Base)
	case RoleWUV:
		b.gemm(op, d.dTok, d.v, d.kvl, float64(d.hl), a.Quant.Base)
	case RoleRope:
		n := float64(d.rTok * (d.hl + 1) * d.rope) // q_pe of local heads + the shared k_pe
		elementwise(op, 6*n, n*actBytes, n*actBytes)
		op.M, op.N = d.rTok, (d.hl+1)*d.rope
	case RoleKVCacheWrite:
		// Under DCP each token's latent is stored by one rank of the DCP group.
		share := float64(d.rTok) / float64(b.p.DCP)
		elementwise(op, 0, share*float64(d.lat)*actBytes, share*float64(d.lat)*b.kvBytes)
		op.M, op.N = int64(math.Ceil(share)), d.lat
		op.KVDtype = b.w.KVDtype
	case RoleMLAPrefill:
		op.M, op.K, op.Batch = d.pTok, d.qk, float64(d.hl)
		op.ActDtype, op.KVDtype = BF16, b.w.KVDtype
		if it := b.it; it != nil {
			op.N = ceilDiv64(d.pTok, int64(it.PrefillSeqs))
			op.FLOPs = float64(d.hl) * d.causal * 2 * float64(d.qk+d.v)
		} else {
			// Causal attention per prompt of length ctx: query position i
			// sees min(i, attended) keys; pairs = sum over i of that.
			op.N = d.ctx
			op.FLOPs = float64(s.seqs) * float64(d.hl) * causalPairs(d.ctx, d.attended) * 2 * float64(d.qk+d.v)
		}
		op.BytesRead = float64(d.pTok*d.hl*(d.qk+d.qk+d.v)) * actBytes
		op.BytesWritten = float64(d.pTok*d.hl*d.v) * actBytes

	// The context pass of chunks over their cached prefix (iterations).
	case RolePrefillCtxGather:
		x := b.it.PrefillPrefixTokens
		elementwise(op, 0, float64(x*d.lat)*b.kvBytes, float64(x*d.lat)*actBytes)
		op.KVBytes = float64(x*d.lat) * b.kvBytes
		op.M, op.N = x, d.lat
		op.KVDtype = b.w.KVDtype
	case RoleMLAPrefillCtx:
		pt, c, x := d.pTok, int64(b.it.PrefillSeqs), b.it.PrefillPrefixTokens
		op.M, op.N, op.K, op.Batch = pt, ceilDiv64(x, c), d.qk, float64(d.hl)
		op.ActDtype, op.KVDtype = BF16, b.w.KVDtype
		op.FLOPs = float64(d.hl) * d.prefix * 2 * float64(d.qk+d.v)
		// Queries of the chunk, expanded K and V of the prefix; output and
		// its fp32 log-sum-exp per head and query.
		op.BytesRead = float64(pt*d.hl*d.qk)*actBytes + float64(x*d.hl*(d.qk+d.v))*actBytes
		op.BytesWritten = float64(pt*d.hl*d.v)*actBytes + float64(pt*d.hl)*4
	case RolePrefillCtxMerge:
		pt := d.pTok
		n := float64(pt * d.hl * d.v)
		elementwise(op, 4*n, 2*n*actBytes+2*float64(pt*d.hl)*4, n*actBytes)
		op.M, op.N = pt, d.hl*d.v

	case RoleDCPQAllGather:
		b.collective(op, gDCP, AllGather, d.dTok*d.heads*d.lat*actBytes)
		op.BytesRead = float64(d.dTok*d.hl*d.lat) * actBytes
	case RoleMLADecode:
		op.M, op.N, op.K, op.Batch = d.dTok, d.cached, d.lat, float64(d.heads)
		op.ActDtype, op.KVDtype = BF16, b.w.KVDtype
		// Scores over kv_lora + rope values and output in latent space
		// (kv_lora), per head and cached token.
		op.FLOPs = float64(d.dTok) * float64(d.heads) * float64(d.cached) * 2 * float64(d.lat+d.kvl)
		// All heads (and all speculative positions of a sequence) share the
		// latent cache: it is read once per sequence.
		op.KVBytes = float64(d.dSeqs) * float64(d.cached) * float64(d.lat) * b.kvBytes
		op.BytesRead = op.KVBytes + float64(d.dTok*d.heads*d.lat)*actBytes
		op.BytesWritten = float64(d.dTok*d.heads*d.kvl) * actBytes
	case RoleDCPLSEAllGather:
		// fp32 LSE per head and token, gathered from dcp ranks.
		b.collective(op, gDCP, AllGather, d.dcp*d.dTok*d.heads*4)
		op.BytesRead = float64(d.dTok * d.heads * 4)
	case RoleDCPOutReduceScatter:
		// The input buffer; each rank keeps its hl heads.
		b.collective(op, gDCP, ReduceScatter, d.dTok*d.heads*d.kvl*actBytes)
		op.BytesRead = float64(op.CommBytes)
		op.BytesWritten = float64(d.dTok*d.hl*d.kvl) * actBytes
	default:
		return false
	}
	return true
}

// sparsePrefillPairs is the most query-key pairs an iteration's prefill
// chunks attend under DSA, each query at most topk keys. A query at
// position i of its prompt (1-based, its prefix counted) attends min(i,
// topk) keys, so a chunk of n tokens after x cached ones attends
// causalPairs(x+n, topk) - causalPairs(x, topk), a Workload prefill
// step's count (fillAttention) for one prompt without prefix. From the
// totals an iteration keeps: exact for one chunk; for chunks of equal
// size (their causal pairs say so: n(n+1)/2 is strictly convex), the
// count at their mean prefix, an upper bound since it is concave in the
// prefix; otherwise PrefillTokens x topk, the bound of every query
// attending topk keys.
func sparsePrefillPairs(it *Iteration, topk int64) float64 {
	c, pt := int64(it.PrefillSeqs), it.PrefillTokens
	lim := float64(pt) * float64(topk)
	if c <= 0 || pt%c != 0 {
		return lim
	}
	n, x := pt/c, it.PrefillPrefixTokens/c
	if c > 1 && it.PrefillCausalPairs != float64(c)*float64(n)*float64(n+1)/2 {
		return lim
	}
	if it.PrefillPrefixTokens%c != 0 {
		x++ // the mean prefix rounded up: the count grows with it
	}
	return math.Min(lim, float64(c)*(causalPairs(x+n, topk)-causalPairs(x, topk)))
}

// causalPairs is sum_{i=1..n} min(i, cap): query-key pairs of causal
// attention over n tokens when each query sees at most cap keys.
func causalPairs(n, cap int64) float64 {
	if cap >= n {
		return float64(n) * float64(n+1) / 2
	}
	return float64(cap)*float64(cap+1)/2 + float64(n-cap)*float64(cap)
}

// moeDims are a MoE block's quantities at one site.
type moeDims struct {
	// tm is the tokens this rank's router and shared experts see: T, or
	// ceil(T/TP) under vLLM's use_sequence_parallel_moe (EP, TP > 1,
	// DP > 1), where an all-gather over the TP group restores the full
	// token set afterwards.
	tm int64
	// shape indexes the layer's routing shape in b.shapes; inter is each
	// expert's intermediate dim this rank computes.
	shape int32
	inter int64
	// sharedInter is the shared experts' intermediate dim on this rank
	// (TP-sharded; replicated under DP attention).
	sharedInter int64
	// dispatch and combine move the tokens to their experts' ranks and
	// back under DP attention + EP.
	dispatch, combine           Collective
	dispatchBytes, combineBytes int64
}

// moeDims sets b.md for the MoE block at s.
func (b *builder) moeDims(s *site) {
	a, p := b.a, b.p
	t, h := s.tokens, int64(a.Hidden)
	e, k := int64(a.RoutedExperts), int64(a.TopK)
	dp := p.DP > 1
	m := moeDims{tm: t}
	if dp && p.TP > 1 {
		m.tm = (t + int64(p.TP) - 1) / int64(p.TP)
	}
	// Which tokens reach this rank's experts, how many experts it holds,
	// and the slice of each expert's intermediate dim it computes.
	var (
		eLocal   = e
		routeTok = t // tokens routed over this rank's expert pool
	)
	m.inter = int64(a.MoEIntermediate / p.TP)
	if p.EP {
		eLocal = e / int64(p.World())
		m.inter = int64(a.MoEIntermediate)
	}
	if dp {
		routeTok = m.tm * int64(p.World())
	}
	// Every MoE layer of a step routes the same pool, so the shape is
	// computed once (a power-law shape costs an integral).
	if n := len(b.shapes); n > 0 && b.shapes[n-1].RoutedTokens == routeTok && b.shapes[n-1].LocalExperts == int(eLocal) &&
		b.shapes[n-1].TopK == int(k) && b.shapes[n-1].Experts == int(e) {
		b.shapes = append(b.shapes, b.shapes[n-1])
	} else {
		b.shapes = append(b.shapes, b.o.Routing.Shape(routeTok, int(k), int(e), int(eLocal), 0))
	}
	m.shape = int32(len(b.shapes) - 1)
	if dp {
		dd := b.o.DispatchDtype.ActivationBytesPerValue()
		if b.o.MoEDispatch == DispatchAllGather {
			// Every rank gathers every rank's tokens (sizes as nccl-tests
			// counts them: the gathered buffer) and reduce-scatters the
			// expert outputs back.
			m.dispatch, m.combine = AllGather, ReduceScatter
			m.dispatchBytes = int64(math.Round(float64(routeTok) * float64(h) * dd))
			m.combineBytes = routeTok * h * actBytes
		} else {
			m.dispatch, m.combine = AllToAll, AllToAll
			dr := distinctRanks(e, k, eLocal, int64(p.World()))
			m.dispatchBytes = int64(math.Round(float64(m.tm) * dr * float64(h) * dd))
			m.combineBytes = int64(math.Round(float64(m.tm) * dr * float64(h) * actBytes))
		}
	}
	if a.SharedExperts > 0 {
		m.sharedInter = int64(a.SharedExperts * a.MoEIntermediate)
		if !dp {
			m.sharedInter /= int64(p.TP)
		}
	}
	b.md = m
}

// fillMoE fills op of MoE role r at s; false when r is no MoE op it fills
// (the shared experts' Linears are linearShape's).
func (b *builder) fillMoE(s *site, op *Op, r Role) bool {
	a, m := b.a, &b.md
	t, h := s.tokens, int64(a.Hidden)
	e, k := int64(a.RoutedExperts), int64(a.TopK)
	switch r {
	case RoleMoEGate:
		b.gemm(op, m.tm, e, h, 1, s.dtype(CompRouter))
	case RoleMoETopK:
		op.M, op.N, op.K = m.tm, e, k
		op.ActDtype = FP32
		op.FLOPs = float64(m.tm * e * 4) // sigmoid, bias, grouped top-k compare
		op.BytesRead = float64(m.tm*e) * 4
		op.BytesWritten = float64(m.tm*k) * 8 // expert ids + weights
	case RoleMoEDispatch:
		b.collective(op, gWorld, m.dispatch, m.dispatchBytes)
		op.ActDtype = b.o.DispatchDtype
		op.BytesRead = float64(m.dispatchBytes)
		b.moeOf[len(b.moeOf)-1] = m.shape
	case RoleMoECombine:
		b.collective(op, gWorld, m.combine, m.combineBytes)
		op.ActDtype = BF16
		op.BytesRead = float64(m.combineBytes)
		b.moeOf[len(b.moeOf)-1] = m.shape
	// The routed experts' grouped GEMMs over the layer's routing shape
	// (its Rows token-expert assignments spread over ExpertsTouched
	// experts; see MoEShape).
	case RoleExpertsGateUp, RoleExpertsAct, RoleExpertsDown:
		sh := &b.shapes[m.shape]
		dt := s.dtype(CompRoutedExperts)
		switch r {
		case RoleExpertsGateUp:
			b.groupedGEMM(op, sh.Rows, sh.ExpertsTouched, 2*m.inter, h, dt)
		case RoleExpertsAct:
			siluMul(op, sh.Rows, m.inter)
		default:
			b.groupedGEMM(op, sh.Rows, sh.ExpertsTouched, h, m.inter, dt)
		}
		b.moeOf[len(b.moeOf)-1] = m.shape
	case RoleSharedAct:
		siluMul(op, float64(m.tm), m.sharedInter)
	case RoleMoEAllGather:
		b.collective(op, gTP, AllGather, t*h*actBytes)
		op.ActDtype = BF16
		op.BytesRead = float64(m.tm * h * actBytes)
	default:
		return false
	}
	return true
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
