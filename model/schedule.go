package model

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
	Block string // attn, moe, mlp, embed, head, mtp
	Name  string // the last part of ID
	Rank  int

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

	// Deps lists indices (into the same rank's op list) this op waits for.
	// nil means "the previous op of this rank" (in-order stream).
	Deps []int
}

// Bytes is the total device-memory traffic of the op.
func (o *Op) Bytes() float64 { return o.BytesRead + o.BytesWritten }

// IsCollective reports whether the op is a collective.
func (o *Op) IsCollective() bool { return o.Kind == KindCollective }

// Schedule is every op of one step on every rank, in issue order per rank.
// It is what sim predicts, exec runs and traces aligns by op ID.
type Schedule struct {
	Model    string // architecture name (preset or config path)
	Plan     Plan
	Workload Workload // normalized; KVDtype resolved against the checkpoint
	Options  BuildOptions
	// Ranks[r] is rank r's op list in issue order.
	Ranks [][]Op
}

// NumOps is the total number of ops over all ranks.
func (s *Schedule) NumOps() int {
	n := 0
	for _, r := range s.Ranks {
		n += len(r)
	}
	return n
}
