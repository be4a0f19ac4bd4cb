package sim

import (
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/topology"
)

// TestCaveats checks each caveat rule fires exactly where its gap was
// measured (public_test.go) and goes quiet once the parameters it is about
// are calibrated.
func TestCaveats(t *testing.T) {
	const (
		nvfp4   = "NVFP4 experts on SM12x"
		longCtx = "long context on TRITON_MLA"
		nccl    = "NCCL collectives priced"
		custom  = "custom all-reduce across CPU sockets"
		shm     = "host-memory ring hops"
	)
	// calibrated returns the 2-socket preset with a calibrated ring LL
	// all-reduce under P2P SYS and a trace-calibrated family (calibrate's
	// source format).
	calibrated := func(family string) *topology.Topology {
		tp := mustTopo(t, "rtxpro6000-2s")
		tp.Calibration = &topology.Calibration{Source: "test", Collectives: []topology.CollectiveParams{
			{Algo: "Ring", Proto: "LL", Ranks: 8, P2PLevel: "SYS", BaseLatUs: 6.6, HwLatUs: 1.4, BusBWGBps: 20}}}
		tp.Devices[0].Sources["efficiency.mem/"+family] = "calibrated: test trace; 10 samples, 10 memory-bound, prior 0.8"
		return tp
	}
	cases := []struct {
		name  string
		model string
		topo  *topology.Topology
		plan  model.Plan
		ctx   int
		opts  Options
		want  []string
	}{
		{"seed: Kimi NVFP4 on the 2-socket box", "kimi-k2.5-nvfp4", mustTopo(t, "rtxpro6000-2s"), model.Plan{TP: 8}, 4096, tuned, []string{nvfp4, nccl}},
		{"INT4 experts", "kimi-k2.5", mustTopo(t, "rtxpro6000-2s"), model.Plan{TP: 8}, 4096, tuned, []string{nccl}},
		{"128K without DCP", "kimi-k2.5", mustTopo(t, "rtxpro6000-2s"), model.Plan{TP: 8}, 131072, tuned, []string{longCtx, nccl}},
		{"128K with DCP 8", "kimi-k2.5", mustTopo(t, "rtxpro6000-2s"), model.Plan{TP: 8, DCP: 8}, 131072, tuned, []string{nccl}},
		{"one GPU: no collectives", "tiny-mla-moe", mustTopo(t, "rtxpro6000-2s"), model.Plan{TP: 1}, 4096, tuned, nil},
		{"H200 NVSwitch: FlashMLA, NVLink, no FP4", "kimi-k2.5-nvfp4", mustTopo(t, "h200-nvswitch"), model.Plan{TP: 8}, 131072, tuned, nil},
		{"one-shot across sockets", "kimi-k2.5", mustTopo(t, "rtxpro6000-2s"), model.Plan{TP: 8}, 4096,
			Options{CUDAGraphs: true, CustomAR: CustomAROneShot, NCCL: ncclenv.Settings{P2PLevel: "SYS"}}, []string{nccl, custom}},
		{"one-shot on the switch box", "kimi-k2.5", mustTopo(t, "rtxpro6000-switch"), model.Plan{TP: 8}, 4096,
			Options{CUDAGraphs: true, CustomAR: CustomAROneShot, NCCL: ncclenv.Settings{P2PLevel: "SYS"}}, []string{nccl}},
		{"calibrated collectives and MoE GEMMs", "kimi-k2.5-nvfp4", calibrated("moe_gemm/nvfp4"), model.Plan{TP: 8}, 4096, tuned, nil},
		{"collective calibration under another P2P level", "kimi-k2.5-nvfp4", calibrated("moe_gemm"), model.Plan{TP: 8}, 4096,
			Options{CUDAGraphs: true}, []string{nccl, shm}},
		{"P2P disabled", "kimi-k2.5", mustTopo(t, "rtxpro6000-switch"), model.Plan{TP: 8}, 4096,
			Options{CUDAGraphs: true, NCCL: ncclenv.Settings{P2PDisable: true}}, []string{nccl, shm}},
		{"calibrated attention", "kimi-k2.5", calibrated("attention/bf16"), model.Plan{TP: 8}, 131072, tuned, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := New(c.topo, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			pr, err := p.PredictScenario(Scenario{Arch: mustPreset(t, c.model), Plan: c.plan,
				Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: c.ctx, KVDtype: model.BF16}})
			if err != nil {
				t.Fatal(err)
			}
			if len(pr.Caveats) != len(c.want) {
				t.Fatalf("caveats %q, want ones starting %q", pr.Caveats, c.want)
			}
			for i, w := range c.want {
				if !strings.HasPrefix(pr.Caveats[i], w) {
					t.Errorf("caveat %d = %q, want it to start %q", i, pr.Caveats[i], w)
				}
			}
		})
	}
}
