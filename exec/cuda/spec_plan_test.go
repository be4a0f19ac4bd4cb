package cuda

import (
	"testing"

	"github.com/tpscope/tpscope/model"
)

// TestPlanSpecShard plans rank 0's shard of Kimi-K2.5 at TP 8 with each
// speculative method the verdict runs on a GPU (an EAGLE-3 head, a draft
// model) at batch 1 and 8, K = 3: every op plans, and the draft passes'
// attention runs the MLA decode kernel with the queries of each pass: the
// first over the 1 + 3 verified tokens of each sequence, the later ones
// over one token per sequence.
func TestPlanSpecShard(t *testing.T) {
	a, err := model.Resolve("kimi-k2.5")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kimi-k2.5-eagle3-mla", "moonlight-16b-a3b"} {
		d, err := model.ResolveDrafter(name)
		if err != nil {
			t.Fatal(err)
		}
		m := model.SpecEagle3
		if !d.IsEagle3Head() {
			m = model.SpecDraftModel
		}
		for _, batch := range []int{1, 8} {
			s, err := model.BuildWith(a, model.Plan{TP: 8}, model.Workload{Batch: batch, Context: 4096, KVDtype: model.BF16, SpecTokens: 3},
				model.BuildOptions{Spec: model.Spec{Method: m, Draft: d.Ref, Drafter: d}})
			if err != nil {
				t.Fatal(err)
			}
			pl := &planner{sched: s, dev: h200, seed: 1, shard: true, world: 8}
			plans, err := pl.planRank(0)
			if err != nil {
				t.Fatalf("%s batch %d: %v", name, batch, err)
			}
			first, later := "eagle.s0.attn.mla_decode", "eagle.s2.attn.mla_decode"
			if m == model.SpecDraftModel {
				first, later = "draft.s0.L05.attn.mla_decode", "draft.s2.L05.attn.mla_decode"
			}
			for _, c := range []struct {
				id  string
				tok int
			}{{first, 4}, {later, 1}} {
				_, p := planByID(t, s, plans, c.id)
				if p.kind != pkAttention || p.seqs != batch || p.tokPerSeq != c.tok || p.ctx != 4096 {
					t.Errorf("%s batch %d %s: %d sequences x %d tokens over %d, want %d x %d over 4096", name, batch, c.id, p.seqs, p.tokPerSeq, p.ctx, batch, c.tok)
				}
			}
			_, p := planByID(t, s, plans, "L10.attn.o_proj")
			if p.m != 4*batch {
				t.Errorf("%s batch %d: verify o_proj M %d, want %d", name, batch, p.m, 4*batch)
			}
		}
	}
}
