package model

import (
	"fmt"
	"math"
	"strings"
)

// Params are parameter counts of an architecture (numbers of values, not
// bytes).
type Params struct {
	// Total counts the main model: embedding, every decoder layer, final
	// norm, lm_head (once if tied). It excludes MTP layers, as DeepSeek
	// quotes "671B" for V3's main model.
	Total float64
	// Active counts the parameters one token uses: everything in Total
	// except the routed experts it is not routed to (top_k of
	// n_routed_experts per MoE layer), embedding and lm_head included.
	Active float64
	// MTP counts the MTP layers: a full MoE decoder layer, eh_proj
	// (2 x hidden -> hidden), enorm, hnorm, the shared-head norm, and the
	// layer's own embedding and head copies as the checkpoints store them
	// (DeepSeek-V3's 14B MTP module).
	MTP float64
	// ByComponent is Total (plus MTP under CompMTP) split by component, in
	// Components order.
	ByComponent []ComponentParams
}

// ComponentParams is the parameter count of one component.
type ComponentParams struct {
	Component Component
	Params    float64
}

// layerParams are the parameter counts of one decoder layer's parts.
type layerParams struct {
	attnReplicated float64 // fused q_a + kv_a (replicated under TP)
	attnSharded    float64 // q_b, kv_b, o_proj (split over TP)
	kvB            float64 // kv_b_proj alone (part of attnSharded)
	indexer        float64 // DSA indexer linears (replicated)
	norms          float64 // input, post-attn, q_a, kv_a norms (+ indexer k_norm weight and bias)
	router         float64 // gate weight + e_score_correction_bias
	shared         float64 // all shared experts
	routedOne      float64 // one routed expert (gate, up, down)
	dense          float64 // dense MLP
}

func (a *Arch) layerParams() layerParams {
	h, ql, kvl := float64(a.Hidden), float64(a.QLoraRank), float64(a.KVLoraRank)
	rope, nope, v, nh := float64(a.QKRopeHeadDim), float64(a.QKNopeHeadDim), float64(a.VHeadDim), float64(a.Heads)
	ih, id := float64(a.IndexHeads), float64(a.IndexHeadDim)
	mi := float64(a.MoEIntermediate)
	var lp layerParams
	lp.attnReplicated = h * (ql + kvl + rope)
	lp.kvB = kvl * nh * (nope + v)
	qin := ql // q_b_proj's input: the query latent, or the hidden state without a query LoRA
	if ql == 0 {
		qin = h
	}
	lp.attnSharded = qin*nh*(nope+rope) + lp.kvB + nh*v*h
	lp.indexer = ql*ih*id + h*id + h*ih
	lp.norms = 2*h + ql + kvl
	if a.HasIndexer() {
		lp.norms += 2 * id // LayerNorm weight and bias
	}
	e := float64(a.RoutedExperts)
	lp.router = e*h + e
	lp.shared = float64(a.SharedExperts) * 3 * h * mi
	lp.routedOne = 3 * h * mi
	lp.dense = 3 * h * float64(a.Intermediate)
	return lp
}

// Params counts the architecture's parameters from its dims.
func (a *Arch) Params() Params {
	lp := a.layerParams()
	h, vocab := float64(a.Hidden), float64(a.Vocab)
	nMoE, nDense := float64(a.MoELayers()), float64(a.DenseLayers)
	nl := float64(a.Layers)
	emb := vocab * h
	head := vocab * h
	if a.TieEmbeddings {
		head = 0
	}
	e, k := float64(a.RoutedExperts), float64(a.TopK)
	by := map[Component]float64{
		CompEmbedding:     emb,
		CompAttention:     nl * (lp.attnReplicated + lp.attnSharded),
		CompIndexer:       nl * lp.indexer,
		CompDenseMLP:      nDense * lp.dense,
		CompRouter:        nMoE * lp.router,
		CompSharedExperts: nMoE * lp.shared,
		CompRoutedExperts: nMoE * e * lp.routedOne,
		CompNorms:         nl*lp.norms + h,
		CompLMHead:        head,
	}
	var p Params
	for _, c := range Components {
		p.Total += by[c]
	}
	p.Active = p.Total - by[CompRoutedExperts] + nMoE*k*lp.routedOne
	mtpLayer := lp.attnReplicated + lp.attnSharded + lp.indexer + lp.norms + lp.router + lp.shared + e*lp.routedOne
	p.MTP = float64(a.MTPLayers) * (mtpLayer + 2*h*h + 3*h + emb + vocab*h)
	by[CompMTP] = p.MTP
	for _, c := range Components {
		p.ByComponent = append(p.ByComponent, ComponentParams{c, by[c]})
	}
	return p
}

