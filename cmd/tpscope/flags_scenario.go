package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	engprof "github.com/tpscope/tpscope/engine"
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
	boundFlags

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
	perfDBTransfer bool
	// perfDBBoxes: the verb prices several boxes (plan --topo a,b), so
	// --perf-db-transfer leaves a box with tables of its own to them
	// instead of refusing it.
	perfDBBoxes bool
	db          *perfdb.DB // --perf-db, opened once
	specFlags

	// arch, when set, is used instead of resolving --model (model load).
	arch *model.Arch
	// planFlags: --tp, --dp, --dcp are these flags (Bind), not a verb's
	// own lists of degrees (plan).
	planFlags bool
	// otherModels: the verb prices other models beside --model (advise
	// --transfer), which a build flag that does nothing on --model may
	// apply to.
	otherModels bool
	// variants: the verb also prices variants of the flags' scenario
	// (advise's and verdict's catalog entries: DP attention, speculative
	// decoding), which the MoE dispatch and acceptance flags may apply to
	// where the scenario itself has no dispatch or speculation.
	variants bool
	// executes: the verb runs tpscope's own kernels (run, verdict), so
	// the scenario's engine is the executor (runsExecutor): another
	// engine, or an engine option the executor cannot honour, is refused
	// rather than priced for a run that would not have it.
	executes bool
	// counts are the verb's flags that count rows to print (--top), which
	// cannot be negative (0 means all); checked with the scenario flags,
	// before any work.
	counts []countFlag
}

// countFlag is one of a verb's count flags and its field.
type countFlag struct {
	name string
	v    *int
}

// newScenarioFlags returns the scenario flags at their defaults: a stock
// deployment of the default model on the default box.
func newScenarioFlags() *scenarioFlags {
	return &scenarioFlags{model: model.DefaultPreset, tp: 8, dp: 1, dcp: 1, phase: "decode", batch: 1, context: 4096,
		topo: topology.DefaultPreset, opts: sim.DefaultOptions(),
		moeRouting: model.UniformRouting.String(), planFlags: true}
}

// Bind registers every scenario flag on fs.
func (f *scenarioFlags) Bind(fs *pflag.FlagSet) {
	f.bindModelFlags(fs)
	fs.IntVar(&f.tp, "tp", f.tp, "tensor-parallel degree (must divide the attention heads)")
	fs.BoolVar(&f.ep, "ep", f.ep, "expert parallelism: whole experts per rank (vLLM --enable-expert-parallel)")
	fs.IntVar(&f.dp, "dp", f.dp, "data-parallel attention degree; GPUs = tp x dp (needs --ep)")
	fs.IntVar(&f.dcp, "dcp", f.dcp, "decode context parallelism: KV cache split by tokens over this many ranks (divides --tp)")
	fs.StringVar(&f.phase, "phase", f.phase, "step to model: decode or prefill")
	countVar(fs, &f.batch, "batch", "concurrent sequences (decode) or prompts (prefill), over all DP groups")
	countVar(fs, &f.context, "context", "tokens in each sequence's KV cache (decode) or prompt length (prefill), at most the model's max_model_len ('model show' gives it)")
	fs.IntVar(&f.mtp, "mtp", f.mtp, "MTP speculative tokens per sequence and step (vLLM num_speculative_tokens): --spec mtp --spec-tokens N")
	f.bindSpecFlags(fs)
	fs.StringVar(&f.kvDtype, "kv-dtype", f.kvDtype, "KV-cache dtype: "+model.KVDtypesAccepted+" (default: the engine's --kv-cache-dtype auto: the checkpoint's KV scheme, or the engine's own default where it has one, as SGLang's fp8 for a DSA model on SM100)")
	fs.StringVar(&f.topo, "topo", f.topo, topoHelp)
	wantWhenEmpty(fs, "topo", topoWant)
	fs.IntVar(&f.gpus, "gpus", f.gpus, "use only the first N GPUs of the box (0 = all)")
	f.bindCostFlags(fs)
	f.bindOptionFlags(fs)
}

// bindCostFlags registers --perf-db, --perf-db-system and
// --perf-db-transfer.
// topoArg is --topo as the user gave it, "" when the box is the
// default: an error about the box names the flag's value (a path, a
// preset), not the name inside the box's file.
func (f *scenarioFlags) topoArg() string {
	if !f.changed("topo") {
		return ""
	}
	return f.topo
}

func (f *scenarioFlags) bindCostFlags(fs *pflag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.perfDB, "perf-db", f.perfDB, "price ops from measured tables first: the systems/ directory of an aiconfigurator or AISimulate install, or a checkout or site-packages holding one (the engine's tables of the box's GPU; a table a version's reuse.yaml takes from another version is read there, and the prediction says so); ops without a table keep the priors, and each op says where its cost came from")
	fs.StringVar(&f.perfDBSystem, "perf-db-system", f.perfDBSystem, "system of --perf-db to read (its YAML name, e.g. rtx_pro_6000_server; default: the one measured on the box's GPU)")
	wantWhenEmpty(fs, "perf-db", "an aiconfigurator or AISimulate systems/ directory, or a checkout or site-packages holding one")
	wantWhenEmpty(fs, "perf-db-system", "a system of --perf-db by its YAML name (e.g. rtx_pro_6000_server)")
	fs.BoolVar(&f.perfDBTransfer, "perf-db-transfer", f.perfDBTransfer, "for a GPU --perf-db has no tables of: price ops from the other systems' tables moved to it by the datasheets (nearest memory bandwidth first; each row's bandwidth part by the speed-of-light ratio, its launches and latency by the small-kernel cost), as aiconfigurator's perf_data_reuse_manifest reuses rows; collectives keep the priors. Held out, closer than the priors on every HBM GPU (README \"Leave one system out\")")
}

