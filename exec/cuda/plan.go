package cuda

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tpscope/tpscope/exec/cuda/internal/cublas"
	"github.com/tpscope/tpscope/model"
)

// planKind is how the backend runs one op.
type planKind uint8

const (
	pkSkip planKind = iota
	pkGemmBF16
	pkGemmFP8
	pkAttention
	pkNorm
	pkElementwise
	pkRouter
	pkEmbed
	pkCollective
	pkSiLUMul
)

func (k planKind) String() string {
	return [...]string{"skip", "gemm_bf16", "gemm_fp8", "attention", "norm", "elementwise", "router", "embed", "collective", "silu_mul"}[k]
}

// MLA latent geometry of the DeepSeek-V3 family (kv_lora_rank 512 +
// qk_rope_head_dim 64; serving-facts.md "576 values per cached token").
const (
	latentDim = 576
	latentOut = 512
	// mlaHeadFLOPs is the work per (query token, head, cached token):
	// 2 x 576 for the score and 2 x 512 for the output (model/build.go's
	// mla_decode FLOPs formula).
	mlaHeadFLOPs = 2 * (latentDim + latentOut)
	// Kernel tile geometry of kernels.cu's mla_decode_*.
	mlaTile    = 32
	mlaThreads = 256
	// mlaMaxSplits: the most KV splits mla_combine merges (its shared
	// weight array, MLA_MAX_SPLITS in kernels.cu).
	mlaMaxSplits = 1024
)

// devCaps is what planning needs to know about the device.
type devCaps struct {
	ccMajor, ccMinor int
	sms              int
	// mlaOcc: blocks of each tensor-core MLA kernel that fit one SM
	// (cuOccupancyMaxActiveBlocksPerMultiprocessor), for the in-kernel merge.
	mlaOcc map[string]int
	// mlaClusters: per tensor-core MLA kernel, how many clusters of w
	// blocks run at once, index w (cuOccupancyMaxActiveClusters; none
	// before sm_90).
	mlaClusters map[string][]int
	// mlaFwd: the tensor-core MLA kernel family per cache dtype (fp8
	// true) that passed the start-up check; none: MLAFwdKernel's.
	mlaFwd map[bool]mlaFwdFamily
}

// fp8 reports FP8 tensor-core GEMMs through cuBLASLt (sm_89 and later).
func (d devCaps) fp8() bool { return d.ccMajor > 8 || (d.ccMajor == 8 && d.ccMinor >= 9) }

// opPlan is one op turned into concrete kernel parameters.
type opPlan struct {
	kind planKind

	// GEMM (per problem): Y[m,n] = X[m,k] · W[n,k]^T, batch problems.
	m, n, k, batch int
	// fp8Plan is the cuBLASLt plan of a pkGemmFP8 op, set when the rank
	// prepares its ops (nil from the planner).
	fp8Plan *cublas.FP8Plan

	// streamBytes: bytes of this op's private weights or KV cache in the
	// streamed arena (one region per op, so every layer reads its own).
	streamBytes uint64
	inBytes     uint64 // activation input scratch
	outBytes    uint64 // activation output scratch
	auxBytes    uint64 // attention split partials, router ids/scores

	// attention
	tokens, heads, ctx, tokPerSeq, seqs int
	hg, splits, chunk                   int
	smem                                int // dynamic shared memory of mla_decode_* (MLALaunch)
	dqk, dlat                           int // latent width scored, and kept for the output
	fp8KV                               bool
	tc                                  bool        // tensor-core kernel (mla_tc_*, mla_ds_*)
	mla                                 MLAGeometry // its launch
	dcp                                 int         // decode context parallelism: ranks sharing the context (> 1)

	// norm / elementwise / router / embed
	rows, cols int
	fusedAdd   bool
	fusedAR    bool // all-reduce + RMSNorm fusion: the norm reads the all-reduce's output
	nin, nout  uint64
	topk       int
	embedRows  int // table rows
	embedRead  int // rows gathered (the rest are zeroed)

	// MoE: the experts and token-expert rows the batched GEMM runs
	moeExperts, moeRows int

	// collective
	coll      model.Collective
	commBytes uint64
	nranks    int

	kernel string // kernel or library call run
	subst  string // substitution made, "" if none
	skip   string // reason the op is not run, "" if it runs
}

func ceilTo(x, m int) int { return (x + m - 1) / m * m }

// dtypeBytes is the activation storage bytes of the run dtype.
func (p *opPlan) actBytes() int {
	if p.kind == pkGemmFP8 {
		return 1
	}
	return 2
}

// planner turns a rank's ops into plans; it is pure (no device calls) so
// tests check it on any machine.
type planner struct {
	sched *model.Schedule
	dev   devCaps
	seed  int64
	// noTC disables the tensor-core MLA kernel (device older than sm_80,
	// or its start-up self-check disagreed with the CUDA-core kernel).
	noTC bool
	// shard: this process runs a subset of the schedule's ranks with no
	// peers (one rank's shard on one GPU); collectives are skipped.
	shard bool
	world int
	// fuseARNorm: all-reduce + RMSNorm fusion (exec.BackendConfig).
	fuseARNorm bool
}

