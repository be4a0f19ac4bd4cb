package exec

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/tpscope/tpscope/internal/stats"
	"github.com/tpscope/tpscope/model"
)

// Result is what a Run measured. Times are microseconds. Index order of the
// per-op tables: [measured step][local rank index][op index], where the local
// rank index k names rank LocalRanks[k] and op index i names
// Schedule.Ranks[LocalRanks[k]][i].
type Result struct {
	Backend    string         `json:"backend"`
	Model      string         `json:"model"`
	Plan       model.Plan     `json:"plan"`
	Workload   model.Workload `json:"workload"`
	LocalRanks []int          `json:"local_ranks"`
	Warmup     int            `json:"warmup"`    // warm-up steps run before the measured ones
	Requested  int            `json:"requested"` // measured steps asked for
	Steps      int            `json:"steps"`     // measured steps completed (len(StepUs))
	// Timing is schema.TimingHostClock or schema.TimingDeviceEvents.
	Timing string `json:"timing"`
	// Graphs reports that measured steps were replayed CUDA graphs.
	Graphs bool `json:"graphs"`

	// StepUs[s] is measured step s's time: earliest op start to latest op
	// end over the local ranks.
	StepUs []float64 `json:"step_us"`
	// OpUs[s][k][i] is the measured (device) time of op i on local rank k.
	OpUs [][][]float64 `json:"op_us"`
	// LaunchUs[s][k][i] is the host time spent issuing it (equal to OpUs
	// for a synchronous backend; zero-width in graph mode).
	LaunchUs [][][]float64 `json:"launch_us"`

	Summary Summary `json:"summary"`
}

// Summary condenses a Result.
type Summary struct {
	// Step-time statistics over measured steps, microseconds. Quantiles
	// interpolate linearly between order statistics (R type 7, numpy's
	// default), so p10 of 10 steps lies between the 1st and 2nd fastest.
	StepMedianUs float64 `json:"step_median_us"`
	StepP10Us    float64 `json:"step_p10_us"`
	StepP90Us    float64 `json:"step_p90_us"`
	StepMeanUs   float64 `json:"step_mean_us"`
	StepMinUs    float64 `json:"step_min_us"`
	StepMaxUs    float64 `json:"step_max_us"`
	// TokensPerStep is what one step processes: decode Batch x
	// (1 + SpecTokens), prefill Batch x Context (Workload as given).
	TokensPerStep float64 `json:"tokens_per_step"`
	// TokensPerS is TokensPerStep / median step time.
	TokensPerS float64 `json:"tokens_per_s"`
	// ByKind is the per-kind breakdown, largest first.
	ByKind []KindTime `json:"by_kind"`
}

// KindTime is the time one op kind takes per step: the median over the
// measured steps and local ranks of the sum of that kind's op times in
// one step on one rank (the statistic compare reports for a kind from the
// run's trace, so both say one number for one run).
type KindTime struct {
	Kind      model.OpKind `json:"kind"`
	Ops       int          `json:"ops"`        // ops of this kind per step on one rank (mean over ranks, rounded)
	Us        float64      `json:"us"`         // microseconds per step
	ShareFrac float64      `json:"share_frac"` // Us / sum of Us over kinds
}

func newResult(s *model.Schedule, backend string, local []int, warmup, steps int) *Result {
	return &Result{
		Backend: backend, Model: s.Model, Plan: s.Plan, Workload: s.Workload,
		LocalRanks: slices.Clone(local), Warmup: warmup, Requested: steps,
	}
}

// addStep appends a complete measured step from the ranks' recorded times.
func (res *Result) addStep(ranks []*rankState, stepUs float64) {
	opUs, launchUs := make([][]float64, len(ranks)), make([][]float64, len(ranks))
	for k, rs := range ranks {
		opUs[k] = slices.Clone(rs.opUs)
		launchUs[k] = slices.Clone(rs.launchUs)
	}
	res.StepUs = append(res.StepUs, stepUs)
	res.OpUs = append(res.OpUs, opUs)
	res.LaunchUs = append(res.LaunchUs, launchUs)
	res.Steps = len(res.StepUs)
}

// summarize fills res.Summary (and Timing is set by the caller).
func (res *Result) summarize(s *model.Schedule) {
	sm := Summary{}
	w := s.Workload
	switch w.Phase {
	case model.Prefill:
		sm.TokensPerStep = float64(w.Batch) * float64(w.Context)
	default:
		sm.TokensPerStep = float64(w.Batch) * float64(1+w.SpecTokens)
	}
	if len(res.StepUs) > 0 {
		st := slices.Clone(res.StepUs)
		slices.Sort(st)
		sm.StepMedianUs = stats.Quantile(st, 0.5)
		sm.StepP10Us = stats.Quantile(st, 0.1)
		sm.StepP90Us = stats.Quantile(st, 0.9)
		sm.StepMinUs, sm.StepMaxUs = st[0], st[len(st)-1]
		sum := 0.0
		for _, v := range st {
			sum += v
		}
		sm.StepMeanUs = sum / float64(len(st))
		if sm.StepMedianUs > 0 {
			sm.TokensPerS = sm.TokensPerStep / (sm.StepMedianUs / 1e6)
		}
		sm.ByKind = res.byKind(s)
	}
	res.Summary = sm
}

