package plan

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tpscope/tpscope/advise"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// Capacity planning: sweep boxes (topology x GPU count), parallel plans
// (TP, EP, DP attention, DCP), batch, context, KV dtype and MTP tokens;
// predict every configuration with the fast Evaluator; check the memory
// fit (a configuration that does not fit is kept and reported with its
// shortfall in GB); apply a per-request latency SLO; and report the
// maximum concurrency per (box, plan, KV dtype, context), throughput per
// GPU, per-request tokens/s and the Pareto front of throughput per GPU
// against per-request tokens/s of each (context, box).
//
// The sweep is three calls: Space.Enumerate lists the configurations,
// Evaluate predicts them on any number of goroutines (workers.go: one
// sim.Evaluator each, blocks of configurations that share schedules), and
// Summarize derives the front and capacities. Run does all three.

// buildFor is the build options of the space's configurations on box t
// with specTokens speculative tokens.
func (s *Space) buildFor(t *topology.Topology, specTokens int) model.BuildOptions {
	b := s.Build
	if specTokens == 0 {
		// A configuration without speculative tokens runs no drafter:
		// the sweep's spec flags are for those with tokens.
		b.Spec = model.Spec{}
	}
	if s.ImplyDenseDSA {
		b.DenseDSA = sim.ImpliedDenseDSA(s.Arch, t, s.Options.Engine)
	}
	return b
}

// scenario is the configuration's scenario on box t (costs its cost
// source): the space's model, options and build on that box, with
// --dense-dsa recorded as chosen when the space did not imply it, as
// predict records it (its engine line and caveats say so).
func (s *Space) scenario(t *topology.Topology, costs sim.CostSource, p model.Plan, w model.Workload) sim.Scenario {
	return sim.Scenario{Arch: s.Arch, Plan: p, Workload: w, Build: s.buildFor(t, w.SpecTokens), Options: s.Options, Topo: t, Costs: costs,
		DenseDSAChosen: !s.ImplyDenseDSA}
}

// Space is the space a plan sweep covers. Nil slices take the
// defaults listed with each field.
type Space struct {
	Arch  *model.Arch
	Build model.BuildOptions
	// ImplyDenseDSA: Build.DenseDSA was not chosen, so each box runs the
	// DSA model as its engines do (ImpliedDenseDSA).
	ImplyDenseDSA bool
	// Topologies are the boxes; GPUCounts the GPU counts used on each
	// (nil = every power of two from 2 up to the box's count, and the
	// count itself). A count above a box's GPUs is skipped for that box.
	Topologies []*topology.Topology
	GPUCounts  []int
	// Costs, index-aligned with Topologies (nil or shorter = priors), is
	// the cost source of each box's configurations.
	Costs []sim.CostSource
	// Plans to try, each on the GPU counts equal to its TP x DP, or
	// Lists, the plans by degree (tpscope plan's --tp, --dp, --dcp, --ep;
	// see Lists): one or the other, never both (Enumerate refuses it).
	// Both unset: PlansFor(Arch, n) for each GPU count n.
	Plans []model.Plan
	Lists Lists
	// Batches (nil = advise.DefaultBatches), Contexts (nil =
	// advise.DefaultContexts), KVDtypes (nil = bf16 and fp8), SpecTokens
	// (nil = {0}; MTP tokens on a model without an MTP layer are left
	// out, see Coverage).
	Batches    []int
	Contexts   []int
	KVDtypes   []model.Dtype
	SpecTokens []int
	// Options are the run-time options of every configuration.
	Options sim.Options
	// MaxMsPerToken is the per-request latency SLO: a configuration meets
	// it when step time / tokens per step <= MaxMsPerToken ms (0 = none).
	MaxMsPerToken float64
}

// Lists give the plans of a sweep by their degrees: on n GPUs, every
// valid plan with TP in TP, DP in DP (TP x DP = n), DCP in DCP and EP in
// EP. A nil list is free: TP and DP take whatever makes TP x DP = n, DCP
// 1 and each power of two up to TP that divides it (the DCP degrees
// PlansFor tries), EP off and on. Only the lists given make combinations
// (see LeftOut): tp 8 with no DP list is one combination per GPU count.
type Lists struct {
	TP, DP, DCP []int
	EP          []bool
}

// IsZero reports whether no list is given.
func (l Lists) IsZero() bool { return l.TP == nil && l.DP == nil && l.DCP == nil && l.EP == nil }

// LeftOutReason says why a combination of a sweep's lists cannot run.
type LeftOutReason string

const (
	// LeftOutBoxGPUs: the GPU count is above the box's.
	LeftOutBoxGPUs LeftOutReason = "gpus-above-box"
	// LeftOutPlanGPUs: no TP x DP of the plan or the degrees equals the
	// GPU count (a count of the GPU list, or any default count of the
	// box when no list was given).
	LeftOutPlanGPUs LeftOutReason = "plan-gpus"
	// LeftOutPlanModel: TP x DP can match the GPU count, but the model
	// runs none of those plans (Detail: model.Plan.Validate's error).
	LeftOutPlanModel LeftOutReason = "plan-model"
	// LeftOutNoMTP: speculative tokens on a model without an MTP layer.
	LeftOutNoMTP LeftOutReason = "no-mtp-layer"
	// LeftOutContext: a context of the default list is longer than the
	// model is served at (model.Workload.CheckMaxModelLen); a listed one
	// is refused instead.
	LeftOutContext LeftOutReason = "context-above-max-model-len"
	// LeftOutEngine: the engine cannot run the configuration (box, plan,
	// KV dtype, speculative tokens): sim's Scenario.CheckEngine, the check
	// predict refuses it with (Detail: its error).
	LeftOutEngine LeftOutReason = "engine"
	// LeftOutBuild: the model builds no schedule of the configuration
	// (box, plan, KV dtype, speculative tokens): model.Validate's error,
	// the one predict refuses it with (Detail), as DCP with DSA sparse
	// attention on a box whose engines run it sparse, or a draft TP that
	// does not divide the plan's TP.
	LeftOutBuild LeftOutReason = "build"
	// LeftOutRunningLimit: the batch is above what the engine runs in
	// one step under the running limit given (--max-num-seqs: vLLM's
	// max_num_seqs a DP group's scheduler, SGLang's max_running_requests
	// shared by its DP ranks), or the engine's default where none is
	// (vLLM's max_num_seqs for the GPU, SGLang's from its KV pool): sim's
	// Scenario.RunningLimitOf, once per box, plan and batch (Detail:
	// Scenario.CheckRunningLimitOf's refusal, predict's where given).
	LeftOutRunningLimit LeftOutReason = "batch-above-running-limit"
)

