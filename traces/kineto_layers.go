package traces

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tpscope/tpscope/model"
)

// Layer and role recovery: the kernels of one step on one rank get the op
// IDs of model.Build's schedule (model/build.go, BuildWith's doc comment).
//
// Layer boundaries. Under tensor parallelism every decoder layer ends each
// of its two blocks with an all-reduce (attention after o_proj, the MoE or
// dense MLP after the expert/shared sum; serving-facts.md), and only the
// attention block runs attention kernels. So the collectives of a step cut
// it into: the embedding (up to the embedding all-reduce, the last
// collective before the first attention kernel), then per layer an
// attention part (holding attention kernels, ended by a collective) and
// an MLP/MoE part (no attention kernel, ended by a collective), then the
// head (after the last layer's all-reduce). A step whose collectives do
// not follow that pattern is not placed. Without collectives (TP = 1, or
// one rank's shard run alone) the attention runs mark the layers and the
// RMSNorms cut them: the first norm after a layer's attention is its
// post-attention norm, the second the next layer's input norm (or the
// final norm). A step without attention kernels (a model run op by op in
// PyTorch) has its attention found as a softmax between two GEMMs
// (kineto_glue.go).
//
// Roles within a part, by kernel class (kernelClassOf) and order — the
// order of the engines' layer code (vLLM model_executor/models/deepseek_v2.py
// and layers/mla.py; SGLang models/deepseek_v2.py), which every engine
// shares for these ops:
//
//   - attention part, before the first attention kernel: the RMSNorms are
//     input_norm, q_a_norm, kv_a_norm (q_a_norm, kv_a_norm when the
//     previous all-reduce applied the input norm); the GEMMs are
//     fused_qkv_a_proj, q_b_proj and, in decode, w_uk (the absorbed
//     per-head batched GEMM) or, in prefill, kv_b_proj; RoPE and the
//     KV-cache write by name. Every attention kernel (split-KV main kernel,
//     its combine, metadata) is attn.mla_decode (attn.mla_prefill in
//     prefill). After the last attention kernel the GEMMs are w_uv and
//     o_proj in decode, o_proj in prefill. The step's phase comes from the
//     engine range; without one, two GEMMs after attention mean decode and
//     one means prefill.
//   - MoE part (it has grouped GEMMs, router or MoE bookkeeping kernels):
//     the RMSNorm is post_attn_norm; the router's own GEMM kernel, or else
//     the one dense GEMM not paired with an activation, is moe.gate; top-k
//     and the routing bookkeeping (moe_align_block_size, sorting, expert
//     maps) are moe.topk, with the sigmoid scoring kernels right before the
//     first top-k kernel — the schedule has one op for choosing and sorting
//     each token's experts; the first grouped GEMM is experts_gate_up (with
//     the kernel that gathers tokens into expert order), the second
//     experts_down (with the sum over each token's top-k outputs), the
//     activation between them on their stream experts_act; the dense GEMM
//     right before the other activation is shared_gate_up, that activation
//     shared_act, the GEMM right after it shared_down (SGLang runs the
//     shared expert before the router, vLLM after the gate: pairing by the
//     activation finds it in either order).
//   - dense MLP part: post_attn_norm, gate_up (the GEMM before the
//     activation), act, down (the GEMM after it).
//   - embedding: the lookup kernel (an embedding kernel, or PyTorch's
//     indexSelect running F.embedding) and the glue after it (and before
//     it within the same graph replay: the vocab-parallel masking) are
//     embed.lookup; head: final_norm, lm_head (the first GEMM), the first
//     collective after it logits_allgather.
//   - everywhere: the per-token-group FP8 quantization of a dense
//     Linear's input (vLLM's per_token_group_quant kernels, before an FP8
//     block-scaled GEMM) is that Linear's own op, <name>_quant; any other
//     quantization kernel belongs to the GEMM (or attention) that
//     consumes its output, the next one in the part; a split-K reduction
//     to the GEMM before it.
//
// Fused kernels implement several schedule ops; the mapping is explicit
// (AttrKinetoOps) and fixed:
//
//   - an all-reduce + RMSNorm kernel (kernelInfo.fusedNorm) where the norm
//     after it has no kernel of its own: {X.allreduce, the next norm};
//   - one grouped-GEMM kernel for the whole routed MoE:
//     {experts_gate_up, experts_act, experts_down};
//   - two grouped GEMMs without an activation kernel between them: the
//     first is {experts_gate_up, experts_act} (activation in its epilogue);
//   - a RoPE kernel that also writes the cache (kernelInfo.ropeCache) when
//     no cache-write kernel runs: {rope, kv_cache_write}.
//
// Anything else — residual adds, copies, casts, fills, concatenations, the
// sampler, kernels of a part whose counts do not match the rules — keeps
// no op ID (Layer still says which layer it ran in) and is reported by
// name, except PyTorch's generic kernels that run an op which has no
// kernel of its own (RoPE, the cache write, SiLU's multiply, routing and
// the sum over the top-k written in PyTorch, the residual add before a
// norm that does not add it): kineto_glue.go places those by position. A
// kernel-name table (kineto_table.go) then places by name the kernels it
// names, in the layer found here. Mixed prefill+decode steps place only their norms, RoPE, cache
// write, the first two and the last GEMM of the attention part and the
// MLP/MoE part: the schedule has no mixed layer.

