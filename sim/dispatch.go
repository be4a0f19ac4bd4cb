package sim

import (
	"fmt"
	"strings"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

// MoEDispatch is how a scenario's tokens reach the routed experts under DP
// attention + EP, and why that way: the --moe-dispatch chosen, or what
// the scenario's engine runs by default on its box (engine.DispatchFacts:
// vLLM's and SGLang's all-gather + reduce-scatter, TensorRT-LLM's NVLink
// all-to-all where NVLink joins the GPUs).
type MoEDispatch struct {
	// Kind is what the schedule prices; Default what the engine runs
	// when its setting is left alone (Kind, unless Chosen otherwise).
	Kind, Default engprof.Dispatch
	// Chosen: by --moe-dispatch (Scenario.Build.MoEDispatch set).
	Chosen bool
	// NVLink: NVLink joins every GPU of the EP group, which an engine's
	// default may depend on (DispatchFacts.NVLinkDefault).
	NVLink bool
	prof   *engprof.Profile
}

// MoEDispatchOf is how sc's tokens reach the routed experts: its chosen
// --moe-dispatch, else its engine's default on the plan's GPUs of its
// box. ok false when sc's plan dispatches none (no DP attention, or no
// routed experts); the error names an engine without a profile or a
// dispatch that does not parse.
func MoEDispatchOf(sc Scenario) (d MoEDispatch, ok bool, err error) {
	if !sc.Plan.DispatchesMoE(sc.Arch) {
		return d, false, nil
	}
	prof, err := engprof.Lookup(sc.Options.Engine)
	if err != nil {
		return d, false, err
	}
	d, err = dispatchOn(prof, sc.Topo, sc.Plan, sc.Build.MoEDispatch)
	return d, err == nil, err
}

// dispatchOn is MoEDispatchOf on engine prof: chosen is the scenario's
// --moe-dispatch ("" for the engine's default).
func dispatchOn(prof *engprof.Profile, t *topology.Topology, plan model.Plan, chosen string) (MoEDispatch, error) {
	d := MoEDispatch{prof: prof, NVLink: NVLinkAmong(t, plan.World()), Chosen: chosen != ""}
	d.Default = prof.Dispatch.DefaultOn(d.NVLink)
	d.Kind = d.Default
	if d.Chosen {
		k, err := engprof.ParseDispatch(chosen)
		if err != nil {
			return d, err
		}
		d.Kind = k
	}
	return d, nil
}

// NVLinkAmong reports whether NVLink joins every pair of t's first n GPUs
// (false for a box of fewer): the GPUs of a plan's group of n (its TP
// group, rank 0's, for the TP all-reduces; its world for the MoE
// dispatch), since the schedule lays each group over consecutive ranks
// from GPU 0 (FirstRanks). What runs on a group is the group's links, not
// the box's: a TP-2 plan on the first pair of a box whose pairs an NVLink
// bridge joins and PCIe joins to each other is an NVLink group. The rule
// the predictor's caveats and advise's applicability checks share.
func NVLinkAmong(t *topology.Topology, n int) bool {
	return t != nil && n > 0 && n <= t.NumGPUs() && t.AllNVLink(FirstRanks(n))
}

// NVLSAmong reports whether NCCL can run NVLS (NVLink SHARP) over the
// first n GPUs of t (MulticastJoined over FirstRanks(n)).
// ncclenv.Settings.Algorithms takes it.
func NVLSAmong(t *topology.Topology, n int) bool {
	return t != nil && n >= 2 && n <= t.NumGPUs() && MulticastJoined(t, FirstRanks(n))
}

// MulticastJoined reports whether the GPUs of group share an NVSwitch
// fabric that maps multicast memory, which NCCL's NVLS and torch's
// multimem all-reduce run on: an NVSwitch of Hopper or later (NCCL
// src/transport/nvls.cc ncclNvlsInit reads
// CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED; an A100's NVSwitch, a bridge
// or PCIe has none).
func MulticastJoined(t *topology.Topology, group []int) bool {
	if t == nil || len(group) < 2 || !t.NVSwitchJoined(group) {
		return false
	}
	major, _ := t.DeviceOf(group[0]).CCVersion()
	return major >= 9
}

// String says what the engine runs for people: the kind, and by which
// of its settings (its default, or what --moe-dispatch chose and the
// engine's own names for it), for the engine line.
func (d MoEDispatch) String() string {
	if d.prof == nil {
		return d.Kind.Words()
	}
	f := &d.prof.Dispatch
	names := f.Names(d.Kind)
	switch {
	case !d.Chosen:
		return fmt.Sprintf("%s (its default%s: %s %s)", d.Kind.Words(), d.nvlinkWhere(), f.Option, names[0])
	case d.Kind == d.Default:
		return fmt.Sprintf("%s (--moe-dispatch, its default%s too: %s %s)", d.Kind.Words(), d.nvlinkWhere(), f.Option, names[0])
	case len(names) == 0:
		return fmt.Sprintf("%s (--moe-dispatch; %s has none: its default%s is %s)", d.Kind.Words(), d.prof.Name(), d.nvlinkWhere(), d.Default.Words())
	}
	return fmt.Sprintf("%s (--moe-dispatch: %s %s; its default%s is %s)", d.Kind.Words(), f.Option, strings.Join(names, " | "), d.nvlinkWhere(), d.Default.Words())
}

// EngineName is the engine@version the dispatch is stated for ("" for
// the zero value).
func (d MoEDispatch) EngineName() string {
	if d.prof == nil {
		return ""
	}
	return d.prof.Name()
}

// Setting is what the engine needs set to run the dispatch priced: ""
// when it is its default there, else its setting and its own names for
// the kind ("--all2all-backend deepep_high_throughput | ...").
func (d MoEDispatch) Setting() string {
	if d.prof == nil {
		return ""
	}
	names := d.prof.Dispatch.Names(d.Kind)
	if d.Kind == d.Default || len(names) == 0 {
		return ""
	}
	return d.prof.Dispatch.Option + " " + strings.Join(names, " | ")
}

// nvlinkWhere qualifies a default that holds only where NVLink joins the
// GPUs, or only where it does not.
func (d MoEDispatch) nvlinkWhere() string {
	f := &d.prof.Dispatch
	switch {
	case f.NVLinkDefault == engprof.DispatchUnknown || f.NVLinkDefault == f.Default:
		return ""
	case d.NVLink:
		return " where NVLink joins the GPUs"
	}
	return " without NVLink between the GPUs"
}

// withDispatch returns build options o of a schedule of arch under plan
// with the MoE dispatch filled: one the scenario chose stays; unchosen
// (""), a plan that dispatches takes the engine's default on its GPUs
// (defaultDispatch), and its payload dtype the engine's for that kind
// (dispatchPayload). Every schedule sim prices or hands to a run is
// built from options it returns (scheduleWith, IterationCoster).
func (p *Predictor) withDispatch(o model.BuildOptions, a *model.Arch, plan model.Plan) (model.BuildOptions, error) {
	if !plan.DispatchesMoE(a) || (o.MoEDispatch != "" && o.DispatchDtype != "") {
		return o, nil
	}
	prof, err := p.profile()
	if err != nil {
		return o, err
	}
	if o.MoEDispatch == "" {
		o.MoEDispatch = prof.Dispatch.DefaultOn(NVLinkAmong(p.topo, plan.World())).String()
	}
	if o.DispatchDtype == "" {
		o.DispatchDtype = p.dispatchPayload(prof, a, plan, o.MoEDispatch)
	}
	return o, nil
}

// profile is the engine profile the Predictor prices with (its options'
// engine for a bare Predictor that only builds schedules).
func (p *Predictor) profile() (*engprof.Profile, error) {
	if p.cm != nil && p.cm.engineKernels.prof != nil {
		return p.cm.engineKernels.prof, nil
	}
	return profileOf(&p.opts)
}

// dispatchPayload is the dtype engine prof moves arch's tokens in under
// dispatch kind for plan: for its all-gather, the format its MoE kernel
// for the routed experts under plan's expert parallelism takes them in
// (engprof.DispatchFacts.GatheredAs: vLLM quantizes them before the
// gather); bf16 otherwise.
func (p *Predictor) dispatchPayload(prof *engprof.Profile, a *model.Arch, plan model.Plan, kind string) model.Dtype {
	if k, err := engprof.ParseDispatch(kind); err != nil || k != engprof.DispatchAllGather {
		return model.BF16
	}
	d := a.Quant.Dtype(model.CompRoutedExperts)
	f, err := engprof.ParseWeightFormat(string(d))
	if err != nil {
		return model.BF16
	}
	k := &engineKernels{prof: prof, arch: archOf(p.topo), moeOverride: p.opts.MoEKernel}
	if p.cm != nil && p.cm.engineKernels.prof == prof {
		k = &p.cm.engineKernels
	}
	k.setEP(plan)
	pd, err := model.ParseDtype(prof.Dispatch.GatheredAs(k.moeKernel(d), f).String())
	if err != nil {
		return model.BF16
	}
	return pd
}
