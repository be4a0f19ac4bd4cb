package serving

import (
	"math"
	"slices"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
)

// stepper drives one replica without pricing: schedule, then finish at
// the next integer time, recording every token emitted.
type stepper struct {
	rp      *replica
	nowS    float64
	emitted map[int][]float64 // request id -> token times
}

// vllmScheduler is the default vLLM profile's scheduler facts, whose
// batch defaults fill the limits a test leaves unset (2048 and 256 on no
// GPU).
func vllmScheduler() *engprof.SchedulerFacts {
	p, err := engprof.Lookup(engprof.Ref{Name: "vllm"})
	if err != nil {
		panic(err)
	}
	return &p.Scheduler
}

func newStepper(o EngineOptions, blocks int, reqs ...Request) *stepper {
	s := &stepper{rp: newReplica(o.withDefaults(nil, vllmScheduler(), 0), blocks), emitted: map[int][]float64{}}
	for i, r := range reqs {
		s.rp.waiting.pushBack(&reqState{Request: r, id: i, client: -1})
	}
	return s
}

// step runs one step and returns its iteration.
func (s *stepper) step(t *testing.T) model.Iteration {
	t.Helper()
	if !s.rp.schedule() {
		t.Fatalf("step at %v scheduled nothing", s.nowS)
	}
	it := s.rp.it
	s.nowS++
	s.rp.finish(s.nowS, func(r *reqState, at float64) { s.emitted[r.id] = append(s.emitted[r.id], at) })
	return it
}

// runAll steps until every one of n requests has finished (failing past
// maxSteps) and returns the step each entered the running batch at and
// the preemptions over the run.
func (s *stepper) runAll(t *testing.T, n, maxSteps int) (entered []int, preempts int) {
	t.Helper()
	entered = make([]int, n)
	for step := 1; s.rp.hasWork(); step++ {
		if step > maxSteps {
			t.Fatalf("still running after %d steps", maxSteps)
		}
		s.step(t)
		for _, r := range s.rp.running {
			if entered[r.id] == 0 {
				entered[r.id] = step
			}
		}
		preempts += s.rp.preempted
	}
	return entered, preempts
}

func sameIteration(t *testing.T, step int, got, want model.Iteration) {
	t.Helper()
	if got != want {
		t.Errorf("step %d: iteration %+v, want %+v", step, got, want)
	}
}

// TestSchedulerChunkedPrefill walks vLLM's policy by hand: budget 100
// tokens, block size 16. Step 1: prompt A (80 tokens) whole, prompt B
// (50) cut to the 20 tokens left. Step 2: A decodes over its 80 cached
// tokens (the running list first), B's remaining 30 tokens after its
// 20-token prefix (causal pairs 30 x 31 / 2 = 465, prefix pairs 30 x 20 =
// 600); B's first token comes at the end of step 2. Step 3: both decode
// (A over 81, B over 50) and finish (A: 3 tokens, B: 2).
func TestSchedulerChunkedPrefill(t *testing.T) {
	s := newStepper(EngineOptions{MaxNumSeqs: 8, MaxNumBatchedTokens: 100}, 100,
		Request{PromptTokens: 80, OutputTokens: 3}, Request{PromptTokens: 50, OutputTokens: 2})
	var want model.Iteration
	want.AddChunk(80, 0)
	want.AddChunk(20, 0)
	sameIteration(t, 1, s.step(t), want)
	want = model.Iteration{}
	want.AddDecode(80)
	want.AddChunk(30, 20)
	if want.PrefillCausalPairs != 465 || want.PrefillPrefixPairs != 600 {
		t.Fatalf("hand-derived pairs: %+v", want)
	}
	sameIteration(t, 2, s.step(t), want)
	want = model.Iteration{}
	want.AddDecode(81)
	want.AddDecode(50)
	sameIteration(t, 3, s.step(t), want)
	if got := s.emitted[0]; len(got) != 3 || got[0] != 1 || got[2] != 3 {
		t.Errorf("A's tokens at %v, want 1, 2, 3", got)
	}
	if got := s.emitted[1]; len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Errorf("B's tokens at %v, want 2, 3", got)
	}
	if s.rp.hasWork() || s.rp.usedBlocks() != 0 {
		t.Errorf("after both finished: running %d, waiting %d, blocks held %d", len(s.rp.running), s.rp.waiting.len(), s.rp.usedBlocks())
	}
}

