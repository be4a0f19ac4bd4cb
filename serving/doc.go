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
// Policies (Policy): vLLM v1's (above), or SGLang's prefill-first
// scheduler (a prefill batch whenever a prompt waits, else a decode
// batch of every running request; no mixed steps).
//
// Prefix caching (prefix.go): requests that carry their prompt's block
// hashes (Mooncake's hash_ids) or belong to a session (multi-turn: each
// turn's prompt is the conversation so far) start with the longest run of
// leading blocks their scheduler has cached, in an LRU as large as its
// KV pool; a session's turn is sent after its predecessor completes.
//
// Overheads (Overheads): the host's time per step and per request in a
// step, a scale on the prefill part of a step and the frontend's latency
// before the scheduler sees a request, zero unless given or fitted
// (Calibrate) on measured benchmarks.
//
// Measured benchmarks (measured.go): vllm bench serve, SGLang
// bench_serving, aiperf, GuideLLM, InferenceX summaries and request logs,
// one Measured per load level; CompareMeasured simulates the level's load
// and sets each statistic beside the measured one. Request traces
// (requests.go): tpscope's own, Mooncake, Azure 2023, BurstGPT, scaled to
// a rate by ScaleToQPS. The capacity plane (frontier.go): output tokens/s
// per GPU against tokens/s per user per run, its front, and how many
// copies of the deployment carry a target rate (CapacityFor).
//
// Speculative decoding (spec.go): a decoding request schedules 1 + K
// tokens a step and gains 1 + A, A drawn from the acceptance per request
// and step, so TPOT is a distribution over requests.
//
// Left out: asynchronous scheduling, DCP with
// prefill chunks, SGLang's radix-cache scheduling order and its
// reservation of decode memory, and streaming several tokens per chunk
// (a benchmark's ITL is then not compared).
//
// Overload: every run reports the offered request rate against the rate
// the queue in front of the running batch is served at, both over the
// requests arriving in the second half of the load, read from the trend
// of their time to first token. When the queue grows by more than 5 % of
// the offered rate and that trend stands clear of the requests' scatter,
// the run is overloaded (OverloadGrowthFrac): its TTFT and end-to-end
// latency describe a queue that grows with the run's length, so they are
// not reported as latencies (null in JSON) and the run meets no SLO. So
// is a run whose requests in the system grow by as much while the TPOT
// of its completions rises (a running batch that grows, with no queue).
// A run whose arrivals span fewer than SteadyStateE2Es median end-to-end
// latencies never reached steady state (Result.TooShort) and meets no
// SLO either; the sweeps lengthen such runs.
//
// Load (Traffic): open loop (Poisson, constant or gamma-distributed
// gaps of a QPS, as `vllm bench serve --request-rate --burstiness`, with
// at most Concurrency in flight when both are set), closed loop (N
// clients each sending its next request when the previous completes,
// `vllm bench serve --max-concurrency`), or a request trace (arrival
// time, prompt and output tokens; ReadTrace). Prompt and
// output lengths are fixed, uniform or log-normal. One seed drives every
// random draw; the simulation has no goroutines, clocks or maps whose
// order matters, and ties between simultaneous events are broken by
// engine index, then arrival order: the same inputs give the same result.
//
// Units: times in seconds (fields ending in S) or milliseconds (Ms) of
// simulated time; step costs come from sim in microseconds.
package serving