// planRank plans every op of rank r.
func (pl *planner) planRank(r int) ([]opPlan, error) {
	ops := pl.sched.Ranks[r]
	out := make([]opPlan, len(ops))
	for i := range ops {
		p, err := pl.planOp(ops, i)
		if err != nil {
			return nil, fmt.Errorf("rank %d op %s: %w", r, ops[i].ID, err)
		}
		out[i] = p
	}
	return out, nil
}

func pos(name string, v int64) error {
	if v <= 0 {
		return fmt.Errorf("%s = %d: want > 0", name, v)
	}
	return nil
}

func (pl *planner) planOp(ops []model.Op, i int) (opPlan, error) {
	op := &ops[i]
	switch op.Kind {
	case model.KindGEMM:
		return pl.planGEMM(op, max(1, int(math.Round(op.Batch))), "")
	case model.KindMoEGEMM:
		return pl.planMoE(ops, i)
	case model.KindAttention:
		return pl.planAttention(op)
	case model.KindNorm:
		if err := pos("M", op.M); err != nil {
			return opPlan{}, err
		}
		if err := pos("N", op.N); err != nil {
			return opPlan{}, err
		}
		p := opPlan{kind: pkNorm, rows: int(op.M), cols: int(op.N), kernel: "rmsnorm"}
		n := uint64(op.M * op.N * 2)
		p.inBytes, p.outBytes, p.streamBytes = n, n, uint64(op.N*2)
		if op.BytesWritten > float64(n)*1.5 {
			// fused_add_rms_norm (model/build.go: two streams read and
			// written): the residual lives in the aux scratch.
			p.fusedAdd, p.auxBytes, p.kernel = true, n, "rmsnorm(fused residual add)"
		}
		if pl.fuseARNorm && followsAllReduce(ops, i) {
			// All-reduce + RMSNorm fusion: the norm works on the
			// all-reduce's output buffer. Without a custom all-reduce kernel
			// the two stay two kernels: with peers NCCL reduces first; in a
			// one-rank shard the reduction has no peers and what runs is the
			// fused kernel's local part.
			p.fusedAR = true
			p.kernel += " on the all-reduce output"
			if pl.shard {
				p.subst = fmt.Sprintf("all-reduce + RMSNorm fusion: the local part (residual add + RMSNorm of the reduced buffer) runs here; %s's reduction needs its %d peers", ops[i-1].ID, len(ops[i-1].Group)-1)
			} else {
				p.subst = "all-reduce + RMSNorm fusion needs a custom all-reduce kernel (not built): the norm runs after NCCL's all-reduce"
			}
		}
		return p, nil
	case model.KindElementwise:
		if isSiLUMul(op) {
			// The rows the schedule's bytes stand for (expected expert rows
			// may be fractional; model/build.go's siluMul).
			rows := max(1, int(math.Round(op.BytesWritten/float64(2*op.N))))
			p := opPlan{kind: pkSiLUMul, rows: rows, cols: int(op.N), kernel: "silu_mul"}
			p.nout = uint64(rows) * uint64(op.N)
			p.nin = 2 * p.nout
			p.inBytes, p.outBytes = 2*p.nin, 2*p.nout
			return p, nil
		}
		return pl.planElementwise(op, op.BytesRead, op.BytesWritten, "")
	case model.KindRouter:
		return pl.planRouter(op)
	case model.KindEmbedding:
		if err := pos("M", op.M); err != nil {
			return opPlan{}, err
		}
		if err := pos("N", op.N); err != nil {
			return opPlan{}, err
		}
		p := opPlan{kind: pkEmbed, rows: int(op.M), cols: int(op.N), kernel: "embed_gather"}
		p.embedRead = min(p.rows, int(math.Round(op.WeightBytes/float64(op.N*2))))
		p.embedRows = max(4096, p.rows)
		p.streamBytes = uint64(p.embedRows * p.cols * 2)
		p.outBytes = uint64(p.rows * p.cols * 2)
		return p, nil
	case model.KindCollective:
		return pl.planCollective(op)
	}
	return opPlan{}, fmt.Errorf("op kind %q: the cuda backend runs gemm, moe_gemm, attention, norm, elementwise, router, embedding, collective", op.Kind)
}

