package cuda

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"
	"unsafe"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/cuda/internal/cu"
	"github.com/tpscope/tpscope/exec/cuda/internal/cublas"
	"github.com/tpscope/tpscope/exec/cuda/internal/nccl"
	"github.com/tpscope/tpscope/exec/cuda/internal/nvml"
	"github.com/tpscope/tpscope/exec/cuda/internal/nvrtc"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/traces/schema"
)

func init() { exec.RegisterBackend("cuda", New) }

// Attributes this backend adds to op spans besides traces' schema.
const (
	// AttrWeightsRotated on op spans whose streamed bytes share a rotating
	// pool because the rank's weights did not fit the device.
	AttrWeightsRotated attribute.Key = "tpscope.cuda.weights_rotated" // bool
)

// Defaults.
const (
	// DefaultWatchdog is how long EndStep waits for a step with NCCL work
	// before it aborts the communicators, unless the run sets
	// exec.WithWatchdog.
	DefaultWatchdog = 5 * time.Minute
	// memMarginBytes stays free on the device for cuBLAS, NCCL and the
	// driver (an assumption, generous for NCCL's buffers at 8 ranks).
	memMarginBytes = 3 << 30
	// arenaAlign aligns every op's streamed region (cuBLASLt wants 16 B;
	// 256 B matches cudaMalloc's alignment).
	arenaAlign = 256
)

// Backend is the CUDA executor: cuBLAS/cuBLASLt GEMMs, NVRTC-compiled
// kernels for MLA decode attention, RMSNorm, router top-k, embedding and
// elementwise ops, NCCL collectives, timed with CUDA events.
type Backend struct {
	cfg      exec.BackendConfig
	watchdog time.Duration
}

// New loads the CUDA driver, cuBLAS(Lt) and NVRTC (NCCL is loaded when a
// run needs collectives) and returns the backend. A missing library is one
// line: "libcublas.so.13 not found; set TPSCOPE_CUDA_LIBS".
func New(cfg exec.BackendConfig) (exec.Backend, error) {
	if err := LoadLibraries(false); err != nil {
		return nil, err
	}
	return &Backend{cfg: cfg, watchdog: DefaultWatchdog}, nil
}

// LoadLibraries opens the libraries the backend needs (NCCL too when
// withNCCL). The error of the first missing one is returned as is.
func LoadLibraries(withNCCL bool) error {
	if err := cu.Load(); err != nil {
		return err
	}
	if err := cublas.Load(); err != nil {
		return err
	}
	if err := nvrtc.Load(); err != nil {
		return err
	}
	if withNCCL {
		return nccl.Load()
	}
	return nil
}

// Name implements exec.Backend.
func (b *Backend) Name() string { return "cuda" }

// ReadsCollectiveSettings implements exec.CollectiveSettingsReader: the
// ranks' collectives are NCCL's, configured by the NCCL_* variables of
// BackendConfig.NCCL.
func (b *Backend) ReadsCollectiveSettings() bool { return true }

// SupportsGraphs implements exec.GraphSupporter: ranks capture a step as a
// CUDA graph and replay it.
func (b *Backend) SupportsGraphs() bool { return true }

// MultiProcessRanks implements exec.MultiProcessRanker: a process launched
// with torchrun's or Slurm's variables runs its rank and joins the others
// through the NCCL id rendezvous (LaunchEnv).
func (b *Backend) MultiProcessRanks() bool { return true }

// ResourceAttributes implements exec.ResourceDescriber (the package's
// ResourceAttributes; the first device when ordinals is empty).
func (b *Backend) ResourceAttributes(ordinals ...int) []attribute.KeyValue {
	if len(ordinals) == 0 {
		ordinals = []int{0}
	}
	return ResourceAttributes(ordinals...)
}

// Session is one Run on the CUDA backend.
type Session struct {
	b       *Backend
	sched   *model.Schedule
	cfg     exec.SessionConfig
	local   []int
	devs    []int
	world   int
	shard   bool
	useNCCL bool
	id      nccl.UniqueID
	caps    devCaps
	cubin   []byte
	info    cu.DeviceInfo
	// restoreEnv puts back the environment Open changed (applyEnv).
	restoreEnv func()
	// ncclEnv is the NCCL_* environment the session opened with
	// (exec.AttrNCCLEnv on rank spans).
	ncclEnv string
}

// Open implements exec.Backend.
func (b *Backend) Open(ctx context.Context, sched *model.Schedule, cfg exec.SessionConfig) (exec.Session, error) {
	if sched == nil || len(sched.Ranks) == 0 {
		return nil, fmt.Errorf("cuda: empty schedule")
	}
	// The settings hold for this session only: Close puts back what the
	// process had, so the next session (another run's) starts from it.
	restore := applyEnv(b.cfg.NCCL.Env())
	s, err := b.open(ctx, sched, cfg)
	if err != nil {
		restore()
		return nil, err
	}
	s.restoreEnv = restore
	s.ncclEnv = exec.NCCLEnviron()
	return s, nil
}

