package model

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func mustBuild(t testing.TB, a *Arch, p Plan, w Workload, o BuildOptions) *Schedule {
	t.Helper()
	s, err := BuildWith(a, p, w, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// find returns the op with the given ID on rank r, or fails.
func find(t testing.TB, s *Schedule, r int, id string) *Op {
	t.Helper()
	for i := range s.Ranks[r] {
		if s.Ranks[r][i].ID == id {
			return &s.Ranks[r][i]
		}
	}
	t.Fatalf("op %s not on rank %d", id, r)
	return nil
}

func countCollectives(ops []Op, c Collective) (n int, bytes map[int64]int) {
	bytes = map[int64]int{}
	for i := range ops {
		if ops[i].Collective == c {
			n++
			bytes[ops[i].CommBytes]++
		}
	}
	return n, bytes
}

// TestAllReduceCount is the acceptance figure, from
// serving-facts.md: per decoder layer one all-reduce after o_proj and one
// after the MoE (or dense MLP), plus one for the vocab-parallel embedding:
// 2 x 61 + 1 = 123 for Kimi-K2.5 / DeepSeek-V3 and 2 x 78 + 1 = 157 for
// GLM-5, each of T x hidden x 2 B = B x 14,336 (Kimi, DeepSeek) or
// B x 12,288 (GLM-5) at T = B.
func TestAllReduceCount(t *testing.T) {
	// EP with DP = 1 keeps the same all-reduces (serving-facts.md: no
	// all-to-all, one all-reduce combines the experts).
	cases := []struct {
		preset     string
		ep         bool
		batch      int
		n          int
		bytesPerTk int64
	}{
		{"kimi-k2.5-nvfp4", false, 1, 123, 14336},
		{"kimi-k2.5-nvfp4", false, 64, 123, 14336},
		{"kimi-k2.5-nvfp4", true, 8, 123, 14336},
		{"kimi-k2.5", false, 7, 123, 14336},
		{"deepseek-v3", false, 16, 123, 14336},
		{"glm-5", false, 1, 157, 12288},
		{"glm-5-nvfp4", false, 32, 157, 12288},
		{"glm-5-nvfp4", true, 2, 157, 12288},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/ep=%v/batch=%d", c.preset, c.ep, c.batch), func(t *testing.T) {
			s := mustBuild(t, mustPreset(t, c.preset), Plan{TP: 8, EP: c.ep}, Workload{Batch: c.batch, Context: 4096}, BuildOptions{})
			if len(s.Ranks) != 8 {
				t.Fatalf("%d ranks, want 8", len(s.Ranks))
			}
			for r, ops := range s.Ranks {
				n, bytes := countCollectives(ops, AllReduce)
				want := int64(c.batch) * c.bytesPerTk
				if n != c.n || bytes[want] != c.n {
					t.Errorf("rank %d: %d all-reduces %v, want %d of %d B", r, n, bytes, c.n, want)
				}
			}
			// The only other collective is the logits gather.
			if n, _ := countCollectives(s.Ranks[0], AllGather); n != 1 {
				t.Errorf("%d all-gathers, want 1 (logits)", n)
			}
		})
	}
}

var idPattern = regexp.MustCompile(`^(L\d{2,}\.(attn|moe|mlp)\.[a-z0-9_]+|(embed|head|spec)\.[a-z_]+|mtp\.s\d+\.(embed|attn|moe|mlp|mtp|head)\.[a-z0-9_]+|eagle\.s\d+\.(embed|attn|mlp|head|eagle)\.[a-z0-9_]+|draft\.s\d+\.(L\d{2,}\.(attn|moe|mlp)|embed|head)\.[a-z0-9_]+)$`)