// planGEMM plans a dense (batched) GEMM. BF16 weights run through
// cublasGemmEx; FP8 through cuBLASLt on sm_89+; dtypes the device has no
// kernel for (NVFP4 before sm_100, INT4 W4A16 anywhere) run as an FP8 GEMM
// whose N is shrunk so the weight bytes streamed stay the same.
func (pl *planner) planGEMM(op *model.Op, batch int, subst string) (opPlan, error) {
	for _, f := range []struct {
		n string
		v int64
	}{{"M", op.M}, {"N", op.N}, {"K", op.K}} {
		if err := pos(f.n, f.v); err != nil {
			return opPlan{}, err
		}
	}
	p := opPlan{m: int(op.M), n: int(op.N), k: int(op.K), batch: batch, subst: subst}
	wd := op.WeightDtype
	if wd == "" {
		wd = model.BF16
	}
	var notes []string
	if subst != "" {
		notes = append(notes, subst)
	}
	switch wd {
	case model.BF16:
		p.kind = pkGemmBF16
	case model.FP16, model.FP32:
		p.kind = pkGemmBF16
		if wd == model.FP32 {
			// Same bytes: a bf16 GEMM with twice the N.
			p.n *= 2
			notes = append(notes, fmt.Sprintf("fp32 weights run as bf16 gemm N=%d (same weight bytes)", p.n))
		} else {
			notes = append(notes, "fp16 run as bf16 (same bytes)")
		}
	case model.FP8, model.FP8Block128, model.NVFP4, model.INT4G32:
		if !pl.dev.fp8() {
			// Pre-Ada: a bf16 GEMM streaming the same weight bytes.
			p.kind = pkGemmBF16
			p.n = max(8, ceilTo(int(math.Round(float64(op.N)*wd.BytesPerValue()/2)), 8))
			notes = append(notes, fmt.Sprintf("%s run as bf16 gemm N=%d with the same weight bytes (no fp8 on sm_%d%d)", wd, p.n, pl.dev.ccMajor, pl.dev.ccMinor))
			break
		}
		p.kind = pkGemmFP8
		switch wd {
		case model.FP8Block128:
			notes = append(notes, "fp8-block128 run with a per-tensor scale (block scales, 0.02% of the bytes, not applied)")
		case model.NVFP4, model.INT4G32:
			p.n = int(math.Round(float64(op.N) * wd.BytesPerValue()))
			notes = append(notes, fmt.Sprintf("%s run as fp8 e4m3 gemm N=%d (was %d) with the same weight bytes (no %s kernel on sm_%d%d)",
				wd, ceilTo(max(p.n, 16), 16), op.N, wd, pl.dev.ccMajor, pl.dev.ccMinor))
		}
		if n16, k16 := ceilTo(max(p.n, 16), 16), ceilTo(p.k, 16); n16 != p.n || k16 != p.k {
			if wd != model.NVFP4 && wd != model.INT4G32 {
				notes = append(notes, fmt.Sprintf("fp8 gemm padded to N=%d K=%d (cuBLASLt needs multiples of 16)", n16, k16))
			}
			p.n, p.k = n16, k16
		}
	default:
		return opPlan{}, fmt.Errorf("weight dtype %q: not supported by the cuda backend", wd)
	}
	ab := uint64(p.actBytes())
	p.streamBytes = uint64(p.batch) * uint64(p.n) * uint64(p.k) * ab
	p.inBytes = uint64(p.batch) * uint64(p.m) * uint64(p.k) * ab
	p.outBytes = uint64(p.batch) * uint64(p.m) * uint64(p.n) * 2
	if p.kind == pkGemmFP8 {
		p.kernel = "cublasLtMatmul(e4m3)"
	} else if p.batch > 1 {
		p.kernel = "cublasGemmStridedBatchedEx(bf16)"
	} else {
		p.kernel = "cublasGemmEx(bf16)"
	}
	p.subst = strings.Join(notes, "; ")
	return p, nil
}

// planMoE plans a grouped expert GEMM as one batched GEMM over the experts
// the schedule's routing shape says this rank runs (op.MoE.Executed: the
// expected touched experts, rounded), each with op.M rows (the schedule's
// rows per touched expert). Weight bytes are exactly those experts'; the
// rows are padded up to op.M on every expert (at most experts - 1 extra
// rows of a weight-bound kernel).
func (pl *planner) planMoE(ops []model.Op, i int) (opPlan, error) {
	op := &ops[i]
	if op.MoE == nil {
		return opPlan{}, fmt.Errorf("moe_gemm without its routing shape (a schedule from another build)")
	}
	rowsPer := op.MoE.Executed()
	touched := max(1, len(rowsPer))
	p, err := pl.planGEMM(op, touched, "")
	if err != nil {
		return p, err
	}
	p.moeExperts, p.moeRows = touched, touched*int(op.M)
	note := fmt.Sprintf("routing shape: %d of this rank's %d experts x %d rows (expected %.1f experts, %.1f rows)",
		touched, op.MoE.LocalExperts, op.M, op.MoE.ExpertsTouched, op.MoE.Rows)
	if p.subst != "" {
		p.subst = note + "; " + p.subst
	} else {
		p.kernel += " [" + note + "]"
	}
	return p, nil
}

