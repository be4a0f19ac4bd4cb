package serving

import (
	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
)

// reqState is a request inside the engine: vLLM's Request with
// num_computed_tokens (computed), its output so far (generated) and the KV
// blocks it holds.
type reqState struct {
	Request
	id      int
	client  int // closed-loop client, -1 for an open loop
	replica int

	computed  int // tokens in the KV cache (num_computed_tokens)
	generated int // output tokens sampled so far
	blocks    int // KV blocks held
	preempts  int

	firstS, lastS float64 // first and latest token times
	// streamS and streamed: when the client last received a chunk
	// (EngineOptions.StreamInterval) and how many tokens it held by then.
	streamS  float64
	streamed int
	dueS     float64 // when the load wanted it sent (see RequestResult.DueS)
	done     bool

	// hashes are the prompt's prefix-block hashes (nil: no prefix
	// caching for it); cachedTokens counts the tokens taken from the
	// cache.
	hashes       []uint64
	cachedTokens int
}

// tokens is num_tokens: prompt plus output so far, what computed catches
// up to before the next token is sampled.
func (r *reqState) tokens() int { return r.PromptTokens + r.generated }

// scheduledReq is one request's share of a step.
type scheduledReq struct {
	r    *reqState
	n    int  // tokens scheduled
	spec bool // a speculative decode (spec.go)
}

// replica is one scheduler with its KV pool: an engine instance, or one
// DP rank of it. Its step follows vLLM v1's Scheduler.schedule (see the
// package comment).
type replica struct {
	opts    EngineOptions // defaults filled
	waiting deque
	// inbox holds the requests sent to this scheduler that it has not
	// read yet (EngineOptions.SchedulerRecvInterval > 1); recvCount is the
	// receive counter and lastExtend whether the last batch had prefill
	// tokens (recv).
	inbox       deque
	recvCount   int
	lastExtend  bool
	running     []*reqState
	freeBlocks  int
	totalBlocks int
	// watermarkBlocks = int(watermark x blocks): kept free at admission.
	watermarkBlocks int

	// cache is the prefix cache (nil when off or when no request carries
	// hashes); hashTokens the tokens of one of its blocks.
	cache      *prefixCache
	hashTokens int
	// spec is the replica's speculative decoding (spec.go), nil without.
	spec *specState

	// ratio is SGLang's new_token_ratio now (AdmitNewTokenRatio; 0 under
	// other admissions).
	ratio float64

	// The current step.
	step      []scheduledReq
	it        model.Iteration
	preempted int
}

func newReplica(o EngineOptions, blocks int) *replica {
	rp := &replica{opts: o, freeBlocks: blocks, totalBlocks: blocks, watermarkBlocks: int(o.Watermark * float64(blocks))}
	if f := rp.ratioFacts(); f != nil {
		rp.ratio = f.Init
	}
	return rp
}

// ratioFacts are the new-token-ratio constants when the replica admits by
// SGLang's rule, else nil.
func (rp *replica) ratioFacts() *engprof.NewTokenRatioFacts {
	if rp.opts.Admission != engprof.AdmitNewTokenRatio {
		return nil
	}
	return rp.opts.NewTokenRatio
}

// clippedOutput is min(tokens, the engine's clip): SGLang's estimate of a
// request's output never counts more than CLIP_MAX_NEW_TOKENS.
func (rp *replica) clippedOutput(tokens int) int {
	if f := rp.ratioFacts(); f != nil {
		return min(max(tokens, 0), f.ClipMaxNewTokens)
	}
	return max(tokens, 0)
}

// updateRatio moves SGLang's new_token_ratio after a decode batch
// (update_running_batch): down by the decay to its minimum when nothing
// was retracted, else to the retraction's estimate, (the running
// requests' decoded tokens + RetractDecodeSteps each) / their maximum
// outputs, at most 1.
func (rp *replica) updateRatio() {
	f := rp.ratioFacts()
	if f == nil {
		return
	}
	lo := f.Init * f.MinFactor
	if rp.preempted == 0 {
		rp.ratio = max(rp.ratio-(f.Init-lo)/float64(f.DecaySteps), lo)
		return
	}
	decoded, outs := 0, 0
	for _, r := range rp.running {
		decoded += r.generated
		outs += r.OutputTokens
	}
	if outs > 0 {
		rp.ratio = min(1, float64(decoded+f.RetractDecodeSteps*len(rp.running))/float64(outs))
	}
}

