package main

import (
	"flag"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tpscope/tpscope/exec/cuda"
	"github.com/tpscope/tpscope/exec/cuda/internal/cu"
)

// benchRow is one timed kernel configuration. Bytes are the fewest the
// kernel must move (each input read once, each output written once);
// CopyFrac is the achieved bandwidth over the device-to-device copy's,
// measured in the same run; FloorUs is an empty kernel's time in the same
// back-to-back loop, the least any launch takes. The Graph fields time
// the same calls captured in one CUDA graph, as the executor's and a
// serving engine's decode steps run them: a kernel's cost inside a step.
type benchRow struct {
	Kernel        string  `json:"kernel"`
	Shape         string  `json:"shape"`
	Us            float64 `json:"us"`
	SpreadUs      float64 `json:"spread_us"` // max - min over the repetitions
	Bytes         float64 `json:"bytes"`
	GBps          float64 `json:"gbps"`
	CopyFrac      float64 `json:"copy_frac"`
	FloorUs       float64 `json:"floor_us"`
	GraphUs       float64 `json:"graph_us,omitempty"`
	GraphSpreadUs float64 `json:"graph_spread_us,omitempty"`
	GraphCopyFrac float64 `json:"graph_copy_frac,omitempty"`
	GraphFloorUs  float64 `json:"graph_floor_us,omitempty"`
	Note          string  `json:"note,omitempty"`
}

// timing is one configuration's per-call time launched back to back on
// the stream and captured in a graph.
type timing struct{ Us, SpreadUs, GraphUs, GraphSpreadUs float64 }

// row is a benchRow with t's times.
func (t timing) row(kernel, shape string, bytes float64, note string) benchRow {
	return benchRow{Kernel: kernel, Shape: shape, Us: t.Us, SpreadUs: t.SpreadUs, GraphUs: t.GraphUs, GraphSpreadUs: t.GraphSpreadUs, Bytes: bytes, Note: note}
}