// checkPerfDB refuses a --perf-db that is not there or cannot be read,
// before any work; what it holds is checked when it is opened.
func (f *scenarioFlags) checkPerfDB() error {
	if f.perfDB == "" && f.perfDBSystem != "" {
		return flagError("--perf-db-system", f.perfDBSystem, "needs --perf-db")
	}
	if f.perfDBTransfer && f.perfDB == "" {
		return flagError("--perf-db-transfer", nil, "needs --perf-db")
	}
	if f.perfDBTransfer && f.perfDBSystem != "" {
		return flagError("--perf-db-transfer and --perf-db-system", nil, "take one: --perf-db-system reads one system's own tables, --perf-db-transfer moves the others' to a GPU without tables")
	}
	return checkInputPath("--perf-db", f.perfDB, "the systems/ directory of an aiconfigurator install")
}

// perfDBError is a perf database that cannot price the scenario: a usage
// error naming flag and its value with perfdb's reason, or, for a file of
// the database that cannot be read (cut or damaged), a failure naming the
// file.
func perfDBError(flag, value string, err error) error {
	var fe *perfdb.FileError
	if errors.As(err, &fe) {
		return err
	}
	var pe *perfdb.Error
	if errors.As(err, &pe) {
		return &usageError{Flag: flag, Value: value, Want: pe.Msg, Err: err}
	}
	return causeError(flag, value, err)
}

// costs is the cost source --perf-db names for topo's GPU and the
// tables of the options' engine and its kernels, nil without the flag;
// its MoE table must have rows under routing, the schedule's, where
// priced says the tables price the step's routed experts (nil: always;
// a scenario passes moePricedByTables of itself, plan a func that defers
// the check to each configuration, planRouting). modelType is the priced
// model's, which the engine may pick its attention kernel by.
func (f *scenarioFlags) costs(topo *topology.Topology, routing model.Routing, o sim.Options, modelType string, priced func(sim.CostSource) bool) (sim.CostSource, error) {
	if err := f.checkPerfDB(); err != nil || f.perfDB == "" {
		return nil, err
	}
	if f.db == nil {
		db, err := perfdb.Open(f.perfDB)
		if err != nil {
			return nil, perfDBError("--perf-db", f.perfDB, err)
		}
		f.db = db
	}
	dev := topo.DeviceOf(0)
	cfg := perfdb.SourceConfig{System: f.perfDBSystem, Device: dev.Name, Profile: o.Engine,
		AttentionBackend: string(o.AttentionBackend), MoEKernel: o.MoEKernel, ModelType: modelType}
	if f.perfDBTransfer {
		own, err := f.db.SystemFor(dev.Name)
		switch {
		case err != nil:
			return f.transferCosts(dev, routing, cfg, priced)
		case !f.perfDBBoxes:
			return nil, flagError("--perf-db-transfer", nil, "%s has system %s measured on the box's GPU (%s); its own tables price it (drop --perf-db-transfer)", f.perfDB, own, dev.Name)
		}
		// Several boxes: this one's own tables price it.
	}
	// A system the database lacks is the --perf-db-system flag's fault,
	// not the database's.
	if f.perfDBSystem != "" {
		if _, err := f.db.System(f.perfDBSystem); err != nil {
			return nil, perfDBError("--perf-db-system", f.perfDBSystem, err)
		}
	}
	src, err := perfdb.NewSource(f.db, cfg)
	if err != nil {
		err := perfDBError("--perf-db", f.perfDB, err)
		if ue, ok := err.(*usageError); ok && f.perfDBSystem == "" {
			if _, miss := f.db.SystemFor(dev.Name); miss != nil {
				ue.Want += " (--perf-db-transfer prices it from those systems' tables moved to this GPU by the datasheets)"
			}
		}
		return nil, err
	}
	if err := src.Check(dev); err != nil {
		return nil, perfDBError("--perf-db-system", f.perfDBSystem, err)
	}
	// The schedule's MoE routing and the rows that price it are one fact.
	if err := src.CheckRouting(routing); err != nil && (priced == nil || priced(src)) {
		return nil, f.routingError(routing, err)
	}
	return src, nil
}

// routingError is the refusal of tables that lack the schedule's MoE
// routing (CheckRouting's err): --moe-routing's fault when given, else
// --perf-db's, whose default routing the tables did not measure.
func (f *scenarioFlags) routingError(routing model.Routing, err error) error {
	if f.changed("moe-routing") {
		return perfDBError("--moe-routing", routing.String(), err)
	}
	err = perfDBError("--perf-db", f.perfDB, err)
	if ue, ok := err.(*usageError); ok {
		ue.Want += " (pass --moe-routing with one of them)"
	}
	return err
}

// transferCosts is --perf-db-transfer's cost source for a GPU dev the
// database has no tables of: every other system's, nearest memory
// bandwidth first (perfdb.Donors), read with cfg.
func (f *scenarioFlags) transferCosts(dev *topology.Device, routing model.Routing, cfg perfdb.SourceConfig, priced func(sim.CostSource) bool) (sim.CostSource, error) {
	donors, err := perfdb.Donors(f.db, dev.MemBWGBps)
	if err != nil {
		return nil, perfDBError("--perf-db", f.perfDB, err)
	}
	cfg.System, cfg.Device = "", ""
	xfer, err := perfdb.NewTransfer(f.db, donors, cfg)
	if err != nil {
		return nil, perfDBError("--perf-db", f.perfDB, err)
	}
	if err := xfer.CheckRouting(routing); err != nil && (priced == nil || priced(xfer)) {
		if f.changed("moe-routing") {
			return nil, perfDBError("--moe-routing", routing.String(), err)
		}
		return nil, perfDBError("--perf-db", f.perfDB, err)
	}
	return xfer, nil
}

