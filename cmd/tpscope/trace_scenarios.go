package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/traces"
)

// The scenario of a trace is resolved here, once, for compare, calibrate
// and report: a scenario the trace records is the truth; a scenario flag
// the user passed overrides its field and is named beside it; a default
// never overrides a recorded field. A trace that records no scenario
// (a PyTorch-profiler trace) is predicted from the flags, and needs the
// ones that matter.

// checkPassed checks the values of the scenario flags the user set, before
// any trace is read: a bad value is a usage error naming its flag. The
// defaults are not resolved against each other here (a recorded scenario
// may never meet them).
func (f *scenarioFlags) checkPassed() error {
	if err := f.checkCounts(); err != nil {
		return err
	}
	w, err := f.workload()
	if err != nil {
		return err
	}
	if err := w.Validate(); err != nil {
		return planFlagError("", err)
	}
	if _, err := f.build(); err != nil {
		return err
	}
	if _, err := f.options(); err != nil {
		return err
	}
	if f.changed("model") {
		a, err := f.modelArch()
		if err != nil {
			return err
		}
		p := model.Plan{TP: f.tp, EP: f.ep, DP: f.dp, DCP: f.dcp}
		if err := p.Validate(a); err != nil && f.anyChanged("tp", "ep", "dp", "dcp") {
			return planFlagError(a.Name, err)
		}
	}
	if f.anyChanged("topo", "gpus") {
		if _, _, err := f.box(); err != nil {
			return err
		}
	}
	return f.checkPerfDB()
}

// passed lists the scenario flags the user set as written ("--batch 32").
func (f *scenarioFlags) passed() []string {
	var out []string
	f.visitChanged(func(fl *pflag.Flag) {
		if f.isScenarioFlag(fl.Name) {
			out = append(out, "--"+fl.Name+" "+fl.Value.String())
		}
	})
	return out
}

// traceScenarioNeeds are the flags a trace without a recorded scenario
// needs, by verb: the model and the load for every verb (no default
// stands for what a profiled server ran), and the box for calibrate, which
// writes it.
func traceScenarioNeeds(calibrate bool) []string {
	need := []string{"model", "batch", "context"}
	if calibrate {
		need = append(need, "topo")
	}
	return need
}

// traceScenarios says how compare, calibrate and report predict each trace
// of results: its recorded scenario, with the flags the user set over it
// (--topo/--gpus replace the recorded box); or, for sources that record
// none, the scenario the flags name, which needs the flags of
// traceScenarioNeeds; its world size, when the trace records one, is the
// plan's GPUs unless --tp/--dp are set, and its GPU must be the box's.
func (f *scenarioFlags) traceScenarios(results []*traces.Result, calibrate bool) (compare.Scenarios, error) {
	scs := compare.Scenarios{Override: f.override(), Passed: f.passed()}
	if f.anyChanged("topo", "gpus") {
		t, _, err := f.box()
		if err != nil {
			return scs, err
		}
		scs.Topology = t
	}
	var bare []*traces.Result
	for _, r := range results {
		if len(r.Scenarios) == 0 {
			bare = append(bare, r)
		}
	}
	if len(bare) == 0 {
		return scs, nil
	}
	var missing []string
	for _, n := range traceScenarioNeeds(calibrate) {
		if !f.changed(n) {
			missing = append(missing, "--"+n)
		}
	}
	if len(missing) > 0 {
		return scs, usageErrorf("%s records no scenario (%s): pass %s", bare[0].Source, traceShows(bare[0]), joinAnd(missing))
	}
	var from []string
	if world := traceWorld(bare); world > 0 && !f.anyChanged("tp", "dp") {
		f.tp, f.dp = world, 1
		from = append(from, fmt.Sprintf("tp %d from the trace's world size", world))
	}
	def, err := f.scenario()
	if err != nil {
		return scs, err
	}
	if err := checkTraceGPU(bare, def.Topo, f.changed("topo")); err != nil {
		return scs, err
	}
	var defaults []string
	for _, n := range []string{"tp", "phase", "kv-dtype", "topo"} {
		if !f.changed(n) && !(n == "tp" && len(from) > 0) {
			defaults = append(defaults, n)
		}
	}
	desc := strings.Join(scs.Passed, " ")
	if len(from) > 0 {
		desc += "; " + strings.Join(from, "; ")
	}
	if len(defaults) > 0 {
		desc += "; defaults for --" + strings.Join(defaults, ", --") + " and the options not set"
	}
	scs.Default, scs.DefaultFrom = &def, desc
	return scs, nil
}

// traceShows says in a few words what a trace without a scenario does
// record: its format, GPU, rank and world, steps and kernels, and the
// batch its engine's ranges name.
func traceShows(r *traces.Result) string {
	parts := []string{r.Format + " trace"}
	kernels, steps := 0, 0
	batch := map[int]bool{}
	var gpus []string
	world := 0
	for _, k := range r.Kineto {
		gpus = append(gpus, k.Devices...)
		world = max(world, k.World)
		steps += len(k.Steps)
		for _, s := range k.Steps {
			kernels += s.Kernels
			if s.DecodeReqs > 0 {
				batch[s.DecodeReqs] = true
			}
		}
	}
	if len(gpus) > 0 {
		parts = append(parts, "GPU "+strings.Join(gpus, ", "))
	}
	if world > 0 {
		parts = append(parts, fmt.Sprintf("world size %d", world))
	}
	if len(r.Kineto) > 0 {
		parts = append(parts, fmt.Sprintf("%d steps, %d kernels", steps, kernels))
	} else {
		parts = append(parts, fmt.Sprintf("%d spans without a step root", len(r.Spans)))
	}
	if len(batch) == 1 {
		for b := range batch {
			parts = append(parts, fmt.Sprintf("the engine's ranges name decode batch %d", b))
		}
	}
	return strings.Join(parts, ", ")
}

// traceWorld is the world size the traces record (0 when none does or
// they disagree).
func traceWorld(rs []*traces.Result) int {
	w := 0
	for _, r := range rs {
		for _, k := range r.Kineto {
			switch {
			case k.World == 0:
			case w == 0:
				w = k.World
			case w != k.World:
				return 0
			}
		}
	}
	return w
}

// checkTraceGPU refuses to predict a trace on a box of another GPU than
// the one its profiler recorded: the measured and predicted steps would be
// of two machines. A GPU name the catalog does not know is not checked.
func checkTraceGPU(rs []*traces.Result, t *topology.Topology, topoSet bool) error {
	box := t.DeviceOf(0).Name
	for _, r := range rs {
		for _, k := range r.Kineto {
			for _, name := range k.Devices {
				if same, known := t.RunsOn(name); same || !known {
					continue
				}
				if topoSet {
					return flagError("--topo", t.Name, "its GPUs are %s, and %s ran on %s: pass a box of that GPU", box, r.Source, name)
				}
				return usageErrorf("%s ran on %s; the default box %s has %s: pass --topo with the box the trace ran on", r.Source, name, t.Name, box)
			}
		}
	}
	return nil
}

// joinAnd joins words as "a, b and c".
func joinAnd(w []string) string {
	if len(w) < 2 {
		return strings.Join(w, "")
	}
	return strings.Join(w[:len(w)-1], ", ") + " and " + w[len(w)-1]
}