// TestSchedulerPreemption: 6 blocks of 16 tokens, two prompts of 48
// tokens fill them (3 blocks each). In step 2 A's decode token needs a
// 4th block: B, the last running request, is preempted (its 3 blocks
// freed, its progress and first token's cache lost) and goes back to the
// head of the queue, and no waiting request is admitted in that step. B
// returns only when A's blocks are free, and recomputes its prompt plus
// the token it had produced (49 tokens).
func TestSchedulerPreemption(t *testing.T) {
	s := newStepper(EngineOptions{MaxNumSeqs: 8, MaxNumBatchedTokens: 1000}, 6,
		Request{PromptTokens: 48, OutputTokens: 4}, Request{PromptTokens: 48, OutputTokens: 2},
		Request{PromptTokens: 16, OutputTokens: 1})
	var want model.Iteration
	want.AddChunk(48, 0)
	want.AddChunk(48, 0)
	sameIteration(t, 1, s.step(t), want)
	if s.rp.freeBlocks != 0 {
		t.Fatalf("after step 1: %d free blocks, want 0", s.rp.freeBlocks)
	}
	want = model.Iteration{}
	want.AddDecode(48)
	sameIteration(t, 2, s.step(t), want)
	if s.rp.preempted != 1 || s.rp.waiting.len() != 2 || s.rp.waiting.front().id != 1 {
		t.Fatalf("step 2: preempted %d, waiting %d (front %d), want B preempted at the head of 2", s.rp.preempted, s.rp.waiting.len(), s.rp.waiting.front().id)
	}
	b := s.rp.waiting.front()
	if b.computed != 0 || b.blocks != 0 || b.generated != 1 || b.preempts != 1 {
		t.Errorf("preempted B: computed %d, blocks %d, generated %d, preemptions %d; want 0, 0, 1, 1", b.computed, b.blocks, b.generated, b.preempts)
	}
	// Steps 3 and 4: A decodes (2 free blocks cannot hold B's 49 tokens,
	// and the queue waits behind B) and finishes its 4th token.
	for step := 3; step <= 4; step++ {
		want = model.Iteration{}
		want.AddDecode(48 + step - 2)
		sameIteration(t, step, s.step(t), want)
	}
	// Step 5: B recomputes 49 tokens, C (16 tokens) joins.
	want = model.Iteration{}
	want.AddChunk(49, 0)
	want.AddChunk(16, 0)
	sameIteration(t, 5, s.step(t), want)
	if got := s.emitted[1]; len(got) != 2 || got[1] != 5 {
		t.Errorf("B's tokens at %v, want its second at 5", got)
	}
}

// TestSchedulerLimits: max_num_seqs caps the running requests; without
// chunked prefill a prompt that does not fit the remaining budget waits;
// long_prefill_token_threshold cuts a prompt into chunks of at most that
// many tokens.
func TestSchedulerLimits(t *testing.T) {
	t.Run("max_num_seqs", func(t *testing.T) {
		s := newStepper(EngineOptions{MaxNumSeqs: 2, MaxNumBatchedTokens: 1000}, 100,
			Request{PromptTokens: 10, OutputTokens: 5}, Request{PromptTokens: 10, OutputTokens: 5}, Request{PromptTokens: 10, OutputTokens: 5})
		if it := s.step(t); it.PrefillSeqs != 2 || s.rp.waiting.len() != 1 {
			t.Errorf("admitted %d prompts, %d waiting; want 2 and 1", it.PrefillSeqs, s.rp.waiting.len())
		}
	})
	t.Run("no chunked prefill", func(t *testing.T) {
		s := newStepper(EngineOptions{MaxNumSeqs: 8, MaxNumBatchedTokens: 100, DisableChunkedPrefill: true}, 100,
			Request{PromptTokens: 80, OutputTokens: 2}, Request{PromptTokens: 50, OutputTokens: 2})
		var want model.Iteration
		want.AddChunk(80, 0)
		sameIteration(t, 1, s.step(t), want)
		want = model.Iteration{}
		want.AddDecode(80)
		want.AddChunk(50, 0)
		sameIteration(t, 2, s.step(t), want)
	})
	t.Run("long_prefill_token_threshold", func(t *testing.T) {
		s := newStepper(EngineOptions{MaxNumSeqs: 8, MaxNumBatchedTokens: 100, LongPrefillTokenThreshold: 32}, 100,
			Request{PromptTokens: 80, OutputTokens: 1})
		for i, c := range []struct{ n, prefix int }{{32, 0}, {32, 32}, {16, 64}} {
			var want model.Iteration
			want.AddChunk(c.n, c.prefix)
			sameIteration(t, i+1, s.step(t), want)
		}
		if len(s.emitted[0]) != 1 || s.emitted[0][0] != 3 {
			t.Errorf("token at %v, want 3", s.emitted[0])
		}
	})
}