func (pl *planner) planAttention(op *model.Op) (opPlan, error) {
	w := pl.sched.Workload
	p := opPlan{kind: pkAttention}
	if err := pos("M (tokens)", op.M); err != nil {
		return p, err
	}
	kvd := op.KVDtype
	if kvd == "" {
		kvd = w.KVDtype
	}
	p.fp8KV = kvd == model.FP8 || kvd == model.FP8Block128
	kvb := 2.0
	if p.fp8KV {
		kvb = 1
	}
	p.tokens = int(op.M)
	// The real sequences of the op's DP group (the builder's deployment:
	// a CUDA graph's padding tokens attend to nothing), each with
	// tokens / seqs query tokens; an MLA decode op's KV bytes say its own.
	seqs := max(1, pl.sched.Deploy.SeqsPerGroup)
	var notes []string
	switch {
	case op.Role == model.RoleMLADecode && op.K > 0 && op.K%8 == 0 && op.K <= latentDim && w.Phase != model.Prefill:
		// MLA decode (model/build.go): M tokens, N cached tokens per
		// sequence, K latent width (kv_lora + rope), Batch heads; the
		// output is kv_lora wide: BytesWritten = M x heads x kv_lora x 2.
		if err := pos("N (cached tokens)", op.N); err != nil {
			return p, err
		}
		p.ctx = int(op.N)
		p.heads = max(1, int(math.Round(op.Batch)))
		p.dqk = int(op.K)
		p.dlat = int(math.Round(op.BytesWritten / (2 * float64(op.M) * float64(p.heads))))
		if p.dlat <= 0 || p.dlat > p.dqk || p.dlat > latentOut || p.dlat%2 != 0 {
			return p, fmt.Errorf("mla_decode output width %d (from BytesWritten %g): want an even width <= K=%d and <= %d", p.dlat, op.BytesWritten, op.K, latentOut)
		}
		if op.KVBytes > 0 {
			seqs = max(1, int(math.Round(op.KVBytes/(float64(op.N)*float64(op.K)*kvb))))
		}
		if dcp := pl.sched.Plan.Normalized().DCP; dcp > 1 {
			// Decode context parallelism: this rank holds 1/dcp of every
			// sequence's context (op.N already is the share) and, before
			// the reduce-scatter, rescales its rows by the all-gathered
			// log-sum-exps (vLLM's cp_lse_ag_out_rs).
			p.dcp = dcp
		}
	default:
		// Prefill attention or another scorer (DSA indexer): run the MLA
		// decode kernel over a latent cache with the op's KV bytes (or, for
		// prefill, the mean causal length) and heads matching its FLOPs.
		ctx := int(op.N)
		if w.Phase == model.Prefill {
			ctx = max(1, ctx/2)
		}
		if op.KVBytes > 0 {
			ctx = max(1, int(math.Round(op.KVBytes/(float64(seqs)*latentDim*kvb))))
		}
		if ctx <= 0 {
			return p, fmt.Errorf("N = %d and KVBytes = %g: cannot size the attention", op.N, op.KVBytes)
		}
		p.ctx = ctx
		p.dqk, p.dlat = latentDim, latentOut
		p.heads = max(1, min(128, int(math.Round(op.FLOPs/(float64(op.M)*float64(ctx)*mlaHeadFLOPs)))))
		notes = append(notes, fmt.Sprintf("%s run as MLA decode kernel: %d heads over %d cached 576-wide tokens per sequence (same KV bytes, similar FLOPs)", op.Name, p.heads, p.ctx))
	}
	if p.tokens%seqs != 0 {
		seqs = 1
	}
	p.seqs = seqs
	p.tokPerSeq = p.tokens / seqs
	_, checked := pl.dev.mlaFwd[p.fp8KV]
	p.tc = !pl.noTC && pl.dev.ccMajor >= 8 && p.dqk == latentDim && p.dlat == latentOut && (pl.dev.mlaFwd == nil || checked)
	var g MLAGeometry
	if p.tc {
		k := MLAFwdKernel(p.fp8KV, p.tokPerSeq*p.heads)
		if f, ok := pl.dev.mlaFwd[p.fp8KV]; ok {
			k = f.kernel(p.tokPerSeq * p.heads)
		}
		s := MLAShape{Seqs: p.seqs, TokPerSeq: p.tokPerSeq, Heads: p.heads, Ctx: p.ctx, FP8: p.fp8KV}
		g = MLAFwdLaunchWith(k, s, pl.dev.sms, pl.dev.mlaOcc[k])
		if cl := pl.dev.mlaClusters[k]; g.Splits < len(cl) {
			g = g.Clustered(s, cl[g.Splits])
		}
	} else {
		g = MLALaunch(p.tokens, p.heads, p.ctx, p.dqk, pl.dev.sms, p.fp8KV)
	}
	p.mla = g
	p.hg, p.splits, p.chunk, p.smem = g.HeadGroup, g.Splits, g.Chunk, g.SmemBytes
	p.streamBytes = uint64(float64(p.seqs) * float64(p.ctx) * float64(p.dqk) * kvb)
	p.inBytes = uint64(p.tokens * p.heads * p.dqk * 2)
	p.outBytes = uint64(p.tokens * p.heads * p.dlat * 2)
	th := uint64(p.tokens * p.heads)
	if p.splits > 1 || !p.tc {
		p.auxBytes = uint64(p.splits)*th*uint64(p.dlat)*4 + uint64(p.splits)*th*4
	}
	if p.dcp > 1 {
		// lse of this rank's rows, then the all-gathered lse of all ranks.
		p.auxBytes += th*4 + uint64(p.dcp)*th*4
	}
	kv := "bf16"
	if p.fp8KV {
		kv = "fp8"
	}
	switch {
	case p.tc && p.splits == 1:
		p.kernel = g.Kernel
	case p.tc && g.Cluster > 0:
		p.kernel = fmt.Sprintf("%s x%d splits (merged in-kernel, cluster of %d)", g.Kernel, p.splits, g.Cluster)
	case p.tc && g.Coop:
		p.kernel = fmt.Sprintf("%s x%d splits (merged in-kernel)", g.Kernel, p.splits)
	case p.tc:
		p.kernel = fmt.Sprintf("%s x%d splits + mla_combine", g.Kernel, p.splits)
	default:
		p.kernel = fmt.Sprintf("mla_decode_%s_h%d x%d splits + mla_combine", kv, p.hg, p.splits)
	}
	if p.dcp > 1 {
		p.kernel += " + mla_dcp_correct"
	}
	p.subst = strings.Join(notes, "; ")
	return p, nil
}

