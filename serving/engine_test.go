package serving

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
)

// TestSchedulerSGLang walks SGLang's prefill-first policy by hand on the
// requests of TestSchedulerChunkedPrefill (budget 100 tokens): step 1 is
// a prefill batch of A (80 tokens) and B cut to 20; step 2 prefills B's
// other 30 tokens alone (the chunked request goes first and A's decode
// waits, a prefill batch holding no decode); step 3 decodes both; step 4
// decodes A. A's tokens come at 1, 3, 4 (vLLM's policy: 1, 2, 3), B's
// at 2, 3.
func TestSchedulerSGLang(t *testing.T) {
	s := newStepper(EngineOptions{MaxNumSeqs: 8, MaxNumBatchedTokens: 100, Policy: PolicySGLang}, 100,
		Request{PromptTokens: 80, OutputTokens: 3}, Request{PromptTokens: 50, OutputTokens: 2})
	var want model.Iteration
	want.AddChunk(80, 0)
	want.AddChunk(20, 0)
	sameIteration(t, 1, s.step(t), want)
	want = model.Iteration{}
	want.AddChunk(30, 20)
	sameIteration(t, 2, s.step(t), want)
	want = model.Iteration{}
	want.AddDecode(80)
	want.AddDecode(50)
	sameIteration(t, 3, s.step(t), want)
	want = model.Iteration{}
	want.AddDecode(81)
	sameIteration(t, 4, s.step(t), want)
	if got := s.emitted[0]; !reflect.DeepEqual(got, []float64{1, 3, 4}) {
		t.Errorf("A's tokens at %v, want 1, 3, 4", got)
	}
	if got := s.emitted[1]; !reflect.DeepEqual(got, []float64{2, 3}) {
		t.Errorf("B's tokens at %v, want 2, 3", got)
	}
}

// TestPrefixCacheLRU: a cache of two blocks. [1 2] in; [1 2 3] matches
// 2 (and touches 1 then 2: 2 is the most recent); inserting 3 evicts 1,
// the least recently used; then [1] matches nothing and [2 3] both.
func TestPrefixCacheLRU(t *testing.T) {
	c := newPrefixCache(2)
	c.insert([]uint64{1, 2})
	if k := c.match([]uint64{1, 2, 3}); k != 2 {
		t.Fatalf("match [1 2 3] = %d, want 2", k)
	}
	c.insert([]uint64{3})
	if k := c.match([]uint64{1}); k != 0 {
		t.Errorf("match [1] after eviction = %d, want 0", k)
	}
	if k := c.match([]uint64{2, 3}); k != 2 {
		t.Errorf("match [2 3] = %d, want 2", k)
	}
}

// TestSchedulerPrefixHit: hash blocks of 512 tokens, engine blocks of 16,
// budget 4096. A (1024 tokens, hashes [1 2]) prefills whole and enters
// both blocks in the cache. B (1100 tokens, [1 2 9]) then finds 1024
// tokens cached and prefills 76 after them; C (1024 tokens, [1 2]) is all
// cached but must compute its last token: its hit is 1023 rounded down
// to the block size, 1008, leaving a 16-token chunk.
func TestSchedulerPrefixHit(t *testing.T) {
	s := newStepper(EngineOptions{MaxNumSeqs: 8, MaxNumBatchedTokens: 4096}, 1000,
		Request{PromptTokens: 1024, OutputTokens: 1})
	s.rp.cache, s.rp.hashTokens = newPrefixCache(100), 512
	s.rp.waiting.front().hashes = []uint64{1, 2}
	var want model.Iteration
	want.AddChunk(1024, 0)
	sameIteration(t, 1, s.step(t), want)
	for i, r := range []struct {
		prompt int
		hashes []uint64
	}{{1100, []uint64{1, 2, 9}}, {1024, []uint64{1, 2}}} {
		s.rp.waiting.pushBack(&reqState{Request: Request{PromptTokens: r.prompt, OutputTokens: 1}, id: 1 + i, client: -1, hashes: r.hashes})
	}
	want = model.Iteration{}
	want.AddChunk(76, 1024)
	want.AddChunk(16, 1008)
	sameIteration(t, 2, s.step(t), want)
}

