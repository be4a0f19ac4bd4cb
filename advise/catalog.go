package advise

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/internal/units"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// The optimization catalog (DESIGN.md "Optimizations are data").
//
// An Entry is a named transformation of a Scenario (plan, workload, sim
// Options, topology): Apply turns the optimization on, Revert turns it off,
// Enabled says whether a Scenario already has it. What an entry changes is
// not written down here: advise measures it by predicting both Configs and
// diffing the predictions (bytes, collectives, launches; see Footprint).
// Each entry also says whether it applies on the Scenario's box, and why
// (Check), and how the executor or the serving engine would run it (How).
//
// The facts behind the applicability rules are cited in each entry: the
// serving stack from ../shared/reference/serving-facts.md, NCCL from
// nccl-model.md, the devices from hardware.md. Rules marked "assumption"
// are readings that were not checked against a source.

// Status is whether an optimization can run on a Scenario's box.
type Status string

const (
	// Applies: runs with stock software on this box.
	Applies Status = "applies"
	// Conditional: runs only given a named condition (a newer engine
	// build, an out-of-tree kernel, another box).
	Conditional Status = "conditional"
	// NotApplicable: cannot run here (the reason says why).
	NotApplicable Status = "no"
)

// Applicability is an entry's verdict for one Scenario, with its reason.
// Headlines (advise's "worth building next") quote Needs and Caution, not
// Reason, so a one-line answer keeps the qualifiers its row has.
type Applicability struct {
	Status Status `json:"status"`
	Reason string `json:"reason"`
	// Needs is the condition of a Conditional entry in a few words ("an
	// out-of-tree one-shot PCIe kernel"), set where the reason is written.
	Needs string `json:"needs,omitempty"`
	// UpperBound: public evidence says the entry may not pay on this box
	// for a cause the model does not price (Caution, in a few words), so
	// its predicted gain is at most what it gives. Set where the evidence
	// is cited, never inferred from Reason's text.
	UpperBound bool   `json:"upper_bound,omitempty"`
	Caution    string `json:"caution,omitempty"`
}

// How says how to run an optimization: environment variables, the
// serving engine's arguments (Engine, spelled as EngineName's profile or
// vLLM's documentation spells them), or, where no flag of that engine is
// known, the setting to make in it (Setting), and the tpscope command
// line that runs or predicts it (Exec: the arguments after "tpscope", e.g.
// "run --cuda-graphs"; never an internal API name).
type How struct {
	Env        []string `json:"env,omitempty"`
	EngineName string   `json:"engine_name,omitempty"`
	Engine     []string `json:"engine,omitempty"`
	Setting    string   `json:"setting,omitempty"`
	Exec       string   `json:"exec,omitempty"`
}

// String is how to run the entry in one line: "env K=V ...; vllm@0.24
// --flag ...; tpscope run ...", "" when nothing is said.
func (h How) String() string {
	var parts []string
	if len(h.Env) > 0 {
		parts = append(parts, "env "+strings.Join(h.Env, " "))
	}
	name := h.EngineName
	if name == "" {
		name = "the engine"
	}
	if len(h.Engine) > 0 {
		parts = append(parts, name+" "+strings.Join(h.Engine, " "))
	}
	if h.Setting != "" {
		parts = append(parts, "set "+h.Setting+" in "+name)
	}
	if h.Exec != "" {
		parts = append(parts, "tpscope "+h.Exec)
	}
	return strings.Join(parts, "; ")
}

// Entry is one optimization of the catalog.
type Entry struct {
	Name  string `json:"name"`
	Title string `json:"title"`
	// Kind groups entries: "runtime" (launch), "nccl", "collective"
	// (all-reduce kernels), "kv", "parallelism", "speculative", "box".
	Kind string `json:"kind"`

	Enabled func(c sim.Scenario) bool                  `json:"-"`
	Apply   func(c sim.Scenario) (sim.Scenario, error) `json:"-"`
	Revert  func(c sim.Scenario) (sim.Scenario, error) `json:"-"`
	Check   func(c sim.Scenario) Applicability         `json:"-"`
	HowTo   func(c sim.Scenario) How                   `json:"-"`
	// Sweep: advise sweeps batch x context for this entry.
	Sweep bool `json:"-"`
}

// CatalogOptions parameterize the entries that need an input.
type CatalogOptions struct {
	// MTPTokens is the number of speculative tokens of the MTP entry
	// (default 1: DeepSeek-V3 and GLM-5 ship one MTP layer,
	// serving-facts.md).
	MTPTokens int
	// MTPAcceptFrac is the acceptance probability of one MTP token
	// (0: the scenario's acceptance, or the method's default).
	MTPAcceptFrac float64
	// SpecTokens is the draft tokens of the other speculative entries
	// (default DefaultSpecTokens; catalog_spec.go).
	SpecTokens int
	// Topologies are the boxes the "box" entries move to, each as
	// topology.Resolve takes it (a preset, a box description or a
	// topology JSON file, as --topo); default rtxpro6000-switch and
	// h200-nvswitch.
	Topologies []string
	// Reprice re-derives, on a scenario a box entry moved to another
	// box, the cost source and the MoE routing the scenario's flags left
	// to the box (--perf-db's tables of the new GPU and the routing they
	// default to), as 'predict --topo' (the row's how) derives them. Nil:
	// tables measured on the old box's GPU are dropped and the moved
	// scenario is priced from the priors.
	Reprice func(sim.Scenario) (sim.Scenario, error)
}

