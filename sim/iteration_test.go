package sim

import (
	"fmt"
	engprof "github.com/tpscope/tpscope/engine"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/topology"
)

// iterCase is a scenario the iteration tests price.
type iterCase struct {
	name string
	sc   Scenario
	topo string
	opts Options
}

func iterCases(t testing.TB) []iterCase {
	return []iterCase{
		{"kimi-nvfp4/tp8/graphs", Scenario{Arch: mustPreset(t, "kimi-k2.5-nvfp4"), Plan: model.Plan{TP: 8},
			Workload: model.Workload{KVDtype: model.BF16}}, "rtxpro6000-2s",
			Options{CUDAGraphs: true, NCCL: ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"}}},
		{"glm5-nvfp4-dense/tp8/graphs", Scenario{Arch: mustPreset(t, "glm-5-nvfp4"), Plan: model.Plan{TP: 8},
			Workload: model.Workload{KVDtype: model.BF16}, Build: model.BuildOptions{DenseDSA: true}}, "rtxpro6000-2s",
			Options{CUDAGraphs: true, NCCL: ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"}, Engine: engprof.Ref{Name: "sglang"}, AttentionBackend: "flashinfer"}},
		{"deepseek-v3/tp2-dp4-ep/eager", Scenario{Arch: mustPreset(t, "deepseek-v3"), Plan: model.Plan{TP: 2, DP: 4, EP: true}},
			"h200-nvswitch", Options{}},
	}
}

func newCoster(t testing.TB, c iterCase) *IterationCoster {
	t.Helper()
	tp, err := topology.Preset(c.topo)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(tp, c.opts)
	if err != nil {
		t.Fatal(err)
	}
	ic, err := NewIterationCoster(p, c.sc)
	if err != nil {
		t.Fatal(err)
	}
	return ic
}

// randomIteration draws an iteration of up to 300 decoding sequences of
// 1-20,000 cached tokens and up to 3 prefill chunks of 1-3,000 tokens,
// half of them after a prefix of up to 8,000 tokens.
func randomIteration(r *rand.Rand) model.Iteration {
	var it model.Iteration
	for it.Requests() == 0 {
		for range r.IntN(300) {
			it.AddDecode(1 + r.IntN(20_000))
		}
		for range r.IntN(4) {
			prefix := 0
			if r.IntN(2) == 0 {
				prefix = r.IntN(8_000)
			}
			it.AddChunk(1+r.IntN(3_000), prefix)
		}
	}
	return it
}

// TestIterationMatchesPredict ties iteration pricing to step pricing: a
// decode-only iteration of a batch that is a CUDA-graph capture size (no
// padding either way) and a one-prompt prefill are the steps
// PredictScenario prices for that workload, to rounding.
func TestIterationMatchesPredict(t *testing.T) {
	for _, c := range iterCases(t) {
		ic := newCoster(t, c)
		dp := c.sc.Plan.Normalized().DP
		for _, w := range []model.Workload{
			{Phase: model.Decode, Batch: 8 * dp, Context: 3000},
			{Phase: model.Decode, Batch: 1 * dp, Context: 100},
			{Phase: model.Prefill, Batch: 1 * dp, Context: 1024},
		} {
			t.Run(fmt.Sprintf("%s/%s", c.name, w), func(t *testing.T) {
				w.KVDtype = c.sc.Workload.KVDtype
				sc := c.sc
				sc.Workload = w
				pr, err := ic.p.PredictScenario(sc)
				if err != nil {
					t.Fatal(err)
				}
				var it model.Iteration
				for range w.Batch / dp {
					if w.Phase == model.Decode {
						it.AddDecode(w.Context)
					} else {
						it.AddChunk(w.Context, 0)
					}
				}
				got, err := ic.ExactStepUs(it)
				if err != nil {
					t.Fatal(err)
				}
				if math.Abs(got/pr.StepUs-1) > 1e-9 {
					t.Errorf("iteration %s: %.3f us, the %s step %.3f us", it, got, w, pr.StepUs)
				}
			})
		}
	}
}

// TestIterationExtrapolation: the memo prices a copy of the model with
// two MoE layers and extrapolates the last layer's time; on random
// iterations it agrees with the whole engine within 0.5 % (the
// Evaluator's claim for Workload steps, plan_eval.go).
func TestIterationExtrapolation(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 1))
	worst := 0.0
	for _, c := range iterCases(t) {
		ic := newCoster(t, c)
		for i := 0; i < 40; i++ {
			it := randomIteration(r)
			padded, graphed, err := ic.graph(it)
			if err != nil {
				t.Fatal(err)
			}
			it.PadTokens = int(padded - it.Tokens())
			short, err := ic.price(it, graphed, false)
			if err != nil {
				t.Fatal(err)
			}
			full, err := ic.price(it, graphed, true)
			if err != nil {
				t.Fatal(err)
			}
			e := short/full - 1
			worst = math.Max(worst, math.Abs(e))
			if math.Abs(e) > 0.005 {
				t.Errorf("%s %s: extrapolated %.1f us, engine %.1f us (%+.2f %%)", c.name, it, short, full, 100*e)
			}
		}
	}
	t.Logf("largest extrapolation error over 120 iterations: %.3f %%", 100*worst)
}

// TestIterationBucketBound: the memo's bucketing moves a step's price by
// at most IterationBucketBound (below: kernel-shape effects of rounding a
// count up; above: the grid's step), checked on 150 random iterations of
// three models, plans and launch modes, each priced with the whole engine
// as itself and as its bucket's representative.
func TestIterationBucketBound(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 3))
	lo, hi := 0.0, 0.0
	for _, c := range iterCases(t) {
		ic := newCoster(t, c)
		for i := 0; i < 50; i++ {
			it := randomIteration(r)
			exact, err := ic.ExactStepUs(it)
			if err != nil {
				t.Fatal(err)
			}
			rep, _, graphed, err := ic.bucket(it)
			if err != nil {
				t.Fatal(err)
			}
			b, err := ic.price(rep, graphed, true)
			if err != nil {
				t.Fatal(err)
			}
			e := b/exact - 1
			lo, hi = math.Min(lo, e), math.Max(hi, e)
			if e < -IterationBucketBound.Below || e > IterationBucketBound.Above {
				t.Errorf("%s %s: bucket %s priced %.1f us, exact %.1f us (%+.2f %%), outside [-%.2f, +%.2f] %%",
					c.name, it, rep, b, exact, 100*e, 100*IterationBucketBound.Below, 100*IterationBucketBound.Above)
			}
		}
	}
	t.Logf("bucketing error over 150 iterations: %+.3f %% .. %+.3f %%", 100*lo, 100*hi)
}