func TestDeque(t *testing.T) {
	var q deque
	reqs := make([]*reqState, 40)
	for i := range reqs {
		reqs[i] = &reqState{id: i}
	}
	for i := 0; i < 30; i++ {
		q.pushBack(reqs[i])
	}
	for i := 0; i < 10; i++ {
		if r := q.popFront(); r.id != i {
			t.Fatalf("pop %d: got %d", i, r.id)
		}
	}
	q.pushFront(reqs[35])
	q.pushFront(reqs[36])
	want := []int{36, 35}
	for i := 10; i < 30; i++ {
		want = append(want, i)
	}
	for i, w := range want {
		if r := q.popFront(); r.id != w {
			t.Fatalf("pop %d: got %d, want %d", i, r.id, w)
		}
	}
	if q.len() != 0 {
		t.Fatalf("len %d, want 0", q.len())
	}
}

// TestSchedulerAdmission: a waiting request enters only when the blocks
// of its whole input are free (vLLM's scheduler_reserve_full_isl), not
// just its first chunk's; and while others run, the watermark's blocks
// (int(0.5 x 10) = 5 here) stay free, but an idle engine admits.
func TestSchedulerAdmission(t *testing.T) {
	t.Run("full input", func(t *testing.T) {
		// Budget 16: the 64-token prompt would start with one block, but
		// needs 4 of the 3 free.
		s := newStepper(EngineOptions{MaxNumSeqs: 8, MaxNumBatchedTokens: 16}, 3, Request{PromptTokens: 64, OutputTokens: 1})
		if s.rp.schedule() {
			t.Fatalf("admitted a 64-token prompt into 3 blocks")
		}
		s = newStepper(EngineOptions{MaxNumSeqs: 8, MaxNumBatchedTokens: 16, NoSchedulerReserveFullISL: true}, 3, Request{PromptTokens: 64, OutputTokens: 1})
		var want model.Iteration
		want.AddChunk(16, 0)
		sameIteration(t, 1, s.step(t), want)
	})
	t.Run("watermark", func(t *testing.T) {
		s := newStepper(EngineOptions{MaxNumSeqs: 8, MaxNumBatchedTokens: 1000, Watermark: 0.5}, 10,
			Request{PromptTokens: 128, OutputTokens: 5}, Request{PromptTokens: 16, OutputTokens: 5})
		// Step 1: the engine is idle, A (8 blocks) enters although 8 + 5 >
		// 10; B waits: 1 + 5 > 2 free.
		var want model.Iteration
		want.AddChunk(128, 0)
		sameIteration(t, 1, s.step(t), want)
		want = model.Iteration{}
		want.AddDecode(128)
		sameIteration(t, 2, s.step(t), want)
		if s.rp.waiting.len() != 1 {
			t.Errorf("B admitted into the watermark's blocks")
		}
	})
}

