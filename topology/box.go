package topology

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Box is a box described in one word:
//
//	<fabric>:<count>x<gpu>[-gen<N>][-amd|-intel-spr|-intel-emr]
//
// for example "nvswitch:8xh100-sxm", "pcie-2s:8xrtxpro6000-server-gen4",
// "nvl:2xh100-nvl". Fabrics (see Fabrics):
//
//   - nvswitch: every GPU on NVLink to one NVSwitch fabric; the GPU must
//     be an NVSwitch part (SXM, superchip). An SXM part sits on an HGX
//     8-GPU baseboard (NVIDIA's HGX A100/H100/H200 and DGX H100/H200,
//     HGX/DGX B200 and HGX B300 systems are 8 GPUs a board, H20 HGX too):
//     at most 8 GPUs, PCIe to a dual-socket x86 host through one PCIe
//     switch per GPU pair. A Grace-Blackwell superchip part (GB200,
//     GB300) sits in an NVL72 rack (NVIDIA's Multi-Node Tuning Guide,
//     docs.nvidia.com/multi-node-nvlink-systems/multi-node-tuning-guide/
//     system.html: 72x1 is 18 compute trays of 4 GPUs and 9 NVLink Switch
//     trays; 36x2 is racks of 9 such trays; each tray holds two superchips
//     of one Grace CPU and two GPUs on NVLink-C2C, and is a host of its
//     own): at most 72 GPUs, each pair on its own Grace CPU (nvlRack).
//   - nvl: GPU pairs joined by NVLink bridges (GPUs 2k and 2k+1), PCIe as
//     pcie-2s (pcie-1s for two GPUs); the GPU must take NVLink bridges.
//   - pcie-switch: one CPU, PCIe switches of 2 GPUs each, one x16 uplink per
//     switch into one root complex.
//   - pcie-1s: one CPU, GPUs direct-attached to root ports, two per root
//     complex.
//   - pcie-2s: two CPUs, half the GPUs on each, direct-attached as pcie-1s,
//     the sockets joined by xGMI/UPI.
//
// The GPU is a catalog key or alias (GPUNames). -gen<N> sets the PCIe
// generation of the GPU links (default: the GPU's own); -amd / -intel-spr
// / -intel-emr the CPU of the socket link (default amd; on nvswitch the
// host of the GPU generation's reference DGX system, dgxHosts, else
// intel-spr). The GPU may be left out ("nvswitch:8") only where a device is
// supplied (ReplicateOnto).
type Box struct {
	Fabric  string `json:"fabric"`
	GPUs    int    `json:"gpus"`
	GPU     string `json:"gpu,omitempty"`      // catalog key; "" when left out
	PCIeGen int    `json:"pcie_gen,omitempty"` // 0: the GPU's own
	CPU     string `json:"cpu,omitempty"`      // "": the fabric's default
}

// Fabric names.
const (
	FabricNVSwitch   = "nvswitch"
	FabricNVL        = "nvl"
	FabricPCIeSwitch = "pcie-switch"
	FabricPCIe1S     = "pcie-1s"
	FabricPCIe2S     = "pcie-2s"
)

// maxBoxGPUs bounds a described box (an NVL72 rack is the largest single
// NVLink domain; 72 rounded up to a power of two).
const maxBoxGPUs = 128

// Fabrics lists the fabric names of box descriptions.
func Fabrics() []string {
	return []string{FabricNVSwitch, FabricNVL, FabricPCIeSwitch, FabricPCIe1S, FabricPCIe2S}
}

// boxSuffixes are the option suffixes of box descriptions and preset names.
var boxSuffixes = []struct {
	s   string
	gen int
	cpu string
}{
	{"-gen3", 3, ""}, {"-gen4", 4, ""}, {"-gen5", 5, ""}, {"-gen6", 6, ""},
	{"-intel-spr", 0, "intel-spr"}, {"-intel-emr", 0, "intel-emr"}, {"-amd", 0, "amd"},
}