// Size limits on an architecture's products. Every dim is bounded where a
// config is parsed; these bound what the dims multiply to, so that weight
// and cache sizes are exact in float64 (integers up to 2^53) and fit the
// int64 byte counts of predictions and reports.
const (
	// maxParams bounds a model's parameters, MTP layers included: 2^50
	// (1.1e15), a thousand times the largest open MoE model (Kimi-K2,
	// 1.04e12), so that weight bytes (at most 4 per parameter, fp32) stay
	// below 2^52.
	maxParams = 1 << 50
	// maxKVBytesPerToken bounds one token's KV cache on one GPU, all
	// layers and MTP layers, at 4 bytes per value plus the DSA indexer
	// cache: 2^22 (4 MiB), twenty times GLM-5's in fp32 ((78+1) x
	// (576 x 4 + 132) = 192,444 B), so that the cache of the largest
	// workload Workload.Validate admits (2^40 tokens) stays below 2^62
	// bytes.
	maxKVBytesPerToken = 1 << 22
)

// checkSize reports whether the architecture's parameter count and KV
// cache per token are within maxParams and maxKVBytesPerToken; the error
// is a *ConfigError naming the config fields (under prefix, e.g.
// "text_config.") whose product is too large, in file.
func (a *Arch) checkSize(file, prefix string) error {
	p := a.Params()
	if total := p.Total + p.MTP; !(total <= maxParams) {
		big := ComponentParams{}
		for _, c := range p.ByComponent {
			if c.Params > big.Params {
				big = c
			}
		}
		return &ConfigError{File: file, Field: productFields(big.Component, prefix),
			Got:  fmt.Sprintf("got %.3g parameters in all, %.3g of them in %s", total, big.Params, strings.ReplaceAll(string(big.Component), "_", " ")),
			Want: fmt.Sprintf("at most %d (2^50) parameters", int64(maxParams))}
	}
	kv := float64(a.Layers+a.MTPLayers) * (float64(a.KVLatentDim())*FP32.BytesPerValue() + float64(a.IndexerCacheBytesPerTokenLayer()))
	if !(kv <= maxKVBytesPerToken) {
		f := "(num_hidden_layers + num_nextn_predict_layers) x (kv_lora_rank + qk_rope_head_dim)"
		if a.HasIndexer() {
			f += " + index_head_dim"
		}
		return &ConfigError{File: file, Field: withPrefix(f, prefix),
			Got:  fmt.Sprintf("got %.0f bytes of KV cache per token at 4 bytes per value", kv),
			Want: fmt.Sprintf("at most %d (4 MiB)", maxKVBytesPerToken)}
	}
	return nil
}

