package cpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/gonum/mat"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

// CalibrateConfig says what to measure. The zero value of a field means
// its default.
type CalibrateConfig struct {
	// Ranks is the number of goroutine ranks the topology describes (the
	// --tp of the runs it will predict). Default 4.
	Ranks int
	// Duration is the time spent on each microbenchmark (three windows of
	// a third each). Default 300 ms.
	Duration time.Duration
	// Name is the topology's name. Default "cpu-<ranks>r".
	Name string
}

// CalibrateReport holds the measurements behind a CPU topology. Rates are
// per rank while every rank runs the same benchmark at once, so they
// include the sharing of cores, caches and memory.
type CalibrateReport struct {
	Ranks, Cores     int
	CPU              string
	GEMMPeakGFLOPS   float64            // best FLOP rate per rank: sgemm 256x256x256 or a kernel family, whichever is higher
	MemGBps          float64            // float32 bytes per second per rank, streaming add over arrays beyond the L3
	MinKernelUs      float64            // the smallest op (RMSNorm of one 16-value row) through a kernel call
	RunnerOpUs       float64            // host clock pair + call per op: the CPU backend's "launch"
	Efficiency       map[string]float64 // per op kind: achieved / GEMMPeakGFLOPS at the shapes in calibrate.go
	AllReduce        []CollectiveSample // goroutine ring all-reduce timings
	AllReduceFit     topology.CollectiveParams
	AllReduceRMSRel  float64
	Duration         time.Duration
	EfficiencyShapes map[string]string
}

// CollectiveSample is one timed collective: ranks, bytes, microseconds (median).
type CollectiveSample struct {
	Ranks int
	Bytes int64
	Us    float64
}

