package cuda

import "testing"

// MLALaunch is the planner's split rule: the grid fills 2 x SMs blocks,
// each split keeps at least 4 tiles of 32 tokens, at most mlaMaxSplits.
func TestMLALaunch(t *testing.T) {
	for _, c := range []struct {
		name                      string
		tokens, heads, ctx, sms   int
		tc, fp8                   bool
		hg, groups, splits, chunk int
		smem                      int
	}{
		// 32 x 1 blocks per split: 2 x 132 / 32 = 8 splits of 512 tokens
		// (the Kimi shard's attention in plan_test.go). Shared memory:
		// 8 x 576 x 4 + 32 x 576 x 2 + 8 x 32 x 4 + 3 x 8 x 4.
		{"b32 h8 cuda-core", 32, 8, 4096, 132, false, false, 8, 1, 8, 512, 18432 + 36864 + 1024 + 96},
		// Batch 1: 264 splits wanted, capped at 4096 / 128 = 32. Tensor
		// core, bf16 cache: 16 x 584 x 2 + 2 x 32 x 584 x 2 +
		// 2 x 16 x 32 x 4 + 16 x 40 x 2 + 3 x 16 x 4.
		{"b1 h16 tc", 1, 16, 4096, 132, true, false, 16, 1, 32, 128, 18688 + 74752 + 4096 + 1280 + 192},
		// fp8 cache: one tile buffer instead of two.
		{"b1 h16 tc fp8", 1, 16, 4096, 132, true, true, 16, 1, 32, 128, 18688 + 37376 + 4096 + 1280 + 192},
		// 3 heads take the 4-head kernel; 20 heads two groups of 16, with
		// 777 / 128 = 6 splits asked, chunk ceil(777 / 6) = 130 rounded up
		// to 160, which covers 777 tokens in 5.
		{"h3", 2, 3, 50, 132, false, false, 4, 1, 1, 64, 4*576*4 + 36864 + 4*32*4 + 3*4*4},
		{"h20", 3, 20, 777, 132, false, false, 16, 2, 5, 160, 16*576*4 + 36864 + 16*32*4 + 3*16*4},
		// A long context on a large device stops at mlaMaxSplits.
		{"max splits", 1, 16, 1 << 20, 10000, true, false, 16, 1, mlaMaxSplits, 1024, 18688 + 74752 + 4096 + 1280 + 192},
	} {
		g := MLALaunch(c.tokens, c.heads, c.ctx, latentDim, c.sms, c.tc, c.fp8)
		want := MLAGeometry{HeadGroup: c.hg, Groups: c.groups, Splits: c.splits, Chunk: c.chunk, SmemBytes: c.smem}
		if g != want {
			t.Errorf("%s: %+v, want %+v", c.name, g, want)
		}
		if g.Chunk%mlaTile != 0 || (g.Splits-1)*g.Chunk >= c.ctx || g.Splits*g.Chunk < c.ctx {
			t.Errorf("%s: %d splits of %d do not cover %d tokens with the last split non-empty", c.name, g.Splits, g.Chunk, c.ctx)
		}
	}
}
