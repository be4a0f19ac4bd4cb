package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

// TestFitComputeRecoversScales: samples made by hand from the model
// t = max(min, a x compute, b x memory) with a = 2 (efficiency halved:
// 0.70 -> 0.35) on compute-bound ops and b = 1.25 (memory efficiency
// 0.80 -> 0.64) on memory-bound ops of one family, and a second family
// with memory-bound ops only, whose compute factor cannot be seen.
func TestFitComputeRecoversScales(t *testing.T) {
	gemm := CostFamily{Key: "gemm/bf16", Kind: model.KindGEMM, Efficiency: 0.70, MemEfficiency: 0.80, MemGBps: 1000}
	norm := CostFamily{Key: "norm", Kind: model.KindNorm, Efficiency: 0.50, MemEfficiency: 0.80, MemGBps: 1000}
	var ss []ComputeSample
	for i := 1; i <= 20; i++ {
		c := 10 * float64(i) // compute-bound: compute 10..200 us, memory a third of it
		ss = append(ss, ComputeSample{Family: gemm, Cost: OpCost{ComputeUs: c, MemoryUs: c / 3, MinKernelUs: 2, MemGBps: 1000}, MeasuredUs: 2 * c})
		m := 5 * float64(i) // memory-bound: memory 5..100 us, compute a fifth
		ss = append(ss, ComputeSample{Family: gemm, Cost: OpCost{ComputeUs: m / 5, MemoryUs: m, MinKernelUs: 2, MemGBps: 1000}, MeasuredUs: 1.25 * m})
		ss = append(ss, ComputeSample{Family: norm, Cost: OpCost{ComputeUs: 0.1, MemoryUs: m, MinKernelUs: 2, MemGBps: 1000}, MeasuredUs: m})
	}
	fits, err := FitCompute(ss, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fits) != 2 || fits[0].Family != "gemm/bf16" || fits[1].Family != "norm" {
		t.Fatalf("families %+v", fits)
	}
	tests := []struct {
		name          string
		f             FamilyFit
		eff, memEff   float64
		compDet, mDet bool
	}{
		{"gemm", fits[0], 0.35, 0.64, true, true},
		{"norm", fits[1], 0.50, 0.80, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			if f.ComputeDetermined != tc.compDet || f.MemoryDetermined != tc.mDet {
				t.Fatalf("determined compute %v memory %v, want %v %v", f.ComputeDetermined, f.MemoryDetermined, tc.compDet, tc.mDet)
			}
			if math.Abs(f.Efficiency/tc.eff-1) > 1e-3 || math.Abs(f.MemEfficiency/tc.memEff-1) > 1e-3 {
				t.Errorf("efficiency %.5f mem %.5f, want %.4f %.4f (±0.1 %%)", f.Efficiency, f.MemEfficiency, tc.eff, tc.memEff)
			}
			if f.RMSRelErr > 1e-3 {
				t.Errorf("fit RMS error %.2g on exact samples", f.RMSRelErr)
			}
		})
	}
	// Samples span 2..400 us: decades [1,10), [10,100), [100,1000); the
	// exact samples leave no residual in any.
	if n := len(fits[0].Sizes); n != 3 {
		t.Errorf("gemm size ranges: %d, want 3 (%+v)", n, fits[0].Sizes)
	}
	for _, sz := range fits[0].Sizes {
		if math.Abs(sz.MedianErrPct) > 0.1 {
			t.Errorf("size range %g-%g us: residual %.3f %%", sz.LoUs, sz.HiUs, sz.MedianErrPct)
		}
	}
	if fits[0].PriorRMSRelErr < 0.2 {
		t.Errorf("prior RMS error %.3f: the samples should be far from the prior", fits[0].PriorRMSRelErr)
	}

	// Applied to a preset, a Predictor built on the result uses the fit.
	topo, err := topology.Preset(topology.DefaultPreset)
	if err != nil {
		t.Fatal(err)
	}
	cal, err := ApplyComputeFit(topo, fits, DeviceFit{LaunchEagerUs: 4.5}, "trace x.json, 2026-12-02, 60 samples")
	if err != nil {
		t.Fatal(err)
	}
	d := cal.DeviceOf(0)
	if d.Efficiency["gemm/bf16"] != 0.35 || d.Efficiency["mem/gemm/bf16"] != 0.64 || d.LaunchEagerUs != 4.5 {
		t.Errorf("device: gemm/bf16 %v, mem/gemm/bf16 %v, launch %v", d.Efficiency["gemm/bf16"], d.Efficiency["mem/gemm/bf16"], d.LaunchEagerUs)
	}
	if _, ok := d.Efficiency["norm"]; ok && d.Efficiency["norm"] != topo.DeviceOf(0).Efficiency["norm"] {
		t.Errorf("undetermined norm compute efficiency was changed")
	}
	if !strings.Contains(d.Sources["efficiency.gemm/bf16"], "x.json") {
		t.Errorf("provenance missing: %q", d.Sources["efficiency.gemm/bf16"])
	}
	p, err := New(cal, Options{})
	if err != nil {
		t.Fatal(err)
	}
	op := &model.Op{Kind: model.KindGEMM, WeightDtype: model.BF16}
	if f := p.CostFamily(op); f.Key != "gemm/bf16" || f.Efficiency != 0.35 || f.MemEfficiency != 0.64 {
		t.Errorf("predictor family %+v", f)
	}
}