// TestScheduleInvariants: op IDs follow DESIGN.md's format, are unique per
// rank and identical across ranks; every collective's group is sorted,
// contains its rank, and each member has the same op; layer and block
// agree with the ID; no negative sizes; every row kernel that moves bytes
// states its rows. Over decode, prefill, DCP, DP + EP, MTP, EAGLE-3, a
// draft model, sparse and dense DSA, and a mixed serving step.
func TestScheduleInvariants(t *testing.T) {
	cases := []struct {
		name   string
		preset string
		plan   Plan
		w      Workload
		o      BuildOptions
	}{
		{"kimi tp8 decode", "kimi-k2.5-nvfp4", Plan{TP: 8}, Workload{Batch: 4, Context: 8192}, BuildOptions{}},
		{"kimi tp8 dcp4", "kimi-k2.5-nvfp4", Plan{TP: 8, DCP: 4}, Workload{Batch: 4, Context: 8192}, BuildOptions{}},
		{"kimi tp2 dp4 ep", "kimi-k2.5-nvfp4", Plan{TP: 2, DP: 4, EP: true}, Workload{Batch: 9, Context: 100}, BuildOptions{}},
		{"deepseek tp8 mtp3", "deepseek-v3", Plan{TP: 8}, Workload{Batch: 2, Context: 100, SpecTokens: 3}, BuildOptions{}},
		{"glm-5 tp8 prefill", "glm-5", Plan{TP: 8}, Workload{Phase: Prefill, Batch: 1, Context: 4096}, BuildOptions{}},
		{"glm-5 tp8 sparse decode", "glm-5-nvfp4", Plan{TP: 8}, Workload{Batch: 4, Context: 8192}, BuildOptions{}},
		{"glm-5 dense dcp8", "glm-5-nvfp4", Plan{TP: 8, DCP: 8}, Workload{Batch: 1, Context: 4096}, BuildOptions{DenseDSA: true}},
		{"tiny tp4 mtp1", "tiny-mla-moe", Plan{TP: 4}, Workload{Batch: 3, Context: 64, SpecTokens: 1}, BuildOptions{}},
		{"kimi tp8 eagle3", "kimi-k2.5", Plan{TP: 8}, Workload{Batch: 4, Context: 4096, SpecTokens: 3}, BuildOptions{Spec: specWith(t, SpecEagle3, "kimi-k2.5-eagle3-mla")}},
		{"kimi tp8 draft model", "kimi-k2.5", Plan{TP: 8}, Workload{Batch: 4, Context: 4096, SpecTokens: 3}, BuildOptions{Spec: specWith(t, SpecDraftModel, "moonlight-16b-a3b")}},
	}
	// A mixed step of the serving scheduler: decodes beside a prompt's
	// chunk over its cached prefix, on the sparse DSA model.
	glm := mustPreset(t, "glm-5-nvfp4")
	mixed, err := BuildIteration(glm, Plan{TP: 8}, Iteration{DecodeSeqs: 6, DecodeKVTokens: 6 * 3000, PrefillSeqs: 1, PrefillTokens: 2048,
		PrefillPrefixTokens: 4096, PrefillCausalPairs: 2048 * 2049 / 2, PrefillPrefixPairs: 2048 * 4096}, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustBuild(t, mustPreset(t, c.preset), c.plan, c.w, c.o)
			checkScheduleInvariants(t, s)
		})
	}
	t.Run("glm-5 tp8 mixed iteration", func(t *testing.T) { checkScheduleInvariants(t, mixed) })
}

// specWith is a speculative method with its drafter resolved.
func specWith(t *testing.T, m SpecMethod, drafter string) Spec {
	t.Helper()
	d, err := ResolveDrafter(drafter)
	if err != nil {
		t.Fatal(err)
	}
	return Spec{Method: m, Draft: d.Ref, Drafter: d}
}

// checkScheduleInvariants checks what every schedule must hold
// (TestScheduleInvariants).
func checkScheduleInvariants(t *testing.T, s *Schedule) {
	t.Helper()
	ids := make([]string, len(s.Ranks[0]))
	for i, op := range s.Ranks[0] {
		ids[i] = op.ID
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if !idPattern.MatchString(id) {
			t.Errorf("bad op ID %q", id)
		}
		if seen[id] {
			t.Errorf("duplicate op ID %q", id)
		}
		seen[id] = true
	}
	for r, ops := range s.Ranks {
		if len(ops) != len(ids) {
			t.Fatalf("rank %d has %d ops, rank 0 %d", r, len(ops), len(ids))
		}
		for i := range ops {
			op := &ops[i]
			if op.ID != ids[i] || op.Rank != r {
				t.Fatalf("rank %d op %d = %s (rank %d), want %s", r, i, op.ID, op.Rank, ids[i])
			}
			if !strings.HasSuffix(op.ID, "."+op.Name) {
				t.Errorf("%s: name %q is not the ID's last part", op.ID, op.Name)
			}
			if strings.HasPrefix(op.ID, "L") && (op.Layer < 0 || !strings.HasPrefix(op.ID, fmt.Sprintf("L%02d.%s.", op.Layer, op.Block))) {
				t.Errorf("%s: layer %d block %s disagree with ID", op.ID, op.Layer, op.Block)
			}
			for _, pass := range []string{"mtp", "eagle", "draft"} {
				if strings.HasPrefix(op.ID, pass+".") && op.Block != pass {
					t.Errorf("%s: block %q, want %s", op.ID, op.Block, pass)
				}
			}
			if op.FLOPs < 0 || op.BytesRead < 0 || op.BytesWritten < 0 || op.WeightBytes > op.BytesRead+1e-9 || op.KVBytes > op.BytesRead+1e-9 {
				t.Errorf("%s: bad sizes %+v", op.ID, *op)
			}
			// A row kernel's grid is its rows (one CTA per token
			// row): one that moves bytes states them, or its
			// price is one CTA's stream (the DSA indexer's RoPE
			// once cost a 16K-token prefill 2.5 ms a layer so).
			switch op.Kind {
			case KindNorm, KindElementwise, KindRouter, KindEmbedding:
				if op.BytesRead+op.BytesWritten > 0 && op.M < 1 {
					t.Errorf("%s: %s kernel of %.0f bytes states no rows (M %d)", op.ID, op.Kind, op.BytesRead+op.BytesWritten, op.M)
				}
			}
			if op.IsCollective() {
				if op.CommBytes <= 0 || len(op.Group) < 2 {
					t.Errorf("%s: comm %d group %v", op.ID, op.CommBytes, op.Group)
				}
				in := false
				for j, g := range op.Group {
					if g == r {
						in = true
					}
					if j > 0 && op.Group[j-1] >= g {
						t.Errorf("%s: group %v not sorted", op.ID, op.Group)
					}
					peer := &s.Ranks[g][i]
					if peer.ID != op.ID || peer.CommBytes != op.CommBytes || fmt.Sprint(peer.Group) != fmt.Sprint(op.Group) {
						t.Errorf("%s: member %d disagrees", op.ID, g)
					}
				}
				if !in {
					t.Errorf("%s: rank %d not in its group %v", op.ID, r, op.Group)
				}
			} else if op.Group != nil || op.CommBytes != 0 {
				t.Errorf("%s: non-collective with group/comm", op.ID)
			}
		}
	}
}

