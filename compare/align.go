package compare

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/traces"
	"github.com/tpscope/tpscope/traces/schema"
)

// Alignment of measured spans to predicted ops.
//
// By op ID (AlignByOpID): spans written by the executor (OTLP file,
// Jaeger) carry AttrOpID; each op span is a sample of the predicted op of
// that ID (on its rank when the prediction is not symmetric).
//
// By kind and order (AlignByKindOrder): kernels of a profiler trace have no
// op ID, only the kind ClassifyKernel gave them. Per step, rank and kind,
// the k-th kernel is matched with the k-th predicted op of that kind when
// the counts agree; when the trace has a multiple of the number of layers
// that run that kind (the engine splits or fuses kernels differently from
// the schedule), consecutive kernels are summed per layer and compared with
// that layer's ops of the kind; otherwise the kind is compared as one total
// per step. NCCL kernels are collectives and match the schedule's
// collectives in order.

// Alignment modes.
const (
	AlignByOpID      = "op-id"
	AlignByKindOrder = "kind-order"
)

// Unit is what one measured sample stands for: one predicted op, or a
// group of them (a layer's ops of one kind, a step's ops of one kind) when
// the trace does not resolve single ops.
type Unit struct {
	// Key is the op ID, "L07:attention" (a layer's ops of a kind; "embed",
	// "head" or "mtp" for ops outside the decoder layers) or
	// "step:attention" (every op of the kind in the step).
	Key   string       `json:"key"`
	Kind  model.OpKind `json:"kind"`
	Layer int          `json:"layer"`
	// Rank is -1 when the prediction is symmetric: rank 0's ops stand for
	// every rank.
	Rank int `json:"rank"`
	// Ops are indices into Prediction.Ops; PredictedUs the sum of their
	// sim.OpResult.SpanUs: the time their spans can hold.
	Ops         []int   `json:"-"`
	PredictedUs float64 `json:"predicted_us"`
	// Skipped: the backend did not run the unit (op spans with
	// tpscope.skipped, e.g. collectives of a one-rank shard run); its
	// predicted time is left out of the step the run is compared with.
	Skipped bool `json:"-"`
	// Fused: the unit's op is folded into its neighbour's kernel
	// (all-reduce + RMSNorm fusion), so no span of its own is expected.
	Fused bool `json:"-"`
}

// NeverMeasured marks the units that no sample of a step keep keeps
// (nil: every step) measured, other than those the backend skipped or
// that are fused into a neighbour: the predicted ops the traces'
// program did not run as the schedule has them. Their predicted time is
// left out of the sums a comparison sets beside measured time.
func (a *Alignment) NeverMeasured(keep func(step int) bool) []bool {
	measured := make([]bool, len(a.Units))
	for _, s := range a.Samples {
		if keep == nil || keep(int(s.Step)) {
			measured[s.Unit] = true
		}
	}
	never := make([]bool, len(a.Units))
	for i := range a.Units {
		u := &a.Units[i]
		never[i] = !measured[i] && !u.Skipped && !u.Fused
	}
	return never
}

// Sample is one measurement of a unit: a span (or a sum of kernels) of one
// step on one rank. Trace is the index of its trace in the list Align was
// given: two runs of a scenario number their steps alike, so a step is
// told apart only by (Trace, Step).
type Sample struct {
	Unit  int32
	Trace int32
	Step  int32
	Rank  int32
	Us    float64
}

// StepTime is the measured extent of one step of one trace on one rank:
// from the start of its first op span (StartNs) to the end of its last
// (EndNs), Us long. One trace's spans share one clock (the process that
// recorded them), so its ranks' extents of one step can be joined.
type StepTime struct {
	Trace          int
	Step           int
	Rank           int
	StartNs, EndNs int64
	Us             float64
}

// Issue counts spans or ops of one kind of problem, with a few examples.
type Issue struct {
	Reason   string   `json:"reason"`
	Count    int      `json:"count"`
	Examples []string `json:"examples,omitempty"`
}

// maxIssueExamples bounds Issue.Examples.
const maxIssueExamples = 5

// Issue reasons the aligner reports.
const (
	IssueNoOpID        = "op span without an op ID (tpscope.op.id)"
	IssueUnknownOpID   = "op ID not in the prediction"
	IssueMissing       = "predicted op never measured"
	IssueSkippedSpan   = "span marked skipped by the backend (tpscope.skipped)"
	IssueBadDuration   = "span with a zero or negative duration or no start time"
	IssueKindNotInPlan = "kernels of a kind the prediction has no op of"
	IssueCountMismatch = "step whose kernel count of a kind differs from the other steps'"
	IssueKindGrouped   = "kind whose kernel count does not match the predicted ops one to one"
)