// DefaultCatalogTopologies are the boxes the "box" entries move to.
var DefaultCatalogTopologies = []string{"rtxpro6000-switch", "h200-nvswitch"}

// Stock returns c as a user would first run it on the same engine: eager
// execution, NCCL with its defaults (no NCCL_PROTO, NCCL_P2P_LEVEL=PXB, P2P
// on), the engine's own custom all-reduce rule, no fusion, no overlap.
// Plan, workload, box, engine (and its MoE kernel), memory utilization
// and scheduler limits (which size vLLM's KV pool), attention backend and
// the harness's timing events are kept: stock is that engine's defaults,
// so the baseline's gain over it is its settings' and never a change of
// engine or of the pool it was launched with.
func Stock(c sim.Scenario) sim.Scenario {
	o := sim.Options{MTPAcceptFrac: c.Options.MTPAcceptFrac, SpecAccept: c.Options.SpecAccept, GPUMemUtilFrac: c.Options.GPUMemUtilFrac,
		MaxNumBatchedTokens: c.Options.MaxNumBatchedTokens, MaxNumSeqs: c.Options.MaxNumSeqs,
		AttentionBackend: c.Options.AttentionBackend, Engine: c.Options.Engine, MoEKernel: c.Options.MoEKernel,
		TimingEventsPerOp: c.Options.TimingEventsPerOp}
	c.Options = o
	return c
}

// withKV is c with KV dtype d: the engine's default (c.KVDefault) no
// longer, unless it is d.
func withKV(c sim.Scenario, d model.Dtype) sim.Scenario {
	c.Workload.KVDtype = d
	if c.KVDefault != nil && c.KVDefault.Dtype != d {
		c.KVDefault = nil
	}
	return c
}