// productFields names the config fields whose product is component c's
// parameter count.
func productFields(c Component, prefix string) string {
	f := map[Component]string{
		CompEmbedding:     "vocab_size x hidden_size",
		CompLMHead:        "vocab_size x hidden_size",
		CompAttention:     "num_hidden_layers x num_attention_heads x head dims x q_lora_rank/kv_lora_rank/hidden_size",
		CompIndexer:       "num_hidden_layers x index_n_heads x index_head_dim x q_lora_rank",
		CompDenseMLP:      "first_k_dense_replace x hidden_size x intermediate_size",
		CompRouter:        "num_hidden_layers x n_routed_experts x hidden_size",
		CompSharedExperts: "num_hidden_layers x n_shared_experts x hidden_size x moe_intermediate_size",
		CompRoutedExperts: "num_hidden_layers x n_routed_experts x hidden_size x moe_intermediate_size",
		CompNorms:         "num_hidden_layers x hidden_size",
		CompMTP:           "num_nextn_predict_layers x (a decoder layer + vocab_size x hidden_size)",
	}[c]
	if f == "" {
		f = "the model's dims"
	}
	return withPrefix(f, prefix)
}

// withPrefix puts prefix before every field name of a product ("a x b").
func withPrefix(f, prefix string) string {
	if prefix == "" {
		return f
	}
	return f + " (in " + strings.TrimSuffix(prefix, ".") + ")"
}

// ComponentMemory is one component's weights on one GPU under a plan.
type ComponentMemory struct {
	Component   Component
	Dtype       Dtype   // storage dtype ("mixed" components report their main dtype)
	Placement   string  // "replicated", "tp", "ep", "vocab" (vocab-parallel), "mixed"
	BytesPerGPU float64 // bytes on each GPU (the largest when ranks differ)
}

// WeightMemory returns the weight bytes per GPU by component (in
// Components order) under plan p. withMTP adds the MTP layers (vLLM loads
// them only when MTP speculative decoding is on). What is replicated and
// what is split follows vLLM (serving-facts.md): fused q_a/kv_a, the DSA
// indexer, the router and the norms are replicated; q_b, kv_b, o_proj,
// dense and shared-expert MLPs are split over TP; routed experts are split
// over TP (each rank 1/TP of every expert) or, under EP, E/(TP x DP) whole
// experts per rank; embedding and lm_head are vocab-parallel over TP
// (rows padded to a multiple of TP). When kv_b_proj is quantized vLLM
// keeps a dequantized BF16 copy of it for the absorbed W_UK/W_UV, counted
// under attention. Under DP attention (DP > 1) attention, indexer, dense
// MLP, embedding and lm_head are split over the TP ranks of a DP group and
// replicated across groups, and the shared experts are replicated.
func (a *Arch) WeightMemory(p Plan, withMTP bool) []ComponentMemory {
	out := new([numWeightComponents]ComponentMemory)
	weightMemory(out, a, p, withMTP)
	return out[:]
}

// numWeightComponents is the length of Arch.WeightMemory's list.
const numWeightComponents = 10

