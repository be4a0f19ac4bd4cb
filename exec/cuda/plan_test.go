package cuda

import (
	"math"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
)

// H200: sm_90, 132 SMs (KINDS.md: PyTorch reported 132 multiprocessors);
// two blocks of each 2-stage tensor-core MLA kernel fit one SM: 2 x
// (99008 or 99520 B of shared memory + 1 KB reserved) within 228 KB, and
// 2 x 256 threads x 123 registers (NVRTC 13.0 on the H200: cudacheck bench) within
// 65536.
// h200's tensor-core MLA kernels fit one block per SM (their shared
// memory: cudacheck bench on the H200).
var h200 = devCaps{ccMajor: 9, ccMinor: 0, sms: 132, mlaOcc: map[string]int{
	"mla_tc_bf16_r8_t64_s2": 1, "mla_tc_bf16_r16_t64_s2": 1, "mla_ds_fp8c_r8_t64_s4_w16_b": 1, "mla_ds_fp8c_r16_t64_s4_b": 1}}

func buildSched(t *testing.T, name string, tp, batch, ctx int) *model.Schedule {
	t.Helper()
	a, err := model.Resolve(name)
	if err != nil {
		t.Fatalf("resolve %s: %v", name, err)
	}
	s, err := model.Build(a, model.Plan{TP: tp}, model.Workload{Phase: model.Decode, Batch: batch, Context: ctx})
	if err != nil {
		t.Fatalf("build %s: %v", name, err)
	}
	return s
}

func planByID(t *testing.T, s *model.Schedule, plans []opPlan, id string) (*model.Op, *opPlan) {
	t.Helper()
	for i := range s.Ranks[0] {
		if s.Ranks[0][i].ID == id {
			return &s.Ranks[0][i], &plans[i]
		}
	}
	t.Fatalf("op %s not in schedule", id)
	return nil, nil
}