// TestOverheadsStep: a step sim prices at 1000 us whose decode tokens
// alone cost 400 us, with prefill scaled x2, 100 us a step and 10 us a
// request for 3 requests: 400 + 2 x 600 + 100 + 30 = 1730 us. Without
// prefill the prefill scale does not apply: 1000 + 100 + 30; a prefill
// alone takes it: 2 x 1000 + 130. With decode scaled x1.5 as well the
// mixed step is 1.5 x 400 + 2 x 600 + 130 = 1930 us and the decode step
// 1.5 x 1000 + 130 = 1630 us.
func TestOverheadsStep(t *testing.T) {
	o := Overheads{StepUs: 100, PerSeqUs: 10, PrefillScale: 2}
	for _, c := range []struct {
		o               Overheads
		us, decodeUs    float64
		prefill, decode bool
		wantUs          float64
	}{
		{o, 1000, 400, true, true, 1730},
		{o, 1000, 0, false, true, 1130},
		{o, 1000, 0, true, false, 2130},
		{Overheads{StepUs: 100, PerSeqUs: 10, PrefillScale: 2, DecodeScale: 1.5}, 1000, 400, true, true, 1930},
		{Overheads{StepUs: 100, PerSeqUs: 10, PrefillScale: 2, DecodeScale: 1.5}, 1000, 0, false, true, 1630},
		// A time per prefill step: on every step with prefill tokens, alone or
		// mixed, never on a decode-only one.
		{Overheads{PrefillStepUs: 500}, 1000, 400, true, true, 1500},
		{Overheads{PrefillStepUs: 500}, 1000, 0, true, false, 1500},
		{Overheads{PrefillStepUs: 500}, 1000, 0, false, true, 1000},
	} {
		if got := c.o.stepS(c.us, c.decodeUs, c.prefill, c.decode, 3); math.Abs(got-c.wantUs*1e-6) > 1e-12 {
			t.Errorf("%+v, step %v us (decode %v us, prefill %v, decode %v): %v s, want %v us", c.o, c.us, c.decodeUs, c.prefill, c.decode, got, c.wantUs)
		}
	}
	bad := []Overheads{{StepUs: -1}, {PerSeqUs: math.NaN()}, {PrefillScale: 1e9}, {DecodeScale: -1}, {FrontendMs: math.Inf(1)}, {PrefillStepUs: -5}}
	for _, b := range bad {
		if b.Validate() == nil {
			t.Errorf("%+v: no error", b)
		}
	}
}

// TestFrontendLatency: one request alone; the frontend's 50 ms delay the
// scheduler's first sight of it, so TTFT and end-to-end latency grow by
// exactly 50 ms and TPOT not at all.
func TestFrontendLatency(t *testing.T) {
	tr := Traffic{Requests: []Request{{PromptTokens: 512, OutputTokens: 8}}}
	d := kimiDeployment(t)
	base := mustRun(t, mustNew(t, d), tr, RunOptions{TimelineWindows: -1})
	d.Overheads.FrontendMs = 50
	with := mustRun(t, mustNew(t, d), tr, RunOptions{TimelineWindows: -1})
	if dt := with.TTFTMs.P50 - base.TTFTMs.P50; math.Abs(dt-50) > 1e-6 {
		t.Errorf("TTFT grew by %v ms, want 50", dt)
	}
	if dt := with.E2EMs.P50 - base.E2EMs.P50; math.Abs(dt-50) > 1e-6 {
		t.Errorf("E2E grew by %v ms, want 50", dt)
	}
	if math.Abs(with.TPOTMs.P50-base.TPOTMs.P50) > 1e-9 {
		t.Errorf("TPOT %v ms, want %v", with.TPOTMs.P50, base.TPOTMs.P50)
	}
}

