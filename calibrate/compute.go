package calibrate

// Calibration of the compute cost model from measured op times (the
// executor's traces, a profiler trace aligned to a schedule).
//
// sim's compute model prices an op as (sim/compute.go, sim.OpCost)
//
//	t = overhead + max(MinKernelUs, RampUs + max(ComputeUs, MemoryUs), LoopUs) + MergeUs + ExtraKernels x MinKernelUs
//	ComputeUs = FLOPs / (peak x eff x fill),  MemoryUs = bytes / (BW x memEff)
//
// so a kernel family's efficiency enters as a factor on one term and its
// ramp as a fixed time beside it. Compute fits, per family (model.OpKind
// + dtype, the key of Device.Efficiency), two scale factors a (compute) and
// b (memory) that multiply the prior terms and the ramp r, by minimizing
// over x = (ln a, ln b, r)
//
//	mean_i (ln t_i(x) - ln measured_i)^2 + w * (x_a^2 + x_b^2 + (r - r_prior)^2 / 1 us^2)
//
// with Nelder-Mead (gonum/optimize). The fitted efficiencies are eff/a and
// memEff/b. Log space weighs every op by its relative error; the small
// prior weight w keeps a parameter the data cannot see (a family whose ops
// are all memory-bound says nothing about its compute efficiency) at its
// prior, and such a parameter is reported as not determined and left at
// the prior. The ramp is determined only when the family's roofline-bound
// ops span a size range (rampMinSpan): with one size, a fixed time and a
// bandwidth cannot be told apart.

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"

	"gonum.org/v1/gonum/optimize"

	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// ComputeSample is one measured non-collective op with the prior cost the
// Predictor gave it.
type ComputeSample struct {
	Family     sim.CostFamily
	Cost       sim.OpCost // prior cost terms (OpResult.Cost)
	OverheadUs float64    // OpResult.OverheadUs (CUDA-graph per-kernel time), not fitted
	MeasuredUs float64    // measured device time, us
}

// FamilyFit is the fit of one kernel family.
type FamilyFit struct {
	Family string `json:"family"`
	// Samples used; ComputeBound and MemoryBound count those whose
	// compute or memory term sets the fitted time (a factor is determined
	// only when at least MinBoundSamples samples are bound by its term).
	Samples      int `json:"samples"`
	ComputeBound int `json:"compute_bound"`
	MemoryBound  int `json:"memory_bound"`
	// ComputeScale (a) and MemoryScale (b) multiply the prior terms; 1 when
	// not determined.
	ComputeScale float64 `json:"compute_scale"`
	MemoryScale  float64 `json:"memory_scale"`
	// RampUs is the fitted fixed time beside the roofline term (the prior,
	// usually 0, when not determined).
	RampUs         float64 `json:"ramp_us"`
	PriorRampUs    float64 `json:"prior_ramp_us"`
	RampDetermined bool    `json:"ramp_determined"`
	// Prior and fitted efficiencies (fitted = prior / scale, at most 1).
	PriorEfficiencyFrac    float64 `json:"prior_efficiency_frac"`
	EfficiencyFrac         float64 `json:"efficiency_frac"`
	PriorMemEfficiencyFrac float64 `json:"prior_mem_efficiency_frac"`
	MemEfficiencyFrac      float64 `json:"mem_efficiency_frac"`
	ComputeDetermined      bool    `json:"compute_determined"`
	MemoryDetermined       bool    `json:"memory_determined"`
	// RMS relative error of the prior and the fitted model over the samples.
	PriorRMSErrFrac float64 `json:"prior_rms_err_frac"`
	RMSErrFrac      float64 `json:"rms_err_frac"`
	// Clamped is true when an efficiency came out above 1 and was capped.
	Clamped bool `json:"clamped,omitempty"`
	// OneSize is true when the family's bound samples span too few sizes
	// (rampMinSpan) to tell a fixed time from a rate: its error was then
	// fitted as a fixed time per kernel (the ramp), the efficiencies kept
	// at their priors.
	OneSize bool `json:"one_size,omitempty"`
	// OneSizeRate is true when such a family measured faster than its
	// prior roofline with no fixed time at all: a fixed time cannot be
	// negative, so the rate is what is off, and the bound term's
	// efficiency was fitted (the ramp at 0) instead of the ramp.
	OneSizeRate bool `json:"one_size_rate,omitempty"`
	// Sizes splits the fitted model's residuals by op size (the prior
	// time's decade): a family whose small and large ops need different
	// efficiencies shows it here. Device.Efficiency has one value per
	// family, so the fit itself cannot follow size.
	Sizes []SizeFit `json:"sizes,omitempty"`
}

