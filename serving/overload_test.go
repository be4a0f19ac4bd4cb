package serving

import (
	"encoding/json"
	"math"
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