// ConcurrencyBound says what bounds a configuration's maximum
// concurrency.
type ConcurrencyBound string

const (
	// BoundKVCache: the sequences of the context the KV cache holds.
	BoundKVCache ConcurrencyBound = "kv-cache"
	// BoundRunningLimit: the running limit given (--max-num-seqs) times
	// the schedulers that run it (Scenario.RunningLimitOf), below what
	// the KV cache holds.
	BoundRunningLimit ConcurrencyBound = "running-limit"
	// BoundEngineDefault: the engine's default running limit, none given
	// (vLLM's max_num_seqs for the GPU, SGLang's max_running_requests
	// from its pool), below what the KV cache holds; the point's
	// ConcurrencyLimitFrom names it.
	BoundEngineDefault ConcurrencyBound = "engine-default"
)

// RunningLimit reports whether a running limit, given or the engine's
// default, bounds the concurrency.
func (b ConcurrencyBound) RunningLimit() bool {
	return b == BoundRunningLimit || b == BoundEngineDefault
}

// LeftOut is one combination of a sweep's lists that can never run,
// named by the list values that make it: the box and, when the GPU
// counts were listed, the count; the plan, or the degrees of the lists
// given (0 or "" where that list was not given); or the MTP tokens.
type LeftOut struct {
	Reason     LeftOutReason `json:"reason"`
	Topology   string        `json:"topology,omitempty"`
	BoxGPUs    int           `json:"box_gpus,omitempty"`
	GPUs       int           `json:"gpus,omitempty"`
	Plan       string        `json:"plan,omitempty"`
	TP         int           `json:"tp,omitempty"`
	DP         int           `json:"dp,omitempty"`
	DCP        int           `json:"dcp,omitempty"`
	EP         string        `json:"ep,omitempty"` // "on", "off" or "" (not listed)
	KVDtype    string        `json:"kv_dtype,omitempty"`
	SpecTokens int           `json:"spec_tokens,omitempty"`
	// SpecMethod is the method the sweep names (--spec) for SpecTokens; ""
	// for the MTP of --mtp (scenarios' unnamed method).
	SpecMethod string `json:"spec_method,omitempty"`
	Context    int    `json:"context,omitempty"`
	Batch      int    `json:"batch,omitempty"`
	// EngineDefault: a batch left out above the engine's default running
	// limit, none given (LeftOutRunningLimit).
	EngineDefault bool   `json:"engine_default,omitempty"`
	Detail        string `json:"detail"`
}

// Coverage is how much of a sweep's lists can run: Combinations
// counts box x GPU count (when listed) x plan (each of Plans, each tuple
// of the lists given, or "any valid plan"), LeftOut those that can never
// run, and the MTP values the model cannot take.
type Coverage struct {
	Combinations int       `json:"combinations"`
	LeftOut      []LeftOut `json:"left_out,omitempty"`
}

// SpaceError: no configuration of the lists can run. It carries the
// coverage, whose LeftOut says why for each combination.
type SpaceError struct {
	Coverage Coverage
}

// EngineError: the engine, or the model's builder (LeftOutBuild),
// refuses every configuration of the sweep for one reason; Err is that
// reason, as predict gives it.
type EngineError struct {
	Err error
}

func (e *EngineError) Error() string { return e.Err.Error() }
func (e *EngineError) Unwrap() error { return e.Err }

func (e *SpaceError) Error() string {
	var parts []string
	for i, l := range e.Coverage.LeftOut {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(e.Coverage.LeftOut)-i))
			break
		}
		parts = append(parts, l.Combination()+": "+l.Detail)
	}
	return "plan: no combination of the lists can run: " + strings.Join(parts, "; ")
}

// Combination names the left-out combination by its list values:
// "rtxpro6000-2s, 3 GPUs, tp 8", "2 MTP tokens".
func (l LeftOut) Combination() string {
	var parts []string
	if l.Topology != "" {
		parts = append(parts, l.Topology)
	}
	if l.GPUs > 0 {
		parts = append(parts, fmt.Sprintf("%d GPUs", l.GPUs))
	}
	if l.Plan != "" {
		parts = append(parts, "plan "+l.Plan)
	}
	for _, d := range []struct {
		name string
		v    int
	}{{"tp", l.TP}, {"dp", l.DP}, {"dcp", l.DCP}} {
		if d.v != 0 {
			parts = append(parts, fmt.Sprintf("%s %d", d.name, d.v))
		}
	}
	if l.EP != "" {
		parts = append(parts, "ep "+l.EP)
	}
	if l.KVDtype != "" {
		parts = append(parts, "kv "+l.KVDtype)
	}
	switch {
	case l.SpecTokens > 0 && l.SpecMethod != "":
		parts = append(parts, fmt.Sprintf("%s k%d", l.SpecMethod, l.SpecTokens))
	case l.SpecTokens > 0:
		parts = append(parts, fmt.Sprintf("%d MTP tokens", l.SpecTokens))
	}
	if l.Batch > 0 {
		parts = append(parts, fmt.Sprintf("batch %d", l.Batch))
	}
	return strings.Join(parts, ", ")
}

// Config is one configuration of the sweep.
type Config struct {
	Box      int // index into Space boxes (see Space.Boxes)
	Scenario sim.Scenario
	// AtCapacity marks the configuration added at the box's maximum
	// concurrency for its context (not one of the swept batches).
	AtCapacity bool
	// planName is Scenario.Plan's normalized name, made once per plan by
	// Enumerate ("" for a Config made elsewhere: evaluatePoint names it).
	planName string
}