// bindModelFlags registers --model and the build options.
func (f *scenarioFlags) bindModelFlags(fs *pflag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.model, "model", f.model, "model preset ("+strings.Join(model.PresetNames(), ", ")+") or a config.json / model directory")
	fs.BoolVar(&f.denseDSA, "dense-dsa", f.denseDSA, "run a DSA model (GLM-5) as dense MLA without the indexer (default: as the box's engines run it: dense on SM12x, which has no DSA sparse kernels; sparse elsewhere)")
	fs.StringVar(&f.dispatch, "moe-dispatch", f.dispatch, "MoE dispatch under --dp > 1: alltoall or allgather_reducescatter (default: the engine's, which the engine line names: vLLM's --all2all-backend allgather_reducescatter, SGLang's all-gather + reduce-scatter without --moe-a2a-backend, TensorRT-LLM's NVLink all-to-all where NVLink joins the GPUs)")
	fs.StringVar(&f.dispatchDtype, "dispatch-dtype", f.dispatchDtype, "payload dtype of the MoE dispatch under --dp > 1: bf16 or fp8 (default: the engine's; vLLM's all-gather moves its experts' input format, FP8 or NVFP4 with their scales)")
	fs.StringVar(&f.moeRouting, "moe-routing", f.moeRouting, "how the MoE router spreads tokens over the experts: uniform (random), or balanced or power-law-ALPHA as aiconfigurator's MoE tables were measured (power-law-1.01, power-law-1.2); with --perf-db the default is the tables' balanced where their MoE rows price the routed experts")
	wantWhenEmpty(fs, "model", "a model preset ("+strings.Join(model.PresetNames(), ", ")+") or a config.json / model directory")
	wantWhenEmpty(fs, "moe-routing", "uniform, balanced or power-law-ALPHA")
}

// routing is the MoE routing the flags name: --moe-routing when set;
// otherwise, with --perf-db, the routing its MoE tables are read under by
// default (perfdb.DefaultRouting: balanced), so that the schedule and the
// rows that price it state one routing (scenario sets uniform back when
// no row prices the step's routed experts); otherwise uniform.
func (f *scenarioFlags) routing() (model.Routing, error) {
	r, err := model.ParseRouting(f.moeRouting)
	if err != nil {
		return r, flagError("--moe-routing", quote(f.moeRouting), "want %s", model.RoutingAccepted)
	}
	if f.perfDB != "" && !f.changed("moe-routing") {
		r = perfdb.DefaultRouting
	}
	return r, nil
}

// bindOptionFlags registers one flag per field of sim.Options.
func (f *scenarioFlags) bindOptionFlags(fs *pflag.FlagSet) {
	f.fs = fs
	for _, of := range sim.OptionFields() {
		if of.Kind == sim.OptionCount {
			fs.Var(&countOptionValue{optionValue{f: of, o: &f.opts}}, of.Name, of.Help+countSuffixHelp)
		} else {
			fs.Var(&optionValue{f: of, o: &f.opts}, of.Name, of.Help)
		}
		if of.Kind == sim.OptionBool {
			fs.Lookup(of.Name).NoOptDefVal = "true"
		}
		if of.Hidden {
			_ = fs.MarkHidden(of.Name)
		}
		if w, ok := optionWants[of.Name]; ok {
			wantWhenEmpty(fs, of.Name, w)
		}
	}
}

// optionWants is what the options whose help is too long to quote take.
var optionWants = map[string]string{
	"engine":            "an engine name, alone or with @VERSION (" + strings.Join(engprof.Names(), ", ") + ")",
	"attention-backend": "the engine's attention backend by name (vLLM's FLASHMLA, SGLang's flashinfer, ...)",
	"moe-kernel":        "the engine's fused-MoE kernel by name (marlin, flashinfer_cutlass, cutlass, triton, ...)",
	"custom-ar":         "auto, off, oneshot or twoshot",
	"spec-accept":       `a rate ("0.8"), per-position rates ("0.9,0.8,0.7"), "len=L[@K]" or "rate=R[@K]"`,
}

// executorRefusal is what run and verdict say when the flags ask for
// what only a serving engine has.
const executorRefusal = "run and verdict execute tpscope's executor kernels, not a serving engine's"

// runsExecutor makes the flags those of a verb that executes tpscope's
// own kernels (run, verdict): the engine is the executor, which --engine's
// help gives as its default, and scenario refuses another engine or an
// option the executor's profile refuses (a custom all-reduce, an
// attention backend or MoE kernel of a serving engine). Call it after
// Bind.
func (f *scenarioFlags) runsExecutor(fs *pflag.FlagSet) {
	f.executes = true
	f.opts.Engine = engprof.ExecutorRef
	if fl := fs.Lookup("engine"); fl != nil {
		fl.Usage = "the engine whose kernels run and price the step: executor (tpscope's own kernels), the only one this verb runs (default: executor)"
	}
}

// checkExecutor refuses, for a verb that executes tpscope's kernels, an
// --engine other than the executor.
func (f *scenarioFlags) checkExecutor(o sim.Options) error {
	if f.executes && !o.Engine.IsExecutor() {
		return flagError("--engine", o.Engine, "%s: leave --engine out (or give executor)", executorRefusal)
	}
	// The executor allocates the step's own KV, not an engine's pool, and
	// neither verb prints a pool: the fraction would change nothing.
	if f.executes && o.GPUMemUtilFrac != 0 {
		return flagError("--gpu-mem-util", o.GPUMemUtilFrac, "run and verdict allocate the measured step's KV cache, not a serving engine's KV pool, so the fraction changes nothing they run or print: leave it out (predict, plan and simulate size the pool with it)")
	}
	if f.executes && o.CUDAGraphMem.Given {
		return flagError("--cuda-graph-mem-gib", o.CUDAGraphMem, "run and verdict allocate the measured step's KV cache, not a serving engine's KV pool, so the estimate changes nothing they run or print: leave it out (predict, plan and simulate size the pool with it)")
	}
	if f.executes && o.MaxModelLen != 0 {
		return flagError("--max-model-len", o.MaxModelLen, "run and verdict allocate the measured step's KV cache, not a serving engine's KV pool, so the engine's max_model_len changes nothing they run or print: leave it out (predict, plan and simulate size the pool with it)")
	}
	for _, c := range []struct {
		flag string
		v    int
	}{{"--max-num-batched-tokens", o.MaxNumBatchedTokens}, {"--max-num-seqs", o.MaxNumSeqs}} {
		if f.executes && c.v != 0 {
			return flagError(c.flag, c.v, "run and verdict execute one given step with tpscope's kernels, with no serving engine's scheduler or KV pool, so the limit changes nothing they run or print: leave it out (predict, plan and simulate size vLLM's pool with it)")
		}
	}
	return nil
}