type issues struct {
	list []Issue
	idx  map[string]int
}

func (is *issues) add(reason string, n int, example string) {
	if is.idx == nil {
		is.idx = map[string]int{}
	}
	i, ok := is.idx[reason]
	if !ok {
		i = len(is.list)
		is.idx[reason] = i
		is.list = append(is.list, Issue{Reason: reason})
	}
	is.list[i].Count += n
	// Examples are distinct: the spans of one unplaced kernel repeat its
	// name, which says nothing the first did not.
	if example != "" && len(is.list[i].Examples) < maxIssueExamples && !slices.Contains(is.list[i].Examples, example) {
		is.list[i].Examples = append(is.list[i].Examples, example)
	}
}

// Alignment is the result of Align.
type Alignment struct {
	Mode    string     `json:"mode"`
	Units   []Unit     `json:"units"`
	Samples []Sample   `json:"-"`
	Steps   []StepTime `json:"-"`
	// Spans counts the op spans (or kernels) seen; Matched those that
	// became (part of) a sample.
	Spans   int     `json:"spans"`
	Matched int     `json:"matched"`
	Issues  []Issue `json:"issues,omitempty"`
}

// Align matches the op spans of traces (each element the spans of one
// trace, as Result.Spans holds them: sorted by start) with pr's ops. Mode
// "" picks AlignByOpID when any span has an op ID, else AlignByKindOrder.
// Problems are counted in Alignment.Issues, never errors.
func Align(trs [][]traces.Span, pr *sim.Prediction, mode string) *Alignment {
	if mode == "" {
		mode = AlignByKindOrder
	find:
		for _, tr := range trs {
			for i := range tr {
				if tr[i].OpID != "" {
					mode = AlignByOpID
					break find
				}
			}
		}
	}
	a := &Alignment{Mode: mode}
	n := 0
	for _, tr := range trs {
		n += len(tr)
	}
	a.Samples = make([]Sample, 0, n)
	var is issues
	if mode == AlignByOpID {
		a.alignByID(trs, pr, &is)
	} else {
		a.alignByKind(trs, pr, &is)
	}
	a.Issues = is.list
	return a
}

// spanUs is the measured device time of s in us: AttrDeviceUs when
// present (exact), else the span's duration.
func spanUs(s *traces.Span) float64 {
	if s.DeviceUs > 0 {
		return s.DeviceUs
	}
	return float64(s.Duration) / 1e3
}

func skippedSpan(s *traces.Span) bool {
	v, ok := s.Attr(string(schema.AttrSkipped))
	return ok && v.Type() == traces.TypeBool && v.AsBool()
}

// extents tracks per-rank first start and last end of one trace's op spans.
type extents struct {
	lo, hi []int64
	step   []int
}

func (e *extents) reset() {
	for i := range e.lo {
		e.lo[i], e.hi[i], e.step[i] = 0, 0, -1
	}
}

func (e *extents) add(s *traces.Span) {
	r := s.Rank
	if r < 0 {
		r = 0
	}
	if r > 1<<16 {
		return
	}
	for r >= len(e.lo) {
		e.lo, e.hi, e.step = append(e.lo, 0), append(e.hi, 0), append(e.step, -1)
	}
	if e.hi[r] == 0 || s.Start < e.lo[r] {
		e.lo[r] = s.Start
	}
	if end := s.End(); end > e.hi[r] {
		e.hi[r] = end
	}
	e.step[r] = s.Step
}

func (e *extents) flush(out []StepTime, trace int) []StepTime {
	for r := range e.lo {
		if e.hi[r] > e.lo[r] {
			out = append(out, StepTime{Trace: trace, Step: e.step[r], Rank: r, StartNs: e.lo[r], EndNs: e.hi[r], Us: float64(e.hi[r]-e.lo[r]) / 1e3})
		}
	}
	e.reset()
	return out
}