// MLAGeometry is how the backend launches MLA decode for one attention op.
//
// Tensor-core kernel (mla_tc_*, mla_ds_*): a grid of (Splits, Groups,
// sequences) blocks of 256 threads, each scoring up to HeadGroup (8 or 16)
// query rows (a sequence's tokens x heads) over Chunk cached tokens; with Splits >
// 1 the blocks merge their partials in the kernel when Coop (the whole grid
// fits on the device at once), through L2, or, when Cluster is set, the
// splits of a (sequence, row group) are one thread-block cluster and merge
// from each other's shared memory; else mla_combine merges them.
//
// CUDA-core kernel (mla_decode_*_h<HeadGroup>): a grid of (Splits, Groups,
// tokens) blocks, HeadGroup heads each, then mla_combine.
type MLAGeometry struct {
	Kernel    string // the tensor-core kernel's name ("" for the CUDA-core one)
	Threads   int    // threads per block
	HeadGroup int    // heads (CUDA core) or query rows (tensor core) per block
	Groups    int    // head groups (CUDA core) or row groups per sequence (tensor core)
	Splits    int    // splits of the context
	Chunk     int    // cached tokens per split, a multiple of the 32-token tile
	SmemBytes int    // dynamic shared memory per block
	Coop      bool   // splits merged in the kernel (tensor core)
	Cluster   int    // blocks per thread-block cluster (= Splits) when the merge goes through shared memory; 0: none
}

// mlaMaxCluster: the largest thread-block cluster sm_90 launches (16, with
// the non-portable size allowed; 8 is the portable bound).
const mlaMaxCluster = 16

// Clustered returns g, the launch of shape s, with its splits merged
// through their cluster's shared memory (Cluster = Splits) when g is
// merged in the kernel, has 2 to 16 splits, and the device runs all of
// its clusters (one per unit) at once: active is how many clusters of
// g.Splits blocks of g.Kernel fit the device (cuOccupancyMaxActiveClusters:
// a cluster takes SMs of one GPC, so this can be fewer than SMs / Splits).
// Otherwise g is returned unchanged and the merge stays in L2.
func (g MLAGeometry) Clustered(s MLAShape, active int) MLAGeometry {
	if g.Coop && g.Splits >= 2 && g.Splits <= mlaMaxCluster && g.units(s) <= active {
		g.Cluster = g.Splits
	}
	return g
}

// MergeMode is the tensor-core kernels' coop argument: 0 the partials are
// left for mla_combine, 1 merged in the kernel through L2, 2 through the
// cluster's shared memory.
func (g MLAGeometry) MergeMode() int {
	switch {
	case g.Cluster > 0:
		return 2
	case g.Coop:
		return 1
	}
	return 0
}

// units is how many (sequence, row group) pairs the launch of shape s
// covers: the clusters of a clustered launch.
func (g MLAGeometry) units(s MLAShape) int { return max(1, s.Seqs) * max(1, g.Groups) }

// MLAShape is one MLA decode problem: Seqs sequences of Ctx cached tokens,
// TokPerSeq query tokens each (1 + speculative tokens), Heads heads, a
// 576-wide latent cache in bf16 or (FP8) e4m3.
type MLAShape struct {
	Seqs, TokPerSeq, Heads, Ctx int
	FP8                         bool
}

// Tensor-core MLA kernel families (kernels.cu), per cache dtype in the
// order the backend tries them: the first whose kernels agree with the
// CUDA-core kernel at start-up runs. A family is a kernel for row groups
// of 8 query rows and one for 16: mla_tc_* for a bf16 cache, mla_ds_* for
// e4m3 (fp8c widens with sm_89's conversion instruction, fp8 by bit
// moves; the 8-row fp8c kernel runs 16 warps, two halves of each tile's
// tokens: 3-5 % faster on the H200, where the 16-row one would spill).
// Kernels named _b load their tiles by bulk copies (sm_90's TMA unit) and
// run only where the device has one (minCC).
type mlaFwdFamily [2]string