// TestDecodeShapesKimiTP8 checks GEMM shapes and sizes against the config
// dims split by TP 8 (64 heads -> 8 local heads), T = batch = 4, context
// 8192, FP8 KV (the checkpoint's kv_cache_scheme). Expected values are
// products of config numbers written out.
func TestDecodeShapesKimiTP8(t *testing.T) {
	a := mustPreset(t, "kimi-k2.5-nvfp4")
	s := mustBuild(t, a, Plan{TP: 8}, Workload{Batch: 4, Context: 8192}, BuildOptions{})
	type shape struct {
		M, N, K int64
		Batch   float64
		Weight  Dtype
	}
	cases := []struct {
		id   string
		want shape
	}{
		{"L05.attn.fused_qkv_a_proj", shape{4, 1536 + 512 + 64, 7168, 1, BF16}}, // replicated, attention excluded from NVFP4
		{"L05.attn.q_b_proj", shape{4, 8 * (128 + 64), 1536, 1, BF16}},
		{"L05.attn.w_uk", shape{4, 512, 128, 8, BF16}},
		{"L05.attn.w_uv", shape{4, 128, 512, 8, BF16}},
		{"L05.attn.o_proj", shape{4, 7168, 8 * 128, 1, BF16}},
		{"L05.moe.gate", shape{4, 384, 7168, 1, BF16}},
		{"L05.moe.shared_gate_up", shape{4, 2 * 2048 / 8, 7168, 1, NVFP4}},
		{"L05.moe.shared_down", shape{4, 7168, 2048 / 8, 1, NVFP4}},
		{"L00.mlp.gate_up", shape{4, 2 * 18432 / 8, 7168, 1, NVFP4}},
		{"L00.mlp.down", shape{4, 7168, 18432 / 8, 1, NVFP4}},
		{"head.lm_head", shape{4, 163840 / 8, 7168, 1, BF16}},
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			op := find(t, s, 3, c.id)
			got := shape{op.M, op.N, op.K, op.Batch, op.WeightDtype}
			if got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
			// FLOPs = 2 M N K per problem; weights K x N per problem.
			if f := 2 * float64(c.want.M*c.want.N*c.want.K) * c.want.Batch; !near(op.FLOPs, f, 1e-12) {
				t.Errorf("flops %g, want %g", op.FLOPs, f)
			}
			if w := float64(c.want.N*c.want.K) * c.want.Batch * c.want.Weight.BytesPerValue(); !near(op.WeightBytes, w, 1e-12) {
				t.Errorf("weight bytes %g, want %g", op.WeightBytes, w)
			}
		})
	}
	t.Run("mla_decode", func(t *testing.T) {
		op := find(t, s, 0, "L05.attn.mla_decode")
		// 4 sequences x 8192 tokens x 576 values x 1 B (fp8), read once
		// for all 8 local heads.
		if want := 4 * 8192 * 576 * 1.0; !near(op.KVBytes, want, 1e-12) {
			t.Errorf("kv bytes %g, want %g", op.KVBytes, want)
		}
		// 4 tokens x 8 heads x 8192 keys x 2 x (576 score + 512 output).
		if want := 4 * 8 * 8192 * 2 * (576 + 512.0); !near(op.FLOPs, want, 1e-12) {
			t.Errorf("flops %g, want %g", op.FLOPs, want)
		}
	})
	t.Run("kv read per step equals kv bytes per token x context", func(t *testing.T) {
		sum := 0.0
		for _, op := range s.Ranks[0] {
			if op.Kind == KindAttention {
				sum += op.KVBytes
			}
		}
		// 4 sequences x 8192 tokens x 35,136 B (fp8, 61 layers).
		if want := 4 * 8192 * 35136.0; !near(sum, want, 1e-12) {
			t.Errorf("sum %g, want %g", sum, want)
		}
	})
}

