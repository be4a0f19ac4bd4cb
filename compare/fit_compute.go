package compare

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/tpscope/tpscope/calibrate"
	"github.com/tpscope/tpscope/internal/stats"
	"github.com/tpscope/tpscope/internal/units"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/traces"
	"github.com/tpscope/tpscope/traces/schema"
)

// sizeResidualNotePct: a size range whose median residual after the fit
// exceeds this is worth a note (assumption: beyond run-to-run noise of a
// kernel's median, ~1-2 %, with margin).
const sizeResidualNotePct = 5

// The compute fit comes in three parts the calibration offers one by
// one to the held-out steps (select.go): the floors (fitFloors), the
// families fitted on top of the floors kept (fitFamilies), and, from eager
// runs, the host launch cost (fitLaunchEager).
//
// The floor first: ops the prior prices at the minimum kernel time say
// what the floor is, and the families are then fitted on top of the
// fitted floor (a floor left at its prior would push the memory or
// compute efficiency of a family's small kernels down to explain their
// time, and mis-price its large ones).

// fitFloors fits the device-wide floor and, from CUDA-graph runs, the
// per-kind floors.
func fitFloors(smp *samples, notes *[]string) (float64, map[string]float64) {
	device, byKind := fitMinKernel(smp.compute, notes)
	if len(smp.eager) > 0 && byKind != nil {
		// Eager: a kernel's measured interval also holds the host's delay
		// between its start event and its launch, longest for the kinds
		// with the slowest launch path (cuBLAS); per-kind floors would
		// count that host time twice (once in launch_eager_us). Graph runs
		// measure device time only.
		byKind = nil
		*notes = append(*notes, "eager run: one device-wide min_kernel_us (per-kind floors are fitted from CUDA-graph runs only)")
	}
	return device, byKind
}

// fitFamilies fits every compute family's efficiencies on top of the
// floors dev keeps (a kind's own, else the device-wide one, else the
// prior's).
func fitFamilies(smp *samples, dev calibrate.DeviceFit, fo calibrate.ComputeOptions, notes *[]string) ([]calibrate.FamilyFit, error) {
	comp := slices.Clone(smp.compute)
	if len(comp) == 0 {
		*notes = append(*notes, "no compute op measured: efficiencies keep their priors")
		return nil, nil
	}
	for i := range comp {
		tied := floorIsRamp(&comp[i].Cost)
		if f, ok := dev.MinKernelUsByKind[string(comp[i].Family.Kind)]; ok {
			comp[i].Cost.MinKernelUs = f
			if tied {
				// The prior's ramp is its floor (catalog.go), and so is
				// the fitted one (calibrate.ApplyCompute): the families are
				// fitted on top of both.
				comp[i].Cost.RampUs = f
			}
		} else if dev.MinKernelUs > 0 {
			comp[i].Cost.MinKernelUs = dev.MinKernelUs
		}
	}
	fams, err := calibrate.Compute(comp, fo)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	return fams, nil
}

// sizeNotes says where one efficiency per family cannot follow the ops'
// sizes, and which families were fitted on one size.
func sizeNotes(fams []calibrate.FamilyFit, notes *[]string) {
	for _, f := range fams {
		switch {
		case f.OneSizeRate:
			*notes = append(*notes, fmt.Sprintf("%s: its ops are of one size here and ran faster than the prior's roofline with no fixed time at all, which no fixed time explains: its efficiency was fitted (memory %.3g, prior %.3g; compute %.3g, prior %.3g), no fixed time", f.Family, f.MemEfficiencyFrac, f.PriorMemEfficiencyFrac, f.EfficiencyFrac, f.PriorEfficiencyFrac))
		case f.OneSize && math.Abs(f.RampUs-f.PriorRampUs) > 0.02*f.PriorRampUs:
			*notes = append(*notes, fmt.Sprintf("%s: its ops are of one size here, which cannot tell a fixed time from a rate: fitted as a fixed time per kernel (ramp %s us, prior %s), its efficiencies kept (traces of other batches, fitted together, tell a rate)", f.Family, units.Us(f.RampUs), units.Us(f.PriorRampUs)))
		}
		for _, sz := range f.Sizes {
			if sz.Samples >= 5 && math.Abs(sz.MedianErrPct) > sizeResidualNotePct {
				*notes = append(*notes, fmt.Sprintf("%s ops of %g-%g us (%d samples): the fitted efficiency is off by %+.1f %% (median); one efficiency per family cannot follow size", f.Family, sz.LoUs, sz.HiUs, sz.Samples, sz.MedianErrPct))
			}
		}
	}
}

