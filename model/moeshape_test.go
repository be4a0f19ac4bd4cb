package model

import (
	"math"
	"strings"
	"testing"
)

// TestMoEShapeOnOps checks the routing shape the builder puts on the
// routed experts' ops, against figures worked out by hand for Kimi-K2.5
// (384 routed experts, top-8, config.json) on 8 GPUs:
//
//   - tp8, batch 8: every rank holds a slice of all 384 experts and sees
//     all T = 8 tokens: rows = 8 x 8 = 64, touched = 384 x (1 - (376/384)^8)
//     = 59.66.
//   - tp8-ep, batch 8: 48 whole experts per rank, rank r from 48 r; the pool
//     is still the 8 tokens: rows = 8 x 8 x 48/384 = 8, touched = 48 x (1 -
//     (376/384)^8) = 7.46.
//   - tp1-dp8-ep, batch 64: 8 tokens per DP rank, dispatched over all 8
//     ranks, so the pool is 64 tokens: rows = 64 x 8 x 48/384 = 64, touched
//     = 48 x (1 - (376/384)^64) = 35.52 (the figure the CUDA plan used to
//     miss, running about 57).
//   - tp2-dp4-ep, batch 64: 16 tokens per DP group, 8 per TP rank
//     (sequence-parallel MoE), pool 8 x 8 = 64 tokens, the same 48 experts.
func TestMoEShapeOnOps(t *testing.T) {
	a := mustPreset(t, "kimi-k2.5-nvfp4")
	touched := func(local, tokens float64) float64 { return local * (1 - math.Pow(376.0/384, tokens)) }
	cases := []struct {
		name     string
		plan     Plan
		batch    int
		dispatch string
		tokens   int64
		local    int
		rows     float64
		touched  float64
		ids      []string
	}{
		{"tp8", Plan{TP: 8}, 8, "", 8, 384, 64, touched(384, 8), nil},
		{"tp8-ep", Plan{TP: 8, EP: true}, 8, "", 8, 48, 8, touched(48, 8), nil},
		{"tp1-dp8-ep/alltoall", Plan{TP: 1, DP: 8, EP: true}, 64, DispatchAllToAll, 64, 48, 64, touched(48, 64),
			[]string{"L05.moe.dispatch", "L05.moe.combine"}},
		{"tp1-dp8-ep/allgather", Plan{TP: 1, DP: 8, EP: true}, 64, DispatchAllGather, 64, 48, 64, touched(48, 64),
			[]string{"L05.moe.dispatch", "L05.moe.combine"}},
		{"tp2-dp4-ep", Plan{TP: 2, DP: 4, EP: true}, 64, "", 64, 48, 64, touched(48, 64), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustBuild(t, a, tc.plan, Workload{Batch: tc.batch, Context: 4096}, BuildOptions{MoEDispatch: tc.dispatch})
			ids := append([]string{"L05.moe.experts_gate_up", "L05.moe.experts_act", "L05.moe.experts_down"}, tc.ids...)
			for r := range s.Ranks {
				for _, id := range ids {
					op := find(t, s, r, id)
					if op.MoE == nil {
						t.Fatalf("rank %d %s: no MoE shape", r, id)
					}
					m := op.MoE
					first := 0
					if tc.local < 384 {
						first = r * tc.local
					}
					if m.RoutedTokens != tc.tokens || m.TopK != 8 || m.Experts != 384 || m.LocalExperts != tc.local || m.FirstExpert != first {
						t.Fatalf("rank %d %s: shape %+v, want tokens %d top-8 of 384, %d local from %d", r, id, *m, tc.tokens, tc.local, first)
					}
					if math.Abs(m.Rows-tc.rows) > 1e-9 || math.Abs(m.ExpertsTouched-tc.touched) > 1e-9 {
						t.Fatalf("rank %d %s: rows %g touched %g, want %g and %g", r, id, m.Rows, m.ExpertsTouched, tc.rows, tc.touched)
					}
					if err := m.Validate(); err != nil {
						t.Fatalf("rank %d %s: %v", r, id, err)
					}
				}
				// The grouped GEMM's shape is the routing shape's.
				g := find(t, s, r, "L05.moe.experts_gate_up")
				if g.Batch != g.MoE.ExpertsTouched || g.M != int64(math.Ceil(g.MoE.Rows/g.MoE.ExpertsTouched)) {
					t.Fatalf("rank %d: gate_up M %d Batch %g, want ceil(rows/touched) and touched of %+v", r, g.M, g.Batch, *g.MoE)
				}
				for _, id := range []string{"L05.moe.topk", "L05.moe.gate", "L05.attn.o_proj"} {
					if op := find(t, s, r, id); op.MoE != nil {
						t.Fatalf("rank %d %s carries a MoE shape", r, id)
					}
				}
			}
		})
	}
	if touched(48, 64) < 35.5 || touched(48, 64) > 35.55 {
		t.Fatalf("hand figure drifted: %g", touched(48, 64))
	}
}

// TestMoEShapeExecuted checks the integer shape backends run: the touched
// experts and rows rounded, rows spread evenly.
func TestMoEShapeExecuted(t *testing.T) {
	cases := []struct {
		name  string
		shape MoEShape
		want  []int
	}{
		// 64 rows over 35.52 -> 36 experts: 64 = 28 x 2 + 8 x 1.
		{"dp8-ep", NewMoEShape(64, 8, 384, 48, 96), append(repeat(2, 28), repeat(1, 8)...)},
		// 8 rows, 7.46 -> 7 experts: 2 + 6 x 1.
		{"tp8-ep", NewMoEShape(8, 8, 384, 48, 0), append([]int{2}, repeat(1, 6)...)},
		// one token, top-8 of 384 on all experts: 8 rows over 7.85 -> 8 experts.
		{"tp8-b1", NewMoEShape(1, 8, 384, 384, 0), repeat(1, 8)},
		{"no-rows", NewMoEShape(0, 8, 384, 48, 0), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.shape.Executed()
			if len(got) != len(tc.want) {
				t.Fatalf("Executed() = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("Executed() = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestMoEShapeValidate: each broken field is named.
func TestMoEShapeValidate(t *testing.T) {
	good := NewMoEShape(64, 8, 384, 48, 96)
	cases := []struct {
		name  string
		edit  func(*MoEShape)
		field string
	}{
		{"tokens", func(s *MoEShape) { s.RoutedTokens = -1 }, "routed_tokens"},
		{"topk", func(s *MoEShape) { s.TopK = 0 }, "top_k"},
		{"local", func(s *MoEShape) { s.LocalExperts = 50 }, "local_experts"},
		{"first", func(s *MoEShape) { s.FirstExpert = 100 }, "first_expert"},
		{"rows", func(s *MoEShape) { s.Rows = 63 }, "rows"},
		{"touched", func(s *MoEShape) { s.ExpertsTouched = 57 }, "experts_touched"},
	}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := good
			tc.edit(&s)
			err := s.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tc.field)
			}
		})
	}
}