// Catalog returns the optimization entries, in a fixed order.
func Catalog(o CatalogOptions) []Entry {
	if o.MTPTokens <= 0 {
		o.MTPTokens = 1
	}
	if o.Topologies == nil {
		o.Topologies = DefaultCatalogTopologies
	}
	opt := func(set func(*sim.Options)) func(sim.Scenario) (sim.Scenario, error) {
		return func(c sim.Scenario) (sim.Scenario, error) {
			set(&c.Options)
			return c, nil
		}
	}
	entries := []Entry{
		{
			Name: "cuda-graphs", Title: "CUDA graphs for decode", Kind: "runtime",
			Enabled: func(c sim.Scenario) bool { return c.Options.CUDAGraphs },
			Apply:   opt(func(o *sim.Options) { o.CUDAGraphs = true }),
			Revert:  opt(func(o *sim.Options) { o.CUDAGraphs = false }),
			Check: func(c sim.Scenario) Applicability {
				p := profileOf(c)
				if p == nil {
					return Applicability{Status: Applies, Reason: "engine without a profile: its capture sizes are unknown"}
				}
				// The default capture on the scenario's GPU at its size
				// (SGLang's stops at the cuda_graph_max_bs of both).
				c.Options.GraphSizes = nil
				sz, err := c.CaptureSizes()
				if err != nil {
					return Applicability{Status: Applies, Reason: p.Name() + "'s capture sizes on this box are unknown: " + err.Error()}
				}
				if len(sz) == 0 {
					return Applicability{Status: Applies, Reason: p.Name() + "'s profile lists no capture sizes"}
				}
				mode := p.Graphs.Mode
				if why := c.PiecewiseGraphs(); why != "" {
					// The mode the step is priced under, not the
					// engine's default where this scenario overrides it.
					mode = "piecewise, attention eager between the pieces: " + why
				}
				r := fmt.Sprintf("%s captures decode graphs (%s) for batches up to %d tokens by default (its profile, for this GPU and TP size); larger batches run eagerly", p.Name(), mode, sz[len(sz)-1])
				if p.Graphs.Unpadded {
					// No padding: a batch between captured sizes does not
					// replay the next one up.
					r += ", as does any batch that is not a captured size"
				}
				return Applicability{Status: Applies, Reason: r}
			},
			HowTo: func(c sim.Scenario) How {
				h := engineHow(c, "no --enforce-eager (graphs are vLLM's default)", "CUDA graphs on (its default)")
				h.Exec = measureExec(c, "--cuda-graphs") + " (captures one step, replays it)"
				return h
			},
			Sweep: true,
		},
		{
			Name: "nccl-proto-ll", Title: "NCCL_PROTO=LL", Kind: "nccl",
			Enabled: func(c sim.Scenario) bool { return strings.EqualFold(c.Options.NCCL.Proto, "LL") },
			Apply:   opt(func(o *sim.Options) { o.NCCL.Proto = "LL" }),
			Revert:  opt(func(o *sim.Options) { o.NCCL.Proto = "" }),
			Check: func(c sim.Scenario) Applicability {
				return Applicability{Status: Applies, Reason: "environment only; LL has the lowest latency and half the wire efficiency (nccl-model.md)"}
			},
			HowTo: func(sim.Scenario) How { return How{Env: []string{"NCCL_PROTO=LL"}} },
			Sweep: true,
		},
		{
			Name: "nccl-p2p-sys", Title: "NCCL_P2P_LEVEL=SYS", Kind: "nccl",
			Enabled: func(c sim.Scenario) bool {
				return strings.EqualFold(c.Options.NCCL.P2PLevel, "SYS") && !c.Options.NCCL.P2PDisable
			},
			Apply:  opt(func(o *sim.Options) { o.NCCL.P2PLevel, o.NCCL.P2PDisable = "SYS", false }),
			Revert: opt(func(o *sim.Options) { o.NCCL.P2PLevel = "" }),
			Check:  checkP2PSys,
			HowTo:  func(sim.Scenario) How { return How{Env: []string{"NCCL_P2P_LEVEL=SYS"}} },
			Sweep:  true,
		},
		{
			Name: "nccl-min-channels-8", Title: "NCCL_MIN_NCHANNELS=8", Kind: "nccl",
			Enabled: func(c sim.Scenario) bool { return c.Options.NCCL.MinChannels >= minChannelsEntry },
			Apply:   opt(func(o *sim.Options) { o.NCCL.MinChannels = minChannelsEntry }),
			Revert:  opt(func(o *sim.Options) { o.NCCL.MinChannels = 0 }),
			Check:   checkMinChannels,
			HowTo: func(sim.Scenario) How {
				return How{Env: []string{fmt.Sprintf("NCCL_MIN_NCHANNELS=%d", minChannelsEntry)}}
			},
			Sweep: true,
		},
		{
			Name: "nccl-p2p-disable", Title: "NCCL_P2P_DISABLE=1 (reference: every hop through host memory)", Kind: "nccl",
			Enabled: func(c sim.Scenario) bool { return c.Options.NCCL.P2PDisable },
			// P2P off at every level leaves no level to set (predict
			// refuses both), as nccl-p2p-sys clears the disable.
			Apply:  opt(func(o *sim.Options) { o.NCCL.P2PDisable, o.NCCL.P2PLevel = true, "" }),
			Revert: opt(func(o *sim.Options) { o.NCCL.P2PDisable = false }),
			Check: func(c sim.Scenario) Applicability {
				return Applicability{Status: Applies, Reason: "a setting to avoid: shows what P2P is worth (hardware.md: a host bounce costs about 14 us)"}
			},
			HowTo: func(sim.Scenario) How { return How{Env: []string{"NCCL_P2P_DISABLE=1"}} },
		},
		{
			Name: "fp8-kv", Title: "FP8 KV cache", Kind: "kv",
			Enabled: func(c sim.Scenario) bool { return c.Workload.KVDtypeFor(c.Arch) == model.FP8 },
			Apply: func(c sim.Scenario) (sim.Scenario, error) {
				return withKV(c, model.FP8), nil
			},
			Revert: func(c sim.Scenario) (sim.Scenario, error) {
				return withKV(c, model.BF16), nil
			},
			Check: checkFP8KV,
			HowTo: func(c sim.Scenario) How {
				h := engineHow(c, "--kv-cache-dtype fp8", "an FP8 KV cache")
				h.Exec = measureExec(c, "--kv-dtype fp8")
				return h
			},
			Sweep: true,
		},
		{
			Name: "expert-parallel", Title: "EP instead of TP for the experts", Kind: "parallelism",
			Enabled: func(c sim.Scenario) bool { return c.Plan.EP && c.Plan.Normalized().DP == 1 },
			Apply: func(c sim.Scenario) (sim.Scenario, error) {
				if c.Plan.Normalized().DP > 1 {
					return c, fmt.Errorf("plan %s already runs DP attention with EP", c.Plan.Normalized())
				}
				c.Plan.EP = true
				return c, c.Plan.Validate(c.Arch)
			},
			Revert: func(c sim.Scenario) (sim.Scenario, error) {
				c.Plan.EP = false
				return c, c.Plan.Validate(c.Arch)
			},
			Check: func(c sim.Scenario) Applicability {
				if c.Plan.Normalized().DP > 1 {
					return Applicability{Status: NotApplicable, Reason: "the plan already runs DP attention, which implies EP"}
				}
				p := c.Plan
				p.EP = true
				if err := p.Validate(c.Arch); err != nil {
					return Applicability{Status: NotApplicable, Reason: err.Error()}
				}
				return Applicability{Status: Applies, Reason: fmt.Sprintf("each rank holds %d whole experts; still one all-reduce per MoE layer, no all-to-all (serving-facts.md)", c.Arch.RoutedExperts/p.World())}
			},
			HowTo: func(c sim.Scenario) How {
				return engineHow(c, "--enable-expert-parallel", "expert parallelism for the MoE layers")
			},
			Sweep: true,
		},
		dpEntry("dp-attn-ep", "DP attention + EP (TP 1)", 1),
		dpEntry("dp-attn-ep-tp2", "DP attention + EP (TP 2 per DP group)", 2),
		{
			Name: "oneshot-ar", Title: "one-shot P2P all-reduce", Kind: "collective",
			Enabled: func(c sim.Scenario) bool { return c.Options.CustomAR == sim.CustomAROneShot },
			Apply:   opt(func(o *sim.Options) { o.CustomAR = sim.CustomAROneShot }),
			Revert:  opt(func(o *sim.Options) { o.CustomAR = sim.CustomARAuto }),
			Check:   checkOneShot,
			HowTo: func(c sim.Scenario) How {
				if p := profileOf(c); p != nil && tpNVLink(c) {
					if ok, _ := p.AllReduce.Runs(c.Plan.Normalized().TP, true, 0); ok {
						return How{EngineName: p.Name(), Engine: []string{"default (its custom all-reduce)"}}
					}
				}
				return How{Exec: "predict --custom-ar oneshot (the executor has no one-shot kernel: on PCIe it is a custom kernel over CUDA IPC P2P buffers, out of tree)"}
			},
			Sweep: true,
		},
		{
			Name: "ar-norm-fusion", Title: "all-reduce + RMSNorm fusion", Kind: "collective",
			// In the baseline where the flag turns it on or the engine
			// fuses by default (unless the flag turned that off); the
			// revert turns it off, which an engine fusing by default
			// does by its profile's switch (CheckEngine refuses it
			// without one, and the row says why).
			Enabled: func(c sim.Scenario) bool {
				switch c.Options.ARNormFusion {
				case sim.ToggleOn:
					return true
				case sim.ToggleOff:
					return false
				}
				p := profileOf(c)
				return p != nil && engineFusesARNorm(c, p)
			},
			Apply:  opt(func(o *sim.Options) { o.ARNormFusion = sim.ToggleOn }),
			Revert: opt(func(o *sim.Options) { o.ARNormFusion = sim.ToggleOff }),
			Check:  checkARNorm,
			HowTo: func(c sim.Scenario) How {
				if p := profileOf(c); p != nil && engineFusesARNorm(c, p) {
					how := "default (its all-reduce + RMSNorm fusion)"
					if off, _ := p.FusionOff(engprof.FuseAllReduceRMSNorm, fusionUse(c)); off != "" {
						how += "; " + off + " turns it off"
					}
					return How{EngineName: p.Name(), Engine: []string{how}}
				}
				return How{Exec: "predict --ar-norm-fusion (the executor has no fused kernel: an all-reduce that adds the residual and applies RMSNorm on the reduced buffer)"}
			},
			Sweep: true,
		},
	}
	entries = append(entries, specEntries(o)...)
	for _, name := range o.Topologies {
		entries = append(entries, topoEntry(name, o.Reprice))
	}
	return entries
}

