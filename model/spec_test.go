package model

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func mustDrafter(t *testing.T, name string) *Arch {
	t.Helper()
	d, err := ResolveDrafter(name)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func specOpts(m SpecMethod, d *Arch) BuildOptions {
	o := BuildOptions{Spec: Spec{Method: m, Drafter: d}}
	if d != nil {
		o.Spec.Draft = d.Ref
	}
	return o
}

// opsByID indexes rank 0's ops.
func opsByID(s *Schedule) map[string]*Op {
	m := map[string]*Op{}
	for i := range s.Ranks[0] {
		m[s.Ranks[0][i].ID] = &s.Ranks[0][i]
	}
	return m
}

// TestEagle3Step lays Kimi-K2.5 at TP 8, batch 2, K = 3 with the
// kimi-k2.5-eagle3-mla head and checks the numbers the head's config and
// vLLM's EAGLE-3 proposer give, worked out by hand:
//   - the verify pass runs T = 2 x (1 + 3) = 8 tokens through the target;
//   - the rejection sampler reads 8 x 163840 logits;
//   - 3 draft passes; the first's fc combines 3 aux states of 7168 (K
//     21504) for the 8 tokens, later passes run 2 tokens (one per
//     sequence);
//   - the head's fused q_a/kv_a reads 2 x 7168 = 14336 and writes
//     1536 + 512 + 64 = 2112; its dense MLP's gate_up is 2 x 18432 / 8 =
//     4608 wide; its LM head 163840 / 8 = 20480 rows per rank, logits for
//     the 2 sequences in every pass; the argmax gather moves 2 x 12 x 8 B;
//   - 4 collectives per pass (embedding, attention and MLP all-reduces,
//     the argmax gather) on top of the target's 124 (123 all-reduces and
//     the logits gather): 136.
func TestEagle3Step(t *testing.T) {
	kimi, head := mustPreset(t, "kimi-k2.5-nvfp4"), mustDrafter(t, "kimi-k2.5-eagle3-mla")
	s := mustBuild(t, kimi, Plan{TP: 8}, Workload{Batch: 2, Context: 300, SpecTokens: 3}, specOpts(SpecEagle3, head))
	ops := opsByID(s)
	check := func(id string, m, n, k int64) {
		t.Helper()
		op := ops[id]
		if op == nil {
			t.Fatalf("no op %s", id)
		}
		if op.M != m || op.N != n || op.K != k {
			t.Errorf("%s: M N K = %d %d %d, want %d %d %d", id, op.M, op.N, op.K, m, n, k)
		}
		if op.Block != "eagle" && strings.HasPrefix(id, "eagle.") {
			t.Errorf("%s: block %q", id, op.Block)
		}
	}
	check("embed.lookup", 8, 7168, 0)
	check("spec.rejection_sample", 8, 163840, 0)
	check("eagle.s0.eagle.fc", 8, 7168, 21504)
	check("eagle.s0.attn.fused_qkv_a_proj", 8, 2112, 14336)
	check("eagle.s1.attn.fused_qkv_a_proj", 2, 2112, 14336)
	check("eagle.s0.mlp.gate_up", 8, 4608, 7168)
	check("eagle.s0.head.lm_head", 2, 20480, 7168)
	check("eagle.s2.head.lm_head", 2, 20480, 7168)
	check("eagle.s0.attn.mla_decode", 8, 300, 576)
	check("eagle.s2.attn.mla_decode", 2, 300, 576)
	if _, ok := ops["eagle.s1.eagle.fc"]; ok {
		t.Error("eagle.s1.eagle.fc: the fc runs in the first pass only")
	}
	if _, ok := ops["eagle.s3.eagle.fc"]; ok || ops["eagle.s2.eagle.enorm"] == nil {
		t.Error("want exactly 3 draft passes")
	}
	if g := ops["eagle.s1.head.logits_allgather"]; g.CommBytes != 2*12*8 {
		t.Errorf("argmax gather %d B, want %d", g.CommBytes, 2*12*8)
	}
	colls := 0
	for i := range s.Ranks[0] {
		op := &s.Ranks[0][i]
		if op.IsCollective() {
			colls++
		}
		if op.Block == "eagle" && op.Layer != 61 {
			t.Errorf("%s: layer %d, want 61 (past Kimi's 61 layers)", op.ID, op.Layer)
		}
	}
	if colls != 136 {
		t.Errorf("%d collectives per step, want 136", colls)
	}
}

// TestDraftModelStep: Moonlight-16B-A3B drafting for Kimi-K2.5 at draft
// TP 2 under target TP 8, K = 2: two passes of 27 layers; no query LoRA
// (q_b_proj reads the 2048-wide hidden state, no q_a_norm); 16 / 2 = 8
// heads of 192 per rank; experts of 1408 / 2 = 704; every draft
// collective over groups of 2 consecutive ranks; 1 + 2 x 27 + 1 = 56
// collectives per pass.
func TestDraftModelStep(t *testing.T) {
	kimi, moon := mustPreset(t, "kimi-k2.5-nvfp4"), mustDrafter(t, "moonlight-16b-a3b")
	o := specOpts(SpecDraftModel, moon)
	o.Spec.DraftTP = 2
	s := mustBuild(t, kimi, Plan{TP: 8}, Workload{Batch: 1, Context: 1000, SpecTokens: 2}, o)
	ops := opsByID(s)
	if op := ops["draft.s0.L05.attn.q_b_proj"]; op == nil || op.K != 2048 || op.N != 8*192 || op.M != 3 {
		t.Errorf("draft.s0.L05.attn.q_b_proj = %+v, want M 3 (1 x (1 + 2)), N 1536, K 2048", op)
	}
	if _, ok := ops["draft.s0.L05.attn.q_a_norm"]; ok {
		t.Error("q_a_norm in a model without a query LoRA")
	}
	if op := ops["draft.s1.L26.attn.fused_qkv_a_proj"]; op == nil || op.N != 576 || op.M != 1 {
		t.Errorf("draft.s1.L26.attn.fused_qkv_a_proj = %+v, want kv_a only (N 576) over 1 token", op)
	}
	if op := ops["draft.s0.L01.moe.experts_down"]; op == nil || op.K != 704 {
		t.Errorf("draft experts_down = %+v, want K 704", op)
	}
	perPass := 0
	for i := range s.Ranks[5] {
		op := &s.Ranks[5][i]
		if !op.IsCollective() || op.Block != "draft" {
			continue
		}
		if strings.HasPrefix(op.ID, "draft.s0.") {
			perPass++
		}
		if fmt.Sprint(op.Group) != "[4 5]" {
			t.Fatalf("%s on rank 5: group %v, want [4 5]", op.ID, op.Group)
		}
	}
	if perPass != 56 {
		t.Errorf("%d collectives in a draft pass, want 56", perPass)
	}
	if op := ops["draft.s0.L00.attn.mla_decode"]; op == nil || op.Layer != 61 {
		t.Errorf("the draft's layer 0 is laid at Op.Layer %v, want 61", op)
	}
}

// TestNgramStep: a host-drafted step is the verify pass at T = B(1 + K)
// and the rejection sampler, with no draft pass on the device.
func TestNgramStep(t *testing.T) {
	kimi := mustPreset(t, "kimi-k2.5-nvfp4")
	base := mustBuild(t, kimi, Plan{TP: 8}, Workload{Batch: 4, Context: 100}, BuildOptions{})
	s := mustBuild(t, kimi, Plan{TP: 8}, Workload{Batch: 4, Context: 100, SpecTokens: 5}, specOpts(SpecNgram, nil))
	if got, want := len(s.Ranks[0]), len(base.Ranks[0])+1; got != want {
		t.Errorf("%d ops, want the base step's %d + the rejection sampler", got, want-1)
	}
	if op := opsByID(s)["L10.attn.o_proj"]; op.M != 24 {
		t.Errorf("verify pass M = %d, want 4 x 6 = 24", op.M)
	}
}

// TestSpecValidation: one *PlanError naming the field for each way a
// speculative scenario is wrong.
func TestSpecValidation(t *testing.T) {
	kimi, ds := mustPreset(t, "kimi-k2.5-nvfp4"), mustPreset(t, "deepseek-v3")
	head, tinyHead, moon := mustDrafter(t, "kimi-k2.5-eagle3-mla"), mustDrafter(t, "tiny-mla-moe-eagle3"), mustDrafter(t, "moonlight-16b-a3b")
	w := Workload{Batch: 1, Context: 100, SpecTokens: 3}
	cases := []struct {
		name  string
		a     *Arch
		w     Workload
		o     BuildOptions
		field string
		want  string
	}{
		{"unknown method", kimi, w, BuildOptions{Spec: Spec{Method: "medusa"}}, "method", "one of mtp, eagle3"},
		{"K < 1", kimi, Workload{Batch: 1, Context: 100}, specOpts(SpecEagle3, head), "spec_tokens", "at least 1 draft token"},
		{"mtp without MTP layer", kimi, w, BuildOptions{}, "spec_tokens", "no MTP layer"},
		// --spec mtp names the method: it is the fault, not K.
		{"mtp named without MTP layer", kimi, w, BuildOptions{Spec: Spec{Method: SpecMTP}}, "method", "a method with a draft: kimi-k2.5-nvfp4 has no MTP layer"},
		// Without speculative tokens a tree, draft passes or a draft TP
		// price nothing, as a draft model would not.
		{"tree without speculation", kimi, Workload{Batch: 1, Context: 100}, BuildOptions{Spec: Spec{TopK: 2}}, "spec_topk", "no tree without --spec"},
		{"steps without speculation", kimi, Workload{Batch: 1, Context: 100}, BuildOptions{Spec: Spec{Steps: 2}}, "spec_steps", "no draft passes without --spec"},
		{"draft TP without speculation", kimi, Workload{Batch: 1, Context: 100}, BuildOptions{Spec: Spec{DraftTP: 2}}, "draft_tp", "no draft TP without --spec draft"},
		{"eagle3 without head", kimi, w, specOpts(SpecEagle3, nil), "draft_model", "an EAGLE-3 head"},
		{"head for another model", kimi, w, specOpts(SpecEagle3, tinyHead), "draft_model", "a head trained for another model"},
		{"head of another vocabulary", ds, w, specOpts(SpecEagle3, head), "draft_model", "a head trained for another model"},
		{"a whole model as a head", kimi, w, specOpts(SpecEagle3, moon), "draft_model", "an EAGLE-3 head"},
		{"draft model of another vocabulary", ds, w, specOpts(SpecDraftModel, moon), "draft_model", "vocabulary"},
		{"draft TP not a divisor", kimi, w, BuildOptions{Spec: Spec{Method: SpecDraftModel, Drafter: moon, DraftTP: 3}}, "draft_tp", "divisor"},
		{"ngram with a drafter", kimi, w, specOpts(SpecNgram, head), "draft_model", "none"},
		{"tree on ngram", kimi, w, BuildOptions{Spec: Spec{Method: SpecNgram, TopK: 4}}, "spec_topk", "one chain"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(c.a, Plan{TP: 8}, c.w, c.o)
			var pe *PlanError
			if !errors.As(err, &pe) || pe.Field != c.field || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want a PlanError on %q saying %q", err, c.field, c.want)
			}
		})
	}
	if err := Validate(kimi, Plan{TP: 8}, w, specOpts(SpecEagle3, head)); err != nil {
		t.Errorf("the Kimi head on Kimi: %v", err)
	}
	if err := Validate(ds, Plan{TP: 8}, w, BuildOptions{}); err != nil {
		t.Errorf("MTP on DeepSeek-V3 by default: %v", err)
	}
}