// role is what a kernel implements within its layer (or the embedding /
// head): a model.Role, held in a byte per kernel record (its index in
// model.Roles() plus one; roleNone for none).
type role uint8

const roleNone role = 0

// roleOf indexes model.Roles().
var roleOf = func() map[model.Role]role {
	m := map[model.Role]role{}
	for i, r := range model.Roles() {
		m[r] = role(i + 1)
	}
	return m
}()

// roleFor is the kernel record's role of r (roleNone for "").
func roleFor(r model.Role) role { return roleOf[r] }

// model is the model.Role r stands for ("" for roleNone).
func (r role) model() model.Role {
	if r == roleNone {
		return ""
	}
	return model.Roles()[r-1]
}

// outsideLayers: roles of the embedding and the head (Op.Layer -1).
func (r role) outsideLayers() bool { return r != roleNone && !r.model().OfLayer() }

// actQuant is the role of the per-token-group FP8 quantization of Linear
// r's input (model.Role.ActQuant; roleNone: r has none).
func (r role) actQuant() role { return roleFor(r.model().ActQuant()) }

// placed are the roles the placer gives kernels, in the order model's
// block tables lay them for the plain step a serving engine's trace shows
// (TP > 1, one DP group, no DCP, no DSA indexer, shared experts, no input
// quantization ops: those attach to their Linears by kernel, see
// attachHelpers). Reading them from the tables keeps the placement's
// order the builder's.
var placed = placedRoles()

type placerRoles struct {
	embedLookup, embedAllReduce role
	// attnNorms are the RMSNorms before attention: the input norm first,
	// then the latent norms.
	attnNorms     []role
	decode        attnForm // absorbed decode attention
	prefill       attnForm // non-absorbed prefill attention
	rope, kvWrite role
	attnAllReduce role
	// MoE block: post-attention norm, router GEMM, top-k, routed and
	// shared experts (gate/up GEMM, activation, down GEMM), all-reduce.
	moePostNorm, moeGate, moeTopK, moeAllReduce role
	experts, shared                             [3]role
	// Dense MLP: post-attention norm, gate/up, activation, down,
	// all-reduce.
	mlpPostNorm, mlpAllReduce role
	mlp                       [3]role
	// Head: final norm, lm_head, logits gather.
	finalNorm, lmHead, logitsGather role
}

// attnForm is one form of the attention block: the GEMMs before and after
// its attention kernel, and the attention op.
type attnForm struct {
	pre, post []role
	attn      role
}

func placedRoles() placerRoles {
	var pr placerRoles
	plain := model.CondTP | model.CondNoDP | model.CondShared | model.CondMain
	for _, sl := range model.ModEmbedding.Select(plain) {
		switch sl.Kind {
		case model.KindEmbedding:
			pr.embedLookup = roleFor(sl.Role)
		case model.KindCollective:
			pr.embedAllReduce = roleFor(sl.Role)
		}
	}
	form := func(phase model.Cond) attnForm {
		var f attnForm
		seen := false
		for _, sl := range model.ModAttention.Select(plain | phase) {
			r := roleFor(sl.Role)
			switch {
			case sl.Kind == model.KindAttention:
				f.attn, seen = r, true
			case sl.Kind == model.KindGEMM && !seen:
				f.pre = append(f.pre, r)
			case sl.Kind == model.KindGEMM:
				f.post = append(f.post, r)
			case sl.Kind == model.KindNorm && !seen && phase == model.CondDecode:
				pr.attnNorms = append(pr.attnNorms, r)
			case sl.Kind == model.KindCollective:
				pr.attnAllReduce = r
			case sl.Role.RoPE():
				pr.rope = r
			case sl.Role.CacheWrite():
				pr.kvWrite = r
			}
		}
		return f
	}
	pr.decode, pr.prefill = form(model.CondDecode), form(model.CondPrefill)
	// triple is a gate/up GEMM, its activation and the down GEMM of slots.
	triple := func(slots []model.Slot) (t [3]role) {
		for _, sl := range slots {
			switch {
			case sl.Kind == model.KindElementwise:
				t[1] = roleFor(sl.Role)
			case t[0] == roleNone:
				t[0] = roleFor(sl.Role)
			default:
				t[2] = roleFor(sl.Role)
			}
		}
		return t
	}
	var routed, shared []model.Slot
	for _, sl := range model.ModMoE.Select(plain | model.CondDecode) {
		switch {
		case sl.Module == model.ModRoutedExperts:
			routed = append(routed, sl)
		case sl.Module == model.ModSharedExperts:
			shared = append(shared, sl)
		case sl.Kind == model.KindNorm:
			pr.moePostNorm = roleFor(sl.Role)
		case sl.Kind == model.KindGEMM:
			pr.moeGate = roleFor(sl.Role)
		case sl.Kind == model.KindRouter:
			pr.moeTopK = roleFor(sl.Role)
		case sl.Kind == model.KindCollective:
			pr.moeAllReduce = roleFor(sl.Role)
		}
	}
	pr.experts, pr.shared = triple(routed), triple(shared)
	var mlp []model.Slot
	for _, sl := range model.ModDenseMLP.Select(plain) {
		switch sl.Kind {
		case model.KindNorm:
			pr.mlpPostNorm = roleFor(sl.Role)
		case model.KindCollective:
			pr.mlpAllReduce = roleFor(sl.Role)
		default:
			mlp = append(mlp, sl)
		}
	}
	pr.mlp = triple(mlp)
	for _, sl := range model.ModLMHead.Select(plain) {
		switch sl.Kind {
		case model.KindNorm:
			pr.finalNorm = roleFor(sl.Role)
		case model.KindGEMM:
			pr.lmHead = roleFor(sl.Role)
		case model.KindCollective:
			pr.logitsGather = roleFor(sl.Role)
		}
	}
	return pr
}