// dpEntry is data-parallel attention with expert parallelism over the same
// GPUs: DP groups of tp ranks each serve their own sequences, experts
// spread over all ranks, tokens move to them by the scenario's
// --moe-dispatch, else as its engine moves them by default
// (sim.MoEDispatchOf: vLLM and SGLang all-gather and reduce-scatter,
// TensorRT-LLM runs its NVLink all-to-all where NVLink joins the GPUs).
func dpEntry(name, title string, tp int) Entry {
	to := func(c sim.Scenario) model.Plan {
		w := c.Plan.World()
		return model.Plan{TP: tp, DP: w / tp, EP: true}
	}
	return Entry{
		Name: name, Title: title, Kind: "parallelism",
		Enabled: func(c sim.Scenario) bool {
			p := c.Plan.Normalized()
			return p.DP > 1 && p.TP == tp
		},
		Apply: func(c sim.Scenario) (sim.Scenario, error) {
			if c.Plan.World()%tp != 0 || c.Plan.World()/tp < 2 {
				return c, fmt.Errorf("plan %s: %d GPUs do not form DP groups of TP %d", c.Plan.Normalized(), c.Plan.World(), tp)
			}
			c.Plan = to(c)
			return c, c.Plan.Validate(c.Arch)
		},
		Revert: func(c sim.Scenario) (sim.Scenario, error) {
			c.Plan = model.Plan{TP: c.Plan.World()}
			return c, c.Plan.Validate(c.Arch)
		},
		Check: func(c sim.Scenario) Applicability {
			if c.Plan.World()%tp != 0 || c.Plan.World()/tp < 2 {
				return Applicability{Status: NotApplicable, Reason: fmt.Sprintf("%d GPUs do not form two or more DP groups of TP %d", c.Plan.World(), tp)}
			}
			p := to(c)
			if err := p.Validate(c.Arch); err != nil {
				return Applicability{Status: NotApplicable, Reason: err.Error()}
			}
			r := "needs EP (serving-facts.md: a dispatch and a combine only with DP > 1 plus EP)"
			dc := c
			dc.Plan = p
			if d, ok, err := sim.MoEDispatchOf(dc); err == nil && ok {
				r = fmt.Sprintf("needs EP; %s moves the tokens to the experts by %s", d.EngineName(), d)
			}
			if c.Workload.Batch < p.DP {
				r += fmt.Sprintf("; at batch %d only %d of %d DP groups have a sequence, the others run padding", c.Workload.Batch, c.Workload.Batch, p.DP)
			}
			return Applicability{Status: Applies, Reason: r}
		},
		HowTo: func(c sim.Scenario) How {
			p := to(c)
			flags := fmt.Sprintf("--tensor-parallel-size %d --data-parallel-size %d --enable-expert-parallel", p.TP, p.DP)
			setting := fmt.Sprintf("DP attention with expert parallelism (TP %d x DP %d)", p.TP, p.DP)
			dc := c
			dc.Plan = p
			// A --moe-dispatch the engine does not run by default needs
			// its own setting.
			if d, ok, err := sim.MoEDispatchOf(dc); err == nil && ok && d.Setting() != "" {
				flags += " " + d.Setting()
				setting += ", dispatch by " + d.Setting()
			}
			return engineHow(c, flags, setting)
		},
		Sweep: true,
	}
}

