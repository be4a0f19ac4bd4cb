package serving

import (
	"encoding/json"
	"math"
	"sort"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
)

// TestLoadBalance: offered and served rates and the queue's growth from
// the trend of TTFT, on requests whose times are set by hand. 201
// requests arrive at i/10 s, 0 to 20 s; the second half, [10, 20] s,
// holds requests 100 to 200: 101 in 10 s, offered 10.1/s. A FCFS queue
// drained at 4/s gives request i its first token at i/4 s: TTFT rises
// 1.5 s per s, so served = 10.1 / 2.5 = 4.04 and the queue grows by 6.06
// requests/s. A carried load has a flat TTFT (here 0.3 s with a +-0.05 s
// alternation): served = offered; so does one whose TTFT rose only in the
// first half (the ramp-up).
func TestLoadBalance(t *testing.T) {
	mk := func(n int, rate float64, ttft func(i int, at float64) float64) []RequestResult {
		out := make([]RequestResult, n)
		for i := range out {
			at := float64(i) / rate
			out[i] = RequestResult{Request: Request{ArrivalS: at, OutputTokens: 2}, DueS: at, FirstTokenS: at + ttft(i, at)}
		}
		return out
	}
	for _, tc := range []struct {
		name                    string
		reqs                    []RequestResult
		offered, served, growth float64
		trend                   bool // sigmas above the rule's 3
	}{
		{"fcfs 10 in, 4 out", mk(201, 10, func(_ int, at float64) float64 { return at*10/4 - at }), 10.1, 4.04, 6.06, true},
		{"carried", mk(201, 10, func(i int, _ float64) float64 { return 0.3 + 0.05*float64(1-2*(i%2)) }), 10.1, 10.1, 0, false},
		{"ramp-up in the first half only", mk(201, 10, func(_ int, at float64) float64 { return 0.3 + math.Min(at, 5) }), 10.1, 10.1, 0, false},
		{"all at once", []RequestResult{{}, {}, {}}, 0, 0, 0, false},
		{"two requests", mk(2, 1, func(int, float64) float64 { return 1 }), 0, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			offered, served, growth, sigmas := loadBalance(tc.reqs)
			for _, c := range [][3]float64{{offered, tc.offered, 0}, {served, tc.served, 1}, {growth, tc.growth, 2}} {
				if math.Abs(c[0]-c[1]) > 1e-9*math.Max(1, c[1]) {
					t.Errorf("%s = %v, want %v", []string{"offered", "served", "growth"}[int(c[2])], c[0], c[1])
				}
			}
			if (sigmas >= overloadSigmas) != tc.trend {
				t.Errorf("trend %.1f standard errors: want above %d: %v", sigmas, overloadSigmas, tc.trend)
			}
		})
	}
}