// opRef is one op of a fused kernel.
type opRef struct {
	layer int16
	role  role
}

// opID is the op ID of (layer, r), shared by every kernel that needs it.
func (kr *kinetoRead) opID(layer int16, r role) string {
	if r.outsideLayers() {
		return string(r.model())
	}
	key := int32(layer)<<8 | int32(r)
	if s, ok := kr.opIDs[key]; ok {
		return s
	}
	var b strings.Builder
	b.WriteByte('L')
	if layer < 10 {
		b.WriteByte('0')
	}
	b.WriteString(strconv.Itoa(int(layer)))
	b.WriteByte('.')
	b.WriteString(string(r.model()))
	s := b.String()
	if kr.opIDs == nil {
		kr.opIDs = map[int32]string{}
	}
	kr.opIDs[key] = s
	return s
}

// placement is the outcome of one step on one device.
type placement struct {
	step   int32
	device int32
	layers int
	note   string
	// arFused, arApart: the step's all-reduces whose kernel applies the
	// RMSNorm after them, and those a norm kernel of its own follows
	// (kinetoRead.arNorms).
	arFused, arApart int
}

func (p *placement) rank(fileRank int64) int {
	switch {
	case fileRank >= 0:
		return int(fileRank)
	case p.device >= 0:
		return int(p.device)
	}
	return 0
}

// placeSteps places the kernels of every (step, device).
func (kr *kinetoRead) placeSteps() {
	for _, ks := range kr.byDevice() {
		groups := map[int32][]int32{}
		var order []int32
		for _, i := range ks {
			s := kr.kernels.at(int(i)).step
			if s < 0 {
				continue
			}
			if _, ok := groups[s]; !ok {
				order = append(order, s)
			}
			groups[s] = append(groups[s], i)
		}
		for _, s := range order {
			g := groups[s]
			p := &placer{kr: kr, ks: g, phase: kr.steps[s].info.phase}
			layers, note := p.place()
			if layers == 0 {
				for _, i := range g { // nothing half-placed
					k := kr.kernels.at(int(i))
					k.role, k.layer, k.fused = roleNone, -1, 0
				}
			} else {
				moved := 0
				kr.placeByName(g, kr.steps[s].info.phase, &moved)
				if moved > 0 {
					if note != "" {
						note += "; "
					}
					note += movedNote(moved)
				}
			}
			fused, apart := kr.arNorms(g)
			kr.placements = append(kr.placements, placement{step: s, device: kr.kernels.at(int(g[0])).device, layers: layers, note: note,
				arFused: fused, arApart: apart})
		}
	}
}

