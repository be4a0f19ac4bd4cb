package compare

import (
	"fmt"
	engprof "github.com/tpscope/tpscope/engine"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/tpscope/tpscope/calibrate"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/traces"
)

// A calibration that cannot make things worse silently. Every fitted
// parameter — a kind's kernel floor, the device-wide floor, a family's
// efficiencies, the eager launch cost, a collective's latency and
// bandwidth — is offered to the held-out steps one at a time, on top of
// those already kept, in that order (the families are fitted on top of
// the floors kept). It is kept when the held-out ops (and steps) whose
// prediction it changes are predicted no worse with it: their RMS
// relative error does not rise by more than HeldOutTolerancePts. One
// that changes no held-out prediction has no support and keeps its
// prior: a floor fitted from the norms alone is not applied to the GEMMs
// on faith. Since each kept parameter keeps the errors of the units it
// touches and leaves the others', the held-out op RMS error can rise by
// no more than the tolerance per parameter; the step error can rise more
// (errors of opposite sign that cancelled in the step), and
// Calibration.Worse says when either got worse, for the caller to refuse.
//
// The held-out steps both choose the parameters and judge the result:
// the figures after are those of a validation set, not of an untouched
// test set. With few steps nothing better is at hand; the choices list
// each decision with its figures.

// HeldOutTolerancePts: a held-out RMS or step error within this many
// percentage points of another is no worse (assumption: below the
// run-to-run noise of a held-out op's median, about 0.5 % on the
// synthetic traces with 2 % noise and more on a real GPU; a fitted
// parameter the held-out steps cannot tell from its prior, such as a
// launch cost measured on the host that moves a GPU-bound step by
// 0.01 %, is kept rather than thrown away).
const HeldOutTolerancePts = 0.1

// ParamChoice is one fitted parameter and what the held-out steps said of
// it.
type ParamChoice struct {
	// Param names it ("min_kernel_us.router", "efficiency gemm/bf16",
	// "launch_eager_us", "allreduce 8 ranks").
	Param string `json:"param"`
	// Value says the fitted value(s) against the prior, in words.
	Value string `json:"value"`
	// Fitted is the value of a one-number parameter (a floor, the launch
	// cost), in us; 0 for the others.
	Fitted float64 `json:"fitted,omitempty"`
	// Units: held-out ops (and steps) whose prediction it changes;
	// BeforePct and AfterPct their RMS relative error without and with it.
	Units     int     `json:"units"`
	BeforePct float64 `json:"before_pct"`
	AfterPct  float64 `json:"after_pct"`
	Kept      bool    `json:"kept"`
}

func (p ParamChoice) String() string {
	if p.Units == 0 {
		return fmt.Sprintf("%s (%s): changes no held-out prediction; prior kept", p.Param, p.Value)
	}
	verb := "kept"
	if !p.Kept {
		verb = "not supported by the held-out steps, prior kept"
	}
	return fmt.Sprintf("%s (%s): %s (its %d held-out ops: RMS error %.1f %% -> %.1f %%)", p.Param, p.Value, verb, p.Units, p.BeforePct, p.AfterPct)
}

// stepUnit is the key of a scenario's step among its held-out units.
const stepUnit = "(step)"

// unitKey names one held-out unit across predictions of one scenario.
type unitKey struct {
	scen int
	key  string
	rank int
}

// evaluation is a topology's held-out error.
type evaluation struct {
	reports []*ScenarioReport
	hold    HoldOut
	errs    map[unitKey]float64 // signed % error per unit with a measurement
}

// selector keeps the fitted parameters the held-out steps support.
type selector struct {
	base  *topology.Topology
	evals []*calScenario
	steps func(int) bool
	prov  string
	// engine is the engine@version whose kernels the fitted scenarios
	// ran (fittedEngine), recorded on the calibrated devices.
	engine string
	c      *Calibration

	before *evaluation
	cur    *evaluation
	topo   *topology.Topology // base with what is kept so far
	dev    calibrate.DeviceFit
	fams   []calibrate.FamilyFit
}

