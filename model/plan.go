package model

// Plan is how a model is laid over GPUs, with vLLM's semantics
// (../shared/reference/serving-facts.md). The world size is TP x DP.
//
//   - TP: tensor-parallel degree of attention (and of the experts unless EP).
//   - EP: expert parallelism. With DP = 1 each rank holds NumExperts/(TP)
//     whole experts and runs them on all tokens; one all-reduce still
//     combines them. With DP > 1 experts are spread over all TP x DP ranks
//     and tokens move to them by a dispatch and back by a combine
//     (all-to-all, or all-gather + reduce-scatter: BuildOptions.MoEDispatch).
//   - DP: data-parallel attention degree (each DP group serves its own
//     requests); DP > 1 requires EP.
//   - DCP: decode context parallelism inside a TP group: the KV cache is
//     split by tokens over DCP ranks (DCP must divide TP).
//
// The zero value of a field means its default: TP 1, DP 1, DCP 1, EP off.
type Plan struct {
	TP  int
	EP  bool
	DP  int
	DCP int
}

// Workload is what one step processes.
//
//   - Batch: concurrent sequences (decode) or prompts (prefill).
//   - Context: tokens already in each sequence's KV cache (decode), or the
//     prompt length (prefill).
//   - SpecTokens: MTP speculative tokens per sequence; a decode step then
//     processes Batch x (1 + SpecTokens) tokens.
//   - KVDtype: KV-cache dtype; "" means the checkpoint's choice.
type Workload struct {
	Phase      Phase
	Batch      int
	Context    int
	SpecTokens int
	KVDtype    Dtype
}