func (rp *replica) blocksFor(tokens int) int {
	return (tokens + rp.opts.BlockSize - 1) / rp.opts.BlockSize
}

// usedBlocks is the number of KV blocks requests hold.
func (rp *replica) usedBlocks() int { return rp.totalBlocks - rp.freeBlocks }

// load is vLLM's DP load-balancing score: 4 x waiting + running (the
// requests sent but not yet read wait too).
func (rp *replica) load() int { return 4*rp.queued() + len(rp.running) }

// queued counts the requests waiting: read and not yet read.
func (rp *replica) queued() int { return rp.waiting.len() + rp.inbox.len() }

func (rp *replica) hasWork() bool { return len(rp.running) > 0 || rp.waiting.len() > 0 }

// send queues an arriving request: into the waiting queue, or, when the
// scheduler reads its socket only every few iterations, its inbox.
func (rp *replica) send(q *reqState) {
	if rp.opts.SchedulerRecvInterval > 1 {
		rp.inbox.pushBack(q)
		return
	}
	rp.waiting.pushBack(q)
}

// recv is SGLang's receive at the top of an iteration (recv_skipper.py)
// under a receive interval: the counter grows by the weight of the batch
// the scheduler last ran (recvWeightDecode, recvWeightExtend) and, once it
// reaches the interval, the inbox moves to the waiting queue and the
// counter restarts. An idle scheduler spins through iterations of no
// batch (weight 1 each, microseconds apart) and reads at once.
func (rp *replica) recv() {
	if rp.opts.SchedulerRecvInterval <= 1 {
		return // every request went straight to the waiting queue (send)
	}
	if rp.hasWork() {
		w := recvWeightDecode
		if rp.lastExtend {
			w = recvWeightExtend
		}
		if rp.recvCount += w; rp.recvCount < rp.opts.SchedulerRecvInterval {
			return
		}
	}
	rp.recvCount = 0
	for rp.inbox.len() > 0 {
		rp.waiting.pushBack(rp.inbox.popFront())
	}
}

// schedule forms the next step by the engine's policy (Policy) and
// reports whether any token was scheduled.
func (rp *replica) schedule() bool {
	rp.step = rp.step[:0]
	rp.it = model.Iteration{}
	if rp.spec != nil {
		rp.it.SpecTokens = rp.spec.k
	}
	rp.preempted = 0
	if rp.opts.Policy == PolicySGLang {
		return rp.scheduleSGLang()
	}
	budget := rp.scheduleRunning(rp.opts.MaxNumBatchedTokens, false)
	if rp.preempted == 0 {
		rp.admitWaiting(budget)
	}
	return len(rp.step) > 0
}

// scheduleRunning is vLLM's first pass: the running requests in order (a
// decode token each, or the next chunk of a prompt), allocating the blocks
// their new tokens need and preempting the last running request while
// none is free. With decodeOnly, requests still prefilling are passed
// over (SGLang's decode batch holds no chunk). It returns the budget
// left.
func (rp *replica) scheduleRunning(budget int, decodeOnly bool) int {
	th := rp.opts.LongPrefillTokenThreshold
	for i := 0; i < len(rp.running) && budget > 0; i++ {
		r := rp.running[i]
		n := r.tokens() - r.computed
		if decodeOnly && n != 1 {
			continue
		}
		n = rp.specScheduled(r, n)
		if th > 0 && n > th {
			n = th
		}
		n = min(n, budget)
		if n <= 0 {
			continue
		}
		need := rp.blocksFor(r.computed+n) - r.blocks
		evictedSelf := false
		for need > rp.freeBlocks {
			// Preempt the lowest-priority request: under FCFS the last of
			// the running list, which is never one already scheduled this
			// step (those come before index i).
			v := rp.running[len(rp.running)-1]
			rp.running = rp.running[:len(rp.running)-1]
			rp.preempt(v)
			if v == r {
				evictedSelf = true
				break
			}
		}
		if evictedSelf {
			break
		}
		rp.freeBlocks -= need
		r.blocks += need
		rp.add(r, n)
		budget -= n
	}
	return budget
}