func newSelector(base *topology.Topology, evals []*calScenario, steps func(int) bool, prov string, c *Calibration) (*selector, error) {
	s := &selector{base: base, evals: evals, steps: steps, prov: prov, engine: fittedEngine(evals), c: c, topo: base}
	ev, err := s.eval(base)
	if err != nil {
		return nil, err
	}
	s.before, s.cur = ev, ev
	return s, nil
}

// eval predicts every held-out scenario on t and measures its error.
func (s *selector) eval(t *topology.Topology) (*evaluation, error) {
	ev := &evaluation{errs: map[unitKey]float64{}}
	for i, sc := range s.evals {
		scen := sc.g.sc
		scen.Topo = t
		pr, sched, err := sim.Predict(scen)
		if err != nil {
			return nil, fmt.Errorf("calibrate: %s: predict with the calibrated topology: %w", scen, err)
		}
		al := Align(sc.g.traces, pr, sc.al.Mode)
		rep := buildReport(sc.g, pr, sched, al, &Options{Steps: s.steps})
		ev.reports = append(ev.reports, rep)
		for _, o := range rep.Ops {
			if o.MedianUs > 0 {
				ev.errs[unitKey{i, o.Key, o.Rank}] = o.ErrPct
			}
		}
		// The step is a held-out unit too: a parameter that prices no op
		// by itself (the eager launch cost: the host's pace) shows there.
		if rep.Step.MedianUs > 0 {
			ev.errs[unitKey{i, stepUnit, -1}] = rep.Step.ErrPct
		}
	}
	ev.hold = holdOut(ev.reports...)
	return ev, nil
}

// offer evaluates cand (the kept parameters plus one); the parameter is
// kept when the held-out units it changes are predicted better.
func (s *selector) offer(param, value string, fitted float64, cand *topology.Topology) (bool, error) {
	ev, err := s.eval(cand)
	if err != nil {
		return false, err
	}
	ch := ParamChoice{Param: param, Value: value, Fitted: fitted}
	var sqB, sqA float64
	for k, e := range ev.errs {
		b, ok := s.cur.errs[k]
		if !ok || math.Abs(e-b) < 1e-9 {
			continue
		}
		ch.Units++
		sqB += b * b
		sqA += e * e
	}
	if ch.Units > 0 {
		ch.BeforePct = math.Sqrt(sqB / float64(ch.Units))
		ch.AfterPct = math.Sqrt(sqA / float64(ch.Units))
		ch.Kept = ch.AfterPct <= ch.BeforePct+HeldOutTolerancePts
	}
	s.c.Choices = append(s.c.Choices, ch)
	if ch.Kept {
		s.cur, s.topo = ev, cand
	}
	return ch.Kept, nil
}

// fittedEngine is the engine@version whose kernels the fitted scenarios
// ran (the first's; the traces of one calibration run one engine's
// kernels, or the fit would mix them), "" when it cannot be resolved.
func fittedEngine(evals []*calScenario) string {
	if len(evals) == 0 {
		return ""
	}
	prof, err := engprof.Lookup(evals[0].g.sc.Options.Engine)
	if err != nil {
		return ""
	}
	return prof.Name()
}

// withDevice is base with the families and device parameters given.
func (s *selector) withDevice(fams []calibrate.FamilyFit, dev calibrate.DeviceFit) (*topology.Topology, error) {
	out, err := calibrate.ApplyCompute(s.base, fams, dev, s.prov, s.engine)
	if err != nil {
		return nil, fmt.Errorf("calibrate: %w", err)
	}
	return out, nil
}