// TestGuaranteedNoEvictAdmission walks TensorRT-LLM's GUARANTEED_NO_EVICT
// by hand: 19 blocks of 16 tokens, A and B each a 64-token prompt (4
// blocks) with 96 output tokens (160 tokens, 10 blocks whole), C 16 + 16
// tokens (2 blocks). Step 1: A enters (10 <= 19), holding 4 blocks and
// reserving its 6 more; B needs 10 of the 15 - 6 = 9 left and waits, and
// C behind it (first come, first served). A's first token comes at step 1
// and its 96th at step 96; only then (step 97) do B and C enter (10 <= 19,
// then 2 <= 15 - 6). No request is ever preempted. Under vLLM's rule (the
// whole input's blocks free) all three enter at step 1 and, their 22
// blocks over the 19, one is preempted later.
func TestGuaranteedNoEvictAdmission(t *testing.T) {
	reqs := []Request{{PromptTokens: 64, OutputTokens: 96}, {PromptTokens: 64, OutputTokens: 96}, {PromptTokens: 16, OutputTokens: 16}}
	run := func(admission string) (entered []int, preempts int) {
		s := newStepper(EngineOptions{MaxNumSeqs: 8, MaxNumBatchedTokens: 1000, Admission: admission}, 19, reqs...)
		entered, preempts = s.runAll(t, len(reqs), 1000)
		if got := len(s.emitted[0]); got != 96 {
			t.Fatalf("%q: A emitted %d tokens, want 96", admission, got)
		}
		return entered, preempts
	}
	entered, preempts := run(engprof.AdmitGuaranteedNoEvict)
	if want := []int{1, 97, 97}; !slices.Equal(entered, want) || preempts != 0 {
		t.Errorf("guaranteed_no_evict: requests entered at steps %v with %d preemptions, want %v and none", entered, preempts, want)
	}
	entered, preempts = run("")
	if want := []int{1, 1, 1}; !slices.Equal(entered, want) || preempts == 0 {
		t.Errorf("vLLM's rule: requests entered at steps %v with %d preemptions, want %v and some", entered, preempts, want)
	}
}

// TestSGLangNewTokenRatioAdmission walks SGLang's PrefillAdder on a pool
// of 300 tokens (page 1): A (100 in, 100 out) enters an idle engine;
// B (100 in, 100 out) then needs 100 + 100 tokens where the pool's 300
// less A's admitted 200 leave 100, and later, while A decodes, 300 less
// A's 100 + g cached tokens less 0.7-ish x A's 100 - g remaining outputs
// leave less than 200 at every g: B (and C, 10 in 10 out, behind it in
// the FCFS queue) wait until A has finished, then both enter together
// (B on the idle engine, C's 20 within 300 - 200), and nothing is ever
// retracted. Under vLLM's rule all three enter at step 1 and A and B,
// 400 tokens in a 300-token pool, preempt.
func TestSGLangNewTokenRatioAdmission(t *testing.T) {
	reqs := []Request{{PromptTokens: 100, OutputTokens: 100}, {PromptTokens: 100, OutputTokens: 100}, {PromptTokens: 10, OutputTokens: 10}}
	facts := &engprof.NewTokenRatioFacts{Init: 0.7, MinFactor: 0.14, DecaySteps: 600, ClipMaxNewTokens: 4096, RetractDecodeSteps: 20}
	run := func(admission string) (entered []int, lastA, preempts int) {
		o := EngineOptions{MaxNumSeqs: 8, MaxNumBatchedTokens: 1000, BlockSize: 1, Policy: PolicySGLang, Admission: admission}
		if admission == engprof.AdmitNewTokenRatio {
			o.NewTokenRatio = facts
		}
		s := newStepper(o, 300, reqs...)
		entered, preempts = s.runAll(t, len(reqs), 2000)
		a := s.emitted[0]
		if len(a) != 100 {
			t.Fatalf("%q: A emitted %d tokens, want 100", admission, len(a))
		}
		return entered, int(a[len(a)-1]), preempts
	}
	entered, lastA, preempts := run(engprof.AdmitNewTokenRatio)
	if entered[0] != 1 || entered[1] != lastA+1 || entered[2] != lastA+1 || preempts != 0 {
		t.Errorf("new_token_ratio: entered at steps %v, A's last token at step %d, %d preemptions; want A at 1, B and C at %d, none", entered, lastA, preempts, lastA+1)
	}
	entered, _, preempts = run("")
	if !slices.Equal(entered, []int{1, 1, 1}) || preempts == 0 {
		t.Errorf("vLLM's rule: entered at steps %v with %d preemptions, want all at 1 and some", entered, preempts)
	}
}

