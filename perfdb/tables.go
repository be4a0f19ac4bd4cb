package perfdb

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/tpscope/tpscope/model"
)

// Result is one lookup's answer: the latency, how it was reached, and
// the measured row when it is an exact hit.
type Result struct {
	Us  float64    // device time, us (the tables state ms)
	How Resolution // Exact, Interpolated or Held
	// Row is the exact hit's row, 0-based in file order; -1 otherwise.
	Row int
	lk  lookup
}

// Describe names the lookup's path per axis, e.g. "tokens=1" (exact),
// "step=4097 in [4096,8192]" (blended), "m=40000 held at 32768".
func (r *Result) Describe() string {
	var b strings.Builder
	r.lk.describe(&b)
	return b.String()
}

// lookup prices the point q of grid g; ok false where g is nil (no
// such table key) or the point is not measured.
func (g *grid) lookup(q ...float64) (Result, bool) {
	if g == nil {
		return Result{}, false
	}
	us, row, lk, ok := g.at(q)
	if !ok || math.IsNaN(us) {
		return Result{}, false
	}
	return resultOf(us, row, lk), true
}

func resultOf(us float64, row int32, lk lookup) Result {
	return Result{Us: us, How: lk.how, Row: int(row), lk: lk}
}

// header is what every table carries besides its rows.
type header struct {
	// Path is the file the table was read from.
	Path string
	// Device is the GPU the rows were measured on (the device column),
	// Framework and Version the engine (framework, version columns), as
	// the file states them.
	Device, Framework, Version string
}

// commonCols reads the columns every table has and checks they hold one
// device and one engine version.
type commonCols struct {
	framework, version, device, kernel []string
	latency                            []float64
}

func (c *commonCols) cols() []column {
	return []column{strCol("framework", &c.framework), strCol("version", &c.version),
		strCol("device", &c.device), strCol("kernel_source", &c.kernel), floatCol("latency", &c.latency)}
}

// check validates the common columns of n rows and returns the header.
func (c *commonCols) check(path string, n int) (header, error) {
	h := header{Path: path}
	if n == 0 {
		return h, &FileError{Path: path, Row: -1, Err: fmt.Errorf("no rows")}
	}
	h.Device, h.Framework, h.Version = c.device[0], c.framework[0], c.version[0]
	for i := 0; i < n; i++ {
		if c.device[i] != h.Device {
			return h, &FileError{Path: path, Field: "column device", Row: i,
				Err: fmt.Errorf("%q after %q: want one GPU per table", c.device[i], h.Device)}
		}
		if v := c.latency[i]; !(v > 0) || math.IsInf(v, 0) {
			return h, &FileError{Path: path, Field: "column latency", Row: i, Err: fmt.Errorf("%v: want a finite time > 0 (ms)", v)}
		}
	}
	return h, nil
}

// read reads the common columns and cols of the table at path, checks
// the common ones and every key column's minimum, and returns the row
// count and the header.
func (c *commonCols) read(path string, cols ...column) (int, header, error) {
	n, err := readColumns(path, path, append(c.cols(), cols...))
	if err != nil {
		return 0, header{}, err
	}
	h, err := c.check(path, n)
	if err != nil {
		return 0, h, err
	}
	for _, col := range cols {
		if col.key && *col.ints != nil {
			if err := positive(path, col.name, *col.ints, col.min); err != nil {
				return 0, h, err
			}
		}
	}
	return n, h, nil
}

// positive checks an integer key column: every value >= min.
func positive(path, name string, v []int64, min int64) error {
	for i, x := range v {
		if x < min {
			return &FileError{Path: path, Field: "column " + name, Row: i, Err: fmt.Errorf("%d: want >= %d", x, min)}
		}
	}
	return nil
}

// msToUs: the tables state latency in ms.
const msToUs = 1e3

// peakTFLOPS is the tensor peak a dtype name of the tables runs at on
// the system, falling back to BF16 when the chip lacks the unit (the
// engine then dequantizes: weight-only kernels).
func (s *Spec) peakTFLOPS(dtype string) float64 {
	switch dtype {
	case "fp8", "fp8_block":
		if s.FP8TFLOPS > 0 {
			return s.FP8TFLOPS
		}
	case "nvfp4":
		if s.FP4TFLOPS > 0 {
			return s.FP4TFLOPS
		}
	case "int8":
		if s.INT8TFLOPS > 0 {
			return s.INT8TFLOPS
		}
	}
	return s.BF16TFLOPS
}

// bytesPerValue is the storage cost of one weight in a dtype name of the
// tables, scales included (NVFP4: FP8 scale per 16; the collector's INT4
// W4A16: BF16 scale per 128, collect_moe.py; MXFP4: one byte per 32).
func bytesPerValue(dtype string) float64 {
	switch dtype {
	case "bfloat16", "half", "float16":
		return 2
	case "fp8", "fp8_block", "int8":
		return 1
	case "nvfp4":
		return 0.5 + 1.0/16
	case "int4_wo":
		return 0.5 + 2.0/128
	case "w4a16_mxfp4":
		return 0.5 + 1.0/32
	}
	return 2
}