// weightMemory fills out with Arch.WeightMemory's list; KVCapacity passes an
// array of its own, so that a sweep's memory fit does not allocate.
func weightMemory(out *[numWeightComponents]ComponentMemory, a *Arch, p Plan, withMTP bool) {
	p = p.Normalized()
	lp := a.layerParams()
	q := &a.Quant
	tp := float64(p.TP)
	nl, nMoE, nDense := float64(a.Layers), float64(a.MoELayers()), float64(a.DenseLayers)
	h := float64(a.Hidden)
	vocabRows := float64(ceilDiv(a.Vocab, p.TP))
	base := q.Base.BytesPerValue()

	routedPerRank := func(layers float64, d Dtype) float64 {
		if p.EP {
			return layers * float64(a.RoutedExperts/p.World()) * lp.routedOne * d.BytesPerValue()
		}
		return layers * float64(a.RoutedExperts) * lp.routedOne / tp * d.BytesPerValue()
	}
	attnLayer := func(d Dtype) float64 {
		b := (lp.attnReplicated + lp.attnSharded/tp) * d.BytesPerValue()
		if d != q.Base {
			b += lp.kvB / tp * base
		}
		return b
	}
	routedPlace := "tp"
	if p.EP {
		routedPlace = "ep"
	}
	// Shared experts are TP-sharded, except under DP attention where vLLM
	// replicates them (each rank runs them on its own tokens).
	sharedDiv, sharedPlace := tp, "tp"
	if p.DP > 1 {
		sharedDiv, sharedPlace = 1, "replicated"
	}
	*out = [numWeightComponents]ComponentMemory{
		{CompEmbedding, q.Embedding, "vocab", vocabRows * h * q.Embedding.BytesPerValue()},
		{CompAttention, q.Attention, "mixed", nl * attnLayer(q.Attention)},
		{CompIndexer, q.Indexer, "replicated", nl * lp.indexer * q.Indexer.BytesPerValue()},
		{CompDenseMLP, q.DenseMLP, "tp", nDense * lp.dense / tp * q.DenseMLP.BytesPerValue()},
		{CompRouter, q.Router, "replicated", nMoE * lp.router * q.Router.BytesPerValue()},
		{CompSharedExperts, q.SharedExperts, sharedPlace, nMoE * lp.shared / sharedDiv * q.SharedExperts.BytesPerValue()},
		{CompRoutedExperts, q.RoutedExperts, routedPlace, routedPerRank(nMoE, q.RoutedExperts)},
		{CompNorms, q.Base, "replicated", (nl*lp.norms + h) * base},
		{CompLMHead, q.LMHead, "vocab", 0},
		{CompMTP, q.Base, "mixed", 0},
	}
	if !a.TieEmbeddings {
		out[8].BytesPerGPU = vocabRows * h * q.LMHead.BytesPerValue()
	}
	if !a.HasIndexer() {
		out[2].BytesPerGPU = 0
	}
	if withMTP && a.MTPLayers > 0 {
		m := float64(a.MTPLayers)
		d := q.mtpDtype
		perLayer := attnLayer(d(CompAttention)) +
			lp.norms*base + lp.router*base +
			lp.shared/sharedDiv*d(CompSharedExperts).BytesPerValue() +
			routedPerRank(1, d(CompRoutedExperts)) +
			(2*h*h+3*h)*base + // eh_proj (replicated) and its norms
			2*vocabRows*h*base // own embedding and shared head
		if a.HasIndexer() {
			perLayer += lp.indexer * d(CompIndexer).BytesPerValue()
		}
		out[9].BytesPerGPU = m * perLayer
		out[9].Dtype = d(CompRoutedExperts)
	}
}

// totalBytes sums a component list.
func totalBytes(cs []ComponentMemory) float64 {
	t := 0.0
	for _, c := range cs {
		t += c.BytesPerGPU
	}
	return t
}

// kvBytesPerToken is the KV cache one token of context costs on one GPU,
// all layers: (kv_lora_rank + qk_rope_head_dim) values per layer in dtype
// kv, plus the DSA indexer key cache (IndexerCacheBytesPerTokenLayer) when
// the model has one and it is used (dsa), plus the MTP layers' caches when
// withMTP. The MLA latent is replicated on every TP rank (not split), so TP
// does not change it; DCP = k splits the cache by tokens over k ranks and
// divides it by k. DeepSeek-V3 / Kimi-K2.5: 61 x 576 x 2 = 70,272 B in
// bf16; GLM-5: 78 x 576 x 2 = 89,856 B plus 78 x 132 for the indexer, and
// with an FP8 cache run sparse 78 x (656 + 132) = 61,464 B (the sparse
// kernels' scaled FP8 layout, SparseFP8LatentBytesPerTokenLayer).
func kvBytesPerToken(a *Arch, p Plan, kv Dtype, withMTP, dsa bool) float64 {
	p = p.Normalized()
	layers := a.Layers
	if withMTP {
		layers += a.MTPLayers
	}
	per := float64(a.KVLatentDim()) * kv.BytesPerValue()
	if dsa {
		// Run sparse with an FP8 cache, the latent takes the sparse
		// kernels' scaled FP8 layout (656 B for GLM-5, not 576).
		if kv.BytesPerValue() == 1 {
			per = float64(a.SparseFP8LatentBytesPerTokenLayer())
		}
		per += float64(a.IndexerCacheBytesPerTokenLayer())
	}
	return float64(layers) * per / float64(p.DCP)
}