// arNorms counts, among one step's kernels on one device (g, by start
// time), the all-reduces a norm kernel of their own follows next on their
// stream (apart), and those whose kernel can apply the residual add and
// RMSNorm itself (FlashInfer's or TensorRT-LLM's allreduce_fusion) with
// no norm kernel after it (fused): whether the engine that ran the step
// fused the two. An allreduce_fusion kernel that a norm kernel follows ran
// the plain all-reduce pattern.
func (kr *kinetoRead) arNorms(g []int32) (fused, apart int) {
	for j, i := range g {
		k := kr.kernels.at(int(i))
		ki := kr.info(k)
		if ki.class != clsColl || ki.coll != model.AllReduce {
			continue
		}
		next := clsOther
		for _, n := range g[j+1:] {
			nk := kr.kernels.at(int(n))
			if nk.stream != k.stream {
				continue
			}
			if next = kr.info(nk).class; next != clsOther {
				break
			}
		}
		switch {
		case next == clsNorm:
			apart++
		case ki.fusedNorm:
			fused++
		}
	}
	return fused, apart
}

// placer places one step of one device: ks are its kernels by start time.
type placer struct {
	kr    *kinetoRead
	ks    []int32
	phase string
	notes []string
	// cl is each kernel's class: its name's, or what its position says
	// (the kernels of an unfused attention, unfusedAttention).
	cl []kernelClass
}

func (p *placer) k(pos int) *kinetoKernel { return p.kr.kernels.at(int(p.ks[pos])) }
func (p *placer) cls(pos int) kernelClass { return p.cl[pos] }
func (p *placer) ki(pos int) *kernelInfo  { return &p.kr.infos[p.k(pos).name] }
func (p *placer) set(pos, layer int, r role) {
	k := p.k(pos)
	k.role = r
	if r.outsideLayers() {
		k.layer = -1
	} else {
		k.layer = int16(layer)
	}
}

// setFused gives the kernel at pos several ops, the first its own.
func (p *placer) setFused(pos int, ops ...opRef) {
	p.set(pos, int(ops[0].layer), ops[0].role)
	p.kr.fused = append(p.kr.fused, ops)
	p.k(pos).fused = int32(len(p.kr.fused))
}

func (p *placer) note(format string, a ...any) {
	if len(p.notes) < 4 {
		p.notes = append(p.notes, fmt.Sprintf(format, a...))
	}
}

// positions returns the positions in [lo, hi) of kernels of class c.
func (p *placer) positions(lo, hi int, c kernelClass) []int {
	var v []int
	for i := lo; i < hi; i++ {
		if p.cls(i) == c {
			v = append(v, i)
		}
	}
	return v
}

// layerSeg is one decoder layer: [attnLo, attnHi) the attention part,
// [ffnLo, ffnHi) the MLP/MoE part; the all-reduces that end them (-1: none).
type layerSeg struct {
	attnLo, attnHi, attnAR int
	ffnLo, ffnHi, ffnAR    int
}

// place recovers the layers and sets every kernel's role; it returns the
// number of layers (0: not placed) and why not, or the notes on parts it
// could not place.
func (p *placer) place() (int, string) {
	n := len(p.ks)
	p.cl = make([]kernelClass, n)
	for i := range n {
		p.cl[i] = p.kr.infos[p.k(i).name].class
	}
	p.unfusedAttention()
	var coll, attn []int
	for i := 0; i < n; i++ {
		switch p.cls(i) {
		case clsColl:
			coll = append(coll, i)
		case clsAttn:
			attn = append(attn, i)
		}
	}
	if len(attn) == 0 {
		return 0, "no attention kernel: no decoder layer to recover"
	}
	var (
		layers         []layerSeg
		embedLo        = 0
		embedHi        = 0
		embedAR        = -1
		headLo, headHi = n, n
		ok             bool
		why            string
	)
	if len(coll) >= 2 {
		layers, embedHi, embedAR, headLo, ok, why = p.segmentByCollectives(coll, attn)
	} else {
		layers, embedHi, headLo, ok, why = p.segmentByNorms()
	}
	if !ok {
		return 0, why
	}
	if len(layers) < 2 {
		return 0, fmt.Sprintf("%d decoder layer found; at least 2 are needed to recognise the layer pattern", len(layers))
	}
	p.embedPart(embedLo, embedHi, embedAR)
	for li := range layers {
		L := &layers[li]
		end := L.ffnHi
		if L.ffnAR >= 0 {
			end = L.ffnAR + 1
		}
		for i := L.attnLo; i < end; i++ {
			p.k(i).layer = int16(li) // the layer it ran in, placed or not
		}
		isMoE := p.isMoE(L.ffnLo, L.ffnHi)
		// Norms the all-reduce before a part applies (allreduce_fusion).
		inputCovered := false
		if prev := p.prevAR(layers, li, embedAR); prev >= 0 && p.ki(prev).fusedNorm && len(p.positions(L.attnLo, p.firstAttn(L.attnLo, L.attnHi), clsNorm)) == 2 {
			inputCovered = true
		}
		postCovered := L.attnAR >= 0 && p.ki(L.attnAR).fusedNorm && len(p.positions(L.ffnLo, L.ffnHi, clsNorm)) == 0
		p.attnPart(L.attnLo, L.attnHi, li, inputCovered)
		p.ffnPart(L.ffnLo, L.ffnHi, li, isMoE, postCovered)
		if L.attnAR >= 0 {
			if postCovered {
				p.setFused(L.attnAR, opRef{int16(li), placed.attnAllReduce}, opRef{int16(li), postNormRole(isMoE)})
			} else {
				p.set(L.attnAR, li, placed.attnAllReduce)
			}
		}
		if L.ffnAR >= 0 {
			r := placed.mlpAllReduce
			if isMoE {
				r = placed.moeAllReduce
			}
			next := opRef{role: roleNone}
			if p.ki(L.ffnAR).fusedNorm {
				if li+1 < len(layers) {
					N := &layers[li+1]
					if len(p.positions(N.attnLo, p.firstAttn(N.attnLo, N.attnHi), clsNorm)) == 2 {
						next = opRef{int16(li + 1), placed.attnNorms[0]}
					}
				} else if len(p.positions(headLo, headHi, clsNorm)) == 0 {
					next = opRef{-1, placed.finalNorm}
				}
			}
			if next.role != roleNone {
				p.setFused(L.ffnAR, opRef{int16(li), r}, next)
			} else {
				p.set(L.ffnAR, li, r)
			}
		}
	}
	finalCovered := false
	if last := layers[len(layers)-1].ffnAR; last >= 0 && p.ki(last).fusedNorm && len(p.positions(headLo, headHi, clsNorm)) == 0 {
		finalCovered = true
	}
	p.headPart(headLo, headHi, finalCovered)
	p.residualAdds()
	return len(layers), strings.Join(p.notes, "; ")
}

