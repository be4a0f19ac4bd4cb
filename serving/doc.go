// Package serving simulates a serving engine at the level of requests:
// the scheduler of vLLM v1 (vllm/v1/core/sched/scheduler.py) run as a
// deterministic discrete-event simulation over the step costs sim
// predicts, so that capacity is answered in requests (time to first
// token, time per output token, end-to-end latency, goodput under SLOs,
// the largest QPS that meets them) rather than in static batches.
//
// The model, per engine step (replica.schedule in scheduler.go):
//
//   - continuous batching: requests join and leave the running batch at
//     every step; at most max_num_seqs run at once;
//   - a token budget of max_num_batched_tokens per step, spent first on
//     the running requests in their order (decode tokens, and the rest of
//     a prompt being prefilled in chunks), then on waiting requests in
//     arrival order (chunked prefill: a prompt that does not fit the
//     budget's remainder is cut to it);
//   - a paged KV cache of num_gpu_blocks blocks of block_size (16)
//     tokens per attention group, sized by sim's memory model for the box;
//     a request holds ceil(cached tokens / 16) blocks;
//   - preemption by recompute: when a running request needs a block and
//     none is free, the request scheduled last is evicted (its blocks freed,
//     its progress lost) and put at the head of the waiting queue; no
//     waiting request is admitted in a step that preempted;
//   - the step's time: the model.Iteration the step forms (decode tokens,
//     prefill chunks with their cached prefixes) priced by
//     sim.IterationCoster, which also applies the CUDA-graph padding of the
//     step's tokens;
//   - data-parallel attention (plan DP > 1): one scheduler and KV pool per
//     DP rank, the ranks stepping together, each step priced as the
//     largest of their iterations (vLLM pads the ranks' token counts to
//     the largest for the MoE's collectives); several engine instances,
//     each its own copy of the plan, behind a round-robin or least-loaded
//     router (vLLM's DP load balancer score: 4 x waiting + running).
//
// Speculative decoding (spec.go): a decoding request schedules 1 + K
// tokens a step and gains 1 + A, A drawn from the acceptance per request
// and step, so TPOT is a distribution over requests.
//
// Left out: prefix caching (synthetic prompts share no prefix; a
// preempted request recomputes its whole progress), the engine's host-side overheads between steps (detokenization, the
// API server), asynchronous scheduling, and DCP with prefill chunks.
//
// Overload: every run reports the offered request rate against the rate
// the queue in front of the running batch is served at, both over the
// requests arriving in the second half of the load, read from the trend
// of their time to first token. When the queue grows by more than 5 % of
// the offered rate and that trend stands clear of the requests' scatter,
// the run is overloaded (OverloadGrowthFrac): its TTFT and end-to-end
// latency describe a queue that grows with the run's length, so they are
// not reported as latencies (null in JSON) and the run meets no SLO.
//
// Load (Traffic): open loop (Poisson, constant or gamma-distributed
// gaps of a QPS, as `vllm bench serve --request-rate --burstiness`),
// closed loop (N clients each sending its next request when the previous
// completes, `vllm bench serve --max-concurrency`), or a request file
// (arrival time, prompt and output tokens; ReadRequests). Prompt and
// output lengths are fixed, uniform or log-normal. One seed drives every
// random draw; the simulation has no goroutines, clocks or maps whose
// order matters, and ties between simultaneous events are broken by
// engine index, then arrival order: the same inputs give the same result.
//
// Units: times in seconds (fields ending in S) or milliseconds (Ms) of
// simulated time; step costs come from sim in microseconds.
package serving
