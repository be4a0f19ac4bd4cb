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
			want := MLAGeometry{Threads: 256, HeadGroup: c.hg, Groups: c.groups, Splits: c.splits, Chunk: c.chunk, SmemBytes: c.smem}
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
// (sequences x row groups), at least 64 cached tokens each and 256 while
// half the SMs (66) still get a block, chunks rounded up to the kernel's
// 64-token tile, merged in the kernel when the whole grid fits at once;
// 8-row kernels for up to 8 query rows per sequence, else 16-row ones.
func TestMLAFwdLaunch(t *testing.T) {
	// Shared memory (kernels.cu's MlaTC / MlaDS), row16 = 584 x 2 = 1168:
	//   tc r8:  Q 8 x 1168 = 9344, 2 stages x 64 x 1168 = 149504, partial
	//           scores 2 x 64 x 9 x 4 = 4608, P 8 x 72 x 2 = 1152, 96
	//   tc r16: 18688 + 149504 + 2 x 64 x 17 x 4 = 8704 + 2304 + 192
	//   ds r8 (fp8): 9344 + 4 stages x 64 x 576 = 147456 + 8 x 64 x 9 x 4
	//           = 18432 + 1152 + 96 per token half x 2 + 4 mbarriers x 8
	// (the H200's cudacheck bench printed the same: 164704, 179392, 176608).
	// The fp8 8-row kernel runs 16 warps, the others 8.
	const tc8, tc16, ds8 = 9344 + 149504 + 4608 + 1152 + 96, 18688 + 149504 + 8704 + 2304 + 192, 9344 + 147456 + 18432 + 1152 + 2*96 + 4*8
	const k8, k16, f8 = "mla_tc_bf16_r8_t64_s2", "mla_tc_bf16_r16_t64_s2", "mla_ds_fp8c_r8_t64_s4_w16_b"
	occ := map[string]int{k8: 1, k16: 1, f8: 1} // one block per SM (their shared memory)
	for _, c := range []struct {
		name                  string
		s                     MLAShape
		occ                   map[string]int
		kernel                string
		rows                  int
		groups, splits, chunk int
		coop                  bool
		smem                  int
	}{
		// Kimi-K2.5 TP 8 (8 heads: one row group of 8): 132 blocks fit;
		// batch 32 -> 132 / 32 = 4 splits of 1024 tokens.
		{"b32", MLAShape{Seqs: 32, TokPerSeq: 1, Heads: 8, Ctx: 4096}, occ, k8, 8, 1, 4, 1024, true, tc8},
		// Batch 8: 16 splits fit, 4096 / 256 = 16 still allowed.
		{"b8", MLAShape{Seqs: 8, TokPerSeq: 1, Heads: 8, Ctx: 4096}, occ, k8, 8, 1, 16, 256, true, tc8},
		{"b8 fp8", MLAShape{Seqs: 8, TokPerSeq: 1, Heads: 8, Ctx: 4096, FP8: true}, occ, f8, 8, 1, 16, 256, true, ds8},
		// Batch 8 at 8192: 16 splits of 512 tokens.
		{"b8 8k", MLAShape{Seqs: 8, TokPerSeq: 1, Heads: 8, Ctx: 8192}, occ, k8, 8, 1, 16, 512, true, tc8},
		// Batch 1 at 4096: 256-token splits would be 16 blocks; 66 (half
		// the SMs) asked, capped at 4096 / 64 = 64 splits of 64 tokens.
		{"b1 4k", MLAShape{Seqs: 1, TokPerSeq: 1, Heads: 8, Ctx: 4096}, occ, k8, 8, 1, 64, 64, true, tc8},
		// Batch 1 at 128K: 132 splits, ceil(131072 / 132) = 993 -> 1024,
		// 128 splits.
		{"b1 128k", MLAShape{Seqs: 1, TokPerSeq: 1, Heads: 8, Ctx: 131072}, occ, k8, 8, 1, 128, 1024, true, tc8},
		// One DP-attention rank: 64 heads -> 4 row groups of 16; 132 / 16
		// = 8 splits of 512.
		{"dp rank", MLAShape{Seqs: 4, TokPerSeq: 1, Heads: 64, Ctx: 4096}, occ, k16, 16, 4, 8, 512, true, tc16},
		// MTP: 2 tokens x 8 heads = 16 rows, one group of 16: as batch 8.
		{"mtp", MLAShape{Seqs: 8, TokPerSeq: 2, Heads: 8, Ctx: 4096}, occ, k16, 16, 1, 16, 256, true, tc16},
		// More sequences than fit: unsplit.
		{"b300", MLAShape{Seqs: 300, TokPerSeq: 1, Heads: 8, Ctx: 4096}, occ, k8, 8, 1, 1, 4096, false, tc8},
		// A short context: at least 64 tokens per split, one 64-token tile
		// rounded up.
		{"ctx 100", MLAShape{Seqs: 1, TokPerSeq: 1, Heads: 8, Ctx: 100}, occ, k8, 8, 1, 1, 128, false, tc8},
		// Occupancy unknown: one block per SM assumed, merged by mla_combine.
		{"no occupancy", MLAShape{Seqs: 32, TokPerSeq: 1, Heads: 8, Ctx: 4096}, nil, k8, 8, 1, 4, 1024, false, tc8},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := MLAFwdLaunch(c.s, 132, c.occ)
			threads := 256
			if c.kernel == f8 { // 16 warps: two halves of each tile's tokens
				threads = 512
			}
			want := MLAGeometry{Kernel: c.kernel, Threads: threads, HeadGroup: c.rows, Groups: c.groups, Splits: c.splits, Chunk: c.chunk, SmemBytes: c.smem, Coop: c.coop}
			if g != want {
				t.Errorf("%+v, want %+v", g, want)
			}
			if (g.Splits-1)*g.Chunk >= c.s.Ctx || g.Splits*g.Chunk < c.s.Ctx {
				t.Errorf("%d splits of %d do not cover %d tokens with the last split non-empty", g.Splits, g.Chunk, c.s.Ctx)
			}
		})
	}
}

