package topology

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
)

// Sources cited by the presets.
const (
	srcHW   = "hardware.md (../shared/reference/hardware.md)"
	srcNCCL = "nccl-model.md (NCCL src/graph/tuning.cc, topo.h)"
)

// Launch overheads shared by the GPU presets (the serving software, vLLM
// on PyTorch and CUDA 12/13, is the same on both; calibrate per box).
const (
	// launchEagerUs: host time per op of a vLLM eager decode step. Python
	// module call (assumption ~3 us) + PyTorch binding and ATen dispatch
	// (~2-4 us: "From PyTorch op to kernel launch",
	// jiahuanglin.xyz/all_lessons/gpu_kernel_serving/18_pytorch_to_kernel,
	// which puts the whole CPU path at 5-25 us per op) + cudaLaunchKernel
	// (~3-4 us: 1-3 us on CUDA 12+ drivers in the same lesson; 4-6 us per
	// launch measured on an RTX 5070 Ti, CUDA 13, susun-blog.com
	// "pegainfer (3)"). Sum, rounded: 10 us (assumption).
	launchEagerUs = 10.0
	// launchGraphUs: device-side gap per kernel node of a graph replay
	// (assumption: 1 us; NVIDIA "Getting Started with CUDA Graphs", 2019,
	// measured about 0.5 us per node on V100 — kept at 1 us, the order of
	// the inter-kernel gaps seen in decode-graph profiles).
	launchGraphUs = 1.0
	// kernelGapEagerUs: device-side gap per kernel of a stream whose
	// launches were queued one by one (host ahead of the device). The same
	// NVIDIA post measured about 0.9 us per stream-launched kernel against
	// 0.5 us per graph node (3.8 vs 3.4 us per 2.9 us kernel): about twice
	// the graph's gap; 2 x launchGraphUs (assumption).
	kernelGapEagerUs = 2 * launchGraphUs
)

const (
	srcLaunchEager    = "assumption: 10 us host time per op in vLLM eager mode = Python module call ~3 us + PyTorch dispatch ~3 us + cudaLaunchKernel ~3-4 us (jiahuanglin.xyz 'From PyTorch op to kernel launch': 5-25 us CPU path per op; susun-blog pegainfer (3): 4-6 us per launch, RTX 5070 Ti, CUDA 13); calibrate from traces"
	srcLaunchGraph    = "assumption: 1 us device-side gap per kernel node in a CUDA graph replay (NVIDIA blog 'Getting Started with CUDA Graphs': ~0.5 us per node on V100)"
	srcKernelGapEager = "assumption: 2 us device-side gap per stream-launched kernel, twice the graph node's (NVIDIA blog 'Getting Started with CUDA Graphs': ~0.9 us per stream kernel vs ~0.5 us per graph node, 3.8 vs 3.4 us per 2.9 us kernel)"
)