// cutSuffixes strips the option suffixes off s (any order, each once).
func cutSuffixes(s string) (base string, gen int, cpu string, err error) {
	base = s
	for {
		hit := false
		for _, x := range boxSuffixes {
			if !strings.HasSuffix(base, x.s) {
				continue
			}
			if x.gen != 0 {
				if gen != 0 {
					return "", 0, "", fmt.Errorf("two PCIe generations (-gen%d and %s)", gen, x.s)
				}
				gen = x.gen
			} else {
				if cpu != "" {
					return "", 0, "", fmt.Errorf("two CPUs (-%s and %s)", cpu, x.s)
				}
				cpu = x.cpu
			}
			base, hit = strings.TrimSuffix(base, x.s), true
		}
		if !hit {
			return base, gen, cpu, nil
		}
	}
}

// ParseReplica parses the fabric a discovered GPU is laid onto
// (ReplicateOnto, topo discover --as): <fabric>:<count> with the option
// suffixes and no GPU, the GPU being the discovered one. Its errors give
// that grammar: ParseBox's name the <fabric>:<count>x<gpu> of a box
// description (want x<gpu>, e.g. nvswitch:8xh100-sxm), which it refuses.
func ParseReplica(desc string) (Box, error) {
	bad := func(format string, a ...any) (Box, error) {
		return Box{}, fmt.Errorf("box %q: %s", desc, fmt.Sprintf(format, a...))
	}
	fabric, body, ok := strings.Cut(strings.ToLower(strings.TrimSpace(desc)), ":")
	if !ok {
		return bad("want <fabric>:<count>, e.g. nvswitch:8 (fabrics: %s; the GPU is the discovered one)", strings.Join(Fabrics(), ", "))
	}
	if !slices.Contains(Fabrics(), fabric) {
		return bad("unknown fabric %q (want one of %s)", fabric, strings.Join(Fabrics(), ", "))
	}
	if base, _, _, err := cutSuffixes(body); err == nil {
		i := 0
		for i < len(base) && base[i] >= '0' && base[i] <= '9' {
			i++
		}
		if i == 0 {
			return bad("GPU count missing after %q (want e.g. %s:8)", fabric+":", fabric)
		}
		if rest := base[i:]; rest != "" {
			return bad("%q after the count: name a fabric and a count only (e.g. %s:%s): the GPU is the discovered one", rest, fabric, base[:i])
		}
	}
	return ParseBox(desc)
}

// ParseBox parses a box description. Errors name the part that is wrong
// and list the valid fabrics or GPU names.
func ParseBox(desc string) (Box, error) {
	bad := func(format string, a ...any) (Box, error) {
		return Box{}, fmt.Errorf("box %q: %s", desc, fmt.Sprintf(format, a...))
	}
	s := strings.ToLower(strings.TrimSpace(desc))
	fabric, body, ok := strings.Cut(s, ":")
	if !ok {
		return bad("want <fabric>:<count>x<gpu>, e.g. pcie-2s:8xrtx-pro-6000-server (fabrics: %s)", strings.Join(Fabrics(), ", "))
	}
	if !slices.Contains(Fabrics(), fabric) {
		return bad("unknown fabric %q (want one of %s)", fabric, strings.Join(Fabrics(), ", "))
	}
	body, gen, cpu, err := cutSuffixes(body)
	if err != nil {
		return bad("%v", err)
	}
	i := 0
	for i < len(body) && body[i] >= '0' && body[i] <= '9' {
		i++
	}
	if i == 0 {
		return bad("GPU count missing after %q (want e.g. %s:8xh100-sxm)", fabric+":", fabric)
	}
	n, err := strconv.Atoi(body[:i])
	if err != nil || n < 1 || n > maxBoxGPUs {
		return bad("GPU count %s out of range 1-%d", body[:i], maxBoxGPUs)
	}
	b := Box{Fabric: fabric, GPUs: n, PCIeGen: gen, CPU: cpu}
	if rest := body[i:]; rest != "" {
		gpu, ok := strings.CutPrefix(rest, "x")
		if !ok {
			gpu, ok = strings.CutPrefix(rest, "×")
		}
		if !ok || gpu == "" {
			return bad("%q after the count: want x<gpu> (GPUs: %s)", rest, strings.Join(GPUNames(), ", "))
		}
		spec, err := LookupGPU(gpu)
		if err != nil {
			return bad("%v", err)
		}
		b.GPU = spec.Key
	}
	if err := b.check(); err != nil {
		return bad("%v", err)
	}
	return b, nil
}