// topoEntry moves the Scenario to another box with as many GPUs; name is
// what topology.Resolve takes, as --topo does: a preset, a box
// description or a topology JSON file (read once, on first use).
// reprice is CatalogOptions.Reprice.
func topoEntry(name string, reprice func(sim.Scenario) (sim.Scenario, error)) Entry {
	box := sync.OnceValues(func() (*topology.Topology, error) { return topology.Resolve(name, 0) })
	// on is the box as the scenario would have it, its first GPUs where the
	// scenario has fewer: a copy of its own for each scenario.
	on := func(c sim.Scenario) (*topology.Topology, error) {
		t, err := box()
		if err != nil {
			return nil, err
		}
		if c.Topo != nil && c.Topo.NumGPUs() < t.NumGPUs() {
			return t.Subset(c.Topo.NumGPUs())
		}
		return t.Clone(), nil
	}
	// here reports whether the scenario is on the box already: the preset
	// by name, or the same box however it was given (a file of it).
	here := func(c sim.Scenario) bool {
		if onPreset(c.Topo, name) {
			return true
		}
		t, err := box()
		if err != nil || c.Topo == nil {
			return false
		}
		if c.Topo.NumGPUs() < t.NumGPUs() {
			if t, err = t.Subset(c.Topo.NumGPUs()); err != nil {
				return false
			}
		}
		return t.SameBox(c.Topo)
	}
	return Entry{
		Name: "box-" + name, Title: "move to " + name, Kind: "box",
		Enabled: here,
		Apply: func(c sim.Scenario) (sim.Scenario, error) {
			t, err := on(c)
			if err != nil {
				return c, err
			}
			c.Topo = t
			// What the user left to the engine it decides again on the
			// new box's GPU, as 'predict --topo' (the row's how) does:
			// whether a DSA model runs sparse, and the KV dtype its
			// 'auto' takes (the checkpoint's where it states no default
			// of its own).
			if !c.DenseDSAChosen {
				c.Build.DenseDSA = sim.ImpliedDenseDSA(c.Arch, t, c.Options.Engine)
			}
			if c.KVDefault != nil {
				c.Workload.KVDtype, c.KVDefault = "", nil
			}
			if c.Workload.KVDtype == "" {
				if d := sim.ImpliedKVDefault(c.Arch, t, c.Options.Engine); d != nil {
					c.Workload.KVDtype, c.KVDefault = d.Dtype, d
				}
			}
			// Tables measured on the old box's GPU do not price the new
			// one: the new GPU's own price it where Reprice finds them,
			// else the priors do.
			if reprice != nil {
				return reprice(c)
			}
			if ch, ok := c.Costs.(sim.SourceChecker); ok && ch.Check(t.DeviceOf(0)) != nil {
				c.Costs = nil
			}
			return c, nil
		},
		Revert: func(c sim.Scenario) (sim.Scenario, error) {
			return c, fmt.Errorf("the baseline runs on %s: the entry moves a scenario there from another box", name)
		},
		Check: func(c sim.Scenario) Applicability {
			t, err := box()
			if err != nil {
				return Applicability{Status: NotApplicable, Reason: err.Error()}
			}
			what := fmt.Sprintf("%s, %d x %s", name, t.NumGPUs(), t.DeviceOf(0).Name)
			if t.Description != "" {
				what += " (" + t.Description + ")"
			}
			if here(c) {
				return Applicability{Status: Applies, Reason: "the baseline's own box: " + what}
			}
			if c.Plan.World() > t.NumGPUs() {
				return Applicability{Status: NotApplicable, Reason: fmt.Sprintf("%s has %d GPUs; the plan needs %d", name, t.NumGPUs(), c.Plan.World())}
			}
			d := t.DeviceOf(0)
			r := "another box: " + what
			if _, ok := d.TFLOPS("fp4"); !ok && usesDtype(c.Arch, model.NVFP4) {
				r += "; no FP4 tensor cores there: NVFP4 weights run as a weight-only 16-bit kernel (sim: bf16 peak)"
			}
			return Applicability{Status: Conditional, Reason: r, Needs: "moving to " + name}
		},
		HowTo: func(sim.Scenario) How { return How{Exec: "predict --topo " + name} },
		Sweep: true,
	}
}

// onPreset reports whether t is the preset box called name: the preset
// itself or its first GPUs ("h200-nvswitch/4gpu"), or the description
// the preset stands for, however spelled ("nvswitch:8xh200-sxm",
// "nvswitch:8xh200"): the same box from the same catalog entry, which no
// box entry moves the scenario to.
func onPreset(t *topology.Topology, name string) bool {
	if t == nil {
		return false
	}
	base := baseTopoName(t.Name)
	if base == name {
		return true
	}
	desc, ok := topology.PresetDescription(name)
	if !ok {
		return false
	}
	want, err := topology.ParseBox(desc)
	if err != nil {
		return false
	}
	got, err := topology.ParseBox(base)
	return err == nil && got == want
}

func baseTopoName(n string) string {
	if i := strings.IndexByte(n, '/'); i >= 0 {
		return n[:i]
	}
	return n
}

func usesDtype(a *model.Arch, d model.Dtype) bool {
	for _, c := range model.Components {
		if a.Quant.Dtype(c) == d {
			return true
		}
	}
	return false
}

// ccVersion is the compute capability of the box's GPUs
// (Device.CCVersion; 0.0 when unknown).
func ccVersion(t *topology.Topology) (major, minor int) {
	if t == nil || t.NumGPUs() == 0 || t.DeviceOf(0) == nil {
		return 0, 0
	}
	return t.DeviceOf(0).CCVersion()
}

// ccMajor returns the major compute capability of the box's GPUs (0 when
// unknown).
func ccMajor(t *topology.Topology) int {
	major, _ := ccVersion(t)
	return major
}

func ccString(t *topology.Topology) string {
	if t == nil || t.NumGPUs() == 0 || t.DeviceOf(0) == nil {
		return "?"
	}
	return t.DeviceOf(0).ComputeCapability
}

// tpNVLink reports whether NVLink joins the GPUs of c's TP group (rank
// 0's), the ones its all-reduces cross: what runs there is the group's
// links, not the box's (sim.NVLinkAmong, the rule its caveats judge by).
func tpNVLink(c sim.Scenario) bool {
	return sim.NVLinkAmong(c.Topo, c.Plan.Normalized().TP)
}

