package model

import "strconv"

// The ops of a speculative step after the target's head (spec.go): the
// rejection sampler, then the draft passes of the method. Op IDs:
//
//	spec.rejection_sample                 the rejection sampler
//	mtp.s{i}.{role}                       MTP pass i (mtp.s0.mtp.eh_proj, its layer's mtp.s0.attn.mla_decode)
//	eagle.s{i}.{role}                     EAGLE-3 pass i: eagle.s0.eagle.fc (first pass), eagle.s0.eagle.enorm,
//	                                      eagle.s0.eagle.hnorm, eagle.s0.embed.lookup, eagle.s0.attn.*,
//	                                      eagle.s0.mlp.*, eagle.s0.head.lm_head
//	draft.s{i}.L{ll}.{role}, draft.s{i}.embed.*, draft.s{i}.head.*
//	                                      draft model pass i, its layer ll
//
// Every op of a pass has Op.Block "mtp", "eagle" or "draft". Op.Layer is
// the MTP layer's index (num_hidden_layers + j), the EAGLE head's layer
// draftLayerBase(target), or a draft model layer's draftLayerBase + ll:
// layers of their own, past the target's, so no cache or layer bar is
// shared with a target layer.
//
// Tokens per pass: the first over every token the verify pass ran (T per
// attention group, its CUDA-graph padding included; attention over the
// real sequences' tokens only), each later one over
// one token per sequence (Spec.TopK per sequence in a tree); each head
// computes logits for one token per sequence in the first pass and for
// every token of a later pass. In an engine iteration the sequences are
// its requests (decoding and prefilling: the drafter proposes for each),
// and a later pass decodes over each request's cache.

// specPasses lays the speculative ops of a step after the target's head.
func (b *builder) specPasses() {
	m := b.o.Spec.MethodFor(b.w)
	if m == "" {
		return
	}
	if b.w.Phase == Decode {
		b.block(b.siteConds(&site{prefix: "", layer: -1, tokens: b.outTokens}), ModSpecVerify, specTable)
	}
	steps := b.o.Spec.DraftSteps(b.w)
	switch m {
	case SpecMTP:
		b.mtpPasses(steps)
	case SpecEagle3:
		b.eaglePasses(steps)
	case SpecDraftModel:
		b.draftModelPasses(steps)
	}
	b.pass = -1
}

// passSeqs is the sequences a draft pass drafts for: the step's real ones (per
// attention group), an iteration's requests.
func (b *builder) passSeqs() int64 {
	if b.it != nil {
		return int64(b.it.Requests())
	}
	return int64(b.bg)
}

// laterPass sets the builder up for a draft pass after the first: in an
// engine iteration, attention becomes decode of branches tokens per
// request over its cache after this step. The caller puts b.it back once
// the pass is laid (a restoring closure would move the builder to the
// heap, and a sweep builds thousands of schedules).
func (b *builder) laterPass(branches int) {
	it := b.it
	if it == nil {
		return
	}
	kv := it.DecodeKVTokens + it.PrefillPrefixTokens + it.PrefillTokens
	req := it.Requests()
	b.it = &Iteration{DecodeSeqs: req, DecodeKVTokens: max(kv, int64(req)), SpecTokens: branches - 1, KVDtype: it.KVDtype}
}