// check tests what a description alone can say is wrong: counts the
// fabric cannot lay out, and a GPU that does not fit the fabric.
func (b Box) check() error {
	switch b.Fabric {
	case FabricNVSwitch, FabricNVL, FabricPCIe2S:
		if b.GPUs%2 != 0 {
			return fmt.Errorf("%s needs an even GPU count (%s), got %d", b.Fabric, map[string]string{
				FabricNVSwitch: "two sockets, a PCIe switch per GPU pair",
				FabricNVL:      "GPUs bridged in pairs",
				FabricPCIe2S:   "two sockets, half the GPUs on each",
			}[b.Fabric], b.GPUs)
		}
	}
	if b.GPU == "" {
		return nil
	}
	spec, err := LookupGPU(b.GPU)
	if err != nil {
		return err
	}
	if b.Fabric == FabricNVSwitch {
		if err := checkNVSwitchCount(spec, b.GPUs, b.CPU); err != nil {
			return err
		}
	}
	ic := spec.Interconnect
	switch {
	case b.Fabric == FabricNVSwitch && ic.NVLinkFabric != "nvswitch":
		return fmt.Errorf("%s is not an NVSwitch part (nvswitch takes %s)", spec.Key, strings.Join(gpusWith(func(g GPUSpec) bool { return g.Interconnect.NVLinkFabric == "nvswitch" }), ", "))
	case b.Fabric == FabricNVL && ic.NVLinkFabric != "bridge":
		return fmt.Errorf("%s takes no NVLink bridge (nvl takes %s)", spec.Key, strings.Join(gpusWith(func(g GPUSpec) bool { return g.Interconnect.NVLinkFabric == "bridge" }), ", "))
	case strings.HasPrefix(b.Fabric, "pcie-") && spec.FormFactor != "pcie":
		return fmt.Errorf("%s is a %s part, not a PCIe card (%s takes %s)", spec.Key, spec.FormFactor, b.Fabric, strings.Join(gpusWith(func(g GPUSpec) bool { return g.FormFactor == "pcie" }), ", "))
	}
	return nil
}

// NVSwitch domains a described box may be (the Box doc cites NVIDIA's
// systems): an HGX baseboard of 8 SXM GPUs, or the NVLink domain of a
// GB200/GB300 NVL72 rack, 72 GPUs (an NVL36 rack's 36 fit inside it).
const (
	hgxBoardGPUs = 8
	nvl72GPUs    = 72
	// rackTrayGPUs are the GPUs of one compute tray of an NVL72 or NVL36
	// rack: two superchips of one Grace CPU and two GPUs each.
	rackTrayGPUs = 4
)

// isRackPart reports whether the GPU is a Grace-Blackwell superchip part,
// which NVIDIA ships in NVL72/NVL36 racks, never on an HGX board.
func isRackPart(spec GPUSpec) bool { return spec.FormFactor == "superchip" }

// checkNVSwitchCount refuses an NVSwitch box of more GPUs than the one
// NVSwitch domain its part ships in: a larger count is several boxes
// joined by a network, which no box description lays out.
// cpu is the box's CPU suffix ("" for none), which a rack part refuses.
func checkNVSwitchCount(spec GPUSpec, n int, cpu string) error {
	if isRackPart(spec) {
		if cpu != "" {
			return fmt.Errorf("-%s: %s's CPUs are its superchips' Grace CPUs, no x86 socket of another vendor", cpu, spec.Key)
		}
		if n > nvl72GPUs {
			return fmt.Errorf("%s GPUs share one NVLink domain of at most %d (a GB200/GB300 NVL72 rack: 18 compute trays of %d), got %d", spec.Key, nvl72GPUs, rackTrayGPUs, n)
		}
		return nil
	}
	if n > hgxBoardGPUs {
		return fmt.Errorf("%s sits on an HGX baseboard of %d GPUs, one NVSwitch domain: got %d (more GPUs are more boxes, joined by a network no box description lays out; a rack-scale NVLink domain is nvswitch:72xgb200)", spec.Key, hgxBoardGPUs, n)
	}
	return nil
}

func gpusWith(keep func(GPUSpec) bool) []string {
	var out []string
	for _, g := range GPUs() {
		if keep(g) {
			out = append(out, g.Key)
		}
	}
	slices.Sort(out)
	return out
}