// TestSpecTreeStep: a tree of depth 3 and topk 4 verifying 8 draft tokens
// per sequence: T = 2 x 9 = 18 in the verify pass, 3 draft passes, the
// later ones over 2 x 4 = 8 tokens.
func TestSpecTreeStep(t *testing.T) {
	kimi, head := mustPreset(t, "kimi-k2.5-nvfp4"), mustDrafter(t, "kimi-k2.5-eagle3-mla")
	o := specOpts(SpecEagle3, head)
	o.Spec.Steps, o.Spec.TopK = 3, 4
	s := mustBuild(t, kimi, Plan{TP: 8}, Workload{Batch: 2, Context: 300, SpecTokens: 8}, o)
	ops := opsByID(s)
	if op := ops["L03.attn.o_proj"]; op.M != 18 {
		t.Errorf("verify M %d, want 18", op.M)
	}
	if op := ops["eagle.s2.attn.o_proj"]; op == nil || op.M != 8 {
		t.Errorf("eagle.s2.attn.o_proj = %+v, want M 8", op)
	}
	if _, ok := ops["eagle.s3.eagle.enorm"]; ok {
		t.Error("a fourth pass in a tree of depth 3")
	}
}

// TestSpecIterationMatchesStep: an engine iteration of B decoding
// sequences of context c with K speculative tokens builds the ops of the
// Workload step of batch B, context c and K, for each method.
func TestSpecIterationMatchesStep(t *testing.T) {
	kimi, ds := mustPreset(t, "kimi-k2.5"), mustPreset(t, "deepseek-v3")
	head, moon := mustDrafter(t, "kimi-k2.5-eagle3-mla"), mustDrafter(t, "moonlight-16b-a3b")
	cases := []struct {
		name string
		a    *Arch
		o    BuildOptions
	}{
		{"mtp", ds, BuildOptions{}},
		{"eagle3", kimi, specOpts(SpecEagle3, head)},
		{"draft", kimi, specOpts(SpecDraftModel, moon)},
		{"ngram", kimi, specOpts(SpecNgram, nil)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := mustBuild(t, c.a, Plan{TP: 8}, Workload{Batch: 3, Context: 700, SpecTokens: 2}, c.o)
			it := Iteration{SpecTokens: 2}
			for i := 0; i < 3; i++ {
				it.AddDecode(700)
			}
			got, err := BuildIteration(c.a, Plan{TP: 8}, it, c.o)
			if err != nil {
				t.Fatal(err)
			}
			sameOps(t, got, want)
		})
	}
}

