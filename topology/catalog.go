package topology

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
)

// The GPU catalog: one entry per GPU model (datasheet numbers, each with a
// source) and one per architecture (dense tensor-core FLOP per clock per
// SM, NCCL's NVLink constant, the kernel model and the efficiency priors).
// It lives in catalog.json, embedded, so that adding a GPU is a data change.
//
// Kernel floors are derived, not stored: for an op kind k on a device,
//
//	MinKernelUsByKind[k] = (RampCycles + DrainCycles + SMCycles_k) / SMClockMHz
//	                       + DRAMRoundTrips_k x DRAMRoundTripUs
//
// with the per-architecture constants (RampCycles, DrainCycles,
// DRAMRoundTripUs) and the per-kind counts (SMCycles_k, DRAMRoundTrips_k:
// the dependent memory round trips and the serial SM work a kernel of that
// kind cannot overlap, whatever its size) of catalog.json. The floor is the
// kernel's own device time (what CUPTI reports); the gap between two kernel
// nodes of a CUDA graph is LaunchGraphUs, charged by sim on top (and a
// measuring harness's timing events, TimingEventUs each).
//
// The same latency is the kind's ramp (Device.RampUs), so that sim prices
// a kernel as floor + max(compute, memory), a latency plus a bandwidth
// term, instead of max(floor, compute, memory):
//
//	RampUs[k] = MinKernelUsByKind[k]
//
// The floor is what the kernel costs with no bytes to move, and none of it
// overlaps the stream: the stream starts one dependent round trip after
// the CTAs are up, and the epilogue, the split-K or block reduction and
// the drain follow its last byte. For GEMMs of decode size (a few us of
// streaming) the two forms differ by up to the whole floor.

//go:embed catalog.json
var catalogJSON []byte

// GPUSpec is one catalog entry: a GPU model with the Device spec sim reads
// (kernel priors and efficiencies filled in from its architecture) and the
// facts the catalog keeps beside it.
type GPUSpec struct {
	// Key is the catalog name ("h100-sxm"); Aliases are other names
	// accepted wherever a GPU is named (compared ignoring case and
	// punctuation).
	Key     string   `json:"key"`
	Label   string   `json:"label"` // short marketing name, "H100 SXM"
	Aliases []string `json:"aliases,omitempty"`
	// ArchKey names the ArchSpec ("hopper", "blackwell-sm120").
	ArchKey string `json:"arch_key"`
	// Consumer marks GeForce parts, whose FP32-accumulate tensor rates are
	// half the professional parts' (ArchSpec.ConsumerFLOPsPerClkPerSM).
	Consumer   bool   `json:"consumer,omitempty"`
	FormFactor string `json:"form_factor"` // "sxm", "pcie", "superchip"
	// MaxClockMHz is the maximum SM clock (what NVML reports); the tensor
	// peaks may be quoted at a lower clock (Device.BoostClockMHz).
	MaxClockMHz  float64      `json:"max_clock_mhz"`
	TDPWatts     float64      `json:"tdp_w"`
	Interconnect Interconnect `json:"interconnect"`
	// NVML says which NVML device names are this GPU (see MatchNVMLName).
	NVML NVMLMatch `json:"nvml"`
	// PeakCheckExempt, when set, says why the entry's tensor peaks do not
	// follow SMs x clock x the architecture's FLOP/clk/SM (a rate capped
	// below the architecture's, as on the H20).
	PeakCheckExempt string            `json:"peak_check_exempt,omitempty"`
	Sources         map[string]string `json:"sources"`
	Device          Device            `json:"device"`
}

// Interconnect is a GPU's links: NVLink (generation, link count, bandwidth
// per direction over all links, and how GPUs are joined: "nvswitch" or
// "bridge") and its own PCIe link.
type Interconnect struct {
	NVLinkGen    int     `json:"nvlink_gen,omitempty"`
	NVLinks      int     `json:"nvlinks,omitempty"`
	NVLinkGBps   float64 `json:"nvlink_gbps,omitempty"`
	NVLinkFabric string  `json:"nvlink_fabric,omitempty"`
	PCIeGen      int     `json:"pcie_gen"`
	PCIeWidth    int     `json:"pcie_width"`
	Source       string  `json:"source"`
}

