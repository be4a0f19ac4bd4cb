package calibrate

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/internal/topofiletest"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// TestFitComputeRecoversScales: samples made by hand from the model
// t = max(min, a x compute, b x memory) with a = 2 (efficiency halved:
// 0.70 -> 0.35) on compute-bound ops and b = 1.25 (memory efficiency
// 0.80 -> 0.64) on memory-bound ops of one family, and a second family
// with memory-bound ops only, whose compute factor cannot be seen.
func TestFitComputeRecoversScales(t *testing.T) {
	gemm := sim.CostFamily{Key: "gemm/bf16", Kind: model.KindGEMM, EfficiencyFrac: 0.70, MemEfficiencyFrac: 0.80, MemGBps: 1000}
	norm := sim.CostFamily{Key: "norm", Kind: model.KindNorm, EfficiencyFrac: 0.50, MemEfficiencyFrac: 0.80, MemGBps: 1000}
	var ss []ComputeSample
	for i := 1; i <= 20; i++ {
		c := 10 * float64(i) // compute-bound: compute 10..200 us, memory a third of it
		ss = append(ss, ComputeSample{Family: gemm, Cost: sim.OpCost{ComputeUs: c, MemoryUs: c / 3, MinKernelUs: 2, MemGBps: 1000}, MeasuredUs: 2 * c})
		m := 5 * float64(i) // memory-bound: memory 5..100 us, compute a fifth
		ss = append(ss, ComputeSample{Family: gemm, Cost: sim.OpCost{ComputeUs: m / 5, MemoryUs: m, MinKernelUs: 2, MemGBps: 1000}, MeasuredUs: 1.25 * m})
		ss = append(ss, ComputeSample{Family: norm, Cost: sim.OpCost{ComputeUs: 0.1, MemoryUs: m, MinKernelUs: 2, MemGBps: 1000}, MeasuredUs: m})
	}
	fits, err := Compute(ss, ComputeOptions{})
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
			if math.Abs(f.EfficiencyFrac/tc.eff-1) > 1e-3 || math.Abs(f.MemEfficiencyFrac/tc.memEff-1) > 1e-3 {
				t.Errorf("efficiency %.5f mem %.5f, want %.4f %.4f (±0.1 %%)", f.EfficiencyFrac, f.MemEfficiencyFrac, tc.eff, tc.memEff)
			}
			if f.RMSErrFrac > 1e-3 {
				t.Errorf("fit RMS error %.2g on exact samples", f.RMSErrFrac)
			}
			if f.RampDetermined || f.RampUs != 0 {
				t.Errorf("ramp %.4g us (determined %v) on samples without one", f.RampUs, f.RampDetermined)
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
	if fits[0].PriorRMSErrFrac < 0.2 {
		t.Errorf("prior RMS error %.3f: the samples should be far from the prior", fits[0].PriorRMSErrFrac)
	}

	// Applied to a preset, a Predictor built on the result uses the fit.
	topo, err := topology.Preset(topology.DefaultPreset)
	if err != nil {
		t.Fatal(err)
	}
	cal, err := ApplyCompute(topo, fits, DeviceFit{LaunchEagerUs: 4.5}, "trace x.json, 2026-12-02, 60 samples", "")
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
	p, err := sim.New(cal, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	op := &model.Op{Kind: model.KindGEMM, WeightDtype: model.BF16}
	if f := p.CostFamily(op); f.Key != "gemm/bf16" || f.EfficiencyFrac != 0.35 || f.MemEfficiencyFrac != 0.64 {
		t.Errorf("predictor family %+v", f)
	}
}

// TestFitComputeRamp: memory-bound GEMMs of 1-100 us on the default
// preset, whose catalog device already carries a ramp for the family (the
// gemm floor, (800 + 700) cycles / 1650 MHz + 2 x 0.55 us = 2.01 us;
// topology/catalog.go), so the samples carry it as the prior, as a real trace's
// would. The measured times are made by hand from t = 3 + b x memory, a
// 3 us ramp (1 us more than the prior) and b = 1.25 (memory efficiency
// 0.80 -> 0.64). The fit must move the ramp from the prior to 3 us and
// find b (the sizes span 100x, past rampMinSpan); a fit that kept the
// prior ramp would leave ~1 us unexplained at the small sizes and miss
// the 2 % band. The calibrated topology must carry ramp_us with its
// source, a Predictor built on it must add the ramp to the roofline term,
// and a family the trace did not fit (norm) must keep its prior ramp.
func TestFitComputeRamp(t *testing.T) {
	topo, err := topology.Preset(topology.DefaultPreset)
	if err != nil {
		t.Fatal(err)
	}
	prior := topo.DeviceOf(0).RampUs
	const priorGEMMRampUs, priorNormRampUs = 2.01, 1.77 // hand-derived above and (800 + 300) / 1650 + 2 x 0.55
	if math.Abs(prior["gemm"]-priorGEMMRampUs) > 0.006 || math.Abs(prior["norm"]-priorNormRampUs) > 0.006 {
		t.Fatalf("default preset's prior ramps %v, want gemm %.2f and norm %.2f", prior, priorGEMMRampUs, priorNormRampUs)
	}
	gemm := sim.CostFamily{Key: "gemm/bf16", Kind: model.KindGEMM, EfficiencyFrac: 0.70, MemEfficiencyFrac: 0.80, MemGBps: 1000}
	var ss []ComputeSample
	for i := 1; i <= 30; i++ {
		m := math.Pow(100, float64(i-1)/29) // 1..100 us, log-spaced
		ss = append(ss, ComputeSample{Family: gemm, Cost: sim.OpCost{ComputeUs: m / 10, MemoryUs: m, MinKernelUs: priorGEMMRampUs, RampUs: priorGEMMRampUs, MemGBps: 1000},
			MeasuredUs: math.Max(priorGEMMRampUs, 3+1.25*m)})
	}
	fits, err := Compute(ss, ComputeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := fits[0]
	t.Logf("ramp %.4f us (prior %.2f, determined %v), mem eff %.4f, rms %.2g (prior %.2g)", f.RampUs, f.PriorRampUs, f.RampDetermined, f.MemEfficiencyFrac, f.RMSErrFrac, f.PriorRMSErrFrac)
	if f.PriorRampUs != priorGEMMRampUs {
		t.Errorf("prior ramp %.4f, want the samples' %.2f", f.PriorRampUs, priorGEMMRampUs)
	}
	if !f.RampDetermined || math.Abs(f.RampUs-3) > 0.06 || math.Abs(f.MemEfficiencyFrac/0.64-1) > 0.01 {
		t.Fatalf("ramp %.4f us (determined %v), mem eff %.4f; want 3 ± 2 %% and 0.64 ± 1 %%", f.RampUs, f.RampDetermined, f.MemEfficiencyFrac)
	}
	cal, err := ApplyCompute(topo, fits, DeviceFit{}, "trace r.json", "")
	if err != nil {
		t.Fatal(err)
	}
	d := cal.DeviceOf(0)
	if math.Abs(d.RampUs["gemm/bf16"]-3) > 0.06 || !strings.Contains(d.Sources["ramp_us.gemm/bf16"], "r.json") {
		t.Fatalf("ramp_us %v, source %q", d.RampUs, d.Sources["ramp_us.gemm/bf16"])
	}
	// A 64 MB bf16 weight stream at 1,597 x 0.64 GB/s is 62.6 us; the
	// ramp adds 3 us.
	p, err := sim.New(cal, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	op := &model.Op{Kind: model.KindGEMM, WeightDtype: model.BF16, M: 1, N: 4096, K: 8192, FLOPs: 2 * 4096 * 8192, BytesRead: 64e6}
	c := priorCost(t, p, op)
	if c.RampUs != d.RampUs["gemm/bf16"] || math.Abs(c.Us-(c.RampUs+c.MemoryUs)) > 1e-9 || c.Bound != sim.BoundMemory {
		t.Errorf("cost %.3f us (ramp %.3f, memory %.3f, %s), want ramp + memory", c.Us, c.RampUs, c.MemoryUs, c.Bound)
	}
	// A family the trace did not fit keeps its prior ramp: the norm floor.
	norm := &model.Op{Kind: model.KindNorm, M: 1, BytesRead: 64e6}
	if c := priorCost(t, p, norm); math.Abs(c.RampUs-priorNormRampUs) > 0.006 || math.Abs(c.Us-(c.RampUs+c.MemoryUs)) > 1e-9 {
		t.Errorf("norm cost %.3f us with ramp %.3f, want the prior ramp %.2f + memory %.3f", c.Us, c.RampUs, priorNormRampUs, c.MemoryUs)
	}
}

// priorCost is the cost p gives op alone: a one-op schedule on rank 0,
// predicted.
func priorCost(t *testing.T, p *sim.Predictor, op *model.Op) sim.OpCost {
	t.Helper()
	o := *op
	o.ID = "L00.op"
	pr, err := p.Predict(&model.Schedule{Ranks: [][]model.Op{{o}}})
	if err != nil {
		t.Fatal(err)
	}
	return pr.Ops[0].Cost
}

// TestFitComputeOneSizeFaster: samples of one size measured below their
// prior roofline even with no fixed time (20 us of memory term at a prior
// memory efficiency of 0.4, ramp 2 us; measured 12 us) cannot be a fixed
// time, which would be -8 us: the rate is off, and the memory factor is
// fitted with the ramp at 0 (OneSizeRate). With the prior's pull on
// y = ln b, ln(20 b / 12)^2 + w y^2 is least at y = -ln(20/12) / (1 + w),
// the efficiency 0.4 / e^y. A Marlin build faster than the SM-stream
// ceiling its profile states is such a family; the ramp-only fit had
// left it at its prior (the ramp clamped at 0).
func TestFitComputeOneSizeFaster(t *testing.T) {
	fam := sim.CostFamily{Key: "moe_gemm/int4-g32", Kind: model.KindMoEGEMM, EfficiencyFrac: 0.55, MemEfficiencyFrac: 0.4, MemGBps: 1000}
	var ss []ComputeSample
	for range 20 {
		c := sim.OpCost{ComputeUs: 1, MemoryUs: 20, MinKernelUs: 2, RampUs: 2, MemGBps: 1000}
		ss = append(ss, ComputeSample{Family: fam, Cost: c, MeasuredUs: 12})
	}
	fits, err := Compute(ss, ComputeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := fits[0]
	y := -math.Log(20.0/12) / (1 + DefaultComputePriorWeight)
	want := 0.4 / math.Exp(y)
	if !f.OneSize || !f.OneSizeRate || !f.MemoryDetermined || math.Abs(f.MemEfficiencyFrac/want-1) > 1e-3 {
		t.Errorf("one size, faster: one-size %v, rate %v, memory efficiency %.4f (determined %v), want %.4f fitted", f.OneSize, f.OneSizeRate, f.MemEfficiencyFrac, f.MemoryDetermined, want)
	}
	if f.RampUs != 0 || f.ComputeDetermined {
		t.Errorf("one size, faster: ramp %.3f us, compute determined %v; want the ramp at 0 and no compute factor (no compute-bound sample)", f.RampUs, f.ComputeDetermined)
	}
	if !(f.RMSErrFrac < f.PriorRMSErrFrac) {
		t.Errorf("rms %.3f after, %.3f before: want lower", f.RMSErrFrac, f.PriorRMSErrFrac)
	}
}

// TestFitComputeOneSize: samples of one size (one op role at one batch,
// 20 us of memory term, prior ramp 2 us) measured 3 us above the prior
// fit a fixed time and a rate alike; the fit takes the fixed time (ramp
// 2 + 3 = 5 us, less the prior's pull: r minimizing
// ln((r + 20) / 25)^2 + w (r - 2)^2, solved below by bisection of its
// derivative) and keeps the memory
// efficiency at its prior, and says so (OneSize). The same excess on
// samples spanning 5..100 us of memory term is no fixed time but a rate
// (each measured 1.25 x its term): there the memory factor is fitted.
func TestFitComputeOneSize(t *testing.T) {
	fam := sim.CostFamily{Key: "attention/bf16", Kind: model.KindAttention, EfficiencyFrac: 0.55, MemEfficiencyFrac: 0.80, MemGBps: 1000}
	var one, spread []ComputeSample
	for i := 1; i <= 20; i++ {
		c := sim.OpCost{ComputeUs: 1, MemoryUs: 20, MinKernelUs: 2, RampUs: 2, MemGBps: 1000}
		one = append(one, ComputeSample{Family: fam, Cost: c, MeasuredUs: 2 + 20 + 3})
		m := 5 * float64(i)
		c.MemoryUs = m
		spread = append(spread, ComputeSample{Family: fam, Cost: c, MeasuredUs: 2 + 1.25*m})
	}
	fits, err := Compute(one, ComputeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := fits[0]
	w := DefaultComputePriorWeight
	dL := func(r float64) float64 { return 2*math.Log((r+20)/25)/(r+20) + 2*w*(r-2) }
	lo, hi := 2.0, 5.0
	for range 60 {
		if mid := (lo + hi) / 2; dL(mid) < 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	if !f.OneSize || !f.RampDetermined || math.Abs(f.RampUs-lo) > 0.01 {
		t.Errorf("one size: one-size %v, ramp %.3f us (determined %v), want %.3f us", f.OneSize, f.RampUs, f.RampDetermined, lo)
	}
	if f.MemoryDetermined || f.MemEfficiencyFrac != 0.80 || f.MemoryScale != 1 {
		t.Errorf("one size: memory efficiency %.4f (scale %.4f, determined %v), want the prior 0.80 kept", f.MemEfficiencyFrac, f.MemoryScale, f.MemoryDetermined)
	}
	fits, err = Compute(spread, ComputeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f = fits[0]
	if f.OneSize || !f.MemoryDetermined || math.Abs(f.MemEfficiencyFrac/0.64-1) > 1e-3 {
		t.Errorf("spread: one-size %v, memory efficiency %.4f (determined %v), want 0.80 / 1.25 = 0.64 fitted", f.OneSize, f.MemEfficiencyFrac, f.MemoryDetermined)
	}
}

// TestApplyComputeRestatesCatalogFields: a hand-written box that took
// launch_eager_us and min_kernel_us from the GPU catalog (topology.Parse)
// and is then calibrated with a fitted launch cost states that cost as
// its own: from_catalog keeps min_kernel_us alone, so the prediction no
// longer calls the fitted launch cost the catalog's.
func TestApplyComputeRestatesCatalogFields(t *testing.T) {
	preset, err := topology.Preset("h200-nvswitch")
	if err != nil {
		t.Fatal(err)
	}
	full := topofiletest.Write(t, preset, "h200.json")
	topo, err := topology.Load(topofiletest.EditDevice(t, full, "cut.json", func(dev map[string]any) {
		delete(dev, "launch_eager_us")
		delete(dev, "min_kernel_us")
	}))
	if err != nil {
		t.Fatal(err)
	}
	cal, err := ApplyCompute(topo, nil, DeviceFit{LaunchEagerUs: 4.5}, "trace x.json", "")
	if err != nil {
		t.Fatal(err)
	}
	d := cal.Devices[0]
	if d.LaunchEagerUs != 4.5 || d.FromCatalog == nil || !slices.Equal(d.FromCatalog.Fields, []string{"min_kernel_us"}) {
		t.Errorf("launch_eager_us %v, from_catalog %+v: want the fitted 4.5 and min_kernel_us alone from the catalog", d.LaunchEagerUs, d.FromCatalog)
	}
}
