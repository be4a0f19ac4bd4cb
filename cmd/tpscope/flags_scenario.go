package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/perfdb"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// scenarioFlags are the scenario flags of every verb that takes a scenario
// (predict, advise, run, schedule, model show, simulate, report; compare
// and calibrate as overrides of what a trace recorded): one name, type,
// meaning and default each, bound to sim.Scenario through its codecs. The
// run-time options come from sim.OptionFields, their defaults from
// sim.DefaultOptions: a bare command predicts a stock deployment (vLLM's
// CUDA graphs, NCCL's own protocol, algorithm and P2P level, the
// checkpoint's KV dtype).
type scenarioFlags struct {
	fs *pflag.FlagSet

	model          string
	tp, dp, dcp    int
	ep             bool
	phase          string
	batch, context int
	mtp            int
	kvDtype        string
	denseDSA       bool
	dispatch       string
	dispatchDtype  string
	moeRouting     string
	topo           string
	gpus           int
	opts           sim.Options
	perfDB         string
	perfDBSystem   string
	db             *perfdb.DB // --perf-db, opened once

	// arch, when set, is used instead of resolving --model (model load).
	arch *model.Arch
	// planFlags: --tp, --dp, --dcp are these flags (addScenarioFlags), not
	// a verb's own lists of degrees (plan).
	planFlags bool
}

// addScenarioFlags registers the scenario flags on fs.
func addScenarioFlags(fs *pflag.FlagSet) *scenarioFlags {
	f := newScenarioFlags(fs)
	f.planFlags = true
	f.addModelFlags()
	fs.IntVar(&f.tp, "tp", 8, "tensor-parallel degree (must divide the attention heads)")
	fs.BoolVar(&f.ep, "ep", false, "expert parallelism: whole experts per rank (vLLM --enable-expert-parallel)")
	fs.IntVar(&f.dp, "dp", 1, "data-parallel attention degree; GPUs = tp x dp (needs --ep)")
	fs.IntVar(&f.dcp, "dcp", 1, "decode context parallelism: KV cache split by tokens over this many ranks (divides --tp)")
	fs.StringVar(&f.phase, "phase", "decode", "step to model: decode or prefill")
	fs.IntVar(&f.batch, "batch", 1, "concurrent sequences (decode) or prompts (prefill), over all DP groups")
	fs.IntVar(&f.context, "context", 4096, "tokens in each sequence's KV cache (decode) or prompt length (prefill)")
	fs.IntVar(&f.mtp, "mtp", 0, "MTP speculative tokens per sequence and step (vLLM num_speculative_tokens)")
	fs.StringVar(&f.kvDtype, "kv-dtype", "", "KV-cache dtype: bf16 or fp8 (default: the checkpoint's, vLLM --kv-cache-dtype auto)")
	fs.StringVar(&f.topo, "topo", topology.DefaultPreset, topoHelp)
	fs.IntVar(&f.gpus, "gpus", 0, "use only the first N GPUs of the box (0 = all)")
	f.addCostFlags()
	f.addOptionFlags()
	return f
}

// addCostFlags registers --perf-db and --perf-db-system.
func (f *scenarioFlags) addCostFlags() {
	f.fs.StringVar(&f.perfDB, "perf-db", "", "price ops from measured tables first: the systems/ directory of an aiconfigurator install (vLLM's newest tables of the box's GPU); ops without a table keep the priors, and each op says where its cost came from")
	f.fs.StringVar(&f.perfDBSystem, "perf-db-system", "", "system of --perf-db to read (its YAML name, e.g. rtx_pro_6000_server; default: the one measured on the box's GPU)")
}