// defaultMaxBatchedTokens and defaultSamplerRows are the profiling step
// the activation estimate assumes where the engine's is not given
// (KVCapacity, KVCapacityFree): vLLM V1's default max_num_batched_tokens
// and max_num_seqs for the OpenAI server on large GPUs (8192, 1024). An
// assumption, not a measurement; vLLM's own step comes through
// KVCapacityProfiled.
const (
	defaultMaxBatchedTokens = 8192
	defaultSamplerRows      = 1024
)

// activationBytes estimates the peak activation workspace on one GPU for a
// profiling step of tokens tokens whose sampler takes samplerRows rows
// (vLLM's profile_run: _dummy_run(max_num_tokens) over min(tokens,
// max_num_seqs) requests, then _dummy_sampler_run on their last hidden
// states). Assumption, documented because it is one: the peak is the live
// tensors of the widest layer in bf16 — hidden state, residual and norm
// output (3 x hidden), the prefill query/key/value of the local heads, the
// larger of the dense or shared MLP's gate_up output, and the routed
// experts' permuted inputs and gate_up outputs (top_k copies of each
// token) — plus fp32 logits for min(tokens, samplerRows) sampled rows.
// CUDA graphs, NCCL buffers and the CUDA context are not included.
func activationBytes(a *Arch, p Plan, tokens, samplerRows int) float64 {
	p = p.Normalized()
	hl := float64(a.Heads / p.TP)
	h := float64(a.Hidden)
	mlp := math.Max(float64(a.Intermediate/p.TP), float64(a.SharedExperts*a.MoEIntermediate/p.TP))
	perToken := 3*h + hl*float64(2*a.QKHeadDim()+a.VHeadDim) + 2*mlp
	logits := float64(min(tokens, samplerRows)) * float64(ceilDiv(a.Vocab, p.TP)*p.TP) * 4
	return float64(tokens)*perToken*actBytes + routedCacheBytes(a, p, tokens) + logits
}

// routedCacheBytes is activationBytes' routed-experts part: top_k copies
// of each token's input and gate_up output.
func routedCacheBytes(a *Arch, p Plan, tokens int) float64 {
	p = p.Normalized()
	expInter := float64(a.MoEIntermediate / p.TP)
	if p.EP {
		expInter = float64(a.MoEIntermediate)
	}
	return float64(tokens) * float64(a.TopK) * (float64(a.Hidden) + 2*expInter) * actBytes
}

// DefaultGPUMemUtilization is vLLM's default gpu_memory_utilization.
const DefaultGPUMemUtilization = 0.9

// Capacity is the KV cache that fits on one GPU.
type Capacity struct {
	GPUMemBytes       float64 // total device memory
	Utilization       float64 // the engine's fraction (vLLM's gpu_memory_utilization, SGLang's mem_fraction_static, TensorRT-LLM's free_gpu_memory_fraction)
	UsableBytes       float64 // memory the engine's budget covers: weights, activations where counted, and the pool
	WeightBytes       float64 // weights on this GPU
	ActivationBytes   float64 // activation workspace estimate
	CUDAGraphBytes    float64 // the engine's estimate of its CUDA graphs' memory, taken off the pool (LessCUDAGraphs)
	IndexerWSBytes    float64 // the DSA indexer's K-gather workspace the engine's profiling run reserves, the part above the routed experts' caches where they share its buffer; in ActivationBytes (WithIndexerWorkspace)
	KVBytes           float64 // left for the KV cache (0 if weights do not fit)
	KVBytesPerToken   float64 // per GPU, all layers
	KVCapacityTokens  int64   // tokens of context the attention group can cache
	WeightsDoNotFitBy float64 // bytes missing when weights+activations exceed the budget, else 0
}