// TestRoutedExperts checks the grouped GEMMs' expected touched experts
// E_local x (1 - (1 - k/E)^T) and their sizes, with numbers computed by
// hand: pure TP at T = 1 touches exactly k = 8 experts; at T = 64,
// (376/384)^64 = 0.259910 so 384 x 0.740090 = 284.194; under EP (48 per
// rank) at T = 1 a rank expects 48 x 8/384 = 1 expert.
func TestRoutedExperts(t *testing.T) {
	a := mustPreset(t, "kimi-k2.5-nvfp4")
	cases := []struct {
		name           string
		plan           Plan
		batch          int
		touched        float64
		n              int64 // gate_up N per expert shard
		assignments    float64
		touchedRelTol  float64
		wantWeightByte float64
	}{
		{"tp8 b1", Plan{TP: 8}, 1, 8, 512, 8, 1e-12, 8 * 512 * 7168 * 0.5625},
		{"tp8 b64", Plan{TP: 8}, 64, 284.194, 512, 512, 1e-5, 284.194 * 512 * 7168 * 0.5625},
		{"tp8 ep b1", Plan{TP: 8, EP: true}, 1, 1, 4096, 1, 1e-12, 1 * 4096 * 7168 * 0.5625},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustBuild(t, a, c.plan, Workload{Batch: c.batch, Context: 10}, BuildOptions{})
			op := find(t, s, 0, "L10.moe.experts_gate_up")
			if !near(op.Batch, c.touched, c.touchedRelTol) || op.N != c.n || op.K != 7168 || op.Kind != KindMoEGEMM {
				t.Errorf("batch %.4f N %d K %d kind %s, want %.4f %d 7168", op.Batch, op.N, op.K, op.Kind, c.touched, c.n)
			}
			// FLOPs = 2 x assignments x N x K (assignments = T x k x E_local/E).
			if want := 2 * c.assignments * float64(c.n) * 7168; !near(op.FLOPs, want, 1e-12) {
				t.Errorf("flops %g, want %g", op.FLOPs, want)
			}
			if !near(op.WeightBytes, c.wantWeightByte, c.touchedRelTol) {
				t.Errorf("weight bytes %g, want %g", op.WeightBytes, c.wantWeightByte)
			}
			if n, _ := countCollectives(s.Ranks[0], AllToAll); n != 0 {
				t.Errorf("%d all-to-alls with DP = 1, want none (serving-facts.md)", n)
			}
		})
	}
}

// TestDPAttentionEP: TP 1 x DP 8 with EP, batch 8 (one sequence per DP
// rank): no all-reduce in any layer (TP groups of one), an all-to-all
// dispatch and combine per MoE layer (60) over all 8 ranks, 48 experts per
// rank over 8 routed tokens: 48 x (1 - (376/384)^8) = 7.44035 touched.
// Dispatch bytes per rank: 1 token x expected distinct ranks x 7168 x 2,
// the distinct ranks 8 x (1 - C(336,8)/C(384,8)) = 5.2800157 (hand
// computation with Python's math.comb).
func TestDPAttentionEP(t *testing.T) {
	a := mustPreset(t, "kimi-k2.5-nvfp4")
	s := mustBuild(t, a, Plan{TP: 1, DP: 8, EP: true}, Workload{Batch: 8, Context: 1000}, BuildOptions{})
	if n, _ := countCollectives(s.Ranks[5], AllReduce); n != 0 {
		t.Errorf("%d all-reduces, want 0", n)
	}
	n, bytes := countCollectives(s.Ranks[5], AllToAll)
	wantBytes := int64(75694) // 5.2800157 x 14,336 = 75,694.3, rounded
	if n != 120 || bytes[wantBytes] != 120 {
		t.Errorf("%d all-to-alls %v, want 120 of %d B", n, bytes, wantBytes)
	}
	op := find(t, s, 5, "L01.moe.dispatch")
	if fmt.Sprint(op.Group) != "[0 1 2 3 4 5 6 7]" {
		t.Errorf("dispatch group %v", op.Group)
	}
	gu := find(t, s, 5, "L01.moe.experts_gate_up")
	if !near(gu.Batch, 7.44035, 1e-5) || gu.N != 4096 {
		t.Errorf("experts touched %.5f N %d, want 7.44035 4096", gu.Batch, gu.N)
	}
	// Attention of a DP rank sees its own sequence: T = 1, all 64 heads.
	if o := find(t, s, 5, "L01.attn.o_proj"); o.M != 1 || o.K != 64*128 {
		t.Errorf("o_proj M %d K %d, want 1 8192", o.M, o.K)
	}

	// TP 2 x DP 4, batch 8: 2 sequences per DP group, so T = 2 per group
	// and each TP rank routes ceil(2/2) = 1 token (sequence-parallel MoE);
	// attention all-reduce and the MoE all-gather span the TP pair
	// (2 x 14,336 B); shared experts are whole (2 x 2048 gate_up).
	t.Run("tp2 x dp4 sequence-parallel moe", func(t *testing.T) {
		s := mustBuild(t, a, Plan{TP: 2, DP: 4, EP: true}, Workload{Batch: 8, Context: 1000}, BuildOptions{})
		op := find(t, s, 5, "L01.attn.allreduce")
		if fmt.Sprint(op.Group) != "[4 5]" || op.CommBytes != 2*14336 {
			t.Errorf("group %v bytes %d, want [4 5] %d", op.Group, op.CommBytes, 2*14336)
		}
		ag := find(t, s, 5, "L01.moe.allgather")
		if ag.Collective != AllGather || fmt.Sprint(ag.Group) != "[4 5]" || ag.CommBytes != 2*14336 {
			t.Errorf("moe all-gather %s %v %d", ag.Collective, ag.Group, ag.CommBytes)
		}
		if g := find(t, s, 5, "L01.moe.gate"); g.M != 1 {
			t.Errorf("router M %d, want 1", g.M)
		}
		if sh := find(t, s, 5, "L01.moe.shared_gate_up"); sh.M != 1 || sh.N != 4096 {
			t.Errorf("shared gate_up M %d N %d, want 1 4096", sh.M, sh.N)
		}
		if n, _ := countCollectives(s.Ranks[5], AllReduce); n != 61+1+1 {
			t.Errorf("%d all-reduces, want 63 (attention x 61, the dense layer MLP, embedding)", n)
		}
	})
	// vLLM's allgather_reducescatter backend: every rank gathers all 8
	// ranks' tokens (8 x 1 token x 14,336 B = 114,688 B) and
	// reduce-scatters the same size back.
	t.Run("allgather dispatch", func(t *testing.T) {
		s := mustBuild(t, a, Plan{TP: 1, DP: 8, EP: true}, Workload{Batch: 8, Context: 1000}, BuildOptions{MoEDispatch: DispatchAllGather})
		d := find(t, s, 2, "L01.moe.dispatch")
		c := find(t, s, 2, "L01.moe.combine")
		if d.Collective != AllGather || d.CommBytes != 114688 || c.Collective != ReduceScatter || c.CommBytes != 114688 {
			t.Errorf("dispatch %s %d combine %s %d", d.Collective, d.CommBytes, c.Collective, c.CommBytes)
		}
	})
}