// actBytes is the bytes per activation value a kernel of the dtype
// reads: quantized activations for W8A8 / W4A4, 16 bits otherwise.
func actBytes(dtype string) float64 {
	switch dtype {
	case "fp8", "fp8_block", "nvfp4", "int8":
		return bytesPerValue(dtype)
	}
	return 2
}

// solUs is a roofline time in us: max(FLOPs / peak, bytes / bandwidth).
func (s *Spec) solUs(flops, tflops, bytes float64) float64 {
	return math.Max(flops/(tflops*1e6), bytes/(s.MemBWGBps*1e3))
}

// ---------------------------------------------------------------- GEMM

// gemmSiteReach is how far (a ratio of n or of k) a GEMM shape may
// borrow a measured shape's efficiency when it lies outside the measured
// sites: 2 octaves, aiconfigurator's miss gate for site transfer
// (docs/design/perf_interp_design.md, ScatteredSites: "2.0-octave miss
// gate"). Farther shapes are not priced from the table.
const gemmSiteReach = 4

// GEMMTable is gemm/<engine>/<version>/gemm_perf.parquet: C[m,n] =
// A[m,k] x W[k,n] per gemm_dtype. Axes (n, k, m): n and k are blended in
// utilization space (a neighbouring shape's efficiency transfers, its
// latency does not) and held at most gemmSiteReach away; m in latency,
// held without bound beyond the measured m.
type GEMMTable struct {
	header
	Dtype   []string
	M, N, K []int64
	Us      []float64
	Kernel  []string
	// grids per (gemm_dtype, kernel_source): a table may hold several
	// kernels' rows for one dtype (h200_sxm fp8_block: DeepGEMM,
	// FlashInfer and CUTLASS), which are different kernels, not samples
	// of one; kernels lists each dtype's, most rows first.
	grids   map[gemmKey]*grid
	kernels map[string][]string
	floors  map[gemmKey]float64
}

type gemmKey struct{ dtype, kernel string }

func loadGEMM(path string, spec *Spec) (*GEMMTable, error) {
	t := &GEMMTable{}
	var cc commonCols
	n, h, err := cc.read(path, strCol("gemm_dtype", &t.Dtype), keyCol("m", &t.M, 1), keyCol("n", &t.N, 1), keyCol("k", &t.K, 1))
	if err != nil {
		return nil, err
	}
	t.header, t.Kernel = h, cc.kernel
	t.Us = scaleAll(cc.latency, msToUs)
	pts := map[gemmKey][]gpoint{}
	xs := make([]float64, 3*n)
	for i := 0; i < n; i++ {
		x := xs[3*i : 3*i+3 : 3*i+3]
		x[0], x[1], x[2] = float64(t.N[i]), float64(t.K[i]), float64(t.M[i])
		k := gemmKey{t.Dtype[i], t.Kernel[i]}
		pts[k] = append(pts[k], gpoint{x: x, us: t.Us[i], row: int32(i)})
	}
	t.grids = map[gemmKey]*grid{}
	t.kernels = map[string][]string{}
	t.floors = map[gemmKey]float64{}
	for k, p := range pts {
		dt := k.dtype
		wb, ab, peak := bytesPerValue(dt), actBytes(dt), spec.peakTFLOPS(dt)
		sol := func(x gridPoint) float64 {
			nn, kk, mm := x[0], x[1], x[2]
			return spec.solUs(2*mm*nn*kk, peak, mm*kk*ab+kk*nn*wb+mm*nn*2)
		}
		g := newGrid([]string{"n", "k", "m"}, []blend{blendUtil, blendUtil, blendRaw}, sol, p)
		g.maxHold = []float64{gemmSiteReach, gemmSiteReach, 0}
		t.grids[k] = g
		t.kernels[dt] = append(t.kernels[dt], k.kernel)
		if f, ok := gemmFloor(p, sol); ok {
			t.floors[k] = f
		}
	}
	for dt, ks := range t.kernels {
		sort.Slice(ks, func(i, j int) bool {
			a, b := len(pts[gemmKey{dt, ks[i]}]), len(pts[gemmKey{dt, ks[j]}])
			if a != b {
				return a > b
			}
			return ks[i] < ks[j]
		})
	}
	return t, nil
}

// Known bias: a GEMM grid whose fastest decode-size row (m <= 64) takes
// at least gemmFloorMinUs, ten times that row's speed-of-light time, is
// flat in the work it does: every fp8_block table of the sample (DeepGEMM,
// CUTLASS, FlashInfer and Triton block-scaled kernels on h200_sxm,
// b200_sxm, rtx_pro_6000_server and l40s; h200_sxm's DeepGEMM rows start
// at m = 32) stays at 55-290 us from m = 1 to 1024 and across shapes
// whose weights stream in a few us, where the
// same systems' bf16, fp8 and nvfp4 tables reach 1.6-7 us; the floor is
// the collector's (host-side quantization and dispatch around the
// block-scaled kernel), not the kernel's, and such rows do not price a
// decode step (gemmFloor, Source.gemm).
const (
	gemmFloorMinUs   = 20.0
	gemmFloorFactor  = 10.0
	gemmFloorDecodeM = 64
)