// RTXPro6000Server is the RTX PRO 6000 Blackwell Server Edition.
func RTXPro6000Server() Device {
	const boost = 2430.0
	return Device{
		Name:              "NVIDIA RTX PRO 6000 Blackwell Server Edition",
		Arch:              "blackwell",
		ComputeCapability: "12.0",
		SMs:               188,
		BoostClockMHz:     boost,
		SMClockMHz:        1650,
		MemBytes:          97887 << 20,
		MemBWGBps:         1597,
		MemEfficiency:     0.80,
		L2Bytes:           128 << 20,
		PeakTFLOPS: map[string]float64{
			"fp4":  1870,
			"fp8":  940,
			"bf16": 468,
			"fp16": 468,
			"fp32": 188 * 128 * 2 * boost / 1e6, // 116.9
		},
		LaunchEagerUs:    launchEagerUs,
		LaunchGraphUs:    launchGraphUs,
		KernelGapEagerUs: kernelGapEagerUs,
		MinKernelUs:      2,
		Efficiency: map[string]float64{
			"default":        0.5,
			"gemm":           0.70,
			"gemm/bf16":      0.70,
			"gemm/fp8":       0.60,
			"gemm/nvfp4":     0.35,
			"moe_gemm":       0.45,
			"moe_gemm/fp8":   0.40,
			"moe_gemm/nvfp4": 0.25,
			"attention":      0.35,
			"norm":           0.5,
			"elementwise":    0.5,
			"router":         0.5,
			"embedding":      0.5,
		},
		Sources: map[string]string{
			"compute_capability":  srcHW + ": GB202, 12.0 (sm_120)",
			"sms":                 srcHW + ": 188 SMs",
			"boost_clock_mhz":     srcHW + ": 2,430 MHz max SM clock (server node report)",
			"sm_clock_mhz":        "assumption: 1,650 MHz, middle of hardware.md's 1.4-1.9 GHz sustained under tensor load; calibrate",
			"mem_bytes":           srcHW + ": nvidia-smi 97,887 MiB",
			"mem_bw_gbps":         srcHW + ": Server Ed. memory clock under load about 12,481 MHz, derived about 1,597 GB/s (family figure 1,792)",
			"mem_efficiency":      "assumption: 0.80 of the bandwidth reached by streaming kernels; calibrate",
			"l2_bytes":            srcHW + ": 128 MB",
			"peak_tflops.fp4":     srcHW + ": dense FP4 1.87 PF at 2,430 MHz",
			"peak_tflops.fp8":     srcHW + ": dense FP8 0.94 PF at 2,430 MHz",
			"peak_tflops.bf16":    srcHW + ": dense BF16 468 TF at 2,430 MHz",
			"peak_tflops.fp16":    "assumption: FP16 with FP32 accumulate at the BF16 rate (professional parts are not halved)",
			"peak_tflops.fp32":    "derived: 188 SMs x 128 FP32 lanes x 2 FLOP x 2,430 MHz = 116.9 TF",
			"launch_eager_us":     srcLaunchEager,
			"launch_graph_us":     srcLaunchGraph,
			"kernel_gap_eager_us": srcKernelGapEager,
			"min_kernel_us":       "assumption: 2 us shortest kernel (ramp + tail)",
			"efficiency":          "assumption: priors per kernel family; " + srcHW + " notes SM120 has no WGMMA/TMEM, no FlashMLA, small-batch FP4 MoE kernels far from roofline; calibrate",
		},
	}
}

// H200SXM is the H200 SXM (HGX baseboard).
func H200SXM() Device {
	return Device{
		Name:              "NVIDIA H200",
		Arch:              "hopper",
		ComputeCapability: "9.0",
		SMs:               132,
		BoostClockMHz:     1980,
		SMClockMHz:        1830,
		MemBytes:          141e9,
		MemBWGBps:         4800,
		MemEfficiency:     0.80,
		L2Bytes:           60 << 20,
		PeakTFLOPS: map[string]float64{
			"fp8":  1979,
			"bf16": 989,
			"fp16": 989,
			"fp32": 67,
		},
		LaunchEagerUs:    launchEagerUs,
		LaunchGraphUs:    launchGraphUs,
		KernelGapEagerUs: kernelGapEagerUs,
		MinKernelUs:      2,
		Efficiency: map[string]float64{
			"default":      0.5,
			"gemm":         0.75,
			"gemm/fp8":     0.70,
			"moe_gemm":     0.55,
			"moe_gemm/fp8": 0.50,
			"attention":    0.55,
			"norm":         0.5,
			"elementwise":  0.5,
			"router":       0.5,
			"embedding":    0.5,
		},
		Sources: map[string]string{
			"compute_capability":  srcHW + ": GH100 Hopper, 9.0",
			"sms":                 srcHW + ": 132 SMs",
			"boost_clock_mhz":     srcHW + ": 1,980 MHz",
			"sm_clock_mhz":        "assumption: 1,830 MHz sustained under tensor load at 700 W; calibrate",
			"mem_bytes":           srcHW + ": 141 GB HBM3e",
			"mem_bw_gbps":         srcHW + ": 4.8 TB/s",
			"mem_efficiency":      "assumption: 0.80; calibrate",
			"l2_bytes":            srcHW + ": 60 MB",
			"peak_tflops.fp8":     srcHW + ": dense FP8 1,979 TF; no FP4",
			"peak_tflops.bf16":    srcHW + ": dense BF16 989 TF",
			"peak_tflops.fp16":    "NVIDIA H200 datasheet: FP16 tensor 1,979 TF sparse = 989 dense",
			"peak_tflops.fp32":    "NVIDIA H200 datasheet: FP32 67 TF",
			"launch_eager_us":     srcLaunchEager,
			"launch_graph_us":     srcLaunchGraph,
			"kernel_gap_eager_us": srcKernelGapEager,
			"min_kernel_us":       "assumption: 2 us",
			"efficiency":          "assumption: priors per kernel family (FlashMLA/DeepGEMM exist on Hopper); calibrate",
		},
	}
}