// mtpPasses lays the MTP draft passes (vLLM v1 spec_decode/eagle.py
// proposer with DeepSeek's MTP module): the first over every token the
// target model just processed, the following over one token per sequence
// (topk in a tree), each an MTP layer (in turn, when the checkpoint has
// several) with its own embedding, enorm/hnorm, eh_proj and shared head.
func (b *builder) mtpPasses(steps int) {
	a := b.a
	mtpD := func(c Component) Dtype { return a.Quant.mtpDtype(c) }
	seqs, br := b.passSeqs(), int64(b.o.Spec.Branches())
	for i := 0; i < steps; i++ {
		t, logits, pad := seqs*br, seqs*br, int64(0)
		saved := b.it
		if i == 0 {
			t, logits, pad = b.tokens, 0, b.d.PadTokens
		} else {
			b.laterPass(int(br))
		}
		pre := "mtp.s" + strconv.Itoa(i) + "."
		ml := a.Layers + i%a.MTPLayers
		b.pass = i
		s := b.siteConds(&site{prefix: pre, layer: ml, mtp: true, pass: passMTP, tokens: t, pad: pad, seqs: int64(b.bg), dtype: mtpD,
			prefill: b.w.Phase == Prefill && i == 0, logits: logits})
		pass := b.open(ModMTP, s)
		b.embed(pre, ml, true, t, mtpD)
		b.block(s, "", mtpTable)
		b.layer(s, false)
		hs := *s
		hs.prefix = pre
		b.block(b.siteConds(&hs), ModLMHead, headTable)
		b.close(pass)
		b.it = saved
	}
}

// eaglePasses lays the EAGLE-3 head's draft passes (vLLM
// deepseek_eagle3.py, Eagle3DeepseekV2ForCausalLM, at the target's TP):
// the first pass combines the target's auxiliary hidden states (eagle.fc,
// replicated); every pass embeds its tokens (vocab-parallel, with its
// all-reduce), normalizes the embedding and the carried hidden state,
// runs the head's decoder layer (MLA over the head's own latent cache,
// its attention reading both, then a dense MLP, each with its
// all-reduce), its final norm and its LM head over the draft vocabulary,
// whose per-rank argmax is gathered.
func (b *builder) eaglePasses(steps int) {
	d := b.o.Spec.Drafter
	c := b.sub(d, Plan{TP: b.p.TP})
	base := draftLayerBase(b.a)
	dt := func(cp Component) Dtype { return d.Quant.Dtype(cp) }
	seqs, br := b.passSeqs(), int64(b.o.Spec.Branches())
	for i := 0; i < steps; i++ {
		saved := c.it
		t, pad, logits := b.draftPassTokens(c, i, seqs, br)
		pre := "eagle.s" + strconv.Itoa(i) + "."
		c.pass = i
		s := c.siteConds(&site{prefix: pre, layer: base, pass: passEagle, first: i == 0, tokens: t, pad: pad, seqs: int64(b.bg), dtype: dt, logits: logits})
		pass := c.open(ModEagle3, s)
		c.block(s, "", eagleTable)
		c.block(c.siteConds(&site{prefix: pre, layer: base, pass: passEagle, tokens: t, dtype: dt}), ModEmbedding, embeddingTable)
		for l := 0; l < d.Layers; l++ {
			ls := *s
			ls.layer, ls.eagleIn = base+l, l == 0
			if d.Layers > 1 {
				ls.prefix = pre + layerPrefix(l)
			}
			c.layer(c.siteConds(&ls), true)
		}
		c.block(c.siteConds(&site{prefix: pre, layer: base, pass: passEagle, tokens: t, dtype: dt, logits: logits}), ModLMHead, headTable)
		c.close(pass)
		c.it = saved
	}
	b.merge(c, false)
}

// draftPassTokens is draft pass i's tokens, the CUDA-graph padding among
// them and its logits rows: the first pass runs over every token the
// verify pass ran (extending the drafter's own KV cache; its padding
// attends to nothing) and samples one token per sequence; each later pass
// runs br branches per sequence, c set up for it by laterPass (the caller
// puts c.it back when the pass is laid).
func (b *builder) draftPassTokens(c *builder, i int, seqs, br int64) (tokens, pad, logits int64) {
	if i == 0 {
		return b.tokens, b.d.PadTokens, seqs
	}
	c.laterPass(int(br))
	return seqs * br, 0, seqs * br
}