// TestOverload: the overload rule on the scheduler. The engine is held to
// 64 running requests of 32 + 512 tokens, so its capacity is the best
// static batch of up to 64 at the mean context 288 (TestSaturation: the
// simulation reaches it within 5 %) divided by 512 tokens a request.
// Offered at 3x that, the run is overloaded and serves about the
// capacity (within 15 %: prefill is left out of the static bound) while
// the queue grows by the difference, its TTFT and E2E are null in JSON
// and it meets no SLO; at half of it, the load is carried (served within
// 5 % of offered); a closed loop of more clients than running slots is
// never overloaded.
func TestOverload(t *testing.T) {
	const prompt, output = 32, 512
	d := kimiDeployment(t)
	d.Engine = EngineOptions{MaxNumSeqs: 64}
	s := mustNew(t, d)
	p, err := sim.New(d.Scenario.Topo, d.Scenario.Options)
	if err != nil {
		t.Fatal(err)
	}
	bestTokPerS := 0.0
	for _, b := range []int{1, 8, 16, 32, 48, 56, 64} {
		sc := d.Scenario
		sc.Workload = model.Workload{Phase: model.Decode, Batch: b, Context: prompt + output/2, KVDtype: model.FP8}
		sum, err := p.Evaluate(sc)
		if err != nil {
			t.Fatal(err)
		}
		bestTokPerS = math.Max(bestTokPerS, sum.TokensPerS)
	}
	capacity := bestTokPerS / output
	slo := SLO{TPOTMs: 1000} // met by every run's decode: only the overload can fail it
	for _, tc := range []struct {
		name       string
		tr         Traffic
		overloaded bool
	}{
		{"3x capacity", Traffic{QPS: 3 * capacity, NumRequests: 600, Prompt: Lengths{Mean: prompt}, Output: Lengths{Mean: output}, Seed: 11}, true},
		{"half capacity", Traffic{QPS: capacity / 2, NumRequests: 300, Prompt: Lengths{Mean: prompt}, Output: Lengths{Mean: output}, Seed: 11}, false},
		{"closed loop over the slots", Traffic{Concurrency: 96, NumRequests: 600, Prompt: Lengths{Mean: prompt}, Output: Lengths{Mean: output}, Seed: 11}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRun(t, s, tc.tr, RunOptions{SLO: slo})
			t.Logf("capacity %.3f req/s; offered %.3f, served %.3f, growth %.3f req/s; TTFT p50 %.0f ms", capacity, r.OfferedRequestsPerS, r.ServedRequestsPerS, r.QueueGrowthPerS, r.TTFTMs.P50)
			if r.Overloaded != tc.overloaded {
				t.Fatalf("overloaded %v, want %v", r.Overloaded, tc.overloaded)
			}
			if math.Abs(r.OfferedRequestsPerS-r.ServedRequestsPerS-r.QueueGrowthPerS) > 1e-9*r.OfferedRequestsPerS {
				t.Errorf("offered %v - served %v != growth %v", r.OfferedRequestsPerS, r.ServedRequestsPerS, r.QueueGrowthPerS)
			}
			js, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			nulls := strings.Contains(string(js), `"ttft_ms":null`) && strings.Contains(string(js), `"e2e_ms":null`)
			switch {
			case tc.overloaded:
				if math.Abs(r.ServedRequestsPerS/capacity-1) > 0.15 || r.QueueGrowthPerS <= OverloadGrowthFrac*r.OfferedRequestsPerS {
					t.Errorf("served %.3f req/s against a capacity of %.3f, growth %.3f", r.ServedRequestsPerS, capacity, r.QueueGrowthPerS)
				}
				if !nulls || r.MeetsSLO {
					t.Errorf("overloaded run: TTFT and E2E null in JSON %v, meets the SLO %v", nulls, r.MeetsSLO)
				}
			default:
				if tc.tr.QPS > 0 && math.Abs(r.ServedRequestsPerS/r.OfferedRequestsPerS-1) > 0.05 {
					t.Errorf("carried load: served %.3f of %.3f offered", r.ServedRequestsPerS, r.OfferedRequestsPerS)
				}
				if nulls || !r.MeetsSLO {
					t.Errorf("carried load: TTFT and E2E null in JSON %v, meets the SLO %v", nulls, r.MeetsSLO)
				}
			}
		})
	}
}