// Link parameters shared by the presets (per direction).
const (
	// hardware.md: measured GPU P2P write, same socket, direct attach,
	// Gen5 x16: 53-56.6 GB/s; latency 0.36-0.45 us (two PCIe hops).
	gen5X16GBps = 54.0
	pcieHopUs   = 0.2
	// derived: half of gen5X16GBps (Gen4 runs at half the transfer rate,
	// same encoding). Assumption that Gen4 reaches the same fraction of raw.
	gen4X16GBps = gen5X16GBps / 2
	// hardware.md: GPU behind a PCIe switch about 54 GB/s, latency
	// 0.44-1.36 us; 0.25 us per hop (assumption within that range).
	switchHopUs = 0.25
	// hardware.md: measured GPU P2P across sockets (AMD xGMI) 39-51 GB/s;
	// the middle, 45, as the socket link's per-direction capacity
	// (assumption: one flow; the aggregate of all xGMI links may be higher).
	xgmiGBps = 45.0
	// assumption: one SMP hop adds 0.3 us.
	smpHopUs = 0.3
	// assumption: the on-die fabric between a root complex and its CPU
	// never binds; 0.05 us.
	internalGBps = 1000.0
	internalUs   = 0.05
	// hardware.md: NVLink 4, 18 links, 450 GB/s per direction.
	nvlink4GBps = 450.0
	// assumption: NCCL's SM90 per-NVLink bandwidth 20.6 GB/s (NCCL
	// src/graph/topo.h SM90_NVLINK_BW) x 18 links.
	nvlink4NCCLGBps = 18 * 20.6
	nvlinkHopUs     = 0.35 // assumption
	// hardware.md: GPU-GPU copy with P2P disabled (bounce through host
	// memory): latency about 14 us.
	shmLatUs = 14.0
	// assumption: a host-memory bounce moves data over PCIe twice with a
	// copy in between: about half the direct P2P bandwidth (of the GPUs'
	// PCIe generation).
	shmGBps = gen5X16GBps / 2
	// assumption: launches the host may queue ahead of the device.
	launchQueueDepth = 1024
)

// CPU choices for the socket interconnect (hardware.md: NCCL's model of
// the inter-socket link).
var cpus = map[string]struct {
	host     Host
	linkType LinkType
	linkGBps float64
}{
	"amd": {Host{CPU: "AMD EPYC 9005 (Turin), assumed", Vendor: "amd", InterSocketNCCLGBps: 16}, LinkXGMI, xgmiGBps},
	"intel-spr": {Host{CPU: "Intel Xeon Sapphire Rapids, assumed", Vendor: "intel", InterSocketNCCLGBps: 22}, LinkUPI,
		60}, // assumption: UPI 2.0 aggregate for one GPU flow, not measured
	"intel-emr": {Host{CPU: "Intel Xeon Emerald Rapids, assumed", Vendor: "intel", InterSocketNCCLGBps: 40}, LinkUPI, 60},
}

// PresetOptions varies a preset or a described box.
type PresetOptions struct {
	// PCIeGen of the GPU links: 3-6 (0: 5).
	PCIeGen int
	// CPU is "amd" (default), "intel-spr" or "intel-emr".
	CPU string
}

