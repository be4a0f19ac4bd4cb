package model

import (
	"fmt"
	"math"
)

// OpKind is the kernel family of an op. sim keys its efficiencies on it,
// exec dispatches on it, traces groups by it.
type OpKind string

const (
	KindGEMM        OpKind = "gemm"        // dense GEMM (incl. batched per-head GEMMs of absorbed MLA)
	KindMoEGEMM     OpKind = "moe_gemm"    // grouped GEMM over the experts a batch touches
	KindAttention   OpKind = "attention"   // MLA attention over the latent KV cache (+ DSA indexer)
	KindNorm        OpKind = "norm"        // RMSNorm (optionally fused with residual add)
	KindElementwise OpKind = "elementwise" // RoPE, SiLU-and-mul, residual add, KV-cache write, sampling glue
	KindRouter      OpKind = "router"      // MoE router top-k selection (the router GEMM is KindGEMM)
	KindEmbedding   OpKind = "embedding"   // vocab-parallel embedding lookup
	KindCollective  OpKind = "collective"  // NCCL or custom collective
)

// Collective is the kind of a collective op.
type Collective string

const (
	AllReduce     Collective = "allreduce"
	AllGather     Collective = "allgather"
	ReduceScatter Collective = "reducescatter"
	AllToAll      Collective = "alltoall"
)

// Phase of a step.
type Phase string

const (
	Decode  Phase = "decode"
	Prefill Phase = "prefill"
)

// Op is one kernel (or one collective call) of one rank in one step.
//
// Sizes are per rank. Bytes are the bytes the kernel moves to and from
// device memory: for decode GEMMs the weight bytes dominate and are always
// streamed from device memory, not L2 (each layer has its own weights).
type Op struct {
	ID    string // stable op ID: L{layer:02}.{block}.{name}, embed.*, head.*, mtp.*
	Kind  OpKind
	Layer int    // decoder layer index; -1 for embed/head ops
	Block string // attn, moe, mlp, embed, head, mtp (every op of an MTP pass)
	Name  string // the last part of ID (Role.Name())
	// Role is what the op does (the ID without its layer or MTP-pass
	// prefix); packages tell ops apart by it.
	Role Role
	Rank int

	// GEMM shape per problem: C[M,N] = A[M,K] x B[K,N]. Batch counts
	// independent problems of that shape (heads of an absorbed MLA GEMM);
	// for a grouped MoE GEMM, M is the average tokens per touched expert and
	// Batch the expected number of distinct experts touched on this rank.
	M, N, K int64
	Batch   float64

	WeightDtype Dtype // dtype of the streamed weights ("" if none)
	ActDtype    Dtype // dtype of activations (bf16 unless quantized)
	KVDtype     Dtype // attention ops: dtype of the KV cache read

	FLOPs        float64 // floating-point operations (multiply-add = 2)
	BytesRead    float64 // total bytes read from device memory, incl. weights and KV
	BytesWritten float64 // bytes written to device memory
	WeightBytes  float64 // part of BytesRead that is weights
	KVBytes      float64 // part of BytesRead that is KV cache (attention ops)

	// Collective ops only.
	Collective Collective
	CommBytes  int64 // message size per rank, nccl-tests convention (all-reduce: the buffer size)
	Group      []int // ranks taking part, sorted; every member has an op with the same ID

	// MoE is the routing shape of the routed experts' ops (moe.dispatch,
	// moe.experts_gate_up, moe.experts_act, moe.experts_down, moe.combine);
	// nil on every other op. Backends and sim read it; none re-derives it.
	MoE *MoEShape

	// Deps lists indices (into the same rank's op list) this op waits for.
	// nil means "the previous op of this rank" (in-order stream).
	Deps []int
}

// MarksIndependentOps reports whether some op of the schedule waits for
// other ops than the one before it on its rank (Op.Deps), the only case
// where an op on a second stream (sim's Options.Overlap) can run beside
// another. The builder lays each rank's step as one chain (every Deps
// nil), as the engines launch a rank's kernels on one stream.
func (s *Schedule) MarksIndependentOps() bool {
	for _, ops := range s.Ranks {
		for i := range ops {
			if d := ops[i].Deps; d != nil && (len(d) != 1 || d[0] != i-1) {
				return true
			}
		}
	}
	return false
}