// Point is one evaluated configuration.
type Point struct {
	Topology   string `json:"topology"`
	GPUs       int    `json:"gpus"`
	Plan       string `json:"plan"`
	Batch      int    `json:"batch"`
	Context    int    `json:"context"`
	KVDtype    string `json:"kv_dtype"`
	SpecTokens int    `json:"spec_tokens"`
	// SpecMethod drafts the SpecTokens ("" without speculation): the
	// configuration a line names is re-priced with it, not with MTP.
	SpecMethod model.SpecMethod `json:"spec_method,omitempty"`

	StepUs     float64 `json:"step_us"`
	MsPerToken float64 `json:"ms_per_token"` // per request: step / tokens per step
	// TokensPerStep is what a step yields a sequence; MsPerTokenP90, with
	// speculative decoding, the 90th percentile of a request's time per
	// output token (spec.go), what a latency SLO is judged by.
	TokensPerStep        float64 `json:"tokens_per_step,omitempty"`
	MsPerTokenP90        float64 `json:"ms_per_token_p90,omitempty"`
	TokensPerS           float64 `json:"tokens_per_s"`
	TokensPerSPerGPU     float64 `json:"tokens_per_s_per_gpu"`
	TokensPerSPerRequest float64 `json:"tokens_per_s_per_request"`

	Fits        bool    `json:"fits"`
	ShortfallGB float64 `json:"shortfall_gb,omitempty"`
	// KVCapacityTokens per attention group (per GPU of the group);
	// MaxConcurrency the sequences of this context the box runs at once
	// (all DP groups): those the KV cache holds, at most the running
	// limit, given or the engine's default (Scenario.RunningLimitOf);
	// ConcurrencyBound says which bounds it ("" where no KV fits) and
	// ConcurrencyLimitFrom, under the engine's default, which default
	// ("vllm@0.24's default max_num_seqs 256").
	KVCapacityTokens     int64            `json:"kv_capacity_tokens"`
	MaxConcurrency       int              `json:"max_concurrency"`
	ConcurrencyBound     ConcurrencyBound `json:"concurrency_bound,omitempty"`
	ConcurrencyLimitFrom string           `json:"concurrency_limit_from,omitempty"`
	// SLO is the point against the latency SLO: "" when the sweep has
	// none, so nothing is said of one that was not given.
	SLO SLOVerdict `json:"slo,omitempty"`
	// AtCapacity: the batch is the maximum concurrency (added to the
	// sweep), not one of the swept batches: reported beside its context's
	// capacity, never picked (Best, Pareto, CapacityRow.Best), since the
	// batches the sweep picks from are the ones it was given.
	AtCapacity bool   `json:"at_capacity,omitempty"`
	Error      string `json:"error,omitempty"`
}

// SLOVerdict is a point's standing against the sweep's latency SLO.
type SLOVerdict string

const (
	// NoSLO: the sweep has no SLO.
	NoSLO SLOVerdict = ""
	// SLOMet: the per-token latency is within the SLO.
	SLOMet SLOVerdict = "met"
	// SLOMissed: the per-token latency is above the SLO.
	SLOMissed SLOVerdict = "missed"
)

// WithinSLO reports whether the point meets the SLO or there is none.
func (p *Point) WithinSLO() bool { return p.SLO != SLOMissed }

// SpecText is the point's speculative decoding as a line names it
// (", spec mtp k2"), "" without: a configuration named without it would
// be re-priced without its drafts.
func (p *Point) SpecText() string {
	if p.SpecTokens <= 0 {
		return ""
	}
	m := p.SpecMethod
	if m == "" {
		m = model.SpecMTP
	}
	return fmt.Sprintf(", spec %s k%d", m, p.SpecTokens)
}

// CapacityRow is the capacity of one (box, plan, KV dtype, MTP, context).
type CapacityRow struct {
	Topology       string `json:"topology"`
	GPUs           int    `json:"gpus"`
	Plan           string `json:"plan"`
	KVDtype        string `json:"kv_dtype"`
	SpecTokens     int    `json:"spec_tokens"`
	Context        int    `json:"context"`
	MaxConcurrency int    `json:"max_concurrency"`
	// ConcurrencyBound and ConcurrencyLimitFrom: what bounds
	// MaxConcurrency (Point's).
	ConcurrencyBound     ConcurrencyBound `json:"concurrency_bound,omitempty"`
	ConcurrencyLimitFrom string           `json:"concurrency_limit_from,omitempty"`
	// Best is the index into Points of the swept batch with the most
	// tokens/s per GPU that fits and meets the SLO, if any (-1 none); Full
	// the point at MaxConcurrency sequences (-1 when not evaluated).
	Best int `json:"best"`
	Full int `json:"full"`
}

// Front is the Pareto front of one (context, box): its swept, fitting
// points within the SLO (if any) that no other point of the same context
// and box beats in both throughput per GPU and per-request tokens/s.
type Front struct {
	Context  int    `json:"context"`
	Topology string `json:"topology"`
	GPUs     int    `json:"gpus"`
	// Points indexes Result.Points, by per-request tokens/s descending.
	Points []int `json:"points"`
}

// Box names the front's box as the charts and the CSV do: "h200-nvswitch x8".
func (f *Front) Box() string { return fmt.Sprintf("%s x%d", f.Topology, f.GPUs) }

// Result is the outcome of a sweep.
type Result struct {
	Points []Point `json:"points"`
	// Fronts: the Pareto front of each (context, box), by context
	// ascending, boxes as the sweep first meets them. Throughput per GPU
	// and per-request speed are a plane per sequence length (a longer
	// context is slower at every batch), and a box is what one deploys,
	// so one front over all would hold only the shortest context's points
	// and hide every other context's trade-off.
	Fronts []Front `json:"fronts"`
	// Best is the swept, fitting point within the SLO (if any) with the
	// highest throughput per GPU over all contexts (-1 none): the
	// shortest context's, in practice. Points at capacity are not
	// candidates: every pick is a combination of the lists given.
	Best int `json:"best"`
	// BestByContext: each context's best (as Best, within the context),
	// by context ascending, contexts with no candidate left out.
	BestByContext []int         `json:"best_by_context"`
	Capacity      []CapacityRow `json:"capacity"`
	// Evaluated counts the swept configurations (the lists' batches and
	// contexts), NotFitting, MissSLO and Errors those of them that do
	// not fit, miss the SLO or could not be predicted (each counted
	// once, in that order). FullLoad counts the points added at each
	// capacity row's full load (AtCapacity), which none of the others
	// count: they are not configurations of the lists.
	Evaluated  int     `json:"evaluated"`
	NotFitting int     `json:"not_fitting"`
	MissSLO    int     `json:"miss_slo,omitempty"`
	Errors     int     `json:"errors"`
	FullLoad   int     `json:"full_load,omitempty"`
	SLOMs      float64 `json:"slo_ms_per_token,omitempty"`
	// Coverage: the combinations of the lists and those left out
	// (Enumerate).
	Coverage Coverage `json:"coverage"`
	// Caveats: known gaps of the sweep's numbers (Caveats).
	Caveats []string `json:"caveats,omitempty"`
}

