package model

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

// sameOps compares two schedules op by op on every rank: IDs, shapes,
// dtypes, FLOPs, bytes, collectives, groups and MoE shapes.
func sameOps(t *testing.T, got, want *Schedule) {
	t.Helper()
	if len(got.Ranks) != len(want.Ranks) {
		t.Fatalf("%d ranks, want %d", len(got.Ranks), len(want.Ranks))
	}
	for r := range want.Ranks {
		g, w := got.Ranks[r], want.Ranks[r]
		if len(g) != len(w) {
			t.Fatalf("rank %d: %d ops, want %d", r, len(g), len(w))
		}
		for i := range w {
			a, b := g[i], w[i]
			if (a.MoE == nil) != (b.MoE == nil) || (a.MoE != nil && *a.MoE != *b.MoE) {
				t.Fatalf("rank %d op %d %s: MoE shape %+v, want %+v", r, i, b.ID, a.MoE, b.MoE)
			}
			a.MoE, b.MoE = nil, nil
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("rank %d op %d:\n got %+v\nwant %+v", r, i, a, b)
			}
		}
	}
}

// TestIterationMatchesWorkloadSteps: an iteration holding only decode
// tokens of sequences of one context, or only whole prompts of one length,
// is the step BuildWith lays for that workload, op for op on every rank.
func TestIterationMatchesWorkloadSteps(t *testing.T) {
	cases := []struct {
		preset string
		plan   Plan
		opts   BuildOptions
		batch  int
		ctx    int
		kv     Dtype
	}{
		{"kimi-k2.5-nvfp4", Plan{TP: 8}, BuildOptions{}, 1, 4096, ""},
		{"kimi-k2.5-nvfp4", Plan{TP: 8}, BuildOptions{}, 37, 1500, BF16},
		{"kimi-k2.5", Plan{TP: 8, EP: true}, BuildOptions{}, 16, 800, FP8},
		{"deepseek-v3", Plan{TP: 2, DP: 4, EP: true}, BuildOptions{}, 64, 2048, ""},
		{"deepseek-v3", Plan{TP: 2, DP: 4, EP: true}, BuildOptions{MoEDispatch: DispatchAllGather}, 9, 333, ""},
		{"glm-5", Plan{TP: 8}, BuildOptions{}, 5, 1024, ""},   // DSA sparse, context under index_topk
		{"glm-5", Plan{TP: 8}, BuildOptions{}, 3, 4096, ""},   // prefill beyond index_topk: early queries attend fewer
		{"glm-5", Plan{TP: 8}, BuildOptions{}, 3, 100000, ""}, // decode beyond index_topk
		{"glm-5-nvfp4", Plan{TP: 8}, BuildOptions{DenseDSA: true}, 4, 3000, BF16},
		{"tiny-mla-moe", Plan{TP: 4}, BuildOptions{}, 2, 64, ""},
	}
	for _, c := range cases {
		a := mustPreset(t, c.preset)
		name := fmt.Sprintf("%s/%s/b%d/ctx%d", c.preset, c.plan, c.batch, c.ctx)
		t.Run(name+"/decode", func(t *testing.T) {
			want := mustBuild(t, a, c.plan, Workload{Phase: Decode, Batch: c.batch, Context: c.ctx, KVDtype: c.kv}, c.opts)
			// BuildWith lays ceil(batch/DP) sequences per attention group.
			per := (c.batch + c.plan.Normalized().DP - 1) / c.plan.Normalized().DP
			it := Iteration{KVDtype: c.kv}
			for i := 0; i < per; i++ {
				it.AddDecode(c.ctx)
			}
			got, err := BuildIteration(a, c.plan, it, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			sameOps(t, got, want)
			if got.Iteration == nil || got.Iteration.DecodeSeqs != per {
				t.Errorf("schedule's iteration = %+v, want %d decoding sequences", got.Iteration, per)
			}
		})
		if c.ctx > 4096 {
			continue // prefill of 100K tokens: the decode case is the point
		}
		t.Run(name+"/prefill", func(t *testing.T) {
			want := mustBuild(t, a, c.plan, Workload{Phase: Prefill, Batch: c.batch, Context: c.ctx, KVDtype: c.kv}, c.opts)
			per := (c.batch + c.plan.Normalized().DP - 1) / c.plan.Normalized().DP
			it := Iteration{KVDtype: c.kv}
			for i := 0; i < per; i++ {
				it.AddChunk(c.ctx, 0)
			}
			got, err := BuildIteration(a, c.plan, it, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			sameOps(t, got, want)
		})
	}
	t.Run("dcp decode", func(t *testing.T) {
		a := mustPreset(t, "kimi-k2.5")
		p := Plan{TP: 8, DCP: 8}
		want := mustBuild(t, a, p, Workload{Batch: 3, Context: 100_001, KVDtype: FP8}, BuildOptions{})
		got, err := BuildIteration(a, p, Iteration{DecodeSeqs: 3, DecodeKVTokens: 300_003, KVDtype: FP8}, BuildOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sameOps(t, got, want)
	})
}

// TestIterationMixedStep checks a mixed step's ops against numbers derived
// by hand from Kimi-K2.5's config (hidden 7168, 64 heads -> 8 per rank at
// TP 8, kv_lora 512, rope 64, nope 128, v 128, q_lora 1536, vocab 163840)
// for 3 decoding sequences with 3,000 cached tokens in all, one chunk of
// 100 tokens after a 50-token prefix, and 5 tokens of padding: T = 3 + 100
// + 5 = 108 tokens through the GEMMs, 103 real tokens through rope and the
// cache write, 4 logits rows (one per request).
func TestIterationMixedStep(t *testing.T) {
	a := mustPreset(t, "kimi-k2.5-nvfp4")
	var it Iteration
	for _, ctx := range []int{500, 1000, 1500} {
		it.AddDecode(ctx)
	}
	it.AddChunk(100, 50)
	it.PadTokens = 5
	it.KVDtype = BF16
	s, err := BuildIteration(a, Plan{TP: 8}, it, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const (
		hl, lat, kvl, qk, v = 8, 576, 512, 192, 128
		kvB                 = 2.0 // bf16 cache
	)
	cases := []struct {
		id                string
		m                 int64
		flops, bytesRead  float64
		checkFLOPs, check bool
	}{
		{id: "L05.attn.fused_qkv_a_proj", m: 108},
		{id: "L05.attn.q_b_proj", m: 108},
		{id: "L05.attn.w_uk", m: 3},
		{id: "L05.attn.kv_b_proj", m: 100},
		{id: "L05.attn.rope", m: 103},
		{id: "L05.attn.kv_cache_write", m: 103},
		// Causal pairs of one 100-token chunk: 100 x 101 / 2 = 5050;
		// FLOPs = heads x pairs x 2 x (qk + v).
		{id: "L05.attn.mla_prefill", m: 100, flops: hl * 5050 * 2 * (qk + v), checkFLOPs: true},
		// Prefix of 50 tokens read from the cache: 50 x 576 x 2 B.
		{id: "L05.attn.prefill_ctx_gather", m: 50, bytesRead: 50 * lat * kvB, check: true},
		{id: "L05.attn.prefill_ctx_kv_b_proj", m: 50},
		// 100 queries x 50 prefix keys = 5000 pairs.
		{id: "L05.attn.mla_prefill_ctx", m: 100, flops: hl * 5000 * 2 * (qk + v), checkFLOPs: true},
		{id: "L05.attn.prefill_ctx_merge", m: 100},
		// 3 sequences x 1000 cached tokens each on average, every head:
		// FLOPs = 3 x 8 x 1000 x 2 x (576 + 512); bytes = 3000 x 576 x 2
		// of cache + 3 x 8 x 576 x 2 of queries.
		{id: "L05.attn.mla_decode", m: 3, flops: 3 * hl * 1000 * 2 * (lat + kvl), bytesRead: 3000*lat*kvB + 3*hl*lat*2, checkFLOPs: true, check: true},
		{id: "L05.attn.w_uv", m: 3},
		{id: "L05.attn.o_proj", m: 108},
		{id: "L05.moe.gate", m: 108},
		{id: "head.lm_head", m: 4},
	}
	for _, c := range cases {
		t.Run(c.id, func(t *testing.T) {
			op := find(t, s, 3, c.id)
			if op.M != c.m {
				t.Errorf("M = %d, want %d", op.M, c.m)
			}
			if c.checkFLOPs && !near(op.FLOPs, c.flops, 1e-12) {
				t.Errorf("FLOPs = %g, want %g", op.FLOPs, c.flops)
			}
			if c.check && !near(op.BytesRead, c.bytesRead, 1e-12) {
				t.Errorf("bytes read = %g, want %g", op.BytesRead, c.bytesRead)
			}
		})
	}
	// All-reduces carry every token of the step, padding included:
	// 108 x 7168 x 2 B.
	if op := find(t, s, 0, "L05.attn.allreduce"); op.CommBytes != 108*7168*2 {
		t.Errorf("attention all-reduce %d B, want %d", op.CommBytes, 108*7168*2)
	}
	if op := find(t, s, 0, "L05.moe.experts_gate_up"); op.MoE.RoutedTokens != 108 {
		t.Errorf("routed tokens %d, want 108", op.MoE.RoutedTokens)
	}
}

// TestIterationSparseCaps: GLM-5 with DSA attends to at most index_topk
// (2048) keys per query. Two decoding sequences of 10,000 and 1,000 cached
// tokens: attention reads min(11,000, 2 x 2,048) = 4,096 tokens in all
// (the per-sequence caps give 2,048 + 1,000 = 3,048: the totals' bound is
// an upper bound), while the indexer scores all 11,000.
func TestIterationSparseCaps(t *testing.T) {
	a := mustPreset(t, "glm-5")
	var it Iteration
	it.AddDecode(10_000)
	it.AddDecode(1_000)
	it.KVDtype = BF16
	s, err := BuildIteration(a, Plan{TP: 8}, it, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	op := find(t, s, 0, "L00.attn.mla_decode")
	if want := 4096.0 * 576 * 2; !near(op.KVBytes, want, 1e-12) {
		t.Errorf("mla_decode reads %g B of cache, want %g (4096 tokens)", op.KVBytes, want)
	}
	score := find(t, s, 0, "L00.attn.indexer_score")
	if want := 11_000.0 * float64(a.IndexerCacheBytesPerTokenLayer()); !near(score.KVBytes, want, 1e-12) {
		t.Errorf("indexer reads %g B, want %g (all 11,000 keys)", score.KVBytes, want)
	}
}

func TestIterationValidate(t *testing.T) {
	ok := Iteration{}
	ok.AddDecode(10)
	ok.AddChunk(20, 5)
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid iteration: %v", err)
	}
	cases := []struct {
		name  string
		it    Iteration
		field string
	}{
		{"empty", Iteration{}, "decode_seqs"},
		{"negative seqs", Iteration{DecodeSeqs: -1}, "decode_seqs"},
		{"decode without cache", Iteration{DecodeSeqs: 2, DecodeKVTokens: 1}, "decode_kv_tokens"},
		{"cache without decode", Iteration{PrefillSeqs: 1, PrefillTokens: 1, PrefillCausalPairs: 1, DecodeKVTokens: 5}, "decode_kv_tokens"},
		{"empty chunk", Iteration{PrefillSeqs: 2, PrefillTokens: 1, PrefillCausalPairs: 1}, "prefill_tokens"},
		{"tokens without chunk", Iteration{DecodeSeqs: 1, DecodeKVTokens: 1, PrefillTokens: 4}, "prefill_tokens"},
		{"prefix without chunk", Iteration{DecodeSeqs: 1, DecodeKVTokens: 1, PrefillPrefixTokens: 4}, "prefill_prefix_tokens"},
		{"too many causal pairs", Iteration{PrefillSeqs: 1, PrefillTokens: 4, PrefillCausalPairs: 11}, "prefill_causal_pairs"},
		{"too few causal pairs", Iteration{PrefillSeqs: 1, PrefillTokens: 4, PrefillCausalPairs: 3}, "prefill_causal_pairs"},
		{"prefix pairs without prefix", Iteration{PrefillSeqs: 1, PrefillTokens: 4, PrefillCausalPairs: 10, PrefillPrefixPairs: 1}, "prefill_prefix_pairs"},
		{"negative padding", Iteration{DecodeSeqs: 1, DecodeKVTokens: 1, PadTokens: -1}, "pad_tokens"},
		{"bad kv dtype", Iteration{DecodeSeqs: 1, DecodeKVTokens: 1, KVDtype: "int3"}, "kv_dtype"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.it.Validate()
			var pe *PlanError
			if !errors.As(err, &pe) || pe.Field != c.field || pe.What != "iteration" {
				t.Fatalf("Validate(%+v) = %v, want an iteration error on %q", c.it, err, c.field)
			}
		})
	}
	t.Run("dcp with prefill", func(t *testing.T) {
		_, err := BuildIteration(mustPreset(t, "kimi-k2.5"), Plan{TP: 8, DCP: 8}, ok, BuildOptions{})
		var pe *PlanError
		if !errors.As(err, &pe) || pe.Field != "dcp" {
			t.Fatalf("err = %v, want a plan error on dcp", err)
		}
	})
}