// NVMLMatch is a token rule on an NVML device name: every All token and no
// None token (tokens are the lower-case letter/digit runs of the name,
// "Max-Q" read as "maxq").
type NVMLMatch struct {
	All  []string `json:"all"`
	None []string `json:"none,omitempty"`
}

// ArchSpec is what the catalog knows of an architecture (a compute
// capability family).
type ArchSpec struct {
	Key                 string   `json:"key"`    // "hopper", "blackwell-sm100"
	Family              string   `json:"family"` // Device.Arch: "hopper", "blackwell"
	ComputeCapabilities []string `json:"compute_capabilities"`
	// FP32LanesPerSM turns NVML's CUDA core count into SMs.
	FP32LanesPerSM int `json:"fp32_lanes_per_sm"`
	// DenseFLOPsPerClkPerSM is the dense tensor-core rate (fp32: CUDA
	// cores, 2 FLOP per FMA) per SM per clock by PeakTFLOPS key; a missing
	// key: no native support. ConsumerFLOPsPerClkPerSM overrides it for
	// GeForce parts (FP32-accumulate MMA at half rate).
	DenseFLOPsPerClkPerSM    map[string]float64 `json:"dense_flops_per_clk_per_sm"`
	ConsumerFLOPsPerClkPerSM map[string]float64 `json:"consumer_flops_per_clk_per_sm,omitempty"`
	// NCCLNVLinkGBps is NCCL's per-NVLink bandwidth for the architecture
	// (src/graph/topo.h, named NCCLNVLinkConst).
	NCCLNVLinkGBps  float64            `json:"nccl_nvlink_gbps"`
	NCCLNVLinkConst string             `json:"nccl_nvlink_const"`
	MemEfficiency   float64            `json:"mem_efficiency"`
	Kernel          KernelModel        `json:"kernel"`
	Efficiency      map[string]float64 `json:"efficiency"`
	Sources         map[string]string  `json:"sources"`
}

// KernelModel holds an architecture's launch costs and the constants of
// its kernel floors (see the package comment of catalog.go).
type KernelModel struct {
	LaunchEagerUs    float64 `json:"launch_eager_us"`
	LaunchGraphUs    float64 `json:"launch_graph_us"`
	TimingEventUs    float64 `json:"timing_event_us"`
	TimingEventGapUs float64 `json:"timing_event_gap_us"`
	KernelGapEagerUs float64 `json:"kernel_gap_eager_us"`
	// DRAMRoundTripUs is one dependent global-memory load under the load
	// of a whole grid issuing at once.
	DRAMRoundTripUs float64 `json:"dram_round_trip_us"`
	// RampCycles: SM cycles from the kernel's start to its first global
	// load (CTA dispatch, parameter fetch, index arithmetic); DrainCycles:
	// from the last store issued to the last CTA retired.
	RampCycles  float64 `json:"ramp_cycles"`
	DrainCycles float64 `json:"drain_cycles"`
}

// KernelKind is what bounds a small kernel of one op kind from below.
type KernelKind struct {
	DRAMRoundTrips int     `json:"dram_round_trips"`
	SMCycles       float64 `json:"sm_cycles"`
	Why            string  `json:"why"`
}

type catalogFile struct {
	About       string                `json:"about"`
	KernelKinds map[string]KernelKind `json:"kernel_kinds"`
	Archs       []ArchSpec            `json:"archs"`
	GPUs        []GPUSpec             `json:"gpus"`
}

type catalog struct {
	kinds map[string]KernelKind
	archs map[string]*ArchSpec
	gpus  []GPUSpec // Device complete (kernel priors filled in)
	byTok map[string]int
}

var (
	catOnce sync.Once
	cat     *catalog
	catErr  error
)

// loadCatalog parses the embedded catalog once. A bad embedded file is a
// build defect: every accessor reports it (the tests fail on it).
func loadCatalog() (*catalog, error) {
	catOnce.Do(func() { cat, catErr = parseCatalog(catalogJSON) })
	return cat, catErr
}

func mustCatalog() *catalog {
	c, err := loadCatalog()
	if err != nil {
		panic(fmt.Sprintf("topology: embedded catalog.json: %v", err)) // a build defect, caught by TestCatalog
	}
	return c
}