// RepeatedPlan returns the first plan of ps that a later one repeats
// (the same once normalized: tp8 and tp8-dcp1 are one plan) and the
// later one's index; (-1, -1) when each is given once. A repeated plan is
// the caller's mistake: swept once it would hide that, swept twice it
// would count its configurations twice, so Enumerate refuses it.
func RepeatedPlan(ps []model.Plan) (first, again int) {
	for j := range ps {
		for i := range j {
			if ps[i].Normalized() == ps[j].Normalized() {
				return i, j
			}
		}
	}
	return -1, -1
}

// PlansFor lists the plans on n GPUs that are valid for a: TP n (experts
// TP-sharded, or EP), TP n with DCP 2..n, and DP attention + EP with DP
// groups of TP n/DP for every divisor DP > 1 of n.
func PlansFor(a *model.Arch, n int) []model.Plan {
	var out []model.Plan
	try := func(p model.Plan) {
		if p.Validate(a) == nil {
			out = append(out, p)
		}
	}
	try(model.Plan{TP: n})
	try(model.Plan{TP: n, EP: true})
	for _, d := range dcpDegrees(n) {
		try(model.Plan{TP: n, DCP: d})
	}
	for dp := 2; dp <= n; dp++ {
		if n%dp == 0 {
			try(model.Plan{TP: n / dp, DP: dp, EP: true})
		}
	}
	return out
}

// Boxes returns every (topology, GPU count) of the space as a topology
// (a Subset when fewer GPUs than the box has).
func (s *Space) Boxes() ([]*topology.Topology, error) {
	out, _, err := s.boxes()
	return out, err
}

// boxes is Boxes with each box's cost source.
func (s *Space) boxes() ([]*topology.Topology, []sim.CostSource, error) {
	var out []*topology.Topology
	var costs []sim.CostSource
	for ti, t := range s.Topologies {
		var src sim.CostSource
		if ti < len(s.Costs) {
			src = s.Costs[ti]
		}
		if t == nil {
			return nil, nil, errors.New("plan: nil topology")
		}
		counts := s.GPUCounts
		if counts == nil {
			counts = defaultGPUCounts(t.NumGPUs())
		}
		for _, n := range counts {
			switch {
			case n < 1:
				return nil, nil, fmt.Errorf("plan: GPU count %d: want at least 1", n)
			case n > t.NumGPUs():
				continue
			case n == t.NumGPUs():
				out, costs = append(out, t), append(costs, src)
			default:
				sub, err := t.Subset(n)
				if err != nil {
					return nil, nil, err
				}
				out, costs = append(out, sub), append(costs, src)
			}
		}
	}
	return out, costs, nil
}

// Configs enumerates the sweep (Enumerate without the coverage).
func (s *Space) Configs() ([]Config, error) {
	cfgs, _, err := s.Enumerate()
	return cfgs, err
}

// defaultGPUCounts are the GPU counts tried on a box of n GPUs when none
// are listed: every power of two from 2 below n, and n.
func defaultGPUCounts(n int) []int {
	var out []int
	for c := 2; c < n; c *= 2 {
		out = append(out, c)
	}
	return append(out, n)
}

// planCand is one plan value of the lists: an explicit plan, a tuple of
// the degrees listed (0 where a list was not given; ep 0 free, 1 off, 2
// on), or any valid plan.
type planCand struct {
	plan         *model.Plan
	tp, dp, dcp  int
	ep           int8
	anyValidPlan bool
}

func (s *Space) planCands() []planCand {
	var out []planCand
	for i := range s.Plans {
		out = append(out, planCand{plan: &s.Plans[i]})
	}
	if !s.Lists.IsZero() {
		or0 := func(v []int) []int {
			if v == nil {
				return []int{0}
			}
			return v
		}
		eps := []int8{0}
		if s.Lists.EP != nil {
			eps = nil
			for _, e := range s.Lists.EP {
				eps = append(eps, map[bool]int8{false: 1, true: 2}[e])
			}
		}
		for _, tp := range or0(s.Lists.TP) {
			for _, dp := range or0(s.Lists.DP) {
				for _, dcp := range or0(s.Lists.DCP) {
					for _, ep := range eps {
						out = append(out, planCand{tp: tp, dp: dp, dcp: dcp, ep: ep})
					}
				}
			}
		}
	}
	if len(out) == 0 {
		out = []planCand{{anyValidPlan: true}}
	}
	return out
}

func (c planCand) epWord() string {
	return map[int8]string{0: "", 1: "off", 2: "on"}[c.ep]
}