// run fits and offers every parameter; it returns the box with those
// kept.
func (s *selector) run(smp *samples, fo calibrate.ComputeOptions, created string) (*topology.Topology, error) {
	c := s.c
	prior := s.base.DeviceOf(0)
	device, byKind := fitFloors(smp, &c.Notes)
	for _, k := range slices.Sorted(maps.Keys(byKind)) {
		dev := s.dev
		dev.MinKernelUsByKind = maps.Clone(dev.MinKernelUsByKind)
		if dev.MinKernelUsByKind == nil {
			dev.MinKernelUsByKind = map[string]float64{}
		}
		dev.MinKernelUsByKind[k] = byKind[k]
		if err := s.offerDevice(fmt.Sprintf("min_kernel_us.%s", k), fmt.Sprintf("%.3g us, prior %.3g", byKind[k], priorFloor(prior, k)), byKind[k], dev); err != nil {
			return nil, err
		}
	}
	if device > 0 {
		dev := s.dev
		dev.MinKernelUs = device
		if err := s.offerDevice("min_kernel_us", fmt.Sprintf("%.3g us, prior %.3g", device, prior.MinKernelUs), device, dev); err != nil {
			return nil, err
		}
	}
	fams, err := fitFamilies(smp, s.dev, fo, &c.Notes)
	if err != nil {
		return nil, err
	}
	for _, f := range fams {
		if !f.ComputeDetermined && !f.MemoryDetermined && !f.RampDetermined {
			continue
		}
		cand := append(slices.Clone(s.fams), f)
		t, err := s.withDevice(cand, s.dev)
		if err != nil {
			return nil, err
		}
		kept, err := s.offer("efficiency "+f.Family, familyValue(f), 0, t)
		if err != nil {
			return nil, err
		}
		if kept {
			s.fams = cand
		}
	}
	sizeNotes(s.fams, &c.Notes)
	if len(smp.eager) > 0 {
		if l := fitLaunchEager(smp.eager, smp.fit, &c.Notes); l > 0 {
			dev := s.dev
			dev.LaunchEagerUs = l
			if err := s.offerDevice("launch_eager_us", fmt.Sprintf("%.3g us, prior %.3g", l, prior.LaunchEagerUs), l, dev); err != nil {
				return nil, err
			}
		}
	} else {
		c.Notes = append(c.Notes, "CUDA-graph run: host launch cost per kernel not fitted")
	}
	c.Families, c.Device = s.fams, s.dev
	for _, k := range smp.collKeys {
		fit, err := calibrate.Collective(s.topo, smp.coll[k], calibrate.CollectiveOptions{Op: k.op, Ranks: k.ranks, NCCL: k.nccl, Source: s.prov, Created: created})
		if err != nil {
			c.Notes = append(c.Notes, fmt.Sprintf("%s over %d ranks: %v", k.op, k.ranks, err))
			continue
		}
		kept, err := s.offer(fmt.Sprintf("%s %d ranks", k.op, k.ranks), fmt.Sprintf("%d samples", len(smp.coll[k])), 0, fit.Topology)
		if err != nil {
			return nil, err
		}
		if kept {
			c.Coll = append(c.Coll, fit.Params...)
		}
	}
	return s.topo.Clone(), nil
}

// offerDevice offers the device parameters dev (the kept ones plus one).
func (s *selector) offerDevice(param, value string, fitted float64, dev calibrate.DeviceFit) error {
	t, err := s.withDevice(s.fams, dev)
	if err != nil {
		return err
	}
	kept, err := s.offer(param, value, fitted, t)
	if kept {
		s.dev = dev
	}
	return err
}

// finish measures the held-out error of the box written (out: the kept
// parameters and the provenance) against the prior's, per scenario and
// over all, and says whether it got worse.
func (s *selector) finish(out *topology.Topology) error {
	after, err := s.eval(out)
	if err != nil {
		return err
	}
	c := s.c
	for i, sc := range s.evals {
		c.PerScenario = append(c.PerScenario, ScenarioHoldOuts{Scenario: sc.g.sc, Before: holdOut(s.before.reports[i]), After: holdOut(after.reports[i])})
	}
	c.Before, c.After = s.before.hold, after.hold
	c.Worse = c.After.OpRMSErrPct > c.Before.OpRMSErrPct+HeldOutTolerancePts || math.Abs(c.After.StepErrPct) > math.Abs(c.Before.StepErrPct)+HeldOutTolerancePts
	for _, ch := range c.Choices {
		if !ch.Kept {
			c.Notes = append(c.Notes, ch.String())
		}
	}
	return nil
}

// priorFloor is the prior floor of kind k on d (its own, else the
// device's).
func priorFloor(d *topology.Device, k string) float64 {
	if v, ok := d.MinKernelUsByKind[k]; ok {
		return v
	}
	return d.MinKernelUs
}

