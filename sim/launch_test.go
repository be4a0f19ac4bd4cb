package sim

import (
	"fmt"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
)

// TestGraphsNeverSlowerThanEager is the launch model's invariant: for the
// same ops (batches that are capture sizes, so a graph pads nothing), a
// CUDA graph removes the host launch of every op and replaces the
// stream-launch gap (KernelGapEagerUs) with the smaller graph-node gap
// (LaunchGraphUs), so its step can only be shorter or equal. Checked over
// models, batches, contexts, plans, NCCL settings and boxes; the expected
// relation needs no number, only the preset's ordering of the two gaps.
func TestGraphsNeverSlowerThanEager(t *testing.T) {
	type scen struct {
		model string
		build model.BuildOptions
	}
	models := []scen{
		{"kimi-k2.5-nvfp4", model.BuildOptions{}},
		{"glm-5-nvfp4", model.BuildOptions{DenseDSA: true}},
		{"deepseek-v3", model.BuildOptions{}},
		{"tiny-mla-moe", model.BuildOptions{}},
	}
	boxes := []string{"rtxpro6000-2s", "rtxpro6000-switch", "h200-nvswitch"}
	nccl := []Options{{}, {NCCL: ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"}}, {CustomAR: CustomAROneShot, ARNormFusion: ToggleOn}}
	plans := []model.Plan{{TP: 8}, {TP: 8, EP: true}, {TP: 4}, {TP: 1, DP: 8, EP: true}}
	works := []model.Workload{
		{Phase: model.Decode, Batch: 1, Context: 4096},
		{Phase: model.Decode, Batch: 8, Context: 1024},
		{Phase: model.Decode, Batch: 64, Context: 8192, KVDtype: model.FP8},
		{Phase: model.Decode, Batch: 256, Context: 2048},
	}
	checked := 0
	for _, m := range models {
		a, err := model.Preset(m.model)
		if err != nil {
			t.Fatal(err)
		}
		for _, box := range boxes {
			topo := mustTopo(t, box)
			for _, o := range nccl {
				for _, plan := range plans {
					if plan.Validate(a) != nil {
						continue
					}
					for _, w := range works {
						name := fmt.Sprintf("%s/%s/%s/%+v/b%d", m.model, box, plan.Normalized(), o, w.Batch)
						s, err := model.BuildWith(a, plan, w, m.build)
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						eager, graph := o, o
						graph.CUDAGraphs = true
						if _, ok := graph.GraphTokens(w.Batch, topo.DeviceOf(0).MemBytes, plan.World()); !ok {
							t.Fatalf("%s: batch %d is not a capture size", name, w.Batch)
						}
						pe, err := New(topo, eager)
						if err != nil {
							t.Fatal(err)
						}
						pg, err := New(topo, graph)
						if err != nil {
							t.Fatal(err)
						}
						te, err := pe.StepUsBuilt(s)
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						tg, err := pg.StepUsBuilt(s)
						if err != nil {
							t.Fatalf("%s: %v", name, err)
						}
						// Exact ordering up to float rounding (1e-9 relative).
						if tg > te*(1+1e-9) {
							t.Errorf("%s: graph step %.1f us is slower than eager %.1f us", name, tg, te)
						}
						checked++
					}
				}
			}
		}
	}
	if checked < 100 {
		t.Errorf("only %d scenarios checked", checked)
	}
}