// MoEShape is what the builder assumed about the tokens that reach one
// rank's routed experts in one MoE layer, under its Routing (each token
// picks TopK distinct experts of Experts; uniform routing by default).
//
// The pool is the set of tokens routed over the experts this rank holds:
// the layer's tokens T under TP or TP + EP (every rank sees every token),
// the tokens of all ranks (per-rank tokens x world) under DP attention +
// EP, where dispatch brings them to the rank.
type MoEShape struct {
	// RoutedTokens is the number of tokens in the pool.
	RoutedTokens int64 `json:"routed_tokens"`
	// TopK experts per token, of Experts routed experts in the model.
	TopK    int `json:"top_k"`
	Experts int `json:"experts"`
	// LocalExperts is how many experts this rank holds (Experts under TP,
	// where each rank holds a slice of every expert; Experts / ranks under
	// EP), FirstExpert the global index of the first (EP shards are
	// contiguous: rank r holds r x LocalExperts onwards).
	LocalExperts int `json:"local_experts"`
	FirstExpert  int `json:"first_expert"`
	// Routing is the distribution Rows and ExpertsTouched follow (see
	// Routing; omitted in JSON when uniform).
	Routing Routing `json:"routing,omitzero"`
	// Rows is the expected number of token-expert assignments to this
	// rank's experts: RoutedTokens x TopK x LocalExperts / Experts under
	// uniform and balanced routing over a whole number of strides, more on
	// the most loaded rank of a power law.
	Rows float64 `json:"rows"`
	// ExpertsTouched is the expected number of distinct local experts at
	// least one token picks: LocalExperts x (1 - (1 - TopK/Experts)^RoutedTokens)
	// under uniform routing.
	ExpertsTouched float64 `json:"experts_touched"`
}

// NewMoEShape returns the shape of a pool of tokens routed top-k of e
// experts over local experts starting at first, with Rows and
// ExpertsTouched computed from the uniform-routing formulas
// (UniformRouting.Shape).
func NewMoEShape(tokens int64, topk, e, local, first int) MoEShape {
	return UniformRouting.Shape(tokens, topk, e, local, first)
}

// Executed is the integer shape a backend runs for the expectation: the
// touched experts rounded to the nearest integer (at least 1 when any row
// is routed) and Rows rounded, rowsPerExpert with one entry per executed
// expert. How the rows are spread follows the routing:
//
//   - uniform and balanced: as evenly as possible (the first rows%experts
//     experts get one row more). Under balanced routing that is the
//     generator's own spread (every expert floor or ceil of T k / E rows,
//     one row each while T k <= E); under uniform routing it is the
//     expectation's, which the grouped GEMM's shape (M = ceil(rows /
//     touched)) also assumes.
//   - power-law: skewed as the law ranks the loads (powerLawSpread:
//     shares of the expected order statistics of the rank's draws, each
//     expert at least 1 and at most RoutedTokens rows, descending), with
//     at least ceil(rows / RoutedTokens) experts so the cap can hold.
func (s *MoEShape) Executed() (rowsPerExpert []int) {
	rows := int(math.Round(s.Rows))
	if rows <= 0 {
		return nil
	}
	n := int(math.Round(s.ExpertsTouched))
	if s.Routing.Kind == RoutingPowerLaw && s.RoutedTokens > 0 && s.Routing.Validate() == nil && s.Experts > 0 {
		n = max(n, int((int64(rows)+s.RoutedTokens-1)/s.RoutedTokens))
		n = max(1, min(n, rows, s.LocalExperts))
		if int64(n)*s.RoutedTokens >= int64(rows) {
			return powerLawSpread(s.Routing.Alpha, s.RoutedTokens, s.TopK, s.Experts, s.LocalExperts, rows, n)
		}
	}
	n = max(1, min(n, rows, s.LocalExperts))
	out := make([]int, n)
	for i := range out {
		out[i] = rows / n
		if i < rows%n {
			out[i]++
		}
	}
	return out
}