func (a *Alignment) alignByID(trs [][]traces.Span, pr *sim.Prediction, is *issues) {
	// One unit per predicted op; index by ID (symmetric) or by rank and ID.
	a.Units = make([]Unit, len(pr.Ops))
	var byID map[string]int32
	var byRank []map[string]int32
	if pr.Symmetric {
		byID = make(map[string]int32, len(pr.Ops))
	}
	for i := range pr.Ops {
		op := &pr.Ops[i]
		u := Unit{Key: op.ID, Kind: op.Kind, Layer: op.Layer, Rank: op.Rank, Ops: []int{i}, PredictedUs: op.SpanUs(), Fused: op.Cost.Fused}
		if pr.Symmetric {
			u.Rank = -1
			byID[op.ID] = int32(i)
		} else {
			for op.Rank >= len(byRank) {
				byRank = append(byRank, map[string]int32{})
			}
			byRank[op.Rank][op.ID] = int32(i)
		}
		a.Units[i] = u
	}
	seen := make([]bool, len(a.Units))
	var ext extents
	// An engine runs one op as several kernels (a GEMM and its split-K
	// reduce, FlashMLA and its combine, a grouped GEMM per expert chunk):
	// their time in a step adds up to the op's, so they make one sample.
	type sampleKey struct{ unit, step, rank int32 }
	at := map[sampleKey]int{}
	for ti, tr := range trs {
		clear(at)
		for i := range tr {
			s := &tr[i]
			if !traces.IsOpSpan(s) {
				continue
			}
			a.Spans++
			if s.OpID == "" {
				is.add(IssueNoOpID, 1, s.Name)
				continue
			}
			var u int32 = -1
			if pr.Symmetric {
				if v, ok := byID[s.OpID]; ok {
					u = v
				}
			} else if s.Rank >= 0 && s.Rank < len(byRank) {
				if v, ok := byRank[s.Rank][s.OpID]; ok {
					u = v
				}
			}
			if u < 0 {
				is.add(IssueUnknownOpID, 1, fmt.Sprintf("%s (rank %d)", s.OpID, s.Rank))
				continue
			}
			if skippedSpan(s) {
				is.add(IssueSkippedSpan, 1, s.OpID)
				seen[u] = true
				a.Units[u].Skipped = true
				if s.Start > 0 {
					// Its call took its place in the rank's step (run's
					// step time counts it), whatever it ran.
					ext.add(s)
				}
				continue
			}
			us := spanUs(s)
			if !(us > 0) || s.Start <= 0 {
				is.add(IssueBadDuration, 1, s.OpID)
				continue
			}
			seen[u] = true
			ext.add(s)
			a.Matched++
			k := sampleKey{u, int32(s.Step), int32(max(s.Rank, 0))}
			if j, ok := at[k]; ok {
				a.Samples[j].Us += us
				continue
			}
			at[k] = len(a.Samples)
			a.Samples = append(a.Samples, Sample{Unit: k.unit, Trace: int32(ti), Step: k.step, Rank: k.rank, Us: us})
		}
		a.Steps = ext.flush(a.Steps, ti)
	}
	for i := range a.Units {
		if !seen[i] && !pr.Ops[i].Cost.Fused {
			is.add(IssueMissing, 1, a.Units[i].Key)
		}
	}
}

// opLabel is the part of an op ID before the first dot: "L07", "embed".
func opLabel(id string) string {
	if i := strings.IndexByte(id, '.'); i > 0 {
		return id[:i]
	}
	return id
}

// kindPlan says how one (rank, kind)'s kernels map to units.
type kindPlan struct {
	count int     // kernels per step the plan expects
	units []int32 // units in order
	per   int     // kernels summed per unit
}