func parseCatalog(data []byte) (*catalog, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f catalogFile
	if err := dec.Decode(&f); err != nil {
		return nil, jsonErr(data, err)
	}
	c := &catalog{kinds: f.KernelKinds, archs: map[string]*ArchSpec{}, byTok: map[string]int{}}
	if len(c.kinds) == 0 {
		return nil, fmt.Errorf("kernel_kinds: empty")
	}
	for k, kk := range c.kinds {
		if kk.DRAMRoundTrips < 0 || !(kk.SMCycles >= 0) || kk.Why == "" {
			return nil, fmt.Errorf("kernel_kinds.%s: want dram_round_trips >= 0, sm_cycles >= 0 and a why", k)
		}
	}
	for i := range f.Archs {
		a := &f.Archs[i]
		if a.Key == "" || c.archs[a.Key] != nil {
			return nil, fmt.Errorf("archs[%d]: empty or repeated key %q", i, a.Key)
		}
		if a.FP32LanesPerSM <= 0 || len(a.DenseFLOPsPerClkPerSM) == 0 || a.Kernel.DRAMRoundTripUs <= 0 || a.Kernel.LaunchGraphUs <= 0 ||
			a.Kernel.TimingEventUs <= 0 || a.Kernel.TimingEventGapUs <= 0 {
			return nil, fmt.Errorf("arch %s: fp32_lanes_per_sm, dense_flops_per_clk_per_sm, kernel.dram_round_trip_us, kernel.launch_graph_us, kernel.timing_event_us and kernel.timing_event_gap_us are required", a.Key)
		}
		c.archs[a.Key] = a
	}
	for i := range f.GPUs {
		g := f.GPUs[i]
		a := c.archs[g.ArchKey]
		if a == nil {
			return nil, fmt.Errorf("gpus[%d] %s: unknown arch_key %q", i, g.Key, g.ArchKey)
		}
		if g.Device.FromCatalog != nil {
			// Device.Validate looks from_catalog's entry up in the catalog
			// being built.
			return nil, fmt.Errorf("gpus[%d] %s: device.from_catalog: a catalog entry states its own figures", i, g.Key)
		}
		d, err := completeDevice(g.Device, a, c.kinds)
		if err != nil {
			return nil, fmt.Errorf("gpu %s: %w", g.Key, err)
		}
		g.Device = d
		for _, n := range append([]string{g.Key}, g.Aliases...) {
			tok := squash(n)
			if tok == "" {
				return nil, fmt.Errorf("gpu %s: empty alias", g.Key)
			}
			if j, dup := c.byTok[tok]; dup {
				return nil, fmt.Errorf("gpu %s: name %q already names %s", g.Key, n, f.GPUs[j].Key)
			}
			c.byTok[tok] = i
		}
		if len(g.NVML.All) == 0 {
			return nil, fmt.Errorf("gpu %s: nvml.all is empty", g.Key)
		}
		c.gpus = append(c.gpus, g)
	}
	return c, nil
}

// completeDevice fills a catalog device's architecture-wide fields: Arch,
// memory efficiency, launch costs, kernel floors and efficiency priors
// (fields the entry sets itself are kept), and validates it.
func completeDevice(d Device, a *ArchSpec, kinds map[string]KernelKind) (Device, error) {
	d = cloneDevice(d)
	if d.Sources == nil {
		d.Sources = map[string]string{}
	}
	d.Arch = a.Family
	src := func(field, fallback string) string {
		if s := a.Sources[field]; s != "" {
			return s
		}
		return fallback
	}
	// fill takes the arch's value of a field the device does not state.
	fill := func(field string, dst *float64, v float64) {
		if *dst == 0 {
			*dst = v
			d.Sources[field] = src(field, "arch "+a.Key)
		}
	}
	k := a.Kernel
	fill("mem_efficiency", &d.MemEfficiency, a.MemEfficiency)
	fill("launch_eager_us", &d.LaunchEagerUs, k.LaunchEagerUs)
	fill("launch_graph_us", &d.LaunchGraphUs, k.LaunchGraphUs)
	fill("timing_event_us", &d.TimingEventUs, k.TimingEventUs)
	fill("timing_event_gap_us", &d.TimingEventGapUs, k.TimingEventGapUs)
	fill("kernel_gap_eager_us", &d.KernelGapEagerUs, k.KernelGapEagerUs)
	if d.MinKernelUs == 0 && d.MinKernelUsByKind == nil {
		if !(d.SMClockMHz > 0) {
			return d, fmt.Errorf("sm_clock_mhz must be > 0 to derive the kernel floors")
		}
		d.MinKernelUsByKind, d.MinKernelUs = kernelFloors(k, kinds, d.SMClockMHz)
		d.Sources["min_kernel_us_by_kind"] = floorSource(k, kinds, d.SMClockMHz, a)
		d.Sources["min_kernel_us"] = "derived: the smallest per-kind floor (elementwise), for kinds without their own"
		if d.RampUs == nil {
			d.RampUs = maps.Clone(d.MinKernelUsByKind)
			d.Sources["ramp_us"] = rampSource
		}
	}
	if d.Efficiency == nil {
		d.Efficiency = maps.Clone(a.Efficiency)
		d.Sources["efficiency"] = src("efficiency", "arch "+a.Key)
	}
	if err := d.Validate(); err != nil {
		return d, err
	}
	return d, nil
}

