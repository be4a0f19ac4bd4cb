package model

import (
	"fmt"
	"testing"
)

// TestGraphedStepPadsTokens: a graphed decode step pads tokens, not
// sequences, as vLLM v1 does (GPUModelRunner pads num_input_tokens to the
// capture size and gives the padded positions seq_len 0, so attention does
// no work for them). Its attention ops are the eager step's of the real
// batch, its token ops the eager step's of the captured size; and it lays
// the ops of the engine iteration of the real sequences with that padding
// (BuildIteration), the step the serving simulation prices.
func TestGraphedStepPadsTokens(t *testing.T) {
	capture := &GraphCapture{Sizes: []int{1, 2, 4, 8, 16, 24, 32}}
	cases := []struct {
		preset string
		plan   Plan
		w      Workload
		// graph is the captured size per DP group, seqs the real sequences
		// per group, by hand: ceil(batch/DP) x (1 + spec tokens) rounded
		// up to the sizes.
		graph, seqs int64
	}{
		{"deepseek-v3", Plan{TP: 8}, Workload{Batch: 5, Context: 4096}, 8, 5},
		{"deepseek-v3", Plan{TP: 8}, Workload{Batch: 9, Context: 65536}, 16, 9},
		// MTP, 2 speculative tokens at batch 1: 3 tokens on the graph of 4,
		// not 2 whole sequences of 6 tokens.
		{"deepseek-v3", Plan{TP: 8}, Workload{Batch: 1, Context: 4096, SpecTokens: 2}, 4, 1},
		{"deepseek-v3", Plan{TP: 8}, Workload{Batch: 3, Context: 32768, SpecTokens: 2}, 16, 3},
		// DP 4: ceil(9/4) = 3 sequences per group on the graph of 4.
		{"deepseek-v3", Plan{TP: 2, DP: 4, EP: true}, Workload{Batch: 9, Context: 2048}, 4, 3},
		// DSA sparse attention beyond index_topk.
		{"glm-5", Plan{TP: 8}, Workload{Batch: 3, Context: 100000}, 4, 3},
	}
	for _, c := range cases {
		a := mustPreset(t, c.preset)
		t.Run(fmt.Sprintf("%s/%s/%s/k%d", c.preset, c.plan, c.w, c.w.SpecTokens), func(t *testing.T) {
			got := mustBuild(t, a, c.plan, c.w, BuildOptions{Graphs: capture})
			q := 1 + int64(c.w.SpecTokens)
			d := got.Deploy
			if !d.Graphed || int64(d.GraphTokens) != c.graph || d.TokensPerGroup != c.graph || d.SeqsPerGroup != int(c.seqs) ||
				d.PadTokens != c.graph-c.seqs*q || got.Workload.Batch != c.w.Batch {
				t.Fatalf("deploy %+v, workload batch %d: want graph of %d tokens over %d sequences of %d, batch %d",
					d, got.Workload.Batch, c.graph, c.seqs, q, c.w.Batch)
			}
			for _, id := range []string{"embed.lookup", "L00.attn.input_norm", "L00.attn.o_proj"} {
				if op := find(t, got, 0, id); op.M != c.graph {
					t.Errorf("%s over %d tokens, want the graph's %d", id, op.M, c.graph)
				}
			}
			for _, id := range []string{"L00.attn.mla_decode", "L00.attn.rope", "head.lm_head"} {
				if op := find(t, got, 0, id); op.M != c.seqs*q {
					t.Errorf("%s over %d tokens, want the real sequences' %d", id, op.M, c.seqs*q)
				}
			}
			// Attention as the eager step of the real batch: its KV reads.
			eager := mustBuild(t, a, c.plan, c.w, BuildOptions{})
			for _, id := range []string{"L00.attn.mla_decode", "L03.attn.mla_decode"} {
				g, e := find(t, got, 0, id), find(t, eager, 0, id)
				if g.M != e.M || g.KVBytes != e.KVBytes || g.FLOPs != e.FLOPs {
					t.Errorf("%s: M %d, KV %g B, %g FLOPs; the eager batch-%d step's: M %d, KV %g B, %g FLOPs",
						id, g.M, g.KVBytes, g.FLOPs, c.w.Batch, e.M, e.KVBytes, e.FLOPs)
				}
			}
			if c.w.SpecTokens > 0 {
				// The first MTP pass runs the verified tokens with their
				// padding; its attention the real ones.
				if op := find(t, got, 0, "mtp.s0.mtp.eh_proj"); op.M != c.graph {
					t.Errorf("mtp.s0.mtp.eh_proj over %d tokens, want %d", op.M, c.graph)
				}
				if g, e := find(t, got, 0, "mtp.s0.attn.mla_decode"), find(t, eager, 0, "mtp.s0.attn.mla_decode"); g.M != e.M || g.KVBytes != e.KVBytes {
					t.Errorf("mtp.s0.attn.mla_decode: M %d KV %g B; eager %d, %g B", g.M, g.KVBytes, e.M, e.KVBytes)
				}
			}
			// The serving simulation's iteration of the same sequences and
			// padding lays the same ops.
			it := Iteration{SpecTokens: c.w.SpecTokens, PadTokens: int(c.graph - c.seqs*q)}
			for i := int64(0); i < c.seqs; i++ {
				it.AddDecode(c.w.Context)
			}
			want, err := BuildIteration(a, c.plan, it, BuildOptions{Graphs: capture})
			if err != nil {
				t.Fatal(err)
			}
			sameOps(t, got, want)
		})
	}
}