// Calibrate runs short microbenchmarks on this machine with cfg.Ranks
// goroutines at once and returns a topology in which each rank is one
// "device" (a share of the CPU: with more ranks than cores the rates are
// the shared ones) joined to the others through host memory, with the
// goroutine ring all-reduce fitted as the collective calibration (sim's
// model: time = base + steps x hw + bytes / bus bandwidth).
//
// Units in the topology follow the schedule's bytes: the CPU backend keeps
// 16-bit values as float32, so it moves twice the bytes model.Build counts
// for bf16 tensors; MemBWGBps is the measured float32 rate halved, so that
// sim's bytes / bandwidth gives the CPU's time for bf16 schedules. All
// dtypes get the same measured float32 peak (the backend computes in
// float32 whatever the schedule's dtype). Collective bytes are moved as
// is, so their bandwidth is not halved.
func Calibrate(ctx context.Context, cfg CalibrateConfig) (*topology.Topology, *CalibrateReport, error) {
	if cfg.Ranks == 0 {
		cfg.Ranks = 4
	}
	if cfg.Ranks < 1 || cfg.Ranks > 64 {
		return nil, nil, fmt.Errorf("calibrate cpu: ranks %d: want 1..64", cfg.Ranks)
	}
	if cfg.Duration == 0 {
		cfg.Duration = 300 * time.Millisecond
	}
	if cfg.Name == "" {
		cfg.Name = fmt.Sprintf("cpu-%dr", cfg.Ranks)
	}
	R := cfg.Ranks
	vendor, cpuModel := cpuInfo()
	rep := &CalibrateReport{Ranks: R, Cores: runtime.GOMAXPROCS(0), CPU: cpuModel, Duration: cfg.Duration,
		Efficiency: map[string]float64{}, EfficiencyShapes: map[string]string{}}

	// GEMM peak: 256^3 sgemm, in cache, per rank.
	{
		const n = 256
		rate, err := perRank(ctx, R, cfg.Duration, func(rng *rand.Rand) func() float64 {
			a, b, c := randSlice32(rng, n*n), randSlice32(rng, n*n), make([]float32, n*n)
			return func() float64 { gemm(n, n, n, a, b, c); return 2 * n * n * n }
		})
		if err != nil {
			return nil, nil, err
		}
		rep.GEMMPeakGFLOPS = rate / 1e9
	}
	// Memory: y += x over 2 arrays per rank, 4x the L3 in total (32 MiB
	// assumed when unknown: the L3 of one EPYC CCD complex).
	{
		per := max(1<<20, (4*l3Bytes())/(8*R)) // float32 elements per array
		rate, err := perRank(ctx, R, cfg.Duration, func(rng *rand.Rand) func() float64 {
			x, y := randSlice32(rng, per), randSlice32(rng, per)
			return func() float64 {
				for i := range y {
					y[i] += x[i]
				}
				return float64(12 * per) // read x, read y, write y
			}
		})
		if err != nil {
			return nil, nil, err
		}
		rep.MemGBps = rate / 1e9
	}
	// Smallest op and the runner's per-op host cost.
	{
		x, w := make([]float32, 16), make([]float32, 16)
		for i := range w {
			w[i] = 1
		}
		k := func(context.Context) error { rmsNorm(x, w, 1, 16); return nil }
		const reps = 20000
		t0 := time.Now()
		var sink time.Duration
		for range reps {
			a := time.Now()
			_ = k(ctx)
			sink += time.Since(a)
		}
		total := time.Since(t0)
		rep.MinKernelUs = float64(sink) / reps / 1e3
		rep.RunnerOpUs = math.Max(0, float64(total-sink)/reps/1e3)
	}
	// Kernel-family efficiency at decode-like shapes of a CPU-sized model
	// (8 tokens, widths 256-512): achieved FLOP rate / GEMM peak.
	type family struct {
		kind, shape string
		setup       func(rng *rand.Rand) func() float64
	}
	fams := []family{
		{string(model.KindGEMM), "8 x N x K sgemm, N and K each of 128, 256, 512 (the 9 shapes in turn), weights from 8 distinct 1 MiB matrices", func(rng *rand.Rand) func() float64 {
			dims := []int{128, 256, 512}
			const sets = 8 // distinct weights, as every layer of a run has its own
			a, c := randSlice32(rng, 8*512), make([]float32, 8*512)
			b := randSlice32(rng, sets*512*512)
			i := 0
			return func() float64 {
				n, k := dims[i%3], dims[(i/3)%3]
				w := b[(i%sets)*512*512:]
				i++
				gemm(8, n, k, a, w, c)
				return float64(2 * 8 * n * k)
			}
		}},
		{string(model.KindMoEGEMM), "8 tokens top-4 of 16 experts as the schedule expects them (32 rows over 14 experts), 256x128 each, 4 distinct weight sets", func(rng *rand.Rand) func() float64 {
			const tok, k, n = 8, 256, 128
			sh := model.NewMoEShape(tok, 4, 16, 16, 0)
			rowsPer := sh.Executed()
			const sets = 4 // distinct expert weights, as every layer has its own
			x, w := randSlice32(rng, tok*k), randSlice32(rng, sets*len(rowsPer)*k*n)
			y, xg := make([]float32, 32*n), make([]float32, 32*k)
			i := 0
			return func() float64 {
				ws := w[(i%sets)*len(rowsPer)*k*n : (i%sets+1)*len(rowsPer)*k*n]
				i++
				rows, _ := scheduledGroupedGEMM(rowsPer, tok, x, true, ws, k, n, y, xg)
				return float64(2 * rows * k * n)
			}
		}},
		{string(model.KindAttention), "MLA decode, 4 sequences x 4 heads, 1024 cached tokens, latent 80 (64 + 16), 4 distinct caches", func(rng *rand.Rand) func() float64 {
			const seqs, rows, ctx, lat, kvl = 16, 4, 1024, 80, 64 // 16 caches of 320 KiB, 4 per call
			q, c := randSlice32(rng, seqs*rows*lat), randSlice32(rng, seqs*ctx*lat)
			i := 0
			out, sc := make([]float32, rows*kvl), make([]float32, rows*ctx)
			return func() float64 {
				for j := range 4 {
					s := (4*i + j) % seqs
					mlaDecode(q[s*rows*lat:(s+1)*rows*lat], c[s*ctx*lat:(s+1)*ctx*lat], out, sc, rows, ctx, lat, kvl, 0.1)
				}
				i++
				return 2 * 4 * rows * ctx * (lat + kvl)
			}
		}},
		{string(model.KindNorm), "RMSNorm 8x512", func(rng *rand.Rand) func() float64 {
			// Unit weights: repeated in-place normalisation then stays put;
			// random weights would drive values into denormals (slow on x86).
			x, w := randSlice32(rng, 8*512), make([]float32, 512)
			for j := range w {
				w[j] = 1
			}
			return func() float64 { rmsNorm(x, w, 8, 512); return 4 * 8 * 512 }
		}},
		{string(model.KindElementwise), "SiLU-and-mul 8x512", func(rng *rand.Rand) func() float64 {
			in, out := randSlice32(rng, 8*1024), make([]float32, 8*512)
			return func() float64 { siluMul(in, out, 8, 512); return 5 * 8 * 512 } // model.Build counts 5 FLOPs per output
		}},
		{string(model.KindRouter), "top-4 of 16, 8 tokens", func(rng *rand.Rand) func() float64 {
			l := randSlice32(rng, 8*16)
			idx, w := make([]int32, 8*4), make([]float32, 8*4)
			return func() float64 { topK(l, 8, 16, 4, idx, w); return 8 * 16 * 4 }
		}},
	}
	rates := map[string]float64{}
	for _, f := range fams {
		rate, err := perRank(ctx, R, cfg.Duration, f.setup)
		if err != nil {
			return nil, nil, err
		}
		rates[f.kind] = rate / 1e9
		rep.EfficiencyShapes[f.kind] = f.shape
		// The peak is the best FLOP rate seen: a family faster than the
		// square GEMM (decode shapes can be) raises it, so no efficiency
		// is clipped at 1.
		rep.GEMMPeakGFLOPS = math.Max(rep.GEMMPeakGFLOPS, rate/1e9)
	}
	for k, g := range rates {
		rep.Efficiency[k] = math.Max(1e-4, g/rep.GEMMPeakGFLOPS)
	}

	// Ring all-reduce over the goroutine fabric: R ranks (and 2, to
	// separate the per-step latency from the fixed one).
	groups := []int{R}
	if R > 2 {
		groups = append(groups, 2)
	}
	for _, n := range groups {
		for _, bytes := range []int64{4 << 10, 64 << 10, 512 << 10, 4 << 20} {
			us, err := timeAllReduce(ctx, n, bytes, cfg.Duration/4)
			if err != nil {
				return nil, nil, err
			}
			rep.AllReduce = append(rep.AllReduce, CollectiveSample{Ranks: n, Bytes: bytes, Us: us})
		}
	}
	rep.AllReduceFit, rep.AllReduceRMSRel = fitRing(rep.AllReduce, R)

	t, err := cpuTopology(cfg.Name, rep, vendor)
	if err != nil {
		return nil, nil, err
	}
	return t, rep, nil
}