// costs is the cost source --perf-db names for topo's GPU and the
// tables of the options' engine and its kernels, nil without the flag; its MoE table must have rows under
// routing, the schedule's.
func (f *scenarioFlags) costs(topo *topology.Topology, routing model.Routing, o sim.Options) (sim.CostSource, error) {
	if f.perfDB == "" {
		if f.perfDBSystem != "" {
			return nil, usageErrorf("--perf-db-system %s: needs --perf-db", f.perfDBSystem)
		}
		return nil, nil
	}
	if f.db == nil {
		db, err := perfdb.Open(f.perfDB)
		if err != nil {
			return nil, usageErrorf("--perf-db %s: %v", f.perfDB, strings.TrimPrefix(err.Error(), "perfdb: "))
		}
		f.db = db
	}
	dev := topo.DeviceOf(0)
	src, err := perfdb.NewSource(f.db, perfdb.SourceConfig{System: f.perfDBSystem, Device: dev.Name, Profile: o.Engine,
		AttentionBackend: string(o.AttentionBackend), MoEKernel: o.MoEKernel})
	if err != nil {
		return nil, usageErrorf("--perf-db %s: %v", f.perfDB, strings.TrimPrefix(err.Error(), "perfdb: "))
	}
	if err := src.Check(dev); err != nil {
		return nil, usageErrorf("--perf-db-system %s: %v", f.perfDBSystem, strings.TrimPrefix(err.Error(), "perfdb: "))
	}
	// The schedule's MoE routing and the rows that price it are one fact.
	if err := src.CheckRouting(routing); err != nil {
		msg := strings.TrimPrefix(err.Error(), "perfdb: ")
		if f.fs.Changed("moe-routing") {
			return nil, usageErrorf("--moe-routing %s: %s", routing, msg)
		}
		return nil, usageErrorf("--perf-db %s: %s (pass --moe-routing with one of them)", f.perfDB, msg)
	}
	return src, nil
}

func newScenarioFlags(fs *pflag.FlagSet) *scenarioFlags {
	return &scenarioFlags{fs: fs, opts: sim.DefaultOptions(), dispatchDtype: "bf16", dispatch: model.DispatchAllToAll}
}

// addModelFlags registers --model and the build options.
func (f *scenarioFlags) addModelFlags() {
	fs := f.fs
	fs.StringVar(&f.model, "model", model.DefaultPreset, "model preset ("+strings.Join(model.PresetNames(), ", ")+") or a config.json / model directory")
	fs.BoolVar(&f.denseDSA, "dense-dsa", false, "run a DSA model (GLM-5) as dense MLA without the indexer (default: as the box's engines run it: dense on SM12x, which has no DSA sparse kernels; sparse elsewhere)")
	fs.StringVar(&f.dispatch, "moe-dispatch", model.DispatchAllToAll, "MoE dispatch under --dp > 1: alltoall or allgather_reducescatter (vLLM's all2all backend)")
	fs.StringVar(&f.dispatchDtype, "dispatch-dtype", "bf16", "payload dtype of the MoE dispatch under --dp > 1: bf16 or fp8")
	fs.StringVar(&f.moeRouting, "moe-routing", model.UniformRouting.String(), "how the MoE router spreads tokens over the experts: uniform (random), or balanced or power-law-ALPHA as aiconfigurator's MoE tables were measured (power-law-1.01, power-law-1.2); with --perf-db the default is the tables' balanced")
}

// routing is the MoE routing the flags name: --moe-routing when set;
// otherwise, with --perf-db, the routing its MoE tables are read under by
// default (perfdb.DefaultRouting: balanced), so that the schedule and the
// rows that price it state one routing; otherwise uniform.
func (f *scenarioFlags) routing() (model.Routing, error) {
	r, err := model.ParseRouting(f.moeRouting)
	if err != nil {
		return r, usageErrorf("--moe-routing %q: want %s", f.moeRouting, model.RoutingAccepted)
	}
	if f.perfDB != "" && !f.fs.Changed("moe-routing") {
		r = perfdb.DefaultRouting
	}
	return r, nil
}

// addOptionFlags registers one flag per field of sim.Options.
func (f *scenarioFlags) addOptionFlags() {
	for _, of := range sim.OptionFields() {
		f.fs.Var(&optionValue{f: of, o: &f.opts}, of.Name, of.Help)
		if of.Kind == sim.OptionBool {
			f.fs.Lookup(of.Name).NoOptDefVal = "true"
		}
		if of.Hidden {
			_ = f.fs.MarkHidden(of.Name)
		}
	}
}

// topoHelp describes what --topo accepts.
var topoHelp = "box: a preset (" + strings.Join(topology.PresetNames(), ", ") + "), a description FABRIC:NxGPU (fabrics " +
	strings.Join(topology.Fabrics(), ", ") + "; GPUs as 'tpscope topo gpus' lists them, e.g. nvswitch:8xh100-sxm, pcie-2s:8xrtx-pro-6000-server) or a topology JSON"