// checkFP8KV: FP8 KV needs an MLA decode backend that reads an FP8 cache
// (serving-facts.md "Attention backends and FP8 KV"): on SM90, SM100 and
// SM120 the backend the engine's profile runs with an FP8 cache there (the
// one the row's prediction prices: FlashMLA under vLLM on SM90, TensorRT-
// LLM's own kernel, ...; none where the named backend takes no FP8 cache)
// and, on SM120, what it needs of the build (vLLM's TRITON_MLA refused FP8
// KV until its dequantize-on-load support was merged in 2026; the same
// condition is a caveat of a prediction that runs it); FP8 needs SM89+.
func checkFP8KV(c sim.Scenario) Applicability {
	cc := ccString(c.Topo)
	major, minor := ccVersion(c.Topo)
	switch {
	case major == 0:
		return Applicability{Status: Conditional, Reason: "unknown compute capability: FP8 KV needs SM89+ and an MLA backend that reads FP8",
			Needs: "SM89+ and an MLA backend that reads FP8 KV"}
	case major < 8 || (major == 8 && minor < 9):
		return Applicability{Status: NotApplicable, Reason: fmt.Sprintf("SM%s: FP8 needs SM89 or newer", cc)}
	case major == 12 || major == 9 || major == 10:
		// The family's name as the SM120 conditions say it.
		fam := "SM" + cc
		if major == 12 {
			fam = "SM120"
		}
		b, needs, err := c.FP8KVBackend()
		switch {
		case err != nil:
			return Applicability{Status: NotApplicable, Reason: fmt.Sprintf("%s: %v", fam, err)}
		case needs != nil:
			return Applicability{Status: Conditional, Reason: fam + ": " + needs.String(), Needs: needs.Needs}
		}
		return Applicability{Status: Applies, Reason: fmt.Sprintf("%s: %s reads an FP8 KV cache", fam, b)}
	}
	return Applicability{Status: Conditional, Reason: fmt.Sprintf("SM%s: needs an MLA backend that reads FP8 KV (TRITON_MLA with dequantize-on-load)", cc),
		Needs: "an MLA backend that reads FP8 KV"}
}

// checkP2PSys counts the GPU pairs that NCCL_P2P_LEVEL=SYS moves from SHM
// to P2P (nccl-model.md: the default PXB stops at a host bridge) among the
// GPUs the plan runs on (its first World ranks): pairs of the box it does
// not use carry none of its collectives.
func checkP2PSys(c sim.Scenario) Applicability {
	t := c.Topo
	if t == nil {
		return Applicability{Status: Conditional, Reason: "no topology", Needs: "a topology"}
	}
	n := min(c.Plan.World(), t.NumGPUs())
	moved, refused := 0, 0
	for a := 0; a < n; a++ {
		for b := a + 1; b < n; b++ {
			pxb := t.P2PAllowed(a, b, topology.P2PPXB)
			sys := t.P2PAllowed(a, b, topology.P2PSYS)
			if sys && !pxb {
				moved++
			}
			if !sys {
				refused++
			}
		}
	}
	switch {
	case moved == 0 && refused == 0:
		return Applicability{Status: Applies, Reason: "no effect on this box: every pair of the plan's GPUs already uses P2P at the default level"}
	case moved == 0:
		return Applicability{Status: NotApplicable, Reason: fmt.Sprintf("%d GPU pairs cannot use P2P at all (driver refuses)", refused)}
	}
	r := fmt.Sprintf("%d of the plan's %d GPU pairs move from host-memory SHM to P2P across host bridges/sockets; needs ACS off and P2P allowed by BIOS/driver (hardware.md)", moved, n*(n-1)/2)
	return Applicability{Status: Applies, Reason: r}
}

// minChannelsEntry is the channel count of the nccl-min-channels-8
// entry: what the public PCIe boxes' tuning runs (sjug/rtx6kpro
// hardware/pcie-bandwidth.md "8-GPU Results", models/glm5.md's launch).
const minChannelsEntry = 8

// checkMinChannels: NCCL_MIN_NCHANNELS raises the channels NCCL's ring
// runs; it changes something only where NCCL's own count (tpscope's model
// of its search: 2 on a dual-socket PCIe box, 4 through PCIe switches, 16
// over NVLink) is below it. Public evidence: the dual-socket box measured
// 22.2 GB/s all-reduce bus bandwidth at 32 MB with NCCL's default and
// 37.6 with 8 channels; the switch boxes, where NCCL runs 4, 40.1 by
// default and 39.4 / 41.1 with 8 (sjug/rtx6kpro hardware/pcie-bandwidth.md
// "8-GPU Results"), a gain tpscope's links' share model (54 GB/s uplinks)
// would price but those boxes did not measure: an upper bound there.
func checkMinChannels(c sim.Scenario) Applicability {
	t := c.Topo
	if t == nil {
		return Applicability{Status: Conditional, Reason: "no topology", Needs: "a topology"}
	}
	n := min(c.Plan.Normalized().TP, t.NumGPUs())
	if n < 2 {
		return Applicability{Status: NotApplicable, Reason: "TP 1: no all-reduce ring to run channels over"}
	}
	own := c.Options.NCCL
	own.MinChannels, own.MaxChannels = 0, 0
	m, err := sim.NewCollectiveModel(t, own)
	if err != nil {
		return Applicability{Status: NotApplicable, Reason: err.Error()}
	}
	ch := m.Channels(sim.FirstRanks(n))
	const public = "the public dual-socket box measured 22.2 GB/s all-reduce bus bandwidth at 32 MB by default and 37.6 with 8 (sjug/rtx6kpro hardware/pcie-bandwidth.md)"
	switch {
	case ch >= minChannelsEntry:
		return Applicability{Status: Applies, Reason: fmt.Sprintf("no effect on this box: NCCL already runs %d channels over the TP group's ring (tpscope's model of its search)", ch)}
	case ch >= 4:
		return Applicability{Status: Applies, UpperBound: true, Caution: "switch boxes measured no gain over NCCL's own 4 channels",
			Reason: fmt.Sprintf("environment only; NCCL runs %d channels over the TP group's ring here, and 8 lift it to the links' share in tpscope's model, but the public switch boxes measured 40.1 GB/s all-reduce bus bandwidth at NCCL's default and 39.4-41.1 with 8 (sjug/rtx6kpro hardware/pcie-bandwidth.md)", ch)}
	}
	return Applicability{Status: Applies, Reason: fmt.Sprintf("environment only; NCCL runs %d channels over the TP group's ring here (NCCL's link model puts it below its 25 GB/s channel duplication), 11.1 GB/s each; %s", ch, public)}
}