// fills returns the valid plans of c on n GPUs; when there is none, why:
// LeftOutPlanGPUs when no TP x DP of c equals n, else LeftOutPlanModel
// with the last validation error.
func (c planCand) fills(a *model.Arch, n int) ([]model.Plan, LeftOutReason, error) {
	switch {
	case c.plan != nil:
		if c.plan.World() != n {
			return nil, LeftOutPlanGPUs, nil
		}
		return []model.Plan{*c.plan}, "", nil
	case c.anyValidPlan:
		if ps := PlansFor(a, n); len(ps) > 0 {
			return ps, "", nil
		}
		return nil, LeftOutPlanModel, fmt.Errorf("no plan of %s runs on %d GPUs", a.Name, n)
	}
	if c.tp != 0 {
		// A TP the model cannot split by runs on no GPU count: that is
		// the fault, whatever the count.
		if err := model.ValidateTP(a, c.tp); err != nil {
			var pe *model.PlanError
			if errors.As(err, &pe) {
				err = fmt.Errorf("%s runs no plan of TP %d: want %s", a.Name, c.tp, pe.Want)
			}
			return nil, LeftOutPlanModel, modelTPError{err}
		}
	}
	tps := []int{c.tp}
	if c.tp == 0 {
		tps = nil
		for d := 1; d <= n; d++ {
			if n%d == 0 {
				tps = append(tps, d)
			}
		}
	}
	eps := []bool{false, true}
	if c.ep != 0 {
		eps = []bool{c.ep == 2}
	}
	var out []model.Plan
	var last error
	worldOK := false
	for _, tp := range tps {
		if tp < 1 || n%tp != 0 || (c.dp != 0 && tp*c.dp != n) {
			continue
		}
		worldOK = true
		for _, dcp := range c.dcps(tp) {
			for _, ep := range eps {
				p := model.Plan{TP: tp, DP: n / tp, DCP: dcp, EP: ep}
				if err := p.Validate(a); err != nil {
					last = err
					continue
				}
				out = append(out, p)
			}
		}
	}
	switch {
	case len(out) > 0:
		return out, "", nil
	case !worldOK:
		return nil, LeftOutPlanGPUs, nil
	}
	return nil, LeftOutPlanModel, last
}

// dcps are the DCP degrees c tries with TP tp: the one listed, or, when
// the DCP list is free, 1 and the degrees the default sweep tries
// (PlansFor: each power of two from 2 up to tp that divides it), so that
// a TP or EP list narrows the plans without dropping DCP.
func (c planCand) dcps(tp int) []int {
	if c.dcp != 0 {
		return []int{c.dcp}
	}
	return append([]int{1}, dcpDegrees(tp)...)
}

// dcpDegrees are the DCP degrees above 1 a sweep tries with TP tp: each
// power of two from 2 up to tp that divides it.
func dcpDegrees(tp int) []int {
	var out []int
	for d := 2; d <= tp; d *= 2 {
		if tp%d == 0 {
			out = append(out, d)
		}
	}
	return out
}

// modelTPError is a listed TP the model runs no plan of (model.ValidateTP),
// on any GPU count.
type modelTPError struct{ error }

// needGPUs says how many GPUs c's TP x DP needs, for messages: "16", "a
// multiple of 8".
func (c planCand) needGPUs() string {
	switch {
	case c.plan != nil:
		return strconv.Itoa(c.plan.World())
	case c.tp != 0 && c.dp != 0:
		return strconv.Itoa(c.tp * c.dp)
	case c.tp != 0:
		return fmt.Sprintf("a multiple of %d", c.tp)
	case c.dp != 0:
		return fmt.Sprintf("a multiple of %d", c.dp)
	}
	return "any number of"
}

func countsText(counts []int) string {
	s := make([]string, len(counts))
	for i, c := range counts {
		s[i] = strconv.Itoa(c)
	}
	if len(s) > 1 {
		return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
	}
	return strings.Join(s, "")
}

