package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

// TestMarlinSMStream: vLLM's Marlin MoE kernel dequantizes INT4 weights
// on the CUDA cores and multiplies with mma.sync, so its weight stream is
// capped at 11.3 bytes per SM per SM cycle (engine profile moe.kernels
// marlin sm_stream) wherever that is below the DRAM's: on an H200, 132
// SMs x 11.3 x 1,830 MHz = 2,729.6 GB/s, not 4,800 x 0.8 = 3,840; on a
// B200, 148 x 11.3 x 1,855.7 MHz = 3,103.5 GB/s, not 7,700 x 0.8 =
// 6,160. On an RTX PRO 6000 (188 x 11.3 x 1,650 MHz = 3,505 GB/s) and an
// L40S (142 x 11.3 x 2,520 MHz = 4,044 GB/s) the DRAM still binds: 1,597
// x 0.8 = 1,277.6 and 864 x 0.8 = 691.2 GB/s. Both expert GEMMs of
// Kimi-K2.5 (INT4 g32) at 128 requests, every expert active, stream at
// that rate; the BF16 shared experts' GEMMs (no Marlin) keep the DRAM's.
func TestMarlinSMStream(t *testing.T) {
	for _, c := range []struct {
		box      string
		wantGBps float64
		dramGBps float64
	}{
		{"nvswitch:8xh200-sxm", 132 * 11.3 * 1.830, 4800 * 0.8},
		{"nvswitch:8xb200", 148 * 11.3 * 1.8557, 7700 * 0.8},
		{"pcie-2s:8xrtx-pro-6000-server", 1597 * 0.8, 1597 * 0.8},
		{"pcie-2s:8xl40s", 864 * 0.8, 864 * 0.8},
	} {
		topo, pr := kimiINT4Decode(t, c.box, 128)
		n := 0
		for i := range pr.Ops {
			op := &pr.Ops[i]
			if op.Rank != 0 || op.Layer != 5 || op.Block != "moe" || op.Kind != model.KindMoEGEMM && op.Kind != model.KindGEMM {
				continue
			}
			want := c.dramGBps
			if strings.Contains(op.ID, ".experts_") {
				want = c.wantGBps
				n++
			} else if !strings.Contains(op.ID, ".shared_") {
				continue
			}
			if got := op.Cost.MemGBps; math.Abs(got-want) > 1e-6*want && op.Cost.CTAs >= float64(topo.DeviceOf(0).SMs) {
				t.Errorf("%s %s: streams at %.1f GB/s, want %.1f", c.box, op.ID, got, want)
			}
		}
		if n != 2 {
			t.Errorf("%s: %d routed-expert GEMMs in layer 5, want 2", c.box, n)
		}
	}
}

// TestMarlinCallLatency: the fused Marlin MoE call's fixed 32,400 SM
// cycles (engine profile sm_stream.call_cycles, the one-token excess
// over the priors measured on four GPUs outside the sample) are charged
// once a call, to its gate/up GEMM, at the device's SM clock, where the
// kernel's SM stream binds (H200, B200), and nowhere the DRAM binds
// (RTX PRO 6000, L40S: streaming hides it); the down GEMM and the BF16
// shared experts carry none, at one request as at 128.
func TestMarlinCallLatency(t *testing.T) {
	for _, c := range []struct {
		box   string
		bound bool
	}{
		{"nvswitch:8xh200-sxm", true},
		{"nvswitch:8xb200", true},
		{"pcie-2s:8xrtx-pro-6000-server", false},
		{"pcie-2s:8xl40s", false},
	} {
		for _, batch := range []int{1, 128} {
			topo, pr := kimiINT4Decode(t, c.box, batch)
			gateUps := 0
			for i := range pr.Ops {
				op := &pr.Ops[i]
				if op.Rank != 0 || op.Block != "moe" {
					continue
				}
				want := 0.0
				if strings.HasSuffix(op.ID, ".experts_gate_up") {
					gateUps++
					if c.bound {
						want = 32400 / topo.DeviceOf(0).SMClockMHz
					}
				}
				if got := op.Cost.CallLatencyUs; math.Abs(got-want) > 1e-9 {
					t.Errorf("%s batch %d %s: call latency %.3f us, want %.3f", c.box, batch, op.ID, got, want)
				}
			}
			if gateUps != mustPreset(t, "kimi-k2.5").MoELayers() {
				t.Errorf("%s batch %d: %d routed gate/up GEMMs, want one a MoE layer", c.box, batch, gateUps)
			}
		}
	}
}

// kimiINT4Decode prices a Kimi-K2.5 (INT4 experts) TP-8 decode step of
// batch sequences at 4K context on box, graphs on, the tables' balanced
// routing, and returns the box with the prediction.
func kimiINT4Decode(t *testing.T, box string, batch int) (*topology.Topology, *Prediction) {
	t.Helper()
	topo, err := topology.Resolve(box, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(topo, Options{CUDAGraphs: true})
	if err != nil {
		t.Fatal(err)
	}
	pr, err := p.PredictScenario(Scenario{Arch: mustPreset(t, "kimi-k2.5"), Plan: model.Plan{TP: 8}, Build: model.BuildOptions{Routing: model.BalancedRouting},
		Workload: model.Workload{Phase: model.Decode, Batch: batch, Context: 4096, KVDtype: model.BF16}})
	if err != nil {
		t.Fatal(err)
	}
	return topo, pr
}
