package perfdb

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// Which rows price an op: a table can hold several kernels' rows for one
// key (a GEMM dtype run by DeepGEMM, FlashInfer and CUTLASS; an MoE
// layer by the Triton and the CUTLASS fused MoE; an MLA module by
// FLASH_ATTN_MLA and FLASHMLA), and the engine profile says which kernel
// the scenario's engine runs on this GPU. Its rows price the op; where
// the table has none of them, the rows of the kernel the table holds
// stand in and the op's source says so.

// archOf is the engine family of dev (unknown for a nil device).
func archOf(dev *topology.Device) engine.Arch {
	if dev == nil {
		return engine.ArchUnknown
	}
	a, _ := engine.ArchOf(dev.ComputeCapability)
	return a
}

// gemmKernel is the kernel_source whose rows price a dense GEMM of
// weights wd (gemm_dtype dt): the profile's linear kernel's when the
// table has its rows (vLLM's FlashInferCutlassNvFp4LinearKernel for
// NVFP4 on SM120), else the dtype's kernel with the most rows.
func (s *Source) gemmKernel(t *GEMMTable, dt string, wd model.Dtype, a engine.Arch) (string, bool) {
	ks := t.Kernels(dt)
	if len(ks) == 0 {
		return "", false
	}
	if f, err := engine.ParseWeightFormat(string(wd)); err == nil {
		if lk := s.prof.LinearKernel(a, f); lk != nil && lk.Table != "" {
			for _, k := range ks {
				if k == lk.Table {
					return k, true
				}
			}
		}
	}
	return ks[0], true
}

// moeKernel is the kernel_source whose rows price the routed experts of
// key k (its Kernel ignored): the one the profile's MoE kernel for wd on
// family a at the key's EP size names (its Table, a word of the kernel_source:
// vllm_..._marlin_marlinexperts), else the one with the most rows; asked
// is then the engine's kernel those rows stand in for ("" when its own
// rows price it, or the profile names none for wd).
func (s *Source) moeKernel(t *MoETable, k MoEKey, wd model.Dtype, a engine.Arch) (kernel, asked string, ok bool) {
	ks := t.KernelsFor(k)
	if len(ks) == 0 {
		return "", "", false
	}
	if f, err := engine.ParseWeightFormat(string(wd)); err == nil {
		if mk, err := s.prof.MoEKernel(a, f, k.EP > 1, s.moeOverride); err == nil {
			for _, kern := range ks {
				if mk.Table != "" && strings.Contains("_"+kern+"_", "_"+mk.Table+"_") {
					return kern, "", true
				}
			}
			// A kernel with no table word (the executor's cublas,
			// SGLang's cutlass) has no rows: any row stands in for it.
			asked = mk.Name
		}
	}
	best, n := ks[0], -1
	for _, kern := range ks {
		kk := k
		kk.Kernel = kern
		if c := t.grids[kk].size(); c > n {
			best, n = kern, c
		}
	}
	return best, asked, true
}

// mlaKernel picks among the module table's keys for one shape (cands,
// differing only in Kernel) the rows of the attention backend the engine
// runs for KV dtype kvd on family a; asked is "" for its own rows, else
// the backend another backend's rows stand in for.
func (s *Source) mlaKernel(cands []MLAKey, kvd model.Dtype, qkNope int, a engine.Arch) (k MLAKey, asked string, ok bool) {
	if len(cands) == 0 {
		return MLAKey{}, "", false
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].Kernel < cands[j].Kernel })
	kv := engine.KV16
	if kvd == model.FP8 || kvd == model.FP8Block128 {
		kv = engine.KVFP8
	}
	// Dense: a block with the DSA indexer's ops is not the measured
	// module (mlaBlock's forms), so sparse attention keeps the priors.
	u := engine.MLAUse{Arch: a, KV: kv, QKNope: qkNope, ModelType: s.modelType}
	b, err := s.prof.Backend(u, s.attnOverride)
	if err != nil {
		b, err = s.prof.Backend(u, "")
	}
	if err == nil && b.Table != "" {
		for _, c := range cands {
			if c.Kernel == b.Table {
				return c, "", true
			}
		}
	}
	if err == nil && b.NoStandIn {
		return MLAKey{}, "", false
	}
	name := "?"
	if err == nil {
		name = b.Name
	}
	return cands[0], name, true
}

// standIn is what an op's source says of rows of another kernel that
// stand in for asked, the engine's ("" for none).
func (s *Source) standIn(asked string) string {
	if asked == "" {
		return ""
	}
	return " standing in for " + s.prof.Name() + "'s " + asked
}