func (b *Backend) open(ctx context.Context, sched *model.Schedule, cfg exec.SessionConfig) (*Session, error) {
	s := &Session{b: b, sched: sched, cfg: cfg, world: len(sched.Ranks)}
	s.local = append([]int(nil), cfg.LocalRanks...)
	if len(s.local) == 0 {
		for r := range sched.Ranks {
			s.local = append(s.local, r)
		}
	}
	le, launched, err := LaunchEnvFrom(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("cuda: launch environment: %w", err)
	}
	if launched && le.World != s.world {
		return nil, fmt.Errorf("cuda: %s world size %d but the schedule has %d ranks", le.Source, le.World, s.world)
	}
	s.shard = !launched && len(s.local) < s.world
	n, err := cu.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	if n == 0 {
		return nil, fmt.Errorf("cuda: no CUDA device visible")
	}
	switch {
	case len(b.cfg.Devices) > 0:
		if len(b.cfg.Devices) != len(s.local) {
			return nil, fmt.Errorf("cuda: %d devices given for %d local ranks", len(b.cfg.Devices), len(s.local))
		}
		s.devs = append([]int(nil), b.cfg.Devices...)
	case launched && len(s.local) == 1:
		s.devs = []int{le.LocalRank}
	default:
		for i := range s.local {
			s.devs = append(s.devs, i)
		}
	}
	for _, d := range s.devs {
		if d < 0 || d >= n {
			return nil, fmt.Errorf("cuda: device %d does not exist (%d visible); a one-GPU run of a TP>1 schedule takes one rank: --local-ranks 0", d, n)
		}
	}
	if s.info, err = cu.Info(s.devs[0]); err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	s.caps = devCaps{ccMajor: s.info.CCMajor, ccMinor: s.info.CCMinor, sms: s.info.SMs}
	if s.cubin, err = compileKernels(s.caps.ccMajor, s.caps.ccMinor); err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	// Collectives run when every member is present: all ranks in this
	// process, or all processes of a launch.
	if !s.shard && s.world > 1 {
		for _, r := range s.local {
			for i := range sched.Ranks[r] {
				if sched.Ranks[r][i].IsCollective() && len(sched.Ranks[r][i].Group) > 1 {
					s.useNCCL = true
				}
			}
		}
	}
	if s.useNCCL {
		if err := nccl.Load(); err != nil {
			return nil, err
		}
		if s.id, err = s.uniqueID(ctx, le, launched); err != nil {
			return nil, fmt.Errorf("cuda: %w", err)
		}
	}
	return s, nil
}

// runtimeConnectEnv makes NCCL connect a communicator's peers at init
// (NCCL_RUNTIME_CONNECT=0) instead of at the first collective that needs
// them (its default since 2.22), unless the environment or the catalog
// sets it: a lazy connection makes that collective's host call wait for
// its peers, holding the communicator the watchdog needs (commGuard),
// while init waits under the rank's own timeout (initComm).
const runtimeConnectEnv = "NCCL_RUNTIME_CONNECT"

// applyEnv sets NCCL_* settings (sorted keys) before any communicator
// exists, so NCCL reads them at init, and NCCL_RUNTIME_CONNECT=0 where
// neither they nor the environment set it. It returns the function that
// puts every variable it touched back as it was: the previous value, or
// unset where it was unset. A process that runs several sessions one
// after another (tpscope verdict) must not hand one run's settings to the
// next; NCCL itself keeps some settings for the life of the process, which
// is why a caller runs a change of those in a fresh process.
func applyEnv(env map[string]string) (restore func()) {
	type prev struct {
		key, val string
		set      bool
	}
	var saved []prev
	set := func(k, v string) {
		old, ok := os.LookupEnv(k)
		saved = append(saved, prev{k, old, ok})
		os.Setenv(k, v)
	}
	if _, given := env[runtimeConnectEnv]; !given && os.Getenv(runtimeConnectEnv) == "" {
		set(runtimeConnectEnv, "0")
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.HasPrefix(k, "NCCL_") {
			set(k, env[k])
		}
	}
	return func() {
		// In reverse, so a key set twice ends at its first saved value.
		for i := len(saved) - 1; i >= 0; i-- {
			if p := saved[i]; p.set {
				os.Setenv(p.key, p.val)
			} else {
				os.Unsetenv(p.key)
			}
		}
	}
}

func (s *Session) uniqueID(ctx context.Context, le LaunchEnv, launched bool) (nccl.UniqueID, error) {
	if !launched {
		return nccl.NewUniqueID()
	}
	addr := fmt.Sprintf("%s:%d", le.MasterAddr, le.RendezvousPort)
	if le.Rank == 0 {
		id, err := nccl.NewUniqueID()
		if err != nil {
			return id, err
		}
		// Peers fetch the id while the ranks initialise; the serving loop
		// reports into a buffered channel, so nothing needs to wait on it.
		if _, _, err := serveID(ctx, fmt.Sprintf(":%d", le.RendezvousPort), id.Internal[:], le.World-1); err != nil {
			return id, err
		}
		return id, nil
	}
	b, err := fetchID(ctx, addr, len(nccl.UniqueID{}.Internal))
	var id nccl.UniqueID
	if err == nil {
		copy(id.Internal[:], b)
	}
	return id, err
}

// LockOSThread implements exec.ThreadLocker: a CUDA context is current per
// OS thread.
func (s *Session) LockOSThread() bool { return true }

// ResourceAttributes describes devices (CUDA ordinals) for the trace
// resource before a Session exists (the CLI sets up its exporter first):
// GPU model and count, NVIDIA driver (NVML), CUDA driver API and NCCL
// versions, each left out when its library is missing.
func ResourceAttributes(ordinals ...int) []attribute.KeyValue {
	if cu.Load() != nil || len(ordinals) == 0 {
		return nil
	}
	info, err := cu.Info(ordinals[0])
	if err != nil {
		return nil
	}
	driver, _ := cu.DriverVersion()
	kv := []attribute.KeyValue{
		schema.ResGPUModel.String(info.Name),
		schema.ResGPUCount.Int(len(ordinals)),
		schema.ResCUDAVersion.String(fmt.Sprintf("%d.%d", driver/1000, driver%1000/10)),
	}
	if nvml.Load() == nil {
		if name := nvml.DriverVersion(); name != "" {
			kv = append(kv, schema.ResGPUDriver.String(name))
		}
	}
	if nccl.Load() == nil {
		if v, _ := nccl.Version(); v != "" {
			kv = append(kv, schema.ResNCCLVersion.String(v))
		}
	}
	return kv
}

// Close implements exec.Session.
func (s *Session) Close() error {
	if s.restoreEnv != nil {
		s.restoreEnv()
		s.restoreEnv = nil
	}
	return nil
}