// topoHelp describes what --topo accepts.
var topoHelp = "box: a preset (" + strings.Join(topology.PresetNames(), ", ") + "), a description FABRIC:NxGPU (fabrics " +
	strings.Join(topology.Fabrics(), ", ") + "; GPUs as 'tpscope topo gpus' lists them, e.g. nvswitch:8xh100-sxm, pcie-2s:8xrtx-pro-6000-server) or a topology JSON"

// topoWant is what --topo takes, said where its value is empty.
var topoWant = "a box preset (" + strings.Join(topology.PresetNames(), ", ") + "), a description FABRIC:NxGPU or a topology JSON"

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

// countOptionValue is an option that counts tokens or sequences
// (sim.OptionCount): its flag takes parseCount's K and M suffixes.
type countOptionValue struct{ optionValue }

func (v *countOptionValue) Set(s string) error {
	n, err := parseCount(s)
	if err != nil {
		return err
	}
	return v.f.Set(v.o, strconv.Itoa(n))
}

func (v *optionValue) Type() string {
	switch v.f.Kind {
	case sim.OptionBool:
		return "bool"
	case sim.OptionFloat:
		return "float"
	case sim.OptionInt, sim.OptionCount:
		return "int"
	case sim.OptionInts:
		return "ints"
	}
	return "string"
}

// checkOptionFlags checks each field of o that keep takes, alone: a bad
// value is a usage error naming its flag (--nccl-algo, not the field).
func checkOptionFlags(o *sim.Options, keep func(sim.OptionField) bool) error {
	for _, of := range sim.OptionFields() {
		var one sim.Options
		v := of.Get(o)
		if v == "" || !keep(of) {
			continue
		}
		if err := of.Set(&one, v); err != nil {
			return causeError("--"+of.Name, v, err)
		}
		if err := one.Validate(); err != nil {
			var oe *sim.OptionsError
			if errors.As(err, &oe) {
				return &usageError{Flag: "--" + of.Name, Value: v, Want: oe.Msg, Err: err}
			}
			return causeError("--"+of.Name, v, err)
		}
	}
	return nil
}

// options returns the run-time options the flags give; a bad value is a
// usage error naming its flag.
func (f *scenarioFlags) options() (sim.Options, error) {
	if err := checkOptionFlags(&f.opts, func(sim.OptionField) bool { return true }); err != nil {
		return sim.Options{}, err
	}
	// 0 reads as the engine's default (the codec writes no 0), but vLLM
	// refuses a limit of 0 (SchedulerConfig's Field(ge=1)): given, it is
	// a mistake, not the default.
	for _, c := range []struct {
		name string
		v    int
	}{{"max-num-batched-tokens", f.opts.MaxNumBatchedTokens}, {"max-num-seqs", f.opts.MaxNumSeqs}} {
		if c.v == 0 && f.changed(c.name) {
			return sim.Options{}, flagError("--"+c.name, 0, "want a count of 1 or more (vLLM refuses 0); leave the flag out for the engine's default")
		}
	}
	if n := f.opts.NCCL; n.P2PDisable && n.P2PLevel != "" {
		return sim.Options{}, flagError("--p2p-disable and --p2p-level "+n.P2PLevel, nil,
			"give one: NCCL_P2P_DISABLE=1 turns P2P off at every level, so there is no P2P level to set")
	}
	return f.opts, nil
}

// workload is the workload the flags name, parsed (model.Validate checks
// its values); errors are usage errors.
func (f *scenarioFlags) workload() (model.Workload, error) {
	m, err := f.specMethodFlag()
	if err != nil {
		return model.Workload{}, err
	}
	w := model.Workload{Phase: model.Phase(f.phase), Batch: f.batch, Context: f.context, SpecTokens: f.specTokensFlag(m)}
	if f.kvDtype != "" {
		d, err := model.ParseKVDtype(f.kvDtype)
		if err != nil {
			return w, causeError("--kv-dtype", quote(f.kvDtype), err)
		}
		w.KVDtype = d
	}
	return w, nil
}

// build is the build options the flags name (model.Validate checks the
// MoE dispatch; the CLI takes only the dispatch dtypes engines offer).
func (f *scenarioFlags) build() (model.BuildOptions, error) {
	var d model.Dtype // "": the engine's (sim fills it)
	if f.dispatchDtype != "" {
		var err error
		d, err = model.ParseDtype(f.dispatchDtype)
		if err != nil || (d != model.BF16 && d != model.FP8) {
			return model.BuildOptions{}, flagError("--dispatch-dtype", quote(f.dispatchDtype), "want bf16 or fp8")
		}
	}
	r, err := f.routing()
	if err != nil {
		return model.BuildOptions{}, err
	}
	return model.BuildOptions{DenseDSA: f.denseDSA, MoEDispatch: f.dispatch, DispatchDtype: d, Routing: r}, nil
}

// checkDenseDSA refuses --dense-dsa on a model without DSA sparse
// attention (no indexer), which has nothing to run dense, unless the verb
// also prices other models the flag may apply to (otherModels).
func (f *scenarioFlags) checkDenseDSA(a *model.Arch) error {
	if f.changed("dense-dsa") && a != nil && !a.HasIndexer() && !f.otherModels {
		return flagError("--dense-dsa", nil, "%s has no DSA sparse attention (no indexer) to run dense: it runs dense MLA already", a.Name)
	}
	return nil
}