// TestIterationRoundUp checks the grid: exact below 2^(bits+1), never
// below the value, at most 2^-bits above it.
func TestIterationRoundUp(t *testing.T) {
	cases := []struct{ v, want int64 }{
		{0, 0}, {1, 1}, {63, 63}, {64, 64}, {65, 66}, {127, 128}, {128, 128}, {129, 132},
		{1000, 1008}, {1 << 40, 1 << 40}, {1<<40 + 1, 1<<40 + 1<<35},
	}
	for _, c := range cases {
		if got := roundUpBits(c.v, 5); got != c.want {
			t.Errorf("roundUpBits(%d, 5) = %d, want %d", c.v, got, c.want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 10000; i++ {
		v := r.Int64N(1 << 45)
		g := roundUpBits(v, 5)
		if g < v || float64(g) > float64(v)*(1+1.0/32)+1e-9 {
			t.Fatalf("roundUpBits(%d, 5) = %d: outside [v, v(1+1/32)]", v, g)
		}
	}
}

// TestIterationCosterErrors: bad input is refused before any pricing.
func TestIterationCosterErrors(t *testing.T) {
	c := iterCases(t)[0]
	ic := newCoster(t, c)
	if _, err := ic.StepUs(model.Iteration{}); err == nil {
		t.Error("empty iteration priced")
	}
	if _, err := ic.StepUs(model.Iteration{DecodeSeqs: 1, DecodeKVTokens: 1, PadTokens: 3}); err == nil {
		t.Error("iteration with caller padding priced")
	}
	sc := c.sc
	sc.Workload.SpecTokens = 2
	if _, err := NewIterationCoster(ic.p, sc); err == nil {
		t.Error("speculative tokens accepted")
	}
	sc = c.sc
	sc.Plan = model.Plan{TP: 3}
	if _, err := NewIterationCoster(ic.p, sc); err == nil {
		t.Error("invalid plan accepted")
	}
}

// BenchmarkIterationPrice is the cost of one memo miss: building the
// two-MoE-layer copy of the step and running the engine on it.
func BenchmarkIterationPrice(b *testing.B) {
	for _, c := range iterCases(b)[:2] {
		b.Run("model="+c.name, func(b *testing.B) {
			ic := newCoster(b, c)
			r := rand.New(rand.NewPCG(5, 5))
			its := make([]model.Iteration, 64)
			for i := range its {
				its[i] = randomIteration(r)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				it := its[i%len(its)]
				rep, _, graphed, err := ic.bucket(it)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := ic.price(rep, graphed, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestIterationGraphsByEngine: under vLLM's profile a step whose tokens
// fit a capture size replays a graph, prefill tokens or not; under
// SGLang's (cuda_graphs.prefill_eager: its CudaGraphRunner replays decode
// batches only) a step with prefill tokens runs eagerly at its own size,
// and its price is the eager one: the same iteration priced without
// graphs at all.
func TestIterationGraphsByEngine(t *testing.T) {
	pre := model.Iteration{}
	pre.AddChunk(100, 0)
	dec := model.Iteration{}
	dec.AddDecode(500)
	for _, c := range iterCases(t)[:2] {
		ic := newCoster(t, c)
		sglang := c.opts.Engine.Name == "sglang"
		if _, g, err := ic.graph(pre); err != nil || g == sglang {
			t.Errorf("%s: prefill step graphed %v (err %v), want %v", c.name, g, err, !sglang)
		}
		if _, g, err := ic.graph(dec); err != nil || !g {
			t.Errorf("%s: decode step graphed %v (err %v), want true", c.name, g, err)
		}
		if !sglang {
			continue
		}
		eager := c
		eager.opts.CUDAGraphs = false
		want, err := newCoster(t, eager).ExactStepUs(pre)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := ic.ExactStepUs(pre); err != nil || math.Abs(got-want) > 1e-6*want {
			t.Errorf("%s: prefill step %v us (err %v), the eager price %v", c.name, got, err, want)
		}
	}
}

// TestGraphedStepMatchesIteration: a decode step padded to a CUDA-graph
// capture size is one step however it is asked for. predict's step
// (PredictScenario: the batch's sequences, padding tokens up to the
// captured size) and the serving simulation's iteration of the same
// sequences (ExactStepUs: real tokens, padded by the coster) price the
// same schedule: vLLM pads tokens, which attention skips, never whole
// sequences that attend over the context. The cases are the ones an audit
// found 2-34 % apart when predict padded sequences.
func TestGraphedStepMatchesIteration(t *testing.T) {
	ds := mustPreset(t, "deepseek-v3")
	box, err := topology.Preset("h200-nvswitch")
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(box, Options{CUDAGraphs: true})
	if err != nil {
		t.Fatal(err)
	}
	mtp := model.BuildOptions{Spec: model.Spec{Method: model.SpecMTP}}
	for _, c := range []struct {
		build model.BuildOptions
		w     model.Workload
	}{
		{model.BuildOptions{}, model.Workload{Batch: 5, Context: 4096}},
		{model.BuildOptions{}, model.Workload{Batch: 5, Context: 131072}},
		{model.BuildOptions{}, model.Workload{Batch: 9, Context: 65536}},
		{mtp, model.Workload{Batch: 1, Context: 4096, SpecTokens: 2}},
		{mtp, model.Workload{Batch: 3, Context: 32768, SpecTokens: 2}},
		{mtp, model.Workload{Batch: 1, Context: 4096, SpecTokens: 4}},
	} {
		t.Run(fmt.Sprintf("%s/k%d", c.w, c.w.SpecTokens), func(t *testing.T) {
			sc := Scenario{Arch: ds, Plan: model.Plan{TP: 8}, Workload: c.w, Build: c.build}
			pr, err := p.PredictScenario(sc)
			if err != nil {
				t.Fatal(err)
			}
			if !pr.Graphed {
				t.Fatalf("%s: eager; the case wants a graphed step", c.w)
			}
			ic, err := NewIterationCoster(p, sc)
			if err != nil {
				t.Fatal(err)
			}
			it := model.Iteration{SpecTokens: c.w.SpecTokens}
			for range c.w.Batch {
				it.AddDecode(c.w.Context)
			}
			got, err := ic.ExactStepUs(it)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(pr.StepUs/got-1) > 0.01 {
				t.Errorf("predict's step %.1f us, the serving simulation's %.1f us (%+.1f %%)", pr.StepUs, got, 100*(pr.StepUs/got-1))
			}
		})
	}
}

// TestIterationHostDrafting: the serving simulation's step of a method
// that drafts on the host (ngram, suffix) waits for the host's drafting,
// as predict's and plan's steps do (specHostUs). Both methods run the
// same verify pass and no draft pass on the device, so their steps differ
// by the host's time alone: one request at 65,536 tokens, an n-gram KMP
// over its tokens at 1 ns each (65.536 us) against one suffix-tree lookup
// (10 us), each beside the 20 us of a step with drafts: 55.536 us apart.
// The coster had priced the device's ops alone, 0 us apart, so simulate
// ran host-drafted steps faster than predict priced the same step.
func TestIterationHostDrafting(t *testing.T) {
	ds := mustPreset(t, "deepseek-v3")
	box, err := topology.Preset("h200-nvswitch")
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(box, Options{CUDAGraphs: true})
	if err != nil {
		t.Fatal(err)
	}
	w := model.Workload{Batch: 1, Context: 65536, SpecTokens: 3}
	it := model.Iteration{SpecTokens: 3}
	it.AddDecode(w.Context)
	step := map[model.SpecMethod]float64{}
	for _, m := range []model.SpecMethod{model.SpecNgram, model.SpecSuffix} {
		sc := Scenario{Arch: ds, Plan: model.Plan{TP: 8}, Workload: w, Build: model.BuildOptions{Spec: model.Spec{Method: m}}}
		ic, err := NewIterationCoster(p, sc)
		if err != nil {
			t.Fatal(err)
		}
		exact, err := ic.ExactStepUs(it)
		if err != nil {
			t.Fatal(err)
		}
		memo, err := ic.StepUs(it)
		if err != nil {
			t.Fatal(err)
		}
		step[m] = exact
		if !near(memo-exact, 0, 1e-6*exact) && math.Abs(memo/exact-1) > 0.006 {
			t.Errorf("%s: memo %.3f us, exact %.3f us", m, memo, exact)
		}
	}
	if got, want := step[model.SpecNgram]-step[model.SpecSuffix], 65.536-10.0; !near(got, want, 1e-6) {
		t.Errorf("ngram step - suffix step = %.3f us, want %.3f us (the host's drafting)", got, want)
	}
}
