package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

// Capacity planning: sweep boxes (topology x GPU count), parallel plans
// (TP, EP, DP attention, DCP), batch, context, KV dtype and MTP tokens;
// predict every configuration with the fast Evaluator; check the memory
// fit (a configuration that does not fit is kept and reported with its
// shortfall in GB); apply a per-request latency SLO; and report the
// maximum concurrency per (box, plan, KV dtype, context), throughput per
// GPU, per-request tokens/s and the Pareto front of throughput per GPU
// against per-request tokens/s.
//
// The sweep is split into three calls so that a caller may spread it over
// goroutines (sim itself runs none): PlanSpace.Configs enumerates, any
// number of EvaluatePlan calls fill disjoint ranges of points (one
// Evaluator each), and SummarizePlan derives the front and capacities.
// RunPlan does all three in one goroutine.

// buildFor is the build options of the space's configurations on box t.
func (s *PlanSpace) buildFor(t *topology.Topology) model.BuildOptions {
	b := s.Build
	if s.ImplyDenseDSA {
		b.DenseDSA = ImpliedDenseDSA(s.Arch, t)
	}
	return b
}

// PlanSpace is the space a plan sweep covers. Nil slices take the
// defaults listed with each field.
type PlanSpace struct {
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
	Costs []CostSource
	// Plans to try; nil = PlansFor(Arch, n) for each GPU count n.
	Plans []model.Plan
	// Batches (nil = DefaultAdviseBatches), Contexts (nil =
	// DefaultAdviseContexts), KVDtypes (nil = bf16 and fp8), SpecTokens
	// (nil = {0}; MTP tokens are skipped on models without an MTP layer).
	Batches    []int
	Contexts   []int
	KVDtypes   []model.Dtype
	SpecTokens []int
	// Options are the run-time options of every configuration.
	Options Options
	// MaxMsPerToken is the per-request latency SLO: a configuration meets
	// it when step time / tokens per step <= MaxMsPerToken ms (0 = none).
	MaxMsPerToken float64
}

// PlanConfig is one configuration of the sweep.
type PlanConfig struct {
	Box      int // index into PlanSpace boxes (see PlanSpace.Boxes)
	Scenario Scenario
	// AtCapacity marks the configuration added at the box's maximum
	// concurrency for its context (not one of the swept batches).
	AtCapacity bool
}

// maxConcurrency is how many sequences of w's context fit in the KV cache
// of plan p on box t (all DP groups): model.KVCapacity's tokens per
// attention group / (context + 1 + speculative tokens) x DP, 0 when the
// weights do not fit.
func maxConcurrency(a *model.Arch, p model.Plan, w model.Workload, o model.BuildOptions, t *topology.Topology, util float64) int {
	d := t.DeviceOf(0)
	if d == nil {
		return 0
	}
	w.Batch = 1
	c := model.KVCapacity(a, p, w, o, float64(d.MemBytes), util)
	if c.KVCapacityTokens <= 0 {
		return 0
	}
	return int(c.KVCapacityTokens/int64(w.Context+1+w.SpecTokens)) * p.Normalized().DP
}

// PlanPoint is one evaluated configuration.
type PlanPoint struct {
	Topology   string `json:"topology"`
	GPUs       int    `json:"gpus"`
	Plan       string `json:"plan"`
	Batch      int    `json:"batch"`
	Context    int    `json:"context"`
	KVDtype    string `json:"kv_dtype"`
	SpecTokens int    `json:"spec_tokens"`

	StepUs               float64 `json:"step_us"`
	MsPerToken           float64 `json:"ms_per_token"` // per request: step / tokens per step
	TokensPerS           float64 `json:"tokens_per_s"`
	TokensPerSPerGPU     float64 `json:"tokens_per_s_per_gpu"`
	TokensPerSPerRequest float64 `json:"tokens_per_s_per_request"`

	Fits        bool    `json:"fits"`
	ShortfallGB float64 `json:"shortfall_gb,omitempty"`
	// KVCapacityTokens per attention group (per GPU of the group);
	// MaxConcurrency the sequences of this context that fit on the box
	// (all DP groups).
	KVCapacityTokens int64 `json:"kv_capacity_tokens"`
	MaxConcurrency   int   `json:"max_concurrency"`
	MeetsSLO         bool  `json:"meets_slo"`
	// AtCapacity: the batch is the maximum concurrency (added to the
	// sweep), not one of the swept batches.
	AtCapacity bool   `json:"at_capacity,omitempty"`
	Error      string `json:"error,omitempty"`
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
	// Best is the index into Points of the batch with the most tokens/s
	// per GPU that fits and meets the SLO (-1 none); Full the point at
	// MaxConcurrency sequences (-1 when not evaluated).
	Best int `json:"best"`
	Full int `json:"full"`
}