// Enumerate lists the sweep's configurations and how much of the lists
// they cover. Boxes with the same GPU count are the innermost loop, so
// consecutive configurations share a schedule.
//
// A combination of the lists (box x GPU count when counts are listed x
// plan candidate, see Coverage) that can never run is left out and
// said in the coverage: a count above the box's GPUs, a plan whose TP x
// DP is none of the counts, degrees the model runs no plan of; MTP tokens
// on a model without an MTP layer likewise. When nothing is left to run,
// the error is a *SpaceError carrying the coverage. Errors are also
// a missing model, a negative SLO, batches or contexts below 1, GPU
// counts below 1, explicit plans the model cannot run, and explicit plans
// beside degree lists.
func (s *Space) Enumerate() ([]Config, Coverage, error) {
	var cov Coverage
	if s.Arch == nil {
		return nil, cov, errors.New("plan: no architecture")
	}
	if s.MaxMsPerToken < 0 {
		return nil, cov, fmt.Errorf("plan: latency SLO %v ms/token: want >= 0", s.MaxMsPerToken)
	}
	if len(s.Plans) > 0 && !s.Lists.IsZero() {
		return nil, cov, errors.New("plan: explicit plans and degree lists both given: want one (plans name whole plans, lists build them from degrees)")
	}
	for _, p := range s.Plans {
		if err := p.Validate(s.Arch); err != nil {
			return nil, cov, fmt.Errorf("plan %s: %w", p.Normalized(), err)
		}
	}
	if i, j := RepeatedPlan(s.Plans); j >= 0 {
		return nil, cov, fmt.Errorf("plan: plan %s is given twice (plans %d and %d): name each plan once", s.Plans[i].Normalized(), i+1, j+1)
	}
	boxes, costs, err := s.boxes()
	if err != nil {
		return nil, cov, err
	}
	batches, contexts, kvs, specs := s.Batches, s.Contexts, s.KVDtypes, s.SpecTokens
	if batches == nil {
		batches = advise.DefaultBatches
	}
	if contexts == nil {
		contexts = advise.DefaultContexts
	}
	if kvs == nil {
		kvs = model.KVDtypes
	}
	if specs == nil {
		specs = []int{0}
	}
	if !s.Build.Spec.IsZero() {
		// A speculative method, its tokens and its drafter hold or fail
		// for every configuration alike: checked once, the error a
		// *model.PlanError naming the field (a draft TP that must divide
		// each plan's TP is left to each configuration). A tree or a
		// drafter without speculative tokens is refused only when no
		// configuration has any.
		check := slices.DeleteFunc(slices.Clone(specs), func(k int) bool { return k <= 0 })
		if len(check) == 0 {
			check = []int{0}
		}
		for _, k := range check {
			w := model.Workload{Phase: model.Decode, Batch: 1, Context: 1, SpecTokens: k}
			if err := model.Validate(s.Arch, model.Plan{TP: max(1, s.Build.Spec.DraftTP)}, w, s.Build); err != nil {
				return nil, cov, err
			}
		}
	}
	for _, b := range batches {
		if b < 1 {
			return nil, cov, fmt.Errorf("plan: batch %d: want at least 1", b)
		}
	}
	for _, c := range contexts {
		if c < 1 {
			return nil, cov, fmt.Errorf("plan: context %d: want at least 1 token", c)
		}
	}
	// A context longer than the model is served at (with the most
	// speculative tokens swept) cannot run: a listed one is the caller's
	// error, one of the default list is left out.
	longest := model.Workload{Phase: model.Decode, Batch: 1, SpecTokens: max(0, slices.Max(specs))}
	var fit []int
	for _, c := range contexts {
		longest.Context = c
		err := longest.CheckMaxModelLen(s.Arch)
		switch {
		case err == nil:
			fit = append(fit, c)
		case s.Contexts != nil:
			return nil, cov, err
		default:
			var pe *model.PlanError
			errors.As(err, &pe)
			cov.LeftOut = append(cov.LeftOut, LeftOut{Reason: LeftOutContext, Context: c, Detail: "want " + pe.Want})
		}
	}
	contexts = fit

	// The plans of each GPU count, in first-seen order, from the
	// candidates that can run there; each combination that cannot run
	// anywhere it is tried is left out with its reason.
	var worlds []int
	plansOf := map[int][]model.Plan{}
	addPlans := func(n int, ps []model.Plan) {
		if !slices.Contains(worlds, n) {
			worlds = append(worlds, n)
		}
		for _, p := range ps {
			if !slices.ContainsFunc(plansOf[n], func(q model.Plan) bool { return q.Normalized() == p.Normalized() }) {
				plansOf[n] = append(plansOf[n], p)
			}
		}
	}
	cands := s.planCands()
	for _, t := range s.Topologies {
		listed := s.GPUCounts != nil
		groups := [][]int{defaultGPUCounts(t.NumGPUs())}
		if listed {
			groups = nil
			for _, n := range s.GPUCounts {
				groups = append(groups, []int{n})
			}
		}
		for _, g := range groups {
			for _, c := range cands {
				cov.Combinations++
				lo := LeftOut{Topology: t.Name, BoxGPUs: t.NumGPUs(), TP: c.tp, DP: c.dp, DCP: c.dcp, EP: c.epWord()}
				if listed {
					lo.GPUs = g[0]
				}
				if c.plan != nil {
					lo.Plan = c.plan.Normalized().String()
				}
				if g[0] > t.NumGPUs() {
					lo.Reason = LeftOutBoxGPUs
					lo.Detail = fmt.Sprintf("GPU count %d above the %d GPUs of %s", g[0], t.NumGPUs(), t.Name)
					cov.LeftOut = append(cov.LeftOut, lo)
					continue
				}
				ran := false
				lo.Reason = LeftOutPlanGPUs
				var why error
				for _, n := range g {
					ps, reason, err := c.fills(s.Arch, n)
					if len(ps) > 0 {
						ran = true
						addPlans(n, ps)
						continue
					}
					if reason == LeftOutPlanModel {
						lo.Reason, why = reason, err
					}
				}
				if ran {
					continue
				}
				var tpErr modelTPError
				switch {
				case lo.Reason == LeftOutPlanGPUs:
					lo.Detail = fmt.Sprintf("TP x DP needs %s GPUs, not %s, on %s", c.needGPUs(), countsText(g), t.Name)
				case errors.As(why, &tpErr):
					lo.Detail = tpErr.Error()
				default:
					lo.Detail = fmt.Sprintf("on %s GPUs of %s: %v", countsText(g), t.Name, why)
				}
				cov.LeftOut = append(cov.LeftOut, lo)
			}
		}
	}
	var runSpecs []int
	for _, k := range specs {
		if k > 0 && s.Build.Spec.MethodFor(model.Workload{SpecTokens: k}) == model.SpecMTP && s.Arch.MTPLayers == 0 {
			cov.LeftOut = append(cov.LeftOut, LeftOut{Reason: LeftOutNoMTP, SpecTokens: k, SpecMethod: string(s.Build.Spec.Method),
				Detail: fmt.Sprintf("%s has no MTP layer: num_nextn_predict_layers = 0", s.Arch.Name)})
			continue
		}
		runSpecs = append(runSpecs, k)
	}

	// A configuration the engine cannot run (sim's CheckEngine, as
	// predict refuses it) is left out with the engine's reason, once per
	// box, plan, KV dtype and speculative tokens: batch and context do
	// not change what the engine can run.
	type engineKey struct {
		box      int
		plan     string
		kv       model.Dtype
		specToks int
	}
	refusedBy := map[engineKey]error{}
	var firstRefusal error
	refused := func(bi int, pname string, sc sim.Scenario) bool {
		key := engineKey{bi, pname, sc.Workload.KVDtype, sc.Workload.SpecTokens}
		err, seen := refusedBy[key]
		if !seen {
			// What the model cannot build is refused first, as predict
			// refuses it before its engine is asked (batch and context
			// change none of it).
			reason := LeftOutBuild
			err = model.Validate(sc.Arch, sc.Plan, model.Workload{Phase: model.Decode, Batch: 1, Context: 1, SpecTokens: sc.Workload.SpecTokens, KVDtype: sc.Workload.KVDtype}, sc.Build)
			if err == nil {
				reason = LeftOutEngine
				err = sc.CheckEngine()
			}
			if err == nil {
				// An option that would price nothing in this step
				// (--overlap) is refused as predict refuses it.
				err = sc.CheckOverlap()
			}
			refusedBy[key] = err
			if err != nil {
				if firstRefusal == nil {
					firstRefusal = err
				}
				cov.LeftOut = append(cov.LeftOut, LeftOut{Reason: reason, Topology: sc.Topo.Name, BoxGPUs: sc.Topo.NumGPUs(),
					Plan: pname, KVDtype: string(sc.Workload.KVDtypeFor(sc.Arch)), SpecTokens: sc.Workload.SpecTokens, SpecMethod: string(sc.Build.Spec.Method), Detail: err.Error()})
			}
		}
		return err != nil
	}
	// A batch above what the engine runs in one step under the running
	// limit given (predict's refusal) is left out, once per box, plan and
	// batch: the KV dtype, tokens and context do not change the limit.
	type limitKey struct {
		box   int
		plan  string
		batch int
	}
	limited := map[limitKey]bool{}
	// capPreds[bi] prices box bi's KV capacity for the full-load points
	// and the pool an engine's default limit follows (SGLang's) (the
	// options and cost source are the sweep's, one per box).
	capPreds := make([]*sim.Predictor, len(boxes))
	runningLimit := func(bi int, sc sim.Scenario) (sim.RunningLimit, error) {
		if capPreds[bi] == nil {
			pr, err := sc.NewPredictor()
			if err != nil {
				return sim.RunningLimit{}, err
			}
			capPreds[bi] = pr
		}
		return capPreds[bi].RunningLimit(sc), nil
	}
	aboveLimit := func(bi int, pname string, sc sim.Scenario) (bool, error) {
		l, err := runningLimit(bi, sc)
		if err != nil {
			return false, err
		}
		err = sc.CheckRunningLimitOf(l)
		if err == nil {
			return false, nil
		}
		if key := (limitKey{bi, pname, sc.Workload.Batch}); !limited[key] {
			limited[key] = true
			cov.LeftOut = append(cov.LeftOut, LeftOut{Reason: LeftOutRunningLimit, Topology: sc.Topo.Name, BoxGPUs: sc.Topo.NumGPUs(),
				Plan: pname, Batch: sc.Workload.Batch, EngineDefault: l.Default, Detail: err.Error()})
		}
		return true, nil
	}
	var out []Config
	for _, n := range worlds {
		for _, p := range plansOf[n] {
			pname := p.Normalized().String()
			for _, kv := range kvs {
				for _, k := range runSpecs {
					for _, cx := range contexts {
						for _, b := range batches {
							w := model.Workload{Phase: model.Decode, Batch: b, Context: cx, SpecTokens: k, KVDtype: kv}
							if err := w.Validate(); err != nil {
								return nil, cov, err
							}
							for bi, t := range boxes {
								if t.NumGPUs() != n {
									continue
								}
								sc := s.scenario(t, costs[bi], p, w)
								if refused(bi, pname, sc) {
									continue
								}
								if above, err := aboveLimit(bi, pname, sc); err != nil {
									return nil, cov, err
								} else if above {
									continue
								}
								out = append(out, Config{Box: bi, planName: pname, Scenario: sc})
							}
						}
						// The load at which the KV cache is full, or the
						// running limit (given, else the engine's default) stops the box first, when the
						// swept batches miss it: what the box gives at
						// capacity.
						for bi, t := range boxes {
							if t.NumGPUs() != n {
								continue
							}
							w := model.Workload{Phase: model.Decode, Context: cx, SpecTokens: k, KVDtype: kv}
							if refusedBy[engineKey{bi, pname, kv, k}] != nil {
								continue
							}
							sc := s.scenario(t, costs[bi], p, w)
							// The engine's KV pool sets the load (its rule:
							// vLLM's or SGLang's), as a prediction of the
							// scenario states its capacity, at most the
							// running limit, given or the engine's default.
							l, err := runningLimit(bi, sc)
							if err != nil {
								return nil, cov, err
							}
							w.Batch = capPreds[bi].MaxConcurrency(sc)
							if l.TotalSeqs > 0 {
								w.Batch = min(w.Batch, l.TotalSeqs)
							}
							if w.Batch < 1 || w.Validate() != nil || slices.Contains(batches, w.Batch) {
								continue
							}
							sc.Workload = w
							out = append(out, Config{Box: bi, AtCapacity: true, planName: pname, Scenario: sc})
						}
					}
				}
			}
		}
	}
	if len(out) == 0 {
		if firstRefusal != nil && !slices.ContainsFunc(cov.LeftOut, func(l LeftOut) bool {
			return (l.Reason == LeftOutEngine || l.Reason == LeftOutBuild) && l.Detail != firstRefusal.Error()
		}) {
			return nil, cov, &EngineError{Err: firstRefusal}
		}
		if len(cov.LeftOut) > 0 {
			return nil, cov, &SpaceError{Coverage: cov}
		}
		return nil, cov, errors.New("plan: no configuration: an empty batch, context or KV dtype list")
	}
	return out, cov, nil
}