// watchdog is the run's exec.WithWatchdog, else DefaultWatchdog.
func (s *Session) watchdog() time.Duration {
	if s.cfg.Watchdog > 0 {
		return s.cfg.Watchdog
	}
	return s.b.watchdog
}

// kargs is a prepared kernel launch: argument values and the pointer array
// cuLaunchKernel reads, allocated once at OpenRank.
type kargs struct {
	fn          cu.Function
	grid, block [3]uint32
	smem        uint32
	cluster     uint32 // blocks per thread-block cluster (> 1: cuLaunchKernelEx)
	vals        []uint64
	ptrs        []unsafe.Pointer
}

func (r *Rank) launchArgs(fn cu.Function, grid, block [3]uint32, smem uint32, vals ...uint64) *kargs {
	k := &kargs{fn: fn, grid: grid, block: block, smem: smem, vals: vals, ptrs: make([]unsafe.Pointer, len(vals))}
	for i := range k.vals {
		k.ptrs[i] = unsafe.Pointer(&k.vals[i])
	}
	r.pin.Pin(&k.vals[0])
	r.pin.Pin(&k.ptrs[0])
	return k
}

func (k *kargs) launch(s cu.Stream) error {
	if k.cluster > 1 {
		return cu.LaunchCluster(k.fn, k.grid, k.block, k.smem, s, unsafe.Pointer(&k.ptrs[0]), k.cluster)
	}
	return cu.Launch(k.fn, k.grid, k.block, k.smem, s, unsafe.Pointer(&k.ptrs[0]))
}

// mlaClusterFit is how many clusters of w blocks of tensor-core MLA kernel
// f (named n) the device runs at once, index w = 0..16 (0 and 1 unused).
func mlaClusterFit(f cu.Function, n string) ([]int, error) {
	fit := make([]int, mlaMaxCluster+1)
	for w := 2; w <= mlaMaxCluster; w++ {
		var err error
		if fit[w], err = cu.MaxActiveClusters(f, MLAFwdThreads(n), MLAFwdSmem(n), w); err != nil {
			return nil, fmt.Errorf("%s: clusters of %d blocks: %w", n, w, err)
		}
	}
	return fit, nil
}

func i32(v int) uint64       { return uint64(uint32(int32(v))) }
func f32(v float32) uint64   { return uint64(math.Float32bits(v)) }
func ptr(p cu.DevPtr) uint64 { return uint64(p) }

// Rank is one local rank on one GPU.
type Rank struct {
	s       *Session
	rank    int
	dev     int
	ctx     cu.Context
	stream  cu.Stream
	blas    *cublas.Handle
	mod     cu.Module
	fns     map[string]cu.Function
	plans   []opPlan
	ops     []model.Op
	offs    []uint64
	rotated bool
	pin     runtime.Pinner

	arena, xbuf, ybuf, aux, comm0, comm1 cu.DevPtr
	sem                                  cu.DevPtr // counters of the MLA kernel's in-kernel merge
	launches                             [][]*kargs
	attrs                                [][]attribute.KeyValue

	anchor     cu.Event
	anchorHost time.Time
	start, end []cu.Event
	ran        []bool
	capturing  bool
	graph      cu.Graph
	gexec      cu.GraphExec
	nc         *commGuard // the NCCL communicator (nil without NCCL)
	tcNote     string     // why the tensor-core MLA kernel is not used, if it is not
	nvdev      nvml.Device
	hasNVML    bool
	stepKV     []attribute.KeyValue
}

// OpenRank implements exec.Session.
func (s *Session) OpenRank(ctx context.Context, rank int) (exec.Rank, error) {
	li := -1
	for i, r := range s.local {
		if r == rank {
			li = i
		}
	}
	if li < 0 || rank >= len(s.sched.Ranks) {
		return nil, fmt.Errorf("cuda: rank %d is not local", rank)
	}
	r := &Rank{s: s, rank: rank, dev: s.devs[li], ops: s.sched.Ranks[rank]}
	if err := r.open(ctx); err != nil {
		r.Close()
		return nil, fmt.Errorf("cuda rank %d (device %d): %w", rank, r.dev, err)
	}
	return r, nil
}

