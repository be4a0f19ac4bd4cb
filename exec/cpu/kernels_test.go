package cpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/tpscope/tpscope/model"
)

func near(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: len %d, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Abs(float64(got[i]-want[i])) > tol {
			t.Fatalf("%s[%d] = %v, want %v (tol %g)", what, i, got[i], want[i], tol)
		}
	}
}

// TestMLADecodeMatchesReference checks absorbed MLA against a plain
// float64 loop: score_j = scale * sum_d q[d] c_j[d] over the whole latent
// (compressed KV + RoPE key), p = softmax(score), out = sum_j p_j c_j[:kvLora].
func TestMLADecodeMatchesReference(t *testing.T) {
	for _, tc := range []struct{ rows, ctx, lat, kvl int }{
		{1, 1, 3, 2}, {3, 7, 6, 4}, {16, 33, 80, 64},
	} {
		t.Run(fmt.Sprintf("rows=%d/ctx=%d/lat=%d", tc.rows, tc.ctx, tc.lat), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			q, c := randSlice32(rng, tc.rows*tc.lat), randSlice32(rng, tc.ctx*tc.lat)
			out := make([]float32, tc.rows*tc.kvl)
			scale := float32(1 / math.Sqrt(float64(tc.lat)))
			mlaDecode(q, c, out, make([]float32, tc.rows*tc.ctx), tc.rows, tc.ctx, tc.lat, tc.kvl, scale)

			want := make([]float32, tc.rows*tc.kvl)
			for r := range tc.rows {
				s := make([]float64, tc.ctx)
				mx := math.Inf(-1)
				for j := range tc.ctx {
					for d := range tc.lat {
						s[j] += float64(q[r*tc.lat+d]) * float64(c[j*tc.lat+d])
					}
					s[j] *= float64(scale)
					mx = math.Max(mx, s[j])
				}
				sum := 0.0
				for j := range s {
					s[j] = math.Exp(s[j] - mx)
					sum += s[j]
				}
				for d := range tc.kvl {
					acc := 0.0
					for j := range tc.ctx {
						acc += s[j] / sum * float64(c[j*tc.lat+d])
					}
					want[r*tc.kvl+d] = float32(acc)
				}
			}
			near(t, "out", out, want, 1e-5)
		})
	}
}

func TestCausalAttentionMatchesReference(t *testing.T) {
	const n, dk, dv = 5, 4, 3
	rng := rand.New(rand.NewPCG(3, 4))
	q, k, v := randSlice32(rng, n*dk), randSlice32(rng, n*dk), randSlice32(rng, n*dv)
	out := make([]float32, n*dv)
	causalAttention(q, k, v, out, make([]float32, n*n), n, dk, dv, 0.5)
	want := make([]float32, n*dv)
	for i := range n {
		w := make([]float64, i+1) // query i sees keys 0..i
		sum := 0.0
		for j := range w {
			for d := range dk {
				w[j] += float64(q[i*dk+d]) * float64(k[j*dk+d])
			}
			w[j] = math.Exp(0.5 * w[j])
			sum += w[j]
		}
		for d := range dv {
			acc := 0.0
			for j := range w {
				acc += w[j] / sum * float64(v[j*dv+d])
			}
			want[i*dv+d] = float32(acc)
		}
	}
	near(t, "out", out, want, 1e-5)
}

// TestScheduledGroupedGEMMMatchesReference runs the grouped expert GEMM on
// a fixed per-expert row split and compares every output row with a
// matrix-vector product over the row's input (a token row when gathering,
// the previous op's row otherwise).
func TestScheduledGroupedGEMMMatchesReference(t *testing.T) {
	const tokens, k, n = 3, 4, 3
	rng := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		name    string
		rowsPer []int
		gather  bool
		experts int
	}{
		{"gather/3-experts", []int{3, 2, 2}, true, 3},
		{"gather/more-rows-than-tokens", []int{5}, true, 1},
		{"assignment-order", []int{2, 0, 1}, false, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			total := 0
			for _, c := range tc.rowsPer {
				total += c
			}
			w := randSlice32(rng, len(tc.rowsPer)*k*n)
			x := randSlice32(rng, max(tokens, total)*k)
			y := make([]float32, total*n)
			rows, experts := scheduledGroupedGEMM(tc.rowsPer, tokens, x, tc.gather, w, k, n, y, make([]float32, total*k))
			if rows != total || experts != tc.experts {
				t.Fatalf("rows %d experts %d, want %d and %d", rows, experts, total, tc.experts)
			}
			row := 0
			for e, c := range tc.rowsPer {
				for range c {
					src := row
					if tc.gather {
						src = row % tokens
					}
					for col := range n {
						acc := 0.0
						for d := range k {
							acc += float64(x[src*k+d]) * float64(w[e*k*n+d*n+col])
						}
						if got := y[row*n+col]; math.Abs(float64(got)-acc) > 1e-5 {
							t.Fatalf("row %d (expert %d) col %d = %v, want %v", row, e, col, got, acc)
						}
					}
					row++
				}
			}
		})
	}
}