// TestTPOTTrend: the rise of TPOT across the judging window, read over
// the requests that complete in it, on requests whose times are set by
// hand. 201 requests arrive at i/10 s (0 to 20 s): the window is [10, 20]
// s. Each has 11 output tokens, its first 0.1 s after it arrives, so it
// completes at at + 0.1 + 10 x TPOT.
//   - A batch that grows: TPOT = 0.02 + 0.001 x at s, completing at
//     1.01 at + 0.3; those completing in [10, 20] arrived at 9.7 to 19.5
//     s (i = 97..195, mean arrival 14.6 s, mean TPOT 0.0346 s), and TPOT
//     rises 0.001 / 1.01 per second of completion: 10 x 0.001 / 1.01 /
//     0.0346 = 28.6 % across the window, every point on the line.
//   - A steady state: TPOT 0.03 +- 0.005 s alternating: no rise.
//   - A drain: TPOT 0.03 s, falling to 0.015 s for the requests arriving
//     after 17 s, which (101 output tokens, 3.1 s) complete after the
//     window: no rise, though TPOT by arrival time falls at the end.
func TestTPOTTrend(t *testing.T) {
	mk := func(out int, tpot func(i int, at float64) float64) []RequestResult {
		reqs := make([]RequestResult, 201)
		for i := range reqs {
			at := float64(i) / 10
			first := at + 0.1
			reqs[i] = RequestResult{Request: Request{ArrivalS: at, OutputTokens: out}, DueS: at, FirstTokenS: first, FinishS: first + float64(out-1)*tpot(i, at)}
		}
		return reqs
	}
	for _, tc := range []struct {
		name  string
		reqs  []RequestResult
		rise  float64
		rises bool // above OverloadGrowthFrac at overloadSigmas
	}{
		{"growing batch", mk(11, func(_ int, at float64) float64 { return 0.02 + 0.001*at }), 10 * 0.001 / 1.01 / (0.02 + 0.001*14.6), true},
		{"steady", mk(11, func(i int, _ float64) float64 { return 0.03 + 0.005*float64(1-2*(i%2)) }), 0, false},
		{"drain after the window", mk(101, func(_ int, at float64) float64 {
			if at > 17 {
				return 0.03 - 0.015*(at-17)/3
			}
			return 0.03
		}), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, ok := judgingWindow(tc.reqs)
			if !ok || a != 10 || b != 20 {
				t.Fatalf("window [%v, %v] (%v), want [10, 20]", a, b, ok)
			}
			rise, sigmas, ok := tpotTrend(tc.reqs, a, b)
			if !ok {
				t.Fatal("no trend")
			}
			if math.Abs(rise-tc.rise) > 0.01 {
				t.Errorf("rise %.4f, want %.4f", rise, tc.rise)
			}
			if got := rise > OverloadGrowthFrac && sigmas >= overloadSigmas; got != tc.rises {
				t.Errorf("rise %.3f at %.1f standard errors: overloaded %v, want %v", rise, sigmas, got, tc.rises)
			}
		})
	}
}

// TestSteadyState: a run whose arrivals span less than SteadyStateE2Es
// median end-to-end latencies (both computed here from the requests'
// own times) is too short: it meets no SLO, however its percentiles
// fall; run again with its MinRequests it spans enough and meets the
// same SLO. 12 requests at 0.5 req/s span about 22 s against an E2E of
// about 6 s (1024 + 256 tokens on the RTX PRO 6000 box): under 4 x 6 s.
func TestSteadyState(t *testing.T) {
	s := mustNew(t, kimiDeployment(t))
	slo := SLO{TTFTMs: 1e6, TPOTMs: 1e6} // met by every request
	tr := Traffic{QPS: 0.5, NumRequests: 12, Prompt: Lengths{Mean: 1024}, Output: Lengths{Mean: 256}, Seed: 3}
	for round := 0; round < 2; round++ {
		r := mustRun(t, s, tr, RunOptions{SLO: slo})
		first, last := math.Inf(1), math.Inf(-1)
		e2e := make([]float64, len(r.PerRequest))
		for i, q := range r.PerRequest {
			first, last = math.Min(first, q.DueS), math.Max(last, q.DueS)
			e2e[i] = q.FinishS - q.ArrivalS
		}
		sort.Float64s(e2e)
		median := (e2e[(len(e2e)-1)/2] + e2e[len(e2e)/2]) / 2
		short := last-first < SteadyStateE2Es*median
		t.Logf("round %d: %d requests over %.1f s, E2E p50 %.2f s", round, r.Requests, last-first, median)
		if r.TooShort != short || r.MeetsSLO == short || r.Overloaded {
			t.Fatalf("round %d: too short %v (want %v), meets the SLO %v, overloaded %v", round, r.TooShort, short, r.MeetsSLO, r.Overloaded)
		}
		if round == 0 {
			if !short || r.MinRequests <= tr.NumRequests {
				t.Fatalf("the first run must be too short, and ask for more than %d requests: %d", tr.NumRequests, r.MinRequests)
			}
			tr.NumRequests = r.MinRequests
		} else if short {
			t.Errorf("%d requests, as MinRequests asked, are still too short", tr.NumRequests)
		}
	}
}