// TestMLAFwdSplit: a caller's split count goes through the planner's
// rounding. Batch 8 x 4096 tokens, 8 heads (one 8-row group per
// sequence), 132 SMs, one block each: 16 splits are 256-token chunks (4
// tiles of 64), 128 blocks, which fit at once, so merged in the kernel;
// 20 asked for round to 205 -> 256-token chunks again (16 splits); 64 are
// 64-token chunks, 512 blocks, more than fit, so merged by mla_combine.
func TestMLAFwdSplit(t *testing.T) {
	const k = "mla_tc_bf16_r8_t64_s2"
	s := MLAShape{Seqs: 8, TokPerSeq: 1, Heads: 8, Ctx: 4096}
	for _, tc := range []struct {
		ask, splits, chunk int
		coop               bool
	}{
		{16, 16, 256, true}, {20, 16, 256, true}, {64, 64, 64, false},
	} {
		g := MLAFwdSplit(k, s, 132, 1, tc.ask)
		if g.Splits != tc.splits || g.Chunk != tc.chunk || g.Coop != tc.coop || g.Threads != 256 || g.Groups != 1 {
			t.Errorf("ask %d: %d splits of %d, coop %v, %d threads, %d groups; want %d of %d, coop %v, 256, 1", tc.ask, g.Splits, g.Chunk, g.Coop, g.Threads, g.Groups, tc.splits, tc.chunk, tc.coop)
		}
	}
	if p, g := MLAFwdLaunchWith(k, s, 132, 1), MLAFwdSplit(k, s, 132, 1, 16); p != g {
		t.Errorf("the planner's 16 splits %+v differ from 16 asked for %+v", p, g)
	}
}
