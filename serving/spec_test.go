package serving

import (
	"math"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/sim"
)

// TestSpecEagle3LowLoad: one client (the lowest load: every step serves
// one request) of Kimi-K2.5 with an EAGLE-3 head on the seed's box. Each
// request's decode steps are the static speculative step at batch 1 and
// its contexts, each yielding 1 + A tokens, so the median TPOT must be the
// static step at the mean decode context (prompt + output / 2) over the
// expected tokens per step, within 5 %; and the spread of TPOT over
// requests must be what the acceptance's variance gives (renewal
// approximation: sd = step x sqrt(V / (L E^3)) for L output tokens), within
// 35 % (the sample's sd over 64 requests). Under both policies: one
// request at a time forms the same decode steps.
func TestSpecEagle3LowLoad(t *testing.T) {
	for _, p := range []Policy{PolicyVLLM, PolicySGLang} {
		t.Run(string(p), func(t *testing.T) { testSpecEagle3LowLoad(t, p) })
	}
}

func testSpecEagle3LowLoad(t *testing.T, policy Policy) {
	head, err := model.ResolveDrafter("kimi-k2.5-eagle3-mla")
	if err != nil {
		t.Fatal(err)
	}
	sc := sim.Scenario{Arch: mustPreset(t, "kimi-k2.5"), Plan: model.Plan{TP: 8}, Topo: mustTopo(t, "rtxpro6000-2s"),
		Workload: model.Workload{KVDtype: model.FP8, SpecTokens: 3},
		Build:    model.BuildOptions{Spec: model.Spec{Method: model.SpecEagle3, Draft: head.Ref, Drafter: head}},
		Options:  sim.Options{CUDAGraphs: true, NCCL: ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"}}}
	s := mustNew(t, Deployment{Scenario: sc, Engine: EngineOptions{Policy: policy}})
	const prompt, output, n = 1024, 256, 64
	res := mustRun(t, s, Traffic{Concurrency: 1, NumRequests: n, Prompt: Lengths{Mean: prompt}, Output: Lengths{Mean: output}, Seed: 7}, RunOptions{TimelineWindows: -1})

	static := sc
	static.Workload.Batch, static.Workload.Context = 1, prompt+output/2
	pr, _, err := sim.Predict(static)
	if err != nil {
		t.Fatal(err)
	}
	y := static.SpecYield()
	want := pr.StepUs / 1e3 / y.TokensPerStep
	got := res.TPOTMs.P50
	t.Logf("median TPOT %.3f ms, static step %.2f ms / %.3f tokens per step = %.3f ms (x%.3f)", got, pr.StepUs/1e3, y.TokensPerStep, want, got/want)
	if math.Abs(got/want-1) > 0.05 {
		t.Errorf("median TPOT %.3f ms, want %.3f ms within 5 %%", got, want)
	}
	// The spread over requests.
	var sum, sum2 float64
	for _, r := range res.PerRequest {
		v := r.TPOTS() * 1e3
		sum += v
		sum2 += v * v
	}
	mean := sum / n
	sd := math.Sqrt(sum2/n - mean*mean)
	wantSD := pr.StepUs / 1e3 * math.Sqrt(y.TokensVar/(float64(output-1)*math.Pow(y.TokensPerStep, 3)))
	t.Logf("TPOT sd over requests %.3f ms, renewal approximation %.3f ms (p10-p90 of the run: p50 %.3f, p90 %.3f)", sd, wantSD, res.TPOTMs.P50, res.TPOTMs.P90)
	if sd <= 0 || math.Abs(sd/wantSD-1) > 0.35 {
		t.Errorf("TPOT sd %.3f ms, want %.3f within 35 %%", sd, wantSD)
	}
}