// CapacityRule is one engine's way of sizing its KV pool from the GPU's
// memory and its fraction: KVCapacity, KVCapacityStatic or KVCapacityFree.
type CapacityRule func(a *Arch, p Plan, w Workload, o BuildOptions, gpuMemBytes, frac float64) Capacity

// KVCapacity computes how many tokens of KV cache fit on each GPU of plan p
// for workload w (its KV dtype and speculative tokens decide the per-token
// cost and whether MTP weights are loaded): utilization x memory - weights
// - activations, divided by the per-token bytes (vLLM's
// gpu_memory_utilization). util <= 0 means DefaultGPUMemUtilization. The
// DSA indexer cache is counted unless o.DenseDSA.
func KVCapacity(a *Arch, p Plan, w Workload, o BuildOptions, gpuMemBytes, util float64) Capacity {
	if util <= 0 {
		util = DefaultGPUMemUtilization
	}
	return kvCapacity(a, p, w, o, gpuMemBytes, util, poolOfMemory, defaultMaxBatchedTokens, defaultSamplerRows)
}

// KVCapacityProfiled is KVCapacity with the activations of vLLM's own
// profiling step: a forward of tokens tokens (its max_num_batched_tokens)
// and a sampler over min(tokens, seqs) rows (its max_num_seqs), the peak
// vLLM takes off its pool (gpu_model_runner.py profile_run). tokens <= 0
// is KVCapacity's assumed step; seqs <= 0 takes tokens rows.
func KVCapacityProfiled(tokens, seqs int) CapacityRule {
	if tokens <= 0 {
		return KVCapacity
	}
	return func(a *Arch, p Plan, w Workload, o BuildOptions, gpuMemBytes, util float64) Capacity {
		return KVCapacityAt(a, p, w, o, gpuMemBytes, util, tokens, seqs)
	}
}

// KVCapacityAt is KVCapacityProfiled's capacity, computed at once:
// tokens <= 0 is KVCapacity's assumed step, seqs <= 0 takes tokens rows.
func KVCapacityAt(a *Arch, p Plan, w Workload, o BuildOptions, gpuMemBytes, util float64, tokens, seqs int) Capacity {
	if tokens <= 0 {
		return KVCapacity(a, p, w, o, gpuMemBytes, util)
	}
	if seqs <= 0 {
		seqs = tokens
	}
	if util <= 0 {
		util = DefaultGPUMemUtilization
	}
	return kvCapacity(a, p, w, o, gpuMemBytes, util, poolOfMemory, tokens, seqs)
}

// LessCUDAGraphs is rule with graphBytes more taken off the pool: vLLM
// from 0.21.0 sizes it as requested memory - non-KV memory - the estimate
// of its CUDA graphs' memory (gpu_worker.py
// Worker.determine_available_memory, cudagraph_memory_estimate_applied),
// so the estimate comes off what the fraction leaves after the weights and
// activations, not off the fraction. graphBytes <= 0 is rule itself.
func LessCUDAGraphs(rule CapacityRule, graphBytes float64) CapacityRule {
	if graphBytes <= 0 {
		return rule
	}
	return func(a *Arch, p Plan, w Workload, o BuildOptions, gpuMemBytes, frac float64) Capacity {
		return rule(a, p, w, o, gpuMemBytes, frac).LessCUDAGraphs(graphBytes)
	}
}

// LessCUDAGraphs is c with the engine's CUDA-graph estimate of graphBytes
// taken off its pool (the rule LessCUDAGraphs applies); graphBytes <= 0
// is c itself.
func (c Capacity) LessCUDAGraphs(graphBytes float64) Capacity {
	if graphBytes <= 0 {
		return c
	}
	c.CUDAGraphBytes = graphBytes
	return c.lessPool(graphBytes)
}