// TestGoodputWithinServed: goodput is measured on the window of the
// offered and served rates, so it never exceeds the served rate. At 0.5
// req/s (seed 0) the second half of the arrivals comes at 0.45 req/s
// while the whole run averages 0.49: goodput over the whole run was
// above the served rate. Every request meeting the SLO, goodput is the
// served rate; none meeting it, 0.
func TestGoodputWithinServed(t *testing.T) {
	s := mustNew(t, kimiDeployment(t))
	tr := Traffic{QPS: 0.5, NumRequests: 1000, Prompt: Lengths{Mean: 1024}, Output: Lengths{Mean: 256}}
	for _, tc := range []struct {
		name string
		slo  SLO
		want func(served float64) float64 // NaN: only bounded by served
	}{
		{"2 s / 50 ms", SLO{TTFTMs: 2000, TPOTMs: 50}, func(float64) float64 { return math.NaN() }},
		{"every request good", SLO{TTFTMs: 1e6}, func(served float64) float64 { return served }},
		{"none good", SLO{TTFTMs: 1e-6}, func(float64) float64 { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRun(t, s, tr, RunOptions{SLO: tc.slo, TimelineWindows: -1})
			if !(r.ServedRequestsPerS > 0) || r.GoodputRequestsPerS > r.ServedRequestsPerS*(1+1e-12) {
				t.Errorf("goodput %.4f req/s above the served rate %.4f", r.GoodputRequestsPerS, r.ServedRequestsPerS)
			}
			if w := tc.want(r.ServedRequestsPerS); !math.IsNaN(w) && math.Abs(r.GoodputRequestsPerS-w) > 1e-9 {
				t.Errorf("goodput %.4f req/s, want %.4f", r.GoodputRequestsPerS, w)
			}
		})
	}
}

// TestSweepRefusesShortTrace: a QPS sweep over a trace's own requests,
// which cannot be lengthened, answers nothing rather than judge a run
// that never reached steady state: 30 requests arrive within 3 s at 10
// req/s, each lasting seconds.
func TestSweepRefusesShortTrace(t *testing.T) {
	s := mustNew(t, kimiDeployment(t))
	reqs := make([]Request, 30)
	for i := range reqs {
		reqs[i] = Request{PromptTokens: 1024, OutputTokens: 256}
	}
	_, err := s.SweepQPS(Traffic{Requests: reqs}, SLO{TPOTMs: 1e6}, SweepOptions{StartQPS: 10})
	if err == nil || !strings.Contains(err.Error(), "too short to reach steady state") {
		t.Fatalf("err %v: want the run too short to reach steady state", err)
	}
}

// TestBatchTrend: how fast the requests in the system grow over the
// judging window, counted as each of its requests arrives, on requests
// whose times are set by hand: 201 arrive at i/10 s (10 per second), the
// window is [10, 20] s.
//   - Served at 5 per second in arrival order (request i completes at
//     1 + i/5 s): at t the system holds the 10 t + 1 arrived less the
//     5 (t - 1) + 1 completed, 5 t + 5: it grows by 5 requests/s.
//   - Each done 2 s after it arrives: 20 in the system at every arrival
//     of the window: no growth.
func TestBatchTrend(t *testing.T) {
	mk := func(finish func(i int, at float64) float64) []RequestResult {
		reqs := make([]RequestResult, 201)
		for i := range reqs {
			at := float64(i) / 10
			reqs[i] = RequestResult{Request: Request{ArrivalS: at, OutputTokens: 2}, DueS: at, FirstTokenS: at, FinishS: finish(i, at)}
		}
		return reqs
	}
	for _, tc := range []struct {
		name   string
		reqs   []RequestResult
		growth float64
	}{
		{"served at half the rate", mk(func(i int, _ float64) float64 { return 1 + float64(i)/5 }), 5},
		{"carried", mk(func(_ int, at float64) float64 { return at + 2 }), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, ok := judgingWindow(tc.reqs)
			if !ok {
				t.Fatal("no window")
			}
			growth, _, ok := batchTrend(tc.reqs, a, b)
			if !ok || math.Abs(growth-tc.growth) > 0.05 {
				t.Errorf("growth %.3f requests/s (%v), want %v", growth, ok, tc.growth)
			}
		})
	}
}