// gemmFloor returns the grid's floor (its fastest row of m <= 64) when
// the grid is floored as above.
func gemmFloor(pts []gpoint, sol func(gridPoint) float64) (float64, bool) {
	best, bestSOL := math.Inf(1), 0.0
	for _, p := range pts {
		if p.x[2] > gemmFloorDecodeM {
			continue
		}
		if p.us < best {
			var q gridPoint
			copy(q[:], p.x)
			best, bestSOL = p.us, sol(q)
		}
	}
	if math.IsInf(best, 1) || best < gemmFloorMinUs || !(best >= gemmFloorFactor*bestSOL) {
		return 0, false
	}
	return best, true
}

// Dtypes lists the table's gemm_dtype values, sorted.
func (t *GEMMTable) Dtypes() []string { return sortedKeys(t.kernels) }

// Kernels lists the kernel_source values of dtype's rows, most rows
// first.
func (t *GEMMTable) Kernels(dtype string) []string { return t.kernels[dtype] }

// Floor reports the floor of a floored (dtype, kernel) grid (see
// gemmFloor): ok true when its rows do not price decode GEMMs.
func (t *GEMMTable) Floor(dtype, kernel string) (us float64, ok bool) {
	us, ok = t.floors[gemmKey{dtype, kernel}]
	return us, ok
}

// Lookup prices a GEMM of dtype (a gemm_dtype value: bfloat16, fp8,
// fp8_block, nvfp4) and shape m x n x k from the dtype's kernel with the
// most rows. ok is false when the table has no such dtype.
func (t *GEMMTable) Lookup(dtype string, m, n, k float64) (Result, bool) {
	ks := t.kernels[dtype]
	if len(ks) == 0 {
		return Result{}, false
	}
	return t.LookupKernel(dtype, ks[0], m, n, k)
}

// LookupKernel is Lookup from the rows of one kernel_source.
func (t *GEMMTable) LookupKernel(dtype, kernel string, m, n, k float64) (Result, bool) {
	return t.grids[gemmKey{dtype, kernel}].lookup(n, k, m)
}

// ----------------------------------------------------------------- MoE

// MoETable is moe/<engine>/<version>/moe_perf.parquet: the routed
// experts of one MoE layer (top-k selection from the router logits,
// activation quantization, gate_up grouped GEMM, activation, down grouped
// GEMM, weighted sum): aiconfigurator's vLLM 0.24 collector times
// FusedMoE(hidden_states, router_logits), so vLLM's own routing (the
// top-k kernel) is in the time and the router GEMM and shared experts
// are not (collector/vllm/collect_moe.py at d5bad971c, 2026-07-13, the
// collector of the 0.24.0 data: "FusedMoE so vLLM owns routing",
// moe_module(hidden_states, router_logits)). inter_size is the model's
// expert intermediate size, sharded moe_tp_size ways.
type MoETable struct {
	header
	Dtype                                                []string
	Tokens, Hidden, Inter, TopK, Experts, TPSize, EPSize []int64
	Distribution                                         []string
	Us                                                   []float64
	Kernel                                               []string
	grids                                                map[MoEKey]*grid
	// kernels lists, per key without Kernel, the kernel_source values
	// measured for it, sorted: KernelsFor's answer, built once at load
	// (a plan sweep asks it for every configuration it prices).
	kernels map[MoEKey][]string
	// dists maps each routing the table measured to its distribution
	// column's spelling.
	dists map[model.Routing]string
}

// MoEKey selects one MoE configuration as a rank runs it: Dtype the
// moe_dtype name (bfloat16, fp8, fp8_block, nvfp4, int4_wo, ...), Hidden
// the model width, InterLocal the expert intermediate size on the rank
// (inter_size / moe_tp_size), TopK and Experts the routing, EP the
// expert-parallel degree (experts per rank = Experts / EP), Distribution
// balanced or power_law_<alpha>.
type MoEKey struct {
	Dtype                             string
	Hidden, InterLocal, TopK, Experts int64
	EP                                int64
	Distribution                      string
	// Kernel is the rows' kernel_source ("" in a lookup: the kernel with
	// the most rows for the rest of the key).
	Kernel string
}

func (k MoEKey) String() string {
	kern := ""
	if k.Kernel != "" {
		kern = k.Kernel + " "
	}
	return fmt.Sprintf("%s hidden %d inter/rank %d top-%d of %d ep %d %s%s", k.Dtype, k.Hidden, k.InterLocal, k.TopK, k.Experts, k.EP, kern, k.Distribution)
}