// Validate checks the shape's fields against each other and the routing's
// formulas (relative tolerance 1e-9); the error names the field.
func (s *MoEShape) Validate() error {
	switch {
	case s.RoutedTokens < 0:
		return fmt.Errorf("moe: routed_tokens = %d: want >= 0", s.RoutedTokens)
	case s.Experts < 1:
		return fmt.Errorf("moe: experts = %d: want >= 1", s.Experts)
	case s.TopK < 1 || s.TopK > s.Experts:
		return fmt.Errorf("moe: top_k = %d: want 1..experts (%d)", s.TopK, s.Experts)
	case s.LocalExperts < 1 || s.Experts%s.LocalExperts != 0:
		return fmt.Errorf("moe: local_experts = %d: want a divisor of experts (%d)", s.LocalExperts, s.Experts)
	case s.FirstExpert < 0 || s.FirstExpert%s.LocalExperts != 0 || s.FirstExpert+s.LocalExperts > s.Experts:
		return fmt.Errorf("moe: first_expert = %d: want a multiple of local_experts (%d) below %d", s.FirstExpert, s.LocalExperts, s.Experts-s.LocalExperts+1)
	}
	if err := s.Routing.Validate(); err != nil {
		return fmt.Errorf("moe: %w", err)
	}
	want := s.Routing.Shape(s.RoutedTokens, s.TopK, s.Experts, s.LocalExperts, s.FirstExpert)
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	uniform := s.Routing.Kind == RoutingUniform
	if !near(s.Rows, want.Rows) {
		if uniform {
			return fmt.Errorf("moe: rows = %g: want routed_tokens x top_k x local_experts / experts = %g", s.Rows, want.Rows)
		}
		return fmt.Errorf("moe: rows = %g: want %g under %s routing", s.Rows, want.Rows, s.Routing)
	}
	if !near(s.ExpertsTouched, want.ExpertsTouched) {
		if uniform {
			return fmt.Errorf("moe: experts_touched = %g: want local_experts x (1 - (1 - top_k/experts)^routed_tokens) = %g", s.ExpertsTouched, want.ExpertsTouched)
		}
		return fmt.Errorf("moe: experts_touched = %g: want %g under %s routing", s.ExpertsTouched, want.ExpertsTouched, s.Routing)
	}
	return nil
}

// Bytes is the total device-memory traffic of the op.
func (o *Op) Bytes() float64 { return o.BytesRead + o.BytesWritten }

// IsCollective reports whether the op is a collective.
func (o *Op) IsCollective() bool { return o.Kind == KindCollective }

// Schedule is every op of one step on every rank, in issue order per rank.
// It is what sim predicts, exec runs and traces aligns by op ID.
type Schedule struct {
	Model string // architecture name (preset or config path)
	// ModelType is the architecture's config model_type (deepseek_v3,
	// kimi_k25, glm_moe_dsa, ...), which an engine may pick kernels by.
	ModelType string
	Plan      Plan
	Workload  Workload // normalized; KVDtype resolved against the checkpoint
	Options   BuildOptions
	// Iteration is the mixed engine step a BuildIteration schedule holds
	// (nil for a Workload step); Workload then carries only its KV dtype.
	Iteration *Iteration
	// Deploy is what the step serves per DP group and whether it replays
	// a CUDA graph, decided once by the builder (NewDeployment).
	Deploy Deployment
	// Modules are the step's modules with their op ranges, the same on
	// every rank (shared by copies of the schedule; must not be modified).
	Modules Modules
	// Ranks[r] is rank r's op list in issue order.
	Ranks [][]Op
}

// WithRanks returns a copy of the schedule that holds ranks instead of
// its op lists (one rank standing for all in a prediction, a subset), with
// every other field shared.
func (s *Schedule) WithRanks(ranks [][]Op) *Schedule {
	c := *s
	c.Ranks = ranks
	return &c
}

// HasPrefillTokens reports whether the step carries prompt tokens: a
// prefill Workload step, or an engine Iteration with a prompt's chunk
// (alone or beside decodes). An engine that graphs such a step may
// capture it otherwise than a uniform decode step (vLLM's
// FULL_AND_PIECEWISE: piecewise for it, full for decode).
func (s *Schedule) HasPrefillTokens() bool {
	if s.Iteration != nil {
		return s.Iteration.PrefillTokens > 0
	}
	return s.Workload.Phase == Prefill
}

// NumOps is the total number of ops over all ranks.
func (s *Schedule) NumOps() int {
	n := 0
	for _, r := range s.Ranks {
		n += len(r)
	}
	return n
}
