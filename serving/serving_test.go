package serving

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/internal/testfix"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// mustPreset and mustTopo resolve the scenario's model and box (testfix).
var mustPreset, mustTopo = testfix.Arch, testfix.Box

// kimiDeployment is Kimi-K2.5 (INT4 experts) at TP 8 with an FP8 cache on
// the dual-socket RTX PRO 6000 box, CUDA graphs and NCCL_P2P_LEVEL=SYS.
func kimiDeployment(t testing.TB) Deployment {
	return Deployment{
		Scenario: sim.Scenario{Arch: mustPreset(t, "kimi-k2.5"), Plan: model.Plan{TP: 8}, Workload: model.Workload{KVDtype: model.FP8},
			Topo:    mustTopo(t, "rtxpro6000-2s"),
			Options: sim.Options{CUDAGraphs: true, NCCL: ncclenv.Settings{P2PLevel: "SYS"}}},
	}
}

func mustNew(t testing.TB, d Deployment) *Simulator {
	t.Helper()
	s, err := New(d)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustRun(t testing.TB, s *Simulator, tr Traffic, o RunOptions) *Result {
	t.Helper()
	res, err := s.Run(tr, o)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestLittlesLaw: over a long stable run the time-average number of
// requests in the system (integrated from the arrival and completion
// events) equals the offered rate times the mean end-to-end latency
// (computed from each request's times), within 2 %. The offered rate is
// the configured QPS, not the run's measured one, so the check also
// covers the arrival processes.
func TestLittlesLaw(t *testing.T) {
	s := mustNew(t, kimiDeployment(t))
	cases := []struct {
		name string
		tr   Traffic
	}{
		{"poisson 2 qps", Traffic{QPS: 2, Arrival: Poisson, DurationS: 7200, Prompt: Lengths{Mean: 1024}, Output: Lengths{Mean: 256}, Seed: 1}},
		{"gamma 2 qps burstiness 0.5", Traffic{QPS: 2, Arrival: Gamma, Burstiness: 0.5, DurationS: 7200,
			Prompt: Lengths{Dist: LogNormal, Mean: 1024, Spread: 0.6}, Output: Lengths{Dist: Uniform, Mean: 256, Spread: 0.5}, Seed: 2}},
		{"constant 3 qps", Traffic{QPS: 3, Arrival: Constant, DurationS: 7200, Prompt: Lengths{Mean: 512}, Output: Lengths{Mean: 128}, Seed: 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := mustRun(t, s, c.tr, RunOptions{})
			want := c.tr.QPS * res.E2EMs.Mean / 1e3
			e := res.MeanConcurrency/want - 1
			t.Logf("%d requests over %.0f s: mean in system %.3f, QPS x mean latency %.3f (%+.2f %%); running %.2f + waiting %.2f",
				res.Requests, res.DurationS, res.MeanConcurrency, want, 100*e, res.MeanRunning, res.MeanWaiting)
			if math.Abs(e) > 0.02 {
				t.Errorf("mean in system %.3f, QPS x mean latency %.3f: %+.2f %% (want within 2 %%)", res.MeanConcurrency, want, 100*e)
			}
			if d := res.MeanRunning + res.MeanWaiting - res.MeanConcurrency; math.Abs(d) > 1e-9*res.MeanConcurrency {
				t.Errorf("running %.6f + waiting %.6f != in system %.6f", res.MeanRunning, res.MeanWaiting, res.MeanConcurrency)
			}
		})
	}
}

// TestLowLoad: one request at a time (constant arrivals 60 s apart, far
// more than a request's latency), so every step holds a single request.
// Its time to first token is then the predicted one-prompt prefill step
// (sim.PredictScenario, batch 1, context = prompt); its time per output
// token the mean of the batch-1 decode steps over contexts prompt to
// prompt + output - 2, which is the step at their mean context when the
// step is linear in the context, as attention's cache read makes it. The
// memo rounds a step's features up by at most 1/32
// (sim.IterationBucketBound), which bounds the gap above; below, 0.5 %.
// A Poisson run at a rate low enough that requests rarely overlap agrees
// at the median.
func TestLowLoad(t *testing.T) {
	d := kimiDeployment(t)
	s := mustNew(t, d)
	p, err := sim.New(d.Scenario.Topo, d.Scenario.Options)
	if err != nil {
		t.Fatal(err)
	}
	step := func(w model.Workload) float64 {
		sc := d.Scenario
		w.KVDtype = model.FP8
		sc.Workload = w
		pr, err := p.PredictScenario(sc)
		if err != nil {
			t.Fatal(err)
		}
		return pr.StepUs / 1e3
	}
	check := func(t *testing.T, what string, got, want float64) {
		t.Helper()
		e := got/want - 1
		t.Logf("%s: simulated %.3f ms, predicted step %.3f ms (%+.2f %%)", what, got, want, 100*e)
		if e < -0.005 || e > sim.IterationBucketBound.Above+0.005 {
			t.Errorf("%s: simulated %.3f ms, predicted %.3f ms: %+.2f %% outside [-0.5, +%.1f] %%", what, got, want, 100*e, 100*(sim.IterationBucketBound.Above+0.005))
		}
	}
	for _, c := range []struct{ prompt, output int }{{1024, 64}, {3000, 200}, {600, 16}} {
		t.Run(fmt.Sprintf("constant/prompt=%d/output=%d", c.prompt, c.output), func(t *testing.T) {
			res := mustRun(t, s, Traffic{QPS: 1.0 / 60, Arrival: Constant, NumRequests: 5,
				Prompt: Lengths{Mean: c.prompt}, Output: Lengths{Mean: c.output}}, RunOptions{})
			if res.E2EMs.P99 > 60e3 {
				t.Fatalf("a request took %.0f ms: requests overlap", res.E2EMs.P99)
			}
			check(t, "TTFT", res.TTFTMs.P50, step(model.Workload{Phase: model.Prefill, Batch: 1, Context: c.prompt}))
			meanCtx := c.prompt + (c.output-2)/2
			check(t, "TPOT", res.TPOTMs.Mean, step(model.Workload{Phase: model.Decode, Batch: 1, Context: meanCtx}))
		})
	}
	t.Run("poisson 0.01 qps", func(t *testing.T) {
		res := mustRun(t, s, Traffic{QPS: 0.01, NumRequests: 200, Prompt: Lengths{Mean: 1024}, Output: Lengths{Mean: 64}, Seed: 9}, RunOptions{})
		check(t, "median TTFT", res.TTFTMs.P50, step(model.Workload{Phase: model.Prefill, Batch: 1, Context: 1024}))
		check(t, "median TPOT", res.TPOTMs.P50, step(model.Workload{Phase: model.Decode, Batch: 1, Context: 1024 + 31}))
	})
}

// steadyOutputRate is the output tokens/s over the middle of a run (its
// timeline windows from 20 % to 80 % of the duration), away from the ramp
// up and the drain.
func steadyOutputRate(res *Result) float64 {
	n := len(res.Timeline)
	sum := 0.0
	lo, hi := n/5, n*4/5
	for _, w := range res.Timeline[lo:hi] {
		sum += w.OutputTokensPerS
	}
	return sum / float64(hi-lo)
}

// TestSaturation: under more load than the engine can take, its
// throughput is the best static batch that fits: sim's prediction of a
// decode step of B sequences at the run's mean context, best over the B
// the limit allows. Short prompts (32 tokens) keep prefill a small part of
// the work; the run's mean context is 32 + 512/2 = 288.
//
// max_num_seqs (64 running of 96 clients): within 5 %.
//
// The KV pool (1084 blocks of 16 tokens = 60 sequences at the mean
// context, 96 clients): below the static batch, because a scheduler
// cannot pack the pool as a static batch does: a request holds whole
// blocks (8 tokens lost per sequence on average, 3 %), and vLLM admits
// waiting requests on the blocks their input needs while outputs grow
// unreserved, so the pool overfills and the newest requests are
// preempted and recomputed (vLLM's own measurement of this churn: PR
// 44594, 1,065 preemptions and 4.8 % less output with the watermark off).
// The check there is one-sided (never more than the static batch, within
// the memo's bound) and the gap is pinned to 3-15 % with the default
// policy and 2-12 % with a 5 % watermark, which must preempt less.
func TestSaturation(t *testing.T) {
	const prompt, output = 32, 512
	meanCtx := prompt + output/2
	cases := []struct {
		name     string
		engine   EngineOptions
		batches  []int
		gapRange [2]float64 // allowed got/best - 1
	}{
		{"max_num_seqs 64", EngineOptions{MaxNumSeqs: 64}, []int{1, 8, 16, 32, 48, 56, 64}, [2]float64{-0.05, 0.05}},
		{"kv pool 1084 blocks", EngineOptions{MaxNumSeqs: 1024, NumGPUBlocksOverride: 1084}, []int{1, 8, 16, 32, 48, 56, 60}, [2]float64{-0.15, -0.03}},
		{"kv pool 1084 blocks, watermark 0.05", EngineOptions{MaxNumSeqs: 1024, NumGPUBlocksOverride: 1084, Watermark: 0.05}, []int{1, 8, 16, 32, 48, 56, 60}, [2]float64{-0.12, -0.02}},
	}
	preempts := map[string]int{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := kimiDeployment(t)
			d.Engine = c.engine
			s := mustNew(t, d)
			res := mustRun(t, s, Traffic{Concurrency: 96, NumRequests: 1500, Prompt: Lengths{Mean: prompt}, Output: Lengths{Mean: output}, Seed: 4},
				RunOptions{TimelineWindows: 50})
			got := steadyOutputRate(res)
			preempts[c.name] = res.Preemptions
			p, err := sim.New(d.Scenario.Topo, d.Scenario.Options)
			if err != nil {
				t.Fatal(err)
			}
			best, bestB := 0.0, 0
			for _, b := range c.batches {
				sc := d.Scenario
				sc.Workload = model.Workload{Phase: model.Decode, Batch: b, Context: meanCtx, KVDtype: model.FP8}
				sum, err := p.Evaluate(sc)
				if err != nil {
					t.Fatal(err)
				}
				if sum.TokensPerS > best {
					best, bestB = sum.TokensPerS, b
				}
			}
			e := got/best - 1
			t.Logf("steady %.1f tok/s (running %.1f, waiting %.1f, KV use %.3f, preemptions %d); best static batch %d at context %d: %.1f tok/s (%+.2f %%)",
				got, res.MeanRunning, res.MeanWaiting, res.MeanKVUseFrac, res.Preemptions, bestB, meanCtx, best, 100*e)
			if e < c.gapRange[0] || e > c.gapRange[1] {
				t.Errorf("saturated throughput %.1f tok/s, best static batch %.1f: %+.2f %%, want %+.0f %% to %+.0f %%", got, best, 100*e, 100*c.gapRange[0], 100*c.gapRange[1])
			}
		})
	}
	if a, b := preempts["kv pool 1084 blocks"], preempts["kv pool 1084 blocks, watermark 0.05"]; b >= a {
		t.Errorf("watermark 0.05: %d preemptions, without: %d; the watermark must preempt less", b, a)
	}
}