func postNormRole(isMoE bool) role {
	if isMoE {
		return placed.moePostNorm
	}
	return placed.mlpPostNorm
}

// prevAR is the all-reduce before layer li's attention part.
func (p *placer) prevAR(layers []layerSeg, li, embedAR int) int {
	if li == 0 {
		return embedAR
	}
	return layers[li-1].ffnAR
}

// firstAttn is the position of the first attention kernel in [lo, hi), hi if none.
func (p *placer) firstAttn(lo, hi int) int {
	for i := lo; i < hi; i++ {
		if p.cls(i) == clsAttn {
			return i
		}
	}
	return hi
}

// segmentByCollectives cuts a step at its collectives (see the file comment).
func (p *placer) segmentByCollectives(coll, attn []int) (layers []layerSeg, embedHi, embedAR, headLo int, ok bool, why string) {
	n := len(p.ks)
	a0, aLast := attn[0], attn[len(attn)-1]
	// hasAttn in O(log n): attn is sorted.
	hasAttn := func(lo, hi int) bool {
		i, _ := slices.BinarySearch(attn, lo)
		return i < len(attn) && attn[i] < hi
	}
	ci := 0
	embedAR = -1
	for ci < len(coll) && coll[ci] < a0 {
		embedAR = coll[ci]
		ci++
	}
	start := 0
	if embedAR >= 0 {
		embedHi, start = embedAR, embedAR+1
	} else {
		// No all-reduce after the embedding: the lookup ends the embedding
		// at the next norm (layer 0's input norm).
		embedHi = p.splitEmbedding(0, a0)
		start = embedHi
	}
	for start <= aLast {
		if ci >= len(coll) {
			return nil, 0, 0, 0, false, fmt.Sprintf("layer %d: attention without the all-reduce that ends the attention block", len(layers))
		}
		c := coll[ci]
		if !hasAttn(start, c) {
			return nil, 0, 0, 0, false, fmt.Sprintf("layer %d: a collective between layers holds no attention kernel before it (%d collectives for %d attention kernels: not two all-reduces per layer)", len(layers), len(coll), len(attn))
		}
		ci++
		if ci >= len(coll) {
			return nil, 0, 0, 0, false, fmt.Sprintf("layer %d: no all-reduce ends the MLP/MoE block", len(layers))
		}
		c2 := coll[ci]
		if hasAttn(c+1, c2) {
			return nil, 0, 0, 0, false, fmt.Sprintf("layer %d: attention kernels in the MLP/MoE block (collectives do not come two per layer)", len(layers))
		}
		layers = append(layers, layerSeg{attnLo: start, attnHi: c, attnAR: c, ffnLo: c + 1, ffnHi: c2, ffnAR: c2})
		ci++
		start = c2 + 1
	}
	return layers, embedHi, embedAR, min(start, n), true, ""
}

// splitEmbedding returns where layer 0 starts in [lo, hi) when no
// all-reduce marks it: the first norm after the lookup, or lo when no
// lookup runs there.
func (p *placer) splitEmbedding(lo, hi int) int {
	anchor := p.lookupAnchor(lo, hi)
	if anchor < 0 {
		return lo
	}
	for i := anchor + 1; i < hi; i++ {
		if p.cls(i) == clsNorm {
			return i
		}
	}
	return anchor + 1
}

