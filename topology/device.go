package topology

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Device is the spec of one accelerator model: what the compute roofline
// and the launch-overhead model in sim need. Every number cites
// ../shared/reference/hardware.md, a vendor datasheet, aiconfigurator's
// system files, or says it is an assumption (Sources; the GPU catalog in
// catalog.json).
//
// Units: clocks in MHz, memory in bytes, bandwidth in GB/s (1e9 B/s),
// throughput in TFLOPS (1e12 FLOP/s, dense, multiply-add = 2 FLOP), times in
// microseconds.
type Device struct {
	// Name is the marketing name, as nvidia-smi prints it, e.g.
	// "NVIDIA RTX PRO 6000 Blackwell Server Edition".
	Name string `json:"name"`
	// Arch is the architecture family: "blackwell", "hopper", ...
	Arch string `json:"arch"`
	// ComputeCapability is "major.minor", e.g. "12.0" (sm_120), "9.0".
	ComputeCapability string `json:"compute_capability"`
	SMs               int    `json:"sms"`

	// BoostClockMHz is the clock the datasheet peaks in PeakTFLOPS are
	// quoted at: the boost clock, or below the maximum SM clock where the
	// vendor quotes tensor peaks lower (H100/H200 SXM: 1,830 of 1,980
	// MHz; GPUSpec.MaxClockMHz keeps the maximum).
	BoostClockMHz float64 `json:"boost_clock_mhz"`
	// SMClockMHz is the sustained SM clock under tensor load that the
	// model runs at (an explicit catalog parameter: hardware.md says the RTX
	// PRO 6000 Server Ed. sustains 1.4-1.9 GHz, not its 2,430 MHz boost).
	// TFLOPS scales the boost peaks by SMClockMHz/BoostClockMHz.
	SMClockMHz float64 `json:"sm_clock_mhz"`

	MemBytes int64 `json:"mem_bytes"`
	// MemBWGBps is the memory bandwidth at the memory clock sustained under
	// load (for the RTX PRO 6000 Server Ed. lower than the family figure).
	MemBWGBps float64 `json:"mem_bw_gbps"`
	// MemEfficiency is the prior fraction of MemBWGBps a streaming kernel
	// achieves (0..1].
	MemEfficiency float64 `json:"mem_efficiency"`
	L2Bytes       int64   `json:"l2_bytes"`

	// PeakTFLOPS is the dense tensor-core (fp32: CUDA-core) peak at
	// BoostClockMHz keyed by compute dtype: "fp4", "fp8", "bf16", "fp16",
	// "fp32". A missing key means the chip cannot run that dtype natively
	// (no "fp4" on Hopper).
	PeakTFLOPS map[string]float64 `json:"peak_tflops"`

	// LaunchEagerUs is the host-side cost to launch one kernel outside a
	// CUDA graph (framework + driver); it bounds the op rate of an eager
	// stream. LaunchGraphUs is the per-kernel device-side gap inside a
	// CUDA graph replay. MinKernelUs is the shortest a kernel takes on the device
	// (launch ramp, tail), whatever its work.
	LaunchEagerUs float64 `json:"launch_eager_us"`
	LaunchGraphUs float64 `json:"launch_graph_us"`
	MinKernelUs   float64 `json:"min_kernel_us"`
	// TimingEventUs is the device time one timing CUDA event adds to its
	// op when a measuring harness brackets every op of a graph with them
	// (sim.Options.TimingEventsPerOp): the event's node and the next
	// kernel's wait on its timestamp. TimingEventGapUs is what lies
	// between two bracketed ops' spans: the transition from one op's
	// closing event to the next op's opening one (and an event's cost in an
	// eager stream). 0 (files written before they were measured apart):
	// LaunchGraphUs each (TimingEventCosts).
	TimingEventUs    float64 `json:"timing_event_us,omitempty"`
	TimingEventGapUs float64 `json:"timing_event_gap_us,omitempty"`
	// KernelGapEagerUs is the device-side gap between two kernels of one
	// stream when each was launched on its own (eager): the GPU front end
	// fetches and sets up every launch after the previous kernel drains,
	// whereas a graph's kernel nodes are prepared at instantiation.
	// Physically at least LaunchGraphUs; sim uses max(KernelGapEagerUs,
	// LaunchGraphUs), so 0 (older files) means "as in a graph".
	KernelGapEagerUs float64 `json:"kernel_gap_eager_us,omitempty"`
	// MinKernelUsByKind overrides MinKernelUs per op kind (keys as in
	// Efficiency: "gemm", "norm", "elementwise", ...): a one-CTA-per-row
	// RMSNorm and a fused SiLU do not share a floor. Written by
	// calibrate --trace from the kind's ops priced at the floor.
	MinKernelUsByKind map[string]float64 `json:"min_kernel_us_by_kind,omitempty"`
	// RampUs adds a fixed time to a kernel family's roofline term (keys as
	// in Efficiency: "gemm/bf16", "gemm"): a streaming kernel pays DRAM
	// latency, CTA ramp-up and its tail before and after bytes / bandwidth,
	// which a single efficiency cannot follow across sizes. Catalog
	// devices, and so the presets (aliases of catalog boxes), take each
	// kind's kernel floor as its ramp (catalog.go); calibrate --trace fits
	// it when a family's ops span sizes.
	RampUs map[string]float64 `json:"ramp_us,omitempty"`

	// Efficiency holds named priors: the achieved fraction of the compute
	// peak for a kernel family, keyed "<opkind>" or "<opkind>/<dtype>" with
	// the strings of model.OpKind ("gemm", "moe_gemm", "attention", "norm",
	// "elementwise", "router", "embedding") and of model.Dtype ("bf16",
	// "fp8", "fp8-block128", "nvfp4", "int4-g32"). The key "default" is
	// the fallback. Look up with EfficiencyFor. topology does not import
	// model; the keys are plain strings on purpose.
	Efficiency map[string]float64 `json:"efficiency,omitempty"`

	// CalibratedEngine is the engine (engine@version) whose kernels the
	// calibrated figures of this device were fitted on ('calibrate
	// --trace' of that engine's run; empty when nothing was fitted or an
	// older file does not say): another engine's kernels are other
	// kernels, so a prediction for one says so.
	CalibratedEngine string `json:"calibrated_engine,omitempty"`

	// FromCatalog names the fields the topology file left out that were
	// taken from the GPU catalog's entry for this device (Parse), so a
	// prediction can say which of its figures nobody wrote for this box.
	FromCatalog *CatalogFill `json:"from_catalog,omitempty"`

	// Sources says where the numbers come from, keyed by JSON field name
	// ("sms", "mem_bw_gbps", "peak_tflops.fp8", ...). Values cite
	// hardware.md or a datasheet, or start with "assumption:".
	Sources map[string]string `json:"sources,omitempty"`
}

