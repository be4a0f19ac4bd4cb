package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/traces"
)

// The scenario of a trace is resolved here, once, for compare, calibrate
// and report: a scenario the trace records is the truth; a flag of what it
// measured (model, plan, workload) must agree with it (checkRecorded); any
// other scenario flag the user passed overrides its field and is named
// beside it; a default never overrides a recorded field. A trace that records no scenario
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
	switch {
	case f.changed("topo"):
		if _, _, err := f.box(); err != nil {
			return err
		}
	case f.gpus < 0:
		// --gpus alone takes the first GPUs of each recorded box, which
		// only the trace knows (subsetRecorded checks the count there).
		return flagError("--gpus", f.gpus, "want 0 (all) or more")
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
// (--topo replaces the recorded box, at --gpus; --gpus alone takes the
// first GPUs of the recorded box, never of the default one); or, for sources that record
// none, the scenario the flags name, which needs the flags of
// traceScenarioNeeds; its world size, when the trace records one, is the
// plan's GPUs unless --tp/--dp are set, and its GPU must be the box's.
func (f *scenarioFlags) traceScenarios(results []*traces.Result, calibrate bool) (compare.Scenarios, error) {
	scs := compare.Scenarios{Override: f.override(), Passed: f.passed()}
	if f.changed("topo") {
		t, _, err := f.box()
		if err != nil {
			return scs, err
		}
		scs.Topology = t
	}
	if err := f.checkRecorded(results, &scs, calibrate); err != nil {
		return scs, err
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

// checkRecorded refuses, before any work, flags that contradict what a
// recorded trace measured: a box of another GPU than the one it ran on
// (--topo), or a fact of its scenario (checkFacts) set to another value
// than it recorded. A recorded scenario that cannot be read is left to the
// comparison, which reports it.
func (f *scenarioFlags) checkRecorded(results []*traces.Result, scs *compare.Scenarios, calibrate bool) error {
	for _, r := range results {
		for i := range r.Scenarios {
			rec := &r.Scenarios[i]
			if scs.Topology != nil && rec.GPU != "" {
				if err := checkRanOn(r.Source, "the trace", []string{rec.GPU}, scs.Topology, f.changed("topo")); err != nil {
					return err
				}
			}
			was, err := scs.Recorded(rec)
			if err != nil {
				continue
			}
			if err := f.checkFacts(r.Source, was, calibrate); err != nil {
				return err
			}
		}
	}
	return nil
}

// traceFact is one fact a trace records, held against the flags that
// would set it (refuseContradicted).
type traceFact struct {
	flags         []string // the flags that set it; the first one set is named
	what          string   // how the message names it
	trace, passed string   // its value in the trace and under the flags, as text
	agrees        bool     // the flags' value is the trace's (newTraceFact: trace == passed)
	why           string   // why the trace's value wins
	fix           string   // what to pass instead; "" says to drop the flag
}

// newTraceFact is a fact whose flags agree with the trace when they give
// its value.
func newTraceFact(flags []string, what, trace, passed, why string) traceFact {
	return traceFact{flags: flags, what: what, trace: trace, passed: passed, agrees: trace == passed, why: why}
}

// refuseContradicted refuses the first fact of src that a flag the user
// set contradicts, in one line naming the flag, src and the value src
// recorded: a flag left at its default says nothing and is not held
// against the trace.
func (f *scenarioFlags) refuseContradicted(src string, facts []traceFact) error {
	for _, ft := range facts {
		if ft.agrees {
			continue
		}
		for _, name := range ft.flags {
			if !f.changed(name) {
				continue
			}
			fix := ft.fix
			if fix == "" {
				fix = "drop --" + name
			}
			return flagError("--"+name, f.fs.Lookup(name).Value.String(), "%s measured %s %s: %s (%s)", src, ft.what, ft.trace, ft.why, fix)
		}
	}
	return nil
}

// onOff says a switch's state in a message.
func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// recordedWhy is why a recorded scenario's model, plan and workload win.
const recordedWhy = "a trace's model, plan and workload are what it measured; --topo and the options re-price it"

// checkFacts refuses a flag the user set that names another model, plan
// or workload than the trace src measured (was): those flags say what a
// trace measured, and predicting another would compare (or fit) two runs
// as one. The box, the run-time options and the cost tables re-price the
// trace and stay overrides, except, for calibrate, the CUDA graphs the
// trace ran with: the box is fitted to how it ran (its kernel floors and
// launch ramps differ with and without graphs), which no flag changes.
func (f *scenarioFlags) checkFacts(src string, was sim.Scenario, calibrate bool) error {
	p, w := was.Plan.Normalized(), was.Workload.Normalized()
	fact := func(flags []string, what, trace, passed string) traceFact {
		return newTraceFact(flags, what, trace, passed, recordedWhy)
	}
	facts := []traceFact{
		fact([]string{"tp"}, "TP", fmt.Sprint(p.TP), fmt.Sprint(f.tp)),
		fact([]string{"dp"}, "DP", fmt.Sprint(p.DP), fmt.Sprint(f.dp)),
		fact([]string{"dcp"}, "DCP", fmt.Sprint(p.DCP), fmt.Sprint(f.dcp)),
		fact([]string{"ep"}, "expert parallelism", onOff(p.EP), onOff(f.ep)),
		fact([]string{"phase"}, "phase", string(w.Phase), f.phase),
		fact([]string{"batch"}, "batch", fmt.Sprint(w.Batch), fmt.Sprint(f.batch)),
		fact([]string{"context"}, "context", fmt.Sprint(w.Context), fmt.Sprint(f.context)),
	}
	if f.changed("model") {
		a, err := f.modelArch()
		if err != nil {
			return err
		}
		facts = append(facts, fact([]string{"model"}, "model", was.Arch.Name, a.Name))
	}
	if f.anyChanged("kv-dtype", "mtp", "spec-tokens") {
		fw, err := f.workload()
		if err != nil {
			return err
		}
		facts = append(facts, fact([]string{"kv-dtype"}, "KV dtype", string(w.KVDtypeFor(was.Arch)), string(fw.KVDtypeFor(was.Arch))),
			fact([]string{"mtp", "spec-tokens"}, "speculative tokens per step", fmt.Sprint(w.SpecTokens), fmt.Sprint(fw.SpecTokens)))
	}
	if calibrate {
		facts = append(facts, newTraceFact([]string{"cuda-graphs"}, "CUDA graphs", onOff(was.Options.CUDAGraphs), onOff(f.opts.CUDAGraphs),
			"calibrate fits the box to how the trace ran, whose kernel floors and launch ramps differ with and without CUDA graphs"))
	}
	return f.refuseContradicted(src, facts)
}

// traceShows says in a few words what a trace without a scenario does
// record: its format, GPU, rank and world, steps and kernels, and the
// batch its engine's ranges name.
func traceShows(r *traces.Result) string {
	parts := []string{r.Format + " trace"}
	kernels, steps := 0, 0
	var gpus []string
	world := 0
	for _, k := range r.Kineto {
		gpus = append(gpus, k.Devices...)
		world = max(world, k.World)
		steps += len(k.Steps)
		for _, s := range k.Steps {
			kernels += s.Kernels
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
	if batch := traceDecodeBatches([]*traces.Result{r}); len(batch) == 1 {
		parts = append(parts, fmt.Sprintf("the engine's ranges name decode batch %d", batch[0]))
	}
	return strings.Join(parts, ", ")
}

// traceDecodeBatches are the decode batches the engine's ranges of the
// traces name (vLLM's generation_32: 32), sorted; none for a trace whose
// steps are not an engine's ranges (a bare PyTorch profile).
func traceDecodeBatches(rs []*traces.Result) []int {
	seen := map[int]bool{}
	for _, r := range rs {
		for _, k := range r.Kineto {
			for _, s := range k.Steps {
				if s.DecodeReqs > 0 {
					seen[s.DecodeReqs] = true
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
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
// the one its profiler recorded (checkRanOn).
func checkTraceGPU(rs []*traces.Result, t *topology.Topology, topoSet bool) error {
	for _, r := range rs {
		for _, k := range r.Kineto {
			if err := checkRanOn(r.Source, "the trace", k.Devices, t, topoSet); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkRanOn refuses to predict or fit a measurement (src: a trace, an
// nccl-tests log; what: how the message names it) on a box of another GPU
// than the devices it lists: the measured and predicted times would be of
// two machines. topoSet says whether --topo chose the box. Names are
// matched by the catalog entry each stands for ("NVIDIA H100 80GB HBM3" is
// an H100 SXM); a name the catalog does not know must be the box's own
// device name (a box 'tpscope topo discover' wrote on that GPU), since
// nothing says it is the box's GPU. A measurement that names no device
// ("" or "-" on its rank lines) is not checked.
func checkRanOn(src, what string, devices []string, t *topology.Topology, topoSet bool) error {
	d := t.DeviceOf(0)
	if d == nil {
		return nil
	}
	box := d.Name
	for _, name := range devices {
		name = strings.TrimSpace(name)
		if name == "" || name == "-" {
			continue
		}
		same, known := t.RunsOn(name)
		if same || (!known && strings.EqualFold(name, box)) {
			continue
		}
		ran := name
		if !known {
			ran += " (a GPU the catalog does not know)"
		}
		if topoSet {
			return flagError("--topo", t.Name, "its GPUs are %s, and %s ran on %s: pass a box of that GPU", box, src, ran)
		}
		return usageErrorf("%s ran on %s; the default box %s has %s: pass --topo with the box %s ran on", src, ran, t.Name, box, what)
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