// A preset is a name for a box description with the preset's own device
// spec (RTXPro6000Server, H200SXM): those devices carry the priors that
// the figures pinned by tests elsewhere were computed with, so a preset
// stays what it was when the catalog's entry for the same GPU moves on
// (the catalog has per-architecture kernel floors; see PresetDescription).
type presetDef struct {
	desc   string
	device func() Device
}

var presets = map[string]presetDef{
	"rtxpro6000-2s":     {"pcie-2s:8xrtx-pro-6000-server", RTXPro6000Server},
	"rtxpro6000-switch": {"pcie-switch:8xrtx-pro-6000-server", RTXPro6000Server},
	"h200-nvswitch":     {"nvswitch:8xh200-sxm", H200SXM},
}

// DefaultPreset is the box of the seed scenario.
const DefaultPreset = "rtxpro6000-2s"

// PresetNames lists the base preset names, sorted.
func PresetNames() []string { return slices.Sorted(maps.Keys(presets)) }

// PresetDescription returns the box description a base preset name stands
// for ("rtxpro6000-2s" -> "pcie-2s:8xrtx-pro-6000-server"). The preset
// builds that box with its own device spec, the description with the
// catalog's.
func PresetDescription(name string) (string, bool) {
	p, ok := presets[name]
	return p.desc, ok
}

// Preset builds a named preset. A base name may carry the suffixes of box
// descriptions: "-gen3".."-gen6" (PCIe generation of the GPU links) and
// "-amd" / "-intel-spr" / "-intel-emr" (CPU of the socket interconnect),
// e.g. "rtxpro6000-2s-gen4-intel-emr".
func Preset(name string) (*Topology, error) {
	base, gen, cpu, err := cutSuffixes(name)
	p, ok := presets[base]
	if err != nil || !ok {
		return nil, fmt.Errorf("unknown preset %q (want one of %s, optionally with -gen3..-gen6, -amd, -intel-spr, -intel-emr)", name, strings.Join(PresetNames(), ", "))
	}
	b, err := ParseBox(p.desc)
	if err != nil {
		return nil, fmt.Errorf("preset %s: %w", name, err) // a bug in the preset table
	}
	b.PCIeGen, b.CPU = gen, cpu
	spec, err := LookupGPU(b.GPU)
	if err != nil {
		return nil, fmt.Errorf("preset %s: %w", name, err)
	}
	a, _ := Arch(spec.ArchKey)
	t, err := b.build(boxGPU{label: spec.Label, ic: spec.Interconnect, ncclPerLink: a.NCCLNVLinkGBps, ncclConst: a.NCCLNVLinkConst, dev: p.device()})
	if err != nil {
		return nil, fmt.Errorf("preset %s: %w", name, err) // a bug in the preset
	}
	t.Name = name
	return t, nil
}

// Resolve returns the preset called nameOrFile, else the box it describes
// (ParseBox: "nvswitch:8xh100-sxm"), else the topology in the file
// nameOrFile, reduced to its first gpus GPUs when gpus > 0. An empty name
// is DefaultPreset.
func Resolve(nameOrFile string, gpus int) (*Topology, error) {
	if nameOrFile == "" {
		nameOrFile = DefaultPreset
	}
	if gpus < 0 {
		return nil, fmt.Errorf("topology %q: --gpus %d: want 0 (all) or more", nameOrFile, gpus)
	}
	t, err := Preset(nameOrFile)
	if err != nil {
		_, serr := os.Stat(nameOrFile)
		switch {
		case serr == nil:
			if t, err = Load(nameOrFile); err != nil {
				return nil, err
			}
		case strings.Contains(nameOrFile, ":") && errors.Is(serr, fs.ErrNotExist):
			b, err := ParseBox(nameOrFile)
			if err != nil {
				return nil, fmt.Errorf("topology %q: not a preset (%s) nor a file; as a box description: %w", nameOrFile, strings.Join(PresetNames(), ", "), err)
			}
			if t, err = b.Build(); err != nil {
				return nil, err
			}
			t.Name = nameOrFile
		case errors.Is(serr, fs.ErrNotExist):
			return nil, fmt.Errorf("topology %q: not a preset (%s), not a box description (<fabric>:<count>x<gpu>, fabrics %s) and no such file", nameOrFile, strings.Join(PresetNames(), ", "), strings.Join(Fabrics(), ", "))
		default:
			return nil, fmt.Errorf("topology %q: %w", nameOrFile, serr)
		}
	}
	if gpus > 0 && gpus != len(t.GPUs) {
		return t.Subset(gpus)
	}
	return t, nil
}