// halvesOf checks a run the other way than the overload rule reads it:
// the TPOT of the judging window's completions in its second half over
// that in its first, less one; and whether the requests in the system at
// the arrivals of the window's last quarter outnumber those at its first
// quarter's by more than OverloadGrowthFrac of the requests arriving in
// between.
func halvesOf(t *testing.T, r *Result) (tpotRise float64, grows bool) {
	t.Helper()
	a, b, ok := judgingWindow(r.PerRequest)
	if !ok {
		t.Fatal("no window")
	}
	var tp [2]float64
	var n [2]int
	for _, q := range r.PerRequest {
		if q.FinishS >= a && q.FinishS <= b && q.OutputTokens > 1 {
			h := 0
			if q.FinishS > (a+b)/2 {
				h = 1
			}
			tp[h] += q.TPOTS()
			n[h]++
		}
	}
	tpotRise = (tp[1]/float64(n[1]))/(tp[0]/float64(n[0])) - 1
	inSystem := func(lo, hi float64) (mean float64, arrivals int) {
		var sum float64
		for _, q := range r.PerRequest {
			if q.DueS < lo || q.DueS > hi {
				continue
			}
			arrivals++
			for _, o := range r.PerRequest {
				if o.DueS <= q.DueS && o.FinishS > q.DueS {
					sum++
				}
			}
		}
		return sum / float64(arrivals), arrivals
	}
	q := (b - a) / 4
	early, _ := inSystem(a, a+q)
	late, _ := inSystem(b-q, b)
	_, between := inSystem(a+q/2, b-q/2) // arrivals between the quarters' midpoints
	t.Logf("%s, %d requests: TPOT %+.1f %% (rule %+.1f %%); in system %.0f -> %.0f over %d arrivals (rule %.3f/s)", r.Load, r.Requests, 100*tpotRise, 100*r.TPOTRiseFrac, early, late, between, r.BatchGrowthPerS)
	return tpotRise, late-early > OverloadGrowthFrac*float64(between)
}

