package topology

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// CatalogFill records the device fields a topology file left out that
// were taken from the GPU catalog's entry for the device (Parse): the
// prediction names them, since the user did not write those figures.
type CatalogFill struct {
	// GPU is the catalog key ("h200-sxm") the device's name matched.
	GPU string `json:"gpu"`
	// Fields are the JSON field names taken ("launch_eager_us",
	// "efficiency.default").
	Fields []string `json:"fields"`
}

// pricedField is a device field a step is priced with whose absence from
// a file reads as a number nothing stated: decoded into Go values a
// missing arch is no architecture (sim takes Hopper's NCCL caps), a
// missing mem_efficiency streams at the full bandwidth (sim reads 0 as
// 1), a missing efficiency (or its "default" key) computes at the full
// peak (EfficiencyFor's 1), a missing launch_eager_us, launch_graph_us
// or min_kernel_us prices launches and kernel floors at nothing, a
// missing boost_clock_mhz takes the peaks as quoted at the sustained
// clock and a missing l2_bytes is "L2 unknown" (a split merge never
// spills). The datasheet fields (compute_capability, sms, sm_clock_mhz,
// mem_bytes, mem_bw_gbps, peak_tflops) would be refused by Validate as 0
// anyway; they are here so a catalog GPU may leave them out too (but for
// the compute capability: own).
type pricedField struct {
	name, want string
	take       func(dst, src *Device)
	// own marks a field no catalog entry stands in for: the compute
	// capability tells which chip the device's name stands for (the
	// check that the catalog entry is this GPU) and picks the engine's
	// kernels, so every GPU states it.
	own bool
	// with are the fields whose absence means "as this one" (Device's
	// comments: the timing events and the eager gap default to
	// launch_graph_us, the per-kind floors and ramps to min_kernel_us):
	// where this field comes from the catalog and they are left out too,
	// the catalog's own values of them come with it, so that the device
	// is the catalog's kernel model and not a flat one built on its base
	// figure.
	with []string
}

// pricedFields lists the fields in file order (Device's).
var pricedFields = []pricedField{
	{name: "arch", want: "the architecture family (ampere, ada, hopper, blackwell; cpu for a CPU rank)", take: func(d, s *Device) { d.Arch = s.Arch }},
	{name: "compute_capability", want: "MAJOR.MINOR as nvidia-smi --query-gpu=compute_cap prints it (12.0 for sm_120, 9.0 for Hopper)", own: true},
	{name: "sms", want: "the streaming multiprocessor count (132 on an H100 SXM)", take: func(d, s *Device) { d.SMs = s.SMs }},
	{name: "boost_clock_mhz", want: "the SM clock in MHz the peak_tflops are quoted at (> 0)", take: func(d, s *Device) { d.BoostClockMHz = s.BoostClockMHz }},
	{name: "sm_clock_mhz", want: "the SM clock in MHz sustained under tensor load", take: func(d, s *Device) { d.SMClockMHz = s.SMClockMHz }},
	{name: "mem_bytes", want: "the GPU memory in bytes", take: func(d, s *Device) { d.MemBytes = s.MemBytes }},
	{name: "mem_bw_gbps", want: "the memory bandwidth in GB/s", take: func(d, s *Device) { d.MemBWGBps = s.MemBWGBps }},
	{name: "mem_efficiency", want: "the fraction of mem_bw_gbps a streaming kernel achieves, in (0,1] (the catalog's GPUs: 0.8)", take: func(d, s *Device) { d.MemEfficiency = s.MemEfficiency }},
	{name: "l2_bytes", want: "the L2 cache in bytes (0: unknown, as 'topo discover' writes for a GPU outside the catalog)", take: func(d, s *Device) { d.L2Bytes = s.L2Bytes }},
	{name: "peak_tflops", want: "the dense peaks in TFLOPS by dtype (fp4, fp8, bf16, fp16, fp32)", take: func(d, s *Device) { d.PeakTFLOPS = maps.Clone(s.PeakTFLOPS) }},
	{name: "launch_eager_us", want: "the host time in us to launch one kernel outside a CUDA graph (0 prices eager launches free)", take: func(d, s *Device) { d.LaunchEagerUs = s.LaunchEagerUs }},
	{name: "launch_graph_us", want: "the device gap in us between two kernel nodes of a CUDA graph (0 prices it free)", take: func(d, s *Device) { d.LaunchGraphUs = s.LaunchGraphUs },
		with: []string{"timing_event_us", "timing_event_gap_us", "kernel_gap_eager_us"}},
	{name: "min_kernel_us", want: "the shortest a kernel takes on the device in us (0: no floor)", take: func(d, s *Device) { d.MinKernelUs = s.MinKernelUs },
		with: []string{"min_kernel_us_by_kind", "ramp_us"}},
	{name: "efficiency", want: `the achieved fraction of the compute peak by kernel family, each in (0,1], with a "default"`, take: func(d, s *Device) { d.Efficiency = maps.Clone(s.Efficiency) }},
}