// Kimi-K2.5 at TP 8, decode batch 32, context 4096, one rank's shard on an
// H200. Expected values are derived from the published config (hidden 7168,
// q_lora 1536, kv_lora 512 + rope 64, 64 heads -> 8 per rank, 384 experts,
// top-8, moe_intermediate 2048 -> 256 per rank, INT4 g32 experts).
func TestPlanKimiShard(t *testing.T) {
	s := buildSched(t, "kimi-k2.5", 8, 32, 4096)
	pl := &planner{sched: s, dev: h200, seed: 1, shard: true, world: 8}
	plans, err := pl.planRank(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("fused_qkv_a_proj", func(t *testing.T) {
		op, p := planByID(t, s, plans, "L01.attn.fused_qkv_a_proj")
		// N = q_lora + kv_lora + rope = 1536 + 576 = 2112, K = hidden.
		if p.kind != pkGemmBF16 || p.m != 32 || p.n != 2112 || p.k != 7168 || p.batch != 1 || p.subst != "" {
			t.Fatalf("plan %+v", *p)
		}
		if want := uint64(2112 * 7168 * 2); p.streamBytes != want || float64(want) != op.WeightBytes {
			t.Fatalf("stream bytes %d, op weight bytes %g, want %d", p.streamBytes, op.WeightBytes, want)
		}
	})
	t.Run("w_uk batched per head", func(t *testing.T) {
		_, p := planByID(t, s, plans, "L01.attn.w_uk")
		// qk_nope 128 -> kv_lora 512 for each of 8 local heads.
		if p.kind != pkGemmBF16 || p.batch != 8 || p.n != 512 || p.k != 128 || !strings.Contains(p.kernel, "StridedBatched") {
			t.Fatalf("plan %+v", *p)
		}
	})
	t.Run("experts int4 as fp8 with equal bytes", func(t *testing.T) {
		op, p := planByID(t, s, plans, "L01.moe.experts_gate_up")
		// One expert's gate_up shard: K 7168 x N 2*256 at 0.5 + 2/32 B per
		// value = 2,064,384 B = 7168 x 288 bytes of e4m3.
		if p.kind != pkGemmFP8 || p.n != 288 || p.k != 7168 || p.m != 2 {
			t.Fatalf("plan %+v", *p)
		}
		if !strings.Contains(p.subst, "int4-g32 run as fp8") {
			t.Fatalf("substitution %q", p.subst)
		}
		perExpert := op.WeightBytes / op.Batch
		if got := float64(p.streamBytes) / float64(p.batch); math.Abs(got-perExpert) > 1e-6*perExpert {
			t.Fatalf("bytes per expert %g, schedule %g", got, perExpert)
		}
		// The schedule's expected touched experts 384 x (1 - (1 -
		// 8/384)^32) = 188.2, run as 188, each with ceil(32 x 8 / 188.2)
		// = 2 rows.
		if p.batch != 188 || p.moeExperts != 188 || p.moeRows != 376 {
			t.Fatalf("ran %d experts (batch %d) x %d rows, want 188 x 2", p.moeExperts, p.batch, p.moeRows)
		}
	})
	t.Run("mla_decode", func(t *testing.T) {
		op, p := planByID(t, s, plans, "L01.attn.mla_decode")
		// 8 heads -> one row group of 8 rows; 32 sequences x 1 group = 32
		// blocks per split; 132 blocks fit, / 32 = 4 splits of 1024 tokens
		// (16 tiles of 64), merged in the kernel (128 blocks fit at once).
		if p.kind != pkAttention || p.heads != 8 || p.hg != 8 || !p.tc || p.seqs != 32 || p.tokPerSeq != 1 ||
			p.ctx != 4096 || p.dqk != 576 || p.dlat != 512 || p.splits != 4 || p.chunk != 1024 || p.fp8KV || !p.mla.Coop ||
			p.kernel != "mla_tc_bf16_r8_t64_s2 x4 splits (merged in-kernel)" || p.auxBytes != 4*32*8*(512*4+4) {
			t.Fatalf("plan %+v", *p)
		}
		if want := uint64(32 * 4096 * 576 * 2); p.streamBytes != want || float64(want) != op.KVBytes {
			t.Fatalf("KV bytes %d, op %g, want %d", p.streamBytes, op.KVBytes, want)
		}
	})
	t.Run("norms", func(t *testing.T) {
		_, p := planByID(t, s, plans, "L01.attn.input_norm")
		if p.kind != pkNorm || !p.fusedAdd || p.rows != 32 || p.cols != 7168 {
			t.Fatalf("input_norm plan %+v", *p)
		}
		_, p = planByID(t, s, plans, "L01.attn.q_a_norm")
		if p.fusedAdd || p.cols != 1536 {
			t.Fatalf("q_a_norm plan %+v", *p)
		}
	})
	t.Run("embedding vocab shard", func(t *testing.T) {
		_, p := planByID(t, s, plans, "embed.lookup")
		// 32 tokens, 1/8 of them in this rank's vocabulary shard.
		if p.kind != pkEmbed || p.rows != 32 || p.embedRead != 4 || p.cols != 7168 {
			t.Fatalf("plan %+v", *p)
		}
	})
	t.Run("collectives skipped", func(t *testing.T) {
		_, p := planByID(t, s, plans, "L01.moe.allreduce")
		if p.kind != pkSkip || !strings.Contains(p.skip, "one-rank shard") {
			t.Fatalf("plan %+v", *p)
		}
	})
}

// At batch 1 the grid is filled by splitting the context: 2 x 132 blocks
// wanted, capped at 4096 / (2 tiles x 32) = 64 splits of 64 tokens.
func TestPlanAttentionSplitsBatch1(t *testing.T) {
	s := buildSched(t, "kimi-k2.5", 8, 1, 4096)
	pl := &planner{sched: s, dev: h200, seed: 1, shard: true, world: 8}
	plans, err := pl.planRank(0)
	if err != nil {
		t.Fatal(err)
	}
	_, p := planByID(t, s, plans, "L01.attn.mla_decode")
	if p.tokens != 1 || p.splits != 64 || p.chunk != 64 || !p.mla.Coop {
		t.Fatalf("plan %+v", *p)
	}
}

// The splits of a (sequence, row group) merge through their cluster's
// shared memory when every cluster fits the device at once; otherwise
// through L2. Kimi-K2.5 TP-8 shard, batch 8 at 4096: 8 sequences x 1 row
// group = 8 units; 132 / 8 = 16 splits of 256 tokens (128 blocks fit at
// once), so 8 clusters of 16 blocks are wanted. At batch 32: 4 splits,
// 32 clusters of 4.
func TestPlanAttentionCluster(t *testing.T) {
	const k = "mla_tc_bf16_r8_t64_s2"
	for _, c := range []struct {
		batch, fit16, fit4 int // clusters of 16 and of 4 blocks the device runs at once
		splits, cluster    int
		kernel             string
	}{
		{8, 8, 33, 16, 16, k + " x16 splits (merged in-kernel, cluster of 16)"},
		{8, 7, 33, 16, 0, k + " x16 splits (merged in-kernel)"}, // a GPC short of 16 free SMs: one cluster would wait
		{32, 8, 32, 4, 4, k + " x4 splits (merged in-kernel, cluster of 4)"},
		{32, 8, 31, 4, 0, k + " x4 splits (merged in-kernel)"},
	} {
		s := buildSched(t, "kimi-k2.5", 8, c.batch, 4096)
		dev := h200
		fit := make([]int, 17)
		fit[16], fit[4] = c.fit16, c.fit4
		dev.mlaClusters = map[string][]int{k: fit}
		pl := &planner{sched: s, dev: dev, seed: 1, shard: true, world: 8}
		plans, err := pl.planRank(0)
		if err != nil {
			t.Fatal(err)
		}
		_, p := planByID(t, s, plans, "L01.attn.mla_decode")
		if p.splits != c.splits || p.mla.Cluster != c.cluster || p.kernel != c.kernel || p.mla.MergeMode() != map[bool]int{true: 2, false: 1}[c.cluster > 0] {
			t.Errorf("batch %d, %d clusters of 16 and %d of 4 fit: %d splits, cluster %d, merge %d, %q; want %d, %d, %q",
				c.batch, c.fit16, c.fit4, p.splits, p.mla.Cluster, p.mla.MergeMode(), p.kernel, c.splits, c.cluster, c.kernel)
		}
	}
	// Before sm_90 (no cluster counts) the merge stays in L2.
	s := buildSched(t, "kimi-k2.5", 8, 8, 4096)
	plans, err := (&planner{sched: s, dev: h200, seed: 1, shard: true, world: 8}).planRank(0)
	if err != nil {
		t.Fatal(err)
	}
	if _, p := planByID(t, s, plans, "L01.attn.mla_decode"); p.mla.Cluster != 0 || p.mla.MergeMode() != 1 {
		t.Errorf("no cluster counts: cluster %d, merge %d; want 0, 1", p.mla.Cluster, p.mla.MergeMode())
	}
}

func TestPlanTinyAttentionWidth(t *testing.T) {
	// tiny-mla-moe: kv_lora 64 + rope 16 = 80 wide latent, 8 heads at TP 1.
	s := buildSched(t, "tiny-mla-moe", 1, 32, 4096)
	pl := &planner{sched: s, dev: h200, seed: 1, world: 1}
	plans, err := pl.planRank(0)
	if err != nil {
		t.Fatal(err)
	}
	_, p := planByID(t, s, plans, "L01.attn.mla_decode")
	// The tensor-core kernel is built for the 576-wide latent: the
	// CUDA-core kernel runs this one, 8 heads per block.
	if p.dqk != 80 || p.dlat != 64 || p.heads != 8 || p.hg != 8 || p.tc || p.subst != "" {
		t.Fatalf("plan %+v", *p)
	}
	if want := uint64(32 * 4096 * 80 * 2); p.streamBytes != want {
		t.Fatalf("KV bytes %d, want %d", p.streamBytes, want)
	}
}

// Without tensor cores (or with noTC) the CUDA-core kernel takes the
// smallest head group that holds the heads: 8 heads -> h8.
func TestPlanAttentionCUDACores(t *testing.T) {
	s := buildSched(t, "kimi-k2.5", 8, 32, 4096)
	for _, c := range []struct {
		name string
		dev  devCaps
		noTC bool
	}{{"sm_75", devCaps{ccMajor: 7, ccMinor: 5, sms: 40}, false}, {"noTC", h200, true}} {
		t.Run(c.name, func(t *testing.T) {
			pl := &planner{sched: s, dev: c.dev, seed: 1, shard: true, world: 8, noTC: c.noTC}
			plans, err := pl.planRank(0)
			if err != nil {
				t.Fatal(err)
			}
			_, p := planByID(t, s, plans, "L01.attn.mla_decode")
			if p.tc || p.hg != 8 || !strings.HasPrefix(p.kernel, "mla_decode_bf16_h8") {
				t.Fatalf("plan %+v", *p)
			}
		})
	}
}

func TestPlanGEMMDtypes(t *testing.T) {
	sched := &model.Schedule{Ranks: [][]model.Op{{}}}
	cases := []struct {
		name  string
		wd    model.Dtype
		dev   devCaps
		kind  planKind
		n, k  int
		subst string // substring expected in the substitution, "" for none
	}{
		{"bf16", model.BF16, h200, pkGemmBF16, 1000, 7168, ""},
		// 1000 is not a multiple of 16: padded to 1008.
		{"fp8 padded", model.FP8, h200, pkGemmFP8, 1008, 7168, "padded"},
		// NVFP4 0.5 + 1/16 B per value: 1000 x 0.5625 = 562.5 -> 562 -> 576.
		{"nvfp4 on sm_90", model.NVFP4, h200, pkGemmFP8, 576, 7168, "nvfp4 run as fp8"},
		// No FP8 before sm_89: bf16 with N = 562.5/2 -> 281 -> 288 (x8).
		{"nvfp4 on sm_80", model.NVFP4, devCaps{ccMajor: 8, ccMinor: 0, sms: 108}, pkGemmBF16, 288, 7168, "run as bf16"},
		{"fp8-block128", model.FP8Block128, h200, pkGemmFP8, 1008, 7168, "per-tensor scale"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pl := &planner{sched: sched, dev: c.dev}
			op := model.Op{ID: "L00.x.y", Kind: model.KindGEMM, M: 32, N: 1000, K: 7168, Batch: 1, WeightDtype: c.wd}
			p, err := pl.planGEMM(&op, 1, "")
			if err != nil {
				t.Fatal(err)
			}
			if p.kind != c.kind || p.n != c.n || p.k != c.k {
				t.Fatalf("got kind %v n %d k %d, want %v %d %d", p.kind, p.n, p.k, c.kind, c.n, c.k)
			}
			if (c.subst == "") != (p.subst == "") || !strings.Contains(p.subst, c.subst) {
				t.Fatalf("substitution %q, want it to contain %q", p.subst, c.subst)
			}
		})
	}
}