func (r *Rank) open(ctx context.Context) error {
	var err error
	if r.ctx, err = cu.PrimaryContext(r.dev); err != nil {
		return err
	}
	if err = cu.SetCurrent(r.ctx); err != nil {
		return err
	}
	if r.mod, err = cu.LoadModule(r.s.cubin); err != nil {
		return err
	}
	r.fns = map[string]cu.Function{}
	names := []string{"fill_words", "rmsnorm", "ew_silu_mul", "silu_mul", "topk_router", "embed_gather", "mla_combine", "mla_dcp_correct"}
	names = append(names, MLAFwdKernels...)
	for _, kv := range []string{"bf16", "fp8"} {
		for _, h := range []int{1, 2, 4, 8, 16} {
			names = append(names, fmt.Sprintf("mla_decode_%s_h%d", kv, h))
		}
	}
	caps := r.s.caps
	caps.mlaOcc = map[string]int{}
	caps.mlaClusters = map[string][]int{}
	for _, n := range names {
		f, err := cu.GetFunction(r.mod, n)
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(n, "mla_decode_"):
			if err := cu.SetMaxDynamicSmem(f, mlaSmem(16, latentDim)); err != nil {
				return err
			}
		case strings.HasPrefix(n, "mla_tc_"), strings.HasPrefix(n, "mla_ds_"):
			smem := MLAFwdSmem(n)
			if err := cu.SetMaxDynamicSmem(f, smem); err != nil {
				return err
			}
			// Blocks per SM decide whether a split launch fits the device at
			// once (the in-kernel merge waits on that).
			if caps.mlaOcc[n], err = cu.MaxActiveBlocks(f, MLAFwdThreads(n), smem); err != nil {
				return err
			}
			if caps.ccMajor >= 9 {
				// Clusters that fit at once, per width, for the merge
				// through shared memory.
				if caps.mlaClusters[n], err = mlaClusterFit(f, n); err != nil {
					return err
				}
			}
		}
		r.fns[n] = f
	}
	if r.stream, err = cu.NewStream(); err != nil {
		return err
	}
	pl := &planner{sched: r.s.sched, dev: caps, seed: r.s.b.cfg.Seed, shard: r.s.shard, world: r.s.world, fuseARNorm: r.s.b.cfg.ARNormFusion}
	pl.dev.mlaFwd = map[bool]mlaFwdFamily{}
	if pl.dev.ccMajor >= 8 {
		// Per cache dtype, the first tensor-core variant that agrees with
		// the CUDA-core kernel; none: the CUDA-core kernel, and the spans
		// say why.
		var notes []string
		for _, fp8 := range []bool{false, true} {
			for _, f := range mlaFwdFamilies[fp8] {
				if 10*pl.dev.ccMajor+pl.dev.ccMinor < f.minCC() {
					continue
				}
				var err error
				for _, k := range f {
					if err = r.checkTC(k, fp8); err != nil {
						break
					}
				}
				if err == nil {
					pl.dev.mlaFwd[fp8] = f
					break
				}
				notes = append(notes, err.Error())
			}
		}
		r.tcNote = strings.Join(notes, "; ")
	} else {
		pl.noTC = true
	}
	if r.plans, err = pl.planRank(r.rank); err != nil {
		return err
	}
	if r.blas, err = cublas.New(r.stream); err != nil {
		return err
	}
	if err := r.allocate(); err != nil {
		return err
	}
	if err := r.prepare(); err != nil {
		return err
	}
	if r.s.useNCCL {
		if err := r.initComm(ctx); err != nil {
			return err
		}
	}
	// NVML is optional: without it the step spans carry no samples.
	if nvml.Load() == nil {
		if bus, err := cu.PCIBusID(r.dev); err == nil {
			if d, err := nvml.ByPCIBusID(bus); err == nil {
				r.nvdev, r.hasNVML = d, true
			}
		}
	}
	return cu.StreamSync(r.stream)
}

// checkTC runs tensor-core MLA kernel fwd and the CUDA-core one on the
// same random problem (2 tokens, 16 heads, 100 cached tokens, 576 wide,
// split in two and merged in the kernel; a bf16 or e4m3 cache) and returns
// an error unless their outputs agree to 3e-2 relative (both are bf16
// arithmetic, about 2e-3 from a float64 reference; cudacheck kernels
// checks each against float64).
func (r *Rank) checkTC(fwd string, fp8 bool) error {
	const T, H, ctx, dqk, dlat, S = 2, 16, 100, latentDim, latentOut, 2
	qB, kvB := uint64(T*H*dqk*2), uint64(T*ctx*dqk*2)
	partB, lseB, outB := uint64(S*T*H*dlat*4), uint64(S*T*H*4), uint64(T*H*dlat*2)
	buf, err := cu.Alloc(qB + kvB + partB + lseB + 2*outB + 256)
	if err != nil {
		return err
	}
	defer cu.Free(buf)
	q, kv := buf, buf+cu.DevPtr(qB)
	part := kv + cu.DevPtr(kvB)
	lse := part + cu.DevPtr(partB)
	out := [2]cu.DevPtr{lse + cu.DevPtr(lseB), lse + cu.DevPtr(lseB+outB)}
	sem := out[1] + cu.DevPtr(outB)
	if err := r.fill(buf, qB+kvB, 12345); err != nil {
		return err
	}
	if err := cu.Memset8(sem, 0, 256); err != nil {
		return err
	}
	scale := float32(0.07)
	kvs := "bf16"
	if fp8 {
		kvs = "fp8"
	}
	{
		chunk := 64 // two splits: 64 + 36 tokens
		rows := MLAFwdRows(fwd)
		k1 := r.launchArgs(r.fns[fwd], [3]uint32{S, uint32((H + rows - 1) / rows), T}, [3]uint32{uint32(MLAFwdThreads(fwd)), 1, 1}, uint32(MLAFwdSmem(fwd)),
			ptr(q), ptr(kv), ptr(out[0]), ptr(part), ptr(lse), ptr(sem), 0, i32(T), i32(H), i32(ctx), i32(1), i32(chunk), f32(scale), f32(1), i32(1))
		k2 := r.launchArgs(r.fns["mla_decode_"+kvs+"_h16"], [3]uint32{1, 1, T}, [3]uint32{mlaThreads, 1, 1}, uint32(mlaSmem(16, dqk)),
			ptr(q), ptr(kv), ptr(part), ptr(lse), i32(T), i32(H), i32(ctx), i32(1), i32(ctx), f32(scale), i32(dqk), i32(dlat))
		k3 := r.launchArgs(r.fns["mla_combine"], [3]uint32{T * H, 1, 1}, [3]uint32{128, 1, 1}, 0,
			ptr(part), ptr(lse), ptr(out[1]), i32(T*H), i32(1), i32(dlat))
		for _, k := range []*kargs{k1, k2, k3} {
			if err := k.launch(r.stream); err != nil {
				return err
			}
		}
		if err := cu.StreamSync(r.stream); err != nil {
			return err
		}
		a, b := make([]byte, outB), make([]byte, outB)
		if err := cu.DtoH(a, out[0]); err != nil {
			return err
		}
		if err := cu.DtoH(b, out[1]); err != nil {
			return err
		}
		var num, den float64
		for i := 0; i+1 < len(a); i += 2 {
			x := float64(math.Float32frombits(uint32(a[i])<<16 | uint32(a[i+1])<<24))
			y := float64(math.Float32frombits(uint32(b[i])<<16 | uint32(b[i+1])<<24))
			num += (x - y) * (x - y)
			den += y * y
		}
		if rel := math.Sqrt(num / den); !(rel < 3e-2) {
			return fmt.Errorf("tensor-core MLA kernel %s disagrees with the CUDA-core one (relative difference %.3g)", fwd, rel)
		}
	}
	return nil
}