// checkDispatch refuses --moe-dispatch and --dispatch-dtype on a plan
// that dispatches no tokens to the experts (model.Plan.DispatchesMoE:
// only DP attention does), where they would price nothing, unless the
// verb also prices variants they may apply to.
func (f *scenarioFlags) checkDispatch(a *model.Arch, p model.Plan) error {
	if f.variants || p.DispatchesMoE(a) {
		return nil
	}
	if name, v, ok := f.dispatchFlag(); ok {
		why := "tokens reach the experts by a dispatch only under DP attention (--dp > 1 with --ep)"
		if a != nil && a.RoutedExperts == 0 {
			why = a.Name + " has no routed experts"
		}
		return flagError("--"+name, v, "plan %s has no MoE dispatch to price: %s", p.Normalized(), why)
	}
	return nil
}

// dispatchFlag is the first MoE dispatch flag the user set (moe-dispatch,
// then dispatch-dtype) and its value; ok false when neither was set.
func (f *scenarioFlags) dispatchFlag() (name, value string, ok bool) {
	switch {
	case f.changed("moe-dispatch"):
		return "moe-dispatch", f.dispatch, true
	case f.changed("dispatch-dtype"):
		return "dispatch-dtype", f.dispatchDtype, true
	}
	return "", "", false
}

// modelArch resolves --model (or the loaded architecture).
func (f *scenarioFlags) modelArch() (*model.Arch, error) {
	if f.arch != nil {
		return f.arch, nil
	}
	return resolveModel("--model", f.model)
}