func TestPlanErrors(t *testing.T) {
	sched := &model.Schedule{Ranks: [][]model.Op{{
		{ID: "L00.attn.q_b_proj", Kind: model.KindGEMM, M: 0, N: 10, K: 10, WeightDtype: model.BF16},
	}}}
	pl := &planner{sched: sched, dev: h200}
	_, err := pl.planRank(0)
	if err == nil || !strings.Contains(err.Error(), "L00.attn.q_b_proj") || !strings.Contains(err.Error(), "M = 0") {
		t.Fatalf("error %v: want the op ID and the bad field", err)
	}
	sched.Ranks[0][0] = model.Op{ID: "L00.attn.x", Kind: "warp_drive"}
	if _, err := pl.planRank(0); err == nil || !strings.Contains(err.Error(), "warp_drive") {
		t.Fatalf("error %v: want the unknown kind named", err)
	}
}

// Under DP attention + EP the pool is every rank's tokens: Kimi-K2.5
// tp1-dp8-ep at batch 64 sends 8 tokens per rank to all 8 ranks, so each
// rank's 48 experts see a pool of 64 tokens: 48 x (1 - (376/384)^64) =
// 35.52 experts touched, run as 36, each with ceil(64 x 8 x 48/384 /
// 35.52) = 2 rows. (Re-deriving the shape from the router op's 8 tokens,
// as the planner once did, ran about 57 of 384.)
func TestPlanMoEDPEP(t *testing.T) {
	a, err := model.Resolve("kimi-k2.5")
	if err != nil {
		t.Fatal(err)
	}
	s, err := model.Build(a, model.Plan{TP: 1, DP: 8, EP: true}, model.Workload{Phase: model.Decode, Batch: 64, Context: 4096})
	if err != nil {
		t.Fatal(err)
	}
	for _, rank := range []int{0, 5} {
		pl := &planner{sched: s, dev: h200, seed: 1, shard: true, world: 8}
		plans, err := pl.planRank(rank)
		if err != nil {
			t.Fatal(err)
		}
		for i := range s.Ranks[rank] {
			op := &s.Ranks[rank][i]
			if op.Kind != model.KindMoEGEMM {
				continue
			}
			if p := &plans[i]; p.moeExperts != 36 || p.batch != 36 || p.moeRows != 72 {
				t.Fatalf("rank %d %s: ran %d experts x %d rows, want 36 x 2", rank, op.ID, p.moeExperts, p.moeRows)
			}
		}
	}
}