func align(x uint64) uint64 { return (x + arenaAlign - 1) / arenaAlign * arenaAlign }

// allocate lays out the streamed arena (each op its own region; a rotating
// pool when the rank's weights and caches exceed the free memory) and the
// activation, auxiliary and communication scratch, then fills everything
// with seeded random values (never zeros: they can time faster).
func (r *Rank) allocate() error {
	var total, in, out, aux, comm uint64
	for i := range r.plans {
		p := &r.plans[i]
		total += align(p.streamBytes)
		in, out, aux = max(in, p.inBytes), max(out, p.outBytes), max(aux, p.auxBytes)
		if p.kind == pkCollective {
			comm = max(comm, p.commBytes)
		}
	}
	in, out, aux = align(max(in, 256)), align(max(out, 256)), align(max(aux, 256))
	free, _, err := cu.MemInfo()
	if err != nil {
		return err
	}
	scratch := in + out + aux + 2*align(comm) + cublas.WorkspaceBytes
	budget := uint64(0)
	if free > scratch+memMarginBytes {
		budget = free - scratch - memMarginBytes
	}
	pool := total
	if total > budget {
		pool = budget / arenaAlign * arenaAlign
		r.rotated = true
	}
	var maxRegion uint64
	for i := range r.plans {
		maxRegion = max(maxRegion, align(r.plans[i].streamBytes))
	}
	if pool < maxRegion {
		return fmt.Errorf("device %d: %d B free, but one op needs %d B of weights or cache and the scratch %d B", r.dev, free, maxRegion, scratch)
	}
	r.offs = make([]uint64, len(r.plans))
	var off uint64
	for i := range r.plans {
		n := align(r.plans[i].streamBytes)
		if off+n > pool {
			off = 0 // rotate: the pool is far larger than L2, so reads still stream from HBM
		}
		r.offs[i] = off
		off += n
	}
	if r.arena, err = cu.Alloc(pool); err != nil {
		return err
	}
	if r.xbuf, err = cu.Alloc(in); err != nil {
		return err
	}
	if r.ybuf, err = cu.Alloc(out); err != nil {
		return err
	}
	if r.aux, err = cu.Alloc(aux); err != nil {
		return err
	}
	// Counters of the in-kernel MLA merge: zero, and left zero by every
	// launch (kernels.cu's mla_merge_splits).
	var semBytes uint64 = 256
	for i := range r.plans {
		if p := &r.plans[i]; p.kind == pkAttention && p.tc {
			semBytes = max(semBytes, uint64(8*p.seqs*p.mla.Groups))
		}
	}
	if r.sem, err = cu.Alloc(semBytes); err != nil {
		return err
	}
	if err := cu.Memset8(r.sem, 0, semBytes); err != nil {
		return err
	}
	if comm > 0 {
		if r.comm0, err = cu.Alloc(align(comm)); err != nil {
			return err
		}
		if r.comm1, err = cu.Alloc(align(comm)); err != nil {
			return err
		}
	}
	seed := uint32(r.s.b.cfg.Seed) ^ uint32(r.rank)*0x9e3779b9
	for _, b := range []struct {
		p cu.DevPtr
		n uint64
	}{{r.arena, pool}, {r.xbuf, in}, {r.ybuf, out}, {r.aux, aux}, {r.comm0, align(comm)}, {r.comm1, align(comm)}} {
		if b.p == 0 {
			continue
		}
		seed++
		if err := r.fill(b.p, b.n, seed); err != nil {
			return err
		}
	}
	return nil
}

// fill writes random bytes that read as bf16 of magnitude below 1 and as
// e4m3 below 2 (fill_words mode 1), so any buffer is valid input for any op.
func (r *Rank) fill(p cu.DevPtr, n uint64, seed uint32) error {
	words := n / 4
	vals := []uint64{ptr(p), words, uint64(seed), i32(1), f32(1)}
	ptrs := make([]unsafe.Pointer, len(vals))
	for i := range vals {
		ptrs[i] = unsafe.Pointer(&vals[i])
	}
	grid := uint32(min(uint64(r.s.caps.sms)*16, max(1, (words+255)/256)))
	err := cu.Launch(r.fns["fill_words"], [3]uint32{grid, 1, 1}, [3]uint32{256, 1, 1}, 0, r.stream, unsafe.Pointer(&ptrs[0]))
	if err == nil {
		err = cu.StreamSync(r.stream)
	}
	runtime.KeepAlive(vals)
	return err
}