// rampSource is the source of the derived ramps (see the package comment
// above): why the floor is serial with the stream, and the evidence.
const rampSource = "derived, not fitted: ramp_us.<kind> = min_kernel_us_by_kind.<kind>, so a kernel costs floor + max(compute, memory): " +
	"the floor is its time with nothing to stream (CTA ramp, dependent DRAM round trips, serial SM work, drain) and none of it overlaps the stream, " +
	"which starts a round trip after launch and is followed by the epilogue and the split-K or block reduction " +
	"(latency + bytes / bandwidth, the form aiconfigurator prices its table-less memory-bound ops in: bytes / (mem_bw x 0.8) + mem_empirical_constant_latency, perfdb systems/*.yaml). " +
	"Against aiconfigurator's h200_sxm vLLM 0.24 bf16 GEMM table (M 1-64, weights that 6 copies do not keep in L2) the form errs by -0.8 % on average (median |error| 6.3 %) where max(floor, roofline) errs by -11.2 % (9.8 %) (sim TestPriorGEMMDecodeH200)"

// kernelFloors derives the per-kind kernel floors (us, rounded to 0.01) at
// SM clock clockMHz; min is the smallest of them.
func kernelFloors(k KernelModel, kinds map[string]KernelKind, clockMHz float64) (byKind map[string]float64, min float64) {
	byKind = map[string]float64{}
	min = math.Inf(1)
	for name, kk := range kinds {
		us := (k.RampCycles+k.DrainCycles+kk.SMCycles)/clockMHz + float64(kk.DRAMRoundTrips)*k.DRAMRoundTripUs
		us = math.Round(us*100) / 100
		byKind[name] = us
		min = math.Min(min, us)
	}
	return byKind, min
}

func floorSource(k KernelModel, kinds map[string]KernelKind, clockMHz float64, a *ArchSpec) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(kinds)) {
		kk := kinds[name]
		parts = append(parts, fmt.Sprintf("%s (%.0f + %.0f + %.0f cycles) / %.0f MHz + %d x %.2f us", name, k.RampCycles, k.DrainCycles, kk.SMCycles, clockMHz, kk.DRAMRoundTrips, k.DRAMRoundTripUs))
	}
	return fmt.Sprintf("derived, not fitted: floor = (ramp + drain + the kind's serial SM cycles) / SM clock + the kind's dependent DRAM round trips x the round trip (arch %s: %s; %s; %s; kinds in catalog.json kernel_kinds): %s",
		a.Key, a.Sources["kernel.ramp_cycles"], a.Sources["kernel.drain_cycles"], a.Sources["kernel.dram_round_trip_us"], strings.Join(parts, "; "))
}

// cloneDevice deep-copies a device's maps.
func cloneDevice(d Device) Device {
	d.PeakTFLOPS = maps.Clone(d.PeakTFLOPS)
	d.MinKernelUsByKind = maps.Clone(d.MinKernelUsByKind)
	d.RampUs = maps.Clone(d.RampUs)
	d.Efficiency = maps.Clone(d.Efficiency)
	d.Sources = maps.Clone(d.Sources)
	if d.FromCatalog != nil {
		c := *d.FromCatalog
		c.Fields = slices.Clone(c.Fields)
		d.FromCatalog = &c
	}
	return d
}