// lessPool is c with bytes more taken off its pool before the KV cache:
// the pool shrinks, or, where it is smaller than bytes (or the weights did
// not fit already), what does not fit grows by the rest.
func (c Capacity) lessPool(bytes float64) Capacity {
	if c.WeightsDoNotFitBy > 0 {
		c.WeightsDoNotFitBy += bytes
		return c
	}
	left := c.KVBytes - bytes
	if left <= 0 {
		c.KVBytes, c.KVCapacityTokens, c.WeightsDoNotFitBy = 0, 0, -left
		return c
	}
	c.KVBytes = left
	c.KVCapacityTokens = int64(left / c.KVBytesPerToken)
	return c
}

// IndexerWorkspaceBytes is the K-gather workspace of a DSA model's
// indexer that vLLM reserves in its profiling run: entriesPerMaxLen x
// max_model_len entries (v1/attention/backends/mla/indexer.py
// get_max_prefill_buffer_size: max_model_len x 40, "Each entry is 128 fp8
// bytes and 4 scale bytes"), each one token's gathered indexer key:
// index_head_dim fp8 values and a 4-byte scale
// (model_executor/layers/sparse_attn_indexer.py _gather_workspace_shapes:
// (T, head_dim) fp8 and (T, 4) uint8). sparse_attn_indexer, called with no attention
// metadata as in profile_run, asks the worker's WorkspaceManager for it
// (get_simultaneous of the (T, index_head_dim) fp8 values and the (T, 4)
// scales), and the manager keeps it for the engine's life, so it is in
// the profile's torch peak and off the pool. maxModelLen is the
// engine's max_model_len (<= 0: the model's, Arch.MaxModelLenTokens, its
// max_position_embeddings where that is unknown); 0 for a model without
// an indexer or one run as dense MLA (o.DenseDSA), which calls no
// indexer.
func IndexerWorkspaceBytes(a *Arch, o BuildOptions, entriesPerMaxLen, maxModelLen int) float64 {
	if entriesPerMaxLen <= 0 || !a.HasIndexer() || o.DenseDSA {
		return 0
	}
	if maxModelLen <= 0 {
		maxModelLen = a.MaxModelLenTokens
	}
	if maxModelLen <= 0 {
		maxModelLen = a.MaxPositionEmbeddings
	}
	return float64(entriesPerMaxLen) * float64(maxModelLen) * float64(a.IndexHeadDim+4)
}

// WithIndexerWorkspace is rule with the indexer's K-gather workspace
// (IndexerWorkspaceBytes) counted with the activations: vLLM's profiling
// run reserves it, so its gpu_memory_utilization pool is that much
// smaller. The workspace manager holds one buffer, as large as the
// largest request: where the MoE kernel's intermediate caches are taken
// from it too (moeCachesShared: vLLM's modular Triton and Marlin experts),
// the buffer is the larger of the two, and only the indexer's part above
// the routed experts' caches the activations already count
// (activationBytes at the profile's profileTokens tokens, <= 0: the
// assumed 8,192) comes on top. entriesPerMaxLen <= 0 is rule itself.
func WithIndexerWorkspace(rule CapacityRule, entriesPerMaxLen, maxModelLen int, moeCachesShared bool, profileTokens int) CapacityRule {
	if entriesPerMaxLen <= 0 {
		return rule
	}
	return func(a *Arch, p Plan, w Workload, o BuildOptions, gpuMemBytes, frac float64) Capacity {
		return rule(a, p, w, o, gpuMemBytes, frac).WithIndexerWorkspace(a, p, o, entriesPerMaxLen, maxModelLen, moeCachesShared, profileTokens)
	}
}

