package traces

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// Calibration of a topology from measured spans: traces extracts samples
// (measured op times with the prior cost the prediction gave each op) and
// sim fits them (sim.FitCompute for compute efficiencies per kernel family,
// sim.Calibrate for collective latency and bandwidth). Fitting uses the
// even steps only; the odd steps are held out and the prediction error on
// them is reported before and after.

// CalibrateTraceOptions configure CalibrateTrace. The zero value
// calibrates the scenario recorded in the traces, starting from its
// topology.
type CalibrateTraceOptions struct {
	Override ScenarioSpec
	// Topology to start from (nil: the scenario's).
	Topology *topology.Topology
	// Source names the traces in the provenance; Created is the date
	// (RFC 3339; "" = now, UTC).
	Source, Created string
	Fit             sim.FitOptions
}

// HoldOut is the prediction error on the held-out (odd) steps.
type HoldOut struct {
	Steps int `json:"steps"`
	Units int `json:"units"`
	// OpRMSErrPct: RMS over units of (predicted - median measured) / median;
	// OpMeanAbsErrPct: the mean of |that|; StepErrPct: the step's error.
	OpRMSErrPct     float64 `json:"op_rms_err_pct"`
	OpMeanAbsErrPct float64 `json:"op_mean_abs_err_pct"`
	StepErrPct      float64 `json:"step_err_pct"`
}

// TraceCalibration is the result of CalibrateTrace.
type TraceCalibration struct {
	// Spec is the first scenario; Specs all of them (one per workload or
	// option set the traces hold, all on one box).
	Spec     ScenarioSpec                `json:"scenario"`
	Specs    []ScenarioSpec              `json:"scenarios,omitempty"`
	Families []sim.FamilyFit             `json:"families"`
	Device   sim.DeviceFit               `json:"device"`
	Coll     []topology.CollectiveParams `json:"collectives,omitempty"`
	// ComputeSamples and CollSamples count the fit samples (even steps).
	ComputeSamples int `json:"compute_samples"`
	CollSamples    int `json:"collective_samples"`
	FitSteps       int `json:"fit_steps"`
	// Before and After: held-out error over all scenarios (the op errors
	// of every scenario's units together; StepErrPct the mean of the
	// scenarios' signed step errors). PerScenario has each one's.
	Before      HoldOut            `json:"before"`
	After       HoldOut            `json:"after"`
	PerScenario []ScenarioHoldOuts `json:"per_scenario,omitempty"`
	// Notes say what could not be fitted and why.
	Notes    []string           `json:"notes,omitempty"`
	Topology *topology.Topology `json:"-"`
}

// ScenarioHoldOuts is one scenario's held-out error before and after.
type ScenarioHoldOuts struct {
	Spec   ScenarioSpec `json:"scenario"`
	Before HoldOut      `json:"before"`
	After  HoldOut      `json:"after"`
}

// sizeResidualNotePct: a size range whose median residual after the fit
// exceeds this is worth a note (assumption: beyond run-to-run noise of a
// kernel's median, ~1-2 %, with margin).
const sizeResidualNotePct = 5

func even(step int) bool { return step >= 0 && step%2 == 0 }
func odd(step int) bool  { return step >= 0 && step%2 == 1 }

// calScenario is one scenario of a calibration with its prior prediction.
type calScenario struct {
	g         *group
	rs        *ResolvedScenario
	pr        *sim.Prediction
	sched     *model.Schedule
	predictor *sim.Predictor
	al        *Alignment
}