// loopTime runs call(i) n times back to back between two events (after a
// spin kernel that lets the host enqueue them all ahead of the device),
// reps times, and returns the median and the spread of the time over
// per (the calls each call stands for).
func (e *env) loopTime(n, reps int, call func(i int) error, per int) (med, spread float64, err error) {
	a, _ := cu.NewEvent()
	b, _ := cu.NewEvent()
	defer cu.DestroyEvent(a)
	defer cu.DestroyEvent(b)
	var ts []float64
	for r := 0; r < reps+1; r++ { // the first repetition warms up
		if err := e.launch("spin", [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, uint64(4_000_000)); err != nil {
			return 0, 0, err
		}
		cu.Record(a, e.stream, false)
		for i := 0; i < n; i++ {
			if err := call(r*n + i); err != nil {
				return 0, 0, err
			}
		}
		cu.Record(b, e.stream, false)
		if err := cu.StreamSync(e.stream); err != nil {
			return 0, 0, err
		}
		ms, err := cu.Elapsed(a, b)
		if err != nil {
			return 0, 0, err
		}
		if r > 0 {
			ts = append(ts, float64(ms)*1000/float64(per))
		}
	}
	sort.Float64s(ts)
	return ts[len(ts)/2], ts[len(ts)-1] - ts[0], nil
}

// graphTime captures call(0..n-1) in one CUDA graph and replays it reps
// times between two events (after a warm-up replay), returning the
// median and the spread of the per-call time.
// (main keeps its goroutine on one OS thread, which the thread-local
// capture needs.)
func (e *env) graphTime(n, reps int, call func(i int) error) (med, spread float64, err error) {
	if err := cu.BeginCapture(e.stream); err != nil {
		return 0, 0, err
	}
	for i := 0; i < n; i++ {
		if err := call(i); err != nil {
			cu.EndCapture(e.stream) //nolint:errcheck // the launch's error is the one to report
			return 0, 0, err
		}
	}
	g, x, err := cu.EndCapture(e.stream)
	if err != nil {
		return 0, 0, err
	}
	defer cu.DestroyGraph(g, x) //nolint:errcheck
	return e.loopTime(1, reps, func(int) error { return cu.LaunchGraph(x, e.stream) }, n)
}

// timeBoth times call on the stream and in a graph.
func (e *env) timeBoth(n, reps int, call func(i int) error) (timing, error) {
	var t timing
	var err error
	if t.Us, t.SpreadUs, err = e.loopTime(n, reps, call, n); err != nil {
		return t, err
	}
	t.GraphUs, t.GraphSpreadUs, err = e.graphTime(n, reps, call)
	return t, err
}

func bench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	jsonPath := fs.String("json", "", "write results as JSON lines")
	only := fs.String("only", "", "comma-separated parts to run: mla,norm,silu,router (default all; the ceilings always run)")
	mlaShapes := fs.String("mla-shapes", "", "only these MLA shapes, BxHxTPSxCTX comma-separated (default the built-in list)")
	mlaSplits := fs.String("mla-splits", "", "also time each MLA kernel at these split counts (comma-separated; merged in the kernel where the grid fits)")
	mlaKernels := fs.String("mla-kernels", "", "only these tensor-core MLA kernels (comma-separated; default all)")
	e, out, err := startBench(fs, args, jsonPath)
	if err != nil {
		return err
	}
	defer out.Close()
	part := func(p string) bool { return *only == "" || strings.Contains(","+*only+",", ","+p+",") }
	const reps = 3
	l2 := uint64(e.info.L2Bytes)

	// Ceilings: the device-to-device copy (counting bytes read and
	// written), the same through a 16-byte-access kernel, a read-only
	// kernel, and the launch floor.
	const cbytes = 1 << 30
	src, err := cu.Alloc(cbytes)
	if err != nil {
		return err
	}
	dst, err := cu.Alloc(cbytes)
	if err != nil {
		return err
	}
	sink, _ := cu.Alloc(256)
	fillRandom(e, src, cbytes, 7)
	copyUs, copySpread, err := e.loopTime(10, reps, func(int) error { return cu.CopyDtoD(dst, src, cbytes, e.stream) }, 10)
	if err != nil {
		return err
	}
	copyGBps := 2 * cbytes / copyUs / 1e3
	grid := uint32(e.info.SMs * 8)
	kcopyUs, _, err := e.loopTime(10, reps, func(int) error {
		return e.launch("copy_v4", [3]uint32{grid, 1, 1}, [3]uint32{256, 1, 1}, 0, uint64(src), uint64(dst), uint64(cbytes/16))
	}, 10)
	if err != nil {
		return err
	}
	readUs, _, err := e.loopTime(10, reps, func(int) error {
		return e.launch("read_v4", [3]uint32{grid, 1, 1}, [3]uint32{256, 1, 1}, 0, uint64(src), uint64(cbytes/16), uint64(sink))
	}, 10)
	if err != nil {
		return err
	}
	floor, err := e.timeBoth(2000, reps, func(int) error {
		return e.launch("noop", [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0)
	})
	if err != nil {
		return err
	}
	cu.Free(src)
	cu.Free(dst)
	emit := func(r benchRow) {
		if r.Us > 0 {
			r.GBps = r.Bytes / r.Us / 1e3
			r.CopyFrac = r.GBps / copyGBps
		}
		r.FloorUs, r.GraphFloorUs = floor.Us, floor.GraphUs
		graph := ""
		if r.GraphUs > 0 {
			r.GraphCopyFrac = r.Bytes / r.GraphUs / 1e3 / copyGBps
			graph = fmt.Sprintf(" | graph %9.2f us %5.1f %%", r.GraphUs, 100*r.GraphCopyFrac)
		}
		fmt.Printf("%-34s %-34s %9.2f us %8.0f GB/s %5.1f %% of copy%s%s\n", r.Kernel, r.Shape, r.Us, r.GBps, 100*r.CopyFrac, graph, strings.TrimSuffix(" "+r.Note, " "))
		out.write(r)
	}
	fmt.Printf("device %s, %d SMs, L2 %d MB\n", e.info.Name, e.info.SMs, l2>>20)
	emit(benchRow{Kernel: "cuMemcpyDtoDAsync", Shape: "1 GiB", Us: copyUs, SpreadUs: copySpread, Bytes: 2 * cbytes, Note: "the ceiling: read + write"})
	emit(benchRow{Kernel: "copy_v4", Shape: "1 GiB", Us: kcopyUs, Bytes: 2 * cbytes})
	emit(benchRow{Kernel: "read_v4", Shape: "1 GiB", Us: readUs, Bytes: cbytes, Note: "read only"})
	emit(floor.row("noop", "1 block", 0, "launch floor, back to back"))

	rot := e.rotated
	iters := func(estUs float64) int { return int(min(2000, max(20, 3000/max(estUs, 1)))) }

	if part("mla") {
		if err := benchMLA(e, emit, rot, iters, reps, *mlaShapes, *mlaSplits, *mlaKernels, sink); err != nil {
			return err
		}
	}
	if part("norm") {
		for _, rows := range []int{1, 8, 32, 128, 512, 2048, 8192} {
			const cols = 7168
			n := uint64(rows * cols * 2)
			x, cx, err := rot(2 * n) // x and residual side by side
			if err != nil {
				return err
			}
			y, _ := cu.Alloc(n)
			w, _ := cu.Alloc(cols * 2)
			fillRandom(e, w, cols*2, 5)
			t, err := e.timeBoth(iters(float64(4*n)/3e6), reps, func(i int) error {
				xi := x + cu.DevPtr(uint64(i%cx)*2*n)
				return e.launch("rmsnorm", [3]uint32{uint32(rows), 1, 1}, [3]uint32{256, 1, 1}, 0, uint64(xi), uint64(xi)+n, uint64(w), uint64(y), i32(cols), f32(1e-6))
			})
			if err != nil {
				return err
			}
			// x and the residual read, the residual and y written.
			emit(t.row("rmsnorm (fused add)", fmt.Sprintf("%dx%d", rows, cols), float64(4*n), ""))
			cu.Free(x)
			cu.Free(y)
			cu.Free(w)
		}
	}
	if part("silu") {
		for _, d := range []int{2304, 256, 2048} {
			for _, rows := range []int{8, 32, 128, 512, 2048, 8192, 32768} {
				n := uint64(rows * d * 2)
				x, cx, err := rot(2 * n)
				if err != nil {
					return err
				}
				y, _ := cu.Alloc(n)
				g := uint32(min(e.info.SMs*16, max(1, (rows*d/8+511)/512)))
				t, err := e.timeBoth(iters(float64(3*n)/3e6), reps, func(i int) error {
					return e.launch("silu_mul", [3]uint32{g, 1, 1}, [3]uint32{256, 1, 1}, 0, uint64(x)+uint64(i%cx)*2*n, uint64(y), i32(rows), i32(d))
				})
				if err != nil {
					return err
				}
				emit(t.row("silu_mul", fmt.Sprintf("%dx%d", rows, d), float64(3*n), ""))
				cu.Free(x)
				cu.Free(y)
			}
		}
	}
	if part("router") {
		for _, T := range []int{1, 32, 512, 4096} {
			const E, k = 384, 8
			n := uint64(T * E * 2)
			x, cx, err := rot(n)
			if err != nil {
				return err
			}
			aux, _ := cu.Alloc(uint64(T * k * 8))
			t, err := e.timeBoth(iters(5), reps, func(i int) error {
				return e.launch("topk_router", [3]uint32{uint32((T*32 + 255) / 256), 1, 1}, [3]uint32{256, 1, 1}, 0,
					uint64(x)+uint64(i%cx)*n, i32(T), i32(E), i32(k), uint64(aux), uint64(aux)+uint64(T*k*4))
			})
			if err != nil {
				return err
			}
			emit(t.row("topk_router", fmt.Sprintf("%dx%d top-%d", T, E, k), float64(n+uint64(T*k*8)), ""))
			cu.Free(x)
			cu.Free(aux)
		}
	}
	return nil
}

// benchMLA times the tensor-core MLA variants at the shapes of the models'
// decode steps (8 heads: Kimi-K2.5 and GLM-5 at TP 8; 16: DeepSeek-V3 at
// TP 8; 64: one DP-attention rank; 2 tokens per sequence: MTP), with the
// planner's splits (cuda.MLAFwdLaunch) merged in the kernel, and, where
// there are splits, merged by mla_combine instead; beside them, at each
// shape, the read-only kernel over the same cache and (sm_90, one query
// token, up to 8 heads) the split launch's floor (benchMLAFloor); and the
// CUDA-core kernel at one shape for reference.
func benchMLA(e *env, emit func(benchRow), rot func(uint64) (cu.DevPtr, int, error), iters func(float64) int, reps int, only, splitList, kernelList string, sink cu.DevPtr) error {
	var extraSplits []int
	if splitList != "" {
		for _, f := range strings.Split(splitList, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 || n > 512 {
				return fmt.Errorf("-mla-splits %q: want split counts from 1 to 512 (the merge's weights live in the stage memory)", f)
			}
			extraSplits = append(extraSplits, n)
		}
	}
	var wantKernels []string // empty: all
	if kernelList != "" {
		wantKernels = strings.Split(kernelList, ",")
		for _, k := range wantKernels {
			if !slices.Contains(cuda.MLAFwdKernels, k) {
				return fmt.Errorf("-mla-kernels %q: want names from %s", k, strings.Join(cuda.MLAFwdKernels, ","))
			}
		}
	}
	occ := map[string]int{}
	for _, k := range cuda.MLAFwdKernels {
		smem := cuda.MLAFwdSmem(k)
		if err := cu.SetMaxDynamicSmem(e.fn(k), smem); err != nil {
			return err
		}
		n, err := cu.MaxActiveBlocks(e.fn(k), cuda.MLAFwdThreads(k), smem)
		if err != nil {
			return err
		}
		regs, _ := cu.FuncAttr(e.fn(k), cu.FuncNumRegs)
		local, _ := cu.FuncAttr(e.fn(k), cu.FuncLocalSizeBytes)
		occ[k] = n
		fits := ""
		if e.info.CCMajor >= 9 {
			for _, w := range []int{2, 4, 8, 16} {
				c, err := cu.MaxActiveClusters(e.fn(k), cuda.MLAFwdThreads(k), smem, w)
				if err != nil {
					return err
				}
				fits += fmt.Sprintf(" %dx%d", c, w)
			}
			fits = ", clusters at once:" + fits
		}
		fmt.Printf("%s: %d registers, %d B local, %d B shared, %d blocks/SM%s\n", k, regs, local, smem, n, fits)
	}
	sem, _ := cu.Alloc(1 << 16)
	cu.Memset8(sem, 0, 1<<16)
	defer cu.Free(sem)
	shapes := []mlaShape{
		{1, 8, 1, 4096}, {1, 8, 1, 32768}, {1, 8, 1, 131072},
		{8, 8, 1, 4096}, {8, 8, 1, 8192}, {8, 8, 1, 32768},
		{32, 8, 1, 4096}, {32, 8, 1, 8192}, {64, 8, 1, 4096}, {128, 8, 1, 4096},
		{32, 16, 1, 4096}, {4, 64, 1, 4096}, {8, 8, 2, 4096},
	}
	if only != "" {
		var err error
		if shapes, err = parseMLAShapes(only); err != nil {
			return err
		}
	}
	const scale = 0.0722
	for _, fp8 := range []bool{false, true} {
		kvb, kvs := 2, "bf16"
		if fp8 {
			kvb, kvs = 1, "fp8"
		}
		for _, s := range shapes {
			T := s.B * s.tps
			kvBytes := uint64(s.B * s.ctx * 576 * kvb)
			kv, copies, err := rot(kvBytes)
			if err != nil {
				return err
			}
			q, _ := cu.Alloc(uint64(T * s.H * 576 * 2))
			fillRandom(e, q, uint64(T*s.H*576*2), 4)
			o, _ := cu.Alloc(uint64(T * s.H * 512 * 2))
			bytes := float64(kvBytes) + float64(T*s.H*(576+512)*2)
			// The same cache bytes through the read-only streaming kernel,
			// from the same rotation: what reading them alone costs at this
			// size (launch, ramp and tail included).
			if !fp8 || s.B*s.ctx >= 8*4096 {
				grid := uint32(e.info.SMs * 8)
				t, err := e.timeBoth(iters(float64(kvBytes)/3e6), reps, func(i int) error {
					return e.launch("read_v4", [3]uint32{grid, 1, 1}, [3]uint32{256, 1, 1}, 0, uint64(kv)+uint64(i%copies)*kvBytes, kvBytes/16, uint64(sink))
				})
				if err != nil {
					return err
				}
				emit(t.row("read_v4", fmt.Sprintf("B=%d H=%d tps=%d ctx=%d %s cache", s.B, s.H, s.tps, s.ctx, kvs), float64(kvBytes), "the cache alone, read only"))
			}
			if e.info.CCMajor >= 9 && s.tps == 1 && s.H <= 8 {
				if err := benchMLAFloor(e, emit, iters, reps, s, fp8, kv, copies, kvBytes, occ, extraSplits, sem, sink); err != nil {
					return err
				}
			}
			for _, k := range cuda.MLAFwdKernels {
				if strings.Contains(k, "fp8") != fp8 || len(wantKernels) > 0 && !slices.Contains(wantKernels, k) {
					continue
				}
				// Every variant runs with the planner's split rule for its own
				// occupancy.
				perSM := occ[k]
				shape := cuda.MLAShape{Seqs: s.B, TokPerSeq: s.tps, Heads: s.H, Ctx: s.ctx, FP8: fp8}
				geoms := []cuda.MLAGeometry{cuda.MLAFwdLaunchWith(k, shape, e.info.SMs, perSM)}
				seen := map[int]bool{geoms[0].Splits: true}
				for _, n := range extraSplits {
					if g := cuda.MLAFwdSplit(k, shape, e.info.SMs, perSM, n); !seen[g.Splits] {
						seen[g.Splits] = true
						geoms = append(geoms, g)
					}
				}
				for gi, g := range geoms {
					th := uint64(T * s.H)
					part, _ := cu.Alloc(uint64(g.Splits)*th*512*4 + uint64(g.Splits)*th*4)
					lse := part + cu.DevPtr(uint64(g.Splits)*th*512*4)
					// The merges this geometry can take: through the clusters'
					// shared memory where all clusters fit at once (the
					// planner's first choice), through L2 where the grid
					// does, and (the planner's split only) by mla_combine.
					gc, err := e.clustered(k, g, shape)
					if err != nil {
						return err
					}
					var merges []int
					if gc.Cluster > 0 {
						merges = append(merges, 2)
					}
					if g.Coop {
						merges = append(merges, 1)
					}
					if gi == 0 || !g.Coop { // unsplit, or the partials left for mla_combine
						merges = append(merges, 0)
					}
					for _, merge := range merges {
						a := mlaFwdArgs{q: q, out: o, part: part, lse: lse, sem: sem, T: T, H: s.H, ctx: s.ctx, tps: s.tps, scale: scale, kscale: 1, merge: merge}
						call := func(i int) error {
							a.kv = kv + cu.DevPtr(uint64(i%copies)*kvBytes)
							if err := e.launchMLAFwd(k, gc, s.B, a); err != nil {
								return err
							}
							if g.Splits > 1 && merge == 0 {
								return e.combineMLA(part, lse, o, int(th), g.Splits)
							}
							return nil
						}
						t, err := e.timeBoth(iters(bytes/3e6), reps, call)
						if err != nil {
							return fmt.Errorf("%s B=%d H=%d ctx=%d: %w", k, s.B, s.H, s.ctx, err)
						}
						note := fmt.Sprintf("splits=%d chunk=%d", g.Splits, g.Chunk)
						switch {
						case g.Splits == 1:
						case merge == 2:
							note += fmt.Sprintf(" merged in-kernel, cluster of %d", gc.Cluster)
						case merge == 1:
							note += " merged in-kernel"
						default:
							note += " + mla_combine"
						}
						emit(t.row(k, fmt.Sprintf("B=%d H=%d tps=%d ctx=%d", s.B, s.H, s.tps, s.ctx), bytes, note))
					}
					cu.Free(part)
				}
			}
			if s.B == 32 && s.H == 8 && s.ctx == 4096 { // the CUDA-core kernel, for reference
				g := cuda.MLALaunch(T, s.H, s.ctx, 576, e.info.SMs, fp8)
				name := fmt.Sprintf("mla_decode_%s_h%d", kvs, g.HeadGroup)
				cu.SetMaxDynamicSmem(e.fn(name), g.SmemBytes)
				th := uint64(T * s.H)
				part, _ := cu.Alloc(uint64(g.Splits)*th*512*4 + uint64(g.Splits)*th*4)
				lse := part + cu.DevPtr(uint64(g.Splits)*th*512*4)
				t, err := e.timeBoth(iters(bytes/1e6), reps, func(i int) error {
					kvi := kv + cu.DevPtr(uint64(i%copies)*kvBytes)
					if err := e.launch(name, [3]uint32{uint32(g.Splits), uint32(g.Groups), uint32(T)}, [3]uint32{256, 1, 1}, uint32(g.SmemBytes),
						uint64(q), uint64(kvi), uint64(part), uint64(lse), i32(T), i32(s.H), i32(s.ctx), i32(s.tps), i32(g.Chunk), f32(scale), i32(576), i32(512)); err != nil {
						return err
					}
					return e.combineMLA(part, lse, o, int(th), g.Splits)
				})
				if err != nil {
					return err
				}
				emit(t.row(name, fmt.Sprintf("B=%d H=%d tps=%d ctx=%d", s.B, s.H, s.tps, s.ctx), bytes, fmt.Sprintf("CUDA cores, splits=%d + mla_combine", g.Splits)))
				cu.Free(part)
			}
			cu.Free(kv)
			cu.Free(q)
			cu.Free(o)
		}
	}
	return nil
}

// rotated allocates copies of n bytes totalling at least 4x L2 (so a call
// on copy i % copies streams from device memory, as a layer's weights or
// cache do in a step), fills them with random data and returns the base
// and the count.
func (e *env) rotated(n uint64) (cu.DevPtr, int, error) {
	copies := int(max(1, (4*uint64(e.info.L2Bytes)+n-1)/n))
	p, err := cu.Alloc(n * uint64(copies))
	if err != nil {
		return 0, 0, err
	}
	return p, copies, fillRandom(e, p, n*uint64(copies), 11)
}

// mlaShape is one MLA decode shape of the timing verbs: B sequences of
// tps query tokens, H heads, ctx cached tokens.
type mlaShape struct{ B, H, tps, ctx int }

// parseMLAShapes reads -mla-shapes: BxHxTPSxCTX, comma-separated.
func parseMLAShapes(list string) ([]mlaShape, error) {
	var shapes []mlaShape
	for _, f := range strings.Split(list, ",") {
		var s mlaShape
		if _, err := fmt.Sscanf(f, "%dx%dx%dx%d", &s.B, &s.H, &s.tps, &s.ctx); err != nil || s.B < 1 || s.H < 1 || s.tps < 1 || s.ctx < 1 {
			return nil, fmt.Errorf("-mla-shapes %q: want BxHxTPSxCTX", f)
		}
		shapes = append(shapes, s)
	}
	return shapes, nil
}

// mlaFwdArgs are one launch's buffers and sizes in the argument order of
// kernels.cu's tensor-core MLA kernels (mla_tc_*, mla_ds_*).
type mlaFwdArgs struct {
	q, kv, out, part, lse, sem, lseOut cu.DevPtr
	T, H, ctx, tps                     int
	scale, kscale                      float32
	merge                              int // the kernels' coop argument (MLAGeometry.MergeMode)
}

// launchMLAFwd launches a tensor-core MLA kernel (or its traced twin) with
// geometry g over seqs sequences, in clusters of g.Cluster blocks when the
// splits merge through shared memory.
func (e *env) launchMLAFwd(kernel string, g cuda.MLAGeometry, seqs int, a mlaFwdArgs) error {
	cluster := uint32(1)
	if a.merge == 2 {
		cluster = uint32(g.Cluster)
	}
	return e.launchCluster(kernel, [3]uint32{uint32(g.Splits), uint32(g.Groups), uint32(seqs)}, [3]uint32{uint32(g.Threads), 1, 1}, uint32(g.SmemBytes), cluster,
		uint64(a.q), uint64(a.kv), uint64(a.out), uint64(a.part), uint64(a.lse), uint64(a.sem), uint64(a.lseOut),
		i32(a.T), i32(a.H), i32(a.ctx), i32(a.tps), i32(g.Chunk), f32(a.scale), f32(a.kscale), i32(a.merge))
}

// combineMLA merges the splits' partials of rows (token, head) rows into
// out (mla_combine).
func (e *env) combineMLA(part, lse, out cu.DevPtr, rows, splits int) error {
	return e.launch("mla_combine", [3]uint32{uint32(rows), 1, 1}, [3]uint32{128, 1, 1}, 0, uint64(part), uint64(lse), uint64(out), i32(rows), i32(splits), i32(512))
}

// mlaFloorModes are mla_floor's modes in kernels.cu, with the note each
// row gets.
var mlaFloorModes = []struct {
	mode int
	note string
}{
	{0, "stream only"},
	{2, "stream + the merge's barrier"},
	{3, "stream + partials + barrier"},
	{1, "stream + the L2 merge"},
	{4, "the L2 merge alone"},
}

// mlaFloorSmem is mla_floor's shared memory: four stages of 36,864 bytes
// (64 FP8 or 32 bf16 cached tokens) and their mbarriers.
const mlaFloorSmem = 4*36864 + 4*8

// benchMLAFloor times mla_floor_{fp8,bf16} on shape s with the grid the
// planner gives the precision's 8-row kernel (and at extraSplits): the
// split launch's bulk stream of the cache and, step by step, its merge,
// without the arithmetic: what a kernel of that layout costs before it
// computes anything.
func benchMLAFloor(e *env, emit func(benchRow), iters func(float64) int, reps int, s mlaShape, fp8 bool, kv cu.DevPtr, copies int,
	kvBytes uint64, occ map[string]int, extraSplits []int, sem, sink cu.DevPtr) error {
	k, name := cuda.MLAFwdKernel(fp8, 8), "mla_floor_bf16"
	if fp8 {
		name = "mla_floor_fp8"
	}
	if err := cu.SetMaxDynamicSmem(e.fn(name), mlaFloorSmem); err != nil {
		return err
	}
	shape := cuda.MLAShape{Seqs: s.B, TokPerSeq: s.tps, Heads: s.H, Ctx: s.ctx, FP8: fp8}
	geoms := []cuda.MLAGeometry{cuda.MLAFwdLaunchWith(k, shape, e.info.SMs, occ[k])}
	for _, n := range extraSplits {
		if g := cuda.MLAFwdSplit(k, shape, e.info.SMs, occ[k], n); g.Splits != geoms[0].Splits && g.Coop {
			geoms = append(geoms, g)
		}
	}
	th := uint64(s.B * s.H)
	o, _ := cu.Alloc(th * 512 * 2)
	defer cu.Free(o)
	for _, g := range geoms {
		part, _ := cu.Alloc(uint64(g.Splits)*th*512*4 + uint64(g.Splits)*th*4)
		lse := part + cu.DevPtr(uint64(g.Splits)*th*512*4)
		for _, m := range mlaFloorModes {
			if g.Splits == 1 && m.mode != 0 {
				continue
			}
			t, err := e.timeBoth(iters(float64(kvBytes)/3e6), reps, func(i int) error {
				return e.launch(name, [3]uint32{uint32(g.Splits), 1, uint32(s.B)}, [3]uint32{512, 1, 1}, mlaFloorSmem,
					uint64(kv)+uint64(i%copies)*kvBytes, uint64(o), uint64(part), uint64(lse), uint64(sem), uint64(sink),
					i32(s.B), i32(s.H), i32(s.ctx), i32(g.Chunk), i32(m.mode))
			})
			if err != nil {
				cu.Free(part)
				return fmt.Errorf("%s B=%d ctx=%d mode %d: %w", name, s.B, s.ctx, m.mode, err)
			}
			bytes := float64(kvBytes)
			if m.mode == 4 {
				bytes = 0
			}
			emit(t.row(name, fmt.Sprintf("B=%d H=%d tps=%d ctx=%d", s.B, s.H, s.tps, s.ctx), bytes,
				fmt.Sprintf("splits=%d chunk=%d, %s", g.Splits, g.Chunk, m.note)))
		}
		cu.Free(part)
	}
	return nil
}