// ComputeKey maps a dtype string (model.Dtype or a compute dtype) to the
// PeakTFLOPS key the tensor cores run it as: "nvfp4" runs as "fp4",
// "fp8-block128" as "fp8", "int4-g32" (W4A16) as "bf16" after
// dequantization. Unknown strings are returned unchanged.
func ComputeKey(dtype string) string {
	switch dtype {
	case "nvfp4", "fp4", "mxfp4":
		return "fp4"
	case "fp8", "fp8-block128", "e4m3", "e5m2":
		return "fp8"
	case "int4-g32", "bf16":
		return "bf16"
	}
	return dtype
}

// CCVersion parses ComputeCapability ("12.0", "9.0"); a part it cannot
// read is 0.
func (d *Device) CCVersion() (major, minor int) {
	part := &major
	for _, r := range d.ComputeCapability {
		switch {
		case r >= '0' && r <= '9':
			*part = 10**part + int(r-'0')
		case r == '.' && part == &major:
			part = &minor
		default:
			return major, minor
		}
	}
	return major, minor
}

// parseCC reads a compute capability "MAJOR.MINOR" of decimal digits;
// ok is false for anything else ("", "12", "sm_120", "12.0a").
func parseCC(cc string) (major, minor int, ok bool) {
	maj, min, found := strings.Cut(cc, ".")
	if !found || !allDigits(maj) || !allDigits(min) {
		return 0, 0, false
	}
	major, _ = strconv.Atoi(maj)
	minor, _ = strconv.Atoi(min)
	return major, minor, true
}