// noteStandIn records, as a caveat of the prediction (Notes), that rows
// of kernel (what: which table's, and at which KV dtype or weights)
// priced ops the engine runs with asked, which the tables do not hold.
func (s *Source) noteStandIn(what, kernel, asked string) {
	s.note(fmt.Sprintf("%s: %s's rows (%s) stand in for %s's %s, which the tables do not hold: those ops are priced as %s runs them",
		s.name, kernel, what, s.prof.Name(), asked, kernel))
}

// note records a known bias the source met (each once): Notes.
func (s *Source) note(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.seen["note: "+msg] {
		s.seen["note: "+msg] = true
		s.notes = append(s.notes, msg)
	}
}

// Notes lists, in the order met, the known biases of the tables that
// kept an op at its prior or corrected a measurement while pricing: rows
// floored by the collector's overhead, modules measured at other head
// counts. sim reports them with the prediction's caveats.
func (s *Source) Notes() []string {
	s.mu.Lock()
	out := append([]string(nil), s.notes...)
	s.mu.Unlock()
	// Tables another version's rows stood in for, by a reuse.yaml: the
	// lines of this source's engine and version (family/engine/version/
	// table: ...) and of its NCCL tables.
	for _, r := range s.sys.Reuses() {
		_, rest, _ := strings.Cut(r, "/")
		if strings.HasPrefix(rest, s.engine+"/"+s.version+"/") || (s.nccl != "" && strings.HasPrefix(r, FamilyComm+"/nccl/"+s.nccl+"/")) {
			out = append(out, s.name+": "+r)
		}
	}
	return out
}

// hasVersion reports whether any family of the system has tables of
// engine at version.
func (s *System) hasVersion(eng, version string) bool {
	for _, f := range []string{FamilyGEMM, FamilyMoE, FamilyMLA, FamilyMLABMM, FamilyAttention, FamilyComm} {
		for _, v := range s.Versions(f, eng) {
			if v == version {
				return true
			}
		}
	}
	return false
}

// Known bias of the MLA module tables, corrected: aiconfigurator's
// module collectors ran vLLM's modeling code eagerly without its fused
// custom ops, so RMSNorm and the rotary embedding ran as their native
// PyTorch decompositions, "a batch-independent ~50-65us per layer that a
// serving engine never pays" (aiconfigurator commit c56db49fe, 2026-07-29,
// "run module collectors with engine-fused ops (#1396) (#1423)"), which
// measured on B200 (MLA generation module, 64 heads, kv 8192, fp8, vLLM
// 0.22.0 and 0.24.0): batch 1 109.5 -> 78.6 us, batch 16 143.7 -> 95.2,
// batch 64 198.6 -> 147.9. A table re-collected with the fix says so in
// its collection_meta.yaml (b200_sxm's: "Re-collected 2026-07-27 on
// B200 with the fused-op collector fix", norm_dispatch
// vllm_c_eager_surrogate under mla_generation_module_perf; its h64 b1
// kv8192 fp8 row reads 78.1 us, the fixed figure); one without a
// norm_dispatch there was collected before it (the sample's
// rtx_pro_6000_server, h200_sxm and l40s MLA tables, last written
// 2026-07-24). eagerNormUs is that inflation for a module of batch
// sequences and heads local heads on dev:
//
//	c = eagerBaseUs x r + excess(batch x heads) x r
//
// eagerBaseUs, the one-token inflation, is a fixed count of small
// kernels (the native norm and rotary chains' launches), so it scales
// with the device's small-kernel cost r = (its elementwise floor + graph
// node gap) / B200's; the excess over one token grows with the elements
// the native ops touch (tokens x heads for the rotary of the query),
// interpolated in log2(batch x heads) between B200's points (64 heads:
// 1 token 0, 16 tokens 17.6 us, 64 tokens 19.8 us) and held beyond.
const eagerBaseUs = 109.5 - 78.6

var eagerExcess = [][2]float64{{64, 0}, {16 * 64, (143.7 - 95.2) - eagerBaseUs}, {64 * 64, (198.6 - 147.9) - eagerBaseUs}}

func (s *Source) eagerNormUs(dev *topology.Device, batch, heads float64) float64 {
	if dev == nil || !s.mlaLegacy() {
		return 0
	}
	return EagerNormUs(dev, batch, heads)
}

