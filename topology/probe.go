package topology

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// Probe is what discovery read from the driver (NVML) about the local box,
// as plain data, so building the graph is testable without a GPU. Levels
// follow NVML's nvmlGpuTopologyLevel_t: 0 internal (same board), 10 single
// PCIe switch, 20 multiple switches, 30 host bridge, 40 NUMA node,
// 50 system (across sockets).
type Probe struct {
	Hostname  string `json:"hostname,omitempty"`
	Driver    string `json:"driver,omitempty"`
	CPUVendor string `json:"cpu_vendor,omitempty"` // "amd", "intel", ...
	CPUModel  string `json:"cpu_model,omitempty"`
	GPUs      []ProbeGPU
	// Ancestor[i][j] is NVML's common-ancestor level of GPUs i and j.
	Ancestor [][]int
	// P2PRead[i][j] is NVML's P2P read status == OK.
	P2PRead [][]bool
}

// NVML topology levels (nvmlGpuTopologyLevel_t).
const (
	NVMLTopoInternal   = 0
	NVMLTopoSingle     = 10
	NVMLTopoMultiple   = 20
	NVMLTopoHostBridge = 30
	NVMLTopoNode       = 40
	NVMLTopoSystem     = 50
)

// ProbeGPU is one GPU as NVML reports it.
type ProbeGPU struct {
	Name                                         string
	UUID                                         string
	BusID                                        string
	ComputeCapability                            string
	CUDACores                                    int
	MaxSMClockMHz                                int
	MaxMemClockMHz                               int
	MemBusWidthBits                              int
	MemBytes                                     int64
	NUMANode                                     int // -1 unknown
	CPUAffinity                                  string
	PCIeGen, PCIeWidth, CurPCIeGen, CurPCIeWidth int
	// NVLinks counts active NVLinks by the remote end's PCI bus ID (a GPU's
	// bus ID, or an NVSwitch's).
	NVLinks map[string]int
}

