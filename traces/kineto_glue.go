package traces

import "github.com/tpscope/tpscope/model"

// Placement by position of the kernels a model run op by op in PyTorch
// launches (Hugging Face transformers, a plain port; no engine kernels):
// their names say the ATen operator (a multiply, a cat, a sort), not the
// model's op, so where they sit says which op they run. These rules apply
// only where the op has no kernel of its own in its part: beside an
// engine's RoPE, cache-write, routing or MoE-sum kernel the same generic
// kernels are glue the schedule has no op for, and stay unplaced.
//
//   - Unfused attention (no attention kernel in the step): a softmax with
//     a GEMM before and after it (glue between them only) is one
//     attention — the scores GEMM, their scaling and casts, the softmax,
//     the probabilities x values GEMM and its split-K reduction
//     (unfusedAttention).
//   - MLA's down-projections run unfused (q_a and kv_a, each before its
//     latent norm): both GEMMs are fused_qkv_a_proj (unfusedDownProj).
//   - Attention part without a RoPE kernel: the generic kernels between
//     the last latent norm and attention (the rotations' multiplies, adds
//     and cats) are RoPE; index_copy_ without a cache-write kernel is
//     the cache write (glueAttn).
//   - A SiLU kernel without the multiply: the multiply after it, before
//     the next GEMM, is the rest of SiLU-and-mul (glueActs).
//   - Routing in PyTorch (only ATen top-k kernels): the generic kernels
//     between the router's GEMM and the experts' first grouped GEMM are
//     moe.topk (scoring, bias, normalisation, the sorts and counts that
//     order tokens by expert), except the gather right before the
//     grouped GEMM, which orders the tokens for it (experts_gate_up);
//     without a MoE-sum kernel, the generic kernels after the second
//     grouped GEMM up to the next op (the weighting, the zeroed output,
//     index_add_) are experts_down's sum over each token's top-k (glueMoE).
//   - The residual add before a norm kernel that does not add
//     (PyTorch's layer/RMS norm) is the norm's: the schedule's input,
//     post-attention and final norms are "RMSNorm with the residual add"
//     (residualAdds).

// glue reports whether the kernel at pos is a generic kernel no rule has
// placed yet.
func (p *placer) glue(pos int) bool { return p.cls(pos) == clsOther && p.k(pos).role == roleNone }

// unfusedAttention marks, in a step without attention kernels, each
// softmax with a GEMM before and after it (only generic kernels between)
// and everything from the first GEMM to the second (with the second's
// split-K reduction) as attention.
func (p *placer) unfusedAttention() {
	n := len(p.cl)
	for i := range n {
		if p.cl[i] == clsAttn {
			return
		}
	}
	for i := 0; i < n; i++ {
		if p.cl[i] != clsOther || !p.kr.infos[p.k(i).name].softmax {
			continue
		}
		lo := i - 1
		for lo >= 0 && p.cl[lo] == clsOther {
			lo--
		}
		hi := i + 1
		for hi < n && p.cl[hi] == clsOther {
			hi++
		}
		if lo < 0 || hi >= n || p.cl[lo] != clsGEMM || p.cl[hi] != clsGEMM {
			continue
		}
		for hi+1 < n && p.cl[hi+1] == clsSplitK {
			hi++
		}
		for j := lo; j <= hi; j++ {
			p.cl[j] = clsAttn
		}
		i = hi
	}
}

// unfusedDownProj returns the two GEMMs of pre (the GEMMs before
// attention) that are MLA's q_a and kv_a down-projections run apart — the
// last GEMM before each latent norm — when the form's first GEMM is the
// fused one and pre has one GEMM more than the form; nil otherwise.
// norms are the norm kernels before attention, the latent ones last.
func (p *placer) unfusedDownProj(pre, norms []int, f attnForm) []int {
	if len(f.pre) == 0 || f.pre[0] != roleFor(model.RoleFusedQKVAProj) || len(pre) != len(f.pre)+1 || len(norms) < 2 {
		return nil
	}
	latent := norms[len(norms)-2:]
	var down []int
	from := -1
	for _, nm := range latent {
		last := -1
		for _, g := range pre {
			if g > from && g < nm {
				last = g
			}
		}
		if last < 0 || (len(down) > 0 && down[len(down)-1] == last) {
			return nil
		}
		down = append(down, last)
		from = nm
	}
	return down
}