// prepare builds every op's launch arguments, cuBLASLt plans, events and
// span attributes, so Exec allocates nothing.
func (r *Rank) prepare() error {
	n := len(r.plans)
	r.launches = make([][]*kargs, n)
	r.attrs = make([][]attribute.KeyValue, n)
	r.start, r.end, r.ran = make([]cu.Event, n), make([]cu.Event, n), make([]bool, n)
	var err error
	if r.anchor, err = cu.NewEvent(); err != nil {
		return err
	}
	sms := uint32(max(1, r.s.caps.sms))
	for i := range r.plans {
		p := &r.plans[i]
		w := r.arena + cu.DevPtr(r.offs[i])
		var a []attribute.KeyValue
		a = append(a, schema.AttrKernel.String(p.kernel))
		if p.kind == pkAttention && !p.tc && r.tcNote != "" {
			p.subst = strings.TrimPrefix(p.subst+"; "+r.tcNote, "; ")
		}
		if p.subst != "" {
			a = append(a, schema.AttrSubstituted.Bool(true), schema.AttrSubstitution.String(p.subst))
		}
		if p.skip != "" {
			a = append(a, schema.AttrSkipped.Bool(true), schema.AttrSkipReason.String(p.skip))
		}
		if p.moeExperts > 0 {
			a = append(a, schema.AttrMoERows.Int(p.moeRows), schema.AttrMoEExperts.Int(p.moeExperts))
		}
		if r.rotated && p.streamBytes > 0 {
			a = append(a, AttrWeightsRotated.Bool(true))
		}
		r.attrs[i] = a
		if p.kind == pkSkip {
			continue
		}
		if r.start[i], err = cu.NewEvent(); err != nil {
			return err
		}
		if r.end[i], err = cu.NewEvent(); err != nil {
			return err
		}
		switch p.kind {
		case pkGemmFP8:
			if p.fp8Plan, err = r.blas.PrepareFP8(p.m, p.n, p.k, p.batch); err != nil {
				return fmt.Errorf("op %s: %w", r.ops[i].ID, err)
			}
		case pkAttention:
			r.launches[i] = r.attentionLaunches(p, w)
		case pkNorm:
			res := uint64(0)
			if p.fusedAdd {
				res = ptr(r.aux)
			}
			in := r.xbuf
			if p.fusedAR && r.comm0 != 0 {
				in = r.comm0 // the all-reduce's output
			}
			r.launches[i] = []*kargs{r.launchArgs(r.fns["rmsnorm"], [3]uint32{uint32(p.rows), 1, 1}, [3]uint32{256, 1, 1}, 0,
				ptr(in), res, ptr(w), ptr(r.ybuf), i32(p.cols), f32(1e-6))}
		case pkElementwise:
			g := uint32(min(uint64(sms)*8, max(1, (p.nout+255)/256)))
			r.launches[i] = []*kargs{r.launchArgs(r.fns["ew_silu_mul"], [3]uint32{g, 1, 1}, [3]uint32{256, 1, 1}, 0,
				ptr(r.xbuf), p.nin, ptr(r.ybuf), p.nout)}
		case pkSiLUMul:
			// Vector path: two 8-column chunks per thread per pass.
			work := (p.nout + 7) / 8
			if p.cols%8 != 0 {
				work = p.nout * 2
			}
			g := uint32(min(uint64(sms)*16, max(1, (work+511)/512)))
			r.launches[i] = []*kargs{r.launchArgs(r.fns["silu_mul"], [3]uint32{g, 1, 1}, [3]uint32{256, 1, 1}, 0,
				ptr(r.xbuf), ptr(r.ybuf), i32(p.rows), i32(p.cols))}
		case pkRouter:
			g := uint32((p.rows*32 + 255) / 256)
			r.launches[i] = []*kargs{r.launchArgs(r.fns["topk_router"], [3]uint32{g, 1, 1}, [3]uint32{256, 1, 1}, 0,
				ptr(r.xbuf), i32(p.rows), i32(p.cols), i32(p.topk), ptr(r.aux), ptr(r.aux+cu.DevPtr(p.rows*p.topk*4)))}
		case pkEmbed:
			r.launches[i] = []*kargs{r.launchArgs(r.fns["embed_gather"], [3]uint32{uint32(p.rows), 1, 1}, [3]uint32{256, 1, 1}, 0,
				ptr(w), uint64(p.embedRows), i32(p.cols), ptr(r.ybuf), i32(p.embedRead), uint64(uint32(r.s.b.cfg.Seed)))}
		}
	}
	return nil
}

// attentionLaunches prepares an attention op's kernels: the tensor-core
// kernel (merging its splits itself when the plan says so, else followed by
// mla_combine) or the CUDA-core one and mla_combine; under decode context
// parallelism, mla_dcp_correct after them. The scratch holds the split
// partials, their log-sum-exps, the rows' log-sum-exps and the all-gathered
// ones, in that order.
func (r *Rank) attentionLaunches(p *opPlan, kvp cu.DevPtr) []*kargs {
	th := uint64(p.tokens * p.heads)
	part := r.aux
	lse := part + cu.DevPtr(uint64(p.splits)*th*uint64(p.dlat)*4)
	lseOut := lse + cu.DevPtr(uint64(p.splits)*th*4)
	lseAll := lseOut + cu.DevPtr(th*4)
	// Softmax scale 1/sqrt(qk_nope + qk_rope) = 1/sqrt(192) for the
	// DeepSeek-V3 family, and a per-tensor fp8 scale of 1: they change
	// values, not time.
	scale := float32(1 / math.Sqrt(192))
	var ks []*kargs
	if p.tc {
		g := p.mla
		lo := uint64(0)
		if p.dcp > 1 {
			lo = ptr(lseOut)
		}
		k := r.launchArgs(r.fns[g.Kernel], [3]uint32{uint32(g.Splits), uint32(g.Groups), uint32(p.seqs)}, [3]uint32{uint32(g.Threads), 1, 1}, uint32(g.SmemBytes),
			ptr(r.xbuf), ptr(kvp), ptr(r.ybuf), ptr(part), ptr(lse), ptr(r.sem), lo, i32(p.tokens), i32(p.heads), i32(p.ctx), i32(p.tokPerSeq), i32(g.Chunk), f32(scale), f32(1), i32(g.MergeMode()))
		k.cluster = uint32(g.Cluster)
		ks = append(ks, k)
		if g.Splits > 1 && !g.Coop {
			ks = append(ks, r.launchArgs(r.fns["mla_combine"], [3]uint32{uint32(th), 1, 1}, [3]uint32{128, 1, 1}, 0,
				ptr(part), ptr(lse), ptr(r.ybuf), i32(int(th)), i32(p.splits), i32(p.dlat)))
		}
	} else {
		kv := "bf16"
		if p.fp8KV {
			kv = "fp8"
		}
		groups := uint32((p.heads + p.hg - 1) / p.hg)
		ks = append(ks,
			r.launchArgs(r.fns[fmt.Sprintf("mla_decode_%s_h%d", kv, p.hg)],
				[3]uint32{uint32(p.splits), groups, uint32(p.tokens)}, [3]uint32{mlaThreads, 1, 1}, uint32(p.smem),
				ptr(r.xbuf), ptr(kvp), ptr(part), ptr(lse), i32(p.tokens), i32(p.heads), i32(p.ctx), i32(p.tokPerSeq), i32(p.chunk), f32(scale), i32(p.dqk), i32(p.dlat)),
			r.launchArgs(r.fns["mla_combine"], [3]uint32{uint32(th), 1, 1}, [3]uint32{128, 1, 1}, 0,
				ptr(part), ptr(lse), ptr(r.ybuf), i32(int(th)), i32(p.splits), i32(p.dlat)))
	}
	if p.dcp > 1 && p.tc && p.dlat%8 == 0 {
		ks = append(ks, r.launchArgs(r.fns["mla_dcp_correct"], [3]uint32{uint32((th + 3) / 4), 1, 1}, [3]uint32{256, 1, 1}, 0,
			ptr(r.ybuf), ptr(lseOut), ptr(lseAll), i32(int(th)), i32(p.dcp), i32(p.dlat)))
	}
	return ks
}