// segmentByNorms cuts a step without collectives at the norms around its
// attention runs (see the file comment).
func (p *placer) segmentByNorms() (layers []layerSeg, embedHi, headLo int, ok bool, why string) {
	n := len(p.ks)
	var runs [][2]int
	for i := 0; i < n; i++ {
		if p.cls(i) != clsAttn {
			continue
		}
		j := i + 1
		for j < n && p.cls(j) == clsAttn {
			j++
		}
		runs = append(runs, [2]int{i, j})
		i = j - 1
	}
	norms := p.positions(0, n, clsNorm)
	nextNorm := func(from int) int {
		i, _ := slices.BinarySearch(norms, from)
		if i < len(norms) {
			return norms[i]
		}
		return -1
	}
	first := -1
	for _, x := range norms {
		if x < runs[0][0] {
			first = x
			break
		}
	}
	if first < 0 {
		return nil, 0, 0, false, "no collectives and no RMSNorm before the first attention kernel: layers not recognised"
	}
	embedHi = first
	start := first
	for r := range runs {
		n1 := nextNorm(runs[r][1])
		n2 := -1
		if n1 >= 0 {
			n2 = nextNorm(n1 + 1)
		}
		if n1 < 0 || n2 < 0 || (r+1 < len(runs) && n2 > runs[r+1][0]) {
			return nil, 0, 0, false, fmt.Sprintf("layer %d: no collectives, and not two RMSNorms between its attention and the next layer's", r)
		}
		layers = append(layers, layerSeg{attnLo: start, attnHi: n1, attnAR: -1, ffnLo: n1, ffnHi: n2, ffnAR: -1})
		start = n2
	}
	return layers, embedHi, start, true, ""
}

// isMoE: the part runs routed experts.
func (p *placer) isMoE(lo, hi int) bool {
	for i := lo; i < hi; i++ {
		switch p.cls(i) {
		case clsMoEGEMM, clsRouter, clsRouterGEMM, clsMoEFinalize, clsMoEPermute:
			return true
		}
	}
	return false
}

// lookupAnchor is the position of the embedding lookup in [lo, hi), the
// part before the first layer: an embedding kernel or an index_select,
// else the first indexed gather (PyTorch runs F.embedding's index_select
// as its vectorized gather kernel for some shapes: a real trace at batch
// 32); -1 when none runs there.
func (p *placer) lookupAnchor(lo, hi int) int {
	gather := -1
	for i := lo; i < hi; i++ {
		if c := p.cls(i); c == clsEmbed || p.ki(i).lookup {
			return i
		}
		if gather < 0 && p.cls(i) == clsOther && p.ki(i).gather {
			gather = i
		}
	}
	return gather
}

// embedPart places the embedding: the lookup and the glue after it (and
// before it in the same graph replay), and the all-reduce.
func (p *placer) embedPart(lo, hi, ar int) {
	anchor := p.lookupAnchor(lo, hi)
	if anchor >= 0 {
		ak := p.k(anchor)
		for i := lo; i < hi; i++ {
			c := p.cls(i)
			if c != clsEmbed && c != clsOther {
				continue
			}
			if i < anchor {
				k := p.k(i)
				if k.flags&kfGraph == 0 || ak.flags&kfGraph == 0 || k.corr != ak.corr {
					continue
				}
			}
			p.set(i, -1, placed.embedLookup)
		}
	}
	if ar >= 0 {
		p.set(ar, -1, placed.embedAllReduce)
	}
}