// evaluateRange evaluates cfgs into out (same length) with ev, calling
// progress (if set) after each with the count done in this call.
func evaluateRange(ev *sim.Evaluator, cfgs []Config, out []Point, slo float64, progress func(done int)) {
	for i := range cfgs {
		out[i] = evaluatePoint(ev, &cfgs[i], slo)
		out[i].AtCapacity = cfgs[i].AtCapacity
		if progress != nil {
			progress(i + 1)
		}
	}
}

func evaluatePoint(ev *sim.Evaluator, cfg *Config, slo float64) Point {
	c := &cfg.Scenario
	p := c.Plan.Normalized()
	name := cfg.planName
	if name == "" {
		name = p.String()
	}
	pt := Point{Topology: c.Topo.Name, GPUs: c.Topo.NumGPUs(), Plan: name, Batch: c.Workload.Batch,
		Context: c.Workload.Context, KVDtype: string(c.Workload.KVDtypeFor(c.Arch)), SpecTokens: c.Workload.SpecTokens,
		SpecMethod: c.Build.Spec.MethodFor(c.Workload)}
	sum, err := ev.Evaluate(*c)
	if err != nil {
		pt.Error = err.Error()
		return pt
	}
	pt.StepUs = sum.StepUs
	pt.TokensPerS = sum.TokensPerS
	pt.TokensPerSPerGPU = sum.TokensPerS / float64(p.World())
	pt.TokensPerSPerRequest = sum.TokensPerSPerRequest
	if sum.TokensPerStep > 0 {
		pt.MsPerToken = sum.StepUs / 1e3 / sum.TokensPerStep
	}
	specPoint(&pt, sum)
	if m := sum.Memory; m != nil {
		pt.Fits, pt.ShortfallGB, pt.KVCapacityTokens = m.Fits, m.ShortfallGB, m.KVCapacityTokens
		pt.MaxConcurrency, pt.ConcurrencyBound, pt.ConcurrencyLimitFrom = maxConcurrency(m.MaxConcurrency(c.Workload, p), c.RunningLimitOf(m.KVCapacityTokens))
	}
	lat := pt.MsPerToken
	if pt.MsPerTokenP90 > 0 {
		lat = pt.MsPerTokenP90
	}
	switch {
	case slo <= 0:
		pt.SLO = NoSLO
	case lat <= slo:
		pt.SLO = SLOMet
	default:
		pt.SLO = SLOMissed
	}
	return pt
}