var mlaFwdFamilies = map[bool][]mlaFwdFamily{
	false: {{"mla_tc_bf16_r8_t64_s2", "mla_tc_bf16_r16_t64_s2"}},
	true: {{"mla_ds_fp8c_r8_t64_s4_w16_b", "mla_ds_fp8c_r16_t64_s4_b"}, {"mla_ds_fp8c_r8_t64_s4_w16", "mla_ds_fp8c_r16_t64_s4"},
		{"mla_ds_fp8_r8_t64_s4", "mla_ds_fp8_r16_t64_s4"}},
}

// minCC is the least compute capability (major x 10 + minor) that runs
// the family: 90 for bulk copies, 89 for sm_89's e4m3 conversion, else 80
// (mma.sync with bf16).
func (f mlaFwdFamily) minCC() int {
	v := mustMLAFwd(f[0])
	switch {
	case v.bulk:
		return 90
	case v.ds && v.cvt:
		return 89
	}
	return 80
}

// MLAFwdKernels is every tensor-core MLA kernel (cudacheck times them all).
var MLAFwdKernels = func() []string {
	var ks []string
	for _, fp8 := range []bool{false, true} {
		for _, f := range mlaFwdFamilies[fp8] {
			ks = append(ks, f[:]...)
		}
	}
	return ks
}()

// kernel is the family's kernel for sequences of rows query rows (tokens x
// heads): the 8-row one when they fit in 8 (Kimi-K2.5 and GLM-5 at TP 8),
// else the 16-row one (each row group reads the cache once).
func (f mlaFwdFamily) kernel(rows int) string {
	if rows <= 8 {
		return f[0]
	}
	return f[1]
}

// MLAFwdKernel is the tensor-core kernel the backend runs first for a cache
// dtype and rows query rows per sequence.
func MLAFwdKernel(fp8 bool, rows int) string { return mlaFwdFamilies[fp8][0].kernel(rows) }

// mlaFwdVariant is a tensor-core MLA kernel's geometry, read from its
// name: mla_{tc,ds}_<kv>_r<rows>_t<tile>_s<stages>[_w<warps>][_b] (8 warps
// unless named; b: tiles by bulk copies).
type mlaFwdVariant struct {
	ds                        bool // warps owning latent columns (MlaDS), else MlaTC's layout
	fp8                       bool
	cvt                       bool // e4m3 widened by sm_89's conversion instruction (fp8c)
	bulk                      bool // tiles by bulk copies on mbarriers
	rows, tile, stages, warps int
}

func parseMLAFwd(kernel string) (mlaFwdVariant, error) {
	v := mlaFwdVariant{warps: 8}
	f := strings.Split(kernel, "_")
	bad := fmt.Errorf("tensor-core MLA kernel %q: want mla_{tc,ds}_<kv>_r<8|16>_t<32|64>_s<N>[_w<8|16>][_b]", kernel)
	if len(f) > 6 && f[len(f)-1] == "b" {
		v.bulk = true
		f = f[:len(f)-1]
	}
	if (len(f) != 6 && len(f) != 7) || f[0] != "mla" || (f[1] != "tc" && f[1] != "ds") {
		return v, bad
	}
	v.ds = f[1] == "ds"
	v.fp8 = strings.HasPrefix(f[2], "fp8")
	v.cvt = f[2] == "fp8c"
	for _, x := range f[3:] {
		n, err := strconv.Atoi(x[1:])
		if err != nil || n < 1 {
			return v, bad
		}
		switch x[0] {
		case 'r':
			v.rows = n
		case 't':
			v.tile = n
		case 's':
			v.stages = n
		case 'w':
			v.warps = n
		default:
			return v, bad
		}
	}
	if v.stages == 0 || (v.rows != 8 && v.rows != 16) || (v.tile != 32 && v.tile != 64) || (v.warps != 8 && v.warps != 16) {
		return v, bad
	}
	return v, nil
}

func mustMLAFwd(kernel string) mlaFwdVariant {
	v, err := parseMLAFwd(kernel)
	if err != nil {
		panic(err) // names come from MLAFwdKernels, fixed at build time
	}
	return v
}

// MLAFwdRows is the query rows one block of a tensor-core MLA kernel takes.
func MLAFwdRows(kernel string) int { return mustMLAFwd(kernel).rows }

// MLAFwdThreads is the threads of one block of a tensor-core MLA kernel.
func MLAFwdThreads(kernel string) int { return 32 * mustMLAFwd(kernel).warps }

