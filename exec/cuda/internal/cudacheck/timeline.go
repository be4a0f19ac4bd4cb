package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"sort"
	"strings"

	"github.com/tpscope/tpscope/exec/cuda"
	"github.com/tpscope/tpscope/exec/cuda/internal/cu"
)

// timeline runs the phase-timed twins of the executor's 8-row MLA kernels
// (mla_ds_fp8c_r8_t64_s4_w16_b_trace for an fp8 cache,
// mla_tc_bf16_r8_t64_s2_trace for bf16) at each shape, back to back after
// a warm-up, each launch on its own copy of the cache (read from device
// memory, as in the bench, not from L2), with the planner's geometry and
// merge, and prints where one launch's time goes: the spread of the
// blocks' starts and ends on the global timer, and per block (median and
// max) the time to Q staged (fp8), to its first tile, in the tile loop,
// in the epilogue and in the finish (partials, merge), and within the
// tile loop how long thread 0 waited for tiles' data and at the loop's
// two block barriers (the rest of the loop is its own work), and how the
// finish of a split launch divides at its merge barrier (before: its
// partials and the wait for the other splits; after: the merge, in its
// loads, its weights and its output).
func timeline(args []string) error {
	fs := flag.NewFlagSet("timeline", flag.ContinueOnError)
	shapes := fs.String("mla-shapes", "32x8x1x4096,8x8x1x4096,8x8x1x8192,64x8x1x4096,128x8x1x4096,1x8x1x131072", "BxHxTPSxCTX comma-separated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	list, err := parseMLAShapes(*shapes)
	if err != nil {
		return err
	}
	e, err := setup()
	if err != nil {
		return err
	}
	sem, _ := cu.Alloc(1 << 16)
	cu.Memset8(sem, 0, 1<<16)
	defer cu.Free(sem)
	for _, k := range []string{"mla_ds_fp8c_r8_t64_s4_w16_b", "mla_tc_bf16_r8_t64_s2"} {
		if err := timelineKernel(e, k, list, sem); err != nil {
			return err
		}
	}
	return nil
}

func timelineKernel(e *env, k string, shapes []mlaShape, sem cu.DevPtr) error {
	tk := k + "_trace"
	fp8 := strings.Contains(k, "fp8")
	kvb := 2
	if fp8 {
		kvb = 1
	}
	smem := cuda.MLAFwdSmem(k)
	for _, f := range []string{k, tk} {
		if err := cu.SetMaxDynamicSmem(e.fn(f), smem); err != nil {
			return err
		}
	}
	perSM, err := cu.MaxActiveBlocks(e.fn(k), cuda.MLAFwdThreads(k), smem)
	if err != nil {
		return err
	}
	for _, s := range shapes {
		B, H, tps, ctx := s.B, s.H, s.tps, s.ctx
		T := B * tps
		shape := cuda.MLAShape{Seqs: B, TokPerSeq: tps, Heads: H, Ctx: ctx, FP8: fp8}
		g, err := e.clustered(k, cuda.MLAFwdLaunchWith(k, shape, e.info.SMs, perSM), shape)
		if err != nil {
			return err
		}
		if g.Cluster > 0 {
			// The traced twin is launched in the same clusters.
			if _, err := cu.MaxActiveClusters(e.fn(tk), g.Threads, g.SmemBytes, g.Cluster); err != nil {
				return err
			}
		}
		kvBytes := uint64(B * ctx * 576 * kvb)
		kv, copies, err := e.rotated(kvBytes) // launch i reads copy i % copies: from device memory, as in the bench
		if err != nil {
			return err
		}
		q, _ := cu.Alloc(uint64(T * H * 576 * 2))
		fillRandom(e, q, uint64(T*H*576*2), 4)
		o, _ := cu.Alloc(uint64(T * H * 512 * 2))
		th := uint64(T * H)
		part, _ := cu.Alloc(uint64(g.Splits)*th*512*4 + uint64(g.Splits)*th*4)
		lse := part + cu.DevPtr(uint64(g.Splits)*th*512*4)
		nblk := g.Splits * g.Groups * B
		const slot = 128 // bytes of trace per block (kernels.cu's MlaTrace: 16 u64)
		trace, _ := cu.Alloc(uint64(nblk * slot))
		cu.Memset8(trace, 0, uint64(nblk*slot)) // slots a kernel does not mark read zero
		a := mlaFwdArgs{q: q, kv: kv, out: o, part: part, lse: lse, sem: sem, T: T, H: H, ctx: ctx, tps: tps, scale: 0.0722, kscale: 1, merge: g.MergeMode()}
		for i := 0; i < 20; i++ {
			name := k // the plain kernel takes no row log-sum-exps here
			if i >= 10 {
				name, a.lseOut = tk, trace // back to back, as in a step; the last one's trace is read
			}
			a.kv = kv + cu.DevPtr(uint64(i%copies)*kvBytes)
			if err := e.launchMLAFwd(name, g, B, a); err != nil {
				return err
			}
		}
		if err := cu.StreamSync(e.stream); err != nil {
			return err
		}
		raw := make([]byte, nblk*slot)
		if err := cu.DtoH(raw, trace); err != nil {
			return err
		}
		type blk struct {
			start, end float64
			ph         [13]float64 // the five phases; the tile loop's waits: data, barrier 1, barrier 2; finish+merge until and after the merge barrier; the merge's loads, weights, output
		}
		bs := make([]blk, nblk)
		minStart, maxStart, minEnd, maxEnd := 1e30, 0.0, 1e30, 0.0
		for i := range bs {
			w := func(j int) uint64 { return binary.LittleEndian.Uint64(raw[i*slot+8*j:]) }
			b := &bs[i]
			b.start, b.end = float64(w(0))/1e3, float64(w(1))/1e3
			usPerCycle := (b.end - b.start) / float64(max(w(6), 1)) // from this block's own span
			prev := uint64(0)
			for j := 2; j <= 6; j++ {
				b.ph[j-2] = float64(w(j)-prev) * usPerCycle
				prev = w(j)
			}
			for j := 8; j <= 10; j++ {
				b.ph[j-3] = float64(w(j)) * usPerCycle
			}
			if w(11) > 0 { // split launches: the merge barrier
				b.ph[8] = float64(w(11)-w(5)) * usPerCycle
				b.ph[9] = float64(w(6)-w(11)) * usPerCycle
				b.ph[10] = float64(w(12)-w(11)) * usPerCycle
				b.ph[11] = float64(w(13)-w(12)) * usPerCycle
				b.ph[12] = float64(w(6)-w(13)) * usPerCycle
			}
			minStart, maxStart = min(minStart, b.start), max(maxStart, b.start)
			minEnd, maxEnd = min(minEnd, b.end), max(maxEnd, b.end)
		}
		merge := ""
		if g.Cluster > 0 {
			merge = fmt.Sprintf(" cluster=%d", g.Cluster)
		}
		fmt.Printf("%s B=%d H=%d tps=%d ctx=%d splits=%d chunk=%d%s blocks=%d: span %.2f us; starts spread %.2f us, ends spread %.2f us\n",
			tk, B, H, tps, ctx, g.Splits, g.Chunk, merge, nblk, maxEnd-minStart, maxStart-minStart, maxEnd-minEnd)
		for j, name := range []string{"to Q staged", "to tile 0", "tile loop", "epilogue", "finish+merge", " data waits", " barrier 1", " barrier 2", " to merge bar", " after it", "  its loads", "  its weights", "  its output"} {
			v := make([]float64, nblk)
			for i := range bs {
				v[i] = bs[i].ph[j]
			}
			sort.Float64s(v)
			fmt.Printf("  %-13s median %7.2f us  p10 %7.2f  max %7.2f\n", name, v[nblk/2], v[nblk/10], v[nblk-1])
		}
		cu.Free(kv)
		cu.Free(q)
		cu.Free(o)
		cu.Free(part)
		cu.Free(trace)
	}
	return nil
}