// checkCounts refuses a parallel degree below 1 (the plan codec reads 0 as
// 1, a flag must not) and a negative count flag of the verb.
func (f *scenarioFlags) checkCounts() error {
	for _, d := range []struct {
		name string
		v    int
	}{{"tp", f.tp}, {"dp", f.dp}, {"dcp", f.dcp}} {
		if f.planFlags && d.v < 1 {
			return flagError("--"+d.name, d.v, "want an integer from 1")
		}
	}
	for _, c := range f.counts {
		if *c.v < 0 {
			return flagError("--"+c.name, *c.v, "want 0 (all) or more")
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
		return nil, topology.Ref{}, flagError("--gpus", f.gpus, "want 0 (all) or more")
	}
	ref, err := topology.NewRef(f.topo, f.gpus)
	if err != nil {
		return nil, ref, causeError("--topo", f.topo, err)
	}
	t, err := ref.Resolve()
	if err != nil {
		return nil, ref, causeError("--topo", f.topo, err)
	}
	return t, ref, nil
}

// scenario is the whole scenario the flags name, every field resolved; a
// bad flag, or a --model or --topo file that fails to parse, is a usage
// error naming the flag (the message names the file and field).
func (f *scenarioFlags) scenario() (sim.Scenario, error) {
	if err := f.checkCounts(); err != nil {
		return sim.Scenario{}, err
	}
	a, err := f.modelArch()
	if err != nil {
		return sim.Scenario{}, err
	}
	if err := f.checkPerfDB(); err != nil {
		return sim.Scenario{}, err
	}
	sc := sim.Scenario{Arch: a, Plan: model.Plan{TP: f.tp, EP: f.ep, DP: f.dp, DCP: f.dcp}}
	if sc.Workload, err = f.workload(); err != nil {
		return sc, err
	}
	if sc.Build, err = f.build(); err != nil {
		return sc, err
	}
	if sc.Options, err = f.options(); err != nil {
		return sc, err
	}
	if err := f.checkExecutor(sc.Options); err != nil {
		return sc, err
	}
	// vLLM estimates its graphs only where it captures them
	// (cudagraph_mode not NONE): with graphs off a figure is priced
	// nowhere; 0, what the engine then takes, says nothing either.
	if sc.Options.CUDAGraphMem.Given && !sc.Options.CUDAGraphs {
		return sc, flagError("--cuda-graph-mem-gib", sc.Options.CUDAGraphMem, "with --cuda-graphs=false the engine captures no graph and takes no estimate off its pool: leave it out")
	}
	if err := f.specAccept(&sc.Options); err != nil {
		return sc, err
	}
	m, err := f.specMethodFlag()
	if err != nil {
		return sc, err
	}
	if sc.Build.Spec, err = f.spec(a, m); err != nil {
		return sc, err
	}
	if sc.Topo, sc.TopoRef, err = f.box(); err != nil {
		return sc, err
	}
	if err := f.checkDenseDSA(a); err != nil {
		return sc, err
	}
	sc.DenseDSAChosen = f.changed("dense-dsa")
	if !sc.DenseDSAChosen {
		// Unchosen, the DSA model runs as the box's engines run it.
		sc.Build.DenseDSA = sim.ImpliedDenseDSA(a, sc.Topo, sc.Options.Engine)
	}
	if f.kvDtype == "" {
		// Unnamed, the KV cache is the engine's 'auto' on this box: its
		// own default where its profile states one, else the checkpoint's
		// scheme (model.Workload.KVDtypeFor).
		if d := sim.ImpliedKVDefault(a, sc.Topo, sc.Options.Engine); d != nil {
			sc.Workload.KVDtype, sc.KVDefault = d.Dtype, d
		}
	}
	// Capture sizes pad a graphed decode step (and size SGLang's KV
	// reserve); an eager step under a fixed KV budget prices none of them,
	// unless the verb also prices variants that turn graphs on (advise's
	// cuda-graphs entry).
	if why := sc.GraphSizesUnused(); f.changed("graph-sizes") && !f.variants && why != "" {
		return sc, flagError("--graph-sizes", graphSizesText(sc.Options), "%s, so capture sizes change nothing of it: leave it out", why)
	}
	// Graphs on or off, a step that replays none is priced the same (and
	// a run runs it eagerly), unless the verb also prices variants.
	if why := sc.CUDAGraphsUnused(); f.changed("cuda-graphs") && !f.variants && why != "" {
		return sc, flagError("--cuda-graphs", sc.Options.CUDAGraphs, "%s, so the flag changes nothing of it: leave it out", why)
	}
	// What the builder checks, once: plan, workload and build options
	// against the model and each other.
	if err := model.Validate(a, sc.Plan, sc.Workload, sc.Build); err != nil {
		return sc, f.specFlagError(buildFlagError(a, err))
	}
	// Then what is valid but would price nothing here.
	if err := f.checkDispatch(a, sc.Plan); err != nil {
		return sc, err
	}
	if err := f.checkAccept(sc); err != nil {
		return sc, err
	}
	if w := sc.Plan.World(); w > sc.Topo.NumGPUs() {
		n := sc.Plan.Normalized()
		return sc, flagError(fmt.Sprintf("--tp %d x --dp %d", n.TP, n.DP), nil, "needs %d GPUs; --topo %s has %d", w, sc.Topo.Name, sc.Topo.NumGPUs())
	}
	if err := f.checkGPUsUsed(sc); err != nil {
		return sc, err
	}
	if err := sc.CheckEngine(); err != nil {
		if f.executes {
			return sc, usageErrorf("%v (%s)", err, executorRefusal)
		}
		return sc, usageErrorf("%v", err)
	}
	if err := sc.CheckOverlap(); err != nil {
		return sc, usageErrorf("%v", err)
	}
	// A collective's option on a plan without that collective prices
	// nothing, unless the verb also prices variants with it (advise's
	// plan entries).
	if err := sc.CheckCollectiveOptions(); err != nil && !f.variants {
		return sc, usageErrorf("%v", err)
	}
	if err := sc.CheckCustomAR(); err != nil && !f.variants {
		return sc, usageErrorf("%v", err)
	}
	if err := sc.CheckARNormFusion(); err != nil && !f.variants {
		return sc, usageErrorf("%v", err)
	}
	return f.priceOnBox(sc)
}

// priceOnBox sets what --perf-db decides for sc's box: the cost source
// of its GPU's tables (nil without the flag) and the MoE routing that
// defaults with them. The tables' balanced routing is the default so that
// the schedule and the rows pricing its routed experts state one routing;
// where no row prices them (another expert dtype, shape or EP degree than
// the tables measured, or no MoE table), the priors price them under the
// routing they take without tables. scenario ends with it; advise calls
// it on the baseline moved to another model (its transfer rows) and, via
// boxReprice, to another box (its box entries), so that such a row prices
// as 'predict --model' or 'predict --topo' does.
func (f *scenarioFlags) priceOnBox(sc sim.Scenario) (sim.Scenario, error) {
	if f.perfDB != "" && !f.changed("moe-routing") {
		sc.Build.Routing = perfdb.DefaultRouting
	}
	var err error
	if sc.Costs, err = f.costs(sc.Topo, sc.Build.Routing, sc.Options, sc.Arch.ModelType, func(src sim.CostSource) bool { return moePricedByTables(sc, src) }); err != nil {
		return sc, err
	}
	if sc.Costs != nil && !f.changed("moe-routing") && sc.Build.Routing != model.UniformRouting && !moePricedByTables(sc, sc.Costs) {
		sc.Build.Routing = model.UniformRouting
	}
	return sc, nil
}

// boxReprice is advise's advise.CatalogOptions.Reprice: priceOnBox on a
// scenario a box entry moved to another box, where --perf-db-transfer
// leaves a box with tables of its own to them (as plan does over several
// boxes). A box whose GPU the tables do not price (none measured on it,
// or none under the routing --moe-routing names) is priced from the
// priors under the routing they take without tables, as plan prices such
// a box in a sweep of several.
func (f *scenarioFlags) boxReprice(sc sim.Scenario) (sim.Scenario, error) {
	g := *f
	g.perfDBBoxes = true
	out, err := g.priceOnBox(sc)
	f.db = g.db
	if err != nil {
		sc.Costs = nil
		if !f.changed("moe-routing") {
			sc.Build.Routing = model.UniformRouting
		}
		return sc, nil
	}
	return out, nil
}

// checkGPUsUsed refuses --gpus N between the plan's GPU count and the
// box's: the plan runs on the box's first World() GPUs (sim.FirstRanks),
// which the first N hold as the whole box does, so the cut prices
// nothing and would only rename the box ("/6gpu" for a plan of 4),
// as a collective's option on a plan without that collective would be
// printed and priced nowhere (sim.Scenario.CheckCollectiveOptions).
// --gpus equal to the plan's GPU count (the box cut to the plan's own)
// or to the box's (all of it, as without --gpus) stands; a verb that
// prices the catalog's variants of the scenario on the box (advise,
// verdict) takes any.
func (f *scenarioFlags) checkGPUsUsed(sc sim.Scenario) error {
	w := sc.Plan.World()
	if f.variants || !f.changed("gpus") || f.gpus <= w {
		return nil
	}
	ref, err := topology.NewRef(f.topo, 0)
	if err != nil {
		return causeError("--topo", f.topo, err)
	}
	whole, err := ref.Resolve()
	if err != nil {
		return causeError("--topo", f.topo, err)
	}
	if n := whole.NumGPUs(); f.gpus < n {
		return flagError("--gpus", f.gpus, "plan %s runs on the first %d GPUs of %s and is priced the same on the first %d as on all %d: leave it out, or give --gpus %d", sc.Plan.Normalized(), w, whole.Name, f.gpus, n, w)
	}
	return nil
}

// moePricedByTables reports whether src prices the routed experts of sc's
// step from its MoE rows: it lays the step under the tables' default
// routing (perfdb.DefaultRouting) and asks src for the first MoE layer,
// as the prediction would. A model without routed experts has none to
// price; a step that does not build is the prediction's to report (true:
// nothing is decided here).
func moePricedByTables(sc sim.Scenario, src sim.CostSource) bool {
	if sc.Arch == nil || sc.Arch.RoutedExperts == 0 || sc.Topo == nil || sc.Topo.NumGPUs() == 0 {
		return false
	}
	b := sc.Build
	b.Routing = perfdb.DefaultRouting
	s, err := model.BuildWith(sc.Arch, sc.Plan, sc.Workload, b)
	if err != nil || len(s.Ranks) == 0 {
		return true
	}
	ops := s.Ranks[0]
	for i := range ops {
		if ops[i].Role.Module() == model.ModRoutedExperts && ops[i].MoE != nil {
			_, ok := src.OpCost(ops, s.Modules, i, sc.Topo.DeviceOf(0))
			return ok
		}
	}
	return false
}

// override returns the changes the flags the user set make to a recorded
// scenario (compare, calibrate), nil when none was set.
func (f *scenarioFlags) override() func(*sim.Scenario) error {
	var set []string
	f.visitChanged(func(fl *pflag.Flag) {
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
		if f.changed("dense-dsa") {
			if err := f.checkDenseDSA(sc.Arch); err != nil {
				return err
			}
			sc.DenseDSAChosen = true
		}
		if err := model.Validate(sc.Arch, sc.Plan, sc.Workload, sc.Build); err != nil {
			return f.specFlagError(buildFlagError(sc.Arch, err))
		}
		if err := f.checkDispatch(sc.Arch, sc.Plan); err != nil {
			return err
		}
		if err := f.checkAccept(*sc); err != nil {
			return err
		}
		// A kernel or option the scenario's engine does not have would be
		// named as an override and priced as nothing: refused, as
		// scenario refuses it.
		if err := sc.CheckEngine(); err != nil {
			return usageErrorf("%v", err)
		}
		if err := sc.CheckOverlap(); err != nil {
			return usageErrorf("%v", err)
		}
		return nil
	}
}

// scenarioFlagNames are the flags Bind registers besides the
// option flags.
var scenarioFlagNames = []string{"model", "tp", "ep", "dp", "dcp", "phase", "batch", "context", "mtp", "kv-dtype",
	"dense-dsa", "moe-dispatch", "dispatch-dtype", "moe-routing", "topo", "gpus", "perf-db", "perf-db-system", "perf-db-transfer"}

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
	for _, n := range specFlagNames {
		if n == name {
			return true
		}
	}
	return false
}

// givenArgs are the scenario flags the command line set, each as one
// shell word "--name=value" ("--name" for a bool set true), in the
// flags' order: the line that gives another verb the same scenario
// (advise's 'tpscope predict' lines, advise.Input.BaseArgs).
func (f *scenarioFlags) givenArgs() []string {
	var out []string
	f.visitChanged(func(fl *pflag.Flag) {
		if !f.isScenarioFlag(fl.Name) {
			return
		}
		v := fl.Value.String()
		switch {
		case fl.Value.Type() == "bool" && v == "true":
			out = append(out, "--"+fl.Name)
		default:
			out = append(out, "--"+fl.Name+"="+shellWord(v))
		}
	})
	return out
}

// shellWord is v as one word of a POSIX shell: bare where every byte is
// one a shell takes literally, else single-quoted.
func shellWord(v string) string {
	if v != "" && strings.IndexFunc(v, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r))
	}) < 0 {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
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
		// --mtp N is --spec mtp --spec-tokens N (specMethodFlag): over a
		// recorded scenario of another method it names MTP, as it does
		// for predict, not that method at N tokens.
		if !f.changed("spec") {
			sc.Build.Spec = model.Spec{}
		}
		sc.Workload.SpecTokens = f.mtp
	case "spec", "spec-tokens", "spec-topk", "spec-steps", "draft-model", "draft-tp", "spec-accept-file":
		err = f.applySpec(name, sc)
	case "kv-dtype":
		var w model.Workload
		if w, err = f.workload(); err == nil {
			// Named now: no longer the engine's choice.
			sc.Workload.KVDtype, sc.KVDefault = w.KVDtype, nil
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
		if name == "gpus" && !f.changed("topo") {
			err = f.subsetRecorded(sc)
		} else {
			sc.Topo, sc.TopoRef, err = f.box()
		}
		if err == nil && sc.Costs != nil {
			sc.Costs, err = f.costs(sc.Topo, sc.Build.Routing, sc.Options, sc.Arch.ModelType, nil)
		}
	case "perf-db", "perf-db-system", "perf-db-transfer":
		// A recorded scenario keeps the routing it ran under; tables
		// without rows under it are refused (costs), not silently
		// re-routed.
		sc.Costs, err = f.costs(sc.Topo, sc.Build.Routing, sc.Options, sc.Arch.ModelType, nil)
	default:
		for _, of := range sim.OptionFields() {
			if of.Name == name {
				if _, err = f.options(); err == nil {
					err = of.Set(&sc.Options, optionText(of, &f.opts))
				}
			}
		}
	}
	return err
}

