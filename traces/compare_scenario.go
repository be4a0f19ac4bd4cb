package traces

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// ScenarioSpec is a scenario as text: what a step root span records
// (AttrModel, AttrTopology, AttrPlan, AttrWorkload, AttrOptions) or what
// the user passes as flags. Empty fields are "not given".
type ScenarioSpec struct {
	Model    string `json:"model"`
	Topology string `json:"topology"`
	Plan     string `json:"plan"`
	Workload string `json:"workload"`
	Options  string `json:"options"`
	// OptionsSet says Options was given even when it is "" (no options).
	OptionsSet bool `json:"-"`
}

// SpecOf returns the spec recorded in a reader's Scenario.
func SpecOf(sc *Scenario) ScenarioSpec {
	return ScenarioSpec{Model: sc.Model, Topology: sc.Topology, Plan: sc.Plan, Workload: sc.Workload, Options: sc.Options, OptionsSet: true}
}

// Override returns s with every non-empty field of o in place of its own.
func (s ScenarioSpec) Override(o ScenarioSpec) ScenarioSpec {
	if o.Model != "" {
		s.Model = o.Model
	}
	if o.Topology != "" {
		s.Topology = o.Topology
	}
	if o.Plan != "" {
		s.Plan = o.Plan
	}
	if o.Workload != "" {
		s.Workload = o.Workload
	}
	if o.Options != "" || o.OptionsSet {
		s.Options, s.OptionsSet = o.Options, true
	}
	return s
}

// Key is the spec as one comparable string (options normalized).
func (s ScenarioSpec) Key() string {
	return s.Model + "|" + s.Topology + "|" + s.Plan + "|" + s.Workload + "|" + strings.Join(OptionNames(s.Options), ",")
}

// BaseKey is Key without the options: two specs with the same BaseKey
// differ only by optimizations.
func (s ScenarioSpec) BaseKey() string {
	return s.Model + "|" + s.Topology + "|" + s.Plan + "|" + s.Workload
}

func (s ScenarioSpec) String() string {
	o := strings.Join(OptionNames(s.Options), ",")
	if o == "" {
		o = "none"
	}
	return fmt.Sprintf("model=%s topology=%s plan=%s workload=%q options=%s", s.Model, s.Topology, s.Plan, s.Workload, o)
}

// OptionNames splits an AttrOptions value into sorted names. It accepts
// the comma-separated string of the schema and the JSON array text a
// string-slice attribute reads back as (`["a","b"]`).
func OptionNames(v string) []string {
	v = strings.TrimSpace(v)
	var names []string
	if strings.HasPrefix(v, "[") {
		var arr []string
		if json.Unmarshal([]byte(v), &arr) == nil {
			names = arr
		} else {
			v = strings.Trim(v, "[]")
		}
	}
	if names == nil {
		for _, p := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
			names = append(names, strings.Trim(p, `"`))
		}
	}
	out := names[:0]
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" && n != "eager" && n != "none" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// ParseOptions turns optimization names into sim.Options. Known names
// (case-insensitive; the first spelling is the canonical one of
// OptionsNames):
//
//	cuda-graphs                       CUDAGraphs
//	ar-norm-fusion                    ARNormFusion
//	overlap                           Overlap
//	p2p-disable | NCCL_P2P_DISABLE=1  P2PDisable
//	nccl-proto=P | NCCL_PROTO=P       NCCLProto
//	nccl-algo=A | NCCL_ALGO=A         NCCLAlgo
//	p2p-level=L | NCCL_P2P_LEVEL=L    P2PLevel
//	custom-ar=V                       CustomAR (auto, off, oneshot, twoshot)
//	mtp-accept=R                      MTPAcceptRate
//	gpu-mem-util=F                    GPUMemUtilization
//	attention-backend=B               AttentionBackend
//
// Names sim does not model (fp8-kv is a workload change, not an option)
// come back in unknown; the prediction ignores them.
func ParseOptions(v string) (o sim.Options, unknown []string, err error) {
	for _, n := range OptionNames(v) {
		key, val, hasVal := strings.Cut(n, "=")
		switch strings.ToLower(key) {
		case "cuda-graphs", "cuda_graphs", "graphs":
			o.CUDAGraphs = true
		case "ar-norm-fusion", "ar_norm_fusion":
			o.ARNormFusion = true
		case "overlap":
			o.Overlap = true
		case "p2p-disable", "nccl_p2p_disable":
			o.P2PDisable = !hasVal || val == "1" || strings.EqualFold(val, "true")
		case "nccl-proto", "nccl_proto":
			o.NCCLProto = val
		case "nccl-algo", "nccl_algo":
			o.NCCLAlgo = val
		case "p2p-level", "nccl_p2p_level":
			o.P2PLevel = val
		case "custom-ar", "custom_ar":
			if o.CustomAR, err = sim.ParseCustomAR(val); err != nil {
				return o, nil, fmt.Errorf("option %q: %w", n, err)
			}
		case "mtp-accept", "mtp_accept_rate":
			if o.MTPAcceptRate, err = strconv.ParseFloat(val, 64); err != nil {
				return o, nil, fmt.Errorf("option %q: want a number in [0,1]", n)
			}
		case "gpu-mem-util", "gpu_mem_utilization":
			if o.GPUMemUtilization, err = strconv.ParseFloat(val, 64); err != nil {
				return o, nil, fmt.Errorf("option %q: want a number in (0,1]", n)
			}
		case "attention-backend", "attention_backend":
			o.AttentionBackend = sim.AttentionBackend(val)
		default:
			unknown = append(unknown, n)
		}
	}
	if err := o.Validate(); err != nil { // p2p_level included
		return o, unknown, err
	}
	return o, unknown, nil
}