func randSlice32(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	fill(rng, x, 1)
	return x
}

// perRank measures work per second per goroutine with R goroutines at
// once (window), three times, and returns the median, so that one window
// disturbed by other processes does not set the rate.
func perRank(ctx context.Context, R int, d time.Duration, setup func(*rand.Rand) func() float64) (float64, error) {
	var rates [3]float64
	for i := range rates {
		r, err := window(ctx, R, d/3, setup)
		if err != nil {
			return 0, err
		}
		rates[i] = r
	}
	slices.Sort(rates[:])
	return rates[1], nil
}

// window runs setup's work function on R goroutines at once during one
// common window of about d and returns the mean work per second per
// goroutine: all goroutines start together and stop at the same deadline,
// so with more goroutines than cores each is charged its share of the
// cores, not a solo tail.
func window(ctx context.Context, R int, d time.Duration, setup func(*rand.Rand) func() float64) (float64, error) {
	works := make([]float64, R)
	var wg, ready sync.WaitGroup
	start := make(chan struct{})
	var deadline time.Time
	for r := range R {
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			work := setup(rand.New(rand.NewPCG(uint64(r)+1, 99)))
			work() // warm caches and pages
			ready.Done()
			<-start
			for time.Now().Before(deadline) && ctx.Err() == nil {
				works[r] += work()
			}
		}()
	}
	ready.Wait()
	t0 := time.Now()
	deadline = t0.Add(d)
	close(start)
	wg.Wait()
	elapsed := time.Since(t0).Seconds() // the last call may overrun the deadline a little
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("calibrate cpu: %w", err)
	}
	total := 0.0
	for _, w := range works {
		total += w
	}
	return total / float64(R) / elapsed, nil
}