// subsetRecorded is --gpus without --topo over a recorded scenario: the
// first N GPUs of the box the scenario records (its reference says the
// subset), not of the default box, which no trace ran on.
func (f *scenarioFlags) subsetRecorded(sc *sim.Scenario) error {
	if f.gpus < 0 {
		return flagError("--gpus", f.gpus, "want 0 (all) or more")
	}
	if f.gpus == 0 || sc.Topo == nil {
		return nil // all of the recorded box, as recorded
	}
	if f.gpus != len(sc.Topo.GPUs) {
		t, err := sc.Topo.Subset(f.gpus)
		if err != nil {
			return causeError("--gpus", f.gpus, err)
		}
		sc.Topo = t
	}
	if sc.TopoRef.IsZero() {
		sc.TopoRef = topology.Ref{Name: sc.Topo.Name}
	}
	sc.TopoRef.GPUs = f.gpus
	return nil
}

// graphSizesText is --graph-sizes as the option's codec writes it.
func graphSizesText(o sim.Options) string {
	for _, of := range sim.OptionFields() {
		if of.Name == "graph-sizes" {
			return of.Get(&o)
		}
	}
	return ""
}

// optionText is of's value in o as its Set reads it back: the codec
// writes a field at its zero value (false, 0) as nothing, which the bool
// and number parsers refuse, so that an override to it (--cuda-graphs=false
// over a recorded graph run) would fail.
func optionText(of sim.OptionField, o *sim.Options) string {
	v := of.Get(o)
	if v != "" {
		return v
	}
	switch of.Kind {
	case sim.OptionBool:
		return "false"
	case sim.OptionInt, sim.OptionCount, sim.OptionFloat:
		return "0"
	}
	return v
}