func TestTopK(t *testing.T) {
	for _, tc := range []struct {
		name   string
		logits []float32
		k      int
		want   []int32
	}{
		{"distinct", []float32{0.1, 0.9, -1, 0.5}, 2, []int32{1, 3}},
		{"ties-lower-index-first", []float32{1, 2, 2, 0}, 2, []int32{1, 2}},
		{"all", []float32{3, 1, 2}, 3, []int32{0, 2, 1}},
		{"k=1", []float32{-5, -4, -6}, 1, []int32{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idx := make([]int32, tc.k)
			w := make([]float32, tc.k)
			topK(tc.logits, 1, len(tc.logits), tc.k, idx, w)
			if !slices.Equal(idx, tc.want) {
				t.Errorf("idx %v, want %v", idx, tc.want)
			}
			// weights: softmax over the selected logits, summing to 1.
			var sum float64
			for j := range w {
				sum += float64(w[j])
			}
			if math.Abs(sum-1) > 1e-6 {
				t.Errorf("weights %v sum to %v", w, sum)
			}
		})
	}
	// "distinct": softmax(0.9, 0.5) = (1/(1+e^-0.4), e^-0.4/(1+e^-0.4)) = (0.598688, 0.401312).
	idx, w := make([]int32, 2), make([]float32, 2)
	topK([]float32{0.1, 0.9, -1, 0.5}, 1, 4, 2, idx, w)
	near(t, "weights", w, []float32{0.598688, 0.401312}, 1e-6)
}

func TestElementwiseByHand(t *testing.T) {
	// RMSNorm of (3, 4): rms = sqrt((9+16)/2) = 3.535534; x/rms = (0.848528, 1.131371).
	x := []float32{3, 4}
	rmsNorm(x, []float32{1, 1}, 1, 2)
	near(t, "rmsnorm", x, []float32{0.848528, 1.131371}, 1e-5)
	// SiLU-and-mul: silu(0)*5 = 0; silu(1)*2 = 2/(1+e^-1) = 1.462117.
	out := make([]float32, 2)
	siluMul([]float32{0, 1, 5, 2}, out, 1, 2)
	near(t, "silu_mul", out, []float32{0, 1.462117}, 1e-5)
	// RoPE by 90 degrees maps (1, 0) to (0, 1); by 0 degrees leaves (2, 3).
	v := []float32{1, 0, 2, 3}
	rope(v, []float32{0, 1}, []float32{1, 0})
	near(t, "rope", v, []float32{0, 1, 2, 3}, 1e-7)
}