// TestDCP: DCP = k splits each sequence's cache over k ranks: attention
// reads context/k tokens for k x local heads, preceded by a query
// all-gather and followed by the LSE all-gather and output reduce-scatter
// over consecutive groups of k ranks (vLLM's cp_lse_ag_out_rs).
func TestDCP(t *testing.T) {
	a := mustPreset(t, "kimi-k2.5-nvfp4")
	w := Workload{Batch: 2, Context: 8192, KVDtype: BF16}
	cases := []struct {
		dcp   int
		group string
	}{{2, "[2 3]"}, {4, "[0 1 2 3]"}, {8, "[0 1 2 3 4 5 6 7]"}}
	for _, c := range cases {
		t.Run(fmt.Sprintf("dcp=%d", c.dcp), func(t *testing.T) {
			s := mustBuild(t, a, Plan{TP: 8, DCP: c.dcp}, w, BuildOptions{})
			op := find(t, s, 3, "L07.attn.mla_decode")
			k := float64(c.dcp)
			// 2 sequences x 8192/k tokens x 576 x 2 B.
			if want := 2 * 8192 / k * 576 * 2; !near(op.KVBytes, want, 1e-12) || op.Batch != 8*k {
				t.Errorf("kv %g heads %g, want %g %g", op.KVBytes, op.Batch, want, 8*k)
			}
			ag := find(t, s, 3, "L07.attn.dcp_q_allgather")
			// gathered queries: 2 tokens x 8k heads x 576 x 2 B.
			if fmt.Sprint(ag.Group) != c.group || ag.CommBytes != int64(2*8*c.dcp*576*2) {
				t.Errorf("q allgather group %v bytes %d", ag.Group, ag.CommBytes)
			}
			rs := find(t, s, 3, "L07.attn.dcp_out_reducescatter")
			if rs.Collective != ReduceScatter || rs.CommBytes != int64(2*8*c.dcp*512*2) {
				t.Errorf("out reduce-scatter %s %d", rs.Collective, rs.CommBytes)
			}
			find(t, s, 3, "L07.attn.dcp_lse_allgather")
			if n, _ := countCollectives(s.Ranks[3], AllReduce); n != 123 {
				t.Errorf("%d all-reduces, want 123 (DCP adds, never removes)", n)
			}
		})
	}
}