// familyValue says a family's fitted efficiencies against the priors.
func familyValue(f calibrate.FamilyFit) string {
	var parts []string
	if f.ComputeDetermined {
		parts = append(parts, fmt.Sprintf("compute %.3g, prior %.3g", f.EfficiencyFrac, f.PriorEfficiencyFrac))
	}
	if f.MemoryDetermined {
		parts = append(parts, fmt.Sprintf("memory %.3g, prior %.3g", f.MemEfficiencyFrac, f.PriorMemEfficiencyFrac))
	}
	if f.RampDetermined {
		parts = append(parts, fmt.Sprintf("ramp %.3g us, prior %.3g", f.RampUs, f.PriorRampUs))
	}
	return strings.Join(parts, "; ")
}

// programUnplacedFrac: a profiler trace with more than this share of its
// steps' kernel time on no op runs kernels the schedule does not name
// (assumption: the engines' glue — casts, copies, the sampler — is a few
// per cent of a step, 2.8 % on the vLLM-structured fixture).
const programUnplacedFrac = 0.10

// programKernelsPerOp: a step of more kernels than this per predicted op
// is said to differ from the schedule (assumption: the engines run an op
// as one to two kernels — a GEMM and its split-K reduction, attention and
// its combine; a naive PyTorch step runs three).
const programKernelsPerOp = 2

// medianKernels is the median kernel count of the steps (0 for none).
func medianKernels(steps []traces.KinetoStep) int {
	if len(steps) == 0 {
		return 0
	}
	n := make([]int, len(steps))
	for i, s := range steps {
		n[i] = s.Kernels
	}
	slices.Sort(n)
	return n[len(n)/2]
}

// programLine says in one line how the program the traces measured
// differs from the schedule they are predicted with: predicted ops never
// measured on any step (a collective the run left out, a kernel the
// engine fused away), kernel time of profiler traces placed on no op; ""
// when neither. als are the alignments of the scenarios, results the
// sources they were read from. Calibrate says it before a fit, compare
// and report beside the comparison.
func programLine(als []*Alignment, results []*traces.Result) string {
	var parts []string
	never, units := 0, 0
	byRole := map[string]int{}
	for _, al := range als {
		nm := al.NeverMeasured(nil)
		for i := range al.Units {
			u := &al.Units[i]
			if u.Skipped || u.Fused || u.Rank > 0 {
				continue
			}
			units++
			if nm[i] {
				never++
				role := u.Key
				if j := strings.IndexByte(role, '.'); j > 0 && strings.HasPrefix(role, "L") {
					role = role[j+1:]
				}
				byRole[role]++
			}
		}
	}
	if never > 0 {
		roles := slices.Collect(maps.Keys(byRole))
		sort.Slice(roles, func(i, j int) bool {
			if byRole[roles[i]] != byRole[roles[j]] {
				return byRole[roles[i]] > byRole[roles[j]]
			}
			return roles[i] < roles[j]
		})
		var ex []string
		for i, r := range roles {
			if i == 3 {
				ex = append(ex, "...")
				break
			}
			ex = append(ex, fmt.Sprintf("%s x%d", r, byRole[r]))
		}
		parts = append(parts, fmt.Sprintf("%d of %d predicted ops never measured (%s)", never, units, strings.Join(ex, ", ")))
	}
	ops := units / max(len(als), 1)
	for _, r := range results {
		for _, k := range r.Kineto {
			if k.KernelNs > 0 && 1-k.PlacedFrac() > programUnplacedFrac {
				parts = append(parts, fmt.Sprintf("%.1f %% of %s's kernel time placed on no op", 100*(1-k.PlacedFrac()), k.Source))
			}
			// A step of many more kernels than ops (a model run op by op
			// in PyTorch) pays a launch per kernel when eager.
			if n := medianKernels(k.Steps); ops > 0 && float64(n) > programKernelsPerOp*float64(ops) {
				parts = append(parts, fmt.Sprintf("%d kernels per step for %d predicted ops", n, ops))
			}
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "the traces' program differs from the schedule: " + strings.Join(parts, "; ")
}