// timeAllReduce returns the median time in microseconds of the fabric's
// ring all-reduce of bytes over n goroutines, repeated for about d.
func timeAllReduce(ctx context.Context, n int, bytes int64, d time.Duration) (float64, error) {
	group := make([]int, n)
	for i := range group {
		group[i] = i
	}
	c := newCollective(&model.Op{ID: "calibrate.allreduce", Kind: model.KindCollective, Collective: model.AllReduce, Group: group, CommBytes: bytes}, true, DefaultWatchdog)
	defer c.bar.close()
	for i := range n {
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		c.register(i, func(x []float32) { fill(rng, x, 1) })
	}
	var times []float64
	start := time.Now()
	var wg sync.WaitGroup
	for iter := 0; iter < 5 || (time.Since(start) < d && iter < 2000); iter++ {
		errs := make([]error, n)
		t0 := time.Now()
		for i := range n {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = c.run(ctx, i) }()
		}
		wg.Wait()
		times = append(times, float64(time.Since(t0).Nanoseconds())/1e3)
		for _, err := range errs {
			if err != nil {
				return 0, fmt.Errorf("calibrate cpu: all-reduce: %w", err)
			}
		}
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}

// fitRing fits time_us = base + 2(n-1) hw + bytes * 2(n-1)/n / (1000 bus)
// (sim's ring all-reduce model, topology.CollectiveParams) by least squares
// on the relative error of the samples; a negative coefficient is dropped and the rest refitted.
// It returns the parameters for ranks R and the RMS relative error.
//
// A term the samples cannot tell from another is left out before the fit:
// rings of one size (--ranks 2 times only 2-rank rings) make 2(n-1) hw a
// constant, which base then carries (hw 0: their sum is what a ring of
// that size takes); a lone rank (--ranks 1) moves no bytes over no ring
// step, so base alone is fitted. Left in, the columns are dependent, the
// solve fails, and the fit was all zeros: collectives priced free (a bus
// of 1e6 GB/s) at an RMS error of 100 %.
func fitRing(samples []CollectiveSample, R int) (topology.CollectiveParams, float64) {
	cols := []int{0, 1, 2} // base, hw, 1/bus
	sizes := map[int]bool{}
	for _, s := range samples {
		sizes[s.Ranks] = true
	}
	if len(sizes) == 1 {
		cols = []int{0, 2}
		if sizes[1] {
			cols = []int{0}
		}
	}
	row := func(s CollectiveSample) []float64 {
		n := float64(s.Ranks)
		return []float64{1, 2 * (n - 1), float64(s.Bytes) * 2 * (n - 1) / n / 1000}
	}
	var coef [3]float64
	for len(cols) > 0 {
		a := mat.NewDense(len(samples), len(cols), nil)
		y := mat.NewVecDense(len(samples), nil)
		for i, s := range samples {
			// Rows weighted by 1/time: least squares on relative error,
			// so 4 KiB and 4 MiB samples count alike.
			r := row(s)
			for j, c := range cols {
				a.Set(i, j, r[c]/s.Us)
			}
			y.SetVec(i, 1)
		}
		var x mat.VecDense
		if err := x.SolveVec(a, y); err != nil {
			break
		}
		neg := -1
		for j := range cols {
			if x.AtVec(j) < 0 && (neg < 0 || x.AtVec(j) < x.AtVec(neg)) {
				neg = j
			}
		}
		if neg < 0 {
			coef = [3]float64{}
			for j, c := range cols {
				coef[c] = x.AtVec(j)
			}
			break
		}
		cols = slices.Delete(cols, neg, neg+1)
	}
	bus := 1e6 // no bandwidth term: an arbitrarily fast bus (GB/s)
	if coef[2] > 0 {
		bus = 1 / coef[2]
	}
	var ss float64
	for _, s := range samples {
		r := row(s)
		pred := coef[0] + coef[1]*r[1] + r[2]/bus
		ss += math.Pow((pred-s.Us)/s.Us, 2)
	}
	return topology.CollectiveParams{Algo: "Ring", Proto: "Simple", Ranks: R, BaseLatUs: coef[0], HwLatUs: coef[1], BusBWGBps: bus,
		Samples: len(samples)}, math.Sqrt(ss / float64(len(samples)))
}