// TestDeterminism: the same deployment, traffic and seed give the same
// result to the last request; another seed gives another.
func TestDeterminism(t *testing.T) {
	tr := Traffic{QPS: 3, DurationS: 600, Prompt: Lengths{Dist: LogNormal, Mean: 800, Spread: 1}, Output: Lengths{Dist: Uniform, Mean: 200, Spread: 0.9}, Seed: 42}
	d := kimiDeployment(t)
	d.Engine.NumGPUBlocksOverride = 3000 // tight enough to preempt
	s1, s2 := mustNew(t, d), mustNew(t, d)
	a := mustRun(t, s1, tr, RunOptions{SLO: SLO{TTFTMs: 500, TPOTMs: 50}})
	mustRun(t, s1, Traffic{QPS: 7, DurationS: 100, Prompt: Lengths{Mean: 100}, Output: Lengths{Mean: 10}}, RunOptions{}) // another run in between
	b := mustRun(t, s1, tr, RunOptions{SLO: SLO{TTFTMs: 500, TPOTMs: 50}})
	c := mustRun(t, s2, tr, RunOptions{SLO: SLO{TTFTMs: 500, TPOTMs: 50}})
	if a.Preemptions == 0 {
		t.Errorf("no preemption: the case does not exercise them")
	}
	for name, r := range map[string]*Result{"same simulator": b, "new simulator": c} {
		r.Pricing = a.Pricing // the memo's counters are cumulative
		if !reflect.DeepEqual(a, r) {
			t.Errorf("%s: results differ for the same seed", name)
		}
	}
	tr.Seed = 43
	d2 := mustRun(t, s1, tr, RunOptions{})
	if reflect.DeepEqual(a.PerRequest, d2.PerRequest) {
		t.Errorf("seeds 42 and 43 gave the same requests")
	}
}