// TestCollectivesMatchSerial runs each collective on n goroutines over the
// shared-memory fabric and checks every element of every rank's result
// against a serial computation from the send buffers.
func TestCollectivesMatchSerial(t *testing.T) {
	for _, kind := range []model.Collective{model.AllReduce, model.AllGather, model.ReduceScatter, model.AllToAll} {
		for _, n := range []int{1, 2, 3, 4, 8} {
			t.Run(fmt.Sprintf("op=%s/ranks=%d", kind, n), func(t *testing.T) {
				group := make([]int, n)
				for i := range group {
					group[i] = i
				}
				// 4*n*7+12 bytes: not a multiple of the chunk count, so padding is exercised.
				op := &model.Op{ID: "L00.attn.allreduce", Kind: model.KindCollective, Collective: kind, Group: group, CommBytes: int64(4*n*7 + 12)}
				c := newCollective(op, true, DefaultWatchdog)
				for i := range n {
					rng := rand.New(rand.NewPCG(7, uint64(i)))
					c.register(i, func(x []float32) { fill(rng, x, 1) })
				}
				for round := range 2 { // twice: the barrier and buffers are reused every step
					var wg sync.WaitGroup
					errs := make([]error, n)
					for i := range n {
						wg.Add(1)
						go func() { defer wg.Done(); errs[i] = c.run(context.Background(), i) }()
					}
					wg.Wait()
					for i, err := range errs {
						if err != nil {
							t.Fatalf("round %d rank %d: %v", round, i, err)
						}
					}
					ch := c.chunk
					for i := range n {
						for p, got := range c.recv[i] {
							var want float64
							switch kind {
							case model.AllReduce:
								for m := range n {
									want += float64(c.send[m][p])
								}
							case model.ReduceScatter:
								for m := range n {
									want += float64(c.send[m][i*ch+p])
								}
							case model.AllGather:
								want = float64(c.send[p/ch][p%ch])
							case model.AllToAll:
								want = float64(c.send[p/ch][i*ch+p%ch])
							}
							if math.Abs(float64(got)-want) > 1e-5 {
								t.Fatalf("round %d rank %d element %d = %v, want %v", round, i, p, got, want)
							}
						}
						all := make([]int, len(c.recv[i]))
						for p := range all {
							all[p] = p
						}
						if err := c.verify(i, all); err != nil {
							t.Fatalf("verify: %v", err)
						}
					}
				}
			})
		}
	}
}

// TestCollectiveVerifyCatchesCorruption: the after-step check reports a
// wrong element with the op, rank, position and serial value.
func TestCollectiveVerifyCatchesCorruption(t *testing.T) {
	op := &model.Op{ID: "L03.moe.allreduce", Kind: model.KindCollective, Collective: model.AllReduce, Group: []int{0, 1}, CommBytes: 64}
	c := newCollective(op, true, DefaultWatchdog)
	for i := range 2 {
		c.register(i, func(x []float32) {
			for j := range x {
				x[j] = float32(i + 1) // rank 0 sends 1s, rank 1 sends 2s: the sum is 3
			}
		})
	}
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.run(context.Background(), i) }()
	}
	wg.Wait()
	c.recv[1][5] = 4
	err := c.verify(1, []int{0, 5})
	want := "allreduce L03.moe.allreduce check failed on rank 1: element 5 = 4, want 3 (serial result over 2 ranks)"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

// TestCollectiveCancel: a member waiting for a peer that never comes
// returns ctx's error.
func TestCollectiveCancel(t *testing.T) {
	op := &model.Op{ID: "x", Kind: model.KindCollective, Collective: model.AllReduce, Group: []int{0, 1}, CommBytes: 64}
	c := newCollective(op, true, DefaultWatchdog)
	for i := range 2 {
		c.register(i, func([]float32) {})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.run(ctx, 0); err == nil || err.Error() != "waiting for peers: context canceled" {
		t.Errorf("err = %v", err)
	}
}

// TestSgemmTiles: the serial tiling (64 x 192 output tiles) gives the plain
// triple-loop product for shapes that cross tile edges, B stored either way.
func TestSgemmTiles(t *testing.T) {
	for _, tc := range []struct{ m, n, k int }{{1, 1, 1}, {70, 200, 5}, {64, 192, 3}, {130, 390, 7}} {
		for _, transB := range []bool{false, true} {
			t.Run(fmt.Sprintf("m=%d/n=%d/k=%d/transB=%v", tc.m, tc.n, tc.k, transB), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(9, 9))
				a, b := randSlice32(rng, tc.m*tc.k), randSlice32(rng, tc.k*tc.n)
				c := make([]float32, tc.m*tc.n)
				ldb := tc.n
				if transB {
					ldb = tc.k
				}
				sgemm(transB, tc.m, tc.n, tc.k, a, tc.k, b, ldb, c, tc.n)
				want := make([]float32, tc.m*tc.n)
				for i := range tc.m {
					for j := range tc.n {
						acc := 0.0
						for d := range tc.k {
							bv := b[d*tc.n+j]
							if transB {
								bv = b[j*tc.k+d]
							}
							acc += float64(a[i*tc.k+d]) * float64(bv)
						}
						want[i*tc.n+j] = float32(acc)
					}
				}
				near(t, "C", c, want, 1e-5)
			})
		}
	}
}