// maxConcurrency is the sequences a box runs at once given kv, those
// its KV cache holds: at most its running limit l, given or the engine's
// default (Scenario.RunningLimitOf), what bounds it ("" when none fits)
// and, under the engine's default, which default.
func maxConcurrency(kv int, l sim.RunningLimit) (int, ConcurrencyBound, string) {
	switch {
	case kv <= 0:
		return kv, "", ""
	case l.TotalSeqs <= 0 || l.TotalSeqs >= kv:
		return kv, BoundKVCache, ""
	case l.Default:
		return l.TotalSeqs, BoundEngineDefault, l.From()
	}
	return l.TotalSeqs, BoundRunningLimit, ""
}

// Summarize derives the Pareto fronts, the best points and the capacity
// rows from evaluated points.
func Summarize(points []Point, slo float64) *Result {
	r := &Result{Points: points, Best: -1, SLOMs: slo}
	var ok []int
	for i := range points {
		pt := &points[i]
		if pt.AtCapacity {
			// Reported with its context's capacity: neither picked nor
			// counted among the configurations swept.
			r.FullLoad++
			continue
		}
		r.Evaluated++
		switch {
		case pt.Error != "":
			r.Errors++
			continue
		case !pt.Fits:
			r.NotFitting++
			continue
		case !pt.WithinSLO():
			r.MissSLO++
			continue
		}
		ok = append(ok, i)
		if r.Best < 0 || pt.TokensPerSPerGPU > points[r.Best].TokensPerSPerGPU {
			r.Best = i
		}
	}
	r.Fronts, r.BestByContext = frontsOf(points, ok)
	type capKey struct {
		topo, plan, kv  string
		gpus, spec, ctx int
	}
	rows := map[capKey]int{}
	for i := range points {
		pt := &points[i]
		if pt.Error != "" {
			continue
		}
		k := capKey{pt.Topology, pt.Plan, pt.KVDtype, pt.GPUs, pt.SpecTokens, pt.Context}
		ri, seen := rows[k]
		if !seen {
			ri = len(r.Capacity)
			rows[k] = ri
			r.Capacity = append(r.Capacity, CapacityRow{Topology: pt.Topology, GPUs: pt.GPUs, Plan: pt.Plan, KVDtype: pt.KVDtype,
				SpecTokens: pt.SpecTokens, Context: pt.Context, MaxConcurrency: pt.MaxConcurrency, ConcurrencyBound: pt.ConcurrencyBound, ConcurrencyLimitFrom: pt.ConcurrencyLimitFrom, Best: -1, Full: -1})
		}
		row := &r.Capacity[ri]
		if pt.Batch == row.MaxConcurrency && row.MaxConcurrency > 0 {
			row.Full = i
		}
		if pt.Fits && pt.WithinSLO() && !pt.AtCapacity && (row.Best < 0 || pt.TokensPerSPerGPU > points[row.Best].TokensPerSPerGPU) {
			row.Best = i
		}
	}
	return r
}

// frontsOf splits the candidates ok by (context, box) into their Pareto
// fronts and picks each context's best, contexts ascending.
func frontsOf(points []Point, ok []int) ([]Front, []int) {
	type boxKey struct {
		ctx  int
		topo string
		gpus int
	}
	var keys []boxKey
	byBox := map[boxKey][]int{}
	best := map[int]int{}
	var ctxs []int
	for _, i := range ok {
		p := &points[i]
		k := boxKey{p.Context, p.Topology, p.GPUs}
		if _, seen := byBox[k]; !seen {
			keys = append(keys, k)
		}
		byBox[k] = append(byBox[k], i)
		if b, seen := best[p.Context]; !seen {
			ctxs = append(ctxs, p.Context)
			best[p.Context] = i
		} else if p.TokensPerSPerGPU > points[b].TokensPerSPerGPU {
			best[p.Context] = i
		}
	}
	// Stable: boxes keep the order the sweep met them within a context.
	sort.SliceStable(keys, func(a, b int) bool { return keys[a].ctx < keys[b].ctx })
	sort.Ints(ctxs)
	fronts := make([]Front, 0, len(keys))
	for _, k := range keys {
		fronts = append(fronts, Front{Context: k.ctx, Topology: k.topo, GPUs: k.gpus, Points: ParetoFront(points, byBox[k])})
	}
	bests := make([]int, 0, len(ctxs))
	for _, c := range ctxs {
		bests = append(bests, best[c])
	}
	return fronts, bests
}

// ParetoFront returns the points of idx not dominated in (tokens/s per
// GPU, per-request tokens/s), by per-request tokens/s descending; equal
// points keep the first.
func ParetoFront(points []Point, idx []int) []int {
	s := append([]int(nil), idx...)
	sort.SliceStable(s, func(i, j int) bool {
		a, b := &points[s[i]], &points[s[j]]
		if a.TokensPerSPerRequest != b.TokensPerSPerRequest {
			return a.TokensPerSPerRequest > b.TokensPerSPerRequest
		}
		return a.TokensPerSPerGPU > b.TokensPerSPerGPU
	})
	var front []int
	best := math.Inf(-1)
	for _, i := range s {
		if points[i].TokensPerSPerGPU > best {
			front = append(front, i)
			best = points[i].TokensPerSPerGPU
		}
	}
	return front
}

// Run runs the whole sweep on workers goroutines (Evaluate). progress
// (if set) gets (done, total) as Evaluate gives it.
func Run(s *Space, workers int, progress func(done, total int)) (*Result, error) {
	cfgs, cov, err := s.Enumerate()
	if err != nil {
		return nil, err
	}
	points := Evaluate(cfgs, s.MaxMsPerToken, workers, progress)
	r := Summarize(points, s.MaxMsPerToken)
	r.Coverage = cov
	r.Caveats = Caveats(cfgs, r)
	return r, nil
}