func allDigits(s string) bool {
	if s == "" || len(s) > 3 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// TFLOPS is the dense peak for dtype at the sustained clock SMClockMHz:
// PeakTFLOPS[ComputeKey(dtype)] * SMClockMHz / BoostClockMHz. ok is false
// when the device has no native support for the dtype.
func (d *Device) TFLOPS(dtype string) (tflops float64, ok bool) {
	p, ok := d.PeakTFLOPS[ComputeKey(dtype)]
	if !ok {
		return 0, false
	}
	if d.BoostClockMHz > 0 && d.SMClockMHz > 0 {
		p *= d.SMClockMHz / d.BoostClockMHz
	}
	return p, true
}

// EfficiencyFor returns the efficiency prior for a kernel family and
// dtype: Efficiency["<opkind>/<dtype>"], else Efficiency["<opkind>"], else
// Efficiency["default"], else 1.
func (d *Device) EfficiencyFor(opKind, dtype string) float64 {
	if dtype != "" {
		if e, ok := d.Efficiency[opKind+"/"+dtype]; ok {
			return e
		}
	}
	if e, ok := d.Efficiency[opKind]; ok {
		return e
	}
	if e, ok := d.Efficiency["default"]; ok {
		return e
	}
	return 1
}

// Validate checks the spec; errors name the device and the field.
func (d *Device) Validate() error {
	where := fmt.Sprintf("device %q", d.Name)
	if d.Name == "" {
		return fmt.Errorf("device: empty name")
	}
	// A GPU's compute capability picks its architecture family, and so
	// the engine's kernels and the catalog's priors: one missing or
	// misspelt is not a GPU tpscope can price (a CPU rank has none).
	if d.Arch != ArchCPU {
		if major, _, ok := parseCC(d.ComputeCapability); !ok || major < 1 {
			return fmt.Errorf("%s: compute_capability %q: want MAJOR.MINOR as nvidia-smi --query-gpu=compute_cap prints it (12.0 for sm_120, 9.0 for Hopper)", where, d.ComputeCapability)
		}
	}
	pos := []struct {
		field string
		v     float64
	}{
		{"sms", float64(d.SMs)},
		// The clock the peaks are quoted at: 0 would scale them by
		// nothing and take them as quoted at the sustained clock.
		{"boost_clock_mhz", d.BoostClockMHz},
		{"sm_clock_mhz", d.SMClockMHz},
		{"mem_bytes", float64(d.MemBytes)},
		{"mem_bw_gbps", d.MemBWGBps},
	}
	for _, p := range pos {
		if !(p.v > 0) || math.IsInf(p.v, 0) {
			return fmt.Errorf("%s: %s must be > 0, got %v", where, p.field, p.v)
		}
	}
	if err := d.checkUnits(where); err != nil {
		return err
	}
	nonneg := []struct {
		field string
		v     float64
	}{
		{"l2_bytes", float64(d.L2Bytes)},
		{"launch_eager_us", d.LaunchEagerUs},
		{"launch_graph_us", d.LaunchGraphUs},
		{"timing_event_us", d.TimingEventUs},
		{"timing_event_gap_us", d.TimingEventGapUs},
		{"kernel_gap_eager_us", d.KernelGapEagerUs},
		{"min_kernel_us", d.MinKernelUs},
	}
	for _, p := range nonneg {
		if !(p.v >= 0) || math.IsInf(p.v, 0) {
			return fmt.Errorf("%s: %s must be >= 0, got %v", where, p.field, p.v)
		}
	}
	// A streaming kernel achieving none of the bandwidth is no figure
	// (sim read 0 as 1, the full bandwidth).
	if !(d.MemEfficiency > 0 && d.MemEfficiency <= 1) {
		return fmt.Errorf("%s: mem_efficiency must be in (0,1], got %v", where, d.MemEfficiency)
	}
	if len(d.PeakTFLOPS) == 0 {
		return fmt.Errorf("%s: peak_tflops is empty (want at least one of fp4, fp8, bf16, fp16, fp32)", where)
	}
	for _, k := range slices.Sorted(maps.Keys(d.PeakTFLOPS)) {
		switch k {
		case "fp4", "fp8", "bf16", "fp16", "fp32", "tf32", "int8":
		default:
			return fmt.Errorf("%s: peak_tflops: unknown dtype %q (want fp4, fp8, bf16, fp16, fp32, tf32, int8)", where, k)
		}
		if v := d.PeakTFLOPS[k]; !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: peak_tflops.%s must be > 0, got %v", where, k, v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(d.MinKernelUsByKind)) {
		if v := d.MinKernelUsByKind[k]; k == "" || !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: min_kernel_us_by_kind.%s must be a named op kind with a value > 0, got %v", where, k, v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(d.RampUs)) {
		if v := d.RampUs[k]; k == "" || !(v >= 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: ramp_us.%s must be a named kernel family with a value >= 0, got %v", where, k, v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(d.Efficiency)) {
		if v := d.Efficiency[k]; !(v > 0 && v <= 1) {
			return fmt.Errorf("%s: efficiency.%s must be in (0,1], got %v", where, k, v)
		}
	}
	if c := d.FromCatalog; c != nil {
		if g, err := LookupGPU(c.GPU); err != nil || g.Key != c.GPU || len(c.Fields) == 0 {
			return fmt.Errorf("%s: from_catalog: gpu %q with fields %v: want a catalog key and the fields taken from it", where, c.GPU, c.Fields)
		}
		for _, f := range c.Fields {
			if !catalogFillable(f) {
				return fmt.Errorf("%s: from_catalog.fields: %q is no device field the catalog stands in for", where, f)
			}
		}
	}
	return nil
}

// gpuUnitRanges bound a GPU's unit-bearing fields far outside every GPU
// the engines run (the catalog's: 24-288 GB of memory at 300-8,000 GB/s,
// 40-128 MB of L2, clocks of 1,100-2,620 MHz) and inside what the same
// number in the neighbouring unit would read: memory in GB where bytes
// are wanted (96), bandwidth in TB/s or B/s (1.597, 1.597e12), clocks in
// GHz or Hz (1.65, 1.65e9), L2 in MB (128). A CPU rank ('calibrate
// --backend cpu') states its own units (1 MHz, a share of the host's
// memory bandwidth) and is not held to them.
var gpuUnitRanges = []struct {
	field, want, example string
	lo, hi               float64
	get                  func(d *Device) float64
}{
	{"mem_bytes", "bytes, 1 GiB to 1 PiB", "80 GB is 80000000000", 1 << 30, 1 << 50, func(d *Device) float64 { return float64(d.MemBytes) }},
	{"mem_bw_gbps", "GB/s, 10 to 100000", "3.35 TB/s is 3350", 10, 1e5, func(d *Device) float64 { return d.MemBWGBps }},
	{"sm_clock_mhz", "MHz, 100 to 10000", "1.98 GHz is 1980", 100, 1e4, func(d *Device) float64 { return d.SMClockMHz }},
	{"boost_clock_mhz", "MHz, 100 to 10000", "1.98 GHz is 1980", 100, 1e4, func(d *Device) float64 { return d.BoostClockMHz }},
	{"l2_bytes", "bytes, 1 MiB to 1 TiB", "50 MB is 52428800", 1 << 20, 1 << 40, func(d *Device) float64 { return float64(d.L2Bytes) }},
}

// checkUnits refuses a GPU field whose value is that of another unit
// (gpuUnitRanges); 0 in l2_bytes stays "unknown" (what topo discover
// writes for a GPU outside the catalog; Validate refuses the others' 0).
func (d *Device) checkUnits(where string) error {
	if d.Arch == ArchCPU {
		return nil
	}
	for _, r := range gpuUnitRanges {
		v := r.get(d)
		if v == 0 || (v >= r.lo && v <= r.hi) {
			continue
		}
		return fmt.Errorf("%s: %s %v: want %s for a GPU (%s): a value in another unit?", where, r.field, v, r.want, r.example)
	}
	return nil
}

// TimingEventCosts returns the device time a timing event adds to its op
// in a graph (TimingEventUs) and the part between two ops' spans
// (TimingEventGapUs), each LaunchGraphUs where the device does not state
// it.
func (d *Device) TimingEventCosts() (eventUs, gapUs float64) {
	eventUs, gapUs = d.TimingEventUs, d.TimingEventGapUs
	if !(eventUs > 0) {
		eventUs = d.LaunchGraphUs
	}
	if !(gapUs > 0) {
		gapUs = d.LaunchGraphUs
	}
	return eventUs, gapUs
}