// cpuTopology builds the topology of rep's measurements on this machine
// (vendor is the host's CPU vendor, as cpuInfo gives it).
func cpuTopology(name string, rep *CalibrateReport, vendor string) (*topology.Topology, error) {
	R := rep.Ranks
	peakTF := rep.GEMMPeakGFLOPS / 1e3
	devName := fmt.Sprintf("cpu rank (1/%d of %d cores, %s)", R, rep.Cores, rep.CPU)
	measured := fmt.Sprintf("measured by tpscope calibrate --backend cpu with %d goroutine ranks at once on %d cores (%s), %s per benchmark", R, rep.Cores, rep.CPU, rep.Duration)
	eff := map[string]float64{"default": rep.Efficiency[string(model.KindGEMM)]}
	for k, v := range rep.Efficiency {
		eff[k] = v
	}
	memTotal := physMemBytes()
	// Every figure below is of the executor's kernels (the only engine the
	// CPU backend runs): a prediction of another engine's kernels on this
	// box reads them as that engine's, which sim's caveat then says, as it
	// does for a box calibrated on a trace of the executor's run.
	exe, err := engprof.Lookup(engprof.ExecutorRef)
	if err != nil {
		return nil, fmt.Errorf("calibrate cpu: %w", err)
	}
	dev := topology.Device{
		CalibratedEngine: exe.Name(),
		Name:             devName, Arch: topology.ArchCPU, SMs: 1, SMClockMHz: 1, BoostClockMHz: 1,
		MemBytes:  max(1, memTotal/int64(R)),
		MemBWGBps: rep.MemGBps / 2, MemEfficiency: 1,
		L2Bytes:    2 << 20,
		PeakTFLOPS: map[string]float64{"fp32": peakTF, "tf32": peakTF, "bf16": peakTF, "fp16": peakTF, "fp8": peakTF, "fp4": peakTF, "int8": peakTF},
		// The CPU backend's ops are synchronous calls: the "launch" is the
		// runner's host clock pair and call, and no graph mode exists.
		LaunchEagerUs: rep.RunnerOpUs, LaunchGraphUs: rep.RunnerOpUs, MinKernelUs: rep.MinKernelUs,
		Efficiency: eff,
		Sources: map[string]string{
			"peak_tflops":     measured + ": best FLOP rate per rank of sgemm 256x256x256 (gonum blas32) and the kernel families; every dtype runs as float32 in the CPU backend",
			"mem_bw_gbps":     measured + fmt.Sprintf(": float32 y += x streaming %.1f GB/s per rank, halved to schedule (bf16) bytes since the CPU backend stores 16-bit values as float32", rep.MemGBps),
			"min_kernel_us":   measured + ": RMSNorm of one 16-value row through a kernel call",
			"launch_eager_us": measured + ": host clock pair around a no-op call (the runner's per-op cost)",
			"efficiency":      measured + ": per-kind FLOP rate at the shapes of exec/cpu/calibrate.go / GEMM peak",
			"sms":             "assumption: one core's worth of parallelism per rank (ops run on one goroutine)",
			"l2_bytes":        "assumption: 2 MiB (order of a server core's L2); not used by the CPU model",
		},
	}
	t := &topology.Topology{
		Name:        name,
		Description: fmt.Sprintf("%d goroutine ranks sharing one CPU (%s, %d cores): each rank is one device; collectives go through shared memory", R, rep.CPU, rep.Cores),
		Sources:     []string{measured},
		Host: topology.Host{CPU: rep.CPU, Vendor: vendor, Sockets: 1, CPURanksAtOnce: R, CPUCores: rep.Cores,
			Sources: map[string]string{"cpu": "/proc/cpuinfo model name",
				"cpu_ranks_at_once": measured + ": --ranks, every rank's benchmarks running at once",
				"cpu_cores":         measured + ": GOMAXPROCS, the cores the ranks shared"}},
		Devices: []topology.Device{dev},
		Nodes:   []topology.Node{{ID: "cpu0", Kind: topology.NodeCPU, Socket: 0, Name: rep.CPU}},
	}
	// Links: each rank to the CPU's memory at the all-reduce's fitted bus
	// bandwidth (the calibration below replaces the link model for
	// collectives anyway).
	for r := range R {
		id := fmt.Sprintf("rank%d", r)
		t.GPUs = append(t.GPUs, topology.GPU{ID: id, Device: devName, NUMANode: 0, Socket: 0})
		t.Links = append(t.Links, topology.Link{A: id, B: "cpu0", Type: topology.LinkInternal, BWGBps: math.Min(rep.AllReduceFit.BusBWGBps, 1e4),
			LatUs: rep.AllReduceFit.HwLatUs / 2, Source: measured + ": goroutine ring all-reduce fit"})
	}
	// One fitted entry for every (algo, proto) sim may pick, so its choice
	// does not matter: the CPU backend runs one ring algorithm. Tree's
	// bus-to-algorithm factor is 0.5 instead of the ring's n/(2(n-1)); its
	// bus bandwidth is scaled so both give the ring's time at R ranks.
	fit := rep.AllReduceFit
	src := fmt.Sprintf("%s; goroutine ring all-reduce, %d samples, RMS relative error %.1f %%", measured, len(rep.AllReduce), 100*rep.AllReduceRMSRel)
	cal := &topology.Calibration{Source: src, Created: time.Now().UTC().Format(time.RFC3339)}
	for _, algo := range []string{"Ring", "Tree"} {
		for _, proto := range []string{"LL", "LL128", "Simple"} {
			p := fit
			p.Algo, p.Proto, p.RMSRelErr = algo, proto, rep.AllReduceRMSRel
			if algo == "Tree" && R > 1 {
				p.BusBWGBps = fit.BusBWGBps * float64(R) / float64(2*(R-1)) / 0.5
			}
			cal.Collectives = append(cal.Collectives, p)
		}
	}
	t.Calibration = cal
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("calibrate cpu: built an invalid topology: %w", err)
	}
	return t, nil
}

// cpuInfo is the CPU vendor, "amd", "intel" or "" (the host vendors
// whose root complexes the topology models; others are left unset, as
// topology.FromProbe does), and /proc/cpuinfo's model name, or GOARCH.
func cpuInfo() (vendor, model string) {
	vendor, model = topology.CPUInfo()
	if vendor != "amd" && vendor != "intel" {
		vendor = ""
	}
	if model == "" {
		model = runtime.GOARCH
	}
	return vendor, model
}

// l3Bytes is the L3 size from sysfs, or 32 MiB (assumption) when unknown.
func l3Bytes() int {
	b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cache/index3/size")
	if err == nil {
		s := strings.TrimSpace(string(b))
		var n int
		if _, err := fmt.Sscanf(s, "%dK", &n); err == nil && n > 0 {
			return n << 10
		}
	}
	return 32 << 20
}

// physMemBytes is MemTotal from /proc/meminfo, or 16 GiB (assumption).
func physMemBytes() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			var kb int64
			if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil && kb > 0 {
				return kb << 10
			}
		}
	}
	return 16 << 30
}