// String is the canonical description; ParseBox(b.String()) == b.
func (b Box) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "%s:%d", b.Fabric, b.GPUs)
	if b.GPU != "" {
		s.WriteString("x" + b.GPU)
	}
	if b.PCIeGen != 0 {
		fmt.Fprintf(&s, "-gen%d", b.PCIeGen)
	}
	if b.CPU != "" {
		s.WriteString("-" + b.CPU)
	}
	return s.String()
}

// Build lays the box out with the catalog's spec of its GPU; the
// topology's name is the canonical description.
func (b Box) Build() (*Topology, error) {
	if b.GPU == "" {
		return nil, fmt.Errorf("box %q: no GPU named (want %s:%dx<gpu>, GPUs: %s)", b.String(), b.Fabric, b.GPUs, strings.Join(GPUNames(), ", "))
	}
	if err := b.check(); err != nil {
		return nil, fmt.Errorf("box %q: %w", b.String(), err)
	}
	spec, err := LookupGPU(b.GPU)
	if err != nil {
		return nil, err
	}
	a, _ := Arch(spec.ArchKey)
	return b.build(boxGPU{label: spec.Label, ic: spec.Interconnect, ncclPerLink: a.NCCLNVLinkGBps, ncclConst: a.NCCLNVLinkConst, dev: spec.Device, rack: isRackPart(spec)})
}

// boxGPU is what a fabric builder needs of the GPU.
type boxGPU struct {
	label       string
	ic          Interconnect
	ncclPerLink float64 // NCCL's per-NVLink GB/s
	ncclConst   string
	dev         Device
	// rack: a Grace-Blackwell superchip part, laid out as its NVL72 rack.
	rack bool
}

func (b Box) build(g boxGPU) (*Topology, error) {
	o := PresetOptions{PCIeGen: b.PCIeGen, CPU: b.CPU}
	if o.PCIeGen == 0 {
		o.PCIeGen = g.ic.PCIeGen
	}
	if o.PCIeGen < 3 || o.PCIeGen > 6 {
		o.PCIeGen = 5
	}
	var t *Topology
	switch b.Fabric {
	case FabricPCIe2S:
		t = pcieDirect(o, b.GPUs, 2, g)
	case FabricPCIe1S:
		t = pcieDirect(o, b.GPUs, 1, g)
	case FabricPCIeSwitch:
		t = pcieSwitch(o, b.GPUs, g)
	case FabricNVSwitch:
		if g.rack {
			t = nvlRack(o, b.GPUs, g)
		} else {
			t = nvSwitch(o, b.GPUs, g)
		}
	case FabricNVL:
		t = nvlBridged(o, b.GPUs, g)
	default:
		return nil, fmt.Errorf("box %q: unknown fabric %q (want one of %s)", b.String(), b.Fabric, strings.Join(Fabrics(), ", "))
	}
	t.Name = b.String()
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("box %s: %w", b.String(), err)
	}
	return t, nil
}