// checkOneShot: vLLM's custom all-reduce (one-shot below 256 KB) runs only
// on 2 GPUs or NVLink-connected GPUs; on more than two PCIe-only GPUs it is
// disabled, and symmetric-memory all-reduce exists only on SM 9.0/10.x
// (serving-facts.md "Custom all-reduce").
func checkOneShot(c sim.Scenario) Applicability {
	t := c.Topo
	if t == nil {
		return Applicability{Status: Conditional, Reason: "no topology", Needs: "a topology"}
	}
	if c.Options.NCCL.P2PDisable {
		return Applicability{Status: NotApplicable, Reason: "needs P2P between every pair of GPUs (NCCL_P2P_DISABLE=1 is set)"}
	}
	n := c.Plan.Normalized().TP
	if a, b, refused := t.P2PRefused(sim.FirstRanks(min(n, t.NumGPUs()))); refused {
		return Applicability{Status: NotApplicable, Reason: fmt.Sprintf("GPUs %d and %d cannot use P2P: a one-shot all-reduce reads peers' buffers directly", a, b)}
	}
	p := profileOf(c)
	name := "the engine"
	if p != nil {
		name = p.Name()
		if ok, _ := p.AllReduce.Runs(n, tpNVLink(c), 0); ok && len(p.AllReduce.StrategyTable) > 0 && c.Arch != nil && t.DeviceOf(0) != nil {
			// The engine's table picks by tokens, for the fusion op its
			// model code passes (the norm after the all-reduce where it
			// fuses by default).
			f := engprof.ARFusionNone
			if p.FusedOn(engprof.FuseAllReduceRMSNorm, fusionUse(c)) {
				f = engprof.ARFusionResidualRMSNorm
			}
			bands := p.AllReduce.TableBands(t.DeviceOf(0).ComputeCapability, n, f, int64(c.Arch.Hidden))
			return Applicability{Status: Applies, Reason: fmt.Sprintf("%s's custom all-reduce already runs one-shot where its AUTO table picks it here (its profile: %s)", name, bands)}
		}
		if ok, one := p.AllReduce.Runs(n, tpNVLink(c), 0); ok && one {
			if slices.Contains(p.AllReduce.OneShotAlways, n) {
				return Applicability{Status: Applies, Reason: fmt.Sprintf("%s's custom all-reduce already runs one-shot at every size on %d GPUs (its profile)", name, n)}
			}
			below := p.AllReduce.OneShotBelowBytes
			if v, ok := p.AllReduce.OneShotBelowBytesByWorld[n]; ok {
				below = v
			}
			return Applicability{Status: Applies, Reason: fmt.Sprintf("%s's custom all-reduce already runs one-shot below %d KB here (its profile)", name, below>>10)}
		}
	}
	why := name + " has no custom all-reduce"
	switch {
	case p != nil && p.AllReduce.Enabled && !tpNVLink(c) && p.AllReduce.PCIeMaxGPUs < 2:
		why = name + " runs its custom all-reduce only on GPUs joined by NVLink"
	case p != nil && p.AllReduce.Enabled && !tpNVLink(c) && n > p.AllReduce.PCIeMaxGPUs:
		why = fmt.Sprintf("%s runs its custom all-reduce on at most %d PCIe-only GPUs", name, p.AllReduce.PCIeMaxGPUs)
	case p != nil && p.AllReduce.Enabled:
		why = fmt.Sprintf("%s's custom all-reduce does not run on %d GPUs here", name, n)
	}
	sym := "symmetric-memory all-reduce needs SM 9.0/10.x"
	if m := ccMajor(t); m == 9 || m == 10 {
		sym = "symmetric-memory all-reduce (SM 9.0/10.x) is an option here"
	}
	kernel := "an out-of-tree one-shot PCIe kernel"
	if tpNVLink(c) {
		kernel = "an out-of-tree one-shot kernel"
	}
	a := Applicability{Status: Conditional, Needs: kernel,
		Reason: fmt.Sprintf("%s; needs %s (%s; this box is SM%s)", why, kernel, sym, ccString(t))}
	if t.SpansSockets(n) {
		// Public report (GitHub voipmonitor/rtx6kpro,
		// hardware/pcie-bandwidth.md at 070506f, "Custom Allreduce vs
		// NCCL"): a one-shot kernel that beat NCCL 1.5-3.3x below 32 KB
		// on a PCIe-switch box "was actually slower than NCCL on dual-CPU
		// systems without switches". The model prices cross-socket P2P
		// reads at the link's bandwidth x 0.8 with no extra latency, so
		// the predicted gain is the most it can give here.
		a.Reason += "; on dual-CPU boxes a public one-shot kernel measured slower than NCCL (cross-socket P2P reads, not modeled): read this row as an upper bound"
		a.UpperBound = true
		a.Caution = "a public one-shot kernel measured slower than NCCL on dual-CPU boxes"
	}
	return a
}