// TestCappedOpenLoop: 40 requests due over 0.04 s (1000 per second)
// under a cap of 3 in flight: at no instant are more than 3 between their
// send and their completion, every request is sent at or after it is due,
// and the run, whose client queue grows at nearly the offered rate, is
// overloaded.
func TestCappedOpenLoop(t *testing.T) {
	s := mustNew(t, kimiDeployment(t))
	res := mustRun(t, s, Traffic{QPS: 1000, Arrival: Constant, Concurrency: 3, NumRequests: 40, Prompt: Lengths{Mean: 256}, Output: Lengths{Mean: 16}},
		RunOptions{TimelineWindows: -1})
	for _, a := range res.PerRequest {
		if a.ArrivalS < a.DueS {
			t.Fatalf("sent at %v before due at %v", a.ArrivalS, a.DueS)
		}
		n := 0
		for _, b := range res.PerRequest {
			if b.ArrivalS <= a.ArrivalS && a.ArrivalS < b.FinishS {
				n++
			}
		}
		if n > 3 {
			t.Fatalf("%d requests in flight at %v s, cap 3", n, a.ArrivalS)
		}
	}
	if !res.Overloaded {
		t.Errorf("not overloaded: offered %.1f, served %.1f req/s", res.OfferedRequestsPerS, res.ServedRequestsPerS)
	}
}

// TestSessions: two turns of one session, both stamped at 0. The second
// (prompt 100 + 10 + 50 = 160 tokens, think time 1 s) is sent 1 s after
// the first completes. Its first 109 tokens are the first turn's
// conversation, whose 6 full blocks of 16 (96 tokens) the cache holds:
// 96 cached prompt tokens of 260. With prefix caching off, none.
func TestSessions(t *testing.T) {
	tr := Traffic{Requests: []Request{
		{PromptTokens: 100, OutputTokens: 10, Session: 7},
		{PromptTokens: 160, OutputTokens: 5, Session: 7, DelayS: 1},
	}}
	d := kimiDeployment(t)
	res := mustRun(t, mustNew(t, d), tr, RunOptions{TimelineWindows: -1})
	first, second := res.PerRequest[0], res.PerRequest[1]
	if math.Abs(second.ArrivalS-(first.FinishS+1)) > 1e-12 {
		t.Errorf("second turn sent at %v, want the first's completion %v + 1 s", second.ArrivalS, first.FinishS)
	}
	if res.CachedPromptTokens != 96 || res.PromptTokens != 260 {
		t.Errorf("cached %d of %d prompt tokens, want 96 of 260", res.CachedPromptTokens, res.PromptTokens)
	}
	d.Engine.NoPrefixCaching = true
	res = mustRun(t, mustNew(t, d), tr, RunOptions{TimelineWindows: -1})
	if res.CachedPromptTokens != 0 {
		t.Errorf("no prefix caching: %d cached tokens, want 0", res.CachedPromptTokens)
	}
}

// FuzzReadOverheads: any input is valid overheads or a *ParseError.
func FuzzReadOverheads(f *testing.F) {
	for _, s := range []string{`{"overheads": {"step_us": 1043, "per_seq_us": 23.8, "prefill_scale": 0.95, "frontend_ms": 330}, "source": ["x"]}`,
		`{"step_us": 5}`, `{"overheads": {"step_us": -1}}`,
		`{"overheads": {"decode_scale": 0.9}, "fitted_on": {"engine": "sglang@0.5", "topology": "nvswitch:8xb200", "gpu": "NVIDIA B200", "model": "deepseek-v3"}}`,
		`{"overheads": {}, "fitted_on": {"engine": "", "gpu": 3}}`, `{"overheads": []}`, `[]`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		file, err := ReadOverheadsFile([]byte(s), "o.json")
		o := file.Overheads
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			return
		}
		if err := o.Validate(); err != nil {
			t.Fatalf("read %+v, invalid: %v", o, err)
		}
	})
}

// TestFrontier places four runs by hand: A (10 tok/s/GPU, TPOT 10 ms:
// 100 tok/s/user), B (50, 20 ms: 50), D (40, 25 ms: 40) and C (60, 50
// ms: 20, overloaded). B beats D on both axes; C is never on the front;
// the front is A then B, by tokens/s per user descending. The TPOT
// objective of 40 ms is a floor of 25 tokens/s per user.
func TestFrontier(t *testing.T) {
	mk := func(load string, perGPU, tpot float64, over, meets bool) *Result {
		return &Result{Load: load, OutputTokensPerSPerGPU: perGPU, TPOTMs: Stats{P50: tpot}, TPOTRequests: 100, Overloaded: over, MeetsSLO: meets}
	}
	runs := []*Result{mk("A", 10, 10, false, true), mk("B", 50, 20, false, true), mk("C", 60, 50, true, false), mk("D", 40, 25, false, true)}
	f := NewFrontier(runs, SLO{TPOTMs: 40}, "g", 1)
	if !reflect.DeepEqual(f.Front, []int{0, 1}) || f.Chosen != 1 || f.UserFloor() != 25 {
		t.Errorf("front %v, chosen %d, floor %v; want [0 1], 1, 25", f.Front, f.Chosen, f.UserFloor())
	}
	if p := f.Points[2]; p.OnFront || !p.Overloaded || p.SLO != "missed" || p.TokensPerSPerUser != 20 {
		t.Errorf("C: %+v", p)
	}
}