// CalibrateTrace fits the box's cost parameters to the spans of results.
// The spans may hold several scenarios (workloads, options) of one box:
// each is predicted on the same starting topology and their samples are
// fitted together, so a family whose ops differ in size across workloads
// shows it. Every scenario needs at least two steps (one to fit, one to
// hold out).
func CalibrateTrace(results []*Result, o CalibrateTraceOptions) (*TraceCalibration, error) {
	var is issues
	groups := groupTraces(results, o.Override, &is)
	if len(groups) == 0 {
		msg := "calibrate: no span belongs to a scenario"
		if len(is.list) > 0 {
			msg += ": " + is.list[0].Reason
		}
		return nil, errors.New(msg)
	}
	base := o.Topology
	scens := make([]*calScenario, 0, len(groups))
	tc := &TraceCalibration{}
	fitSteps := 0
	for _, g := range groups {
		rs, err := g.spec.Resolve()
		if err != nil {
			return nil, fmt.Errorf("calibrate: %w", err)
		}
		if base == nil {
			base = rs.Topology
		} else if o.Topology == nil && rs.Topology.Name != base.Name {
			return nil, fmt.Errorf("calibrate: the traces' scenarios run on different boxes (%s, %s); calibrate one box at a time (or name it with --topo)", base.Name, rs.Topology.Name)
		}
		pr, sched, predictor, err := rs.Predict(base)
		if err != nil {
			return nil, fmt.Errorf("calibrate: %s: predict: %w", rs.Spec, err)
		}
		al := Align(g.traces, pr, "")
		steps := map[int32]bool{}
		hasOdd := false
		for _, s := range al.Samples {
			if even(int(s.Step)) {
				steps[s.Step] = true
			} else if odd(int(s.Step)) {
				hasOdd = true
			}
		}
		if len(steps) == 0 || !hasOdd {
			return nil, fmt.Errorf("calibrate: %s: need measured ops on at least one even and one odd step (fit on even, evaluate on odd); got %d aligned samples", rs.Spec, len(al.Samples))
		}
		fitSteps += len(steps)
		scens = append(scens, &calScenario{g: g, rs: rs, pr: pr, sched: sched, predictor: predictor, al: al})
		tc.Specs = append(tc.Specs, rs.Spec)
	}
	tc.Spec = tc.Specs[0]
	tc.FitSteps = fitSteps

	// Samples of the even steps of every scenario. Collective samples are
	// kept per (op, ranks, NCCL setting): a calibration applies under the
	// setting it was measured with.
	type collKey struct {
		op    model.Collective
		ranks int
		nccl  sim.NCCLOptions
	}
	var comp []sim.ComputeSample
	coll := map[collKey][]sim.CalSample{}
	var ckeys []collKey
	grouped, badGroup := 0, 0
	// Traces of the eager scenarios (every group holds at least one): their
	// spans hold host delay (see the floors below).
	var eagerTraces [][]Span
	for _, sc := range scens {
		if !sc.rs.Options.CUDAGraphs {
			eagerTraces = append(eagerTraces, sc.g.traces...)
		}
		opAt := scheduleIndex(sc.pr, sc.sched)
		for _, s := range sc.al.Samples {
			if !even(int(s.Step)) {
				continue
			}
			u := &sc.al.Units[s.Unit]
			if len(u.Ops) != 1 {
				grouped++
				continue
			}
			res := &sc.pr.Ops[u.Ops[0]]
			op := opAt(u.Ops[0])
			if op.IsCollective() {
				n := len(op.Group)
				if !firstRanks(op.Group) || (op.Collective != model.AllReduce && op.Collective != model.AllGather && op.Collective != model.ReduceScatter) {
					badGroup++
					continue
				}
				k := collKey{op.Collective, n, sc.rs.Options.NCCL()}
				if _, ok := coll[k]; !ok {
					ckeys = append(ckeys, k)
				}
				coll[k] = append(coll[k], sim.CalSample{Bytes: op.CommBytes, TimeUs: s.Us})
				tc.CollSamples++
				continue
			}
			comp = append(comp, sim.ComputeSample{Family: sc.predictor.CostFamily(op), Cost: res.Cost, OverheadUs: res.OverheadUs, MeasuredUs: s.Us})
		}
	}
	tc.ComputeSamples = len(comp)
	if grouped > 0 {
		tc.Notes = append(tc.Notes, fmt.Sprintf("%d samples stand for several ops (kernels matched per layer or per step) and were not used to fit", grouped))
	}
	if badGroup > 0 {
		tc.Notes = append(tc.Notes, fmt.Sprintf("%d collective samples are all-to-all or run on a group other than ranks 0..n-1 and were not used to fit", badGroup))
	}
	created := o.Created
	if created == "" {
		created = time.Now().UTC().Format(time.RFC3339)
	}
	source := o.Source
	if source == "" {
		var srcs []string
		for _, r := range results {
			srcs = append(srcs, r.Source)
		}
		source = strings.Join(srcs, ", ")
	}
	var specNames []string
	for _, sp := range tc.Specs {
		specNames = append(specNames, sp.String())
	}
	prov := fmt.Sprintf("trace %s (%s), %s; fit on %d even steps", source, strings.Join(specNames, "; "), created, tc.FitSteps)

	// The floor first: ops the prior prices at the minimum kernel time say
	// what the floor is, and the families are then fitted on top of the
	// fitted floor (a floor left at its prior would push the memory or
	// compute efficiency of a family's small kernels down to explain
	// their time, and mis-price its large ones).
	var err error
	tc.Device.MinKernelUs, tc.Device.MinKernelUsByKind = fitMinKernel(comp, &tc.Notes)
	if len(eagerTraces) > 0 && tc.Device.MinKernelUsByKind != nil {
		// Eager: a kernel's measured interval also holds the host's delay
		// between its start event and its launch, longest for the kinds
		// with the slowest launch path (cuBLAS); per-kind floors would
		// count that host time twice (once in launch_eager_us). Graph runs
		// measure device time only.
		tc.Device.MinKernelUsByKind = nil
		tc.Notes = append(tc.Notes, "eager run: one device-wide min_kernel_us (per-kind floors are fitted from CUDA-graph runs only)")
	}
	for i := range comp {
		if f, ok := tc.Device.MinKernelUsByKind[string(comp[i].Family.Kind)]; ok {
			comp[i].Cost.MinKernelUs = f
		} else if tc.Device.MinKernelUs > 0 {
			comp[i].Cost.MinKernelUs = tc.Device.MinKernelUs
		}
	}
	if len(comp) > 0 {
		if tc.Families, err = sim.FitCompute(comp, o.Fit); err != nil {
			return nil, fmt.Errorf("calibrate: %w", err)
		}
		for _, f := range tc.Families {
			for _, sz := range f.Sizes {
				if sz.Samples >= 5 && math.Abs(sz.MedianErrPct) > sizeResidualNotePct {
					tc.Notes = append(tc.Notes, fmt.Sprintf("%s ops of %g-%g us (%d samples): the fitted efficiency is off by %+.1f %% (median); one efficiency per family cannot follow size", f.Family, sz.LoUs, sz.HiUs, sz.Samples, sz.MedianErrPct))
				}
			}
		}
	} else {
		tc.Notes = append(tc.Notes, "no compute op measured: efficiencies keep their priors")
	}
	if len(eagerTraces) > 0 {
		tc.Device.LaunchEagerUs = fitLaunchEager(eagerTraces, &tc.Notes)
	} else {
		tc.Notes = append(tc.Notes, "CUDA-graph run: host launch cost per kernel not fitted")
	}
	out, err := sim.ApplyComputeFit(base, tc.Families, tc.Device, prov)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	sort.SliceStable(ckeys, func(i, j int) bool {
		if ckeys[i].op != ckeys[j].op {
			return ckeys[i].op < ckeys[j].op
		}
		return ckeys[i].ranks < ckeys[j].ranks
	})
	for _, k := range ckeys {
		fit, err := sim.Calibrate(out, coll[k], sim.CalibrateOptions{Op: k.op, Ranks: k.ranks, NCCL: k.nccl, Source: prov, Created: created})
		if err != nil {
			tc.Notes = append(tc.Notes, fmt.Sprintf("%s over %d ranks: %v", k.op, k.ranks, err))
			continue
		}
		out = fit.Topology
		tc.Coll = append(tc.Coll, fit.Params...)
	}
	out.Sources = append(out.Sources, "calibrated: "+prov)
	tc.Topology = out

	// Held-out error before and after, per scenario and over all.
	var befores, afters []*ScenarioReport
	for _, sc := range scens {
		before := buildReport(sc.rs, sc.pr, sc.sched, sc.al, sc.g, &CompareOptions{Steps: odd})
		pr2, sched2, _, err := sc.rs.Predict(out)
		if err != nil {
			return nil, fmt.Errorf("calibrate: %s: predict with the calibrated topology: %w", sc.rs.Spec, err)
		}
		al2 := Align(sc.g.traces, pr2, sc.al.Mode)
		after := buildReport(sc.rs, pr2, sched2, al2, sc.g, &CompareOptions{Steps: odd})
		befores, afters = append(befores, before), append(afters, after)
		tc.PerScenario = append(tc.PerScenario, ScenarioHoldOuts{Spec: sc.rs.Spec, Before: holdOut(before), After: holdOut(after)})
	}
	tc.Before, tc.After = holdOut(befores...), holdOut(afters...)
	return tc, nil
}

