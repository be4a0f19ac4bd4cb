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

// Calibration of a topology from measured spans: samples.go collects the
// fitted steps' samples (measured op times with the prior cost the
// prediction gave each op), fit_compute.go fits the kernel floors, the
// compute efficiencies per kernel family (calibrate.Compute) and the eager
// launch cost, and select.go fits the collectives' latency and bandwidth
// (calibrate.Collective) and keeps, part by part, only what the held-out
// steps support, then measures the held-out error before and after
// (holdout.go). The held-out steps are the odd steps of the traces
// fitted (on the even ones), or, with CalibrateOptions.HoldOut, every step
// of other traces (the fit then uses every step of its own).

// CalibrateOptions configure Calibrate. The zero value calibrates the
// scenarios recorded in the traces, starting from their topology.
type CalibrateOptions struct {
	Scenarios
	// Source names the traces in the provenance; Created is the date
	// (RFC 3339; "" = now, UTC).
	Source, Created string
	Fit             calibrate.ComputeOptions
	// HoldOut, when not empty, are traces only evaluated, never fitted
	// (another load of the same box: fit on batch 1, judge on batch 32),
	// each predicted with the scenario HoldOutScenarios gives it (its
	// recorded one, or HoldOutScenarios.Default); every step of the
	// fitted traces is then fitted.
	HoldOut          []*traces.Result
	HoldOutScenarios Scenarios
}

// Calibration is the result of Calibrate.
type Calibration struct {
	// Scenario is the first scenario; Scenarios all of them (one per
	// workload or option set the traces hold, all on one box).
	Scenario  sim.Scenario   `json:"scenario"`
	Scenarios []sim.Scenario `json:"scenarios,omitempty"`
	// From says, per scenario, where its fields came from
	// (ScenarioReport.From).
	From []string `json:"from,omitempty"`
	// Program is one line saying how the traces' program differs from
	// the schedule they are predicted with — predicted ops never
	// measured, kernel time placed on no op — said before any fit; ""
	// when it does not.
	Program string `json:"program,omitempty"`
	// Families and Device are the fitted parameters kept (the held-out
	// steps support them: Choices); Coll the collectives' kept.
	Families []calibrate.FamilyFit       `json:"families"`
	Device   calibrate.DeviceFit         `json:"device"`
	Coll     []topology.CollectiveParams `json:"collectives,omitempty"`
	// Choices lists every parameter fitted, kept or left at its prior,
	// with the held-out figures that decided it.
	Choices []ParamChoice `json:"choices"`
	// ComputeSamples and CollSamples count the fit samples.
	ComputeSamples int `json:"compute_samples"`
	CollSamples    int `json:"collective_samples"`
	FitSteps       int `json:"fit_steps"`
	// HeldOutTraces: the held-out steps are other traces' (HoldOut), not
	// the fitted traces' odd steps; HeldOut are then the scenarios they
	// were predicted with (their load may not be the fitted traces') and
	// HeldOutFrom where each one's fields came from.
	HeldOutTraces bool           `json:"held_out_traces,omitempty"`
	HeldOut       []sim.Scenario `json:"held_out_scenarios,omitempty"`
	HeldOutFrom   []string       `json:"held_out_from,omitempty"`
	// Before and After: held-out error over all scenarios (the op errors
	// of every scenario's units together; StepErrPct the mean of the
	// scenarios' signed step errors). PerScenario has each one's.
	Before      HoldOut            `json:"before"`
	After       HoldOut            `json:"after"`
	PerScenario []ScenarioHoldOuts `json:"per_scenario,omitempty"`
	// Worse: the held-out op RMS error or |step error| is larger after
	// than before. The calibrated box then predicts worse than the prior
	// one: a caller must not write it unless told to (calibrate --force).
	Worse bool `json:"worse"`
	// Notes say what could not be fitted and why.
	Notes    []string           `json:"notes,omitempty"`
	Topology *topology.Topology `json:"-"`
}

// WorseError says how the held-out figures got worse, both before and
// after ("" when they did not).
func (c *Calibration) WorseError() string {
	if !c.Worse {
		return ""
	}
	return fmt.Sprintf("the calibrated box predicts the held-out steps worse than the prior: op RMS error %.1f %% -> %.1f %%, step error %+.1f %% -> %+.1f %%",
		c.Before.OpRMSErrPct, c.After.OpRMSErrPct, c.Before.StepErrPct, c.After.StepErrPct)
}

// issueNote says in one note what an issue left out: its reason, count
// and first example.
func issueNote(i Issue) string {
	n := fmt.Sprintf("%s (%d", i.Reason, i.Count)
	if len(i.Examples) > 0 {
		n += ", e.g. " + i.Examples[0]
	}
	return n + ")"
}

