package topology

import "fmt"

// Topology is one box: device specs, GPUs, the other elements of the link
// graph (PCIe switches, host bridges, CPU sockets, NVSwitches, NICs) and
// the links between them, plus optional calibrated collective parameters.
//
// GPU i of the box is GPUs[i]; "rank" in sim is the index into GPUs. A
// Topology is immutable after Load/Resolve/a preset constructor returned
// it: the path table is built once (by Validate) and the query methods are
// safe for concurrent use.
type Topology struct {
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Sources     []string `json:"sources,omitempty"`

	Host    Host     `json:"host"`
	Devices []Device `json:"devices"`
	GPUs    []GPU    `json:"gpus"`
	Nodes   []Node   `json:"nodes"`
	Links   []Link   `json:"links"`

	// P2PUnsupported lists GPU ID pairs between which the driver refuses
	// P2P (discovery: NVML P2P status not OK), whatever NCCL_P2P_LEVEL says.
	P2PUnsupported [][2]string `json:"p2p_unsupported,omitempty"`

	// Calibration, when present, holds fitted collective parameters that
	// replace NCCL's constants in sim's collective model.
	Calibration *Calibration `json:"calibration,omitempty"`

	// WholeGPUs is the GPU count of the box a subset (Subset) was cut
	// from, 0 for a whole box: a deployment on the first GPUs still takes
	// a whole box, so counting boxes (serving's capacity) needs the box's
	// GPUs, not the subset's (BoxGPUs). A field, not derived from the
	// name, so that copies and JSON round trips keep it.
	WholeGPUs int `json:"whole_gpus,omitempty"`

	paths *pathTable // built by Validate; nil until then
}

// GPU is one accelerator in the box.
type GPU struct {
	// ID is the graph vertex name, unique among GPUs and Nodes ("gpu0").
	ID string `json:"id"`
	// Device names an entry of Topology.Devices.
	Device string `json:"device"`
	// BusID is the PCIe bus ID ("00000000:18:00.0"); empty for presets.
	BusID string `json:"bus_id,omitempty"`
	// NUMANode is the NUMA node the GPU is attached to (-1 unknown).
	NUMANode int `json:"numa_node"`
	// Socket is the CPU socket the GPU hangs off (-1 unknown).
	Socket int `json:"socket"`
	// CPUAffinity is the CPU list local to the GPU ("0-63,128-191").
	CPUAffinity string `json:"cpu_affinity,omitempty"`
	// PCIeGen, PCIeWidth are the max link generation and width of the
	// GPU's own PCIe link; Cur* the current ones (discovery only, they drop
	// at idle).
	PCIeGen      int `json:"pcie_gen,omitempty"`
	PCIeWidth    int `json:"pcie_width,omitempty"`
	CurPCIeGen   int `json:"cur_pcie_gen,omitempty"`
	CurPCIeWidth int `json:"cur_pcie_width,omitempty"`
}

// NodeKind is the kind of a non-GPU vertex of the link graph.
type NodeKind string

const (
	NodeCPU        NodeKind = "cpu"         // a CPU socket (its memory controller and SMP fabric)
	NodeHostBridge NodeKind = "host_bridge" // a PCIe root complex / root port of a CPU
	NodePCIeSwitch NodeKind = "pcie_switch" // a PCIe switch (or one virtual switch partition)
	NodeNVSwitch   NodeKind = "nvswitch"    // an NVSwitch fabric (all of a baseboard's NVSwitch chips as one vertex)
	NodeNIC        NodeKind = "nic"         // a network adapter (multi-node)
)

// Node is a non-GPU vertex of the link graph.
type Node struct {
	ID   string   `json:"id"`
	Kind NodeKind `json:"kind"`
	// Socket is the CPU socket the element belongs to (-1 none/unknown).
	Socket int    `json:"socket"`
	Name   string `json:"name,omitempty"` // model, e.g. "Broadcom PEX89104"
}

// LinkType is the physical kind of a link.
type LinkType string

const (
	LinkPCIe     LinkType = "pcie"     // PCIe (Gen, Width)
	LinkNVLink   LinkType = "nvlink"   // NVLink, Count bonded links
	LinkUPI      LinkType = "upi"      // Intel socket interconnect
	LinkXGMI     LinkType = "xgmi"     // AMD socket interconnect (Infinity Fabric)
	LinkInternal LinkType = "internal" // on-die fabric between a root complex and its CPU
	LinkNet      LinkType = "net"      // network (NIC to NIC)
)