// MLAFwdSmem is the dynamic shared memory of a tensor-core MLA kernel
// (kernels.cu's layouts): Q (R rows of 584 16-bit values), the stages of
// T-token tiles (MlaTC: rows of 1168 bytes; MlaDS: the raw rows, 1168 or
// 576 bytes), the partial scores [parts][T][R+1] fp32 padded to 16 bytes
// (MlaTC: 8/(T/16) parts; MlaDS: 8), P [R][T+8], three per-row scalars
// (MlaDS: per token half, warps/8 of them) and (MlaDS) one 8-byte
// mbarrier per stage.
func MLAFwdSmem(kernel string) int {
	v := mustMLAFwd(kernel)
	row16 := (latentDim + 8) * 2
	stage, parts := v.tile*row16, v.warps/(v.tile/16)
	if v.ds {
		parts = 8
		if v.fp8 {
			stage = v.tile * latentDim
		}
	}
	spart := (parts*v.tile*(v.rows+1)*4 + 15) / 16 * 16
	smem := v.rows*row16 + v.stages*stage + spart + v.rows*(v.tile+8)*2 + 3*v.rows*4
	if v.ds {
		smem += 3*v.rows*4*(v.warps/8-1) + v.stages*8
	}
	return smem
}

// mlaFwdMaxSplits bounds the splits of the tensor-core kernels: their
// merge keeps 16 x splits weights in the stage memory (at least 74 KB).
const mlaFwdMaxSplits = 512

// MLAFwdLaunch returns the tensor-core kernel's geometry for shape s on a
// device with sms SMs, occ[kernel] blocks of it fitting one SM (0 or
// missing: unknown, then splits are merged by mla_combine). The grid is
// sized to fill the device once: splits = blocks that fit / (sequences x
// row groups), each split at least 64 cached tokens, and at least 256
// while half the SMs still get a block, rounded up to the kernel's tile; a
// grid that already fills the device runs unsplit.
func MLAFwdLaunch(s MLAShape, sms int, occ map[string]int) MLAGeometry {
	k := MLAFwdKernel(s.FP8, max(1, s.TokPerSeq)*max(1, s.Heads))
	return MLAFwdLaunchWith(k, s, sms, occ[k])
}

// MLAFwdLaunchWith is MLAFwdLaunch for a given variant k of which perSM
// blocks fit one SM.
func MLAFwdLaunchWith(k string, s MLAShape, sms, perSM int) MLAGeometry {
	g := newMLAFwdGeometry(k, s)
	ctx := max(1, s.Ctx)
	units := g.units(s)
	fit := max(1, sms) * max(1, perSM)
	want := 1
	if units < fit {
		want = fit / units
	}
	full := max(1, min(want, ctx/(2*mlaTile), mlaFwdMaxSplits))
	// Fewer, longer splits (256 cached tokens or more) while at least
	// half the SMs still get a block: below that a split's fixed cost (Q,
	// the first tile's latency, its partial and its share of the merge)
	// outweighs the parallelism. Measured on the H200 with the previous
	// kernel of 16-row blocks and 32-token tiles
	// (testdata/h200/kernels-bench-2334.jsonl): batch 8 at 4096 tokens
	// 25.7 us in 32 splits, 24.2 in 16; batch 1 at 32768 27.9 in 256, 25.6
	// in 128; batch 8 at 8192 35.8 in 32 (256 tokens), 39.2 in 16.
	long := max(ctx/(8*mlaTile), (max(1, sms/2)+units-1)/units)
	return g.split(s, max(1, min(full, long)), sms, perSM)
}

// MLAFwdSplit is MLAFwdLaunchWith with splits chosen by the caller (a
// benchmark's sweep) instead of the planner's rule.
func MLAFwdSplit(k string, s MLAShape, sms, perSM, splits int) MLAGeometry {
	return newMLAFwdGeometry(k, s).split(s, max(1, min(splits, mlaFwdMaxSplits)), sms, perSM)
}

// newMLAFwdGeometry is kernel k's block and row groups for shape s, not
// yet split.
func newMLAFwdGeometry(k string, s MLAShape) MLAGeometry {
	v := mustMLAFwd(k)
	g := MLAGeometry{Kernel: k, Threads: 32 * v.warps, HeadGroup: v.rows, SmemBytes: MLAFwdSmem(k)}
	g.Groups = (max(1, s.TokPerSeq)*max(1, s.Heads) + v.rows - 1) / v.rows
	return g
}

// split cuts the context into about splits chunks of whole tiles and
// merges them in the kernel when every block of the grid fits the device
// at once (perSM blocks per SM).
func (g MLAGeometry) split(s MLAShape, splits, sms, perSM int) MLAGeometry {
	ctx := max(1, s.Ctx)
	g.Chunk = ceilTo((ctx+splits-1)/splits, mustMLAFwd(g.Kernel).tile)
	g.Splits = (ctx + g.Chunk - 1) / g.Chunk
	g.Coop = g.Splits > 1 && perSM > 0 && g.Splits*g.units(s) <= max(1, sms)*perSM
	return g
}