// EagerNormUs is the eager norm and rotary inflation of an MLA generation
// module row collected before aiconfigurator fused them (see eagerBaseUs)
// for batch sequences and heads local heads on dev, microseconds; what a
// Source subtracts from such rows.
func EagerNormUs(dev *topology.Device, batch, heads float64) float64 {
	r := smallKernelUs(dev) / b200SmallKernelUs()
	if !(r > 0) || math.IsInf(r, 0) {
		return 0
	}
	x := math.Max(1, batch*heads)
	ex := 0.0
	switch {
	case x <= eagerExcess[0][0]:
	case x >= eagerExcess[len(eagerExcess)-1][0]:
		ex = eagerExcess[len(eagerExcess)-1][1]
	default:
		for j := 1; j < len(eagerExcess); j++ {
			lo, hi := eagerExcess[j-1], eagerExcess[j]
			if x <= hi[0] {
				f := (math.Log2(x) - math.Log2(lo[0])) / (math.Log2(hi[0]) - math.Log2(lo[0]))
				ex = lo[1] + f*(hi[1]-lo[1])
				break
			}
		}
	}
	return (eagerBaseUs + ex) * r
}

// smallKernelUs is a graph-launched elementwise kernel's cost on dev:
// its floor and the graph node gap.
func smallKernelUs(d *topology.Device) float64 {
	f := d.MinKernelUs
	if v, ok := d.MinKernelUsByKind[string(model.KindElementwise)]; ok {
		f = v
	}
	return f + d.LaunchGraphUs
}

// b200SmallKernelUs is smallKernelUs of the catalog's B200, the GPU the
// eager-norm inflation was measured on.
func b200SmallKernelUs() float64 {
	g, err := topology.LookupGPU("b200")
	if err != nil {
		return math.NaN()
	}
	return smallKernelUs(&g.Device)
}

// mlaLegacy reports whether the source's MLA generation module table
// ran the eager native norms (read once; MLANormsEager).
func (s *Source) mlaLegacy() bool {
	s.legacyOnce.Do(func() { s.legacy = s.sys.MLANormsEager(s.engine, s.version) })
	return s.legacy
}

// MLANormsEager reports whether engine's MLA generation module table at
// version was collected before aiconfigurator's fused-op fix (see
// eagerBaseUs): its collection_meta.yaml exists and names no
// norm_dispatch for mla_generation_module_perf.
func (s *System) MLANormsEager(engine, version string) bool {
	data, err := os.ReadFile(filepath.Join(s.dir, FamilyMLA, engine, version, "collection_meta.yaml"))
	if err != nil {
		return false
	}
	var m struct {
		Tables map[string]struct {
			NormDispatch string `yaml:"norm_dispatch"`
		} `yaml:"tables"`
	}
	if yaml.Unmarshal(data, &m) != nil {
		return false
	}
	return m.Tables["mla_generation_module_perf"].NormDispatch == ""
}

// Known bias, corrected: aiconfigurator's collectors replay one layer's
// kernels on the same weights, so rows whose weights fit in the GPU's L2
// are L2 measurements (collector/vllm/collect_gemm.py times 6 copies of
// a bf16 or fp8 GEMM, 1 of an nvfp4 or fp8_block one; the MoE and MLA
// module collectors replay one module with no copy and no flush), while a
// decode step reads every layer's own weights from DRAM once (a step's
// weights are tens of GB against an L2 of 50-128 MB). On the L40S (96 MB
// of L2) the bf16 GEMM row of a 7.3 MB weight (n 512, k 7168, m 1)
// measures 7.1 us, above the 8.5 us those bytes take at the datasheet's
// 864 GB/s. dramFloor raises a measurement to the time the weights and
// KV cache it covers take at the datasheet bandwidth, plus one graph
// node gap per covered op (the measurement includes them): a bound no
// DRAM-fed kernel beats, so rows measured from DRAM are untouched.
// raised says the row was below it (an L2-warm row).
func dramFloor(m sim.Measured, ops []model.Op, dev *topology.Device) (_ sim.Measured, raised bool) {
	if dev == nil || !(dev.MemBWGBps > 0) {
		return m, false
	}
	bytes, n := 0.0, 0.0
	for j := m.First; j <= m.Last && j < len(ops); j++ {
		if ops[j].IsCollective() {
			continue
		}
		bytes += ops[j].WeightBytes + ops[j].KVBytes
		n++
	}
	floor := bytes/(dev.MemBWGBps*1e3) + n*dev.LaunchGraphUs
	if m.Us < floor {
		m.Where += fmt.Sprintf(", raised from %.1f to %.1f us: below its %.1f MB at the DRAM bandwidth, an L2-warm row", m.Us, floor, bytes/1e6)
		m.Us = floor
		raised = true
	}
	return m, raised
}