// Link is an undirected, full-duplex link; bandwidths are per direction.
type Link struct {
	A    string   `json:"a"`
	B    string   `json:"b"`
	Type LinkType `json:"type"`
	// PCIe generation (1-6) and width (lanes) for LinkPCIe.
	Gen   int `json:"gen,omitempty"`
	Width int `json:"width,omitempty"`
	// Count is the number of bonded NVLinks for LinkNVLink.
	Count int `json:"count,omitempty"`
	// BWGBps is the bandwidth a GPU transfer achieves over this link per
	// direction (measured-like, used for predictions).
	BWGBps float64 `json:"bw_gbps"`
	// NCCLBWGBps is the bandwidth NCCL's topology search assigns to the
	// link (used to replay NCCL's own algorithm/protocol choice). 0 means
	// derive it from the type: PCIe width*speed/80 (Gen5 x16 = 48), socket
	// links from Host.InterSocketNCCLGBps.
	NCCLBWGBps float64 `json:"nccl_bw_gbps,omitempty"`
	// LatUs is the one-way latency the link adds to a path.
	LatUs  float64 `json:"lat_us"`
	Source string  `json:"source,omitempty"`
}

// Host describes the CPU side of the box.
type Host struct {
	// CPU is the assumed or discovered CPU model.
	CPU string `json:"cpu"`
	// Vendor is "amd" or "intel" (NCCL models their root complexes and
	// socket links differently).
	Vendor  string `json:"vendor"`
	Sockets int    `json:"sockets"`
	// InterSocketNCCLGBps is NCCL's model of the socket interconnect
	// (hardware.md: AMD 16, Intel Skylake 10, Sapphire Rapids 22, Emerald
	// Rapids 40 GB/s). It is what NCCL's tuner believes, not what the
	// link achieves (Link.BWGBps).
	InterSocketNCCLGBps float64 `json:"inter_socket_nccl_gbps,omitempty"`
	// SHMLatUs is the extra latency per ring step when a hop goes through
	// host memory (NCCL's SHM transport, P2P not allowed on that pair).
	SHMLatUs float64 `json:"shm_lat_us,omitempty"`
	// SHMBWGBps bounds the bandwidth of one hop through host memory.
	SHMBWGBps float64 `json:"shm_bw_gbps,omitempty"`
	// LaunchQueueDepth is how many kernel launches the host may run ahead
	// of the device (CUDA's pending-launch queue; 0 = unlimited).
	LaunchQueueDepth int `json:"launch_queue_depth,omitempty"`
	// CPURanksAtOnce is, on a CPU box, how many goroutine ranks 'tpscope
	// calibrate --backend cpu' measured at once and CPUCores the cores
	// they shared: each device's rates are those of one rank among that
	// many (0: not a CPU box, or a file that does not say).
	CPURanksAtOnce int               `json:"cpu_ranks_at_once,omitempty"`
	CPUCores       int               `json:"cpu_cores,omitempty"`
	Sources        map[string]string `json:"sources,omitempty"`
}

// Calibration holds fitted collective cost parameters with provenance.
type Calibration struct {
	// Source says where the fit came from ("nccl-tests all_reduce_perf
	// log box.txt, 8 ranks"), Created when (RFC 3339).
	Source  string `json:"source"`
	Created string `json:"created,omitempty"`
	// Collectives holds one entry per (op, algo, proto) fitted.
	Collectives []CollectiveParams `json:"collectives"`
}