// TestFrontierLeavesSLOMissesOff: with an objective the front is drawn
// through the runs that meet it, as plan's front is through the points
// within its SLO and as the chart draws the misses as grey crosses. By
// hand: A (10 tok/s/GPU, TPOT 10 ms) meets it; E (80, 30 ms) misses it;
// F (90, 35 ms) ran too short to be judged. Without the rule E and F,
// which beat A on tokens/s per GPU, would both be on the front; with it
// the front is A alone, and F's verdict reads "too short" as the runs'
// table says, not "missed". Without an objective E and F are on it.
func TestFrontierLeavesSLOMissesOff(t *testing.T) {
	runs := []*Result{
		{Load: "A", OutputTokensPerSPerGPU: 10, TPOTMs: Stats{P50: 10}, TPOTRequests: 10, MeetsSLO: true},
		{Load: "E", OutputTokensPerSPerGPU: 80, TPOTMs: Stats{P50: 30}, TPOTRequests: 10},
		{Load: "F", OutputTokensPerSPerGPU: 90, TPOTMs: Stats{P50: 35}, TPOTRequests: 10, TooShort: true},
	}
	f := NewFrontier(runs, SLO{TPOTMs: 40}, "g", -1)
	if !reflect.DeepEqual(f.Front, []int{0}) {
		t.Errorf("front %v with an SLO: want [0] (A alone: E misses it, F is not judged)", f.Front)
	}
	if got := []string{f.Points[0].SLO, f.Points[1].SLO, f.Points[2].SLO}; !reflect.DeepEqual(got, []string{"met", "missed", "too short"}) {
		t.Errorf("verdicts %q: want met, missed, too short", got)
	}
	if f.Points[1].OnFront || f.Points[2].OnFront {
		t.Errorf("E or F marked on the front: %+v %+v", f.Points[1], f.Points[2])
	}
	for i := range runs {
		runs[i].MeetsSLO = false
	}
	if g := NewFrontier(runs, SLO{}, "g", -1); !reflect.DeepEqual(g.Front, []int{0, 1, 2}) {
		t.Errorf("front %v without an SLO: want [0 1 2] (none dominated)", g.Front)
	}
}

// TestRecvSkipper walks SGLang's receive counter (recv_skipper.py) by
// hand at an interval of 4: a busy scheduler that last ran a decode batch
// reads its socket on every 4th iteration; after a prefill batch it reads
// on the next one (weight 1000); an idle one reads at once.
func TestRecvSkipper(t *testing.T) {
	rp := newReplica(EngineOptions{Policy: PolicySGLang, SchedulerRecvInterval: 4}.withDefaults(nil, vllmScheduler(), 0), 100)
	rp.running = append(rp.running, &reqState{id: 0})
	q := &reqState{id: 1}
	rp.send(q)
	if rp.waiting.len() != 0 || rp.inbox.len() != 1 || rp.queued() != 1 {
		t.Fatalf("sent: waiting %d, inbox %d", rp.waiting.len(), rp.inbox.len())
	}
	for i := 1; i <= 3; i++ {
		if rp.recv(); rp.waiting.len() != 0 {
			t.Fatalf("read at decode iteration %d, want the 4th", i)
		}
	}
	if rp.recv(); rp.waiting.len() != 1 || rp.inbox.len() != 0 {
		t.Fatalf("not read at the 4th decode iteration: waiting %d, inbox %d", rp.waiting.len(), rp.inbox.len())
	}
	rp.waiting.popFront()
	rp.lastExtend = true
	rp.send(&reqState{id: 2})
	if rp.recv(); rp.waiting.len() != 1 {
		t.Error("not read on the iteration after a prefill")
	}
	rp.waiting.popFront()
	rp.running, rp.lastExtend = nil, false
	rp.send(&reqState{id: 3})
	if rp.recv(); rp.waiting.len() != 1 {
		t.Error("an idle scheduler did not read at once")
	}
	// Every step reads under vLLM's policy and SGLang's default.
	for _, o := range []EngineOptions{{}, {Policy: PolicySGLang, SchedulerRecvInterval: 1}} {
		rp := newReplica(o.withDefaults(nil, vllmScheduler(), 0), 100)
		rp.send(&reqState{})
		if rp.waiting.len() != 1 {
			t.Errorf("%+v: a request not queued at once", o)
		}
	}
	if err := (EngineOptions{SchedulerRecvInterval: 30}).Validate(); err == nil || !strings.Contains(err.Error(), "scheduler_recv_interval = 30: SGLang's option") {
		t.Errorf("recv interval under vLLM's policy: %v", err)
	}
}