// PlanResult is the outcome of a sweep.
type PlanResult struct {
	Points []PlanPoint `json:"points"`
	// Pareto indexes Points on the front (fitting, meeting the SLO, no
	// other point better in both throughput per GPU and per-request
	// tokens/s), by per-request tokens/s descending.
	Pareto []int `json:"pareto"`
	// Best is the fitting point that meets the SLO with the highest
	// throughput per GPU (-1 none).
	Best       int           `json:"best"`
	Capacity   []CapacityRow `json:"capacity"`
	Evaluated  int           `json:"evaluated"`
	NotFitting int           `json:"not_fitting"`
	MissSLO    int           `json:"miss_slo"`
	Errors     int           `json:"errors"`
	SLOMs      float64       `json:"slo_ms_per_token,omitempty"`
	// Caveats: known gaps of the sweep's numbers (PlanCaveats).
	Caveats []string `json:"caveats,omitempty"`
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
	for d := 2; d <= n; d *= 2 {
		if n%d == 0 {
			try(model.Plan{TP: n, DCP: d})
		}
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
func (s *PlanSpace) Boxes() ([]*topology.Topology, error) {
	out, _, err := s.boxes()
	return out, err
}

// boxes is Boxes with each box's cost source.
func (s *PlanSpace) boxes() ([]*topology.Topology, []CostSource, error) {
	var out []*topology.Topology
	var costs []CostSource
	for ti, t := range s.Topologies {
		var src CostSource
		if ti < len(s.Costs) {
			src = s.Costs[ti]
		}
		if t == nil {
			return nil, nil, errors.New("plan: nil topology")
		}
		counts := s.GPUCounts
		if counts == nil {
			for n := 2; n < t.NumGPUs(); n *= 2 {
				counts = append(counts, n)
			}
			counts = append(counts, t.NumGPUs())
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

// Configs enumerates the sweep. Boxes with the same GPU count are the
// innermost loop, so consecutive configurations share a schedule.
func (s *PlanSpace) Configs() ([]PlanConfig, error) {
	if s.Arch == nil {
		return nil, errors.New("plan: no architecture")
	}
	if s.MaxMsPerToken < 0 {
		return nil, fmt.Errorf("plan: latency SLO %v ms/token: want >= 0", s.MaxMsPerToken)
	}
	boxes, costs, err := s.boxes()
	if err != nil {
		return nil, err
	}
	if len(boxes) == 0 {
		return nil, errors.New("plan: no box: every GPU count exceeds the topologies' GPUs")
	}
	batches, contexts, kvs, specs := s.Batches, s.Contexts, s.KVDtypes, s.SpecTokens
	if batches == nil {
		batches = DefaultAdviseBatches
	}
	if contexts == nil {
		contexts = DefaultAdviseContexts
	}
	if kvs == nil {
		kvs = model.KVDtypes
	}
	if specs == nil {
		specs = []int{0}
	}
	for _, b := range batches {
		if b < 1 {
			return nil, fmt.Errorf("plan: batch %d: want at least 1", b)
		}
	}
	for _, c := range contexts {
		if c < 1 {
			return nil, fmt.Errorf("plan: context %d: want at least 1 token", c)
		}
	}
	// GPU counts in first-seen order.
	var worlds []int
	for _, t := range boxes {
		if !slices.Contains(worlds, t.NumGPUs()) {
			worlds = append(worlds, t.NumGPUs())
		}
	}
	var out []PlanConfig
	for _, n := range worlds {
		plans := s.Plans
		if plans == nil {
			plans = PlansFor(s.Arch, n)
		}
		for _, p := range plans {
			if p.World() != n {
				continue
			}
			if err := p.Validate(s.Arch); err != nil {
				return nil, fmt.Errorf("plan %s: %w", p.Normalized(), err)
			}
			for _, kv := range kvs {
				for _, k := range specs {
					if k > 0 && s.Arch.MTPLayers == 0 {
						continue
					}
					for _, cx := range contexts {
						for _, b := range batches {
							w := model.Workload{Phase: model.Decode, Batch: b, Context: cx, SpecTokens: k, KVDtype: kv}
							if err := w.Validate(); err != nil {
								return nil, err
							}
							for bi, t := range boxes {
								if t.NumGPUs() != n {
									continue
								}
								out = append(out, PlanConfig{Box: bi, Scenario: Scenario{
									Arch: s.Arch, Plan: p, Workload: w, Build: s.buildFor(t), Options: s.Options, Topo: t, Costs: costs[bi]}})
							}
						}
						// The load at which the KV cache is full, when the
						// swept batches miss it: what the box gives at
						// capacity.
						for bi, t := range boxes {
							if t.NumGPUs() != n {
								continue
							}
							w := model.Workload{Phase: model.Decode, Context: cx, SpecTokens: k, KVDtype: kv}
							w.Batch = maxConcurrency(s.Arch, p, w, s.buildFor(t), t, s.Options.GPUMemUtilFrac)
							if w.Batch < 1 || w.Validate() != nil || slices.Contains(batches, w.Batch) {
								continue
							}
							out = append(out, PlanConfig{Box: bi, AtCapacity: true, Scenario: Scenario{
								Arch: s.Arch, Plan: p, Workload: w, Build: s.buildFor(t), Options: s.Options, Topo: t, Costs: costs[bi]}})
						}
					}
				}
			}
		}
	}
	return out, nil
}

// EvaluatePlan evaluates cfgs into out (same length) with ev, calling
// progress (if set) after each with the count done in this call.
func EvaluatePlan(ev *Evaluator, cfgs []PlanConfig, out []PlanPoint, slo float64, progress func(done int)) {
	for i := range cfgs {
		out[i] = evaluatePoint(ev, &cfgs[i].Scenario, slo)
		out[i].AtCapacity = cfgs[i].AtCapacity
		if progress != nil {
			progress(i + 1)
		}
	}
}

func evaluatePoint(ev *Evaluator, c *Scenario, slo float64) PlanPoint {
	p := c.Plan.Normalized()
	pt := PlanPoint{Topology: c.Topo.Name, GPUs: c.Topo.NumGPUs(), Plan: p.String(), Batch: c.Workload.Batch,
		Context: c.Workload.Context, KVDtype: string(c.Workload.KVDtypeFor(c.Arch)), SpecTokens: c.Workload.SpecTokens}
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
	if m := sum.Memory; m != nil {
		pt.Fits, pt.ShortfallGB, pt.KVCapacityTokens = m.Fits, m.ShortfallGB, m.KVCapacityTokens
		perSeq := int64(c.Workload.Context + 1 + c.Workload.SpecTokens)
		if m.KVCapacityTokens > 0 {
			pt.MaxConcurrency = int(m.KVCapacityTokens/perSeq) * p.DP
		}
	}
	pt.MeetsSLO = slo <= 0 || pt.MsPerToken <= slo
	return pt
}

// SummarizePlan derives the Pareto front, the best point and the capacity
// rows from evaluated points.
func SummarizePlan(points []PlanPoint, slo float64) *PlanResult {
	r := &PlanResult{Points: points, Best: -1, SLOMs: slo, Evaluated: len(points)}
	var ok []int
	for i := range points {
		pt := &points[i]
		switch {
		case pt.Error != "":
			r.Errors++
			continue
		case !pt.Fits:
			r.NotFitting++
			continue
		case !pt.MeetsSLO:
			r.MissSLO++
			continue
		}
		ok = append(ok, i)
		if r.Best < 0 || pt.TokensPerSPerGPU > points[r.Best].TokensPerSPerGPU {
			r.Best = i
		}
	}
	r.Pareto = paretoFront(points, ok)
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
				SpecTokens: pt.SpecTokens, Context: pt.Context, MaxConcurrency: pt.MaxConcurrency, Best: -1, Full: -1})
		}
		row := &r.Capacity[ri]
		if pt.Batch == row.MaxConcurrency && row.MaxConcurrency > 0 {
			row.Full = i
		}
		if pt.Fits && pt.MeetsSLO && (row.Best < 0 || pt.TokensPerSPerGPU > points[row.Best].TokensPerSPerGPU) {
			row.Best = i
		}
	}
	return r
}

// paretoFront returns the points of idx not dominated in (tokens/s per
// GPU, per-request tokens/s), by per-request tokens/s descending; equal
// points keep the first.
func paretoFront(points []PlanPoint, idx []int) []int {
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

// RunPlan runs the whole sweep in the calling goroutine. progress (if
// set) gets (done, total) after each configuration.
func RunPlan(s *PlanSpace, progress func(done, total int)) (*PlanResult, error) {
	cfgs, err := s.Configs()
	if err != nil {
		return nil, err
	}
	points := make([]PlanPoint, len(cfgs))
	var ev Evaluator
	var pf func(int)
	if progress != nil {
		pf = func(d int) { progress(d, len(cfgs)) }
	}
	EvaluatePlan(&ev, cfgs, points, s.MaxMsPerToken, pf)
	r := SummarizePlan(points, s.MaxMsPerToken)
	r.Caveats = PlanCaveats(cfgs, r)
	return r, nil
}
