package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/compare"
	engprof "github.com/tpscope/tpscope/engine"
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
	// The pool fraction sizes a serving engine's KV pool; a traced step
	// held its own KV cache, and no verb over traces prints a pool.
	if f.changed("cuda-graph-mem-gib") {
		return flagError("--cuda-graph-mem-gib", f.opts.CUDAGraphMem, "compare, calibrate --trace and report --trace price the steps a trace measured, which held their own KV cache, not a serving engine's KV pool, so the estimate changes nothing they print: leave it out (predict, plan and simulate size the pool with it)")
	}
	if f.changed("gpu-mem-util") {
		return flagError("--gpu-mem-util", f.opts.GPUMemUtilFrac, "compare, calibrate --trace and report --trace price the steps a trace measured, which held their own KV cache, not a serving engine's KV pool, so the fraction changes nothing they print: leave it out (predict, plan and simulate size the pool with it)")
	}
	if f.changed("max-model-len") {
		return flagError("--max-model-len", f.opts.MaxModelLen, "compare, calibrate --trace and report --trace price the steps a trace measured, which held their own KV cache, not a serving engine's KV pool, so the engine's max_model_len changes nothing they print: leave it out (predict, plan and simulate size the pool with it)")
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"max-num-batched-tokens", f.opts.MaxNumBatchedTokens}, {"max-num-seqs", f.opts.MaxNumSeqs}} {
		if f.changed(c.name) {
			return flagError("--"+c.name, c.v, "compare, calibrate --trace and report --trace price the steps a trace measured, which held their own KV cache, not a serving engine's KV pool or scheduler, so the limit changes nothing they print: leave it out (predict, plan and simulate size vLLM's pool with it)")
		}
	}
	// An acceptance sets the tokens a speculative step yields, not its
	// time: the steps a trace measured, their ops and the gains between
	// runs of one speculative scenario (whose tokens per step cancel) are
	// the same under any acceptance.
	for _, name := range acceptFlagNames {
		if f.changed(name) {
			return flagError("--"+name, f.fs.Lookup(name).Value.String(), "compare, calibrate --trace and report --trace price the steps a trace measured, and the acceptance sets only the tokens a step yields, not its time or its ops, so it changes nothing they print: leave it out (predict, plan, simulate, advise and verdict price the tokens with it)")
		}
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

// recordedFactFlags are the flags checkRecorded holds against what a
// recorded trace measured (checkFacts): past it, each set one names the
// trace's own value, which overrides nothing.
var recordedFactFlags = append([]string{"model", "tp", "dp", "dcp", "ep", "phase", "batch", "context", "kv-dtype", "cuda-graphs"}, specShapeFlags...)

// overriding lists the flags passed (passed) that can change a recorded
// scenario: the box, the run-time options and the cost tables, not
// recordedFactFlags, so that a trace's scenario line names only what
// re-priced it ("overridden by --ar-norm-fusion true", not "--batch 1"
// beside it when the trace measured batch 1).
func (f *scenarioFlags) overriding() []string {
	var out []string
	f.visitChanged(func(fl *pflag.Flag) {
		if f.isScenarioFlag(fl.Name) && !slices.Contains(recordedFactFlags, fl.Name) {
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

// traceUse is what a verb does with the traces whose scenarios
// traceScenarios resolves.
type traceUse struct {
	// calibrate: the verb fits a box to the traces and writes it (it
	// needs --topo), fitted to how they ran (their CUDA graphs are no
	// option to re-price).
	calibrate bool
	// holdoutBatch, when set, is --holdout-batch: the batch of calibrate's
	// held-out traces that record no scenario, in place of --batch.
	holdoutBatch int
	// allowPartial is --allow-partial (compare, report): a step whose
	// recorded scenario was edited since is left out and listed, not an
	// error; calibrate refuses damaged input even with it.
	allowPartial bool
}

// batchFlag is the flag that gives the batch of traces without a
// scenario, and its value.
func (u traceUse) batchFlag(f *scenarioFlags) (string, int) {
	if u.holdoutBatch > 0 {
		return "holdout-batch", u.holdoutBatch
	}
	return "batch", f.batch
}

// traceScenarios says how compare, calibrate and report predict each trace
// of results: its recorded scenario, with the flags the user set over it
// (--topo replaces the recorded box, at --gpus; --gpus alone takes the
// first GPUs of the recorded box, never of the default one); or, for
// sources that record none (profiler traces), the scenario the flags name,
// which needs the flags of traceScenarioNeeds, with what the trace's steps
// do record (profilerFacts) in place of the defaults: its world size gives
// the plan's GPUs unless --tp/--dp are set, its engine ranges the phase
// (steps of another one are left out of the comparison and counted), its
// graph launches the CUDA graphs; a flag set to another value is refused,
// and its GPU must be the box's.
func (f *scenarioFlags) traceScenarios(results []*traces.Result, use traceUse) (compare.Scenarios, error) {
	scs := compare.Scenarios{Override: f.override(), Passed: f.overriding()}
	var err error
	if scs.Fill, err = f.fill(); err != nil {
		return scs, err
	}
	if f.changed("topo") {
		t, _, err := f.box()
		if err != nil {
			return scs, err
		}
		scs.Topology = t
	}
	if err := f.checkRecorded(results, &scs, use); err != nil {
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
	for _, n := range traceScenarioNeeds(use.calibrate) {
		if !f.changed(n) && !(n == "batch" && use.holdoutBatch > 0) {
			missing = append(missing, "--"+n)
		}
	}
	if len(missing) > 0 {
		return scs, usageErrorf("%s records no scenario (%s): pass %s", bare[0].Source, traceShows(bare[0]), joinAnd(missing))
	}
	// The engine prices the kernels (its attention backend, MoE runner,
	// fusions): a profiler trace whose steps no engine's ranges split
	// (TensorRT-LLM's torch traces record none; a model run op by op in
	// PyTorch has no engine) says nothing of it, and the default engine's
	// profile would price another engine's kernels without a word.
	if src, rule, ok := traceWithoutEngine(bare); ok && !f.changed("engine") && !f.executes {
		return scs, usageErrorf("%s records no engine (its steps were split by %s, not by an engine's step ranges): pass --engine with the engine that ran it (vllm, sglang, trtllm; vllm for a model run op by op in PyTorch)", src, rule)
	}
	// What the steps record stands in for the defaults of the flags'
	// scenario, for this call only (calibrate resolves its held-out
	// traces with the same flags).
	tp, dp, phase, graphs, fusion, eng := f.tp, f.dp, f.phase, f.opts.CUDAGraphs, f.opts.ARNormFusion, f.opts.Engine
	defer func() {
		f.tp, f.dp, f.phase, f.opts.CUDAGraphs, f.opts.ARNormFusion, f.opts.Engine = tp, dp, phase, graphs, fusion, eng
	}()
	var from, fromPhase []string
	recorded := map[string]bool{} // the flags whose default the trace replaced
	if ph, ok := tracePhase(bare); ok && !f.changed("phase") {
		f.phase, recorded["phase"] = ph, true
		fromPhase = append(fromPhase, fmt.Sprintf("phase %s recorded in the trace's engine ranges", ph))
	}
	// The engine whose ranges split the steps ran them: its profile
	// prices the step unless --engine names it (another is refused).
	if name, ok := traceEngine(bare); ok && !f.changed("engine") && !f.executes {
		if ref, err := engprof.ParseRef(name); err == nil && ref.Name != effectiveEngine(f.opts.Engine) {
			f.opts.Engine, recorded["engine"] = ref, true
			fromPhase = append(fromPhase, fmt.Sprintf("engine %s recorded in the trace's step ranges", ref))
		}
	}
	for _, r := range bare {
		if err := f.refuseContradicted(r.Source, f.profilerFacts(r, use)); err != nil {
			return scs, err
		}
	}
	if world := traceWorld(bare); world > 0 && !f.anyChanged("tp", "dp") {
		f.tp, f.dp, recorded["tp"] = world, 1, true
		from = append(from, fmt.Sprintf("tp %d from the trace's world size", world))
		// The box must hold that world: said of the flag the user gave
		// (--gpus, --topo), not of --tp, which the trace gave.
		if t, _, err := f.box(); err == nil && t.NumGPUs() < world && f.anyChanged("gpus", "topo") {
			flag, val := "--topo", any(f.topo)
			if f.changed("gpus") && f.gpus > 0 {
				flag, val = "--gpus", f.gpus
			}
			return scs, flagError(flag, val, "the box %s has %d GPUs, and %s ran on a world of %d: want a box of at least %d", t.Name, t.NumGPUs(), bare[0].Source, world, world)
		}
	}
	from = append(from, fromPhase...)
	if on, ok := traceGraphs(bare, f.phase); ok && !f.changed("cuda-graphs") {
		f.opts.CUDAGraphs, recorded["cuda-graphs"] = on, true
		from = append(from, "cuda-graphs "+onOff(on)+" recorded in the trace ("+graphLaunches(on)+")")
	}
	// Whether the server fused its all-reduces with the norms after them
	// is what its kernels show, not the engine's default at a version
	// (vLLM's since 0.17 on SM 9.0 and 10.x, off with a flag).
	if on, ok := traceARNormFusion(bare, f.phase); ok && !f.changed("ar-norm-fusion") && f.tp > 1 {
		f.opts.ARNormFusion, recorded["ar-norm-fusion"] = sim.ToggleOff, true
		if on {
			f.opts.ARNormFusion = sim.ToggleOn
		}
		from = append(from, "ar-norm-fusion "+onOff(on)+" recorded in the trace ("+arNormKernels(on)+")")
	}
	def, err := f.scenario()
	if err != nil {
		return scs, err
	}
	if flag, b := use.batchFlag(f); flag != "batch" {
		def.Workload.Batch = b
		from = append(from, fmt.Sprintf("batch %d from --%s", b, flag))
	}
	if err := checkTraceGPU(bare, def.Topo, f.topoArg()); err != nil {
		return scs, err
	}
	var defaults []string
	for _, n := range []string{"tp", "phase", "kv-dtype", "topo"} {
		if !f.changed(n) && !recorded[n] {
			defaults = append(defaults, n)
		}
	}
	desc := strings.Join(f.passed(), " ")
	if len(from) > 0 {
		desc += "; " + strings.Join(from, "; ")
	}
	if len(defaults) > 0 {
		desc += "; defaults for --" + strings.Join(defaults, ", --") + " and the options not set"
	}
	scs.Default, scs.DefaultFrom = &def, desc
	return scs, nil
}

// fill is what the flags the user set give a trace recorded before the
// whole scenario was, for the model, plan and workload its step span may
// lack (compare.Fill): the model under --model, the plan under one of
// --tp, --dp, --ep and --dcp, the workload under --batch and --context
// both (the load matters; no default stands for it).
func (f *scenarioFlags) fill() (compare.Fill, error) {
	var fl compare.Fill
	if f.changed("model") {
		a, err := f.modelArch()
		if err != nil {
			return fl, err
		}
		fl.Arch = a
	}
	if f.anyChanged("tp", "dp", "ep", "dcp") {
		fl.Plan = &model.Plan{TP: f.tp, EP: f.ep, DP: f.dp, DCP: f.dcp}
	}
	if f.changed("batch") && f.changed("context") {
		w, err := f.workload()
		if err != nil {
			return fl, err
		}
		fl.Workload = &w
	}
	return fl, nil
}

// checkRecorded refuses, before any work, flags that contradict what a
// recorded trace measured: a box of another GPU than the one it ran on
// (--topo), or a fact of its scenario (checkFacts) set to another value
// than it recorded; an override the recorded scenario cannot take (an
// option its engine lacks); and an older trace whose step span lacks a
// field no flag set gives (compare.MissingError). A recorded scenario that
// cannot be read otherwise is left to the comparison, which reports it.
func (f *scenarioFlags) checkRecorded(results []*traces.Result, scs *compare.Scenarios, use traceUse) error {
	calibrate := use.calibrate
	for _, r := range results {
		for i := range r.Scenarios {
			rec := &r.Scenarios[i]
			if scs.Topology != nil && rec.GPU != "" {
				if err := checkRanOn(r.Source, "the trace", []string{rec.GPU}, scs.Topology, f.topoArg()); err != nil {
					return err
				}
			}
			was, err := scs.Recorded(rec)
			var lacks *compare.MissingError
			switch {
			case errors.As(err, &lacks):
				// An older trace lacks a field the flags must give: said
				// before any work, as for a trace without a scenario.
				return usageErrorf("%s: %v", r.Source, lacks)
			case errors.Is(err, sim.ErrEdited) && calibrate:
				// Damaged input, as a cut file is: never fitted.
				return fmt.Errorf("%s: %v; %s", r.Source, err, calibrateRefusesPartial)
			case errors.Is(err, sim.ErrEdited) && !use.allowPartial:
				// Damaged input, as a cut file is: its other steps are
				// compared only when asked (they are then left out and
				// listed, as a cut file's broken step is).
				return fmt.Errorf("%s: %v (--allow-partial reads its other steps)", r.Source, err)
			case err != nil:
				continue
			}
			if err := f.checkFacts(r.Source, was, calibrate); err != nil {
				return err
			}
			if err := f.checkCPUCollectives(r.Source, was); err != nil {
				return err
			}
			if t := scs.Topology; t != nil && rec.Backend == "cpu" && !t.IsCPUBox() && t.DeviceOf(0) != nil {
				// A CPU run's ranks are CPU cores: a GPU box prices
				// another machine (said here as checkRanOn says another
				// GPU, not as a scenario left out).
				return flagError("--topo", f.topo, "its GPUs are %s, and %s ran on the cpu backend, whose ranks are CPU cores: pass the JSON 'tpscope calibrate --backend cpu' wrote", t.DeviceOf(0).Name, r.Source)
			}
			// The flags over it must make a scenario that can be priced
			// (an engine's kernel, an option it can take): said here, in
			// one line, not as a scenario left out of the comparison.
			if scs.Override != nil {
				asked := was
				if err := scs.Override(&asked); err != nil {
					var ue *usageError
					if errors.As(err, &ue) {
						return err
					}
					return usageErrorf("%s: %v", r.Source, err)
				}
			}
			// --gpus alone cuts the recorded box (subsetRecorded): fewer
			// GPUs than the recorded plan ran on cannot price it.
			if w := was.Plan.World(); f.changed("gpus") && !f.changed("topo") && !f.anyChanged("tp", "dp") && f.gpus > 0 && f.gpus < w {
				return flagError("--gpus", f.gpus, "%s records plan %s, which needs %d GPUs: want at least %d (or leave --gpus out)", r.Source, was.Plan, w, w)
			}
			// So does a --topo box (at --gpus) smaller than it: said here
			// in one line naming the flag, not as a scenario left out.
			if t, w := scs.Topology, was.Plan.World(); t != nil && t.NumGPUs() < w {
				if f.changed("gpus") && f.gpus > 0 {
					return flagError("--gpus", f.gpus, "%s records plan %s, which needs %d GPUs: want at least %d (or leave --gpus out)", r.Source, was.Plan, w, w)
				}
				return flagError("--topo", f.topo, "its box %s has %d GPUs, and %s records plan %s, which needs %d: pass a box of at least %d", t.Name, t.NumGPUs(), r.Source, was.Plan, w, w)
			}
		}
	}
	return nil
}

// checkCPUCollectives refuses an NCCL setting over a trace priced on a CPU
// box (the CPU backend's run, on the box 'tpscope calibrate --backend cpu'
// wrote): its ranks' collectives are the backend's own shared-memory
// rings, which no NCCL setting reaches, as run refuses them there
// (checkRealized). Taken as an override it would be named as a
// re-pricing while it either changed nothing or moved the collectives
// off the box's fitted ring to the prior of an algorithm and protocol
// those ranks never ran.
func (f *scenarioFlags) checkCPUCollectives(src string, was sim.Scenario) error {
	if was.Topo == nil || !was.Topo.IsCPUBox() {
		return nil
	}
	for _, name := range ncclFlagNames {
		if fl := f.fs.Lookup(name); fl != nil && f.changed(name) && fl.Value.String() != "false" {
			return flagError("--"+name, fl.Value.String(), "%s is priced on the CPU box %s, whose ranks' collectives are the cpu backend's own, which NCCL's settings do not reach: it would re-price collectives those ranks never ran (drop --%s)", src, was.Topo.Name, name)
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
// trace and stay overrides, except the CUDA graphs the trace ran with:
// its launches and kernel floors are those of how it ran (calibrate fits
// the box to them), which no flag changes, as for profiler traces.
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
		// The same config at another path is the same model (Ref.SameModel):
		// a checkpoint moved since the run is not another one.
		mf := fact([]string{"model"}, "model", was.Arch.Name, a.Name)
		mf.agrees = was.Arch.Ref.SameModel(a.Ref)
		facts = append(facts, mf)
	}
	if f.changed("kv-dtype") {
		fw, err := f.workload()
		if err != nil {
			return err
		}
		facts = append(facts, fact([]string{"kv-dtype"}, "KV dtype", string(w.KVDtypeFor(was.Arch)), string(fw.KVDtypeFor(was.Arch))))
	}
	// Speculative decoding is what the trace ran (its draft ops, its
	// tokens per step), whichever flag names it: the recorded scenario
	// with the speculative flags applied must be the recorded one.
	if f.anyChanged(specShapeFlags...) {
		asked := was
		for _, name := range specShapeFlags {
			if f.changed(name) {
				if err := f.apply(name, &asked); err != nil {
					return err
				}
			}
		}
		facts = append(facts, fact(specShapeFlags, "speculative decoding", specText(was), specText(asked)))
	}
	// CUDA graphs are how the trace ran, not an option to re-price it
	// with: its launches and kernel floors are those of a graph replay or
	// of eager launches (profiler traces hold the same, profilerFacts).
	graphsWhy := "a trace's CUDA graphs are how it ran: its launches and kernel floors are of that run, which no flag re-prices"
	if calibrate {
		graphsWhy = "calibrate fits the box to how the trace ran, whose kernel floors and launch ramps differ with and without CUDA graphs"
	}
	facts = append(facts, newTraceFact([]string{"cuda-graphs"}, "CUDA graphs", onOff(was.Options.CUDAGraphs), onOff(f.opts.CUDAGraphs), graphsWhy))
	// The engine a trace names ran its kernels (tpscope's executor for
	// its own runs), as a profiler trace's ranges name theirs: another
	// engine's kernels priced against them compare (or fit) two programs
	// as one. A trace that names none says nothing here.
	if ran := was.Options.Engine; !ran.IsZero() {
		ft := newTraceFact([]string{"engine"}, "engine", ran.Name, effectiveEngine(f.opts.Engine),
			"a trace's engine ran its kernels, which another engine's profile does not price")
		ft.fix = "pass --engine " + ran.Name + ", or leave --engine out"
		facts = append(facts, ft)
	}
	if f.changed("graph-sizes") {
		facts = append(facts, f.graphSizesFact(was))
	}
	return f.refuseContradicted(src, facts)
}

// graphSizesFact holds --graph-sizes against the step a recorded run
// replayed: the capture sizes it ran with are how it ran, as its CUDA
// graphs are, so sizes that pad its batch to another capture or leave it
// uncaptured would price another step; over an eager run they price
// nothing at all.
func (f *scenarioFlags) graphSizesFact(was sim.Scenario) traceFact {
	if !was.Options.CUDAGraphs {
		return traceFact{flags: []string{"graph-sizes"}, what: "CUDA graphs", trace: "off",
			why: "capture sizes price nothing in a run without CUDA graphs"}
	}
	replay := func(o sim.Options, ran sim.Scenario) string {
		// The capture on the recorded box (SGLang's stops at the
		// cuda_graph_max_bs of its GPU and TP size).
		on := was
		on.Options = o
		g, err := on.GraphCapture()
		if err != nil {
			return "unknown (" + err.Error() + ")"
		}
		d := model.NewDeployment(was.Plan, was.Workload, g)
		switch {
		case !d.Graphed:
			return "none (eager steps)"
		case ran.RunTokens > 0:
			return fmt.Sprintf("of %d tokens", ran.RunTokens)
		case ran.RunBatch > 0:
			// Recorded when graphs padded whole sequences: the tokens per
			// group those sequences ran.
			dp := ran.Plan.Normalized().DP
			return fmt.Sprintf("of %d tokens", (ran.RunBatch+dp-1)/dp*(1+ran.Workload.SpecTokens))
		}
		return fmt.Sprintf("of %d tokens", d.GraphTokens)
	}
	asked := was.Options
	asked.GraphSizes = f.opts.GraphSizes
	return newTraceFact([]string{"graph-sizes"}, "CUDA graph replay", replay(was.Options, was), replay(asked, sim.Scenario{}),
		"the capture sizes a run replayed its step with are how it ran: others would price a step of another batch, or eager")
}

// specShapeFlags are the flags that say which speculative decoding a step
// runs (method, tokens, tree, drafter), named in this order when several
// contradict a trace.
var specShapeFlags = []string{"spec", "mtp", "spec-tokens", "spec-topk", "spec-steps", "draft-model", "draft-tp"}

// specText is sc's speculative decoding as a message names it: its method,
// drafter and tokens per step ("eagle3(tiny-mla-moe-eagle3) k3"), or none.
func specText(sc sim.Scenario) string {
	if s := sc.Build.Spec.String(sc.Workload); s != "" {
		return s
	}
	return "none"
}

// profilerWhy is why what a profiler trace's steps record wins over a
// flag.
const profilerWhy = "a profiler trace's engine, world size, phase, batch and CUDA graphs are what it ran"

// profilerFacts are the facts the steps of r, a profiler trace without a
// scenario, record, held against the flags (refuseContradicted): its world
// size (--tp x --dp), the phases its engine ranges name (--phase must be
// one of them), the batch they name for the phase compared (per rank,
// that is per DP group: --batch over --dp), and whether its steps of that
// phase launch CUDA graphs (--cuda-graphs).
func (f *scenarioFlags) profilerFacts(r *traces.Result, use traceUse) []traceFact {
	var facts []traceFact
	plan := model.Plan{TP: f.tp, DP: f.dp}
	if w := traceWorld([]*traces.Result{r}); w > 0 {
		ft := newTraceFact([]string{"tp", "dp"}, "world size", fmt.Sprint(w), fmt.Sprint(plan.World()), profilerWhy)
		ft.fix = fmt.Sprintf("give --tp x --dp = %d, or neither: the world size gives --tp %d", w, w)
		facts = append(facts, ft)
	}
	steps := kinetoSteps(r)
	if phases := stepPhases(steps); len(phases) > 0 {
		ft := newTraceFact([]string{"phase"}, "phase", strings.Join(phases, " and ")+" (its engine ranges)", f.phase, profilerWhy)
		ft.agrees = slices.Contains(phases, f.phase)
		facts = append(facts, ft)
	}
	if b, ok := stepBatch(steps, f.phase); ok {
		flag, batch := use.batchFlag(f)
		perRank := model.NewDeployment(plan, model.Workload{Phase: model.Phase(f.phase), Batch: batch}, nil).SeqsPerGroup
		ft := newTraceFact([]string{flag}, f.phase+" batch", fmt.Sprintf("%d per rank (its engine ranges)", b), fmt.Sprint(perRank), profilerWhy)
		ft.agrees = perRank == b
		ft.fix = fmt.Sprintf("pass --%s %d", flag, b*plan.Normalized().DP)
		if dp := plan.Normalized().DP; dp > 1 {
			ft.fix += fmt.Sprintf(": %d per DP group x --dp %d", b, dp)
		}
		facts = append(facts, ft)
	}
	if name, ok := traceEngine([]*traces.Result{r}); ok {
		ft := newTraceFact([]string{"engine"}, "engine", name+" (its step ranges)", effectiveEngine(f.opts.Engine), profilerWhy)
		ft.agrees = name == effectiveEngine(f.opts.Engine)
		ft.fix = "pass --engine " + name + " (a version of it), or leave --engine out"
		facts = append(facts, ft)
	}
	if on, ok := traceGraphs([]*traces.Result{r}, f.phase); ok {
		ft := newTraceFact([]string{"cuda-graphs"}, "CUDA graphs", onOff(on)+" ("+graphLaunches(on)+")", onOff(f.opts.CUDAGraphs), profilerWhy)
		ft.agrees = on == f.opts.CUDAGraphs
		facts = append(facts, ft)
	}
	if on, ok := traceARNormFusion([]*traces.Result{r}, f.phase); ok {
		ft := newTraceFact([]string{"ar-norm-fusion"}, "all-reduce + RMSNorm fusion", onOff(on)+" ("+arNormKernels(on)+")", f.opts.ARNormFusion.String(), profilerWhy)
		ft.agrees = f.opts.ARNormFusion == sim.ToggleDefault || (f.opts.ARNormFusion == sim.ToggleOn) == on
		ft.fix = "pass --ar-norm-fusion=" + fmt.Sprint(on) + ", or leave it out"
		facts = append(facts, ft)
	}
	return facts
}

// traceEngine is the engine whose step ranges split every profiler
// file of rs, by its profile's name (engineOfRanges); ok is false when a
// file's steps were split without an engine's ranges or two engines
// wrote them.
func traceEngine(rs []*traces.Result) (name string, ok bool) {
	for _, r := range rs {
		for _, k := range r.Kineto {
			e := engineOfRanges(k.Engine)
			if k.Engine == "" || name != "" && e != name {
				return "", false
			}
			name = e
		}
	}
	return name, name != ""
}

// traceWithoutEngine is the first profiler file of rs whose steps no
// engine's ranges split, with the rule that split them.
func traceWithoutEngine(rs []*traces.Result) (src, rule string, ok bool) {
	for _, r := range rs {
		for _, k := range r.Kineto {
			if k.Engine == "" {
				return k.Source, k.StepRule, true
			}
		}
	}
	return "", "", false
}

// effectiveEngine is the name of the engine r prices with: the default
// engine's for the zero Ref.
func effectiveEngine(r engprof.Ref) string {
	if r.Name == "" {
		return engprof.DefaultEngine
	}
	return r.Name
}

// engineOfRanges is the engine profile's name of an engine as the
// profiler trace reader names it (traces.EngineTRTLLM is trtllm).
func engineOfRanges(e string) string {
	if e == traces.EngineTRTLLM {
		return "trtllm"
	}
	return e
}

// kinetoSteps are the steps of every profiler file of r.
func kinetoSteps(r *traces.Result) []traces.KinetoStep {
	var out []traces.KinetoStep
	for _, k := range r.Kineto {
		out = append(out, k.Steps...)
	}
	return out
}

// stepPhases are the phases the engine ranges of steps name, sorted
// (none when the steps were split without the engine's ranges).
func stepPhases(steps []traces.KinetoStep) []string {
	var out []string
	for _, s := range steps {
		if s.Phase != "" && !slices.Contains(out, s.Phase) {
			out = append(out, s.Phase)
		}
	}
	slices.Sort(out)
	return out
}

// tracePhase is the phase the profiler traces rs are compared in, from
// their engine ranges: decode when some step is a decode step, else
// prefill when some is a prefill step; ok is false when no range names
// either (no ranges, or only mixed and idle iterations, which no
// scenario predicts).
func tracePhase(rs []*traces.Result) (phase string, ok bool) {
	var all []traces.KinetoStep
	for _, r := range rs {
		all = append(all, kinetoSteps(r)...)
	}
	phases := stepPhases(all)
	for _, ph := range []string{traces.PhaseDecode, traces.PhasePrefill} {
		if slices.Contains(phases, ph) {
			return ph, true
		}
	}
	return "", false
}

// stepBatch is the batch per rank the engine ranges of the steps of
// phase name (decode: the generation requests; prefill: the context
// requests); ok is false when none names one, or they differ.
func stepBatch(steps []traces.KinetoStep, phase string) (batch int, ok bool) {
	for _, s := range steps {
		if s.Phase != phase {
			continue
		}
		b := s.DecodeReqs
		if phase == traces.PhasePrefill {
			b = s.ContextReqs
		}
		if b <= 0 || (batch > 0 && b != batch) {
			return 0, false
		}
		batch = b
	}
	return batch, batch > 0
}

// traceGraphs says whether the steps of rs compared in phase (those whose
// range names it, or names none) ran CUDA graphs: on when every one
// launches a graph, off when none does; ok is false without such steps,
// or when some do and some do not.
func traceGraphs(rs []*traces.Result, phase string) (on, ok bool) {
	with, without := 0, 0
	for _, r := range rs {
		for _, s := range kinetoSteps(r) {
			switch {
			case s.Phase != "" && s.Phase != phase:
			case s.GraphLaunches > 0:
				with++
			default:
				without++
			}
		}
	}
	return with > 0, (with == 0) != (without == 0)
}

// traceARNormFusion is whether the engine that ran the profiler traces
// rs fused each all-reduce with the RMSNorm after it in their steps of
// phase: on where some all-reduce kernel carried its norm
// (allreduce_fusion with no norm kernel after it; an engine's own rules
// may leave a few apart, as TensorRT-LLM does a dense layer's attention
// all-reduce), off where a norm kernel of its own followed every one; ok
// is false when no step shows either.
func traceARNormFusion(rs []*traces.Result, phase string) (on, ok bool) {
	fused, apart := 0, 0
	for _, r := range rs {
		for _, s := range kinetoSteps(r) {
			if s.Phase == "" || s.Phase == phase {
				fused += s.ARNormFused
				apart += s.ARNormApart
			}
		}
	}
	return fused > 0, fused > 0 || apart > 0
}

// arNormKernels says what the steps' kernels show of the all-reduce +
// RMSNorm fusion.
func arNormKernels(on bool) string {
	if on {
		return "its all-reduce kernels apply the RMSNorm after them"
	}
	return "a norm kernel follows each all-reduce"
}

// graphLaunches says what the steps' graph launches show for CUDA graphs
// on or off.
func graphLaunches(on bool) string {
	if on {
		return "its steps launch CUDA graphs"
	}
	return "no CUDA graph launch in its steps"
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
func checkTraceGPU(rs []*traces.Result, t *topology.Topology, topoArg string) error {
	for _, r := range rs {
		for _, k := range r.Kineto {
			if err := checkRanOn(r.Source, "the trace", k.Devices, t, topoArg); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkRanOn refuses to predict or fit a measurement (src: a trace, an
// nccl-tests log; what: how the message names it) on a box of another GPU
// than the devices it lists: the measured and predicted times would be of
// two machines. topoArg is --topo as given ("" when the box is the
// default), which the error names: the user's word for the box, not the
// name inside its file. Names are matched by the catalog entry each stands for ("NVIDIA H100 80GB HBM3" is
// an H100 SXM); a name the catalog does not know must be the box's own
// device name (a box 'tpscope topo discover' wrote on that GPU), since
// nothing says it is the box's GPU. A measurement that names no device
// ("" or "-" on its rank lines) is not checked.
func checkRanOn(src, what string, devices []string, t *topology.Topology, topoArg string) error {
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
		if topoArg != "" {
			return flagError("--topo", topoArg, "its GPUs are %s, and %s ran on %s: pass a box of that GPU", box, src, ran)
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