// TestFillingIsNotOverload: Kimi-K2.5 on the RTX PRO 6000 box at 5
// req/s of 32 + 512 tokens, whose steps slow as its batch grows: over
// the second half of 2000 requests the batch and TPOT still rise
// (halvesOf: the second half's completions more than 5 % slower per
// token, the system more than 5 % of the arrivals fuller), TTFT flat (the
// queue rule does not fire), so the run is not steady: too short, no SLO
// verdict, 4000 requests to tell. Lengthened (steadyRun) they level off:
// the engine was filling, and carries the load. At 2 req/s one run is
// steady.
func TestFillingIsNotOverload(t *testing.T) {
	s := mustNew(t, kimiDeployment(t))
	tr := func(qps float64) Traffic {
		return Traffic{QPS: qps, NumRequests: 2000, Prompt: Lengths{Mean: 32}, Output: Lengths{Mean: 512}}
	}
	o := RunOptions{SLO: SLO{TPOTMs: 1e6}, TimelineWindows: -1}
	t.Run("steady at 2 req/s", func(t *testing.T) {
		r := mustRun(t, s, tr(2), o)
		if rise, grows := halvesOf(t, r); rise > OverloadGrowthFrac && grows {
			t.Fatal("the case does not hold: the batch grows at 2 req/s")
		}
		if r.TPOTRises || r.TooShort || r.Overloaded || !r.MeetsSLO {
			t.Errorf("TPOT rises %v, too short %v, overloaded %v, meets the SLO %v; want a carried load", r.TPOTRises, r.TooShort, r.Overloaded, r.MeetsSLO)
		}
	})
	t.Run("filling at 5 req/s", func(t *testing.T) {
		r := mustRun(t, s, tr(5), o)
		if rise, grows := halvesOf(t, r); !(rise > OverloadGrowthFrac && grows) {
			t.Fatal("the case does not hold: the batch does not grow over 2000 requests")
		}
		if r.QueueGrows || !r.TPOTRises || !r.TooShort || r.Overloaded || r.MeetsSLO || r.MinRequests != 4000 {
			t.Errorf("one run: queue grows %v, TPOT rises %v, too short %v (min requests %d), overloaded %v, meets the SLO %v; want not steady, 4000 requests to tell",
				r.QueueGrows, r.TPOTRises, r.TooShort, r.MinRequests, r.Overloaded, r.MeetsSLO)
		}
		r, longer, err := s.steadyRun(tr(5), o)
		if err != nil {
			t.Fatal(err)
		}
		if rise, grows := halvesOf(t, r); rise > OverloadGrowthFrac && grows {
			t.Fatal("the case does not hold: the lengthened run's batch still grows")
		}
		if !longer || r.TPOTRises || r.TooShort || r.Overloaded || !r.MeetsSLO {
			t.Errorf("lengthened %v to %d requests: TPOT rises %v, too short %v, overloaded %v, meets the SLO %v; want carried", longer, r.Requests, r.TPOTRises, r.TooShort, r.Overloaded, r.MeetsSLO)
		}
	})
}

// TestOverloadNotSteady: with no cap on its batch (8192 requests, the
// most vLLM takes beside its 8192-token step budget, and
// nearly every KV block the GPU holds beside the weights and the
// activations of vLLM's profiling step, whose sampler takes 8192 rows of
// logits here: 34,000 blocks of 16 tokens, 544 k tokens) the engine admits every arrival of 16 req/s at
// once, twice what TestFillingIsNotOverload's engine levels off at: the
// batch grows with the run, and with it TPOT and E2E, until the steps'
// token budget holds requests back and the queue grows too. 100 requests
// are too short to tell anything; steadyRun lengthens the run until it
// does: overloaded, E2E null in JSON.
func TestOverloadNotSteady(t *testing.T) {
	d := kimiDeployment(t)
	d.Engine = EngineOptions{MaxNumSeqs: 8192, NumGPUBlocksOverride: 34_000}
	s := mustNew(t, d)
	tr := Traffic{QPS: 16, NumRequests: 100, Prompt: Lengths{Mean: 32}, Output: Lengths{Mean: 512}}
	o := RunOptions{SLO: SLO{TPOTMs: 1e6}, TimelineWindows: -1}
	if r := mustRun(t, s, tr, o); !r.TooShort || r.Overloaded || r.MeetsSLO {
		t.Fatalf("100 requests: too short %v, overloaded %v, meets the SLO %v; want too short", r.TooShort, r.Overloaded, r.MeetsSLO)
	}
	r, longer, err := s.steadyRun(tr, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("lengthened to %d requests: queue grows %v, TPOT rises %v, E2E p50 %.0f s over arrivals of %.0f s", r.Requests, r.QueueGrows, r.TPOTRises, r.E2EMs.P50/1e3, r.ArrivalSpanS)
	if !longer || !r.Overloaded || r.TooShort || r.MeetsSLO {
		t.Fatalf("lengthened %v: overloaded %v, too short %v, meets the SLO %v; want overloaded", longer, r.Overloaded, r.TooShort, r.MeetsSLO)
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	if string(m["e2e_ms"]) != "null" {
		t.Errorf("JSON e2e_ms %.30s: want null", m["e2e_ms"])
	}
}

// TestSettleLengthened: what steadyRun concludes from its last run. An
// open loop still not steady after it was lengthened (its batch still
// growing, or its arrivals still short of SteadyStateE2Es latencies) is
// overloaded, its latencies keeping pace with its length: TPOT unbounded
// when its batch grew. Not lengthened, or a closed loop (its clients
// bound it), it stays too short; a steady run stays as it is.
func TestSettleLengthened(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		r                           Result
		lengthened, open            bool
		overloaded, short, tpotNull bool
	}{
		{"batch still growing", Result{TooShort: true, TPOTRises: true, MinRequests: 8000}, true, true, true, false, true},
		{"still short of the span", Result{TooShort: true, MinRequests: 8000}, true, true, true, false, false},
		{"not lengthened", Result{TooShort: true, TPOTRises: true, MinRequests: 8000}, false, true, false, true, false},
		{"closed loop", Result{TooShort: true, MinRequests: 8000}, true, false, false, true, false},
		{"steady", Result{}, true, true, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			settleLengthened(&r, tc.lengthened, tc.open)
			if r.Overloaded != tc.overloaded || r.TooShort != tc.short || r.TPOTUnbounded() != tc.tpotNull || (r.Overloaded && r.MinRequests != 0) {
				t.Errorf("overloaded %v, too short %v, TPOT unbounded %v, min requests %d; want %v, %v, %v", r.Overloaded, r.TooShort, r.TPOTUnbounded(), r.MinRequests, tc.overloaded, tc.short, tc.tpotNull)
			}
		})
	}
}