// ReplicateOnto lays the device of GPU 0 of a discovered box onto the
// fabric of desc, which names a fabric and a count but no GPU
// ("nvswitch:8", "pcie-2s:8-gen4"): what the local GPU would do in that
// box. The PCIe generation and CPU vendor default to the discovered ones;
// the NVLink of an NVLink fabric comes from the catalog entry of the
// device, else from the discovered box's own NVLinks.
func ReplicateOnto(t *Topology, desc string) (*Topology, error) {
	b, err := ParseReplica(desc)
	if err != nil {
		return nil, err
	}
	dev := t.DeviceOf(0)
	if dev == nil {
		return nil, fmt.Errorf("topology %q: no GPU to replicate", t.Name)
	}
	g := boxGPU{label: dev.Name, dev: cloneDevice(*dev)}
	if spec, ok := MatchNVMLName(dev.Name); ok {
		a, _ := Arch(spec.ArchKey)
		g.label, g.ic, g.ncclPerLink, g.ncclConst = spec.Label, spec.Interconnect, a.NCCLNVLinkGBps, a.NCCLNVLinkConst
		g.rack = isRackPart(spec)
		if b.Fabric == FabricNVSwitch {
			if err := checkNVSwitchCount(spec, b.GPUs, ""); err != nil {
				return nil, fmt.Errorf("box %q: %w", desc, err)
			}
		}
	} else {
		g.ic.Source = "discovered"
		if a, ok := ArchForCC(dev.ComputeCapability); ok {
			g.ncclPerLink, g.ncclConst = a.NCCLNVLinkGBps, a.NCCLNVLinkConst
		}
		for _, l := range t.Links {
			if l.Type == LinkNVLink && (l.A == t.GPUs[0].ID || l.B == t.GPUs[0].ID) && l.Count > 0 {
				g.ic.NVLinks, g.ic.NVLinkGBps = l.Count, l.BWGBps
				g.ic.NVLinkFabric = "bridge"
				if l.A == "nvswitch" || l.B == "nvswitch" {
					g.ic.NVLinkFabric = "nvswitch"
				}
				break
			}
		}
	}
	if g.ic.PCIeGen == 0 {
		g.ic.PCIeGen = t.GPUs[0].PCIeGen
	}
	if b.PCIeGen == 0 && t.GPUs[0].PCIeGen >= 3 && t.GPUs[0].PCIeGen <= 6 {
		b.PCIeGen = t.GPUs[0].PCIeGen
	}
	if b.CPU == "" {
		switch t.Host.Vendor {
		case "amd":
			b.CPU = "amd"
		case "intel":
			b.CPU = "intel-spr"
		}
	}
	switch b.Fabric {
	case FabricNVSwitch, FabricNVL:
		want := map[string]string{FabricNVSwitch: "nvswitch", FabricNVL: "bridge"}[b.Fabric]
		if g.ic.NVLinks == 0 || g.ic.NVLinkFabric != want {
			return nil, fmt.Errorf("box %q: the discovered GPU %q has no NVLink of the %s kind (catalog or NVML); use a pcie-* fabric", desc, dev.Name, want)
		}
	}
	out, err := b.build(g)
	if err != nil {
		return nil, err
	}
	out.Name = fmt.Sprintf("%s as %s", t.Name, b.String())
	out.Description += fmt.Sprintf("; the device as discovered (%s)", t.Name)
	out.Sources = append(slices.Clone(t.Sources), out.Sources...)
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("box %s: %w", b.String(), err)
	}
	return out, nil
}

// pcieDirect: GPUs direct-attached to CPU root ports, two per root complex
// (assumption; it gives the PHB/NODE mix hardware.md lists inside a
// socket), split evenly over sockets (1 or 2), SYS across sockets.
func pcieDirect(o PresetOptions, n, sockets int, g boxGPU) *Topology {
	h, sockType, sockGBps := hostFor(o, sockets)
	per := n / sockets
	desc := fmt.Sprintf("%dx %s, one socket, GPUs direct-attached to CPU root ports (two per root complex), PCIe only", n, g.label)
	if sockets == 2 {
		desc = fmt.Sprintf("%dx %s, dual socket, %d+%d GPUs direct-attached to CPU root ports, PCIe only", n, g.label, per, per)
	}
	t := &Topology{
		Description: desc,
		Sources:     []string{srcHW, srcNCCL},
		Host:        h,
		Devices:     []Device{g.dev},
	}
	dev := g.dev.Name
	hbs := (per + 1) / 2
	for s := 0; s < sockets; s++ {
		cpu := fmt.Sprintf("cpu%d", s)
		t.Nodes = append(t.Nodes, Node{ID: cpu, Kind: NodeCPU, Socket: s, Name: h.CPU})
		for r := 0; r < hbs; r++ {
			hb := fmt.Sprintf("hb%d", hbs*s+r)
			t.Nodes = append(t.Nodes, Node{ID: hb, Kind: NodeHostBridge, Socket: s})
			t.Links = append(t.Links, Link{A: hb, B: cpu, Type: LinkInternal, BWGBps: internalGBps, LatUs: internalUs,
				Source: "assumption: on-die fabric does not bind"})
			for k := 0; k < 2 && 2*r+k < per; k++ {
				id := fmt.Sprintf("gpu%d", per*s+2*r+k)
				t.GPUs = append(t.GPUs, GPU{ID: id, Device: dev, NUMANode: s, Socket: s, PCIeGen: o.gen(), PCIeWidth: 16})
				t.Links = append(t.Links, gpuLink(id, hb, o.PCIeGen, pcieHopUs))
			}
		}
	}
	if sockets == 2 {
		t.Links = append(t.Links, Link{A: "cpu0", B: "cpu1", Type: sockType, BWGBps: sockGBps, LatUs: smpHopUs,
			Source: srcHW + ": measured GPU P2P across sockets (AMD xGMI) 39-51 GB/s; NCCL models it per Host.InterSocketNCCLGBps"})
	}
	return t
}