// TestRouting: with DP attention each DP rank has its own scheduler and KV
// pool; round-robin sends request i to scheduler i mod n, and several
// instances multiply a saturated engine's throughput.
func TestRouting(t *testing.T) {
	t.Run("round-robin over DP ranks", func(t *testing.T) {
		d := kimiDeployment(t)
		d.Scenario.Plan = model.Plan{TP: 2, DP: 4, EP: true}
		s := mustNew(t, d)
		res := mustRun(t, s, Traffic{QPS: 2, NumRequests: 200, Prompt: Lengths{Mean: 512}, Output: Lengths{Mean: 64}, Seed: 5}, RunOptions{})
		for i, r := range res.PerRequest {
			if r.Scheduler != i%4 {
				t.Fatalf("request %d on scheduler %d, want %d", i, r.Scheduler, i%4)
			}
		}
	})
	t.Run("least-loaded", func(t *testing.T) {
		d := kimiDeployment(t)
		d.Scenario.Plan = model.Plan{TP: 2, DP: 4, EP: true}
		d.Router = LeastLoaded
		s := mustNew(t, d)
		// Requests arriving together go to the idle schedulers first: the
		// first four to schedulers 0-3 (score 4 x waiting + running).
		res := mustRun(t, s, Traffic{Concurrency: 4, NumRequests: 4, Prompt: Lengths{Mean: 100}, Output: Lengths{Mean: 10}}, RunOptions{})
		for i, r := range res.PerRequest {
			if r.Scheduler != i {
				t.Errorf("request %d on scheduler %d, want %d", i, r.Scheduler, i)
			}
		}
	})
	t.Run("instances", func(t *testing.T) {
		d := Deployment{Scenario: sim.Scenario{Arch: mustPreset(t, "tiny-mla-moe"), Plan: model.Plan{TP: 1},
			Topo: mustTopo(t, "rtxpro6000-2s"), Options: sim.Options{CUDAGraphs: true}}, Engine: EngineOptions{MaxNumSeqs: 16}}
		tr := Traffic{Concurrency: 32, NumRequests: 2000, Prompt: Lengths{Mean: 64}, Output: Lengths{Mean: 256}, Seed: 6}
		one := steadyOutputRate(mustRun(t, mustNew(t, d), tr, RunOptions{TimelineWindows: 50}))
		d.Instances = 4
		tr.Concurrency, tr.NumRequests = 128, 8000
		four := steadyOutputRate(mustRun(t, mustNew(t, d), tr, RunOptions{TimelineWindows: 50}))
		t.Logf("saturated: 1 instance %.0f tok/s, 4 instances %.0f tok/s (x%.3f)", one, four, four/one)
		if r := four / one; math.Abs(r/4-1) > 0.05 {
			t.Errorf("4 instances give x%.3f of one, want x4 within 5 %%", r)
		}
	})
}