// SizeFit is the residual of a family's fit over one size range.
type SizeFit struct {
	// Range of the prior (unfitted) time, us: [LoUs, HiUs).
	LoUs, HiUs float64
	Samples    int
	// MedianErrPct: median of (fitted - measured) / measured x 100.
	MedianErrPct float64
}

// ComputeOptions tune Compute. The zero value is the documented default.
type ComputeOptions struct {
	// PriorWeight is w above (0 = DefaultComputePriorWeight).
	PriorWeight float64
	// MinBoundSamples is how many samples a term must bind before its
	// factor counts as determined (0 = 3).
	MinBoundSamples int
}

// DefaultComputePriorWeight: moving a factor by e costs as much as a mean log
// error of 1 % (assumption: negligible against any real misfit, enough to
// pin a factor no sample constrains).
const DefaultComputePriorWeight = 1e-4

// Compute fits a compute and a memory scale per family. Samples with a
// non-positive or non-finite measured time are ignored; families come back
// sorted by key.
func Compute(samples []ComputeSample, o ComputeOptions) ([]FamilyFit, error) {
	if o.PriorWeight <= 0 {
		o.PriorWeight = DefaultComputePriorWeight
	}
	if o.MinBoundSamples <= 0 {
		o.MinBoundSamples = 3
	}
	by := map[string][]ComputeSample{}
	for _, s := range samples {
		if s.Family.Key == "" || !(s.MeasuredUs > 0) || math.IsInf(s.MeasuredUs, 0) || s.Cost.Fused {
			continue
		}
		by[s.Family.Key] = append(by[s.Family.Key], s)
	}
	if len(by) == 0 {
		return nil, errors.New("fit compute: no sample with a compute family and a measured time > 0")
	}
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]FamilyFit, 0, len(keys))
	for _, k := range keys {
		f, err := fitFamily(k, by[k], o)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// memScaled reports whether the sample's memory term is limited by the
// device bandwidth (so memEff scales it) rather than by the SMs the kernel
// keeps busy (compute.go's per-SM limit), which memEff does not change.
func memScaled(s *ComputeSample) bool {
	return s.Cost.MemGBps >= s.Family.MemGBps*(1-1e-9)
}

// modelUs is the fitted model's time for s with factors a, b and ramp r;
// which says which term set it (0 floor or a split-KV loop, 1 compute, 2
// memory). The loop bound (OpCost.LoopUs), a split launch's in-kernel
// merge (OpCost.MergeUs, a fact of the backend) and the engine's companion
// kernels (OpCost.ExtraKernels, one floor each; their gaps are in
// OverheadUs) are not fitted: they follow the floor the samples carry.
func modelUs(s *ComputeSample, a, b, r float64) (float64, int) {
	t, which := math.Max(s.Cost.MinKernelUs, s.Cost.LoopUs), 0
	if c := a * s.Cost.ComputeUs; s.Cost.ComputeUs > 0 && r+c > t {
		t, which = r+c, 1
	}
	m := s.Cost.MemoryUs
	if memScaled(s) {
		m *= b
	}
	if s.Cost.MemoryUs > 0 && r+m > t {
		t, which = r+m, 2
	}
	return s.OverheadUs + unfittedUs(s) + t, which
}

// unfittedUs is the device time of s the fit does not scale: its
// companion kernels at the floor the sample carries, and a split launch's
// in-kernel merge.
func unfittedUs(s *ComputeSample) float64 {
	return float64(s.Cost.ExtraKernels)*s.Cost.MinKernelUs + s.Cost.MergeUs
}

// rampMinSpan: the largest roofline term of a family's bound samples must
// be at least this many times its smallest for the ramp to be told apart
// from the bandwidth (assumption: a factor of 4 separates a fixed time of
// a few us from bytes / bandwidth within the 2-5 % noise of a trace).
const rampMinSpan = 4.0

// rampMinGain: the ramp is fitted only when it lowers the family's mean
// squared log error by at least this fraction (assumption: 10 %, well
// above what a free parameter gains on noise alone).
const rampMinGain = 0.10

// boundSpan counts the samples the model (a, b, r) bounds by compute and
// by memory, and reports whether those bound samples span enough sizes
// (rampMinSpan, at least minBound of them) to tell a ramp from a
// bandwidth.
func boundSpan(ss []ComputeSample, a, b, r float64, minBound int) (compute, memory int, spans bool) {
	lo, hi := math.Inf(1), 0.0
	for i := range ss {
		_, which := modelUs(&ss[i], a, b, r)
		switch which {
		case 1:
			compute++
		case 2:
			memory++
		}
		if which != 0 {
			term := math.Max(a*ss[i].Cost.ComputeUs, ss[i].Cost.MemoryUs)
			lo, hi = math.Min(lo, term), math.Max(hi, term)
		}
	}
	return compute, memory, compute+memory >= minBound && lo > 0 && hi >= rampMinSpan*lo
}

func fitFamily(key string, ss []ComputeSample, o ComputeOptions) (FamilyFit, error) {
	fam := ss[0].Family
	r0 := ss[0].Cost.RampUs
	f := FamilyFit{Family: key, Samples: len(ss), PriorEfficiencyFrac: fam.EfficiencyFrac, PriorMemEfficiencyFrac: fam.MemEfficiencyFrac, PriorRampUs: r0}
	logMeas := make([]float64, len(ss))
	for i := range ss {
		logMeas[i] = math.Log(ss[i].MeasuredUs)
	}
	// msle is the mean squared log error at (ln a, ln b, r).
	msle := func(x []float64) float64 {
		a, b, r := math.Exp(x[0]), math.Exp(x[1]), math.Max(0, x[2])
		var sum float64
		for i := range ss {
			t, _ := modelUs(&ss[i], a, b, r)
			if t <= 0 {
				t = 1e-9
			}
			d := math.Log(t) - logMeas[i]
			sum += d * d
		}
		return sum / float64(len(ss))
	}
	minimize := func(f func([]float64) float64, x0 []float64) (*optimize.Result, error) {
		res, err := optimize.Minimize(optimize.Problem{Func: f}, x0,
			&optimize.Settings{FuncEvaluations: 6000, Converger: &optimize.FunctionConverge{Absolute: 1e-12, Relative: 1e-12, Iterations: 100}},
			&optimize.NelderMead{})
		if err != nil && res == nil {
			return nil, fmt.Errorf("fit compute %s: %w", key, err)
		}
		return res, nil
	}
	// Start from the median ratio on each term's own samples, so that
	// Nelder-Mead starts near the answer even when the misfit is large.
	x0 := []float64{0, 0}
	var rc, rm, bound []float64
	for i := range ss {
		t, which := modelUs(&ss[i], 1, 1, r0)
		switch which {
		case 1:
			rc = append(rc, logMeas[i]-math.Log(t))
		case 2:
			rm = append(rm, logMeas[i]-math.Log(t))
		}
		if which != 0 {
			bound = append(bound, ss[i].MeasuredUs-ss[i].OverheadUs-unfittedUs(&ss[i]))
		}
	}
	if len(rc) > 0 {
		x0[0] = medianOf(rc)
	}
	if len(rm) > 0 {
		x0[1] = medianOf(rm)
	}
	sort.Float64s(bound)
	// factors fits the two factors at the prior ramp, then the ramp
	// beside them, from the two-factor optimum and from a ramp that
	// explains half the smallest bound sample; the ramp is kept only when
	// it cuts the mean squared log error by rampMinGain (a parameter the
	// data does not need stays at its prior) and the bound samples span
	// sizes. It returns (ln a, ln b, r).
	factors := func() ([]float64, error) {
		res2, err := minimize(func(x []float64) float64 {
			return msle([]float64{x[0], x[1], r0}) + o.PriorWeight*(x[0]*x[0]+x[1]*x[1])
		}, x0)
		if err != nil {
			return nil, err
		}
		best := []float64{res2.X[0], res2.X[1], r0}
		if len(bound) == 0 {
			return best, nil
		}
		obj3 := func(x []float64) float64 {
			dr := x[2] - r0
			return msle(x) + o.PriorWeight*(x[0]*x[0]+x[1]*x[1]+dr*dr)
		}
		var res3 *optimize.Result
		for _, st := range [][]float64{best, {best[0], best[1], 0.5 * bound[0]}} {
			r, err := minimize(obj3, append([]float64(nil), st...))
			if err != nil {
				return nil, err
			}
			if res3 == nil || r.F < res3.F {
				res3 = r
			}
		}
		if m2, m3 := msle(best), msle(res3.X); m3 < (1-rampMinGain)*m2 {
			if _, _, spans := boundSpan(ss, math.Exp(res3.X[0]), math.Exp(res3.X[1]), math.Max(0, res3.X[2]), o.MinBoundSamples); spans {
				best = res3.X
			}
		}
		return best, nil
	}
	// Samples of one size (one batch's trace: each op role at one shape)
	// show how far the prior is off, not whether by a fixed time or by a
	// rate: the two fit them alike and part only at other sizes, where a
	// rate fitted on small kernels scales their fixed costs with the bytes
	// (on one H100, efficiencies fitted on a batch-1 trace put batch 32
	// +29 % slow; the priors were -0.2 %). The error is then taken as a
	// fixed time per kernel, the ramp, which carries to larger kernels as
	// the same few microseconds and leaves their roofline to the priors
	// (the factors stay undetermined below). Fewer bound samples than
	// MinBoundSamples determine nothing, as below.
	c, m, spans := boundSpan(ss, 1, 1, r0, o.MinBoundSamples)
	f.OneSize = !spans && c+m >= o.MinBoundSamples && len(bound) > 0
	var best []float64
	var err error
	if f.OneSize {
		var res *optimize.Result
		res, err = minimize(func(x []float64) float64 {
			dr := x[0] - r0
			return msle([]float64{0, 0, x[0]}) + o.PriorWeight*dr*dr
		}, []float64{math.Max(r0, 0.5*bound[0])})
		if err == nil {
			best = []float64{0, 0, res.X[0]}
		}
		// Measured below the prior's roofline even with no fixed time: no
		// ramp explains that (it cannot be negative), so the kernel streams
		// or computes faster than the prior's efficiency says, which one
		// size does tell; fit the factors with the ramp at 0. A vLLM
		// Marlin build faster than the SM-stream ceiling its profile
		// states is such a family.
		if err == nil && meanLogResidual(ss, logMeas) < 0 {
			res, err = minimize(func(x []float64) float64 {
				return msle([]float64{x[0], x[1], 0}) + o.PriorWeight*(x[0]*x[0]+x[1]*x[1])
			}, x0)
			if err == nil {
				best, f.OneSizeRate = []float64{res.X[0], res.X[1], 0}, true
			}
		}
	} else {
		best, err = factors()
	}
	if err != nil {
		return f, err
	}
	a, b, r := math.Exp(best[0]), math.Exp(best[1]), math.Max(0, best[2])
	f.ComputeBound, f.MemoryBound, _ = boundSpan(ss, a, b, r, o.MinBoundSamples)
	f.RampDetermined = r != r0
	rated := !f.OneSize || f.OneSizeRate
	f.ComputeDetermined = rated && f.ComputeBound >= o.MinBoundSamples
	f.MemoryDetermined = rated && f.MemoryBound >= o.MinBoundSamples
	if !f.ComputeDetermined {
		a = 1
	}
	if !f.MemoryDetermined {
		b = 1
	}
	f.ComputeScale, f.MemoryScale, f.RampUs = a, b, r
	f.EfficiencyFrac, f.MemEfficiencyFrac = fam.EfficiencyFrac/a, fam.MemEfficiencyFrac/b
	if f.EfficiencyFrac > 1 {
		f.EfficiencyFrac, f.Clamped = 1, true
	}
	if f.MemEfficiencyFrac > 1 {
		f.MemEfficiencyFrac, f.Clamped = 1, true
	}
	var pe, fe float64
	for i := range ss {
		t0, _ := modelUs(&ss[i], 1, 1, r0)
		t1, _ := modelUs(&ss[i], a, b, r)
		r0e, r1e := t0/ss[i].MeasuredUs-1, t1/ss[i].MeasuredUs-1
		pe += r0e * r0e
		fe += r1e * r1e
	}
	f.PriorRMSErrFrac = math.Sqrt(pe / float64(len(ss)))
	f.RMSErrFrac = math.Sqrt(fe / float64(len(ss)))
	f.Sizes = sizeResiduals(ss, a, b, r, r0)
	return f, nil
}

// meanLogResidual is the mean of ln(measured) - ln(model) over ss at the
// prior factors and no fixed time: below 0, the samples run faster than
// their prior roofline alone.
func meanLogResidual(ss []ComputeSample, logMeas []float64) float64 {
	var sum float64
	for i := range ss {
		t, _ := modelUs(&ss[i], 1, 1, 0)
		sum += logMeas[i] - math.Log(math.Max(t, 1e-9))
	}
	return sum / float64(len(ss))
}

// sizeResiduals bins the samples by the decade of their prior time
// (1-10 us, 10-100 us, ...) and gives each bin's median relative error of
// the fitted model (a, b, r; the prior ramp is r0).
func sizeResiduals(ss []ComputeSample, a, b, r, r0 float64) []SizeFit {
	bins := map[int][]float64{}
	for i := range ss {
		t0, _ := modelUs(&ss[i], 1, 1, r0)
		t1, _ := modelUs(&ss[i], a, b, r)
		d := int(math.Floor(math.Log10(math.Max(t0, 1e-3))))
		bins[d] = append(bins[d], (t1/ss[i].MeasuredUs-1)*100)
	}
	keys := make([]int, 0, len(bins))
	for k := range bins {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	out := make([]SizeFit, 0, len(keys))
	for _, k := range keys {
		out = append(out, SizeFit{LoUs: math.Pow(10, float64(k)), HiUs: math.Pow(10, float64(k+1)), Samples: len(bins[k]), MedianErrPct: medianOf(bins[k])})
	}
	return out
}

func medianOf(v []float64) float64 {
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	n := len(c)
	if n%2 == 1 {
		return c[n/2]
	}
	return (c[n/2-1] + c[n/2]) / 2
}

// DeviceFit holds fitted device-wide parameters; 0 means "not fitted,
// keep the prior".
type DeviceFit struct {
	LaunchEagerUs float64 `json:"launch_eager_us,omitempty"`
	LaunchGraphUs float64 `json:"launch_graph_us,omitempty"`
	MinKernelUs   float64 `json:"min_kernel_us,omitempty"`
	// MinKernelUsByKind: per op kind floors (topology.Device field of the
	// same name).
	MinKernelUsByKind map[string]float64 `json:"min_kernel_us_by_kind,omitempty"`
}

// ApplyCompute returns a copy of t whose devices carry the fitted
// efficiencies (Efficiency[family], Efficiency["mem/"+family]) of the
// determined factors and the fitted device parameters, each with a
// Sources entry saying where it came from (provenance, e.g. "trace
// run.json, 2026-12-02, 4096 samples"), and the engine whose kernels they
// were fitted on (engine@version, CalibratedEngine; "" leaves it unset).
func ApplyCompute(t *topology.Topology, fits []FamilyFit, dev DeviceFit, provenance, engine string) (*topology.Topology, error) {
	out := t.Clone()
	for di := range out.Devices {
		d := &out.Devices[di]
		if engine != "" {
			d.CalibratedEngine = engine
		}
		if d.Efficiency == nil {
			d.Efficiency = map[string]float64{}
		}
		if d.Sources == nil {
			d.Sources = map[string]string{}
		}
		for _, f := range fits {
			if f.ComputeDetermined {
				d.Efficiency[f.Family] = round4(f.EfficiencyFrac)
				d.Sources["efficiency."+f.Family] = fmt.Sprintf("calibrated: %s; %d samples, %d compute-bound, prior %.4g", provenance, f.Samples, f.ComputeBound, f.PriorEfficiencyFrac)
			}
			if f.MemoryDetermined {
				d.Efficiency["mem/"+f.Family] = round4(f.MemEfficiencyFrac)
				d.Sources["efficiency.mem/"+f.Family] = fmt.Sprintf("calibrated: %s; %d samples, %d memory-bound, prior %.4g", provenance, f.Samples, f.MemoryBound, f.PriorMemEfficiencyFrac)
			}
			if f.RampDetermined {
				if d.RampUs == nil {
					d.RampUs = map[string]float64{}
				}
				d.RampUs[f.Family] = round4(f.RampUs)
				d.Sources["ramp_us."+f.Family] = fmt.Sprintf("calibrated: %s; %d samples, prior %.4g", provenance, f.Samples, f.PriorRampUs)
			}
		}
		set := func(field string, v float64, dst *float64) {
			if v > 0 {
				*dst = round4(v)
				d.Sources[field] = "calibrated: " + provenance
				d.Restate(field)
			}
		}
		set("launch_eager_us", dev.LaunchEagerUs, &d.LaunchEagerUs)
		set("launch_graph_us", dev.LaunchGraphUs, &d.LaunchGraphUs)
		set("min_kernel_us", dev.MinKernelUs, &d.MinKernelUs)
		for _, k := range slices.Sorted(maps.Keys(dev.MinKernelUsByKind)) {
			if d.MinKernelUsByKind == nil {
				d.MinKernelUsByKind = map[string]float64{}
			}
			v := d.MinKernelUsByKind[k]
			// A kind whose prior ramp is its prior floor (topology/catalog.go: a
			// kernel costs floor + max(compute, memory)) keeps the two
			// one latency: the fitted floor is its ramp too.
			tied := v > 0 && d.RampUs[k] == v
			set("min_kernel_us_by_kind."+k, dev.MinKernelUsByKind[k], &v)
			d.MinKernelUsByKind[k] = v
			if tied && dev.MinKernelUsByKind[k] > 0 {
				d.RampUs[k] = v
				d.Sources["ramp_us."+k] = "calibrated: " + provenance + "; the kind's fitted floor (ramp = floor, as in the prior)"
			}
		}
	}
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("apply compute fit: %w", err)
	}
	return out, nil
}