// TestDSA: GLM-5 runs the indexer over the whole context and sparse MLA
// over min(context, 2048) tokens unless DenseDSA is set.
func TestDSA(t *testing.T) {
	a := mustPreset(t, "glm-5")
	cases := []struct {
		name     string
		ctx      int
		dense    bool
		attended int64
	}{
		{"sparse long", 8192, false, 2048},
		{"sparse short", 1000, false, 1000},
		{"dense", 8192, true, 8192},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustBuild(t, a, Plan{TP: 8}, Workload{Batch: 3, Context: c.ctx}, BuildOptions{DenseDSA: c.dense})
			op := find(t, s, 0, "L10.attn.mla_decode")
			// 3 sequences x attended x 576 x 2 B (bf16).
			if op.N != c.attended || !near(op.KVBytes, 3*float64(c.attended)*576*2, 1e-12) {
				t.Errorf("attended %d kv %g", op.N, op.KVBytes)
			}
			hasIdx := false
			for _, o := range s.Ranks[0] {
				if o.ID == "L10.attn.indexer_score" {
					hasIdx = true
					// 3 sequences x ctx x (128 fp8 + 4 scale) B; FLOPs 3 x ctx
					// pairs x 32 heads x (2 x 128 + 2).
					if !near(o.KVBytes, 3*float64(c.ctx)*132, 1e-12) || !near(o.FLOPs, 3*float64(c.ctx)*32*258, 1e-12) {
						t.Errorf("indexer kv %g flops %g", o.KVBytes, o.FLOPs)
					}
				}
			}
			if hasIdx == c.dense {
				t.Errorf("indexer present = %v with DenseDSA = %v", hasIdx, c.dense)
			}
		})
	}
}

// TestSpecTokensNeedMTP: speculative tokens on a checkpoint without an MTP
// layer are refused (a field error on spec_tokens naming the model), not
// priced as a verify pass with no draft; 0 tokens build.
func TestSpecTokensNeedMTP(t *testing.T) {
	a := mustPreset(t, "kimi-k2.5-nvfp4")
	if a.MTPLayers != 0 {
		t.Fatalf("kimi-k2.5-nvfp4 has %d MTP layers; the case needs a model without", a.MTPLayers)
	}
	_, err := BuildWith(a, Plan{TP: 8}, Workload{Batch: 4, Context: 100, SpecTokens: 2}, BuildOptions{})
	var pe *PlanError
	if !errors.As(err, &pe) || pe.Field != "spec_tokens" || pe.Value != "2" || !strings.Contains(pe.Want, "kimi-k2.5-nvfp4 has no MTP layer") {
		t.Fatalf("spec tokens 2 on a model without MTP: %v, want a spec_tokens field error naming the model", err)
	}
	if _, err := BuildWith(a, Plan{TP: 8}, Workload{Batch: 4, Context: 100}, BuildOptions{}); err != nil {
		t.Fatalf("without spec tokens: %v", err)
	}
}

// TestSpeculativeMTP: with k speculative tokens the main model runs
// T = B x (1 + k); DeepSeek-V3's MTP layer drafts k passes: the first over
// all T tokens, the next k-1 over B (vLLM's proposer). Each pass adds an
// embedding all-reduce and the layer's two all-reduces: 123 + 3k.
func TestSpeculativeMTP(t *testing.T) {
	cases := []struct {
		preset    string
		spec      int
		mainT     int64
		mtpT      []int64
		allReduce int
	}{
		{"deepseek-v3", 2, 4 * 3, []int64{12, 4}, 123 + 3*2},
		{"deepseek-v3", 0, 4, nil, 123},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/spec=%d", c.preset, c.spec), func(t *testing.T) {
			s := mustBuild(t, mustPreset(t, c.preset), Plan{TP: 8}, Workload{Batch: 4, Context: 100, SpecTokens: c.spec}, BuildOptions{})
			if op := find(t, s, 0, "L30.attn.o_proj"); op.M != c.mainT {
				t.Errorf("main T %d, want %d", op.M, c.mainT)
			}
			if lm := find(t, s, 0, "head.lm_head"); lm.M != c.mainT {
				t.Errorf("logits for %d tokens, want %d (every position is verified)", lm.M, c.mainT)
			}
			for i, want := range c.mtpT {
				op := find(t, s, 0, fmt.Sprintf("mtp.s%d.attn.o_proj", i))
				if op.M != want || op.Layer != 61 {
					t.Errorf("mtp pass %d: T %d layer %d, want %d 61", i, op.M, op.Layer, want)
				}
			}
			if n, _ := countCollectives(s.Ranks[0], AllReduce); n != c.allReduce {
				t.Errorf("%d all-reduces, want %d", n, c.allReduce)
			}
		})
	}
}