// admitWaiting is vLLM's second pass: waiting requests in order while the
// budget, max_num_seqs and the free blocks allow. A waiting request is
// admitted only when the blocks of its whole input are free (unless
// NoSchedulerReserveFullISL) and, while others run, the watermark's
// blocks stay free. A request entering the running batch first takes
// its cached prefix (prefix caching).
//
// Under TensorRT-LLM's GUARANTEED_NO_EVICT (EngineOptions.Admission) the
// blocks each running request still needs to reach its whole length
// (prompt plus output) are reserved first, and a waiting request is
// admitted only when the blocks of its own whole length fit what is left,
// so no running request is ever preempted.
func (rp *replica) admitWaiting(budget int) {
	th := rp.opts.LongPrefillTokenThreshold
	noEvict := rp.opts.Admission == engprof.AdmitGuaranteedNoEvict
	reserved := 0 // blocks the running requests still need to finish
	if noEvict {
		for _, r := range rp.running {
			reserved += max(0, rp.blocksFor(r.PromptTokens+r.OutputTokens)-r.blocks)
		}
	}
	// SGLang's PrefillAdder counts tokens: the running requests' estimated
	// remaining output (new_token_ratio x the clipped rest), then each
	// admitted request's input and clipped maximum output.
	sgl := rp.ratioFacts() != nil
	// The pool's free tokens as the adder starts (SGLang allocates the
	// admitted requests' inputs after it chose them; here they come off
	// freeBlocks as they are admitted, so the base is taken first).
	base := float64(rp.freeBlocks * rp.opts.BlockSize)
	offset := 0.0
	if sgl {
		for _, r := range rp.running {
			offset += rp.ratio * float64(rp.clippedOutput(r.OutputTokens-r.generated))
		}
	}
	for rp.waiting.len() > 0 && budget > 0 && len(rp.running) < rp.opts.MaxNumSeqs {
		r := rp.waiting.front()
		hit := rp.prefixHit(r)
		n := r.tokens() - hit
		if th > 0 && n > th {
			n = th
		}
		if rp.opts.DisableChunkedPrefill && n > budget {
			// Chunking off: the prompt waits for a step with room, but
			// SGLang's adder takes the first of a batch whole.
			if !rp.opts.FirstPromptWhole || len(rp.step) > 0 {
				break
			}
			budget = n
		}
		n = min(n, budget)
		// The watermark's headroom counts only while others run, so
		// an idle engine always admits.
		free := rp.freeBlocks
		if len(rp.running) > 0 {
			free -= rp.watermarkBlocks
		}
		if !rp.opts.NoSchedulerReserveFullISL && rp.blocksFor(r.tokens())-r.blocks > free {
			break
		}
		need := rp.blocksFor(hit+n) - r.blocks
		if need > free {
			break
		}
		whole := rp.blocksFor(r.PromptTokens+r.OutputTokens) - r.blocks
		if noEvict && whole > rp.freeBlocks-reserved {
			break
		}
		// add_one_req: NO_TOKEN when input + clipped max output reach
		// what the free tokens leave after the offset. An idle engine
		// admits its first request whatever its output: SGLang clamps a
		// request's max_new_tokens to what its pool holds beside the
		// input when it arrives.
		total := r.tokens() - hit + rp.clippedOutput(r.OutputTokens-r.generated)
		idle := len(rp.running) == 0 && offset == 0
		if sgl && !idle && float64(total) >= base-offset {
			break
		}
		offset += float64(total)
		reserved += max(0, whole-need)
		rp.waiting.popFront()
		if hit > r.computed {
			r.cachedTokens = hit
			r.computed = hit
		}
		rp.freeBlocks -= need
		r.blocks += need
		rp.running = append(rp.running, r)
		rp.add(r, n)
		budget -= n
	}
}

// scheduleSGLang forms SGLang's step (PolicySGLang): a prefill batch when
// a prompt is being prefilled or waits and max_running_requests allows,
// else a decode batch of the running requests.
func (rp *replica) scheduleSGLang() bool {
	budget := rp.opts.MaxNumBatchedTokens
	// The chunked request (a prompt cut by the last prefill batch) goes
	// first: SGLang keeps it as chunked_req and adds it before the queue.
	for _, r := range rp.running {
		if r.tokens()-r.computed > 1 && budget > 0 {
			n := min(r.tokens()-r.computed, budget)
			need := rp.blocksFor(r.computed+n) - r.blocks
			if need > rp.freeBlocks {
				break
			}
			rp.freeBlocks -= need
			r.blocks += need
			rp.add(r, n)
			budget -= n
		}
	}
	rp.admitWaiting(budget)
	if len(rp.step) > 0 {
		return true
	}
	rp.scheduleRunning(rp.opts.MaxNumBatchedTokens+len(rp.running)*rp.decodeWidth(), true)
	if len(rp.step) == 0 {
		// An idle scheduler resets its estimate (event_loop: no batch).
		if f := rp.ratioFacts(); f != nil {
			rp.ratio = f.Init
		}
		return false
	}
	rp.updateRatio()
	return true
}