// TestDrafterMemory: the EAGLE-3 head's weights on one GPU at TP 8 and
// its KV cache per token, from its dims: fc 3 x 7168 x 7168, the fused
// q_a/kv_a 14336 x 2112 (replicated), q_b 1536 x 64 x 192, kv_b 512 x 64 x
// 256 and o_proj 64 x 128 x 7168 split 8 ways, the MLP 3 x 7168 x 18432 /
// 8, embedding and LM head 20480 x 7168 each, norms; bf16. KV: one layer
// of 576 values.
func TestDrafterMemory(t *testing.T) {
	kimi, head := mustPreset(t, "kimi-k2.5-nvfp4"), mustDrafter(t, "kimi-k2.5-eagle3-mla")
	w := Workload{Batch: 1, Context: 100, SpecTokens: 3}
	o := specOpts(SpecEagle3, head)
	vals := 3*7168.0*7168 + 14336*2112 + (1536*64*192+512*64*256+64*128*7168)/8.0 + 3*7168*18432/8.0 +
		2*20480*7168 + (2*7168 + 1536 + 512) + 2*7168
	if got, want := drafterWeightBytes(Plan{TP: 8}, w, o), 2*vals; abs(got/want-1) > 1e-9 {
		t.Errorf("head weights %.0f B, want %.0f", got, want)
	}
	if got := drafterKVBytesPerToken(Plan{TP: 8}, w, o, FP8); got != 576 {
		t.Errorf("head KV %v B per token in fp8, want 576", got)
	}
	base := KVCapacity(kimi, Plan{TP: 8}, Workload{Batch: 1, Context: 100}, BuildOptions{}, 96e9, 0.9)
	with := KVCapacity(kimi, Plan{TP: 8}, w, o, 96e9, 0.9)
	if with.KVBytesPerToken != base.KVBytesPerToken+576 || with.WeightBytes <= base.WeightBytes {
		t.Errorf("capacity with the head: %+v, without: %+v", with, base)
	}
	// Under DCP 8 the head's cache splits by tokens as the target's 61
	// layers do (vLLM keeps both in one KV cache group): (61 + 1) x 576 B
	// of fp8 latent a token, over 8 ranks.
	if d8 := KVCapacity(kimi, Plan{TP: 8, DCP: 8}, w, o, 96e9, 0.9); d8.KVBytesPerToken != 62*576/8.0 {
		t.Errorf("KV per token with the head at DCP 8: %v B, want 62 x 576 / 8 = %v", d8.KVBytesPerToken, 62*576/8.0)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestDraftModelContextBound: vLLM drafts only while a sequence and its K
// drafts fit the draft model's max_model_len (the V1 runner's
// _input_fits_in_drafter; vllm-project/vllm #58080: past it the drafts
// are placeholders that are never accepted). Moonlight-16B-A3B is served
// at 8192 tokens, so with K = 3 a step at context 8189 drafts and one at
// 8190 would not: refused naming the context, not priced as drafting.
func TestDraftModelContextBound(t *testing.T) {
	kimi, moon := mustPreset(t, "kimi-k2.5"), mustDrafter(t, "moonlight-16b-a3b")
	o := specOpts(SpecDraftModel, moon)
	at := func(ctx int) error {
		return Validate(kimi, Plan{TP: 8}, Workload{Phase: Decode, Batch: 1, Context: ctx, SpecTokens: 3}, o)
	}
	if err := at(8189); err != nil {
		t.Errorf("context 8189: %v", err)
	}
	var pe *PlanError
	if err := at(8190); !errors.As(err, &pe) || pe.Field != "context" || !strings.Contains(pe.Want, "at most 8189 tokens with --spec draft moonlight-16b-a3b: its max_model_len is 8192") {
		t.Errorf("context 8190: err %v, want the context refused at 8189 tokens", err)
	}
}