// TestSGLangNewTokenRatioUpdates: SGLang's estimate falls by (0.7 -
// 0.7 x 0.14) / 600 = 0.0010033 a decode batch to its floor 0.098, resets
// to 0.7 when the scheduler idles, and a retraction sets it to (decoded +
// 20 a request) / the requests' maximum outputs: two running requests
// that decoded 30 and 10 of 100 and 200 give (40 + 40) / 300.
func TestSGLangNewTokenRatioUpdates(t *testing.T) {
	facts := &engprof.NewTokenRatioFacts{Init: 0.7, MinFactor: 0.14, DecaySteps: 600, ClipMaxNewTokens: 4096, RetractDecodeSteps: 20}
	rp := newReplica(EngineOptions{Policy: PolicySGLang, Admission: engprof.AdmitNewTokenRatio, NewTokenRatio: facts, BlockSize: 1}, 1000)
	if rp.ratio != 0.7 {
		t.Fatalf("initial ratio %v, want 0.7", rp.ratio)
	}
	rp.updateRatio()
	if want := 0.7 - (0.7-0.098)/600; math.Abs(rp.ratio-want) > 1e-12 {
		t.Errorf("after one decode batch: %v, want %v", rp.ratio, want)
	}
	for range 700 {
		rp.updateRatio()
	}
	if math.Abs(rp.ratio-0.098) > 1e-12 {
		t.Errorf("after 701 decode batches: %v, want the floor 0.098", rp.ratio)
	}
	rp.running = []*reqState{{Request: Request{OutputTokens: 100}, generated: 30}, {Request: Request{OutputTokens: 200}, generated: 10}}
	rp.preempted = 1
	rp.updateRatio()
	if want := 80.0 / 300; math.Abs(rp.ratio-want) > 1e-12 {
		t.Errorf("after a retraction: %v, want %v", rp.ratio, want)
	}
	// An idle scheduler (nothing running or waiting) resets it.
	rp.running, rp.preempted = nil, 0
	if rp.schedule() {
		t.Fatal("an empty scheduler scheduled a step")
	}
	if rp.ratio != 0.7 {
		t.Errorf("after an idle iteration: %v, want 0.7", rp.ratio)
	}
}

// TestSGLangUnchunkedFirstPromptWhole: with chunked prefill off SGLang's
// adder takes the first prompt of a prefill batch whole whatever
// --max-prefill-tokens says, and stops at a later one that no longer
// fits: budget 1,000, prompts of 1,500 and 200 tokens: step 1 prefills
// the 1,500 whole, step 2 the 200, step 3 decodes both. vLLM's rule (no
// first-prompt exception) never schedules the 1,500.
func TestSGLangUnchunkedFirstPromptWhole(t *testing.T) {
	o := EngineOptions{MaxNumSeqs: 8, MaxNumBatchedTokens: 1000, BlockSize: 1, Policy: PolicySGLang, DisableChunkedPrefill: true, FirstPromptWhole: true}
	s := newStepper(o, 10000, Request{PromptTokens: 1500, OutputTokens: 2}, Request{PromptTokens: 200, OutputTokens: 2})
	var want model.Iteration
	want.AddChunk(1500, 0)
	sameIteration(t, 1, s.step(t), want)
	want = model.Iteration{}
	want.AddChunk(200, 0)
	sameIteration(t, 2, s.step(t), want)
	want = model.Iteration{}
	want.AddDecode(1500)
	want.AddDecode(200)
	sameIteration(t, 3, s.step(t), want)
	o.FirstPromptWhole = false
	v := newStepper(o, 10000, Request{PromptTokens: 1500, OutputTokens: 2})
	if v.rp.schedule() {
		t.Errorf("without the first-prompt exception a 1,500-token prompt over a 1,000-token budget was scheduled")
	}
}