// The catalog's runtime choices the planner realizes: SiLU-and-mul ops run
// the row kernel; with all-reduce + RMSNorm fusion the norms right after an
// all-reduce work on its output (in a one-rank shard: the fused kernel's
// local part, said on the span) and no other norm changes.
func TestPlanSiLUAndARNormFusion(t *testing.T) {
	s := buildSched(t, "kimi-k2.5", 8, 32, 4096)
	for _, fuse := range []bool{false, true} {
		pl := &planner{sched: s, dev: h200, seed: 1, shard: true, world: 8, fuseARNorm: fuse}
		plans, err := pl.planRank(0)
		if err != nil {
			t.Fatal(err)
		}
		// Kimi's dense layer 0: gate_up 2 x 18432 / 8 = 4608 -> 2304 per row.
		if _, p := planByID(t, s, plans, "L00.mlp.act"); p.kind != pkSiLUMul || p.rows != 32 || p.cols != 2304 || p.inBytes != 2*32*2304*2 {
			t.Fatalf("mlp.act plan %+v", *p)
		}
		fused := 0
		for i := range plans {
			if plans[i].fusedAR {
				fused++
				op := &s.Ranks[0][i]
				if op.Kind != model.KindNorm || !s.Ranks[0][i-1].IsCollective() || !strings.Contains(plans[i].subst, "local part") {
					t.Fatalf("%s fused: %+v", op.ID, plans[i])
				}
			}
		}
		// Every all-reduce but the last MoE layer's is followed by a norm:
		// the embedding's (-> L00 input_norm), then per layer the
		// attention's (-> post_attn_norm) and the MLP/MoE's (-> the next
		// layer's input_norm, or head.final_norm): 1 + 2 x 61 = 123.
		want := 0
		if fuse {
			want = 123
		}
		if fused != want {
			t.Fatalf("fuse=%v: %d norms fused, want %d", fuse, fused, want)
		}
	}
}