// pcieSwitch: one CPU, PCIe switches of 2 GPUs each, one shared x16 uplink
// per switch into one root complex (PIX inside a switch, PHB across, as
// hardware.md lists).
func pcieSwitch(o PresetOptions, n int, g boxGPU) *Topology {
	h, _, _ := hostFor(o, 1)
	nsw := (n + 1) / 2
	each := "2 GPUs each"
	if n%2 != 0 {
		each = "2 GPUs each (the last 1)"
	}
	t := &Topology{
		Description: fmt.Sprintf("%dx %s, one CPU, %d PCIe Gen%d switches with %s, one x16 uplink per switch", n, g.label, nsw, o.gen(), each),
		Sources:     []string{srcHW, srcNCCL},
		Host:        h,
		Devices:     []Device{g.dev},
		Nodes: []Node{{ID: "cpu0", Kind: NodeCPU, Socket: 0, Name: h.CPU},
			{ID: "hb0", Kind: NodeHostBridge, Socket: 0}},
		Links: []Link{{A: "hb0", B: "cpu0", Type: LinkInternal, BWGBps: internalGBps, LatUs: internalUs,
			Source: "assumption: on-die fabric does not bind"}},
	}
	dev := g.dev.Name
	for s := 0; s < nsw; s++ {
		sw := fmt.Sprintf("sw%d", s)
		t.Nodes = append(t.Nodes, Node{ID: sw, Kind: NodePCIeSwitch, Socket: 0, Name: switchModel(o.gen())})
		up := gpuLink(sw, "hb0", o.gen(), switchHopUs) // the uplink runs at the GPUs' generation
		up.Source = "shared x16 uplink; " + up.Source
		t.Links = append(t.Links, up)
		for k := 0; k < 2 && 2*s+k < n; k++ {
			id := fmt.Sprintf("gpu%d", 2*s+k)
			t.GPUs = append(t.GPUs, GPU{ID: id, Device: dev, NUMANode: 0, Socket: 0, PCIeGen: o.gen(), PCIeWidth: 16})
			t.Links = append(t.Links, gpuLink(id, sw, o.PCIeGen, switchHopUs))
		}
	}
	return t
}

// switchModel names the assumed PCIe switch of a generation.
func switchModel(gen int) string {
	switch {
	case gen <= 4:
		return fmt.Sprintf("PCIe Gen%d switch (assumption: Broadcom PEX88000 class)", gen)
	case gen == 5:
		return "PCIe Gen5 switch (assumption: Broadcom PEX89000 class)"
	}
	return fmt.Sprintf("PCIe Gen%d switch (assumption)", gen)
}

// nvSwitchNames: the NVSwitch chips of an 8-GPU HGX board per NVLink
// generation (A100: 6 second-generation NVSwitches, H100/H200: 4
// third-generation, B200/B300: 2 NVLink 5 switch chips).
var nvSwitchNames = map[int]string{
	3: "6x NVSwitch (second generation)",
	4: "4x NVSwitch (third generation)",
	5: "2x NVLink 5 Switch",
}

// nvLinkTo builds the bonded NVLink of a GPU from its catalog interconnect.
func nvLinkTo(a, b string, g boxGPU, what string) Link {
	ic := g.ic
	return Link{A: a, B: b, Type: LinkNVLink, Count: ic.NVLinks, BWGBps: ic.NVLinkGBps,
		NCCLBWGBps: nvlinkNCCLGBps(ic.NVLinks, g.ncclPerLink), LatUs: nvlinkHopUs,
		Source: fmt.Sprintf("%s: NVLink %d%s, %d links, %.0f GB/s per direction; NCCL bw assumption %d x %s (%s)",
			ic.Source, ic.NVLinkGen, what, ic.NVLinks, ic.NVLinkGBps, ic.NVLinks, strconv.FormatFloat(g.ncclPerLink, 'f', -1, 64), g.ncclConst)}
}

// nvlinkNCCLGBps is links x NCCL's per-link figure, rounded to 1e-9 so that
// it does not depend on the order of a float multiplication.
func nvlinkNCCLGBps(links int, perLink float64) float64 {
	return math.Round(float64(links)*perLink*1e9) / 1e9
}