// Subset returns a copy with only the first n GPUs and the links among
// the remaining elements. Calibration is kept (sim scales it by rank
// count).
func (t *Topology) Subset(n int) (*Topology, error) {
	if n < 1 || n > len(t.GPUs) {
		return nil, fmt.Errorf("topology %q: --gpus %d: the box has %d GPUs", t.Name, n, len(t.GPUs))
	}
	c := t.copyData() // validated below, once, after the cut
	drop := map[string]bool{}
	for _, g := range c.GPUs[n:] {
		drop[g.ID] = true
	}
	c.GPUs = c.GPUs[:n]
	links := c.Links[:0]
	for _, l := range c.Links {
		if !drop[l.A] && !drop[l.B] {
			links = append(links, l)
		}
	}
	c.Links = links
	pairs := c.P2PUnsupported[:0]
	for _, p := range c.P2PUnsupported {
		if !drop[p[0]] && !drop[p[1]] {
			pairs = append(pairs, p)
		}
	}
	c.P2PUnsupported = pairs
	c.Name = fmt.Sprintf("%s/%dgpu", t.Name, n)
	c.Description = fmt.Sprintf("first %d GPUs of %s", n, t.Name)
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

func gpuLink(a, b string, gen int, hopUs float64) Link {
	l := Link{A: a, B: b, Type: LinkPCIe, Gen: 5, Width: 16, BWGBps: gen5X16GBps, LatUs: hopUs,
		Source: srcHW + ": Gen5 x16 measured P2P 53-56.6 GB/s, 0.36-0.45 us"}
	switch gen {
	case 4:
		l.Gen, l.BWGBps, l.Source = 4, gen4X16GBps, "derived: half of Gen5's 54 GB/s (assumption: same efficiency)"
	case 3, 6:
		l.Gen, l.BWGBps = gen, achievedPCIeGBps(gen, 16)
		l.Source = fmt.Sprintf("derived: Gen5's 54 GB/s scaled by the transfer rate to Gen%d (assumption: same efficiency)", gen)
	}
	return l
}

func hostFor(o PresetOptions, sockets int) (Host, LinkType, float64) {
	c, ok := cpus[o.CPU]
	if !ok {
		c = cpus["amd"]
	}
	h := c.host
	h.Sockets = sockets
	h.SHMLatUs = shmLatUs
	h.SHMBWGBps = shmGBps
	h.LaunchQueueDepth = launchQueueDepth
	if g := o.gen(); g < 5 {
		h.SHMBWGBps = achievedPCIeGBps(g, 16) / 2
	}
	h.Sources = map[string]string{
		"cpu":                    "assumption: the seed scenario's box does not name its CPU; AMD is the case hardware.md warns about (NCCL models xGMI at 16 GB/s)",
		"inter_socket_nccl_gbps": srcHW + ": NCCL's model of the inter-socket link, AMD 16, Intel SPR 22, EMR 40 GB/s",
		"shm_lat_us":             srcHW + ": GPU-GPU copy with P2P disabled, about 14 us bounce latency (charged per ring step through host memory)",
		"shm_bw_gbps":            "assumption: half the direct Gen5 P2P bandwidth (data crosses PCIe twice through host memory)",
		"launch_queue_depth":     "assumption: CUDA's pending-launch queue holds about 1024 kernel launches per stream before the host blocks",
	}
	return h, c.linkType, c.linkGBps
}

// gen is the PCIe generation of the GPU links: PCIeGen when 3-6, else 5.
func (o PresetOptions) gen() int {
	if o.PCIeGen >= 3 && o.PCIeGen <= 6 {
		return o.PCIeGen
	}
	return 5
}