// draftModelPasses lays a draft model's passes (vLLM's draft_model
// proposer, SGLang's STANDALONE worker): each pass is the whole draft
// model (embedding, every layer, final norm, LM head and the logits'
// gather) at the draft TP, its collectives over groups of that many
// ranks.
func (b *builder) draftModelPasses(steps int) {
	d := b.o.Spec.Drafter
	dtp := b.o.Spec.DraftTP
	if dtp == 0 {
		dtp = b.p.TP
	}
	b.draftTP = dtp
	c := b.sub(d, Plan{TP: dtp})
	base := draftLayerBase(b.a)
	dt := func(cp Component) Dtype { return d.Quant.Dtype(cp) }
	seqs, br := b.passSeqs(), int64(b.o.Spec.Branches())
	for i := 0; i < steps; i++ {
		saved := c.it
		t, pad, logits := b.draftPassTokens(c, i, seqs, br)
		pre := "draft.s" + strconv.Itoa(i) + "."
		c.pass = i
		ps := &site{prefix: pre, layer: base, pass: passDraft, tokens: t, dtype: dt}
		pass := c.open(ModDraftPass, ps)
		c.block(c.siteConds(ps), ModEmbedding, embeddingTable)
		for l := 0; l < d.Layers; l++ {
			ls := &site{prefix: pre + layerPrefix(l), layer: base + l, pass: passDraft, tokens: t, pad: pad, seqs: int64(b.bg), dtype: dt}
			c.layer(c.siteConds(ls), l < d.DenseLayers)
		}
		c.block(c.siteConds(&site{prefix: pre, layer: base, pass: passDraft, tokens: t, dtype: dt, logits: logits}), ModLMHead, headTable)
		c.close(pass)
		c.it = saved
	}
	b.merge(c, dtp != b.p.TP)
}

// sub returns a builder that lays ops of drafter d under plan dp into b's
// buffers (b.merge hands them back).
func (b *builder) sub(d *Arch, dp Plan) *builder {
	c := *b
	c.a, c.p = d, dp.Normalized()
	c.sparse = d.HasIndexer() && !b.o.DenseDSA
	return &c
}

// merge takes back the buffers c laid ops into; draftGroups moves c's
// tensor-parallel collectives to the draft model's groups.
func (b *builder) merge(c *builder, draftGroups bool) {
	if draftGroups {
		for i := len(b.kinds); i < len(c.kinds); i++ {
			if c.kinds[i] == gTP {
				c.kinds[i] = gDraft
			}
		}
	}
	b.tmpl, b.kinds, b.moeOf, b.idBuf, b.idEnd, b.mods, b.shapes = c.tmpl, c.kinds, c.moeOf, c.idBuf, c.idEnd, c.mods, c.shapes
	b.pass = c.pass
}

// headVocab is the rows of the LM head the builder lays: an EAGLE-3
// head's draft vocabulary, else the model's.
func (b *builder) headVocab() int {
	if b.a.IsEagle3Head() {
		return b.a.eagle3.DraftVocab
	}
	return b.a.Vocab
}

// fillSpec fills the EAGLE-3 input ops and the rejection sampler.
func (b *builder) fillSpec(s *site, op *Op, r Role) {
	a := b.a
	t := s.tokens
	switch r {
	case RoleEagleFC:
		// ReplicatedLinear AuxLayers x target hidden -> hidden, in the
		// head's dtype, over every verified token.
		e := a.eagle3
		b.gemm(op, t, int64(a.Hidden), int64(e.AuxLayers*e.TargetHidden), 1, a.Quant.Base)
	case RoleEagleENorm, RoleEagleHNorm:
		b.norm(op, t, a.Hidden, false)
	case RoleSpecRejectSample:
		// vLLM v1's RejectionSampler over the verify logits (T tokens x
		// vocabulary, gathered in bf16): the target probabilities in fp32,
		// then the accept test of each draft and the recovered or bonus
		// token. Per logit: read it, write and read back its probability;
		// about 5 FLOPs (max, exp, sum, divide, compare).
		n := float64(t) * float64(a.Vocab)
		elementwise(op, 5*n, n*(actBytes+4), n*4)
		op.M, op.N = t, int64(a.Vocab)
	}
}