// nvSwitch: every GPU on NVLink to one NVSwitch vertex (all of a
// baseboard's NVSwitch chips), PCIe to two sockets through one switch per
// GPU pair (assumption: the typical HGX host layout; it only matters for
// host-memory paths). Without a CPU suffix the host is the GPU
// generation's reference DGX system's (dgxHosts), else dual Intel Xeon
// Sapphire Rapids.
func nvSwitch(o PresetOptions, n int, g boxGPU) *Topology {
	ref, fromRef := dgxHosts[g.dev.ComputeCapability]
	fromRef = fromRef && o.CPU == ""
	switch {
	case fromRef:
		o.CPU = ref.cpu
	case o.CPU == "":
		o.CPU = "intel-spr"
	}
	h, sockType, sockGBps := hostFor(o, 2)
	h.Sources["cpu"] = fmt.Sprintf("assumption: HGX %s hosts are commonly dual Intel Xeon", strings.Fields(g.label)[0])
	if fromRef {
		// No CPU asked for: the host is the one the GPU generation's
		// reference DGX system ships, which an HGX box of another maker
		// may not have (a suffix, -amd, -intel-spr or -intel-emr, picks
		// another).
		h.CPU, h.Sources["cpu"] = ref.name, ref.source
		if ref.ncclSource != "" {
			h.Sources["inter_socket_nccl_gbps"] = ref.ncclSource
		}
	}
	swName := nvSwitchNames[g.ic.NVLinkGen]
	if swName == "" {
		swName = "NVSwitch fabric"
	}
	t := &Topology{
		Description: fmt.Sprintf("%dx %s, NVLink %d all-to-all through NVSwitch (HGX), dual socket host", n, g.label, g.ic.NVLinkGen),
		Sources:     []string{srcHW, srcNCCL},
		Host:        h,
		Devices:     []Device{g.dev},
		Nodes:       []Node{{ID: "nvswitch", Kind: NodeNVSwitch, Socket: -1, Name: swName}},
	}
	dev := g.dev.Name
	per := n / 2
	nsw := (per + 1) / 2
	for s := 0; s < 2; s++ {
		cpu := fmt.Sprintf("cpu%d", s)
		hb := fmt.Sprintf("hb%d", s)
		t.Nodes = append(t.Nodes, Node{ID: cpu, Kind: NodeCPU, Socket: s, Name: h.CPU}, Node{ID: hb, Kind: NodeHostBridge, Socket: s})
		t.Links = append(t.Links, Link{A: hb, B: cpu, Type: LinkInternal, BWGBps: internalGBps, LatUs: internalUs,
			Source: "assumption: on-die fabric does not bind"})
		for w := 0; w < nsw; w++ {
			sw := fmt.Sprintf("sw%d", nsw*s+w)
			t.Nodes = append(t.Nodes, Node{ID: sw, Kind: NodePCIeSwitch, Socket: s})
			t.Links = append(t.Links, gpuLink(sw, hb, o.gen(), switchHopUs))
			for k := 0; k < 2 && 2*w+k < per; k++ {
				id := fmt.Sprintf("gpu%d", per*s+2*w+k)
				t.GPUs = append(t.GPUs, GPU{ID: id, Device: dev, NUMANode: s, Socket: s, PCIeGen: o.gen(), PCIeWidth: 16})
				t.Links = append(t.Links, gpuLink(id, sw, o.gen(), switchHopUs), nvLinkTo(id, "nvswitch", g, ""))
			}
		}
	}
	t.Links = append(t.Links, Link{A: "cpu0", B: "cpu1", Type: sockType, BWGBps: sockGBps, LatUs: smpHopUs,
		Source: "assumption: socket link capacity for one flow; NCCL models it per Host.InterSocketNCCLGBps"})
	return t
}

// graceCPU names the CPU of a Grace-Blackwell superchip (NVIDIA Grace:
// 72 Arm Neoverse V2 cores, GB200/GB300 datasheets).
const graceCPU = "NVIDIA Grace (72 Arm Neoverse V2 cores)"