func (r *Rank) initComm(ctx context.Context) error {
	type res struct {
		c   nccl.Comm
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cu.SetCurrent(r.ctx); err != nil {
			ch <- res{err: err}
			return
		}
		c, err := nccl.InitRank(r.s.id, r.s.world, r.rank)
		ch <- res{c, err}
	}()
	select {
	case x := <-ch:
		if x.err == nil {
			r.nc = newCommGuard(x.c, r.ctx)
			if fail := r.s.cfg.Fail; fail != nil {
				rank := r.rank
				r.nc.onFire = func(err error) { fail(fmt.Errorf("cuda rank %d: %w", rank, err)) }
			}
		}
		return x.err
	case <-ctx.Done():
		// ncclCommInitRank cannot be interrupted; abandon it.
		go func() {
			if x := <-ch; x.err == nil {
				abortComm(x.c, r.ctx)
			}
		}()
		return fmt.Errorf("ncclCommInitRank: %w", ctx.Err())
	case <-time.After(r.s.watchdog()):
		return fmt.Errorf("ncclCommInitRank: peers did not join within %v", r.s.watchdog())
	}
}

// TimingEventsPerOp implements exec.TimingEventer: every op is enqueued
// between its own start and end events.
func (b *Backend) TimingEventsPerOp() int { return 2 }

// BeginStep implements exec.Rank: records the anchor event against which
// op events are mapped to the wall clock. The stream is idle here (the
// previous EndStep drained it), so the anchor fires right away.
func (r *Rank) BeginStep(ctx context.Context, step int) error {
	clear(r.ran)
	r.anchorHost = time.Now()
	if r.nc != nil {
		r.nc.arm(r.s.watchdog(), "step")
	}
	return cu.Record(r.anchor, r.stream, false)
}

// Exec implements exec.Rank: enqueues op i between its two events.
func (r *Rank) Exec(ctx context.Context, i int) error {
	p := &r.plans[i]
	if p.kind == pkSkip {
		return nil
	}
	if err := cu.Record(r.start[i], r.stream, r.capturing); err != nil {
		return err
	}
	var err error
	w := r.arena + cu.DevPtr(r.offs[i])
	switch p.kind {
	case pkGemmBF16:
		err = r.blas.GemmBF16(p.m, p.n, p.k, p.batch, r.xbuf, w, r.ybuf,
			int64(p.m*p.k), int64(p.n*p.k), int64(p.m*p.n))
	case pkGemmFP8:
		err = r.blas.GemmFP8(p.fp8Plan, r.xbuf, w, r.ybuf)
	case pkCollective:
		err = r.collective(p)
	default:
		for _, k := range r.launches[i] {
			if err = k.launch(r.stream); err != nil {
				break
			}
		}
	}
	if err != nil {
		return err
	}
	r.ran[i] = true
	return cu.Record(r.end[i], r.stream, r.capturing)
}

func (r *Rank) collective(p *opPlan) error {
	if r.nc == nil {
		return fmt.Errorf("cuda rank %d: collective without an NCCL communicator", r.rank)
	}
	n := uint64(max(1, p.nranks))
	return r.nc.call(func(c nccl.Comm) error {
		switch p.coll {
		case model.AllReduce:
			return nccl.AllReduce(r.comm0, p.commBytes/2, c, r.stream)
		case model.AllGather:
			return nccl.AllGather(r.comm0, r.comm1, p.commBytes/2/n, c, r.stream)
		case model.ReduceScatter:
			return nccl.ReduceScatter(r.comm0, r.comm1, p.commBytes/2/n, c, r.stream)
		case model.AllToAll:
			return nccl.AllToAll(r.comm0, r.comm1, p.commBytes/n, int(n), c, r.stream)
		}
		return fmt.Errorf("collective %q not supported", p.coll)
	})
}

// EndStep implements exec.Rank. Without NCCL it synchronises the stream.
// With NCCL it polls until the step is done, NCCL reports an asynchronous
// error, ctx is done, or the step's watchdog (armed in BeginStep) has
// aborted the communicator; every way but the first aborts it, so one
// failed rank cannot hang the others.
func (r *Rank) EndStep(ctx context.Context) error {
	if r.nc == nil {
		return cu.StreamSync(r.stream)
	}
	defer r.nc.disarm()
	sleep := 5 * time.Microsecond
	for {
		done, err := cu.StreamDone(r.stream)
		if err != nil {
			r.nc.abort(fmt.Sprintf("the stream failed: %v", err))
			return err
		}
		// Aborted counts before done: the abort also ends the step's kernels.
		if live, err := r.nc.state(); !live {
			return fmt.Errorf("cuda rank %d: %w", r.rank, err)
		}
		if done {
			return nil
		}
		if err := r.nc.call(nccl.AsyncError); err != nil {
			r.nc.abort(fmt.Sprintf("NCCL reported %v", err))
			return err
		}
		if ctx.Err() != nil {
			r.nc.abort("the step was cancelled")
			return fmt.Errorf("cuda rank %d: step aborted: %w", r.rank, ctx.Err())
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, time.Millisecond)
	}
}

