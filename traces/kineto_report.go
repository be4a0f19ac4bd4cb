package traces

import (
	"cmp"
	"slices"
	"time"
)

// KinetoFile is what the Kineto reader found in one file (one rank's
// trace): which rule split it into steps, the steps, and how much of the
// kernel time it placed on op IDs. Result.Kineto holds one per file read.
type KinetoFile struct {
	Source   string `json:"source"`
	Engine   string `json:"engine,omitempty"` // EngineVLLM, EngineSGLang, EngineTRTLLM; "" when no engine range was found
	StepRule string `json:"step_rule"`        // StepRuleEngineRange, StepRuleProfilerStep, ...
	Ranks    []int  `json:"ranks"`
	// World is distributedInfo.world_size (0: not recorded); Devices the
	// GPU names of deviceProperties, distinct, in order.
	World   int          `json:"world,omitempty"`
	Devices []string     `json:"devices,omitempty"`
	Steps   []KinetoStep `json:"steps"`
	// KernelNs is the kernel time of the steps (kernels outside every step
	// are not counted); PlacedNs the part on kernels with an op ID.
	KernelNs int64 `json:"kernel_ns"`
	PlacedNs int64 `json:"placed_ns"`
	// ByNameNs and ByPositionNs split PlacedNs by how the kernels were
	// placed: by the kernel table (KernelTable: the name says the op) or
	// by their class and position in the recovered layer.
	ByNameNs     int64 `json:"by_name_ns"`
	ByPositionNs int64 `json:"by_position_ns"`
	// Unplaced lists the kernels in steps without an op ID, by name, most
	// time first.
	Unplaced []KernelCount `json:"unplaced,omitempty"`
}

// PlacedFrac is PlacedNs / KernelNs (0 without kernels).
func (f *KinetoFile) PlacedFrac() float64 {
	if f.KernelNs == 0 {
		return 0
	}
	return float64(f.PlacedNs) / float64(f.KernelNs)
}

// Shares returns the fractions of KernelNs placed by name, placed by
// position and not placed (0s without kernels).
func (f *KinetoFile) Shares() (byName, byPosition, unplaced float64) {
	return shares(f.KernelNs, f.ByNameNs, f.ByPositionNs)
}

// Shares is KinetoFile.Shares for one step.
func (s *KinetoStep) Shares() (byName, byPosition, unplaced float64) {
	return shares(s.KernelNs, s.ByNameNs, s.ByPositionNs)
}

func shares(total, name, pos int64) (float64, float64, float64) {
	if total == 0 {
		return 0, 0, 0
	}
	t := float64(total)
	return float64(name) / t, float64(pos) / t, float64(total-name-pos) / t
}

// KinetoStep is one step of one rank.
type KinetoStep struct {
	Step int    `json:"step"`
	Rank int    `json:"rank"`
	Rule string `json:"rule"` // the file's StepRule
	// Range is the engine range's name ("" for the graph-launch and
	// layer-pattern rules); Phase and the counts come from it where the
	// engine writes them (0 when it does not).
	Range         string `json:"range,omitempty"`
	Phase         string `json:"phase,omitempty"`
	ContextReqs   int    `json:"context_reqs,omitempty"`
	ContextTokens int    `json:"context_tokens,omitempty"`
	DecodeReqs    int    `json:"decode_reqs,omitempty"`
	DecodeTokens  int    `json:"decode_tokens,omitempty"`
	GraphLaunches int    `json:"graph_launches"`
	Kernels       int    `json:"kernels"`
	KernelNs      int64  `json:"kernel_ns"`      // sum of the step's kernel durations
	PlacedNs      int64  `json:"placed_ns"`      // of which on kernels with an op ID
	ByNameNs      int64  `json:"by_name_ns"`     // of PlacedNs, by the kernel table (the name says the op)
	ByPositionNs  int64  `json:"by_position_ns"` // of PlacedNs, by class and position in the layer
	Layers        int    `json:"layers"`         // decoder layers recovered (0: not placed)
	// ARNormFused counts the step's all-reduces whose kernel also applies
	// the RMSNorm after them (allreduce_fusion), ARNormApart those a norm
	// kernel of its own follows: whether the engine fused the two.
	ARNormFused int `json:"ar_norm_fused,omitempty"`
	ARNormApart int `json:"ar_norm_apart,omitempty"`
	// Note says why the step's kernels were not placed, when they were not.
	Note string `json:"note,omitempty"`
}

// KernelCount is a kernel name with how often it ran and its total time.
type KernelCount struct {
	Name    string `json:"name"`
	Count   int    `json:"count"`
	TotalNs int64  `json:"total_ns"`
}

// OpTime is the measured time of one op of one step on one rank: the sum
// of the kernels placed on it. Several kernels often implement one op (a
// split-KV attention kernel and its combine, a GEMM and its split-K
// reduction, a grouped GEMM and the sum over top-k); one fused kernel may
// implement several (Ops lists them: the kernel's time stands for all).
type OpTime struct {
	TraceIndex int // index of the trace in the input
	Step       int
	Rank       int
	OpID       string
	Ops        []string // op IDs the time stands for when fused; nil for one op
	Kernels    int
	Us         float64
}

// KernelOpTimes sums, per trace, rank and op ID, the device time of the
// kernel spans that carry an op ID (in the order of first appearance).
// traces are spans split per trace (SplitTraces). Kernels without an op ID
// are left out: KinetoFile.Unplaced reports them.
func KernelOpTimes(traces [][]Span) []OpTime {
	type key struct {
		rank int
		id   string
	}
	var out []OpTime
	for ti, tr := range traces {
		idx := map[key]int{}
		for i := range tr {
			s := &tr[i]
			if !s.kernel || s.OpID == "" {
				continue
			}
			k := key{s.Rank, s.OpID}
			j, ok := idx[k]
			if !ok {
				j = len(out)
				idx[k] = j
				out = append(out, OpTime{TraceIndex: ti, Step: s.Step, Rank: s.Rank, OpID: s.OpID})
				if v, ok := s.Attr(string(AttrKinetoOps)); ok {
					out[j].Ops = decodeStringArray(v.AsString())
				}
			}
			out[j].Kernels++
			out[j].Us += float64(s.Duration) / float64(time.Microsecond)
		}
	}
	return out
}

// sortKernelCounts orders by total time, then count, then name.
func sortKernelCounts(v []KernelCount) {
	slices.SortFunc(v, func(a, b KernelCount) int {
		if c := cmp.Compare(b.TotalNs, a.TotalNs); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
}