// efficiencyDefault is the key of Efficiency every file states: a family
// without its own key takes it, and without it EfficiencyFor's 1, the
// full peak.
const efficiencyDefault = "efficiency.default"

const efficiencyDefaultWant = `the fraction of the compute peak, in (0,1], of the kernel families without a key of their own (without it they run at the full peak)`

// withFields take the catalog's value with the field they default to.
var withFields = map[string]func(d, s *Device){
	"timing_event_us":       func(d, s *Device) { d.TimingEventUs = s.TimingEventUs },
	"timing_event_gap_us":   func(d, s *Device) { d.TimingEventGapUs = s.TimingEventGapUs },
	"kernel_gap_eager_us":   func(d, s *Device) { d.KernelGapEagerUs = s.KernelGapEagerUs },
	"min_kernel_us_by_kind": func(d, s *Device) { d.MinKernelUsByKind = maps.Clone(s.MinKernelUsByKind) },
	"ramp_us":               func(d, s *Device) { d.RampUs = maps.Clone(s.RampUs) },
}

// catalogFillable reports whether f may name a field of CatalogFill.
func catalogFillable(f string) bool {
	if f == efficiencyDefault || withFields[f] != nil {
		return true
	}
	return slices.ContainsFunc(pricedFields, func(p pricedField) bool { return p.name == f })
}

// deviceKeys makes sure that every figure a step is priced with is one a
// file states or one the catalog states for the same GPU, never a 0 the
// decoder put in a left-out field's place.
//
// A topology that states calibrated facts (StatesCalibration) must state
// every priced field: its calibration was fitted beside their values (a
// calibrated H100 box without its launch costs, floors and efficiencies
// priced a tiny-mla-moe TP-8 step at 66 us for its 315). Any other file
// (written by hand, or edited) may leave priced fields out of a device
// whose name is a catalog GPU's (CatalogGPUOf) with the same compute
// capability: the catalog's values are taken and recorded in the
// device's FromCatalog, which the prediction names. A device the catalog
// does not know must state them. A field stated as null is left out.
func deviceKeys(data []byte, t *Topology) error {
	var top struct {
		Devices []map[string]json.RawMessage `json:"devices"`
	}
	if json.Unmarshal(data, &top) != nil || len(top.Devices) != len(t.Devices) {
		return nil // the typed decode has said what is wrong
	}
	calibrated := t.StatesCalibration()
	for i, raw := range top.Devices {
		d := &t.Devices[i]
		if d.Name == "" {
			continue // Validate says so
		}
		stated := func(f string) bool {
			v, ok := raw[f]
			return ok && string(v) != "null"
		}
		var missing []string
		for _, p := range pricedFields {
			if !stated(p.name) && !(p.own && d.Arch == ArchCPU) {
				if p.own && !calibrated {
					// No catalog figure stands in: the file must state it.
					return fmt.Errorf("devices[%d] (%q): field %q missing: want %s, which tells the catalog's GPUs apart and picks the engine's kernels", i, d.Name, p.name, p.want)
				}
				missing = append(missing, p.name)
			}
		}
		if stated("efficiency") {
			if _, ok := d.Efficiency["default"]; !ok {
				missing = append(missing, efficiencyDefault)
			}
		}
		if len(missing) == 0 {
			continue
		}
		where := fmt.Sprintf("devices[%d] (%q)", i, d.Name)
		if calibrated {
			return fmt.Errorf("%s: field %q missing: a calibrated box states every figure a step is priced with, and a missing one would read as 0, a figure nothing measured (calibrate writes each; 'tpscope topo show PRESET -o FILE' shows them)", where, missing[0])
		}
		spec, why := catalogStandIn(d, stated("compute_capability"))
		if why != "" {
			return fmt.Errorf("%s: %s: want %s; %s, so the file must state each ('tpscope topo show PRESET -o FILE' writes a complete file)", where, missingWords(missing), fieldWant(missing[0]), why)
		}
		d.takeFromCatalog(spec, missing, stated)
	}
	return nil
}

