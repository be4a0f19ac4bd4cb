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

// dgxHost is the host of a GPU generation's reference DGX system: the
// CPU choice (cpus) whose socket link and NCCL model it has, its name as
// the topology shows it, and the sources.
type dgxHost struct {
	cpu        string
	name       string
	source     string
	ncclSource string // "": the CPU choice's own
}

// dgxHosts are the hosts of the reference DGX systems by the compute
// capability of their GPUs (the GPU generation), which an nvswitch box
// of that generation without a CPU suffix takes (nvSwitch): NVIDIA sells
// the HGX baseboard to other makers, whose hosts vary, so the name says
// the host is assumed. NCCL tells the Intel ones apart by CPUID (src/
// graph/topo.cc, 2.21 to 2.29: family 6 model >= 0xCF ERP, ERP_QPI_BW 40;
// >= 0x8F SRP, SRP_QPI_BW 22) and gives every AMD CPU AMD_BW 16 (topo.h).
var dgxHosts = map[string]dgxHost{
	"8.0": {cpu: "amd", name: "2x AMD EPYC 7742 (Rome), DGX A100's host, assumed",
		source: "NVIDIA DGX A100 datasheet and user guide: CPU Dual AMD Rome 7742, 128 cores total, 2.25 GHz (base), 3.4 GHz (max boost); the HGX A100 box is assumed to have the reference system's host (xGMI link capacity: the measured AMD one, " + srcHW + ", not measured on Rome)"},
	"9.0": {cpu: "intel-spr", name: "2x Intel Xeon Platinum 8480C (Sapphire Rapids), DGX H100/H200's host, assumed",
		source: "NVIDIA DGX H100 and DGX H200 datasheets: Dual Intel Xeon Platinum 8480C Processors, 112 cores total, 2.00 GHz (base), 3.80 GHz (max boost); an HGX box of the Hopper generation (H100, H200, H20) is assumed to have the reference system's host"},
	"10.0": {cpu: "intel-emr", name: "2x Intel Xeon Platinum 8570 (Emerald Rapids), DGX B200's host, assumed",
		source: "NVIDIA DGX B200 user guide (Introduction, Hardware Overview): CPU 2 x Intel Xeon 8570 PCIe Gen5 CPUs with 56 cores each, 2.1/4 GHz (base/max boost); an HGX B200 box is assumed to have the reference system's host"},
	"10.3": {cpu: "intel-spr", name: "2x Intel Xeon 6776P (Granite Rapids), DGX B300's host, assumed",
		source:     "DGX B300: two Intel Xeon 6 6776P (Intel's announcement of the 6776P for NVIDIA DGX B300, May 2025; heise.de/-10395118); an HGX B300 box is assumed to have the reference system's host",
		ncclSource: "NCCL src/graph/topo.cc: Granite Rapids is family 6 model 0xAD (Linux arch/x86/include/asm/intel-family.h INTEL_GRANITERAPIDS_X), at least 0x8F and below 0xCF, so NCCL models its socket link as Sapphire Rapids' SRP_QPI_BW, 22 GB/s (UPI link capacity: the Sapphire Rapids assumption)"},
}

// PresetOptions varies a preset or a described box.
type PresetOptions struct {
	// PCIeGen of the GPU links: 3-6 (0: 5).
	PCIeGen int
	// CPU is "amd" (default), "intel-spr" or "intel-emr".
	CPU string
}

// presets maps a preset name to the box description it stands for: a
// preset is an alias, built by Box.Build with the catalog's device spec,
// so "rtxpro6000-2s" and "pcie-2s:8xrtx-pro-6000-server" are the same box
// and predict the same (only Topology.Name, the string asked for, differs).
var presets = map[string]string{
	"rtxpro6000-2s":     "pcie-2s:8xrtx-pro-6000-server",
	"rtxpro6000-switch": "pcie-switch:8xrtx-pro-6000-server",
	"h200-nvswitch":     "nvswitch:8xh200-sxm",
}

// DefaultPreset is the box of the seed scenario.
const DefaultPreset = "rtxpro6000-2s"

// PresetNames lists the base preset names, sorted.
func PresetNames() []string { return slices.Sorted(maps.Keys(presets)) }

// PresetDescription returns the box description a base preset name stands
// for ("rtxpro6000-2s" -> "pcie-2s:8xrtx-pro-6000-server").
func PresetDescription(name string) (string, bool) {
	desc, ok := presets[name]
	return desc, ok
}

// Preset builds a named preset: its box description (PresetDescription)
// with the suffixes of box descriptions carried over: "-gen3".."-gen6"
// (PCIe generation of the GPU links) and "-amd" / "-intel-spr" /
// "-intel-emr" (CPU of the socket interconnect), e.g.
// "rtxpro6000-2s-gen4-intel-emr" is "pcie-2s:8xrtx-pro-6000-server-gen4-intel-emr".
// The topology's Name is the preset name as asked for.
func Preset(name string) (*Topology, error) {
	base, gen, cpu, err := cutSuffixes(name)
	desc, ok := presets[base]
	if err != nil || !ok {
		return nil, fmt.Errorf("unknown preset %q (want one of %s, optionally with -gen3..-gen6, -amd, -intel-spr, -intel-emr)", name, strings.Join(PresetNames(), ", "))
	}
	b, err := ParseBox(desc)
	if err != nil {
		return nil, fmt.Errorf("preset %s: %w", name, err) // a bug in the preset table
	}
	b.PCIeGen, b.CPU = gen, cpu
	t, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("preset %s: %w", name, err) // a bug in the preset table
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
			t.labelFile(nameOrFile)
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

// labelFile names a topology loaded from the file at path so that it is
// told apart from the box its name stands for: a file whose "name" is a
// preset's or a box description's (topo show -o writes the preset's; a
// calibrated box keeps it) but whose box is not that one (SameBox: another
// bandwidth, a calibration) is labelled "name (path)", and a file without
// a name is labelled by its path. Every report, sweep row and trace names
// the box by Name, so two different boxes never share one.
func (t *Topology) labelFile(path string) {
	if t.Name == "" {
		t.Name = path
		return
	}
	named, err := Preset(t.Name)
	if err != nil && strings.Contains(t.Name, ":") {
		var b Box
		if b, err = ParseBox(t.Name); err == nil {
			named, err = b.Build()
		}
	}
	if err == nil && !named.SameBox(t) {
		t.Name = fmt.Sprintf("%s (%s)", t.Name, path)
	}
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
	c.WholeGPUs = t.BoxGPUs()
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