// planFieldFlags are the flags that set the fields of the builder's
// errors (*model.PlanError: plan, workload and build options).
var planFieldFlags = map[string]string{"tp": "--tp", "dp": "--dp", "dcp": "--dcp", "ep": "--ep", "phase": "--phase", "batch": "--batch",
	"context": "--context", "spec_tokens": "--mtp", "kv_dtype": "--kv-dtype",
	"moe_dispatch": "--moe-dispatch", "dispatch_dtype": "--dispatch-dtype", "moe_routing": "--moe-routing"}

// planFlagError is the usage error of a plan or workload the model
// refuses: a *model.PlanError names its field, the error the flag that
// sets it. of, when set, is the model the plan's fields were judged
// against.
func planFlagError(of string, err error) error {
	ue := &usageError{Of: of, Want: err.Error(), Err: err}
	var pe *model.PlanError
	if errors.As(err, &pe) && planFieldFlags[pe.Field] != "" {
		ue.Flag, ue.Value, ue.Want = planFieldFlags[pe.Field], pe.Value, "want "+pe.Want
	}
	return ue
}

// buildFlagError is planFlagError of a scenario the builder refuses
// (model.Validate): a plan's field after the model it does not fit.
func buildFlagError(a *model.Arch, err error) error {
	var pe *model.PlanError
	if errors.As(err, &pe) && pe.What == "plan" {
		return planFlagError(a.Name, err)
	}
	return planFlagError("", err)
}

// resolveModel finds a preset or loads a config for flag (--model,
// advise --transfer); a name that is neither, a config file that is not
// there or cannot be read, and one that does not parse (the message names
// its file and field) are usage errors naming the flag, as a --topo file
// is: a scenario's input, refused before any work. (model load's argument
// is the verb's work, a failure.)
func resolveModel(flag, name string) (*model.Arch, error) {
	if err := checkModelPath(flag, name); err != nil {
		return nil, err
	}
	a, err := model.Resolve(name)
	if err != nil {
		return nil, causeError(flag, nil, err)
	}
	return a, nil
}

// inputFiles are the files the scenario is read from, as the flags name
// them: a --topo, --model or --draft-model file (a model directory's
// config.json) and --spec-accept-file; presets and names are none.
func (f *scenarioFlags) inputFiles() []input {
	var in []input
	if st, err := os.Stat(f.topo); err == nil && !st.IsDir() {
		in = append(in, input{"--topo", f.topo})
	}
	for _, m := range []input{{"--model", f.model}, {"--draft-model", f.draftModel}} {
		if m.path == "" || slices.Contains(model.PresetNames(), m.path) {
			continue
		}
		st, err := os.Stat(m.path)
		switch {
		case err != nil:
		case st.IsDir():
			in = append(in, input{m.flag, filepath.Join(m.path, "config.json")})
		default:
			in = append(in, m)
		}
	}
	if f.specAcceptFile != "" {
		in = append(in, input{"--spec-accept-file", f.specAcceptFile})
	}
	return in
}

// checkModelPath refuses a model path (not a preset name) whose config
// file is not there or cannot be read: path itself, or a directory's
// config.json. flag names where the path came from ("" for an argument).
// A value that reads as a path (looksLikePath) and is not there is that
// missing file, not an unknown preset or drafter: the list of names
// would not say what went wrong; where it is a preset's Hugging Face id,
// the line names that preset.
func checkModelPath(flag, path string) error {
	if slices.Contains(model.PresetNames(), path) {
		return nil
	}
	st, err := os.Stat(path)
	if err != nil {
		if looksLikePath(path) {
			// A preset's checkpoint named by its Hugging Face id (as a
			// benchmark's results name it, model.PresetOf) is that
			// preset's config: the line names the preset to pass, since
			// tpscope reads a config and downloads nothing.
			if p, ok := model.PresetOf(path); ok && flag != "" {
				return flagError(flag, path, "%s; it is the Hugging Face id of preset %s's checkpoint: pass %s %s (or the checkpoint's config.json)", pathReason(err), p, flag, p)
			}
			// Likewise a built-in drafter's checkpoint, which only
			// --draft-model takes (a drafter is no --model preset).
			if d, ok := model.DrafterOf(path); ok && flag == "--draft-model" {
				return flagError(flag, path, "%s; it is the Hugging Face id of built-in drafter %s's checkpoint: pass %s %s (or the checkpoint's config.json)", pathReason(err), d, flag, d)
			}
			return flagError(flag, path, "%s, want a config.json (a Hugging Face model directory or its config file)", pathReason(err))
		}
		return nil // a name: model.Resolve says what it takes
	}
	cfg := path
	if st.IsDir() {
		cfg = filepath.Join(path, "config.json")
	}
	return checkInputFile(flag, cfg, "a config.json (a Hugging Face model directory or its config file)")
}

// looksLikePath reports whether a --model or --draft-model value names a
// file rather than a preset or built-in drafter: it has a path separator
// or ends in .json, which no name of theirs does.
func looksLikePath(v string) bool {
	return strings.ContainsRune(v, '/') || strings.ContainsRune(v, filepath.Separator) || strings.HasSuffix(strings.ToLower(v), ".json")
}