// MLALaunch returns the launch geometry of the CUDA-core MLA decode kernel
// for tokens query tokens of heads heads over ctx cached tokens per
// sequence, dqk values scored per token, on a device with sms SMs. It runs
// where the tensor-core kernel cannot (before sm_80, other latent widths).
func MLALaunch(tokens, heads, ctx, dqk, sms int, fp8KV bool) MLAGeometry {
	ctx = max(1, ctx)
	g := MLAGeometry{Threads: mlaThreads, HeadGroup: 16}
	for _, hg := range []int{1, 2, 4, 8} {
		if heads <= hg {
			g.HeadGroup = hg
			break
		}
	}
	g.Groups = (heads + g.HeadGroup - 1) / g.HeadGroup
	// Splits over the context so the grid fills the device twice over,
	// with at least 4 tiles per split so the log-sum-exp merge stays small.
	want := max(1, 2*max(1, sms)/max(1, tokens*g.Groups))
	maxSplits := max(1, ctx/(4*mlaTile))
	g.Splits = min(want, maxSplits, mlaMaxSplits)
	g.Chunk = ceilTo((ctx+g.Splits-1)/g.Splits, mlaTile)
	g.Splits = (ctx + g.Chunk - 1) / g.Chunk
	g.SmemBytes = mlaSmem(g.HeadGroup, dqk)
	return g
}

// mlaSmem is the dynamic shared memory of mla_decode_*: the HG queries in
// fp32, one tile of the cache in bf16, the tile's scores and three per-head
// scalars (kernels.cu).
func mlaSmem(hg, dqk int) int { return hg*dqk*4 + mlaTile*dqk*2 + hg*mlaTile*4 + 3*hg*4 }

// followsAllReduce reports whether op i is the RMSNorm that all-reduce +
// RMSNorm fusion folds into the all-reduce before it (sim's rule: the op
// right after an all-reduce, depending on nothing else).
func followsAllReduce(ops []model.Op, i int) bool {
	if i == 0 || ops[i].Kind != model.KindNorm || !ops[i-1].IsCollective() || ops[i-1].Collective != model.AllReduce {
		return false
	}
	return ops[i].Deps == nil || (len(ops[i].Deps) == 1 && ops[i].Deps[0] == i-1)
}

// isSiLUMul reports whether an elementwise op is a SiLU-and-mul of N
// outputs per row: an activation of the schedule (Role.SiLUMul) that
// reads twice the bf16 values it writes.
func isSiLUMul(op *model.Op) bool {
	return op.N > 0 && op.BytesWritten > 0 && op.Role.SiLUMul() && op.BytesRead == 2*op.BytesWritten
}

func (pl *planner) planElementwise(op *model.Op, read, written float64, subst string) (opPlan, error) {
	p := opPlan{kind: pkElementwise, kernel: "ew_silu_mul", subst: subst}
	p.nin = uint64(math.Round(read / 2))
	p.nout = uint64(math.Round(written / 2))
	if p.nin == 0 && p.nout == 0 {
		p.kind = pkSkip
		p.skip = "op moves no bytes"
		return p, nil
	}
	if p.nout == 0 {
		p.nout = 1
	}
	p.inBytes, p.outBytes = p.nin*2, p.nout*2
	return p, nil
}

func (pl *planner) planRouter(op *model.Op) (opPlan, error) {
	if op.M > 0 && op.N > 0 && op.N <= 512 && op.K >= 1 && op.K <= op.N {
		p := opPlan{kind: pkRouter, rows: int(op.M), cols: int(op.N), topk: int(op.K), kernel: "topk_router"}
		p.inBytes = uint64(p.rows * p.cols * 2)
		p.auxBytes = uint64(p.rows * p.topk * 8)
		return p, nil
	}
	// Large selections (DSA top-2048 of the context) have no kernel here:
	// stream the op's bytes instead.
	return pl.planElementwise(op, op.BytesRead, op.BytesWritten,
		fmt.Sprintf("top-%d of %d run as an elementwise pass over the same bytes", op.K, op.N))
}

func (pl *planner) planCollective(op *model.Op) (opPlan, error) {
	p := opPlan{kind: pkCollective, coll: op.Collective, commBytes: uint64(max(0, op.CommBytes)), nranks: len(op.Group)}
	p.kernel = "nccl " + string(op.Collective)
	switch op.Collective {
	case model.AllReduce, model.AllGather, model.ReduceScatter, model.AllToAll:
	default:
		return p, fmt.Errorf("collective %q: want allreduce, allgather, reducescatter or alltoall", op.Collective)
	}
	if pl.shard {
		p.kind = pkSkip
		p.skip = fmt.Sprintf("one-rank shard run: %s of %d B over %d ranks has no peers here", op.Collective, op.CommBytes, len(op.Group))
		return p, nil
	}
	if len(op.Group) <= 1 {
		p.kind = pkSkip
		p.skip = "collective over a single rank"
		return p, nil
	}
	if len(op.Group) != pl.world {
		// Sub-group collectives (DCP groups) would need their own
		// communicators; not built yet.
		p.kind = pkSkip
		p.skip = fmt.Sprintf("collective over %d of %d ranks: sub-group communicators not implemented", len(op.Group), pl.world)
		return p, nil
	}
	return p, nil
}
