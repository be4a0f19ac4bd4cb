package sim

import (
	"math"
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
)

// TestSerialWalkPriced: SGLang's cutlass_moe_fp4 walks every local expert
// on one thread (engprof.SerialWalk, 100 cycles an expert measured on an
// H100): the routed experts' gate_up op carries local experts x 100
// cycles at the priced SM clock beyond its companions' floors: 256
// experts under TP, 32 a rank under EP 8. FlashInfer's CUTLASS MoE, which
// has no such walk, carries none.
func TestSerialWalkPriced(t *testing.T) {
	topo := collTopo(t, "rtxpro6000-2s", 0)
	clock := topo.DeviceOf(0).SMClockMHz
	for _, c := range []struct {
		kernel string
		plan   model.Plan
		local  int // 0: no walk
	}{
		{"cutlass", model.Plan{TP: 8}, 256},
		{"cutlass", model.Plan{TP: 8, EP: true}, 32},
		{"flashinfer_cutlass", model.Plan{TP: 8}, 0},
	} {
		p, err := New(topo, Options{CUDAGraphs: true, Engine: engprof.Ref{Name: "sglang"}, MoEKernel: c.kernel, AttentionBackend: "flashinfer"})
		if err != nil {
			t.Fatal(err)
		}
		pr, err := p.PredictScenario(Scenario{Arch: mustPreset(t, "glm-5-nvfp4"), Plan: c.plan,
			Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 512, KVDtype: model.BF16}})
		if err != nil {
			t.Fatalf("%s %+v: %v", c.kernel, c.plan, err)
		}
		want := float64(c.local) * 100 / clock
		n := 0
		for i := range pr.Ops {
			op := &pr.Ops[i]
			if op.Rank != 0 || !strings.HasSuffix(op.ID, ".moe.experts_gate_up") {
				continue
			}
			n++
			if got := op.Cost.SerialWalkUs; math.Abs(got-want) > 1e-9 {
				t.Errorf("%s %+v %s: serial walk %.4f us, want %d experts x 100 cycles / %.0f MHz = %.4f", c.kernel, c.plan, op.ID, got, c.local, clock, want)
				break
			}
		}
		if n == 0 {
			t.Errorf("%s %+v: no routed experts' gate_up op", c.kernel, c.plan)
		}
	}
}