// TestRecvIntervalTTFT: under SGLang's policy a closed loop of 16 clients
// with a receive interval of 30 waits for the scheduler's read: a request
// sent at a uniform time in a window of 30 decode steps waits 15 of them
// on average, so the mean TTFT grows by about 15 median inter-token
// latencies (the decode step; band 10-20 for the prefills inside the
// windows and the initial burst); the decode steps themselves are the
// same (median ITL within 10 %).
func TestRecvIntervalTTFT(t *testing.T) {
	d := kimiDeployment(t)
	d.Engine = EngineOptions{Policy: PolicySGLang, MaxNumSeqs: 64}
	d.Scenario.Options.Engine = engprof.Ref{Name: "sglang"}
	// Output lengths drawn uniform in 13-243 so the clients' requests
	// finish, and are sent again, at spread times.
	tr := Traffic{Concurrency: 16, NumRequests: 400, Prompt: Lengths{Mean: 256}, Output: Lengths{Dist: Uniform, Mean: 128, Spread: 0.9}}
	base := mustRun(t, mustNew(t, d), tr, RunOptions{TimelineWindows: -1})
	d.Engine.SchedulerRecvInterval = 30
	with := mustRun(t, mustNew(t, d), tr, RunOptions{TimelineWindows: -1})
	steps := (with.TTFTMs.Mean - base.TTFTMs.Mean) / base.ITLMs.P50
	t.Logf("mean TTFT %.1f -> %.1f ms, median ITL %.2f -> %.2f ms: +%.1f decode steps", base.TTFTMs.Mean, with.TTFTMs.Mean, base.ITLMs.P50, with.ITLMs.P50, steps)
	if steps < 10 || steps > 20 {
		t.Errorf("the receive interval added %.1f decode steps to the mean TTFT, want about 15", steps)
	}
	if math.Abs(with.ITLMs.P50/base.ITLMs.P50-1) > 0.1 {
		t.Errorf("median ITL %.2f ms with the interval, %.2f without", with.ITLMs.P50, base.ITLMs.P50)
	}
}

// TestStreamInterval: with the engine streaming 10 tokens a chunk, the
// client's inter-token latency is a chunk's, about 10 decode steps (the
// median within 9-11 of the per-token median), while TTFT and TPOT, timed
// from the first and the last token, do not change at all.
func TestStreamInterval(t *testing.T) {
	d := kimiDeployment(t)
	tr := Traffic{Concurrency: 8, NumRequests: 80, Prompt: Lengths{Mean: 256}, Output: Lengths{Dist: Uniform, Mean: 128, Spread: 0.5}}
	base := mustRun(t, mustNew(t, d), tr, RunOptions{TimelineWindows: -1})
	d.Engine.StreamInterval = 10
	chunked := mustRun(t, mustNew(t, d), tr, RunOptions{TimelineWindows: -1})
	r := chunked.ITLMs.P50 / base.ITLMs.P50
	t.Logf("median ITL %.2f ms per token, %.2f ms per chunk of 10 (x%.2f)", base.ITLMs.P50, chunked.ITLMs.P50, r)
	if r < 9 || r > 11 {
		t.Errorf("median ITL x%.2f with 10 tokens a chunk, want about 10", r)
	}
	if chunked.TTFTMs != base.TTFTMs || chunked.TPOTMs != base.TPOTMs {
		t.Errorf("TTFT %+v / %+v, TPOT %+v / %+v: want them unchanged by the stream interval", chunked.TTFTMs, base.TTFTMs, chunked.TPOTMs, base.TPOTMs)
	}
}