// scheduleIndex maps an index into pr.Ops to its schedule op: rank 0's
// list when the prediction is symmetric, else the ranks concatenated.
func scheduleIndex(pr *sim.Prediction, s *model.Schedule) func(i int) *model.Op {
	if pr.Symmetric {
		return func(i int) *model.Op { return &s.Ranks[0][i] }
	}
	off := make([]int, len(s.Ranks)+1)
	for r := range s.Ranks {
		off[r+1] = off[r] + len(s.Ranks[r])
	}
	return func(i int) *model.Op {
		r := sort.SearchInts(off, i+1) - 1
		return &s.Ranks[r][i-off[r]]
	}
}

func firstRanks(g []int) bool {
	for i, r := range g {
		if r != i {
			return false
		}
	}
	return len(g) >= 2
}

// fitLaunchEager estimates the host launch cost per kernel from the op
// spans' AttrHostLaunchUs on even steps (median) of eager traces (under CUDA
// graphs the host launches the graph, not the kernels); 0 (the prior
// stands) when fewer than 10 spans carry it.
func fitLaunchEager(traces [][]Span, notes *[]string) float64 {
	var v []float64
	for _, tr := range traces {
		for i := range tr {
			s := &tr[i]
			if s.OpID == "" || !even(s.Step) {
				continue
			}
			if x, ok := s.Attr(string(AttrHostLaunchUs)); ok {
				if f, ok := x.Number(); ok && f > 0 && !math.IsInf(f, 0) {
					v = append(v, f)
				}
			}
		}
	}
	if len(v) < 10 {
		*notes = append(*notes, fmt.Sprintf("%d spans carry %s (need 10): launch_eager_us keeps its prior", len(v), AttrHostLaunchUs))
		return 0
	}
	sort.Float64s(v)
	return Quantile(v, 0.5)
}