// attnPart places layer's attention part [lo, hi).
func (p *placer) attnPart(lo, hi, layer int, inputCovered bool) {
	attn := p.positions(lo, hi, clsAttn)
	if len(attn) == 0 {
		p.note("L%02d: no attention kernel in the attention block", layer)
		return
	}
	first, last := attn[0], attn[len(attn)-1]
	pre := p.positions(lo, first, clsGEMM)
	post := p.positions(last+1, hi, clsGEMM)
	mixed := p.phase == PhaseMixed || len(p.positions(first, last, clsGEMM)) > 0
	decode := p.phase == PhaseDecode || (p.phase == "" && len(post) == 2)
	prefill := p.phase == PhasePrefill || (p.phase == "" && len(post) == 1)

	// Norms before attention.
	norms := p.positions(lo, first, clsNorm)
	want := placed.attnNorms
	if inputCovered {
		want = want[1:]
	}
	p.assign(norms, want, layer, "L%02d: %d RMSNorm kernels before attention, the layer has %d", layer)
	// RoPE and the cache write, by name.
	kv := p.positions(lo, hi, clsKVWrite)
	for _, i := range kv {
		p.set(i, layer, placed.kvWrite)
	}
	for _, i := range p.positions(lo, hi, clsRope) {
		if len(kv) == 0 && p.ki(i).ropeCache {
			p.setFused(i, opRef{int16(layer), placed.rope}, opRef{int16(layer), placed.kvWrite})
		} else {
			p.set(i, layer, placed.rope)
		}
	}
	switch {
	case mixed:
		// Prefill and decode attention in one layer: only what both share.
		// The projections both forms run: the first two GEMMs before
		// attention and the last one after it.
		shared := placed.decode
		if len(pre) >= 2 {
			p.set(pre[0], layer, shared.pre[0])
			p.set(pre[1], layer, shared.pre[1])
		}
		if len(post) >= 1 {
			p.set(post[len(post)-1], layer, shared.post[len(shared.post)-1])
		}
		p.note("L%02d: mixed prefill+decode attention left unplaced (the schedule has no mixed layer)", layer)
	case decode || prefill:
		f := placed.decode
		if !decode {
			f = placed.prefill
		}
		if down := p.unfusedDownProj(pre, norms, f); down != nil {
			// q_a and kv_a run as two GEMMs: both are the fused op's.
			var rest []int
			for _, g := range pre {
				if g == down[0] || g == down[1] {
					p.set(g, layer, f.pre[0])
				} else {
					rest = append(rest, g)
				}
			}
			pre = rest
			p.assign(pre, f.pre[1:], layer, "L%02d: %d GEMM kernels before attention, the layer has %d", layer)
		} else {
			p.assign(pre, f.pre, layer, "L%02d: %d GEMM kernels before attention, the layer has %d", layer)
		}
		p.assign(post, f.post, layer, "L%02d: %d GEMM kernels after attention, the layer has %d", layer)
		for _, i := range attn {
			p.set(i, layer, f.attn)
		}
	default:
		p.note("L%02d: %d GEMM kernels after attention: neither decode (2) nor prefill (1)", layer, len(post))
	}
	p.attachHelpers(lo, hi)
	p.glueAttn(lo, hi, layer)
}

// assign gives the kernels at pos the roles want, one to one, or notes the
// mismatch (format gets the layer, the count found and the count wanted).
func (p *placer) assign(pos []int, want []role, layer int, format string, a ...any) {
	if len(pos) != len(want) {
		p.note(format, append(a, len(pos), len(want))...)
		return
	}
	for j, i := range pos {
		p.set(i, layer, want[j])
	}
}

// ffnPart places layer's MoE or dense MLP part [lo, hi).
func (p *placer) ffnPart(lo, hi, layer int, isMoE, postCovered bool) {
	norms := p.positions(lo, hi, clsNorm)
	switch {
	case postCovered:
	case len(norms) == 1:
		p.set(norms[0], layer, postNormRole(isMoE))
	default:
		p.note("L%02d: %d RMSNorm kernels in the MLP/MoE block, the layer has 1", layer, len(norms))
	}
	acts := p.positions(lo, hi, clsAct)
	gemms := p.positions(lo, hi, clsGEMM)
	used := map[int]bool{}
	if !isMoE {
		if len(acts) != 1 {
			p.note("L%02d: %d activation kernels in the dense MLP, the layer has 1", layer, len(acts))
			p.attachHelpers(lo, hi)
			return
		}
		p.pairAround(acts[0], gemms, used, layer, placed.mlp)
		p.attachHelpers(lo, hi)
		p.glueActs(lo, hi, acts)
		return
	}
	moe := p.positions(lo, hi, clsMoEGEMM)
	expertAct := -1
	switch len(moe) {
	case 2:
		p.set(moe[0], layer, placed.experts[0])
		p.set(moe[1], layer, placed.experts[2])
		for _, a := range acts {
			if a > moe[0] && a < moe[1] && p.k(a).stream == p.k(moe[0]).stream {
				expertAct = a
				p.set(a, layer, placed.experts[1])
				break
			}
		}
		if expertAct < 0 {
			p.setFused(moe[0], opRef{int16(layer), placed.experts[0]}, opRef{int16(layer), placed.experts[1]})
		}
	case 1:
		p.setFused(moe[0], opRef{int16(layer), placed.experts[0]}, opRef{int16(layer), placed.experts[1]}, opRef{int16(layer), placed.experts[2]})
	default:
		p.note("L%02d: %d grouped-GEMM kernels in the MoE block, want 1 (fused) or 2", layer, len(moe))
	}
	routers := p.positions(lo, hi, clsRouter)
	for _, i := range routers {
		p.set(i, layer, placed.moeTopK)
	}
	if len(routers) > 0 {
		// The router's scoring (sigmoid) right before the top-k.
		for i := routers[0] - 1; i >= lo && p.cls(i) == clsOther && p.ki(i).scoring; i-- {
			p.set(i, layer, placed.moeTopK)
		}
	}
	if len(moe) > 0 {
		for _, i := range p.positions(lo, hi, clsMoEPermute) {
			p.set(i, layer, placed.experts[0])
		}
		for _, i := range p.positions(lo, hi, clsMoEFinalize) {
			p.set(i, layer, placed.experts[2])
		}
	}
	routerGEMM := p.positions(lo, hi, clsRouterGEMM)
	for _, i := range routerGEMM {
		p.set(i, layer, placed.moeGate)
	}
	// The shared expert: the activation that is not the experts'.
	var shared []int
	for _, a := range acts {
		if a != expertAct {
			shared = append(shared, a)
		}
	}
	switch len(shared) {
	case 0:
	case 1:
		p.pairAround(shared[0], gemms, used, layer, placed.shared)
	default:
		p.note("L%02d: %d activation kernels besides the experts', the layer has 1 shared expert", layer, len(shared))
	}
	var rest []int
	for _, g := range gemms {
		if !used[g] {
			rest = append(rest, g)
		}
	}
	switch {
	case len(routerGEMM) == 0 && len(rest) == 1:
		p.set(rest[0], layer, placed.moeGate)
	case len(rest) > 0:
		p.note("L%02d: %d dense GEMM kernels in the MoE block not paired with the shared expert's activation (want the router gate only)", layer, len(rest))
	}
	p.attachHelpers(lo, hi)
	p.glueActs(lo, hi, acts)
	p.glueMoE(lo, hi, layer, moe)
}