// TestReadOverheadsFileOrigin: the deployment a file was fitted on is read
// back as written; a file without one has none; one missing a field is a
// *ParseError naming fitted_on.
func TestReadOverheadsFileOrigin(t *testing.T) {
	f, err := ReadOverheadsFile([]byte(`{"overheads": {"decode_scale": 0.9}, "fitted_on": {"engine": "sglang@0.5", "topology": "nvswitch:8xb200", "gpu": "NVIDIA B200", "model": "deepseek-v3"}}`), "o.json")
	want := OverheadsOrigin{Engine: engprof.Ref{Name: "sglang", Version: "0.5"}, Topology: "nvswitch:8xb200", GPU: "NVIDIA B200", Model: "deepseek-v3"}
	if err != nil || f.FittedOn == nil || *f.FittedOn != want || f.Overheads.DecodeScale != 0.9 {
		t.Errorf("read %+v (origin %+v), %v; want decode 0.9 and origin %+v", f, f.FittedOn, err, want)
	}
	if f, err := ReadOverheadsFile([]byte(`{"overheads": {"decode_scale": 0.9}}`), "o.json"); err != nil || f.FittedOn != nil {
		t.Errorf("no origin: read %+v, %v; want none", f.FittedOn, err)
	}
	_, err = ReadOverheadsFile([]byte(`{"overheads": {}, "fitted_on": {"engine": "sglang@0.5", "topology": "x"}}`), "o.json")
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Field != "fitted_on" {
		t.Errorf("origin without gpu and model: %v; want a *ParseError of fitted_on", err)
	}
}

// TestReadOverheadsFileUnknownKeys: a key the file's schema does not name
// is refused naming it: a misspelt term inside overheads, a misspelt
// wrapper (read as a bare object, whose keys are the terms, fitted_on and
// source), another top-level key beside overheads. Each had been read as
// no such term, so the file applied zero overheads (or a decode scale of
// 1) without a word. The file calibrate writes, and a bare object, read.
func TestReadOverheadsFileUnknownKeys(t *testing.T) {
	for _, c := range []struct{ text, field string }{
		{`{"overheads": {"decode_scal": 0.9}}`, "overheads.decode_scal"},
		{`{"overhead": {"decode_scale": 0.9}, "fitted_on": null}`, "overhead"},
		{`{"overheads": {"decode_scale": 0.9}, "note": "x"}`, "note"},
	} {
		_, err := ReadOverheadsFile([]byte(c.text), "o.json")
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Field != c.field || !strings.Contains(err.Error(), "unknown field") {
			t.Errorf("%s: %v; want a *ParseError of field %q, unknown", c.text, err, c.field)
		}
	}
	for _, ok := range []string{
		`{"overheads": {"decode_scale": 0.9, "frontend_ms": 64.5}, "fitted_on": {"engine": "vllm@0.24", "topology": "t", "gpu": "g", "model": "m"}, "source": ["fitted on x"]}`,
		`{"step_us": 5, "source": ["x"]}`,
	} {
		if _, err := ReadOverheadsFile([]byte(ok), "o.json"); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// TestReadOverheadsFileWithoutTerms: a file with neither the "overheads"
// object nor a term at the top (a fitted file that lost "overheads", or
// {}) is refused naming the file and field; it read as overheads of zero.
func TestReadOverheadsFileWithoutTerms(t *testing.T) {
	for _, s := range []string{`{}`, `{"fitted_on": {"engine": "vllm@0.24", "topology": "h200-nvswitch", "gpu": "NVIDIA H200", "model": "deepseek-v3"}, "source": ["fitted on r.json"]}`, `{"source": ["x"]}`} {
		_, err := ReadOverheadsFile([]byte(s), "o.json")
		var pe *ParseError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), `o.json:1: field "overheads": missing`) {
			t.Errorf("%s: err %v; want a ParseError naming o.json and field \"overheads\"", s, err)
		}
	}
	// A bare term, or the object (empty: every term at its default), reads.
	for _, s := range []string{`{"step_us": 5}`, `{"overheads": {}}`} {
		if _, err := ReadOverheadsFile([]byte(s), "o.json"); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}
