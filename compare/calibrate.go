package compare

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tpscope/tpscope/calibrate"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/traces"
)

// Calibration of a topology from measured spans, in four parts: samples.go
// collects the even steps' samples (measured op times with the prior cost
// the prediction gave each op), fit_compute.go fits the kernel floors, the
// compute efficiencies per kernel family (calibrate.Compute) and the eager
// launch cost, fit_collective.go the collectives' latency and bandwidth
// (calibrate.Collective), and holdout.go reports the prediction error on the
// held-out odd steps before and after.

// CalibrateOptions configure Calibrate. The zero value calibrates the
// scenarios recorded in the traces, starting from their topology.
type CalibrateOptions struct {
	Scenarios
	// Source names the traces in the provenance; Created is the date
	// (RFC 3339; "" = now, UTC).
	Source, Created string
	Fit             calibrate.ComputeOptions
}

// Calibration is the result of Calibrate.
type Calibration struct {
	// Scenario is the first scenario; Scenarios all of them (one per
	// workload or option set the traces hold, all on one box).
	Scenario  sim.Scenario   `json:"scenario"`
	Scenarios []sim.Scenario `json:"scenarios,omitempty"`
	// From says, per scenario, where its fields came from
	// (ScenarioReport.From).
	From     []string                    `json:"from,omitempty"`
	Families []calibrate.FamilyFit       `json:"families"`
	Device   calibrate.DeviceFit         `json:"device"`
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

func even(step int) bool { return step >= 0 && step%2 == 0 }
func odd(step int) bool  { return step >= 0 && step%2 == 1 }

// calScenario is one scenario of a calibration with its prior prediction.
type calScenario struct {
	g     *group
	pr    *sim.Prediction
	sched *model.Schedule
	p     *sim.Predictor
	al    *Alignment
}

// Calibrate fits the box's cost parameters to the spans of results. The
// spans may hold several scenarios (workloads, options) of one box: each
// is predicted on the same starting topology and their samples are fitted
// together, so a family whose ops differ in size across workloads shows
// it. Every scenario needs at least two steps (one to fit, one to hold
// out).
func Calibrate(results []*traces.Result, o CalibrateOptions) (*Calibration, error) {
	var is issues
	groups := groupTraces(results, &o.Scenarios, &is)
	if len(groups) == 0 {
		msg := "calibrate: no span belongs to a scenario"
		if len(is.list) > 0 {
			msg += ": " + is.list[0].Reason
		}
		return nil, errors.New(msg)
	}
	base, scens, err := predictAll(groups, o.Topology)
	if err != nil {
		return nil, err
	}
	c := &Calibration{}
	for _, sc := range scens {
		c.Scenarios = append(c.Scenarios, sc.g.sc)
		c.From = append(c.From, sc.g.from)
		c.FitSteps += sc.fitSteps()
	}
	c.Scenario = c.Scenarios[0]

	smp := collectSamples(scens)
	c.ComputeSamples, c.CollSamples = len(smp.compute), smp.collCount
	c.Notes = append(c.Notes, smp.notes...)

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
	var names []string
	for _, sc := range c.Scenarios {
		names = append(names, sc.String())
	}
	prov := fmt.Sprintf("trace %s (%s), %s; fit on %d even steps", source, strings.Join(names, "; "), created, c.FitSteps)

	out, err := fitCompute(base, smp, o.Fit, prov, c)
	if err != nil {
		return nil, err
	}
	out = fitCollectives(out, smp, prov, created, c)
	out.Sources = append(out.Sources, "calibrated: "+prov)
	c.Topology = out
	if err := holdOuts(scens, out, c); err != nil {
		return nil, err
	}
	return c, nil
}

// predictAll predicts every group on one starting box: topo when given,
// else the first group's; groups on other boxes are an error.
func predictAll(groups []*group, topo *topology.Topology) (*topology.Topology, []*calScenario, error) {
	base := topo
	scens := make([]*calScenario, 0, len(groups))
	for _, g := range groups {
		if base == nil {
			base = g.sc.Topo
		} else if topo == nil && g.sc.Topo.Name != base.Name {
			return nil, nil, fmt.Errorf("calibrate: the traces' scenarios run on different boxes (%s, %s); calibrate one box at a time (or name it with --topo)", base.Name, g.sc.Topo.Name)
		}
		sc := g.sc
		sc.Topo = base
		p, err := sim.New(base, sc.Options)
		if err != nil {
			return nil, nil, fmt.Errorf("calibrate: %s: %w", sc, err)
		}
		pr, sched, err := p.PredictScenarioSchedule(sc)
		if err != nil {
			return nil, nil, fmt.Errorf("calibrate: %s: predict: %w", sc, err)
		}
		cs := &calScenario{g: g, pr: pr, sched: sched, p: p, al: Align(g.traces, pr, "")}
		if cs.fitSteps() == 0 || !cs.hasOdd() {
			return nil, nil, fmt.Errorf("calibrate: %s: need measured ops on at least one even and one odd step (fit on even, evaluate on odd); got %d aligned samples", sc, len(cs.al.Samples))
		}
		scens = append(scens, cs)
	}
	return base, scens, nil
}

func (c *calScenario) fitSteps() int {
	steps := map[int32]bool{}
	for _, s := range c.al.Samples {
		if even(int(s.Step)) {
			steps[s.Step] = true
		}
	}
	return len(steps)
}

func (c *calScenario) hasOdd() bool {
	for _, s := range c.al.Samples {
		if odd(int(s.Step)) {
			return true
		}
	}
	return false
}