// pairAround places an activation with the unused GEMM right before it
// and the one right after it, as roles (gate/up, activation, down).
func (p *placer) pairAround(act int, gemms []int, used map[int]bool, layer int, roles [3]role) {
	before, after := -1, -1
	for _, g := range gemms {
		if used[g] {
			continue
		}
		if g < act {
			before = g
		} else if after < 0 {
			after = g
		}
	}
	if before < 0 || after < 0 {
		p.note("L%02d: an activation without a GEMM on each side", layer)
		return
	}
	used[before], used[after] = true, true
	p.set(before, layer, roles[0])
	p.set(act, layer, roles[1])
	p.set(after, layer, roles[2])
}

// headPart places the final norm, the LM head and the logits gather.
func (p *placer) headPart(lo, hi int, finalCovered bool) {
	from := lo
	if !finalCovered {
		for i := lo; i < hi; i++ {
			if p.cls(i) == clsNorm {
				p.set(i, -1, placed.finalNorm)
				from = i + 1
				break
			}
		}
	}
	lm := -1
	for i := from; i < hi; i++ {
		if p.cls(i) == clsGEMM {
			lm = i
			p.set(i, -1, placed.lmHead)
			break
		}
	}
	if lm < 0 {
		return
	}
	for i := lm + 1; i < hi; i++ {
		if p.cls(i) == clsColl {
			p.set(i, -1, placed.logitsGather)
			break
		}
	}
	// Quantization and split-K kernels of the LM head.
	p.attachHelpers(lo, hi)
}

// attachHelpers gives each quantization kernel in [lo, hi) the op of the
// next GEMM or attention kernel placed after it (a per-token-group FP8
// quantization before a dense Linear: that Linear's <name>_quant op), and
// each split-K reduction the op of the GEMM placed before it.
func (p *placer) attachHelpers(lo, hi int) {
	// One pass each way, remembering the nearest placed consumer.
	next := -1
	for i := hi - 1; i >= lo; i-- {
		c := p.cls(i)
		if (c == clsGEMM || c == clsMoEGEMM || c == clsRouterGEMM || c == clsAttn) && p.k(i).role != roleNone {
			next = i
		} else if c == clsPrep && p.k(i).role == roleNone && next >= 0 {
			p.copyOp(i, next)
		} else if c == clsQuant && p.k(i).role == roleNone && next >= 0 {
			if q := p.k(next).role.actQuant(); q != roleNone && p.ki(i).groupQuant && p.k(next).fused == 0 {
				p.set(i, int(p.k(next).layer), q)
			} else {
				p.copyOp(i, next)
			}
		}
	}
	prev := -1
	for i := lo; i < hi; i++ {
		c := p.cls(i)
		if (c == clsGEMM || c == clsMoEGEMM || c == clsRouterGEMM) && p.k(i).role != roleNone {
			prev = i
		} else if c == clsSplitK && p.k(i).role == roleNone && prev >= 0 {
			p.copyOp(i, prev)
		}
	}
}

// copyOp gives the kernel at i the op(s) of the kernel at j.
func (p *placer) copyOp(i, j int) {
	src := p.k(j)
	dst := p.k(i)
	dst.role, dst.layer, dst.fused = src.role, src.layer, src.fused
}
