package cuda

import "testing"

// MLALaunch is the CUDA-core kernel's split rule: the grid fills 2 x SMs
// blocks, each split keeps at least 4 tiles of 32 tokens, at most
// mlaMaxSplits.
func TestMLALaunch(t *testing.T) {
	for _, c := range []struct {
		name                      string
		tokens, heads, ctx, sms   int
		hg, groups, splits, chunk int
		smem                      int
	}{
		// 32 x 1 blocks per split: 2 x 132 / 32 = 8 splits of 512 tokens.
		// Shared memory: 8 x 576 x 4 + 32 x 576 x 2 + 8 x 32 x 4 + 3 x 8 x 4.
		{"b32 h8", 32, 8, 4096, 132, 8, 1, 8, 512, 18432 + 36864 + 1024 + 96},
		// 3 heads take the 4-head kernel; 20 heads two groups of 16, with
		// 777 / 128 = 6 splits asked, chunk ceil(777 / 6) = 130 rounded up
		// to 160, which covers 777 tokens in 5.
		{"h3", 2, 3, 50, 132, 4, 1, 1, 64, 4*576*4 + 36864 + 4*32*4 + 3*4*4},
		{"h20", 3, 20, 777, 132, 16, 2, 5, 160, 16*576*4 + 36864 + 16*32*4 + 3*16*4},
		// A long context on a large device stops at mlaMaxSplits.
		{"max splits", 1, 16, 1 << 20, 10000, 16, 1, mlaMaxSplits, 1024, 16*576*4 + 36864 + 16*32*4 + 3*16*4},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := MLALaunch(c.tokens, c.heads, c.ctx, latentDim, c.sms, false)
			want := MLAGeometry{HeadGroup: c.hg, Groups: c.groups, Splits: c.splits, Chunk: c.chunk, SmemBytes: c.smem}
			if g != want {
				t.Errorf("%+v, want %+v", g, want)
			}
			if g.Chunk%mlaTile != 0 || (g.Splits-1)*g.Chunk >= c.ctx || g.Splits*g.Chunk < c.ctx {
				t.Errorf("%d splits of %d do not cover %d tokens with the last split non-empty", g.Splits, g.Chunk, c.ctx)
			}
		})
	}
}

// MLAFwdLaunch fills the device once: splits = (SMs x blocks per SM) /
// (sequences x row groups), at least two 32-token tiles each and eight
// while half the SMs (66) still get a block, merged in the kernel when the
// whole grid fits at once.
func TestMLAFwdLaunch(t *testing.T) {
	// Shared memory (kernels.cu's layout): Q 16 x 584 x 2 = 18688; a bf16
	// tile 32 x 584 x 2 = 37376; a raw fp8 tile 32 x 592 = 18944; scores
	// 2 x 16 x 32 x 4 + P 16 x 40 x 2 + 3 x 16 x 4 = 5568.
	const bf16s2, fp8s2 = 18688 + 2*37376 + 5568, 18688 + 2*18944 + 37376 + 5568
	occ := map[string]int{"mla_fwd_bf16_s2": 2, "mla_fwd_fp8c_s2": 2}
	for _, c := range []struct {
		name                  string
		s                     MLAShape
		occ                   map[string]int
		groups, splits, chunk int
		coop                  bool
		smem                  int
	}{
		// Kimi-K2.5 TP 8 (8 heads: one row group): 264 blocks fit; batch
		// 32 -> 8 splits of 512 tokens.
		{"b32", MLAShape{Seqs: 32, TokPerSeq: 1, Heads: 8, Ctx: 4096}, occ, 1, 8, 512, true, bf16s2},
		// Batch 8: 33 splits fit, but 4096 / (8 tiles x 32) = 16 splits of
		// 256 tokens still give 8 x 16 = 128 >= 66 blocks.
		{"b8", MLAShape{Seqs: 8, TokPerSeq: 1, Heads: 8, Ctx: 4096}, occ, 1, 16, 256, true, bf16s2},
		{"b8 fp8", MLAShape{Seqs: 8, TokPerSeq: 1, Heads: 8, Ctx: 4096, FP8: true}, occ, 1, 16, 256, true, fp8s2},
		// Batch 8 at 8192: 33 -> 32 splits of 256 tokens (8 tiles each).
		{"b8 8k", MLAShape{Seqs: 8, TokPerSeq: 1, Heads: 8, Ctx: 8192}, occ, 1, 32, 256, true, bf16s2},
		// Batch 1 at 4096: 8-tile splits would be 16 blocks; 66 (half the
		// SMs) asked, capped at 4096 / 64 = 64 splits of 64 tokens.
		{"b1 4k", MLAShape{Seqs: 1, TokPerSeq: 1, Heads: 8, Ctx: 4096}, occ, 1, 64, 64, true, bf16s2},
		// Batch 1 at 128K: 264 splits, ceil(131072 / 264) = 497 -> 512,
		// 256 splits.
		{"b1 128k", MLAShape{Seqs: 1, TokPerSeq: 1, Heads: 8, Ctx: 131072}, occ, 1, 256, 512, true, bf16s2},
		// One DP-attention rank: 64 heads -> 4 row groups; 264 / 16 = 16.
		{"dp rank", MLAShape{Seqs: 4, TokPerSeq: 1, Heads: 64, Ctx: 4096}, occ, 4, 16, 256, true, bf16s2},
		// MTP: 2 tokens x 8 heads = 16 rows, one group: as batch 8.
		{"mtp", MLAShape{Seqs: 8, TokPerSeq: 2, Heads: 8, Ctx: 4096}, occ, 1, 16, 256, true, bf16s2},
		// More sequences than fit: unsplit.
		{"b300", MLAShape{Seqs: 300, TokPerSeq: 1, Heads: 8, Ctx: 4096}, occ, 1, 1, 4096, false, bf16s2},
		// A short context: at least two tiles per split.
		{"ctx 100", MLAShape{Seqs: 1, TokPerSeq: 1, Heads: 8, Ctx: 100}, occ, 1, 1, 128, false, bf16s2},
		// Occupancy unknown: one block per SM assumed, merged by mla_combine.
		{"no occupancy", MLAShape{Seqs: 32, TokPerSeq: 1, Heads: 8, Ctx: 4096}, nil, 1, 4, 1024, false, bf16s2},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := MLAFwdLaunch(c.s, 132, c.occ)
			want := MLAGeometry{Kernel: MLAFwdKernel(c.s.FP8), HeadGroup: 16, Groups: c.groups, Splits: c.splits, Chunk: c.chunk, SmemBytes: c.smem, Coop: c.coop}
			if g != want {
				t.Errorf("%+v, want %+v", g, want)
			}
			if (g.Splits-1)*g.Chunk >= c.s.Ctx || g.Splits*g.Chunk < c.s.Ctx {
				t.Errorf("%d splits of %d do not cover %d tokens with the last split non-empty", g.Splits, g.Chunk, c.s.Ctx)
			}
		})
	}
}