// glueAttn places the generic kernels of an attention part [lo, hi) that
// run RoPE or the cache write when no kernel of their own does.
func (p *placer) glueAttn(lo, hi, layer int) {
	first := p.firstAttn(lo, hi)
	if first == hi {
		return
	}
	if !p.has(lo, hi, clsKVWrite) {
		for i := lo; i < first; i++ {
			if p.glue(i) && p.ki(i).indexCopy {
				p.set(i, layer, placed.kvWrite)
			}
		}
	}
	if p.has(lo, hi, clsRope) {
		return
	}
	norm := first - 1
	for norm >= lo && p.cls(norm) != clsNorm {
		norm--
	}
	if norm < lo {
		return
	}
	for i := norm + 1; i < first; i++ {
		if p.glue(i) {
			p.set(i, layer, placed.rope)
		}
	}
}

// has reports whether a kernel of class c runs in [lo, hi).
func (p *placer) has(lo, hi int, c kernelClass) bool {
	for i := lo; i < hi; i++ {
		if p.cls(i) == c {
			return true
		}
	}
	return false
}

// glueActs gives the multiply after each placed SiLU kernel that lacks it
// (glue up to the next kernel of another class) the activation's op.
func (p *placer) glueActs(lo, hi int, acts []int) {
	for _, a := range acts {
		k := p.k(a)
		if k.role == roleNone || !p.ki(a).plainAct {
			continue
		}
		for i := a + 1; i < hi && p.glue(i); i++ {
			p.copyOp(i, a)
		}
	}
}

// glueMoE places the generic kernels of a MoE part [lo, hi) whose routing
// and sum over the top-k run in PyTorch (see the file comment); moe are
// the grouped-GEMM positions.
func (p *placer) glueMoE(lo, hi, layer int, moe []int) {
	if len(moe) == 0 {
		return
	}
	router0, byHand := -1, true
	for i := lo; i < hi; i++ {
		if p.cls(i) == clsRouter {
			if router0 < 0 {
				router0 = i
			}
			byHand = byHand && p.ki(i).torchTopK
		}
	}
	if byHand && router0 >= 0 && router0 < moe[0] {
		// The routing window: after the router's GEMM, up to the grouped
		// GEMM and the kernels already given to it (its set-up).
		from := lo
		for i := lo; i < router0; i++ {
			if p.k(i).role == placed.moeGate {
				from = i + 1
			}
		}
		to := moe[0]
		for to > from && p.k(to-1).role == placed.experts[0] {
			to--
		}
		for to > from && p.glue(to-1) && p.ki(to-1).gather {
			to--
			p.set(to, layer, placed.experts[0])
		}
		for i := from; i < to; i++ {
			if p.glue(i) {
				p.set(i, layer, placed.moeTopK)
			}
		}
	}
	if last := moe[len(moe)-1]; len(moe) == 2 && !p.has(lo, hi, clsMoEFinalize) && p.k(last).role != roleNone {
		for i := last + 1; i < hi && p.glue(i); i++ {
			p.set(i, layer, placed.experts[2])
		}
	}
}

// residualAdds gives the generic kernels right before a placed input,
// post-attention or final norm whose kernel does not add the residual
// (nothing but generic kernels between) that norm's op.
func (p *placer) residualAdds() {
	for i := range p.cl {
		if p.cl[i] != clsNorm || p.ki(i).addNorm {
			continue
		}
		switch p.k(i).role {
		case placed.attnNorms[0], placed.moePostNorm, placed.mlpPostNorm, placed.finalNorm:
		default:
			continue
		}
		for j := i - 1; j >= 0 && p.glue(j); j-- {
			p.copyOp(j, i)
		}
	}
}