// optionValue binds one sim.Options field to a flag through the options'
// text codec.
type optionValue struct {
	f sim.OptionField
	o *sim.Options
}

func (v *optionValue) String() string {
	s := v.f.Get(v.o)
	if s == "" && v.f.Kind == sim.OptionBool {
		return "false"
	}
	return s
}

func (v *optionValue) Set(s string) error { return v.f.Set(v.o, s) }

func (v *optionValue) Type() string {
	switch v.f.Kind {
	case sim.OptionBool:
		return "bool"
	case sim.OptionFloat:
		return "float"
	case sim.OptionInt:
		return "int"
	case sim.OptionInts:
		return "ints"
	}
	return "string"
}

// options returns the run-time options the flags give; a bad value is a
// usage error naming its flag.
func (f *scenarioFlags) options() (sim.Options, error) {
	for _, of := range sim.OptionFields() {
		var one sim.Options
		v := of.Get(&f.opts)
		if v == "" {
			continue
		}
		if err := of.Set(&one, v); err != nil {
			return sim.Options{}, usageErrorf("--%s %s: %v", of.Name, v, err)
		}
		if err := one.Validate(); err != nil {
			return sim.Options{}, usageErrorf("--%s %s: %s", of.Name, v, strings.TrimPrefix(err.Error(), "options: "))
		}
	}
	return f.opts, nil
}

// workload is the workload the flags name; errors are usage errors.
func (f *scenarioFlags) workload() (model.Workload, error) {
	w := model.Workload{Phase: model.Phase(f.phase), Batch: f.batch, Context: f.context, SpecTokens: f.mtp}
	if f.kvDtype != "" {
		d, err := model.ParseDtype(f.kvDtype)
		if err != nil {
			return w, usageErrorf("--kv-dtype: %v", err)
		}
		w.KVDtype = d
	}
	if err := w.Validate(); err != nil {
		return w, usageErrorf("%v", flagWords(err))
	}
	return w, nil
}

// build is the build options the flags name.
func (f *scenarioFlags) build() (model.BuildOptions, error) {
	if f.dispatch != model.DispatchAllToAll && f.dispatch != model.DispatchAllGather {
		return model.BuildOptions{}, usageErrorf("--moe-dispatch %q: want %s or %s", f.dispatch, model.DispatchAllToAll, model.DispatchAllGather)
	}
	d, err := model.ParseDtype(f.dispatchDtype)
	if err != nil || (d != model.BF16 && d != model.FP8) {
		return model.BuildOptions{}, usageErrorf("--dispatch-dtype %q: want bf16 or fp8", f.dispatchDtype)
	}
	r, err := f.routing()
	if err != nil {
		return model.BuildOptions{}, err
	}
	return model.BuildOptions{DenseDSA: f.denseDSA, MoEDispatch: f.dispatch, DispatchDtype: d, Routing: r}, nil
}

// modelArch resolves --model (or the loaded architecture).
func (f *scenarioFlags) modelArch() (*model.Arch, error) {
	if f.arch != nil {
		return f.arch, nil
	}
	return resolveModel(f.model)
}

// countFlags are flags a verb registers beside the scenario flags that
// count rows to print and so cannot be negative (0 means all); checked
// with the scenario flags, before any work.
var countFlags = []string{"top"}

// checkCounts refuses a parallel degree below 1 (the plan codec reads 0 as
// 1, a flag must not) and a negative count flag of the verb.
func (f *scenarioFlags) checkCounts() error {
	for _, d := range []struct {
		name string
		v    int
	}{{"tp", f.tp}, {"dp", f.dp}, {"dcp", f.dcp}} {
		if f.planFlags && d.v < 1 {
			return usageErrorf("--%s %d: want an integer from 1", d.name, d.v)
		}
	}
	for _, name := range countFlags {
		if fl := f.fs.Lookup(name); fl != nil && fl.Value.Type() == "int" {
			if n, err := strconv.Atoi(fl.Value.String()); err == nil && n < 0 {
				return usageErrorf("--%s %d: want 0 (all) or more", name, n)
			}
		}
	}
	return nil
}