// fitMinKernel estimates the shortest kernel time as the median measured
// time (less the graph overhead) of the ops the prior prices at the floor
// (Bound latency); at least 10 such ops are needed.
func fitMinKernel(comp []sim.ComputeSample, notes *[]string) (float64, map[string]float64) {
	var all []float64
	byKind := map[string][]float64{}
	for i := range comp {
		if c := &comp[i]; c.Cost.Bound == sim.BoundLatency {
			v := c.MeasuredUs - c.OverheadUs
			all = append(all, v)
			byKind[string(c.Family.Kind)] = append(byKind[string(c.Family.Kind)], v)
		}
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

// minFloorSamples: how many floor-priced ops a kind needs before its own
// floor is fitted (fewer: the device-wide median stands for it).
const minFloorSamples = 10

// positiveMedian is the median of v, 0 when it is not positive (overhead
// larger than the measured time: nothing to fit).
func positiveMedian(v []float64) float64 {
	sort.Float64s(v)
	if m := Quantile(v, 0.5); m > 0 {
		return m
	}
	return 0
}

// holdOut is the held-out error over one or several scenarios: op
// errors of all their units together, the mean of their signed step errors.
func holdOut(srs ...*ScenarioReport) HoldOut {
	var h HoldOut
	var sq, ab, step float64
	for _, sr := range srs {
		h.Steps += sr.Steps
		step += sr.Step.ErrPct
		for _, o := range sr.Ops {
			if o.MedianUs <= 0 {
				continue
			}
			sq += o.ErrPct * o.ErrPct
			ab += math.Abs(o.ErrPct)
			h.Units++
		}
	}
	if h.Units > 0 {
		h.OpRMSErrPct = math.Sqrt(sq / float64(h.Units))
		h.OpMeanAbsErrPct = ab / float64(h.Units)
	}
	if len(srs) > 0 {
		h.StepErrPct = step / float64(len(srs))
	}
	return h
}