func loadMoE(path string, spec *Spec) (*MoETable, error) {
	t := &MoETable{}
	var cc commonCols
	n, h, err := cc.read(path, strCol("moe_dtype", &t.Dtype), keyCol("num_tokens", &t.Tokens, 1),
		keyCol("hidden_size", &t.Hidden, 1), keyCol("inter_size", &t.Inter, 1), keyCol("topk", &t.TopK, 1),
		keyCol("num_experts", &t.Experts, 1), keyCol("moe_tp_size", &t.TPSize, 1), keyCol("moe_ep_size", &t.EPSize, 1),
		strCol("distribution", &t.Distribution))
	if err != nil {
		return nil, err
	}
	t.header = h
	for i := 0; i < n; i++ {
		if t.TopK[i] > t.Experts[i] || t.Experts[i]%t.EPSize[i] != 0 || t.Inter[i]%t.TPSize[i] != 0 {
			return nil, &FileError{Path: path, Field: "columns topk, num_experts, moe_ep_size, inter_size, moe_tp_size", Row: i,
				Err: fmt.Errorf("top-%d of %d experts on ep %d, inter %d on tp %d: want topk <= num_experts, ep dividing num_experts, tp dividing inter_size",
					t.TopK[i], t.Experts[i], t.EPSize[i], t.Inter[i], t.TPSize[i])}
		}
	}
	t.Kernel = cc.kernel
	t.Us = scaleAll(cc.latency, msToUs)
	pts := map[MoEKey][]gpoint{}
	xs := make([]float64, n)
	for i := 0; i < n; i++ {
		k := MoEKey{Dtype: t.Dtype[i], Hidden: t.Hidden[i], InterLocal: t.Inter[i] / t.TPSize[i], TopK: t.TopK[i],
			Experts: t.Experts[i], EP: t.EPSize[i], Distribution: t.Distribution[i], Kernel: t.Kernel[i]}
		xs[i] = float64(t.Tokens[i])
		pts[k] = append(pts[k], gpoint{x: xs[i : i+1 : i+1], us: t.Us[i], row: int32(i)})
	}
	t.dists = map[model.Routing]string{}
	seen := map[string]bool{}
	for i, d := range t.Distribution {
		if seen[d] {
			continue
		}
		seen[d] = true
		r, err := model.ParseRouting(d)
		if err != nil || r == model.UniformRouting {
			return nil, &FileError{Path: path, Field: "column distribution", Row: i,
				Err: fmt.Errorf("%q: want balanced or power_law_ALPHA (ALPHA above 1, at most 10)", d)}
		}
		t.dists[r] = d
	}
	t.grids = map[MoEKey]*grid{}
	t.kernels = map[MoEKey][]string{}
	for k, p := range pts {
		t.grids[k] = newGrid([]string{"tokens"}, []blend{blendRaw}, moeSOL(spec, k), p)
		kk := k
		kk.Kernel = ""
		t.kernels[kk] = append(t.kernels[kk], k.Kernel)
	}
	for _, ks := range t.kernels {
		sort.Strings(ks)
	}
	return t, nil
}

// routingOf is the routing a distribution column value names (uniform
// when it names none; loadMoE refuses such rows).
func routingOf(dist string) model.Routing {
	r, _ := model.ParseRouting(dist)
	return r
}