// Decode context parallelism: the rank attends all its heads over its
// share of the context, then rescales its rows by the all-gathered
// log-sum-exps (mla_dcp_correct).
func TestPlanDCP(t *testing.T) {
	a, err := model.Resolve("kimi-k2.5")
	if err != nil {
		t.Fatal(err)
	}
	s, err := model.Build(a, model.Plan{TP: 8, DCP: 8}, model.Workload{Phase: model.Decode, Batch: 8, Context: 4096})
	if err != nil {
		t.Fatal(err)
	}
	pl := &planner{sched: s, dev: h200, seed: 1, shard: true, world: 8}
	plans, err := pl.planRank(0)
	if err != nil {
		t.Fatal(err)
	}
	_, p := planByID(t, s, plans, "L01.attn.mla_decode")
	// 64 heads (q all-gathered over the 8 DCP ranks) over 4096 / 8 = 512
	// tokens: 4 row groups x 8 sequences = 32 units; 264 / 32 = 8 splits
	// fit, but ceil(66 / 32) = 3 splits still give half the SMs a block:
	// ceil(512 / 3) = 171 -> 192 tokens, 3 splits.
	if p.dcp != 8 || p.heads != 64 || p.ctx != 512 || p.mla.Groups != 4 || p.splits != 3 || p.chunk != 192 || !strings.HasSuffix(p.kernel, "+ mla_dcp_correct") {
		t.Fatalf("plan %+v", *p)
	}
	th := uint64(8 * 64)
	if want := 3*th*(512*4+4) + th*4 + 8*th*4; p.auxBytes != want {
		t.Fatalf("aux bytes %d, want %d (partials, rows' lse, all-gathered lse)", p.auxBytes, want)
	}
}