// prefixHit is how many of r's tokens are in the prefix cache when it
// enters the running batch: whole cached blocks from its start, at most
// its tokens less one (the last is computed to sample from), a multiple
// of the block size; r.computed when there is no cache or no hash.
func (rp *replica) prefixHit(r *reqState) int {
	if rp.cache == nil || len(r.hashes) == 0 || r.computed > 0 {
		return r.computed
	}
	k := rp.cache.match(r.hashes)
	hit := min(k*rp.hashTokens, r.tokens()-1)
	return hit / rp.opts.BlockSize * rp.opts.BlockSize
}

// add records n tokens of r in the step and its iteration: one token of a
// request with a cache is a decode (vLLM's MLA backends treat a query of
// one token as decode), anything else a prefill chunk after its cached
// prefix.
func (rp *replica) add(r *reqState, n int) {
	dec := rp.decoding(r, n)
	rp.step = append(rp.step, scheduledReq{r, n, dec && rp.spec != nil})
	if dec {
		rp.it.AddDecode(r.computed)
	} else {
		rp.it.AddChunk(n, r.computed)
	}
}

// preempt evicts r by recompute: its blocks are freed, its progress lost,
// and it waits at the head of the queue.
func (rp *replica) preempt(r *reqState) {
	rp.freeBlocks += r.blocks
	r.blocks, r.computed = 0, 0
	r.preempts++
	rp.preempted++
	rp.waiting.pushFront(r)
}

// finish applies the step ending at endS: every scheduled request's
// tokens are computed; one that caught up with its tokens samples the
// next (emit is called with it); one that reached its output length
// leaves (its blocks freed, done set). It returns the tokens sampled.
func (rp *replica) finish(endS float64, emit func(r *reqState, endS float64)) int {
	sampled := 0
	left := false
	for _, s := range rp.step {
		r := s.r
		prefilling := r.computed < r.PromptTokens
		computed, tokens := rp.gained(s)
		r.computed += computed
		if rp.cache != nil && prefilling && r.computed >= r.PromptTokens {
			rp.cache.insert(r.hashes)
		}
		if r.computed < r.tokens() {
			continue
		}
		tokens = min(tokens, r.OutputTokens-r.generated)
		r.generated += tokens
		sampled += tokens
		emit(r, endS)
		if r.generated >= r.OutputTokens {
			if rp.cache != nil && r.Session != 0 {
				// The next turn's prompt holds this one's output too.
				rp.cache.insert(sessionHashes(r.Session, r.PromptTokens+r.OutputTokens-1, rp.hashTokens))
			}
			rp.freeBlocks += r.blocks
			r.blocks = 0
			r.done = true
			left = true
		}
	}
	if left {
		k := 0
		for _, r := range rp.running {
			if !r.done {
				rp.running[k] = r
				k++
			}
		}
		clear(rp.running[k:])
		rp.running = rp.running[:k]
	}
	rp.step = rp.step[:0]
	return sampled
}

// deque is a FIFO of requests with a push at the front (preempted
// requests), on a ring buffer.
type deque struct {
	buf        []*reqState
	head, size int
}

func (q *deque) len() int { return q.size }

func (q *deque) grow() {
	n := max(16, 2*len(q.buf))
	b := make([]*reqState, n)
	for i := 0; i < q.size; i++ {
		b[i] = q.buf[(q.head+i)%len(q.buf)]
	}
	q.buf, q.head = b, 0
}

func (q *deque) pushBack(r *reqState) {
	if q.size == len(q.buf) {
		q.grow()
	}
	q.buf[(q.head+q.size)%len(q.buf)] = r
	q.size++
}

func (q *deque) pushFront(r *reqState) {
	if q.size == len(q.buf) {
		q.grow()
	}
	q.head = (q.head - 1 + len(q.buf)) % len(q.buf)
	q.buf[q.head] = r
	q.size++
}

func (q *deque) front() *reqState { return q.buf[q.head] }

func (q *deque) popFront() *reqState {
	r := q.buf[q.head]
	q.buf[q.head] = nil
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	return r
}