func (g GPUSpec) clone() GPUSpec {
	g.Aliases = slices.Clone(g.Aliases)
	g.NVML.All = slices.Clone(g.NVML.All)
	g.NVML.None = slices.Clone(g.NVML.None)
	g.Sources = maps.Clone(g.Sources)
	g.Device = cloneDevice(g.Device)
	return g
}

// squash lower-cases s and keeps only letters and digits, so that
// "RTX PRO 6000 Server", "rtx-pro-6000-server" and "rtxpro6000server"
// compare equal; a leading "nvidia" is dropped.
func squash(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	return strings.TrimPrefix(b.String(), "nvidia")
}

// GPUs returns the catalog entries (copies), in catalog order.
func GPUs() []GPUSpec {
	c := mustCatalog()
	out := make([]GPUSpec, len(c.gpus))
	for i := range c.gpus {
		out[i] = c.gpus[i].clone()
	}
	return out
}

// GPUNames returns the catalog keys, sorted.
func GPUNames() []string {
	c := mustCatalog()
	var out []string
	for _, g := range c.gpus {
		out = append(out, g.Key)
	}
	slices.Sort(out)
	return out
}

// LookupGPU finds a catalog entry by key or alias, ignoring case and
// punctuation ("H100 SXM", "h100-sxm", "h100sxm"). The error lists the
// valid keys.
func LookupGPU(name string) (GPUSpec, error) {
	c := mustCatalog()
	if i, ok := c.byTok[squash(name)]; ok {
		return c.gpus[i].clone(), nil
	}
	return GPUSpec{}, fmt.Errorf("unknown GPU %q (want one of %s)", name, strings.Join(GPUNames(), ", "))
}

// Arch returns the catalog's architecture entry by key.
func Arch(key string) (ArchSpec, bool) {
	a, ok := mustCatalog().archs[key]
	if !ok {
		return ArchSpec{}, false
	}
	return *a, true
}

// ArchForCC returns the architecture of a compute capability ("9.0").
func ArchForCC(cc string) (ArchSpec, bool) {
	c := mustCatalog()
	for _, k := range slices.Sorted(maps.Keys(c.archs)) {
		if slices.Contains(c.archs[k].ComputeCapabilities, strings.TrimSpace(cc)) {
			return *c.archs[k], true
		}
	}
	return ArchSpec{}, false
}

// KernelKinds returns the per-kind floor recipe of the catalog.
func KernelKinds() map[string]KernelKind { return maps.Clone(mustCatalog().kinds) }

// FLOPsPerClkPerSM is the architecture's dense rate for a PeakTFLOPS key,
// the consumer rate when consumer is set and the arch has one.
func (a ArchSpec) FLOPsPerClkPerSM(dtype string, consumer bool) (float64, bool) {
	if consumer {
		if v, ok := a.ConsumerFLOPsPerClkPerSM[dtype]; ok {
			return v, true
		}
	}
	v, ok := a.DenseFLOPsPerClkPerSM[dtype]
	return v, ok
}