// TestPrefill: M = batch x context tokens through every GEMM, causal
// attention in the non-absorbed form: FLOPs = B x local heads x
// 2 x (qk 192 + v 128) x ctx (ctx + 1) / 2 = 2 x 8 x 640 x 1024 x 1025 / 2
// = 5,373,952,000 for Kimi at TP 8, B 2, context 1024; logits only for
// the last token of each prompt.
func TestPrefill(t *testing.T) {
	a := mustPreset(t, "kimi-k2.5-nvfp4")
	s := mustBuild(t, a, Plan{TP: 8}, Workload{Phase: Prefill, Batch: 2, Context: 1024}, BuildOptions{})
	if op := find(t, s, 0, "L03.attn.q_b_proj"); op.M != 2048 {
		t.Errorf("q_b_proj M %d, want 2048", op.M)
	}
	if op := find(t, s, 0, "L03.attn.kv_b_proj"); op.N != 8*(128+128) || op.K != 512 {
		t.Errorf("kv_b_proj N %d K %d, want 2048 512", op.N, op.K)
	}
	if op := find(t, s, 0, "L03.attn.mla_prefill"); !near(op.FLOPs, 5373952000, 1e-12) {
		t.Errorf("prefill attention flops %g", op.FLOPs)
	}
	if op := find(t, s, 0, "head.lm_head"); op.M != 2 {
		t.Errorf("lm_head M %d, want 2", op.M)
	}
	if op := find(t, s, 0, "L03.attn.allreduce"); op.CommBytes != 2048*14336 {
		t.Errorf("all-reduce %d B, want %d", op.CommBytes, 2048*14336)
	}
}

// TestPrefillMTP: after a prefill the MTP layer's first pass runs over the
// same prompt tokens in the prefill form; later passes draft one token per
// prompt in the decode form (absorbed attention over the cache).
func TestPrefillMTP(t *testing.T) {
	s := mustBuild(t, mustPreset(t, "deepseek-v3"), Plan{TP: 8}, Workload{Phase: Prefill, Batch: 2, Context: 512, SpecTokens: 2}, BuildOptions{})
	if op := find(t, s, 0, "mtp.s0.attn.mla_prefill"); op.M != 1024 {
		t.Errorf("mtp pass 0 M %d, want 1024", op.M)
	}
	// 2 prompts x 512 cached tokens x 576 x 2 B (bf16, DeepSeek's default).
	if op := find(t, s, 0, "mtp.s1.attn.mla_decode"); op.M != 2 || !near(op.KVBytes, 2*512*576*2, 1e-12) {
		t.Errorf("mtp pass 1 M %d kv %g", op.M, op.KVBytes)
	}
}

// TestPlanErrors: invalid plans and workloads are *PlanError naming the
// field and what was expected.
func TestPlanErrors(t *testing.T) {
	kimi := mustPreset(t, "kimi-k2.5-nvfp4")
	glm := mustPreset(t, "glm-5")
	cases := []struct {
		name  string
		a     *Arch
		plan  Plan
		w     Workload
		field string
		msg   string
	}{
		{"heads not divisible", kimi, Plan{TP: 3}, Workload{Batch: 1, Context: 1}, "tp", `plan: field "tp" = 3: want a divisor of num_attention_heads (64)`},
		{"experts not divisible", kimi, Plan{TP: 1, DP: 5, EP: true}, Workload{Batch: 1, Context: 1}, "ep", "n_routed_experts (384) divisible by the expert ranks tp x dp (5)"},
		{"dp without ep", kimi, Plan{TP: 1, DP: 2}, Workload{Batch: 1, Context: 1}, "dp", "needs expert parallelism"},
		{"dcp not dividing tp", kimi, Plan{TP: 8, DCP: 3}, Workload{Batch: 1, Context: 1}, "dcp", "a divisor of tp (8)"},
		{"negative tp", kimi, Plan{TP: -1}, Workload{Batch: 1, Context: 1}, "tp", "from 1 to 4096"},
		{"batch 0", kimi, Plan{TP: 8}, Workload{Batch: 0, Context: 1}, "batch", `workload: field "batch" = 0`},
		{"context 0", kimi, Plan{TP: 8}, Workload{Batch: 1, Context: 0}, "context", "from 1 to"},
		{"bad phase", kimi, Plan{TP: 8}, Workload{Phase: "train", Batch: 1, Context: 1}, "phase", `"decode" or "prefill"`},
		{"nvfp4 kv", kimi, Plan{TP: 8}, Workload{Batch: 1, Context: 1, KVDtype: NVFP4}, "kv_dtype", "bf16, fp16 or fp8"},
		{"spec tokens", kimi, Plan{TP: 8}, Workload{Batch: 1, Context: 1, SpecTokens: -1}, "spec_tokens", "from 0 to 16"},
		{"dcp in prefill", kimi, Plan{TP: 8, DCP: 2}, Workload{Phase: Prefill, Batch: 1, Context: 8}, "dcp", "decode only"},
		{"dcp with sparse dsa", glm, Plan{TP: 8, DCP: 2}, Workload{Batch: 1, Context: 8}, "dcp", "dense-DSA"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Build(c.a, c.plan, c.w)
			var pe *PlanError
			if !errors.As(err, &pe) {
				t.Fatalf("err %v, want *PlanError", err)
			}
			if pe.Field != c.field || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("err %q (field %q), want field %q containing %q", err, pe.Field, c.field, c.msg)
			}
		})
	}
}