// FromProbe builds a topology from a probe. The PCIe tree is reconstructed
// from the pairwise common-ancestor levels: GPUs closer than SYSTEM share a
// CPU socket, closer than NODE a host bridge, SINGLE a switch, MULTIPLE a
// parent switch. Upstream PCIe links are assumed to run at the GPUs' own
// max generation and width (NVML does not report them). NVLinks to another
// GPU's bus ID become direct links, others go to one NVSwitch vertex.
// Device specs come from the GPU catalog entry matching the NVML name
// (MatchNVMLName) with NVML's memory size; an unknown name gets peaks
// derived from its compute capability, SM count and max clock through the
// catalog's per-architecture FLOP/clk/SM (DeriveDevice), and says so in the
// device's Sources.
func FromProbe(p *Probe) (*Topology, error) {
	n := len(p.GPUs)
	if n == 0 {
		return nil, fmt.Errorf("discover: no GPU")
	}
	if len(p.Ancestor) != n {
		return nil, fmt.Errorf("discover: ancestor matrix has %d rows for %d GPUs", len(p.Ancestor), n)
	}
	for i := range p.Ancestor {
		if len(p.Ancestor[i]) != n {
			return nil, fmt.Errorf("discover: ancestor row %d has %d entries for %d GPUs", i, len(p.Ancestor[i]), n)
		}
	}
	vendor := strings.ToLower(p.CPUVendor)
	c, ok := cpus["amd"], true
	if vendor == "intel" {
		c = cpus["intel-spr"]
	} else if vendor != "amd" {
		ok = false
	}
	t := &Topology{
		Name:        "discovered",
		Description: fmt.Sprintf("discovered through NVML on %s (driver %s)", p.Hostname, p.Driver),
		Sources:     []string{"NVML (go-nvml): names, bus IDs, PCIe gen/width, common ancestors, P2P status, NVLink state, NUMA/CPU affinity", srcHW},
		Host:        c.host,
	}
	if p.Hostname != "" {
		t.Name = "discovered-" + p.Hostname
	}
	t.Host.CPU = p.CPUModel
	if !ok {
		t.Host.Vendor = ""
	} else {
		t.Host.Vendor = vendor
	}
	t.Host.SHMLatUs, t.Host.SHMBWGBps = shmLatUs, shmGBps
	t.Host.Sources = map[string]string{
		"inter_socket_nccl_gbps": srcHW + ": NCCL's model of the inter-socket link by CPU vendor (Intel: Sapphire Rapids assumed)",
		"shm_lat_us":             srcHW + ": bounce through host memory about 14 us",
		"shm_bw_gbps":            "assumption: half the direct Gen5 P2P bandwidth",
	}

	// Devices: one per distinct name.
	devIndex := map[string]int{}
	for _, g := range p.GPUs {
		if _, ok := devIndex[g.Name]; ok {
			continue
		}
		devIndex[g.Name] = len(t.Devices)
		t.Devices = append(t.Devices, deviceFromProbe(g))
	}

	// Union-find over levels.
	groups := func(maxLevel int) []int {
		parent := make([]int, n)
		for i := range parent {
			parent[i] = i
		}
		var find func(int) int
		find = func(x int) int {
			for parent[x] != x {
				parent[x] = parent[parent[x]]
				x = parent[x]
			}
			return x
		}
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				if p.Ancestor[i][j] <= maxLevel {
					parent[find(i)] = find(j)
				}
			}
		}
		out := make([]int, n)
		for i := range out {
			out[i] = find(i)
		}
		return out
	}
	sock := groups(NVMLTopoNode)
	hbShared := groups(NVMLTopoHostBridge)
	pxb := groups(NVMLTopoMultiple)
	pix := groups(NVMLTopoSingle)
	size := func(g []int, i int) int {
		k := 0
		for _, x := range g {
			if x == g[i] {
				k++
			}
		}
		return k
	}

	gen, width := 5, 16
	if g := p.GPUs[0]; g.PCIeGen > 0 && g.PCIeWidth > 0 {
		gen, width = g.PCIeGen, g.PCIeWidth
	}
	pcie := func(a, b string, g ProbeGPU) Link {
		ge, w := gen, width
		if g.PCIeGen > 0 && g.PCIeWidth > 0 {
			ge, w = g.PCIeGen, g.PCIeWidth
		}
		return Link{A: a, B: b, Type: LinkPCIe, Gen: ge, Width: w, BWGBps: achievedPCIeGBps(ge, w), LatUs: pcieHopUs,
			Source: "NVML max link gen/width; bandwidth scaled from " + srcHW + " Gen5 x16 measured 54 GB/s (assumption for other gens/widths)"}
	}

	socketNum := map[int]int{} // socket group (union-find root) -> socket index
	added := map[string]bool{}
	addNode := func(nd Node) {
		if !added[nd.ID] {
			added[nd.ID] = true
			t.Nodes = append(t.Nodes, nd)
		}
	}
	for i := 0; i < n; i++ {
		s, ok := socketNum[sock[i]]
		if !ok {
			s = len(socketNum)
			socketNum[sock[i]] = s
		}
		cpu := fmt.Sprintf("cpu%d", s)
		addNode(Node{ID: cpu, Kind: NodeCPU, Socket: s, Name: p.CPUModel})
		// Host bridge: GPUs at level HOSTBRIDGE share one; below it they
		// share a PCIe tree under it.
		h := fmt.Sprintf("hb%d", hbShared[i])
		if !added[h] {
			addNode(Node{ID: h, Kind: NodeHostBridge, Socket: s})
			t.Links = append(t.Links, Link{A: h, B: cpu, Type: LinkInternal, BWGBps: internalGBps, LatUs: internalUs, Source: "assumption: on-die fabric does not bind"})
		}
		g := p.GPUs[i]
		id := fmt.Sprintf("gpu%d", i)
		t.GPUs = append(t.GPUs, GPU{ID: id, Device: g.Name, BusID: g.BusID, NUMANode: g.NUMANode, Socket: s, CPUAffinity: g.CPUAffinity,
			PCIeGen: g.PCIeGen, PCIeWidth: g.PCIeWidth, CurPCIeGen: g.CurPCIeGen, CurPCIeWidth: g.CurPCIeWidth})
		up := h
		if size(pxb, i) > 1 {
			// A PCIe switch tree under the host bridge.
			root := fmt.Sprintf("swp%d", pxb[i])
			multi := size(pxb, i) > size(pix, i)
			if multi {
				if !added[root] {
					addNode(Node{ID: root, Kind: NodePCIeSwitch, Socket: s})
					t.Links = append(t.Links, pcie(root, h, g))
				}
				up = root
			}
			leaf := fmt.Sprintf("sw%d", pix[i])
			if !added[leaf] {
				addNode(Node{ID: leaf, Kind: NodePCIeSwitch, Socket: s})
				t.Links = append(t.Links, pcie(leaf, up, g))
			}
			up = leaf
		}
		t.Links = append(t.Links, pcie(id, up, g))
	}
	// Socket links: a full mesh between CPU vertices.
	sockets := len(socketNum)
	for a := 0; a < sockets; a++ {
		for b := a + 1; b < sockets; b++ {
			lt := c.linkType
			if !ok {
				lt = LinkXGMI
			}
			t.Links = append(t.Links, Link{A: fmt.Sprintf("cpu%d", a), B: fmt.Sprintf("cpu%d", b), Type: lt, BWGBps: c.linkGBps, LatUs: smpHopUs,
				Source: srcHW + ": cross-socket GPU P2P 39-51 GB/s (AMD); assumption for Intel"})
		}
	}
	t.Host.Sockets = sockets
	if sockets < 2 {
		t.Host.InterSocketNCCLGBps = 0
	}

	// NVLink.
	busIdx := map[string]int{}
	for i, g := range p.GPUs {
		busIdx[normBus(g.BusID)] = i
	}
	nvsw := false
	for i, g := range p.GPUs {
		remotes := slices.Sorted(maps.Keys(g.NVLinks))
		var toSwitch int
		for _, r := range remotes {
			cnt := g.NVLinks[r]
			if j, ok := busIdx[normBus(r)]; ok {
				if j > i { // each GPU pair once
					t.Links = append(t.Links, nvLink(fmt.Sprintf("gpu%d", i), fmt.Sprintf("gpu%d", j), cnt, t.Devices[devIndex[g.Name]].Arch))
				}
				continue
			}
			toSwitch += cnt
		}
		if toSwitch > 0 {
			if !nvsw {
				nvsw = true
				t.Nodes = append(t.Nodes, Node{ID: "nvswitch", Kind: NodeNVSwitch, Socket: -1, Name: "NVSwitch fabric"})
			}
			t.Links = append(t.Links, nvLink(fmt.Sprintf("gpu%d", i), "nvswitch", toSwitch, t.Devices[devIndex[g.Name]].Arch))
		}
	}
	// P2P status.
	for i := 0; i < n && i < len(p.P2PRead); i++ {
		for j := i + 1; j < n && j < len(p.P2PRead[i]); j++ {
			if !p.P2PRead[i][j] {
				t.P2PUnsupported = append(t.P2PUnsupported, [2]string{fmt.Sprintf("gpu%d", i), fmt.Sprintf("gpu%d", j)})
			}
		}
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("discover: %w", err)
	}
	return t, nil
}