// CollectiveParams replaces NCCL's constants for one (algorithm,
// protocol), optionally for one collective op:
//
//	time_us = BaseLatUs + steps * HwLatUs + bytes / (1000 * algBw)
//
// where algBw is derived from BusBWGBps by the collective's bus-to-algorithm
// factor. BusBWGBps was measured on a group of Ranks GPUs; sim scales it to
// other groups by the ratio of their modeled bandwidths.
type CollectiveParams struct {
	Op    string `json:"op,omitempty"` // "allreduce", ...; "" = every op
	Algo  string `json:"algo"`         // "Ring", "Tree"
	Proto string `json:"proto"`        // "LL", "LL128", "Simple"
	Ranks int    `json:"ranks"`
	// P2PLevel is the P2P setting the measurement ran under: the
	// NCCL_P2P_LEVEL name ("PXB" is NCCL's default) or "disabled"
	// (NCCL_P2P_DISABLE=1); sim applies the entry only under the same
	// setting. "" applies it under any setting.
	P2PLevel string `json:"p2p_level,omitempty"`
	// Channels is the ring's channel count the measurement ran, where
	// NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS set it (sim's count under
	// them); 0: NCCL's own count. sim scales BusBWGBps to the channels a
	// prediction runs by the ratio of their modeled bandwidths, as it
	// does across groups.
	Channels  int     `json:"channels,omitempty"`
	BaseLatUs float64 `json:"base_lat_us"`
	HwLatUs   float64 `json:"hw_lat_us"`
	BusBWGBps float64 `json:"bus_bw_gbps"`
	// Fit statistics: samples used, RMS relative error of the fit.
	Samples   int     `json:"samples,omitempty"`
	RMSRelErr float64 `json:"rms_rel_err,omitempty"`
}

// Level is the nvidia-smi topo -m relation between two GPUs. Levels order
// from closest to farthest: X < NV < PIX < PXB < PHB < NODE < SYS.
type Level int

const (
	LevelX    Level = iota // same GPU
	LevelNV                // NVLink (direct or through NVSwitch), printed NV#
	LevelPIX               // at most one PCIe switch
	LevelPXB               // several PCIe switches, no host bridge
	LevelPHB               // through one PCIe host bridge (CPU root complex)
	LevelNODE              // between host bridges of one NUMA node
	LevelSYS               // across the SMP interconnect between sockets
)

var levelNames = [...]string{"X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS"}

// String returns the level name ("NV" without the link count).
func (l Level) String() string {
	if l >= 0 && int(l) < len(levelNames) {
		return levelNames[l]
	}
	return "?"
}

// NumGPUs is the number of GPUs in the box.
func (t *Topology) NumGPUs() int { return len(t.GPUs) }

// BoxGPUs is the GPU count of the whole box: WholeGPUs for a subset, else
// NumGPUs.
func (t *Topology) BoxGPUs() int {
	if t.WholeGPUs > 0 {
		return t.WholeGPUs
	}
	return t.NumGPUs()
}

// ArchCPU is Device.Arch of a CPU rank: the devices of the box 'tpscope
// calibrate --backend cpu' writes, which are cores of this machine.
const ArchCPU = "cpu"

// IsCPUBox reports whether the box's devices are CPU ranks (ArchCPU), not
// GPUs: a measurement of the CPU backend is priced on such a box only.
func (t *Topology) IsCPUBox() bool {
	return len(t.Devices) > 0 && t.Devices[0].Arch == ArchCPU
}

// CPURanksCaveat says, for a run of running ranks at once priced on this
// CPU box, that the box's rates were measured with another number of
// ranks sharing the cores: a rank's rates are its share of them, so a
// run of fewer ranks than measured (a one-rank shard, a TP-2 plan on the
// box of 4) has faster ranks than the box prices, and one of more has
// slower. "" where they agree, on a GPU box, or where the box does not
// record its count.
func (t *Topology) CPURanksCaveat(running int) string {
	h := t.Host
	if !t.IsCPUBox() || h.CPURanksAtOnce <= 0 || running <= 0 || running == h.CPURanksAtOnce {
		return ""
	}
	cores := ""
	if h.CPUCores > 0 {
		cores = fmt.Sprintf(" on %d cores", h.CPUCores)
	}
	return fmt.Sprintf("%s: its rates were measured with %d goroutine ranks at once%s, and this run ran %d at once: each rank's share of the cores differs, so the prediction prices ranks of another speed (calibrate --backend cpu --ranks %d measures %d at once)",
		t.Name, h.CPURanksAtOnce, cores, running, running, running)
}

// DeviceOf returns the spec of GPU i (nil if i is out of range or the GPU
// names an unknown device; Validate rejects the latter).
func (t *Topology) DeviceOf(i int) *Device {
	if i < 0 || i >= len(t.GPUs) {
		return nil
	}
	for k := range t.Devices {
		if t.Devices[k].Name == t.GPUs[i].Device {
			return &t.Devices[k]
		}
	}
	return nil
}