// OptionsNames is the inverse of ParseOptions: the canonical sorted names
// of o's non-default fields, for traces.AttrOptions.
func OptionsNames(o sim.Options) []string {
	var n []string
	add := func(c bool, s string) {
		if c {
			n = append(n, s)
		}
	}
	add(o.CUDAGraphs, "cuda-graphs")
	add(o.ARNormFusion, "ar-norm-fusion")
	add(o.Overlap, "overlap")
	add(o.P2PDisable, "p2p-disable")
	add(o.NCCLProto != "", "nccl-proto="+o.NCCLProto)
	add(o.NCCLAlgo != "", "nccl-algo="+o.NCCLAlgo)
	add(o.P2PLevel != "", "p2p-level="+o.P2PLevel)
	add(o.CustomAR != "", "custom-ar="+string(o.CustomAR))
	add(o.MTPAcceptRate > 0, "mtp-accept="+strconv.FormatFloat(o.MTPAcceptRate, 'g', -1, 64))
	add(o.GPUMemUtilization > 0, "gpu-mem-util="+strconv.FormatFloat(o.GPUMemUtilization, 'g', -1, 64))
	add(o.AttentionBackend != "", "attention-backend="+string(o.AttentionBackend))
	sort.Strings(n)
	return n
}

// ParsePlan reads a plan in model.Plan's String form ("tp8", "tp1-dp8-ep",
// "tp8-dcp2") or the key=value form ("tp=8,ep,dp=2").
func ParsePlan(s string) (model.Plan, error) {
	var p model.Plan
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return p, fmt.Errorf("plan is empty: want e.g. tp8 or tp=8")
	}
	for _, part := range strings.FieldsFunc(t, func(r rune) bool { return r == '-' || r == ',' || r == ' ' }) {
		part = strings.ReplaceAll(part, "=", "")
		if part == "ep" {
			p.EP = true
			continue
		}
		var dst *int
		var num string
		switch {
		case strings.HasPrefix(part, "tp"):
			dst, num = &p.TP, part[2:]
		case strings.HasPrefix(part, "dp"):
			dst, num = &p.DP, part[2:]
		case strings.HasPrefix(part, "dcp"):
			dst, num = &p.DCP, part[3:]
		default:
			return p, fmt.Errorf("plan %q: unknown part %q (want tpN, dpN, dcpN, ep)", s, part)
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 1 || n > 1<<16 {
			return p, fmt.Errorf("plan %q: %q needs a positive integer", s, part)
		}
		*dst = n
	}
	return p, nil
}