// TestGoodputOnlyWhereJudged: goodput counts the requests of the
// judging window that met the SLO, each by its own TTFT and TPOT; where
// those latencies describe the run's length (an overloaded run's TTFT
// while its queue grows) or a filling engine (a run too short to reach
// steady state), so does the count, and the runs' table printed it
// beside "unbounded" or "too short" (36 req/s offered to DeepSeek-V3 on
// an H200 box, served 25.3, printed goodput 25.292 under a 100 s TTFT
// limit: every request of a finite run waited less than that). Such a
// run's goodput is not judged: GoodputJudged is false and JSON carries
// no goodput; a steady run's is, and a TPOT-only SLO still judges an
// overloaded run whose TPOT stays bounded.
func TestGoodputOnlyWhereJudged(t *testing.T) {
	slo := SLO{TTFTMs: 100000, TPOTMs: 100}
	cases := []struct {
		name   string
		r      Result
		judged bool
	}{
		{"steady", Result{SLO: slo, GoodputRequestsPerS: 2}, true},
		{"queue grows, TTFT limit", Result{SLO: slo, QueueGrows: true, Overloaded: true, GoodputRequestsPerS: 25}, false},
		{"queue grows, TPOT limit only", Result{SLO: SLO{TPOTMs: 100}, QueueGrows: true, Overloaded: true, GoodputRequestsPerS: 25}, true},
		{"TPOT rises, TPOT limit", Result{SLO: SLO{TPOTMs: 100}, Overloaded: true, TPOTRises: true, GoodputRequestsPerS: 25}, false},
		{"too short", Result{SLO: slo, TooShort: true, GoodputRequestsPerS: 1}, false},
		{"no SLO", Result{}, false},
	}
	for _, c := range cases {
		if got := c.r.GoodputJudged(); got != c.judged {
			t.Errorf("%s: judged %v, want %v", c.name, got, c.judged)
		}
		b, err := json.Marshal(c.r)
		if err != nil {
			t.Fatal(err)
		}
		if has := strings.Contains(string(b), `"goodput_requests_per_s"`); has != c.judged {
			t.Errorf("%s: JSON carries goodput %v, want %v: %s", c.name, has, c.judged, b)
		}
	}
}
