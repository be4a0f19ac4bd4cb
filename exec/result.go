package exec

import (
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
	Backend    string
	Model      string
	Plan       model.Plan
	Workload   model.Workload
	LocalRanks []int
	Warmup     int // warm-up steps run before the measured ones
	Requested  int // measured steps asked for
	Steps      int // measured steps completed (len(StepUs))
	// Timing is schema.TimingHostClock or schema.TimingDeviceEvents.
	Timing string
	// Graphs reports that measured steps were replayed CUDA graphs.
	Graphs bool

	// StepUs[s] is measured step s's time: earliest op start to latest op
	// end over the local ranks.
	StepUs []float64
	// OpUs[s][k][i] is the measured (device) time of op i on local rank k.
	OpUs [][][]float64
	// LaunchUs[s][k][i] is the host time spent issuing it (equal to OpUs
	// for a synchronous backend; zero-width in graph mode).
	LaunchUs [][][]float64

	Summary Summary
}

// Summary condenses a Result.
type Summary struct {
	// Step-time statistics over measured steps, microseconds. Quantiles
	// interpolate linearly between order statistics (R type 7, numpy's
	// default), so p10 of 10 steps lies between the 1st and 2nd fastest.
	StepMedianUs, StepP10Us, StepP90Us, StepMeanUs, StepMinUs, StepMaxUs float64
	// TokensPerStep is what one step processes: decode Batch x
	// (1 + SpecTokens), prefill Batch x Context (Workload as given).
	TokensPerStep float64
	// TokensPerS is TokensPerStep / median step time.
	TokensPerS float64
	// ByKind is the per-kind breakdown, largest first.
	ByKind []KindTime
}

// KindTime is the time one op kind takes per step: for each local rank the
// sum over its ops of that kind of the op's median time over measured steps,
// then the mean over local ranks.
type KindTime struct {
	Kind  model.OpKind
	Ops   int     // ops of this kind per step on one rank (mean over ranks, rounded)
	Us    float64 // microseconds per step
	Share float64 // Us / sum of Us over kinds
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
	us := map[model.OpKind]float64{}
	ops := map[model.OpKind]int{}
	col := make([]float64, len(res.OpUs))
	for k, rank := range res.LocalRanks {
		for i, op := range s.Ranks[rank] {
			for st := range res.OpUs {
				col[st] = res.OpUs[st][k][i]
			}
			slices.Sort(col)
			us[op.Kind] += stats.Quantile(col, 0.5)
			ops[op.Kind]++
		}
	}
	nr := float64(len(res.LocalRanks))
	total := 0.0
	out := make([]KindTime, 0, len(us))
	for kind, v := range us {
		kt := KindTime{Kind: kind, Us: v / nr, Ops: int(math.Round(float64(ops[kind]) / nr))}
		total += kt.Us
		out = append(out, kt)
	}
	for i := range out {
		if total > 0 {
			out[i].Share = out[i].Us / total
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