// ParseWorkload reads a workload in model.Workload's String form
// ("decode b1 ctx8192 mtp2 kv=fp8") or the key=value form ("decode
// batch=32 ctx=4096 spec=2 kv=fp8").
func ParseWorkload(s string) (model.Workload, error) {
	w := model.Workload{Phase: model.Decode}
	seen := false
	for _, f := range strings.Fields(strings.ToLower(s)) {
		key, val, ok := strings.Cut(f, "=")
		if !ok {
			i := strings.IndexFunc(f, func(r rune) bool { return r >= '0' && r <= '9' })
			if i < 0 {
				key = f
			} else {
				key, val = f[:i], f[i:]
			}
		}
		num := func(dst *int) error {
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return fmt.Errorf("workload %q: %s needs a non-negative integer, got %q", s, key, val)
			}
			*dst = n
			seen = true
			return nil
		}
		var err error
		switch key {
		case "decode":
			w.Phase = model.Decode
		case "prefill":
			w.Phase = model.Prefill
		case "b", "batch":
			err = num(&w.Batch)
		case "ctx", "context":
			err = num(&w.Context)
		case "mtp", "spec", "spec_tokens":
			err = num(&w.SpecTokens)
		case "kv":
			var d model.Dtype
			if d, err = model.ParseDtype(val); err == nil {
				w.KVDtype = d
			}
		default:
			err = fmt.Errorf("workload %q: unknown field %q (want decode|prefill, b/batch, ctx/context, mtp/spec, kv)", s, f)
		}
		if err != nil {
			return w, err
		}
	}
	if !seen {
		return w, fmt.Errorf("workload %q: want e.g. \"decode b1 ctx4096\"", s)
	}
	if err := w.Validate(); err != nil {
		return w, fmt.Errorf("workload %q: %w", s, err)
	}
	return w, nil
}

// ResolvedScenario is a spec turned into what sim needs.
type ResolvedScenario struct {
	Spec     ScenarioSpec
	Scenario sim.Scenario
	Topology *topology.Topology
	Options  sim.Options
	// UnknownOptions are option names sim does not model (ignored).
	UnknownOptions []string
}

// Resolve turns the spec into an architecture, plan, workload, topology
// and options. Missing fields are errors naming the field, except the
// topology (topology.DefaultPreset) and options (none).
func (s ScenarioSpec) Resolve() (*ResolvedScenario, error) {
	if s.Model == "" {
		return nil, fmt.Errorf("scenario has no model: the trace's step span lacks %s; pass --model", AttrModel)
	}
	a, err := model.Resolve(s.Model)
	if err != nil {
		return nil, fmt.Errorf("scenario model %q: %w", s.Model, err)
	}
	if s.Plan == "" {
		return nil, fmt.Errorf("scenario has no plan: the trace's step span lacks %s; pass --plan", AttrPlan)
	}
	p, err := ParsePlan(s.Plan)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	if err := p.Validate(a); err != nil {
		return nil, fmt.Errorf("scenario plan %q: %w", s.Plan, err)
	}
	if s.Workload == "" {
		return nil, fmt.Errorf("scenario has no workload: the trace's step span lacks %s; pass --workload", AttrWorkload)
	}
	w, err := ParseWorkload(s.Workload)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	t, err := topology.Resolve(s.Topology, 0)
	if err != nil {
		return nil, fmt.Errorf("scenario topology: %w", err)
	}
	o, unknown, err := ParseOptions(s.Options)
	if err != nil {
		return nil, fmt.Errorf("scenario options %q: %w", s.Options, err)
	}
	return &ResolvedScenario{Spec: s, Scenario: sim.Scenario{Arch: a, Plan: p, Workload: w}, Topology: t, Options: o, UnknownOptions: unknown}, nil
}

// Predict predicts the scenario on topo (the resolved one when nil) and
// returns the prediction with the schedule it was made for (the batch
// padded as under CUDA graphs, as sim.PredictScenario does).
func (r *ResolvedScenario) Predict(topo *topology.Topology) (*sim.Prediction, *model.Schedule, *sim.Predictor, error) {
	if topo == nil {
		topo = r.Topology
	}
	p, err := sim.New(topo, r.Options)
	if err != nil {
		return nil, nil, nil, err
	}
	pr, s, err := p.PredictScenarioSchedule(r.Scenario)
	if err != nil {
		return nil, nil, nil, err
	}
	return pr, s, p, nil
}