// missingWords names the left-out fields: the first, and the others.
func missingWords(missing []string) string {
	s := fmt.Sprintf("field %q missing", missing[0])
	if len(missing) > 1 {
		q := make([]string, len(missing)-1)
		for i, f := range missing[1:] {
			q[i] = fmt.Sprintf("%q", f)
		}
		s += " (and " + strings.Join(q, ", ") + ")"
	}
	return s
}

func fieldWant(f string) string {
	if f == efficiencyDefault {
		return efficiencyDefaultWant
	}
	for _, p := range pricedFields {
		if p.name == f {
			return p.want
		}
	}
	return "a value"
}

// catalogStandIn returns the catalog entry whose figures stand in for
// d's left-out ones, or why there is none: a CPU rank or a name the
// catalog does not know, or a stated compute capability that is not the
// entry's (another chip under a catalog GPU's name).
func catalogStandIn(d *Device, ccStated bool) (GPUSpec, string) {
	if d.Arch == ArchCPU {
		return GPUSpec{}, "a CPU rank has no catalog entry whose figure could stand in"
	}
	spec, ok := CatalogGPUOf(d.Name)
	if !ok {
		return GPUSpec{}, fmt.Sprintf("%q is no GPU of the catalog ('tpscope topo gpus' lists them), whose figure could stand in", d.Name)
	}
	if ccStated && d.ComputeCapability != spec.Device.ComputeCapability {
		return GPUSpec{}, fmt.Sprintf("its compute_capability %q is not that of the catalog's %s (%s), whose figure would stand in", d.ComputeCapability, spec.Key, spec.Device.ComputeCapability)
	}
	return spec, ""
}

// takeFromCatalog sets d's left-out fields (missing) to spec's values,
// with the fields that default to them where the file leaves those out
// too, cites the catalog's source of each and records them in
// FromCatalog.
func (d *Device) takeFromCatalog(spec GPUSpec, missing []string, stated func(string) bool) {
	src := &spec.Device
	var took []string
	for _, p := range pricedFields {
		if !slices.Contains(missing, p.name) {
			continue
		}
		p.take(d, src)
		took = append(took, p.name)
		for _, w := range p.with {
			if !stated(w) {
				withFields[w](d, src)
				took = append(took, w)
			}
		}
	}
	if slices.Contains(missing, efficiencyDefault) {
		d.Efficiency = maps.Clone(d.Efficiency)
		d.Efficiency["default"] = src.Efficiency["default"]
		took = append(took, efficiencyDefault)
	}
	d.Sources = maps.Clone(d.Sources)
	if d.Sources == nil {
		d.Sources = map[string]string{}
	}
	for _, f := range took {
		d.Sources[f] = fmt.Sprintf("GPU catalog %s (not in the file)", spec.Key)
		for k, v := range src.Sources {
			if k == f || strings.HasPrefix(k, f+".") {
				d.Sources[k] = fmt.Sprintf("GPU catalog %s (not in the file): %s", spec.Key, v)
			}
		}
	}
	if d.FromCatalog != nil && d.FromCatalog.GPU == spec.Key {
		for _, f := range d.FromCatalog.Fields {
			if !slices.Contains(took, f) {
				took = append(took, f)
			}
		}
	}
	d.FromCatalog = &CatalogFill{GPU: spec.Key, Fields: took}
}

// CatalogGPUOf returns the catalog entry a device name stands for: the
// NVML name rule it matches ("NVIDIA H100 80GB HBM3", as topo discover
// and the catalog's own devices write it), else a catalog key or alias
// ("h100-sxm").
func CatalogGPUOf(name string) (GPUSpec, bool) {
	if g, ok := MatchNVMLName(name); ok {
		return g, true
	}
	g, err := LookupGPU(name)
	return g, err == nil
}

// Restate drops field from FromCatalog: the device now states a figure of
// its own for it (calibrate fitted it), which the prediction must not
// call the catalog's.
func (d *Device) Restate(field string) {
	c := d.FromCatalog
	if c == nil || !slices.Contains(c.Fields, field) {
		return
	}
	fields := slices.DeleteFunc(slices.Clone(c.Fields), func(f string) bool { return f == field })
	if len(fields) == 0 {
		d.FromCatalog = nil
		return
	}
	d.FromCatalog = &CatalogFill{GPU: c.GPU, Fields: fields}
}