// checkARNorm: the fused all-reduce + RMSNorm kernel must own the
// all-reduce. Assumption (vLLM 2025, not in the reference notes): vLLM's
// fusion pass uses FlashInfer's all-reduce kernels, built for SM90/SM100
// GPUs joined by NVLink; where NCCL carries the all-reduce (PCIe, more
// than two GPUs) it needs a custom kernel.
func checkARNorm(c sim.Scenario) Applicability {
	m := ccMajor(c.Topo)
	name := "the engine"
	if p := profileOf(c); p != nil {
		name = p.Name()
		if _, listed := p.FusionArchs(engprof.FuseAllReduceRMSNorm); !listed {
			return Applicability{Status: Conditional, Reason: name + "'s profile records no all-reduce + RMSNorm fusion",
				Needs: "a fused all-reduce + RMSNorm kernel in " + name}
		}
	}
	if p := profileOf(c); p != nil && engineFusesARNorm(c, p) {
		reason := fmt.Sprintf("%s fuses each all-reduce its custom kernel carries with the RMSNorm after it by default (its profile's fusions)", name)
		if capB := p.FusionMaxInputBytes(engprof.FuseAllReduceRMSNorm, c.Topo.DeviceOf(0).ComputeCapability, c.Plan.Normalized().TP); capB > 0 {
			reason = fmt.Sprintf("%s fuses each all-reduce its custom kernel carries with the RMSNorm after it by default, for messages up to %s here (its profile's fusions)", name, units.BinaryBytes(capB))
		}
		return Applicability{Status: Applies, Reason: reason}
	}
	if tpNVLink(c) && (m == 9 || m == 10) {
		return Applicability{Status: Applies, Reason: fmt.Sprintf("SM%s with NVLink: %s's all-reduce + RMSNorm fusion (FlashInfer kernels; assumption: available since 2025)", ccString(c.Topo), name)}
	}
	return Applicability{Status: Conditional, Reason: fmt.Sprintf("NCCL carries the all-reduce between the TP group's GPUs (SM%s, PCIe): fusing the residual add + RMSNorm needs a custom all-reduce kernel (assumption: %s's fusion targets SM90/SM100 with NVLink)", ccString(c.Topo), name),
		Needs: "a custom all-reduce kernel fused with RMSNorm"}
}

// engineFusesARNorm reports whether engine p fuses c's TP all-reduces with
// the RMSNorm after them by default: its profile's fusion on this GPU
// family, TP and DP attention (engprof.Profile.FusedOn), and GPUs joined
// by NVLink, where its custom all-reduce kernel (the one the fusion runs
// in) carries them unless --custom-ar off gives them to NCCL.
func engineFusesARNorm(c sim.Scenario, p *engprof.Profile) bool {
	if c.Topo == nil || c.Topo.NumGPUs() == 0 || c.Topo.DeviceOf(0) == nil || !tpNVLink(c) || c.Options.CustomAR == sim.CustomAROff {
		return false
	}
	return p.FusedOn(engprof.FuseAllReduceRMSNorm, fusionUse(c))
}

// fusionUse is what an engine's default fusion depends on in c: its
// first GPU, its TP degree and DP attention and its model's config
// model_type.
func fusionUse(c sim.Scenario) engprof.FusionUse {
	plan := c.Plan.Normalized()
	u := engprof.FusionUse{TP: plan.TP, DP: plan.DP}
	if d := c.Topo.DeviceOf(0); d != nil {
		u.CC, u.Device = d.ComputeCapability, d.Name
	}
	if c.Arch != nil {
		u.ModelType = c.Arch.ModelType
	}
	return u
}

// profileOf is the profile of c's engine; nil when it has none
// (CheckEngine refuses such a scenario before it is priced).
func profileOf(c sim.Scenario) *engprof.Profile {
	p, err := engprof.Lookup(c.Options.Engine)
	if err != nil {
		return nil
	}
	return p
}

// measureExec is the tpscope command line that runs flags under c's
// engine: the executor's GPU run (tpscope run --backend cuda: run's cpu
// backend runs no CUDA graphs and holds no full-size model) where the
// executor is the engine, else predict (withEngineFlag names the engine),
// as tpscope run runs the executor's kernels only and refuses another
// engine.
func measureExec(c sim.Scenario, flags string) string {
	if c.Options.Engine.IsExecutor() {
		return "run --backend cuda " + flags
	}
	return "predict " + flags
}

// engineHow is how c's engine turns a setting on: vllmFlags under vLLM,
// whose flags the catalog knows; under another engine, whose profile
// records no flag for it, the setting named ("set <setting> in <engine>")
// rather than a flag it may not have.
func engineHow(c sim.Scenario, vllmFlags, setting string) How {
	p := profileOf(c)
	if p == nil {
		return How{Setting: setting}
	}
	if p.Engine == engprof.DefaultEngine {
		return How{EngineName: p.Name(), Engine: []string{vllmFlags}}
	}
	return How{EngineName: p.Name(), Setting: setting}
}
