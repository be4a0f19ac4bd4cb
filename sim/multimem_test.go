package sim

import (
	"math"
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
)

// TestMultimemMatchesVLLM: torch's multimem all-reduce on 8 Hopper GPUs
// of an NVSwitch box against vLLM's own measurement of it (vLLM PR
// #42324, the multimem column of its 8-GPU SM 9.0 table): the constants
// are re-derived here by relative least squares from the cited rows (so
// they cannot drift from their source) and every row is within 5 %.
// Held out, the same model on B200s, which take Hopper's figures (no
// Blackwell fit): vLLM PR #24111's TP 6 and TP 8 tables
// (symm_mem_multimem, 0.5-4 MB). Those tables are B200's as the PR's
// dispatch limits read them (sim TestCustomARBlackwell); they were read
// as H100's until 2026-12-06. TP 6 within 12 %; TP 8 from 1 MB, where
// vLLM runs multimem on 8 B200s, within 21 % (1 MB: 13.5 us against 17,
// -20.8 %; 4 MB +7.4 %).
func TestMultimemMatchesVLLM(t *testing.T) {
	const mib = 1 << 20
	fitted := []struct{ mib, us float64 }{
		{0.5, 11}, {1, 14}, {1.5, 16}, {2, 18}, {3, 23}, {4, 27}, {8, 46}, {16, 87}, {32, 165}, {47.84, 244},
	}
	// Weighted least squares of us = a + b x mib with weights 1/us^2.
	var s, sx, sy, sxx, sxy float64
	for _, r := range fitted {
		w := 1 / (r.us * r.us)
		s, sx, sy, sxx, sxy = s+w, sx+w*r.mib, sy+w*r.us, sxx+w*r.mib*r.mib, sxy+w*r.mib*r.us
	}
	b := (s*sxy - sx*sy) / (s*sxx - sx*sx)
	a := (sy - b*sx) / s
	if math.Abs(a/multimemBaseUs-1) > 0.01 || math.Abs(b*8/(multimemUsPerShareByte*mib)-1) > 0.01 {
		t.Errorf("fit %.3f us + %.3f us/MiB (x8 = %.2f per share MiB), constants %.3f + %.3f", a, b, 8*b, multimemBaseUs, multimemUsPerShareByte*mib)
	}
	for _, c := range []struct {
		topo string
		n    int
		rows []struct{ mib, us float64 }
		tol  float64
	}{
		{"nvswitch:8xh100-sxm", 8, fitted, 0.05},
		{"nvswitch:8xb200", 6, []struct{ mib, us float64 }{{0.5, 13}, {1, 16}, {1.5, 18}, {2, 21}, {3, 25}, {4, 31}}, 0.12},
		{"nvswitch:8xb200", 8, []struct{ mib, us float64 }{{1, 17}, {1.5, 19}, {2, 20}, {3, 23}, {4, 26}}, 0.21},
	} {
		m := collModel(t, c.topo, 0, ncclenv.Settings{})
		group := make([]int, c.n)
		for i := range group {
			group[i] = i
		}
		for _, r := range c.rows {
			cc, ok := m.MultimemAllReduce(group, int64(r.mib*mib))
			if !ok {
				t.Fatalf("%s: no multimem all-reduce on %d GPUs", c.topo, c.n)
			}
			if e := cc.TimeUs/r.us - 1; math.Abs(e) > c.tol {
				t.Errorf("%d GPUs %.2f MiB: %.1f us, vLLM measured %.0f (%+.1f %%)", c.n, r.mib, cc.TimeUs, r.us, 100*e)
			}
		}
	}
	if _, ok := collModel(t, "rtxpro6000-2s", 0, ncclenv.Settings{}).MultimemAllReduce([]int{0, 1, 2, 3}, 1<<20); ok {
		t.Error("a PCIe box priced a multicast all-reduce")
	}
}

// TestMultimemNeedsMulticast: the multimem all-reduce runs on multicast
// memory, which an NVSwitch maps from Hopper on (NCCL nvls.cc reads
// CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, as torch's symmetric memory
// does): 8 A100s on their NVSwitch had been priced one (13.5 us at 1 MiB).
func TestMultimemNeedsMulticast(t *testing.T) {
	group := []int{0, 1, 2, 3, 4, 5, 6, 7}
	for topo, want := range map[string]bool{"nvswitch:8xa100-sxm": false, "nvswitch:8xh100-sxm": true, "nvswitch:8xb200": true} {
		if _, ok := collModel(t, topo, 0, ncclenv.Settings{}).MultimemAllReduce(group, 1<<20); ok != want {
			t.Errorf("%s: multimem all-reduce priced %v, want %v", topo, ok, want)
		}
	}
}