// box resolves --topo at --gpus.
func (f *scenarioFlags) box() (*topology.Topology, topology.Ref, error) {
	if err := f.checkCounts(); err != nil {
		return nil, topology.Ref{}, err
	}
	if f.gpus < 0 {
		return nil, topology.Ref{}, usageErrorf("--gpus %d: want 0 (all) or more", f.gpus)
	}
	ref, err := topology.NewRef(f.topo, f.gpus)
	if err != nil {
		return nil, ref, usageErrorf("--topo %s: %v", f.topo, err)
	}
	t, err := ref.Resolve()
	if err != nil {
		return nil, ref, usageErrorf("--topo %s: %v", f.topo, err)
	}
	return t, ref, nil
}

// scenario is the whole scenario the flags name, every field resolved; a
// bad flag is a usage error naming it, a config file that fails to parse
// an ordinary error naming the file.
func (f *scenarioFlags) scenario() (sim.Scenario, error) {
	if err := f.checkCounts(); err != nil {
		return sim.Scenario{}, err
	}
	a, err := f.modelArch()
	if err != nil {
		return sim.Scenario{}, err
	}
	sc := sim.Scenario{Arch: a, Plan: model.Plan{TP: f.tp, EP: f.ep, DP: f.dp, DCP: f.dcp}}
	if err := sc.Plan.Validate(a); err != nil {
		return sc, usageErrorf("%s: %v", a.Name, flagWords(err))
	}
	if sc.Workload, err = f.workload(); err != nil {
		return sc, err
	}
	if sc.Build, err = f.build(); err != nil {
		return sc, err
	}
	if sc.Options, err = f.options(); err != nil {
		return sc, err
	}
	if sc.Topo, sc.TopoRef, err = f.box(); err != nil {
		return sc, err
	}
	if !f.fs.Changed("dense-dsa") {
		// Unchosen, the DSA model runs as the box's engines run it.
		sc.Build.DenseDSA = sim.ImpliedDenseDSA(a, sc.Topo, sc.Options.Engine)
	}
	if err := sc.Workload.ValidateFor(a); err != nil {
		return sc, usageErrorf("%v", flagWords(err))
	}
	if w := sc.Plan.World(); w > sc.Topo.NumGPUs() {
		return sc, usageErrorf("--tp %d x --dp %d needs %d GPUs; --topo %s has %d", sc.Plan.Normalized().TP, sc.Plan.Normalized().DP, w, sc.Topo.Name, sc.Topo.NumGPUs())
	}
	if err := sim.CheckEngine(sc); err != nil {
		return sc, usageErrorf("%v", err)
	}
	if sc.Costs, err = f.costs(sc.Topo, sc.Build.Routing, sc.Options); err != nil {
		return sc, err
	}
	return sc, nil
}

// override returns the changes the flags the user set make to a recorded
// scenario (compare, calibrate), nil when none was set.
func (f *scenarioFlags) override() func(*sim.Scenario) error {
	var set []string
	f.fs.Visit(func(fl *pflag.Flag) {
		if f.isScenarioFlag(fl.Name) {
			set = append(set, fl.Name)
		}
	})
	if len(set) == 0 {
		return nil
	}
	return func(sc *sim.Scenario) error {
		for _, name := range set {
			if err := f.apply(name, sc); err != nil {
				return err
			}
		}
		if err := sc.Plan.Validate(sc.Arch); err != nil {
			return usageErrorf("%s: %v", sc.Arch.Name, flagWords(err))
		}
		if err := sc.Workload.ValidateFor(sc.Arch); err != nil {
			return usageErrorf("%v", flagWords(err))
		}
		return nil
	}
}

// scenarioFlagNames are the flags addScenarioFlags registers besides the
// option flags.
var scenarioFlagNames = []string{"model", "tp", "ep", "dp", "dcp", "phase", "batch", "context", "mtp", "kv-dtype",
	"dense-dsa", "moe-dispatch", "dispatch-dtype", "moe-routing", "topo", "gpus", "perf-db", "perf-db-system"}

func (f *scenarioFlags) isScenarioFlag(name string) bool {
	for _, n := range scenarioFlagNames {
		if n == name {
			return true
		}
	}
	for _, of := range sim.OptionFields() {
		if of.Name == name {
			return true
		}
	}
	return false
}