// BenchmarkBuild measures Build for the scenarios tools rebuild in sweeps.
func BenchmarkBuild(b *testing.B) {
	cases := []struct {
		preset string
		plan   Plan
		w      Workload
	}{
		{"kimi-k2.5-nvfp4", Plan{TP: 8}, Workload{Batch: 1, Context: 8192}},
		{"kimi-k2.5-nvfp4", Plan{TP: 8}, Workload{Batch: 64, Context: 8192}},
		{"glm-5", Plan{TP: 8}, Workload{Batch: 1, Context: 8192}},
		{"deepseek-v3", Plan{TP: 8}, Workload{Batch: 8, Context: 8192, SpecTokens: 2}},
		{"tiny-mla-moe", Plan{TP: 4}, Workload{Batch: 4, Context: 256}},
	}
	for _, c := range cases {
		a := mustPreset(b, c.preset)
		name := fmt.Sprintf("model=%s/ranks=%d/layers=%d/batch=%d", c.preset, c.plan.World(), a.Layers, c.w.Batch)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Build(a, c.plan, c.w); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestFP8BlockActQuant: every Linear with FP8 block-scaled weights
// (DeepSeek-V3's quantization_config: fp8, weight_block_size [128, 128])
// has its input quantization right before it, as vLLM's
// W8A8BlockFp8LinearOp.apply launches it; bf16 Linears (Kimi-K2.5-NVFP4's
// attention, excluded from quantization) and the router gate have none.
// Sizes from the config, TP 8, T = batch = 4: per op M = 4 tokens of N
// values, read in bf16 (2 B), written as FP8 (1 B) plus an FP32 scale per
// 128 values, 3 FLOPs per value.
func TestFP8BlockActQuant(t *testing.T) {
	s := mustBuild(t, mustPreset(t, "deepseek-v3"), Plan{TP: 8}, Workload{Batch: 4, Context: 4096}, BuildOptions{})
	for _, c := range []struct {
		linear string
		n      int64 // the Linear's input width (its K)
	}{
		{"L05.attn.fused_qkv_a_proj", 7168}, // hidden
		{"L05.attn.q_b_proj", 1536},         // q_lora_rank
		{"L05.attn.o_proj", 16 * 128},       // 128 heads / 8 x v_head_dim
		{"L00.mlp.gate_up", 7168},           // hidden (dense layers 0-2)
		{"L00.mlp.down", 18432 / 8},         // intermediate / TP
		{"L05.moe.shared_gate_up", 7168},    // hidden
		{"L05.moe.shared_down", 2048 / 8},   // one shared expert's intermediate / TP
	} {
		t.Run(c.linear, func(t *testing.T) {
			ops := s.Ranks[2]
			i := slices.IndexFunc(ops, func(o Op) bool { return o.ID == c.linear })
			if i < 1 {
				t.Fatalf("%s at %d, want it after at least one op", c.linear, i)
			}
			if ops[i].WeightDtype != FP8Block128 || ops[i].K != c.n {
				t.Fatalf("%s: dtype %v, K %d, want an fp8-block128 GEMM of K %d", c.linear, ops[i].WeightDtype, ops[i].K, c.n)
			}
			q := ops[i-1]
			if q.ID != c.linear+"_quant" || q.Kind != KindElementwise || q.M != 4 || q.N != c.n || q.K != 128 {
				t.Fatalf("op before %s: %s %s M %d N %d K %d, want %s_quant elementwise 4 x %d, group 128", c.linear, q.ID, q.Kind, q.M, q.N, q.K, c.linear, c.n)
			}
			vals := 4 * float64(c.n)
			groups := 4 * math.Ceil(float64(c.n)/128)
			if !near(q.BytesRead, 2*vals, 1e-12) || !near(q.BytesWritten, vals+4*groups, 1e-12) || !near(q.FLOPs, 3*vals, 1e-12) {
				t.Errorf("bytes %g / %g, flops %g; want %g / %g, %g", q.BytesRead, q.BytesWritten, q.FLOPs, 2*vals, vals+4*groups, 3*vals)
			}
		})
	}
	for _, id := range []string{"L05.moe.gate_quant", "L05.attn.w_uk_quant", "L05.attn.w_uv_quant", "head.lm_head_quant"} {
		if slices.ContainsFunc(s.Ranks[0], func(o Op) bool { return o.ID == id }) {
			t.Errorf("%s: the router gate, the absorbed BMMs and the LM head are not FP8 block-scaled", id)
		}
	}
	k := mustBuild(t, mustPreset(t, "kimi-k2.5-nvfp4"), Plan{TP: 8}, Workload{Batch: 4, Context: 4096}, BuildOptions{})
	for _, op := range k.Ranks[0] {
		if strings.HasSuffix(op.Name, "_quant") {
			t.Errorf("%s: Kimi-K2.5-NVFP4 has no FP8 block-scaled Linear", op.ID)
		}
	}
}