// TestCheckCustomARPricesSomething: a forced custom all-reduce on a step
// whose every all-reduce is above the kernel's 8 MiB buffer prices
// nothing (NCCL carries each, as priceCollective does), yet the options,
// the engine line ("oneshot all-reduce (forced)") and two custom
// all-reduce caveats had said it ran: a Kimi-K2.5 prefill of 4096 tokens
// all-reduces 4096 x 7168 x 2 B = 58.7 MB a call. At 512 tokens (7.3 MB)
// and in decode it prices the step; auto and off are the engine's own.
func TestCheckCustomARPricesSomething(t *testing.T) {
	a := mustPreset(t, "kimi-k2.5-nvfp4")
	for _, c := range []struct {
		custom  CustomAR
		phase   model.Phase
		context int
		refused bool
	}{
		{CustomAROneShot, model.Prefill, 4096, true},
		{CustomARTwoShot, model.Prefill, 4096, true},
		{CustomAROneShot, model.Prefill, 512, false},
		{CustomAROneShot, model.Decode, 4096, false},
		{CustomAROff, model.Prefill, 4096, false},
	} {
		sc := Scenario{Arch: a, Plan: model.Plan{TP: 8}, Topo: collTopo(t, "rtxpro6000-2s", 0),
			Workload: model.Workload{Phase: c.phase, Batch: 1, Context: c.context, KVDtype: model.FP8},
			Options:  Options{CUDAGraphs: true, CustomAR: c.custom}}
		err := sc.CheckCustomAR()
		if (err != nil) != c.refused {
			t.Errorf("%s %s %d: %v, want refused %v", c.custom, c.phase, c.context, err, c.refused)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), "--custom-ar "+string(c.custom)+": every all-reduce of the step is above the custom all-reduce's 8 MiB buffer (the smallest 58.7 MB a call)") {
			t.Errorf("%s: %v", c.custom, err)
		}
		if c.refused {
			// The premise: NCCL prices every all-reduce of that step.
			pr, _, err := Predict(sc)
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range pr.Ops {
				if customAlgo(op.Cost.Algo) {
					t.Fatalf("%s: op %s priced as a custom all-reduce", c.custom, op.ID)
				}
			}
		}
	}
}

// TestCheckARNormFusionPricesSomething: vLLM fuses an all-reduce with the
// RMSNorm after it up to 512 KiB at TP 8 on an H200; a DeepSeek-V3
// prefill of 4096 tokens all-reduces 58.7 MB a call, so --ar-norm-fusion
// and --ar-norm-fusion=false priced the same step (116,994.6 us, 1,753
// kernels a rank) and were printed among its options. In decode, and
// under SGLang's 2,048-token cap at a 1024-token prefill, the toggle
// prices the step.
func TestCheckARNormFusionPricesSomething(t *testing.T) {
	a := mustPreset(t, "deepseek-v3")
	for _, c := range []struct {
		engine  string
		toggle  Toggle
		phase   model.Phase
		context int
		refused bool
	}{
		{"vllm", ToggleOn, model.Prefill, 4096, true},
		{"vllm", ToggleOff, model.Prefill, 4096, true},
		{"vllm", ToggleOn, model.Decode, 4096, false},
		{"vllm", ToggleOff, model.Decode, 4096, false},
		{"sglang", ToggleOn, model.Prefill, 1024, false},
		{"vllm", ToggleDefault, model.Prefill, 4096, false},
	} {
		sc := Scenario{Arch: a, Plan: model.Plan{TP: 8}, Topo: collTopo(t, "h200-nvswitch", 0),
			Workload: model.Workload{Phase: c.phase, Batch: 1, Context: c.context, KVDtype: model.BF16},
			Options:  Options{CUDAGraphs: true, ARNormFusion: c.toggle, Engine: engprof.Ref{Name: c.engine}}}
		err := sc.CheckARNormFusion()
		if (err != nil) != c.refused {
			t.Errorf("%s %v %s %d: %v, want refused %v", c.engine, c.toggle, c.phase, c.context, err, c.refused)
		}
		if err != nil && !strings.Contains(err.Error(), "no all-reduce of the step is followed by an RMSNorm within vllm@0.24's fusion limits (messages up to 512 KiB)") {
			t.Errorf("%v: %v", c.toggle, err)
		}
	}
}