// achievedPCIeGBps scales hardware.md's measured Gen5 x16 P2P bandwidth
// (54 GB/s) by generation and width (assumption: same efficiency).
func achievedPCIeGBps(gen, width int) float64 {
	return gen5X16GBps * float64(width) / 16 * math.Pow(2, float64(gen-5))
}

// nvLink builds a bonded NVLink. Per-link bandwidth: hardware.md NVLink 4
// 450 GB/s / 18 = 25 GB/s per link per direction (assumption for other
// generations); NCCL's per-link 20.6 (SM90, assumption).
func nvLink(a, b string, count int, arch string) Link {
	return Link{A: a, B: b, Type: LinkNVLink, Count: count, BWGBps: 25 * float64(count), NCCLBWGBps: 20.6 * float64(count), LatUs: nvlinkHopUs,
		Source: fmt.Sprintf("NVML: %d active NVLinks; %s: NVLink 4 = 25 GB/s per link per direction (%s)", count, srcHW, arch)}
}

func normBus(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	// NVML reports "00000000:18:00.0"; some tools "0000:18:00.0".
	if i := strings.Index(s, ":"); i > 4 {
		s = s[i-4:]
	}
	return s
}

// Launch costs of a device whose architecture the catalog does not know
// (the catalog's architectures carry their own, measured where they can).
const (
	// launchEagerUs: host time per op of a vLLM eager decode step (see
	// srcLaunchEager).
	launchEagerUs = 10.0
	// kernelGapEagerUs: device-side gap per stream-launched kernel.
	kernelGapEagerUs = 2.0
	// measuredArch is the catalog architecture whose graph-node and
	// timing-event costs were measured; a device of an unknown
	// architecture takes them (srcMeasuredArch).
	measuredArch = "hopper"
)

const (
	srcLaunchEager  = "assumption: 10 us host time per op in vLLM eager mode = Python module call ~3 us + PyTorch dispatch ~3 us + cudaLaunchKernel ~3-4 us (jiahuanglin.xyz 'From PyTorch op to kernel launch': 5-25 us CPU path per op; susun-blog pegainfer (3): 4-6 us per launch, RTX 5070 Ti, CUDA 13); calibrate from traces"
	srcMeasuredArch = "assumption: the figure the catalog measured on arch " + measuredArch + " (an H100's graphs, an H200's recordings)"
	srcEagerGap     = "assumption: 2 us device-side gap per stream-launched kernel (the catalog's Hopper figure, 1.6 us, rounded up for an unknown front end)"
)