// fitLaunchEager estimates the host launch cost per kernel from the op
// spans' schema.AttrHostLaunchUs on the fitted steps (median) of eager traces (under CUDA
// graphs the host launches the graph, not the kernels); 0 (the prior
// stands) when fewer than 10 spans carry it.
func fitLaunchEager(trs [][]traces.Span, fit func(step int) bool, notes *[]string) float64 {
	var v []float64
	for _, tr := range trs {
		for i := range tr {
			s := &tr[i]
			if s.OpID == "" || !fit(s.Step) {
				continue
			}
			if x, ok := s.Attr(string(schema.AttrHostLaunchUs)); ok {
				if f, ok := x.Number(); ok && f > 0 && !math.IsInf(f, 0) {
					v = append(v, f)
				}
			}
		}
	}
	if len(v) < 10 {
		*notes = append(*notes, fmt.Sprintf("%d spans carry %s (need 10): launch_eager_us keeps its prior", len(v), schema.AttrHostLaunchUs))
		return 0
	}
	sort.Float64s(v)
	return stats.Quantile(v, 0.5)
}

// fitMinKernel estimates the shortest kernel time as the median measured
// time (less the graph overhead) of the ops the prior prices at the floor
// (Bound latency); at least 10 such ops are needed.
//
// Where the prior's ramp is its floor (the catalog's rule: a kernel costs
// floor + max(compute, memory)), no op is priced at the floor alone; the
// floor is then read from the ops whose roofline term is under it (the
// ones the floor dominates, the same ops max(floor, roofline) prices at
// the floor), as their measured time less the overhead and the prior's
// roofline term.
func fitMinKernel(comp []calibrate.ComputeSample, notes *[]string) (float64, map[string]float64) {
	var all []float64
	byKind := map[string][]float64{}
	for i := range comp {
		c := &comp[i]
		v := c.MeasuredUs - c.OverheadUs
		switch roof := max(c.Cost.ComputeUs, c.Cost.MemoryUs); {
		case floorIsRamp(&c.Cost):
			if c.Cost.Bound == sim.BoundLoop || roof > c.Cost.MinKernelUs {
				continue
			}
			v -= roof
		case c.Cost.Bound != sim.BoundLatency:
			continue
		}
		all = append(all, v)
		byKind[string(c.Family.Kind)] = append(byKind[string(c.Family.Kind)], v)
	}
	if len(all) < minFloorSamples {
		*notes = append(*notes, fmt.Sprintf("%d ops priced at the minimum kernel time (need %d): min_kernel_us keeps its prior", len(all), minFloorSamples))
		return 0, nil
	}
	device := positiveMedian(all)
	kinds := map[string]float64{}
	for k, v := range byKind {
		if len(v) < minFloorSamples {
			continue
		}
		if m := positiveMedian(v); m > 0 {
			kinds[k] = m
		}
	}
	if len(kinds) == 0 {
		kinds = nil
	}
	return device, kinds
}

// floorIsRamp reports whether a prior cost's ramp is its floor (the
// catalog's rule, topology/catalog.go), so that the two are one latency
// and are fitted as one.
func floorIsRamp(c *sim.OpCost) bool {
	return c.RampUs > 0 && c.RampUs == c.MinKernelUs
}

// minFloorSamples: how many floor-priced ops a kind needs before its own
// floor is fitted (fewer: the device-wide median stands for it).
const minFloorSamples = 10

// positiveMedian is the median of v, 0 when it is not positive (overhead
// larger than the measured time: nothing to fit).
func positiveMedian(v []float64) float64 {
	sort.Float64s(v)
	if m := stats.Quantile(v, 0.5); m > 0 {
		return m
	}
	return 0
}