// Routings lists the routings the table measured, sorted by name.
func (t *MoETable) Routings() []model.Routing {
	out := make([]model.Routing, 0, len(t.dists))
	for r := range t.dists {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// DistributionOf is the table's spelling of routing r in its
// distribution column (balanced, power_law_1.2), false when the table has
// no rows under r.
func (t *MoETable) DistributionOf(r model.Routing) (string, bool) {
	d, ok := t.dists[r]
	return d, ok
}

// moeSOL: FLOPs and bytes of the routed experts of the timed rank for T
// tokens under the key's routing (model.Routing.Shape of the
// distribution: rows token-expert pairs over touched experts whose 3 x
// hidden x inter weights are streamed).
func moeSOL(spec *Spec, k MoEKey) func(gridPoint) float64 {
	h, in := float64(k.Hidden), float64(k.InterLocal)
	wb, ab, peak := bytesPerValue(k.Dtype), actBytes(k.Dtype), spec.peakTFLOPS(k.Dtype)
	r := routingOf(k.Distribution)
	local := int(k.Experts / max(k.EP, 1))
	return func(x gridPoint) float64 {
		sh := r.Shape(int64(math.Round(x[0])), int(k.TopK), int(k.Experts), local, 0)
		rows, touched := sh.Rows, sh.ExpertsTouched
		flops := 2 * rows * h * 3 * in
		bytes := touched*3*h*in*wb + rows*(h*ab+3*in*2+h*2)
		return spec.solUs(flops, peak, bytes)
	}
}

// Keys lists the configurations the table measured, sorted by String.
func (t *MoETable) Keys() []MoEKey {
	out := make([]MoEKey, 0, len(t.grids))
	for k := range t.grids {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// Lookup prices the routed experts of configuration k for tokens tokens.
// ok is false when the table did not measure the configuration. A key
// without Kernel takes the kernel with the most rows for the rest of it
// (ties: the first by name).
func (t *MoETable) Lookup(k MoEKey, tokens float64) (Result, bool) {
	return t.grids[t.resolve(k)].lookup(tokens)
}

// KernelsFor lists the kernel_source values measured for k (its Kernel
// ignored), sorted by name; the table's own list, not to be modified.
func (t *MoETable) KernelsFor(k MoEKey) []string {
	k.Kernel = ""
	return t.kernels[k]
}

func (t *MoETable) resolve(k MoEKey) MoEKey {
	if k.Kernel != "" || t.grids[k] != nil {
		return k
	}
	best, n := k, -1
	for _, kern := range t.KernelsFor(k) {
		kk := k
		kk.Kernel = kern
		if c := t.grids[kk].size(); c > n {
			best, n = kk, c
		}
	}
	return best
}

// --------------------------------------------------------- MLA module

// Phase of an MLA-module or attention table.
type Phase string

const (
	Generation Phase = "generation"
	Context    Phase = "context"
)

// MLADims are the MLA shape of a model: what the module tables' model
// column stands for.
type MLADims struct {
	Hidden, QLoraRank, KVLoraRank, QKNope, QKRope, VHead int64
}

// mlaModels maps the module tables' model column (a Hugging Face id) to
// the tpscope preset with the same config, whose dims the table measured.
var mlaModels = map[string]string{
	"deepseek-ai/DeepSeek-V3": "deepseek-v3",
	"moonshotai/Kimi-K2.5":    "kimi-k2.5",
	"zai-org/GLM-5":           "glm-5",
}

// DimsOf returns the MLA dims of a module table's model, from the
// tpscope preset of the same checkpoint; ok false for a model tpscope
// has no config of.
func DimsOf(hfModel string) (MLADims, bool) {
	name, ok := mlaModels[hfModel]
	if !ok {
		return MLADims{}, false
	}
	a, err := model.Preset(name)
	if err != nil {
		return MLADims{}, false
	}
	return MLADims{Hidden: int64(a.Hidden), QLoraRank: int64(a.QLoraRank), KVLoraRank: int64(a.KVLoraRank),
		QKNope: int64(a.QKNopeHeadDim), QKRope: int64(a.QKRopeHeadDim), VHead: int64(a.VHeadDim)}, true
}

// MLAModuleTable is mla/<engine>/<version>/mla_{generation,context}_module_perf.parquet:
// one whole DeepseekV2MLAAttention forward (fused q_a/kv_a projection,
// q_a and kv_a norms, q_b projection, RoPE, KV-cache write, the attention
// kernel with the absorbed W_UK / W_UV batched GEMMs, o_proj) on one GPU
// with num_heads local heads, timed under a CUDA graph (aiconfigurator
// collector/vllm/collect_mla_module.py). Generation: batch_size
// sequences of one new token each, step = the tokens attended (the cache
// holds step-1 tokens, plus the new one). Context: isl new tokens per
// sequence, no prefix. Axes: heads, batch, step (generation) or isl
// (context), blended in latency.
type MLAModuleTable struct {
	header
	Phase                           Phase
	Model, Arch, MLADtype, KVDtype  []string
	GEMMType                        []string
	Heads, Batch, ISL, TPSize, Step []int64
	Us                              []float64
	Kernel                          []string
	grids                           map[MLAKey]*grid
}

// MLAKey selects one measured configuration: the model (Hugging Face id
// of the dims), the attention compute dtype, the KV-cache dtype and the
// projections' GEMM dtype (names as in the table: bfloat16, fp8, nvfp4,
// fp8_block).
type MLAKey struct {
	Model, MLADtype, KVDtype, GEMMType string
	// Kernel is the rows' kernel_source, the attention backend the module
	// ran (TRITON_MLA, FLASHMLA, FLASH_ATTN_MLA, FLASHINFER_MLA); "" in a
	// lookup: the backend with the most rows for the rest of the key.
	Kernel string
}

func loadMLAModule(path string, phase Phase, spec *Spec) (*MLAModuleTable, error) {
	t := &MLAModuleTable{Phase: phase}
	var cc commonCols
	n, h, err := cc.read(path, strCol("model", &t.Model), strCol("architecture", &t.Arch), strCol("mla_dtype", &t.MLADtype),
		strCol("kv_cache_dtype", &t.KVDtype), strCol("gemm_type", &t.GEMMType), keyCol("num_heads", &t.Heads, 1),
		keyCol("batch_size", &t.Batch, 1), keyCol("isl", &t.ISL, 1), keyCol("tp_size", &t.TPSize, 1), keyCol("step", &t.Step, 0))
	if err != nil {
		return nil, err
	}
	t.header, t.Kernel = h, cc.kernel
	t.Us = scaleAll(cc.latency, msToUs)
	pts := map[MLAKey][]gpoint{}
	for i := 0; i < n; i++ {
		if t.TPSize[i] != 1 {
			continue // num_heads is the per-GPU head count only at tp_size 1
		}
		k := MLAKey{Model: t.Model[i], MLADtype: t.MLADtype[i], KVDtype: t.KVDtype[i], GEMMType: t.GEMMType[i], Kernel: t.Kernel[i]}
		third := float64(t.Step[i])
		if phase == Context {
			third = float64(t.ISL[i])
		}
		pts[k] = append(pts[k], gpoint{x: []float64{float64(t.Heads[i]), float64(t.Batch[i]), third}, us: t.Us[i], row: int32(i)})
	}
	t.grids = map[MLAKey]*grid{}
	third := "step"
	if phase == Context {
		third = "isl"
	}
	for k, p := range pts {
		dims, ok := DimsOf(k.Model)
		var sol func(gridPoint) float64
		if ok {
			sol = mlaSOL(spec, dims, k, phase)
		} else {
			sol = nil
		}
		if sol == nil {
			sol = noSOL
		}
		t.grids[k] = newGrid([]string{"heads", "batch", third}, []blend{blendRaw, blendRaw, blendRaw}, sol, p)
	}
	return t, nil
}

// noSOL marks a grid whose speed of light is unknown: lookups outside
// the measured range miss rather than guess.
func noSOL(gridPoint) float64 { return math.NaN() }

// mlaSOL: the module's weights (fused q_a/kv_a, q_b, o_proj in the GEMM
// dtype; W_UK, W_UV in bf16), the latent cache it reads, and its FLOPs.
func mlaSOL(spec *Spec, d MLADims, k MLAKey, phase Phase) func(gridPoint) float64 {
	hid, ql, kvl := float64(d.Hidden), float64(d.QLoraRank), float64(d.KVLoraRank)
	nope, rope, v := float64(d.QKNope), float64(d.QKRope), float64(d.VHead)
	wb, gpeak, bpeak := bytesPerValue(k.GEMMType), spec.peakTFLOPS(k.GEMMType), spec.BF16TFLOPS
	kvb := bytesPerValue(k.KVDtype)
	return func(x gridPoint) float64 {
		h, b, s := x[0], x[1], x[2]
		t := b // tokens
		if phase == Context {
			t = b * s
		}
		projW := hid*(ql+kvl+rope) + ql*h*(nope+rope) + h*v*hid
		absW := h * nope * kvl * 2
		var attnFLOPs, kvBytes float64
		if phase == Context {
			attnFLOPs = b * h * s * s * (nope + rope + v) // causal: s^2/2 pairs x 2 FLOPs
			kvBytes = t * (kvl + rope) * kvb
		} else {
			attnFLOPs = 2 * t * h * s * (kvl + rope + kvl)
			kvBytes = b * s * (kvl + rope) * kvb
			attnFLOPs += 2 * t * absW
		}
		c := 2*t*projW/(gpeak*1e6) + attnFLOPs/(bpeak*1e6)
		m := (projW*wb + absW*2 + kvBytes + t*hid*4) / (spec.MemBWGBps * 1e3)
		return math.Max(c, m)
	}
}

// Keys lists the measured configurations, sorted.
func (t *MLAModuleTable) Keys() []MLAKey {
	out := make([]MLAKey, 0, len(t.grids))
	for k := range t.grids {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]) < fmt.Sprint(out[j]) })
	return out
}

// Lookup prices the module of configuration k for heads local heads and
// batch sequences at step (generation: tokens attended incl. the new
// one; context: prompt length). ok false: not measured.
func (t *MLAModuleTable) Lookup(k MLAKey, heads, batch, step float64) (Result, bool) {
	if k.Kernel == "" && t.grids[k] == nil {
		best, pick := -1, k
		for g, gr := range t.grids {
			kk := g
			kk.Kernel = ""
			if kk == k && (gr.size() > best || (gr.size() == best && g.Kernel < pick.Kernel)) {
				best, pick = gr.size(), g
			}
		}
		k = pick
	}
	return t.grids[k].lookup(heads, batch, step)
}

// HeadsRange is the smallest and largest local head count measured for
// k (zero when k was not measured).
func (t *MLAModuleTable) HeadsRange(k MLAKey) (lo, hi float64) {
	g := t.grids[k]
	if g == nil || len(g.root.keys) == 0 {
		return 0, 0
	}
	// The root's keys are the heads measured, ascending (newGrid sorts
	// the points), each holding at least one point.
	return g.root.keys[0], g.root.keys[len(g.root.keys)-1]
}

// ------------------------------------------------------------- MLA BMM

// MLABMMTable is mla_bmm/<engine>/<version>/mla_bmm_perf.parquet: the
// absorbed-MLA batched GEMMs of decode, mla_gen_pre (q_nope x W_UK, per
// head [T,128] x [128,512]) and mla_gen_post (latent x W_UV, per head
// [T,512] x [512,128]) with DeepSeek-V3's dims (aiconfigurator
// collector/vllm/collect_mla_bmm.py). Axes: heads, tokens.
type MLABMMTable struct {
	header
	OpName, Dtype []string
	Tokens, Heads []int64
	Us            []float64
	Kernel        []string
	grids         map[[2]string]*grid
}

// BMM shapes the table measured (DeepSeek-V3 config: qk_nope_head_dim
// 128, kv_lora_rank 512, v_head_dim 128).
const (
	bmmNope, bmmLatent, bmmV = 128, 512, 128
)

func loadMLABMM(path string, spec *Spec) (*MLABMMTable, error) {
	t := &MLABMMTable{}
	var cc commonCols
	n, h, err := cc.read(path, strCol("op_name", &t.OpName), strCol("bmm_dtype", &t.Dtype),
		keyCol("num_tokens", &t.Tokens, 1), keyCol("num_heads", &t.Heads, 1))
	if err != nil {
		return nil, err
	}
	t.header, t.Kernel = h, cc.kernel
	t.Us = scaleAll(cc.latency, msToUs)
	pts := map[[2]string][]gpoint{}
	for i := 0; i < n; i++ {
		k := [2]string{t.OpName[i], t.Dtype[i]}
		pts[k] = append(pts[k], gpoint{x: []float64{float64(t.Heads[i]), float64(t.Tokens[i])}, us: t.Us[i], row: int32(i)})
	}
	t.grids = map[[2]string]*grid{}
	for k, p := range pts {
		in, out := float64(bmmNope), float64(bmmLatent)
		if k[0] == "mla_gen_post" {
			in, out = bmmLatent, bmmV
		}
		wb, peak := bytesPerValue(k[1]), spec.peakTFLOPS(k[1])
		sol := func(x gridPoint) float64 {
			h, tok := x[0], x[1]
			return spec.solUs(2*tok*h*in*out, peak, h*in*out*wb+tok*h*(in+out)*2)
		}
		t.grids[k] = newGrid([]string{"heads", "tokens"}, []blend{blendRaw, blendRaw}, sol, p)
	}
	return t, nil
}

// Lookup prices op (mla_gen_pre or mla_gen_post) in dtype for heads
// local heads and tokens tokens.
func (t *MLABMMTable) Lookup(op, dtype string, heads, tokens float64) (Result, bool) {
	return t.grids[[2]string{op, dtype}].lookup(heads, tokens)
}

// ----------------------------------------------------------- attention

// AttentionTable is attention/<engine>/<version>/{generation,context}_attention_perf.parquet:
// the attention kernel of multi-head / grouped-query attention (not
// MLA). Key: heads, KV heads, head dim, KV-cache dtype, sliding window;
// axes: batch and step (generation: past KV length) or isl (context).
type AttentionTable struct {
	header
	Phase                               Phase
	AttnDtype, KVDtype                  []string
	Batch, ISL, Heads, KVHeads, HeadDim []int64
	Step, Window                        []int64
	Us                                  []float64
	Kernel                              []string
	grids                               map[AttentionKey]*grid
}

// AttentionKey selects one attention configuration.
type AttentionKey struct {
	Heads, KVHeads, HeadDim int64
	KVDtype                 string
	Window                  int64
}

func loadAttention(path string, phase Phase, spec *Spec) (*AttentionTable, error) {
	t := &AttentionTable{Phase: phase}
	var cc commonCols
	window := keyCol("window_size", &t.Window, 0)
	window.optional = true
	n, h, err := cc.read(path, strCol("attn_dtype", &t.AttnDtype), strCol("kv_cache_dtype", &t.KVDtype),
		keyCol("batch_size", &t.Batch, 1), keyCol("isl", &t.ISL, 1), keyCol("num_heads", &t.Heads, 1),
		keyCol("num_key_value_heads", &t.KVHeads, 1), keyCol("head_dim", &t.HeadDim, 1), keyCol("step", &t.Step, 0), window)
	if err != nil {
		return nil, err
	}
	if t.Window == nil {
		t.Window = make([]int64, n)
	}
	t.header, t.Kernel = h, cc.kernel
	t.Us = scaleAll(cc.latency, msToUs)
	pts := map[AttentionKey][]gpoint{}
	for i := 0; i < n; i++ {
		k := AttentionKey{Heads: t.Heads[i], KVHeads: t.KVHeads[i], HeadDim: t.HeadDim[i], KVDtype: t.KVDtype[i], Window: t.Window[i]}
		second := float64(t.Step[i])
		if phase == Context {
			second = float64(t.ISL[i])
		}
		pts[k] = append(pts[k], gpoint{x: []float64{float64(t.Batch[i]), second}, us: t.Us[i], row: int32(i)})
	}
	t.grids = map[AttentionKey]*grid{}
	second := "step"
	if phase == Context {
		second = "isl"
	}
	for k, p := range pts {
		k := k
		h, kvh, hd := float64(k.Heads), float64(k.KVHeads), float64(k.HeadDim)
		kvb := bytesPerValue(k.KVDtype)
		sol := func(x gridPoint) float64 {
			b, s := x[0], x[1]
			if phase == Context {
				return spec.solUs(2*b*h*s*s*hd, spec.BF16TFLOPS, b*s*(h+2*kvh)*hd*2*2)
			}
			return spec.solUs(4*b*h*(s+1)*hd, spec.BF16TFLOPS, b*(s+1)*2*kvh*hd*kvb+b*h*hd*4)
		}
		t.grids[k] = newGrid([]string{"batch", second}, []blend{blendRaw, blendRaw}, sol, p)
	}
	return t, nil
}

// Lookup prices attention of configuration k for batch sequences at
// step (generation) or isl (context).
func (t *AttentionTable) Lookup(k AttentionKey, batch, step float64) (Result, bool) {
	return t.grids[k].lookup(batch, step)
}

// ---------------------------------------------------------------- NCCL

// CollectiveOp names a collective as the tables do.
type CollectiveOp string

const (
	OpAllReduce     CollectiveOp = "all_reduce"
	OpAllGather     CollectiveOp = "all_gather"
	OpReduceScatter CollectiveOp = "reduce_scatter"
	OpAllToAll      CollectiveOp = "alltoall"
)

// NCCLTable is comm/nccl/<version>/nccl_perf.parquet: nccl-tests
// (all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf;
// aiconfigurator collector/network/collect_nccl.py) on num_gpus GPUs of
// one node, out-of-place time. message_size counts elements of
// nccl_dtype (half: 2 B, int8: 1 B) of the nccl-tests "size" (all-reduce
// the buffer, all-gather the gathered output, reduce-scatter the input).
// Axis: bytes, blended in latency.
type NCCLTable struct {
	header
	Op, Dtype          []string
	GPUs, MessageElems []int64
	Us                 []float64
	grids              map[ncclKey]*grid
}

type ncclKey struct {
	op    CollectiveOp
	dtype string
	gpus  int64
}

func loadNCCL(path string, spec *Spec) (*NCCLTable, error) {
	t := &NCCLTable{}
	var cc commonCols
	n, h, err := cc.read(path, strCol("op_name", &t.Op), strCol("nccl_dtype", &t.Dtype),
		keyCol("num_gpus", &t.GPUs, 2), keyCol("message_size", &t.MessageElems, 1))
	if err != nil {
		return nil, err
	}
	t.header = h
	t.Us = scaleAll(cc.latency, msToUs)
	pts := map[ncclKey][]gpoint{}
	for i := 0; i < n; i++ {
		switch CollectiveOp(t.Op[i]) {
		case OpAllReduce, OpAllGather, OpReduceScatter, OpAllToAll:
		default:
			return nil, &FileError{Path: path, Field: "column op_name", Row: i, Err: fmt.Errorf("%q: want all_reduce, all_gather, reduce_scatter or alltoall", t.Op[i])}
		}
		eb := 2.0
		switch t.Dtype[i] {
		case "half", "bfloat16", "float16":
		case "int8", "fp8", "uint8":
			eb = 1
		default:
			return nil, &FileError{Path: path, Field: "column nccl_dtype", Row: i, Err: fmt.Errorf("%q: want half or int8", t.Dtype[i])}
		}
		k := ncclKey{CollectiveOp(t.Op[i]), t.Dtype[i], t.GPUs[i]}
		pts[k] = append(pts[k], gpoint{x: []float64{float64(t.MessageElems[i]) * eb}, us: t.Us[i], row: int32(i)})
	}
	t.grids = map[ncclKey]*grid{}
	for k, p := range pts {
		t.grids[k] = newGrid([]string{"bytes"}, []blend{blendRaw}, commSOL(spec, k.op, k.gpus), p)
	}
	return t, nil
}

// commSOL: the node's P2P latency plus the bytes each GPU sends (the
// nccl-tests bus factor: all-reduce 2(n-1)/n, others (n-1)/n) at its
// intra-node bandwidth (system YAML).
func commSOL(spec *Spec, op CollectiveOp, gpus int64) func(gridPoint) float64 {
	n := float64(gpus)
	f := (n - 1) / n
	if op == OpAllReduce {
		f *= 2
	}
	return func(x gridPoint) float64 {
		return spec.P2PLatencyUs + f*x[0]/(spec.IntraNodeGBps*1e3)
	}
}

// GPUCounts lists the group sizes measured for op (in the half rows).
func (t *NCCLTable) GPUCounts(op CollectiveOp) []int64 {
	var out []int64
	for k := range t.grids {
		if k.op == op && k.dtype == "half" {
			out = append(out, k.gpus)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Lookup prices op on gpus GPUs moving bytes (nccl-tests size) with the
// 16-bit rows (the element type of tpscope's collectives; an all-to-all
// or all-gather moves bytes whatever their type).
func (t *NCCLTable) Lookup(op CollectiveOp, gpus int, bytes float64) (Result, bool) {
	return t.grids[ncclKey{op, "half", int64(gpus)}].lookup(bytes)
}

// ------------------------------------------------------ custom all-reduce

// CustomARTable is comm/<engine>/<version>/custom_allreduce_perf.parquet:
// the engine's own all-reduce entry point (vLLM's custom all-reduce,
// which vLLM replaces by NCCL on more than two PCIe-only GPUs) under a
// CUDA graph ("graph" backend) or eagerly. message_size counts bf16
// elements. Axis: bytes.
type CustomARTable struct {
	header
	Dtype, Backend     []string
	GPUs, MessageElems []int64
	Us                 []float64
	grids              map[customKey]*grid
}

type customKey struct {
	gpus  int64
	graph bool
}

func loadCustomAR(path string, spec *Spec) (*CustomARTable, error) {
	t := &CustomARTable{}
	var cc commonCols
	n, h, err := cc.read(path, strCol("allreduce_dtype", &t.Dtype), keyCol("num_gpus", &t.GPUs, 2),
		keyCol("message_size", &t.MessageElems, 1), column{name: "backend", kind: colString, optional: true, strs: &t.Backend})
	if err != nil {
		return nil, err
	}
	t.header = h
	t.Us = scaleAll(cc.latency, msToUs)
	pts := map[customKey][]gpoint{}
	for i := 0; i < n; i++ {
		// The backend column, or the kernel_source suffix (vLLM_custom_graph).
		mode := cc.kernel[i]
		if t.Backend != nil {
			mode = t.Backend[i]
		}
		k := customKey{t.GPUs[i], !strings.HasSuffix(mode, "eager")}
		pts[k] = append(pts[k], gpoint{x: []float64{float64(t.MessageElems[i]) * bytesPerValue(t.Dtype[i])}, us: t.Us[i], row: int32(i)})
	}
	t.grids = map[customKey]*grid{}
	for k, p := range pts {
		t.grids[k] = newGrid([]string{"bytes"}, []blend{blendRaw}, commSOL(spec, OpAllReduce, k.gpus), p)
	}
	return t, nil
}

// Lookup prices the engine's all-reduce on gpus GPUs of bytes, captured
// in a CUDA graph (graph true) or eager.
func (t *CustomARTable) Lookup(gpus int, bytes float64, graph bool) (Result, bool) {
	return t.grids[customKey{int64(gpus), graph}].lookup(bytes)
}

func scaleAll(v []float64, f float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x * f
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