// deviceFromProbe picks the catalog spec matching the NVML name
// (MatchNVMLName) with NVML's memory size, or derives one from the
// compute capability, SM count and clock (DeriveDevice), or, for an
// architecture the catalog does not know, keeps NVML's numbers alone with
// only an fp32 peak.
func deviceFromProbe(g ProbeGPU) Device {
	var d Device
	if spec, ok := MatchNVMLName(g.Name); ok {
		d = spec.Device
		d.Sources["catalog"] = fmt.Sprintf("NVML name %q matched catalog entry %s (%s)", g.Name, spec.Key, spec.Label)
		if g.MemBytes > 0 && spec.Device.MemBytes > 0 {
			if r := float64(g.MemBytes) / float64(spec.Device.MemBytes); r < 0.9 || r > 1.1 {
				d.Sources["catalog"] += fmt.Sprintf("; NVML memory %d bytes differs from the entry's %d by more than 10 %%: a variant of it, whose memory bandwidth may differ from the entry's %.0f GB/s", g.MemBytes, spec.Device.MemBytes, spec.Device.MemBWGBps)
			}
		}
		if g.ComputeCapability != "" && g.ComputeCapability != d.ComputeCapability {
			d.Sources["catalog"] += fmt.Sprintf("; NVML compute capability %s, the entry's %s", g.ComputeCapability, d.ComputeCapability)
			d.ComputeCapability = g.ComputeCapability
		}
	} else if dd, ok := DeriveDevice(g); ok {
		d = dd
	} else {
		hop, _ := Arch(measuredArch)
		d = Device{
			ComputeCapability: g.ComputeCapability,
			SMs:               g.CUDACores / 128,
			MemEfficiency:     0.8,
			LaunchEagerUs:     launchEagerUs, LaunchGraphUs: hop.Kernel.LaunchGraphUs,
			TimingEventUs: hop.Kernel.TimingEventUs, TimingEventGapUs: hop.Kernel.TimingEventGapUs,
			KernelGapEagerUs: kernelGapEagerUs, MinKernelUs: 2,
			Sources: map[string]string{
				"sms":                 fmt.Sprintf("derived: NVML CUDA cores / 128 per SM (assumption: compute capability %q is not in the catalog)", g.ComputeCapability),
				"mem_bw_gbps":         "derived: NVML max memory clock x 2 x bus width / 8",
				"peak_tflops":         "derived: fp32 only, CUDA cores x 2 x max SM clock; tensor peaks unknown (architecture not in the catalog)",
				"sm_clock_mhz":        "NVML max SM clock (boost; no sustained figure known)",
				"mem_efficiency":      "assumption",
				"launch_eager_us":     srcLaunchEager,
				"launch_graph_us":     srcMeasuredArch,
				"timing_event_us":     srcMeasuredArch,
				"timing_event_gap_us": srcMeasuredArch,
				"kernel_gap_eager_us": srcEagerGap,
				"min_kernel_us":       "assumption: 2 us",
			},
		}
		if d.SMs < 1 {
			d.SMs = 1
		}
		d.SMClockMHz = float64(g.MaxSMClockMHz)
		d.MemBWGBps = float64(g.MaxMemClockMHz) * 2 * float64(g.MemBusWidthBits) / 8 / 1000
		d.PeakTFLOPS = map[string]float64{"fp32": float64(g.CUDACores) * 2 * float64(g.MaxSMClockMHz) / 1e6}
		if d.SMClockMHz <= 0 {
			d.SMClockMHz = 1000
		}
		if d.MemBWGBps <= 0 {
			d.MemBWGBps = 1000
			d.Sources["mem_bw_gbps"] = "assumption: NVML gave no memory clock"
		}
		if d.PeakTFLOPS["fp32"] <= 0 {
			d.PeakTFLOPS["fp32"] = 1
		}
	}
	d.Name = g.Name
	if g.MemBytes > 0 {
		d.MemBytes = g.MemBytes
		d.Sources["mem_bytes"] = "NVML memory total"
	}
	if g.MaxSMClockMHz > 0 {
		if d.BoostClockMHz == 0 {
			d.BoostClockMHz = float64(g.MaxSMClockMHz)
		} else if float64(g.MaxSMClockMHz) != d.BoostClockMHz {
			// The peaks are quoted at the catalog's clock; keep it and
			// record what this board reports.
			d.Sources["nvml_max_sm_clock_mhz"] = fmt.Sprintf("NVML max SM clock on this board: %d MHz", g.MaxSMClockMHz)
		}
	}
	if d.ComputeCapability == "" {
		d.ComputeCapability = g.ComputeCapability
	}
	return d
}