func even(step int) bool    { return step >= 0 && step%2 == 0 }
func odd(step int) bool     { return step >= 0 && step%2 == 1 }
func anyStep(step int) bool { return step >= 0 }

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
// it. Without HoldOut every scenario needs at least two steps (one to
// fit, one to hold out). A fitted parameter is kept only when the
// held-out ops it prices are predicted better with it (select.go);
// Calibration.Worse says when the held-out error still got worse.
func Calibrate(results []*traces.Result, o CalibrateOptions) (*Calibration, error) {
	var is issues
	groups := groupTraces(results, &o.Scenarios, &is)
	if len(groups) == 0 {
		// No package prefix: the verb that calls (tpscope calibrate) names
		// itself.
		return nil, nothingError("no span belongs to a scenario", is.list)
	}
	holdout := len(o.HoldOut) > 0
	fit, evalSteps := even, odd
	if holdout {
		fit, evalSteps = anyStep, anyStep
	}
	base, scens, err := predictAll(groups, o.Topology, fit, !holdout)
	if err != nil {
		return nil, err
	}
	evals := scens
	var his issues // what the held-out traces' scenarios left out
	if holdout {
		hs := o.HoldOutScenarios
		if hs.Topology == nil {
			hs.Topology = base
		}
		hgroups := groupTraces(o.HoldOut, &hs, &his)
		if len(hgroups) == 0 {
			msg := "no span of the held-out traces belongs to a scenario"
			if len(his.list) > 0 {
				msg += ": " + his.list[0].Reason
			}
			return nil, errors.New(msg)
		}
		if _, evals, err = predictAll(hgroups, base, anyStep, false); err != nil {
			return nil, err
		}
	}
	c := &Calibration{HeldOutTraces: holdout}
	for _, sc := range scens {
		c.Scenarios = append(c.Scenarios, sc.g.sc)
		c.From = append(c.From, sc.g.from)
		c.FitSteps += sc.steps(fit)
	}
	var heldNames []string
	if holdout {
		for _, sc := range evals {
			c.HeldOut = append(c.HeldOut, sc.g.sc)
			c.HeldOutFrom = append(c.HeldOutFrom, sc.g.from)
			heldNames = append(heldNames, sc.g.sc.String())
		}
	}
	c.Scenario = c.Scenarios[0]
	als := make([]*Alignment, len(scens))
	for i, sc := range scens {
		als[i] = sc.al
	}
	c.Program = programLine(als, results)
	// What the scenarios left out of the fit (steps of another phase, a
	// trace whose scenario cannot be predicted) is said, not dropped.
	for _, i := range append(is.list, his.list...) {
		c.Notes = append(c.Notes, issueNote(i))
	}

	smp := collectSamples(scens, fit)
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
	what := fmt.Sprintf("fit on %d even steps", c.FitSteps)
	if holdout {
		what = fmt.Sprintf("fit on %d steps, held out: other traces, predicted as %s", c.FitSteps, strings.Join(heldNames, "; "))
	}
	prov := fmt.Sprintf("trace %s (%s), %s; %s", source, strings.Join(names, "; "), created, what)

	sel, err := newSelector(base, evals, evalSteps, prov, c)
	if err != nil {
		return nil, err
	}
	out, err := sel.run(smp, o.Fit, created)
	if err != nil {
		return nil, err
	}
	out.Sources = append(out.Sources, "calibrated: "+prov)
	c.Topology = out
	if err := sel.finish(out); err != nil {
		return nil, err
	}
	return c, nil
}

// predictAll predicts every group on one starting box: topo when given,
// else the first group's; groups on other boxes are an error. Each must
// have measured ops on a step fit keeps, and, when needOdd, on an odd one.
func predictAll(groups []*group, topo *topology.Topology, fit func(int) bool, needOdd bool) (*topology.Topology, []*calScenario, error) {
	base := topo
	scens := make([]*calScenario, 0, len(groups))
	for _, g := range groups {
		if base == nil {
			base = g.sc.Topo
		} else if topo == nil && g.sc.Topo.Name != base.Name {
			return nil, nil, fmt.Errorf("the traces' scenarios run on different boxes (%s, %s); calibrate one box at a time (or name it with --topo)", base.Name, g.sc.Topo.Name)
		}
		sc := g.sc
		sc.Topo = base
		p, err := sim.New(base, sc.Options)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", sc, err)
		}
		pr, sched, err := p.PredictScenarioSchedule(sc)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: predict: %w", sc, err)
		}
		cs := &calScenario{g: g, pr: pr, sched: sched, p: p, al: Align(g.traces, pr, "")}
		switch {
		case needOdd && (cs.steps(fit) == 0 || cs.steps(odd) == 0):
			return nil, nil, fmt.Errorf("%s: need measured ops on at least one even and one odd step (fit on even, evaluate on odd); got %d aligned samples", sc, len(cs.al.Samples))
		case cs.steps(fit) == 0:
			return nil, nil, fmt.Errorf("%s: no measured op aligned with the prediction (%d samples)", sc, len(cs.al.Samples))
		}
		scens = append(scens, cs)
	}
	return base, scens, nil
}

// steps counts the steps keep keeps that have measured ops, each trace's
// apart (two runs both have a step 0).
func (c *calScenario) steps(keep func(int) bool) int {
	type ts struct{ trace, step int32 }
	steps := map[ts]bool{}
	for _, s := range c.al.Samples {
		if keep(int(s.Step)) {
			steps[ts{s.Trace, s.Step}] = true
		}
	}
	return len(steps)
}