// apply sets the field one flag names on sc.
func (f *scenarioFlags) apply(name string, sc *sim.Scenario) error {
	var err error
	switch name {
	case "model":
		sc.Arch, err = f.modelArch()
	case "tp":
		sc.Plan.TP = f.tp
	case "ep":
		sc.Plan.EP = f.ep
	case "dp":
		sc.Plan.DP = f.dp
	case "dcp":
		sc.Plan.DCP = f.dcp
	case "phase":
		sc.Workload.Phase = model.Phase(f.phase)
	case "batch":
		sc.Workload.Batch = f.batch
	case "context":
		sc.Workload.Context = f.context
	case "mtp":
		sc.Workload.SpecTokens = f.mtp
	case "kv-dtype":
		var w model.Workload
		if w, err = f.workload(); err == nil {
			sc.Workload.KVDtype = w.KVDtype
		}
	case "dense-dsa", "moe-dispatch", "dispatch-dtype":
		// The recorded routing stays unless --moe-routing is set too.
		r := sc.Build.Routing
		if sc.Build, err = f.build(); err == nil {
			sc.Build.Routing = r
		}
	case "moe-routing":
		var o model.BuildOptions
		if o, err = f.build(); err == nil {
			sc.Build.Routing = o.Routing
		}
	case "topo", "gpus":
		sc.Topo, sc.TopoRef, err = f.box()
		if err == nil && sc.Costs != nil {
			sc.Costs, err = f.costs(sc.Topo, sc.Build.Routing, sc.Options)
		}
	case "perf-db", "perf-db-system":
		// A recorded scenario keeps the routing it ran under; tables
		// without rows under it are refused (costs), not silently
		// re-routed.
		sc.Costs, err = f.costs(sc.Topo, sc.Build.Routing, sc.Options)
	default:
		for _, of := range sim.OptionFields() {
			if of.Name == name {
				if _, err = f.options(); err == nil {
					err = of.Set(&sc.Options, of.Get(&f.opts))
				}
			}
		}
	}
	return err
}

// flagWords rewrites the field names of model's plan and workload errors
// as the flags that set them.
func flagWords(err error) string {
	var pe *model.PlanError
	if !errors.As(err, &pe) {
		return err.Error()
	}
	flag := map[string]string{"tp": "--tp", "dp": "--dp", "dcp": "--dcp", "ep": "--ep", "phase": "--phase", "batch": "--batch",
		"context": "--context", "spec_tokens": "--mtp", "kv_dtype": "--kv-dtype"}[pe.Field]
	if flag == "" {
		return err.Error()
	}
	return fmt.Sprintf("%s %s: want %s", flag, pe.Value, pe.Want)
}

// resolveModel finds a preset or loads a config; a name that is neither
// is a usage error.
func resolveModel(name string) (*model.Arch, error) {
	a, err := model.Resolve(name)
	if err == nil {
		return a, nil
	}
	var ce *model.ConfigError
	if errors.As(err, &ce) {
		return nil, err
	}
	return nil, usageErrorf("--model: %v", err)
}

// checkOutput validates an --output value against the formats a verb has.
func checkOutput(got string, allowed ...string) error {
	for _, a := range allowed {
		if got == a {
			return nil
		}
	}
	return usageErrorf("--output %q: want one of %s", got, strings.Join(allowed, ", "))
}

// intList is a list flag of integers: comma-separated, repeatable, with
// K and M suffixes (1024 multiples); min is the smallest value accepted.
type intList struct {
	v   []int
	set bool
	min int
}

func newIntList(fs *pflag.FlagSet, name string, def []int, min int, usage string) *intList {
	l := &intList{v: def, min: min}
	fs.Var(l, name, usage)
	return l
}

func (l *intList) String() string {
	s := make([]string, len(l.v))
	for i, x := range l.v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func (l *intList) Type() string { return "ints" }

func (l *intList) Set(s string) error {
	if !l.set {
		l.v, l.set = nil, true
	}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		mult := 1
		switch {
		case strings.HasSuffix(p, "K") || strings.HasSuffix(p, "k"):
			mult, p = 1024, p[:len(p)-1]
		case strings.HasSuffix(p, "M") || strings.HasSuffix(p, "m"):
			mult, p = 1024*1024, p[:len(p)-1]
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < l.min || n > 1<<26 {
			return fmt.Errorf("%q: want integers from %d (K and M suffixes allowed)", p, l.min)
		}
		l.v = append(l.v, n*mult)
	}
	return nil
}