// nvlRack: the NVLink domain of a GB200/GB300 NVL72 rack (the Box doc
// cites NVIDIA's tuning guide), every GPU on NVLink to the rack's NVLink
// Switch trays. Its host is no dual-socket x86 server: each superchip is
// one Grace CPU with its two GPUs on NVLink-C2C (modeled as PCIe Gen5 x16,
// the catalog's assumption for the host link), two superchips a compute
// tray, each tray a host of its own whose OS numbers its two Graces NUMA
// 0 and 1. No link joins two Graces (the one inside a tray is not
// published; trays share no memory at all), so a hop through host memory
// between GPUs of two superchips has no route here: NCCL would take the
// other Grace inside a tray and the network across trays, neither of
// which is priced (sim's collective model refuses such a hop).
func nvlRack(o PresetOptions, n int, g boxGPU) *Topology {
	h, _, _ := hostFor(o, n/2)
	h.CPU, h.Vendor, h.InterSocketNCCLGBps = graceCPU, "arm", 0
	h.Sources["cpu"] = "GB200/GB300 superchip: one Grace CPU and two GPUs on NVLink-C2C (900 GB/s, NVIDIA datasheet); one host per compute tray of two superchips (NVIDIA Multi-Node Tuning Guide)"
	h.Sources["inter_socket_nccl_gbps"] = "none: no link between Graces is modeled (one per tray is unpublished; trays are separate hosts)"
	h.Sources["shm_bw_gbps"] = "assumption: half the direct Gen5 P2P bandwidth, as the Grace link is modeled as PCIe Gen5 x16"
	trays := (n + rackTrayGPUs - 1) / rackTrayGPUs
	t := &Topology{
		Description: fmt.Sprintf("%dx %s, NVLink %d all-to-all through the NVL72 rack's NVLink Switch trays; host: a Grace CPU per superchip of 2 GPUs (NVLink-C2C), 2 superchips a compute tray (%d trays), each tray its own host", n, g.label, g.ic.NVLinkGen, trays),
		Sources:     []string{srcHW, srcNCCL},
		Host:        h,
		Devices:     []Device{g.dev},
		Nodes:       []Node{{ID: "nvswitch", Kind: NodeNVSwitch, Socket: -1, Name: "NVLink Switch trays (NVL72: 9 trays of 2 NVLink 5 Switch chips)"}},
	}
	dev := g.dev.Name
	for k := 0; k < n/2; k++ {
		cpu, hb := fmt.Sprintf("cpu%d", k), fmt.Sprintf("hb%d", k)
		t.Nodes = append(t.Nodes, Node{ID: cpu, Kind: NodeCPU, Socket: k, Name: graceCPU}, Node{ID: hb, Kind: NodeHostBridge, Socket: k})
		t.Links = append(t.Links, Link{A: hb, B: cpu, Type: LinkInternal, BWGBps: internalGBps, LatUs: internalUs,
			Source: "assumption: on-die fabric does not bind"})
		for j := 0; j < 2; j++ {
			id := fmt.Sprintf("gpu%d", 2*k+j)
			t.GPUs = append(t.GPUs, GPU{ID: id, Device: dev, NUMANode: k % 2, Socket: k, PCIeGen: o.gen(), PCIeWidth: 16})
			c2c := gpuLink(id, hb, o.gen(), pcieHopUs)
			c2c.Source = "NVLink-C2C to the superchip's Grace, modeled as PCIe Gen5 x16 (assumption, as the catalog's host link); " + c2c.Source
			t.Links = append(t.Links, c2c, nvLinkTo(id, "nvswitch", g, ""))
		}
	}
	return t
}

// nvlBridged: the PCIe layout of pcie-2s (pcie-1s for two GPUs) with GPUs
// 2k and 2k+1 joined by NVLink bridges; bridged pairs share a root complex.
func nvlBridged(o PresetOptions, n int, g boxGPU) *Topology {
	sockets := 2
	if n <= 2 {
		sockets = 1
	}
	t := pcieDirect(o, n, sockets, g)
	for k := 0; k+1 < n; k += 2 {
		t.Links = append(t.Links, nvLinkTo(fmt.Sprintf("gpu%d", k), fmt.Sprintf("gpu%d", k+1), g, " bridge"))
	}
	t.Description = strings.Replace(t.Description, ", PCIe only", fmt.Sprintf(", NVLink %d bridges joining GPU pairs", g.ic.NVLinkGen), 1)
	return t
}