// TestSweepQPS: the search ends with a rate that meets the SLO and a
// failing rate at most 2 % above it.
func TestSweepQPS(t *testing.T) {
	s := mustNew(t, kimiDeployment(t))
	slo := SLO{TTFTMs: 2000, TPOTMs: 100}
	sw, err := s.SweepQPS(Traffic{DurationS: 600, Prompt: Lengths{Mean: 1024}, Output: Lengths{Mean: 256}, Seed: 8}, slo, SweepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sw.Best < 0 {
		t.Fatalf("no rate meets %+v: %d runs", slo, len(sw.Runs))
	}
	best := sw.Runs[sw.Best]
	t.Logf("max %.3f qps (failing at %.3f) after %d runs: p99 TTFT %.0f ms, p99 TPOT %.1f ms", sw.MaxQPS, sw.Bracket, len(sw.Runs), best.TTFTMs.P99, best.TPOTMs.P99)
	if !best.MeetsSLO || best.TTFTMs.P99 > slo.TTFTMs || best.TPOTMs.P99 > slo.TPOTMs {
		t.Errorf("best run does not meet the SLO: %+v / %+v", best.TTFTMs, best.TPOTMs)
	}
	if sw.Bracket <= sw.MaxQPS || sw.Bracket/sw.MaxQPS-1 > 0.02+1e-9 {
		t.Errorf("bracket [%.4f, %.4f] wider than 2 %%", sw.MaxQPS, sw.Bracket)
	}
	for _, r := range sw.Runs {
		if r.QPS == sw.Bracket && r.MeetsSLO {
			t.Errorf("the bracket's upper rate %.4f meets the SLO", r.QPS)
		}
	}
}

// TestSweepConcurrency: the search ends on a client count that meets the
// SLO with one more client failing it.
func TestSweepConcurrency(t *testing.T) {
	s := mustNew(t, kimiDeployment(t))
	slo := SLO{TPOTMs: 40, Percentile: 90}
	sw, err := s.SweepConcurrency(Traffic{NumRequests: 300, Prompt: Lengths{Mean: 512}, Output: Lengths{Mean: 128}, Seed: 2}, slo, SweepOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sw.Best < 0 {
		t.Fatalf("no concurrency meets %+v", slo)
	}
	t.Logf("max %d clients (failing at %.0f) after %d runs", sw.MaxConcurrency, sw.Bracket, len(sw.Runs))
	if int(sw.Bracket) != sw.MaxConcurrency+1 {
		t.Errorf("bracket [%d, %.0f]: want adjacent client counts", sw.MaxConcurrency, sw.Bracket)
	}
	for _, r := range sw.Runs {
		switch r.Concurrency {
		case sw.MaxConcurrency:
			if !r.MeetsSLO || r.TPOTMs.P90 > slo.TPOTMs {
				t.Errorf("%d clients: p90 TPOT %.1f ms, want <= %.0f", r.Concurrency, r.TPOTMs.P90, slo.TPOTMs)
			}
		case sw.MaxConcurrency + 1:
			if r.MeetsSLO {
				t.Errorf("%d clients meet the SLO above the maximum", r.Concurrency)
			}
		}
	}
}

// TestSLOMeetsMeasured judges a measured level by its own percentiles, as
// SLO.Meets judges a run: a reported percentile over a limit fails; one
// the level does not report leaves the verdict unknown unless another
// fails.
func TestSLOMeetsMeasured(t *testing.T) {
	nan := math.NaN()
	// As InferenceX reports: median and p99, no p90.
	m := &Measured{TTFTMs: Latency{Mean: nan, P50: 502.9, P90: nan, P99: 1420.3}, TPOTMs: Latency{Mean: nan, P50: 21.3, P90: nan, P99: 28.5}}
	for _, c := range []struct {
		name         string
		slo          SLO
		meets, known bool
	}{
		{"p99 both within", SLO{TTFTMs: 2000, TPOTMs: 30}, true, true},
		{"p99 TPOT over", SLO{TTFTMs: 2000, TPOTMs: 28}, false, true},
		{"p99 TTFT over", SLO{TTFTMs: 1000}, false, true},
		{"p50 within", SLO{TTFTMs: 600, TPOTMs: 25, Percentile: 50}, true, true},
		{"p50 TTFT over", SLO{TTFTMs: 500, Percentile: 50}, false, true},
		{"p90 not reported", SLO{TTFTMs: 2000, Percentile: 90}, false, false},
	} {
		meets, known := c.slo.MeetsMeasured(m)
		if meets != c.meets || known != c.known {
			t.Errorf("%s: meets %v, known %v; want %v, %v", c.name, meets, known, c.meets, c.known)
		}
	}
}

// TestRequestsBeyondMaxModelLen: a request whose prompt and output exceed
// the model's max_model_len (Kimi-K2.5: 262144 tokens) is one the server
// refuses, so a load holding one is an error before the run, naming the
// lengths and the limit; one at the limit is not refused for it. On
// 601a891 a load of 250,000 + 20,000 tokens was simulated (and, its
// requests served at a crawl, called overloaded).
func TestRequestsBeyondMaxModelLen(t *testing.T) {
	s := mustNew(t, kimiDeployment(t))
	for name, tr := range map[string]Traffic{
		"drawn":  {QPS: 1, NumRequests: 2, Prompt: Lengths{Mean: 250000}, Output: Lengths{Mean: 20000}},
		"traced": {Requests: []Request{{PromptTokens: 100, OutputTokens: 10}, {ArrivalS: 1, PromptTokens: 262000, OutputTokens: 145}}},
	} {
		_, err := s.Run(tr, RunOptions{})
		if err == nil || !strings.Contains(err.Error(), "exceed the max_model_len 262144 kimi-k2.5 is served at") {
			t.Errorf("%s: %v, want the max_model_len refusal", name, err)
		}
	}
	if err := s.fits(Request{PromptTokens: 262000, OutputTokens: 144}); err != nil && strings.Contains(err.Error(), "max_model_len") {
		t.Errorf("a request at max_model_len: %v", err)
	}
}

// TestRunRefusesTPOTLimitOnOneTokenOutputs: a load whose every output is
// one token has no time per output token (TPOT is over the tokens after
// the first), so a TPOT limit is refused rather than met by runs that
// timed none; one output of two tokens, or a log-normal spread that can
// draw longer, gives TPOT something to time.
func TestRunRefusesTPOTLimitOnOneTokenOutputs(t *testing.T) {
	s := mustNew(t, kimiDeployment(t))
	slo := RunOptions{SLO: SLO{TPOTMs: 50}}
	for _, tr := range []Traffic{
		{QPS: 1, NumRequests: 20, Prompt: Lengths{Mean: 100}, Output: Lengths{Mean: 1}},
		{Requests: []Request{{ArrivalS: 0, PromptTokens: 100, OutputTokens: 1}, {ArrivalS: 1, PromptTokens: 50, OutputTokens: 1}}},
	} {
		if _, err := s.Run(tr, slo); err == nil || !strings.Contains(err.Error(), "one token") {
			t.Errorf("%+v: %v, want a refusal naming the one-token outputs", tr, err)
		}
		// Without a TPOT limit it runs.
		mustRun(t, s, tr, RunOptions{SLO: SLO{TTFTMs: 1000}})
	}
	for _, tr := range []Traffic{
		{QPS: 1, NumRequests: 20, Prompt: Lengths{Mean: 100}, Output: Lengths{Mean: 1, Dist: LogNormal, Spread: 1}},
		{Requests: []Request{{ArrivalS: 0, PromptTokens: 100, OutputTokens: 1}, {ArrivalS: 1, PromptTokens: 50, OutputTokens: 2}}},
	} {
		mustRun(t, s, tr, slo)
	}
}

// TestCapacityPacksWholeInstances: an instance runs within one box, so
// copies of a 6-GPU plan (Kimi-K2.5 NVFP4 at TP 1 x DP 6 with EP) on
// 8-GPU boxes take a box each, 2 GPUs idle: four or more copies need as
// many boxes, where the GPUs alone (6 x copies / 8) counted fewer (three
// for four copies). The sweep is stood in for: one copy carries 1 req/s.
func TestCapacityPacksWholeInstances(t *testing.T) {
	d := Deployment{Scenario: sim.Scenario{Arch: mustPreset(t, "kimi-k2.5-nvfp4"), Plan: model.Plan{TP: 1, DP: 6, EP: true},
		Workload: model.Workload{KVDtype: model.FP8}, Topo: mustBox(t, "nvswitch:8xb200"), Options: sim.Options{CUDAGraphs: true}}}
	s := mustNew(t, d)
	sw := &Sweep{Best: 0, MaxQPS: 1}
	c, err := s.CapacityFor(Traffic{NumRequests: 200, Prompt: Lengths{Mean: 512}, Output: Lengths{Mean: 64}}, SLO{TTFTMs: 1e5}, sw, 4)
	if err != nil {
		t.Fatal(err)
	}
	if c.Copies < 4 || c.InstanceGPUs != 6 || c.InstancesPerBox != 1 || c.BoxGPUs != 8 || c.Boxes != c.Copies || c.GPUs != 6*c.Copies {
		t.Errorf("%d copies of %d GPUs: %d GPUs on %d boxes of %d (%d instance(s) a box); want a box per copy, at least 4",
			c.Copies, c.InstanceGPUs, c.GPUs, c.Boxes, c.BoxGPUs, c.InstancesPerBox)
	}
}

// TestCapacityRefusesAnUncheckedAnswer: a sweep whose largest rate the
// deployment cannot carry (stood in for: 1000 req/s, where DeepSeek-V3
// at TP 8 on H200s carries about 13 of 1024 / 256 tokens) gives check
// runs that miss the SLO at every copy count tried, 1000 / 1 to 1000 / 9
// req/s: an error, not the last count as an answer the runs did not
// bear out.
func TestCapacityRefusesAnUncheckedAnswer(t *testing.T) {
	d := Deployment{Scenario: sim.Scenario{Arch: mustPreset(t, "deepseek-v3"), Plan: model.Plan{TP: 8},
		Topo: mustBox(t, "h200-nvswitch"), Options: sim.Options{CUDAGraphs: true}}}
	s := mustNew(t, d)
	c, err := s.CapacityFor(Traffic{NumRequests: 200, Prompt: Lengths{Mean: 1024}, Output: Lengths{Mean: 256}}, SLO{TTFTMs: 2000, TPOTMs: 50}, &Sweep{Best: 0, MaxQPS: 1000}, 1000)
	if err == nil || !strings.Contains(err.Error(), "missed the SLO at 1 to 9 copies") {
		var got string
		if c != nil {
			got = fmt.Sprintf("%d copies, check meets the SLO: %v", c.Copies, c.Check.MeetsSLO)
		}
		t.Errorf("%s, error %v: want the check runs' miss as an error", got, err)
	}
}

// TestCapacityCountsWholeBoxes: a deployment on the first 6 GPUs of an
// 8-GPU box (--gpus 6: six tiny-mla-moe instances of one GPU) is counted
// in boxes of 8, the box one buys, where the box count took the cut-down
// box of 6. By hand: 4 copies are 24 one-GPU instances, 8 to a box: 3
// boxes of 8 (boxes of 6 counted 4). The sweep is stood in for: one copy
// carries 1 req/s.
func TestCapacityCountsWholeBoxes(t *testing.T) {
	box, err := topology.Resolve("nvswitch:8xb200", 6)
	if err != nil {
		t.Fatal(err)
	}
	d := Deployment{Scenario: sim.Scenario{Arch: mustPreset(t, "tiny-mla-moe"), Plan: model.Plan{TP: 1},
		Workload: model.Workload{KVDtype: model.FP8}, Topo: box, Options: sim.Options{CUDAGraphs: true}}, Instances: 6}
	s := mustNew(t, d)
	c, err := s.CapacityFor(Traffic{NumRequests: 200, Prompt: Lengths{Mean: 512}, Output: Lengths{Mean: 64}}, SLO{TTFTMs: 1e5}, &Sweep{Best: 0, MaxQPS: 1}, 4)
	if err != nil {
		t.Fatal(err)
	}
	if c.Copies != 4 || c.GPUs != 24 || c.BoxGPUs != 8 || c.InstancesPerBox != 8 || c.Boxes != 3 {
		t.Errorf("%d copies = %d GPUs on %d boxes of %d (%d instances a box); want 4 copies = 24 GPUs on 3 boxes of 8 (8 a box)",
			c.Copies, c.GPUs, c.Boxes, c.BoxGPUs, c.InstancesPerBox)
	}
}

// TestOneTokenOutputsTimeNoTPOT: with every output one token nothing is
// timed for TPOT or ITL (they are timed over the tokens after the
// first): the run says so (TPOTRequests 0) and its JSON, and its
// frontier point's, has null for them, where they read 0 as if timed.
// With outputs of two tokens each request is timed.
func TestOneTokenOutputsTimeNoTPOT(t *testing.T) {
	s := mustNew(t, kimiDeployment(t))
	one := mustRun(t, s, Traffic{QPS: 1, NumRequests: 20, Prompt: Lengths{Mean: 100}, Output: Lengths{Mean: 1}}, RunOptions{})
	if one.TPOTRequests != 0 || one.TPOTTimed() {
		t.Errorf("one-token outputs: %d requests timed for TPOT, want 0", one.TPOTRequests)
	}
	var js struct {
		TPOT *Stats `json:"tpot_ms"`
		ITL  *Stats `json:"itl_ms"`
		TTFT *Stats `json:"ttft_ms"`
	}
	b, err := json.Marshal(one)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &js); err != nil {
		t.Fatal(err)
	}
	if js.TPOT != nil || js.ITL != nil || js.TTFT == nil {
		t.Errorf("one-token outputs: JSON tpot %v, itl %v, ttft %v; want null, null and a figure", js.TPOT, js.ITL, js.TTFT)
	}
	f := NewFrontier([]*Result{one}, SLO{}, "ISL 100 / OSL 1", -1)
	pb, err := json.Marshal(f.Points[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(pb), `"tokens_per_s_per_user":null`) || !strings.Contains(string(pb), `"median_tpot_ms":null`) {
		t.Errorf("frontier point %s: want null per-user speed and TPOT", pb)
	}
	two := mustRun(t, s, Traffic{QPS: 1, NumRequests: 20, Prompt: Lengths{Mean: 100}, Output: Lengths{Mean: 2}}, RunOptions{})
	if two.TPOTRequests != 20 || !(two.TPOTMs.P50 > 0) {
		t.Errorf("two-token outputs: %d requests timed, TPOT p50 %v; want 20 and a time", two.TPOTRequests, two.TPOTMs.P50)
	}
}
