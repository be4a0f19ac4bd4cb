package serving

import (
	"fmt"
	"github.com/tpscope/tpscope/engine"
	"math"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/sim"
)

// GLM-5-NVFP4 decode on the dual-socket RTX PRO 6000 box, measured by its
// owners (GitHub voipmonitor/rtx6kpro, models/glm5.md at 07e8898,
// "Decode throughput — MTP OFF", --moe-runner-backend cutlass; the same
// figures sim/public_test.go judges the static model with): SGLang, TP 8,
// BF16 KV, NCCL_P2P_LEVEL=SYS with an NCCL graph file that makes NCCL
// pick LL, GLM-5 run as dense MLA through FlashInfer's FA2 kernel
// (the sglang@0.5 profile's flashinfer backend, an SM-filling grid). The tool
// (voipmonitor/llm-inference-bench, llm_decode_bench.py) runs N streams
// of one short generation prompt ("context 0": about 100 tokens with the
// chat template, an assumption from the prompt's ~400 characters) with
// max_tokens 8192, waits until every stream generates, and reports the
// server's generation throughput over the next 30 s: a closed loop of N
// clients measured in steady decode.
var glmPublicAggregate = []struct {
	clients  int
	measured float64 // aggregate decode tok/s
}{{1, 50.4}, {2, 95.2}, {4, 164.2}, {8, 276.9}, {16, 427.4}, {32, 659.7}, {64, 1010.6}}

// TestPublicGLM5ClosedLoop runs that benchmark through the scheduler:
// N clients, 100-token prompts, 8192-token outputs, the output rate over
// the 30 s after the last stream's first token. It records per point how
// far the simulation is from the measurement and checks two things:
//
//   - the simulated steady rate is sim's static decode rate at that batch
//     (PredictScenario, batch N, the window's mean context) within 3 %:
//     in steady decode the scheduler adds nothing but the growing context;
//   - the distance to the measurement: within 12 % at every point, the
//     run priced as it was launched (--moe-runner-backend cutlass,
//     NCCL_MIN_NCHANNELS=8: x0.90-0.99 on 2026-12-07; x1.03-1.09 at 1-8
//     clients and x0.84 at 64 priced with FlashInfer's CUTLASS MoE
//     (--moe-kernel flashinfer_cutlass) and NCCL's two channels,
//     sim.TestPublicGLM5Decode). A change
//     that moves it must update the README.
func TestPublicGLM5ClosedLoop(t *testing.T) {
	d := Deployment{
		Scenario: sim.Scenario{Arch: mustPreset(t, "glm-5-nvfp4"), Plan: model.Plan{TP: 8},
			Workload: model.Workload{KVDtype: model.BF16}, Build: model.BuildOptions{DenseDSA: true},
			Topo:    mustTopo(t, "rtxpro6000-2s"),
			Options: sim.Options{CUDAGraphs: true, NCCL: ncclenv.Settings{Proto: "LL", P2PLevel: "SYS", MinChannels: 8}, Engine: engine.Ref{Name: "sglang"}, AttentionBackend: "flashinfer", MoEKernel: "cutlass"}},
	}
	s := mustNew(t, d)
	p, err := sim.New(d.Scenario.Topo, d.Scenario.Options)
	if err != nil {
		t.Fatal(err)
	}
	const prompt, output, windowS = 100, 8192, 30.0
	t.Logf("%8s %10s %10s %8s %10s %8s", "clients", "measured", "simulated", "vs meas", "static", "vs static")
	for _, c := range glmPublicAggregate {
		t.Run(fmt.Sprintf("clients=%d", c.clients), func(t *testing.T) {
			tr := Traffic{Concurrency: c.clients, NumRequests: c.clients, Prompt: Lengths{Mean: prompt}, Output: Lengths{Mean: output}}
			first := mustRun(t, s, tr, RunOptions{TimelineWindows: -1})
			warm := 0.0 // every stream generating: the last first token
			for _, r := range first.PerRequest {
				warm = math.Max(warm, r.FirstTokenS)
			}
			res := mustRun(t, s, tr, RunOptions{TimelineWindows: -1, MeasureFromS: warm, MeasureToS: warm + windowS})
			got := res.WindowOutputTokensPerS
			// Mean context over the window: the prompt plus the tokens a
			// stream has produced by the window's middle.
			perStream := got / float64(c.clients)
			ctx := prompt + int(perStream*(warm+windowS/2))
			sc := d.Scenario
			sc.Workload = model.Workload{Phase: model.Decode, Batch: c.clients, Context: ctx, KVDtype: model.BF16}
			pr, err := p.PredictScenario(sc)
			if err != nil {
				t.Fatal(err)
			}
			vsMeas, vsStatic := got/c.measured, got/pr.TokensPerS
			t.Logf("%8d %10.1f %10.1f %7.2fx %10.1f %7.3fx  (context %d, warm-up %.2f s)", c.clients, c.measured, got, vsMeas, pr.TokensPerS, vsStatic, ctx, warm)
			if math.Abs(vsStatic-1) > 0.03 {
				t.Errorf("simulated %.1f tok/s, static decode at batch %d context %d %.1f: x%.3f (want within 3 %%)", got, c.clients, ctx, pr.TokensPerS, vsStatic)
			}
			if math.Abs(vsMeas-1) > 0.12 {
				t.Errorf("x%.2f of the measured %.1f tok/s: want within 12 %%", vsMeas, c.measured)
			}
		})
	}
}