// nameTokens splits an NVML name into lower-case letter/digit runs, with
// "max-q" read as one token "maxq" and a leading "nvidia" dropped.
func nameTokens(name string) []string {
	s := strings.ToLower(name)
	s = strings.ReplaceAll(s, "max-q", "maxq")
	s = strings.ReplaceAll(s, "max q", "maxq")
	toks := strings.FieldsFunc(s, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') })
	if len(toks) > 0 && toks[0] == "nvidia" {
		toks = toks[1:]
	}
	return toks
}

// MatchNVMLName finds the catalog entry an NVML device name stands for
// ("NVIDIA H100 80GB HBM3", "NVIDIA H100-SXM5-80GB", "NVIDIA RTX PRO 6000
// Blackwell Max-Q Workstation Edition"): the entry whose NVML rule holds
// with the most required tokens; memory-size and memory-type tokens are not
// part of any rule. ok is false when no rule holds or two rules tie.
func MatchNVMLName(name string) (GPUSpec, bool) {
	c := mustCatalog()
	have := map[string]bool{}
	for _, t := range nameTokens(name) {
		have[t] = true
	}
	best, bestN, tie := -1, 0, false
	for i, g := range c.gpus {
		ok := true
		for _, t := range g.NVML.All {
			ok = ok && have[t]
		}
		for _, t := range g.NVML.None {
			ok = ok && !have[t]
		}
		if !ok {
			continue
		}
		switch n := len(g.NVML.All); {
		case n > bestN:
			best, bestN, tie = i, n, false
		case n == bestN:
			tie = true
		}
	}
	if best < 0 || tie {
		return GPUSpec{}, false
	}
	return c.gpus[best].clone(), true
}

// DeriveDevice builds the spec of a GPU the catalog does not know from
// what NVML reads: SMs from the CUDA core count and the architecture's
// FP32 lanes per SM, dense peaks as SMs x max SM clock x the architecture's
// FLOP/clk/SM (the consumer rates for a GeForce name), memory bandwidth
// from the memory clock and bus width, kernel priors and efficiencies of
// the architecture. ok is false when the compute capability is not in the
// catalog (the caller then has only NVML's numbers).
func DeriveDevice(g ProbeGPU) (Device, bool) {
	a, ok := ArchForCC(g.ComputeCapability)
	if !ok || g.CUDACores <= 0 || g.MaxSMClockMHz <= 0 {
		return Device{}, false
	}
	consumer := slices.Contains(nameTokens(g.Name), "geforce")
	sms := g.CUDACores / a.FP32LanesPerSM
	if sms < 1 {
		return Device{}, false
	}
	clock := float64(g.MaxSMClockMHz)
	d := Device{
		Name:              g.Name,
		ComputeCapability: g.ComputeCapability,
		SMs:               sms,
		BoostClockMHz:     clock,
		SMClockMHz:        clock,
		MemBytes:          g.MemBytes,
		MemBWGBps:         float64(g.MaxMemClockMHz) * 2 * float64(g.MemBusWidthBits) / 8 / 1000,
		PeakTFLOPS:        map[string]float64{},
		Sources:           map[string]string{},
	}
	why := fmt.Sprintf("derived: %q is not in the GPU catalog; compute capability %s is arch %s", g.Name, g.ComputeCapability, a.Key)
	d.Sources["sms"] = fmt.Sprintf("%s: NVML %d CUDA cores / %d FP32 lanes per SM", why, g.CUDACores, a.FP32LanesPerSM)
	d.Sources["boost_clock_mhz"] = "NVML max SM clock"
	d.Sources["sm_clock_mhz"] = "assumption: the NVML max SM clock is sustained; calibrate"
	d.Sources["mem_bw_gbps"] = "derived: NVML max memory clock x 2 x bus width / 8"
	d.Sources["l2_bytes"] = "unknown: NVML does not report the L2 size (0)"
	d.Sources["compute_capability"] = "NVML"
	for _, k := range slices.Sorted(maps.Keys(a.DenseFLOPsPerClkPerSM)) {
		rate, _ := a.FLOPsPerClkPerSM(k, consumer)
		d.PeakTFLOPS[k] = float64(sms) * rate * clock / 1e6
		class := "datacenter/professional"
		if consumer {
			class = "GeForce"
		}
		d.Sources["peak_tflops."+k] = fmt.Sprintf("%s: %d SMs x %.0f dense FLOP/clk/SM (%s rate of %s) x %.0f MHz", why, sms, rate, class, a.Key, clock)
	}
	if d.MemBWGBps <= 0 {
		d.MemBWGBps = 1000
		d.Sources["mem_bw_gbps"] = "assumption: NVML gave no memory clock or bus width; 1000 GB/s placeholder"
	}
	if d.MemBytes <= 0 {
		d.MemBytes = 1
		d.Sources["mem_bytes"] = "unknown: NVML gave no memory size"
	} else {
		d.Sources["mem_bytes"] = "NVML memory total"
	}
	out, err := completeDevice(d, &a, mustCatalog().kinds)
	if err != nil {
		return Device{}, false
	}
	return out, true
}

// RunsOn reports whether the box's GPUs are the GPU a device name (NVML's
// or CUDA's: "NVIDIA H100 80GB HBM3") stands for, by the catalog entry
// each name matches; known is false when the catalog cannot tell what
// name is, and then nothing is claimed either way.
func (t *Topology) RunsOn(name string) (same, known bool) {
	run, ok := MatchNVMLName(name)
	if name == "" || !ok || t == nil {
		return false, false
	}
	d := t.DeviceOf(0)
	if d == nil {
		return false, false
	}
	box, ok := MatchNVMLName(d.Name)
	return ok && box.Key == run.Key, true
}