// Abort implements exec.Aborter: after a failed run the communicator is
// aborted, not destroyed, since ncclCommDestroy may wait on peers that
// have aborted or stopped.
func (r *Rank) Abort() {
	if r.nc != nil {
		r.nc.disarm()
		r.nc.abort("the run failed")
	}
}

// DeviceTimes implements exec.DeviceTimer.
func (r *Rank) DeviceTimes(dst []exec.OpTime) error {
	for i := range dst {
		if i >= len(r.ran) || !r.ran[i] {
			dst[i] = exec.OpTime{}
			continue
		}
		a, err := cu.Elapsed(r.anchor, r.start[i])
		if err != nil {
			return err
		}
		b, err := cu.Elapsed(r.anchor, r.end[i])
		if err != nil {
			return err
		}
		dst[i] = exec.OpTime{
			Start: r.anchorHost.Add(time.Duration(float64(a) * 1e6)),
			End:   r.anchorHost.Add(time.Duration(float64(b) * 1e6)),
		}
	}
	return nil
}

// BeginCapture implements exec.GraphCapturer.
func (r *Rank) BeginCapture(ctx context.Context) error {
	if err := cu.BeginCapture(r.stream); err != nil {
		return err
	}
	r.capturing = true
	if r.nc != nil {
		r.nc.arm(r.s.watchdog(), "graph capture")
	}
	return nil
}

// EndCapture implements exec.GraphCapturer.
func (r *Rank) EndCapture(ctx context.Context) error {
	r.capturing = false
	if r.nc != nil {
		r.nc.disarm()
		if live, err := r.nc.state(); !live {
			_ = cu.AbandonCapture(r.stream)
			return fmt.Errorf("cuda rank %d: %w", r.rank, err)
		}
	}
	g, e, err := cu.EndCapture(r.stream)
	if err != nil {
		return err
	}
	r.graph, r.gexec = g, e
	return nil
}

// Replay implements exec.GraphCapturer.
func (r *Rank) Replay(ctx context.Context) error {
	if r.gexec == 0 {
		return fmt.Errorf("cuda rank %d: replay before capture", r.rank)
	}
	for i := range r.plans {
		r.ran[i] = r.plans[i].kind != pkSkip
	}
	return cu.LaunchGraph(r.gexec, r.stream)
}

// OpAttributes implements exec.OpAnnotator.
func (r *Rank) OpAttributes(i int) []attribute.KeyValue {
	if i < 0 || i >= len(r.attrs) {
		return nil
	}
	return r.attrs[i]
}

// Attributes of the NVML samples on rank spans (StepAttributes), read right
// after the step finished on the device.
const (
	AttrSMClockMHz  attribute.Key = "tpscope.gpu.sm_clock_mhz"  // float64
	AttrMemClockMHz attribute.Key = "tpscope.gpu.mem_clock_mhz" // float64
	AttrPowerW      attribute.Key = "tpscope.gpu.power_w"       // float64
	AttrTempC       attribute.Key = "tpscope.gpu.temp_c"        // float64
)

// StepAttributes implements exec.StepAnnotator: the NCCL settings the
// session opened with (exec.AttrNCCLEnv) and one NVML sample (SM and
// memory clock, power, temperature) taken after the step, where NVML is.
func (r *Rank) StepAttributes(step int) []attribute.KeyValue {
	r.stepKV = append(r.stepKV[:0], exec.AttrNCCLEnv.String(r.s.ncclEnv))
	if !r.hasNVML {
		return r.stepKV
	}
	s := r.nvdev.Read()
	r.stepKV = append(r.stepKV,
		AttrSMClockMHz.Float64(s.SMClockMHz), AttrMemClockMHz.Float64(s.MemClockMHz),
		AttrPowerW.Float64(s.PowerW), AttrTempC.Float64(s.TempC))
	return r.stepKV
}

// Close implements exec.Rank.
func (r *Rank) Close() error {
	if r.ctx == 0 {
		return nil
	}
	var comm nccl.Comm
	if r.nc != nil {
		var stuck bool
		if comm, stuck = r.nc.take(); stuck {
			r.ctx = 0
			return fmt.Errorf("cuda rank %d close: device state left to the process's exit: ncclCommAbort had not returned after %v", r.rank, abortWait)
		}
	}
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	keep(cu.SetCurrent(r.ctx))
	if r.capturing { // the step failed while it was being recorded
		_ = cu.AbandonCapture(r.stream)
		r.capturing = false
	}
	if r.stream != 0 && comm != 0 {
		// Let in-flight work finish before freeing its buffers.
		_ = cu.StreamSync(r.stream)
	}
	// The graph goes first: NCCL's work captured in it holds a reference
	// on the communicator, and ncclCommDestroy waits until no graph does
	// (commDestroySync polls while localPersistentRefs != 0; on the H200
	// both ranks of a clean graph run hung there while it came after).
	keep(cu.DestroyGraph(r.graph, r.gexec))
	r.graph, r.gexec = 0, 0
	if comm != 0 {
		keep(nccl.Destroy(comm))
	}
	if r.stream != 0 {
		_ = cu.StreamSync(r.stream)
	}
	for _, e := range append(append([]cu.Event{r.anchor}, r.start...), r.end...) {
		if e != 0 {
			keep(cu.DestroyEvent(e))
		}
	}
	if r.blas != nil {
		keep(r.blas.Close())
	}
	for _, p := range []cu.DevPtr{r.arena, r.xbuf, r.ybuf, r.aux, r.comm0, r.comm1, r.sem} {
		keep(cu.Free(p))
	}
	if r.mod != 0 {
		keep(cu.UnloadModule(r.mod))
	}
	if r.stream != 0 {
		keep(cu.DestroyStream(r.stream))
	}
	r.pin.Unpin()
	keep(cu.ReleasePrimaryContext(r.dev))
	r.ctx = 0
	if len(errs) > 0 {
		return fmt.Errorf("cuda rank %d close: %v", r.rank, errs)
	}
	return nil
}