// WithIndexerWorkspace is c with the indexer's workspace of a on plan p
// counted (the rule WithIndexerWorkspace applies).
func (c Capacity) WithIndexerWorkspace(a *Arch, p Plan, o BuildOptions, entriesPerMaxLen, maxModelLen int, moeCachesShared bool, profileTokens int) Capacity {
	ws := IndexerWorkspaceBytes(a, o, entriesPerMaxLen, maxModelLen)
	if ws > 0 && moeCachesShared {
		if profileTokens <= 0 {
			profileTokens = defaultMaxBatchedTokens
		}
		ws -= min(ws, routedCacheBytes(a, p, profileTokens))
	}
	if ws <= 0 {
		return c
	}
	c.IndexerWSBytes = ws
	c.ActivationBytes += ws
	return c.lessPool(ws)
}

// KVCapacityStatic is the KV cache of an engine whose weights and pool
// hold frac of the GPU's memory, the activations and CUDA graphs living
// in the rest (SGLang's mem_fraction_static): frac x memory - weights,
// divided by the per-token bytes; ActivationBytes is 0 (not subtracted).
func KVCapacityStatic(a *Arch, p Plan, w Workload, o BuildOptions, gpuMemBytes, frac float64) Capacity {
	return kvCapacity(a, p, w, o, gpuMemBytes, frac, poolStatic, 0, 0)
}

// KVCapacityFree is the KV cache of an engine whose pool takes frac of the
// memory still free once the weights are loaded and a profiling forward
// has run (TensorRT-LLM's free_gpu_memory_fraction, KvCacheCreator's
// (total - peak) x fraction): frac x (memory - weights - activations),
// divided by the per-token bytes. The activations come off before the
// fraction, so the (1 - frac) left unused is a share of the free memory,
// not of the whole.
func KVCapacityFree(a *Arch, p Plan, w Workload, o BuildOptions, gpuMemBytes, frac float64) Capacity {
	return kvCapacity(a, p, w, o, gpuMemBytes, frac, poolOfFree, defaultMaxBatchedTokens, defaultSamplerRows)
}

// poolRule is which of the rules above kvCapacity applies.
type poolRule int

const (
	poolOfMemory poolRule = iota // frac x memory - weights - activations
	poolStatic                   // frac x memory - weights
	poolOfFree                   // frac x (memory - weights - activations)
)

// kvCapacity is the rules' arithmetic; the activations are those of a
// profiling step of profileTokens tokens and samplerRows sampled rows.
func kvCapacity(a *Arch, p Plan, w Workload, o BuildOptions, gpuMemBytes, util float64, rule poolRule, profileTokens, samplerRows int) Capacity {
	withMTP := withMTPLayers(a, w, o)
	c := Capacity{GPUMemBytes: gpuMemBytes, Utilization: util}
	var weights [numWeightComponents]ComponentMemory
	weightMemory(&weights, a, p, withMTP)
	c.WeightBytes = totalBytes(weights[:]) + drafterWeightBytes(p, w, o)
	if rule != poolStatic {
		c.ActivationBytes = activationBytes(a, p, profileTokens, samplerRows)
	}
	c.KVBytesPerToken = kvBytesPerToken(a, p, w.KVDtypeFor(a), withMTP, a.HasIndexer() && !o.DenseDSA) + drafterKVBytesPerToken(p, w, o, w.KVDtypeFor(a))
	var left float64
	if rule == poolOfFree {
		free := gpuMemBytes - c.WeightBytes - c.ActivationBytes
		if free <= 0 {
			// Nothing is free: the budget is the whole memory.
			c.UsableBytes = gpuMemBytes
			c.WeightsDoNotFitBy = -free
			return c
		}
		left = util * free
		c.UsableBytes = c.WeightBytes + c.ActivationBytes + left
	} else {
		c.UsableBytes = util * gpuMemBytes
		left = c.UsableBytes - c.WeightBytes - c.ActivationBytes
	}
	if left <= 0 {
		c.WeightsDoNotFitBy = -left
		return c
	}
	c.KVBytes = left
	c.KVCapacityTokens = int64(left / c.KVBytesPerToken)
	return c
}