func (res *Result) byKind(s *model.Schedule) []KindTime {
	// sums[kind] holds one sum per (measured step, local rank).
	sums := map[model.OpKind][]float64{}
	ops := map[model.OpKind]int{}
	step := map[model.OpKind]float64{}
	for k, rank := range res.LocalRanks {
		for _, op := range s.Ranks[rank] {
			ops[op.Kind]++
		}
		for st := range res.OpUs {
			clear(step)
			for i, op := range s.Ranks[rank] {
				step[op.Kind] += res.OpUs[st][k][i]
			}
			for kind, v := range step {
				sums[kind] = append(sums[kind], v)
			}
		}
	}
	nr := float64(len(res.LocalRanks))
	total := 0.0
	out := make([]KindTime, 0, len(ops))
	for kind, n := range ops {
		kt := KindTime{Kind: kind, Ops: int(math.Round(float64(n) / nr))}
		if v := sums[kind]; len(v) > 0 {
			slices.Sort(v)
			kt.Us = stats.Quantile(v, 0.5)
		}
		total += kt.Us
		out = append(out, kt)
	}
	for i := range out {
		if total > 0 {
			out[i].ShareFrac = out[i].Us / total
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Us != out[j].Us {
			return out[i].Us > out[j].Us
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}

// MergeResults joins the Results of the processes of one multi-process run
// of sched, each of which ran some of its ranks (one rank per process under
// a launcher): the local ranks of all parts in ascending order, the
// measured steps that every part completed, and the summary recomputed.
// A merged step's time is the longest any part measured for it: each
// process times its own ranks from the earliest op start to the latest op
// end, and without a clock shared between processes the union of those
// intervals is not known; the slowest part bounds it from below (ranks
// that meet in collectives every layer end within one collective of each
// other). Parts must agree on backend, timing, warm-up and requested
// steps; a rank in two parts is an error.
func MergeResults(sched *model.Schedule, parts ...*Result) (*Result, error) {
	if len(parts) == 0 {
		return nil, errors.New("merge results: no parts")
	}
	type owner struct{ part, k int }
	var order []int
	where := map[int]owner{}
	steps := math.MaxInt
	p0 := parts[0]
	graphs := true
	for pi, p := range parts {
		if p == nil {
			return nil, fmt.Errorf("merge results: part %d is missing", pi)
		}
		if p.Backend != p0.Backend || p.Timing != p0.Timing || p.Warmup != p0.Warmup || p.Requested != p0.Requested {
			return nil, fmt.Errorf("merge results: part %d ran backend %s, timing %s, %d warm-up, %d steps asked; part 0 %s, %s, %d, %d",
				pi, p.Backend, p.Timing, p.Warmup, p.Requested, p0.Backend, p0.Timing, p0.Warmup, p0.Requested)
		}
		for k, r := range p.LocalRanks {
			if r < 0 || r >= len(sched.Ranks) {
				return nil, fmt.Errorf("merge results: part %d ran rank %d; the schedule has %d", pi, r, len(sched.Ranks))
			}
			if _, dup := where[r]; dup {
				return nil, fmt.Errorf("merge results: rank %d is in two parts", r)
			}
			where[r] = owner{pi, k}
			order = append(order, r)
		}
		steps = min(steps, p.Steps, len(p.StepUs), len(p.OpUs), len(p.LaunchUs))
		graphs = graphs && p.Graphs
	}
	slices.Sort(order)
	res := newResult(sched, p0.Backend, order, p0.Warmup, p0.Requested)
	res.Timing, res.Graphs = p0.Timing, graphs
	for s := range steps {
		opUs, launchUs := make([][]float64, len(order)), make([][]float64, len(order))
		stepUs := 0.0
		for k, r := range order {
			o := where[r]
			p := parts[o.part]
			if o.k >= len(p.OpUs[s]) || o.k >= len(p.LaunchUs[s]) || len(p.OpUs[s][o.k]) != len(sched.Ranks[r]) || len(p.LaunchUs[s][o.k]) != len(sched.Ranks[r]) {
				return nil, fmt.Errorf("merge results: part %d step %d: rank %d's op times do not match its %d ops", o.part, s, r, len(sched.Ranks[r]))
			}
			opUs[k] = p.OpUs[s][o.k]
			launchUs[k] = p.LaunchUs[s][o.k]
		}
		for _, p := range parts {
			stepUs = max(stepUs, p.StepUs[s])
		}
		res.StepUs = append(res.StepUs, stepUs)
		res.OpUs = append(res.OpUs, opUs)
		res.LaunchUs = append(res.LaunchUs, launchUs)
	}
	res.Steps = len(res.StepUs)
	res.summarize(sched)
	return res, nil
}