func (a *Alignment) alignByKind(trs [][]traces.Span, pr *sim.Prediction, is *issues) {
	// rk is a (rank, kind): of a span as measured, or of a plan, whose
	// rank is -1 when the prediction is symmetric (planOf).
	type rk struct {
		rank int
		kind string
	}
	planOf := func(k rk) rk {
		if pr.Symmetric {
			k.rank = -1
		}
		return k
	}
	// Predicted ops per plan key, in issue order, without fused ops.
	pred := map[rk][]int{}
	for i := range pr.Ops {
		op := &pr.Ops[i]
		if op.Cost.Fused {
			continue
		}
		k := planOf(rk{op.Rank, string(op.Kind)})
		pred[k] = append(pred[k], i)
	}
	// Pass 1: kernel counts per (trace, rank, kind) -> most common count
	// per plan key (every rank's count counts once).
	hist := map[rk]map[int]int{}
	counts := map[rk]int{}
	for _, tr := range trs {
		clear(counts)
		for i := range tr {
			if s := &tr[i]; traces.IsOpSpan(s) {
				counts[rk{s.Rank, s.OpKind}]++
			}
		}
		for k, n := range counts {
			key := planOf(k)
			if hist[key] == nil {
				hist[key] = map[int]int{}
			}
			hist[key][n]++
		}
	}
	keys := make([]rk, 0, len(hist))
	for k := range hist {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].rank != keys[j].rank {
			return keys[i].rank < keys[j].rank
		}
		return keys[i].kind < keys[j].kind
	})
	plans := map[rk]*kindPlan{}
	for _, k := range keys {
		ops := pred[k]
		if len(ops) == 0 {
			continue // reported per kernel below
		}
		mode, best := 0, -1
		for n, c := range hist[k] {
			if c > best || (c == best && n < mode) {
				mode, best = n, c
			}
		}
		p := &kindPlan{count: mode}
		newUnit := func(key string, layer int, idx []int) {
			u := Unit{Key: key, Kind: model.OpKind(k.kind), Layer: layer, Rank: k.rank, Ops: idx}
			for _, i := range idx {
				u.PredictedUs += pr.Ops[i].SpanUs()
			}
			p.units = append(p.units, int32(len(a.Units)))
			a.Units = append(a.Units, u)
		}
		// Layer groups: consecutive ops with the same ID prefix.
		var groups [][]int
		for _, i := range ops {
			if n := len(groups); n > 0 && opLabel(pr.Ops[groups[n-1][0]].ID) == opLabel(pr.Ops[i].ID) {
				groups[n-1] = append(groups[n-1], i)
			} else {
				groups = append(groups, []int{i})
			}
		}
		switch {
		case mode == len(ops):
			p.per = 1
			for _, i := range ops {
				newUnit(pr.Ops[i].ID, pr.Ops[i].Layer, []int{i})
			}
		case mode > 0 && mode%len(groups) == 0:
			p.per = mode / len(groups)
			for _, g := range groups {
				newUnit(opLabel(pr.Ops[g[0]].ID)+":"+k.kind, pr.Ops[g[0]].Layer, g)
			}
			is.add(IssueKindGrouped, 1, fmt.Sprintf("%s: %d kernels per step vs %d predicted ops; compared per layer (%d kernels each)", k.kind, mode, len(ops), p.per))
		default:
			p.per = mode
			newUnit("step:"+k.kind, -1, ops)
			is.add(IssueKindGrouped, 1, fmt.Sprintf("%s: %d kernels per step vs %d predicted ops; compared as a step total", k.kind, mode, len(ops)))
		}
		plans[k] = p
	}
	for i := range pr.Ops {
		op := &pr.Ops[i]
		if !op.Cost.Fused && plans[planOf(rk{op.Rank, string(op.Kind)})] == nil {
			is.add(IssueMissing, 1, op.ID)
		}
	}
	// Pass 2: samples.
	byKind := map[rk][]*traces.Span{}
	var ext extents
	seen := make([]bool, len(a.Units))
	for ti, tr := range trs {
		for k := range byKind {
			byKind[k] = byKind[k][:0]
		}
		for i := range tr {
			s := &tr[i]
			if !traces.IsOpSpan(s) {
				continue
			}
			a.Spans++
			if s.Duration < 0 || s.Start <= 0 {
				is.add(IssueBadDuration, 1, s.Name)
				continue
			}
			ext.add(s)
			k := rk{s.Rank, s.OpKind}
			byKind[k] = append(byKind[k], s)
		}
		bk := make([]rk, 0, len(byKind))
		for k, v := range byKind {
			if len(v) > 0 {
				bk = append(bk, k)
			}
		}
		sort.Slice(bk, func(i, j int) bool {
			if bk[i].rank != bk[j].rank {
				return bk[i].rank < bk[j].rank
			}
			return bk[i].kind < bk[j].kind
		})
		for _, k := range bk {
			spans := byKind[k]
			s0 := spans[0]
			p := plans[planOf(k)]
			if p == nil {
				is.add(IssueKindNotInPlan, len(spans), fmt.Sprintf("%s: %s", s0.OpKind, shortName(kernelName(s0))))
				continue
			}
			if len(spans) != p.count {
				is.add(IssueCountMismatch, 1, fmt.Sprintf("step %d rank %d %s: %d kernels, other steps %d", s0.Step, s0.Rank, s0.OpKind, len(spans), p.count))
				continue
			}
			for ui, u := range p.units {
				var us float64
				for _, s := range spans[ui*p.per : (ui+1)*p.per] {
					us += spanUs(s)
				}
				seen[u] = true
				a.Samples = append(a.Samples, Sample{Unit: u, Trace: int32(ti), Step: int32(s0.Step), Rank: int32(max(s0.Rank, 0)), Us: us})
			}
			a.Matched += len(spans)
		}
		a.Steps = ext.flush(a.Steps, ti)
	}
	for i := range a.Units {
		if !seen[i] {
			is.add(IssueMissing, 1, a.Units[i].Key)
		}
	}
}

func kernelName(s *traces.Span) string {
	if v, ok := s.Attr(string(schema.AttrKernel)); ok {
		return v.String()
	}
	return s.Name
}

// shortName bounds a kernel name in an issue's example.
func shortName(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
