package model

// The memory a speculative method adds on each GPU: the drafter's weights
// and its KV cache per token of context (spec.go). MTP's layers are
// counted by Arch.WeightMemory and kvBytesPerToken (withMTP); this file covers
// the EAGLE-3 head and the draft model. ngram and suffix add nothing on
// the GPU.

// drafterWeightBytes is the drafter's weights on one GPU of plan p for a
// step of w under o: an EAGLE-3 head at the target's TP (its embedding
// and LM head vocab-parallel, fc and the fused q_a/kv_a down-projection
// replicated, q_b, kv_b, o_proj and the dense MLP split, as vLLM's
// DeepseekV2Eagle3Model lays them), or the draft model's Arch.WeightMemory at
// its TP; 0 for the other methods.
func drafterWeightBytes(p Plan, w Workload, o BuildOptions) float64 {
	d := o.Spec.Drafter
	switch o.Spec.MethodFor(w) {
	case SpecEagle3:
		if d == nil || d.eagle3 == nil {
			return 0
		}
		p = p.Normalized()
		tp := float64(p.TP)
		lp := d.layerParams()
		h, e := float64(d.Hidden), d.eagle3
		bpv := d.Quant.Base.BytesPerValue()
		fc := float64(e.AuxLayers*e.TargetHidden) * h
		// Layer 0's fused q_a/kv_a reads [embedding, hidden]: twice the
		// width of lp.attnReplicated's input.
		attn := 2*lp.attnReplicated + lp.attnSharded/tp
		mlp := lp.dense / tp
		emb := float64(ceilDiv(d.Vocab, p.TP)) * h
		head := float64(ceilDiv(e.DraftVocab, p.TP)) * h
		norms := float64(d.Layers)*lp.norms + 2*h
		return (fc + float64(d.Layers)*(attn+mlp) + emb + head + norms) * bpv
	case SpecDraftModel:
		if d == nil {
			return 0
		}
		tp := o.Spec.DraftTP
		if tp == 0 {
			tp = p.Normalized().TP
		}
		var ws [numWeightComponents]ComponentMemory
		weightMemory(&ws, d, Plan{TP: tp}, false)
		return totalBytes(ws[:])
	}
	return 0
}

// drafterKVBytesPerToken is the drafter's KV cache per token of context
// on one GPU under plan p: its layers' latents (kv_lora + rope values
// each) in the target's KV dtype kv, replicated on every rank of its group
// like the target's and split by tokens over DCP as the target's is: vLLM
// keeps a drafter's attention layers in the KV cache groups of the
// target's, whose slot mapping under decode context parallelism stores
// token i on DCP rank i mod DCP (BlockTable.compute_slot_mapping's
// "virtual block" of block_size x dcp_world_size), for an EAGLE-3 head or
// a draft model as for the MTP layers kvBytesPerToken already divides; 0
// for MTP (kvBytesPerToken counts its layers), ngram and suffix.
func drafterKVBytesPerToken(p Plan, w Workload, o BuildOptions, kv Dtype) float64 {
	d := o.Spec.Drafter
	switch o.Spec.MethodFor(w) {
	case SpecEagle3, SpecDraftModel:
		if d == nil {
			return 0
		}
		return float64(d.Layers) * float64(d.KVLatentDim()) * kv.BytesPerValue() / float64(p.Normalized().DCP)
	}
	return 0
}

// withMTPLayers reports whether the step loads the checkpoint's MTP
// layers: MTP speculative decoding on a model that has them.
func withMTPLayers(a *Arch, w Workload, o BuildOptions) bool {
	return a.MTPLayers > 0 && o.Spec.MethodFor(w) == SpecMTP
}
