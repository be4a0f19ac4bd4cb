package topology

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// maxVertices bounds the graph so a hostile file cannot make path building
// (O(GPUs x vertices^2)) slow; real boxes have tens of vertices.
const maxVertices = 1024

// maxLinkGBps bounds a link's bandwidth per direction (Link.BWGBps).
const maxLinkGBps = 1e5

// Validate checks the topology and builds its path table. Errors name the
// element (device, gpu, node or link) and the field, e.g.
// `link 3 (gpu0-sw9): unknown endpoint "sw9"`. Path queries need a
// validated topology; Load, Resolve and the presets call Validate.
func (t *Topology) Validate() error {
	if err := t.validate(); err != nil {
		if t.Name != "" {
			return fmt.Errorf("topology %q: %w", t.Name, err)
		}
		return fmt.Errorf("topology: %w", err)
	}
	return t.buildPaths()
}

func (t *Topology) validate() error {
	if len(t.GPUs) == 0 {
		return errors.New("gpus: no GPU")
	}
	if t.WholeGPUs != 0 && t.WholeGPUs < len(t.GPUs) {
		return fmt.Errorf("whole_gpus %d: want 0 (a whole box) or at least the box's %d gpus (the box a subset was cut from)", t.WholeGPUs, len(t.GPUs))
	}
	if len(t.GPUs)+len(t.Nodes) > maxVertices {
		return fmt.Errorf("%d gpus + %d nodes: more than %d vertices", len(t.GPUs), len(t.Nodes), maxVertices)
	}
	devs := map[string]bool{}
	for i := range t.Devices {
		d := &t.Devices[i]
		if err := d.Validate(); err != nil {
			return fmt.Errorf("devices[%d]: %w", i, err)
		}
		// The compute capability names the family; an arch that says
		// another would price the collectives with that family's NCCL
		// limits and the kernels with this one's. (Here, not in
		// Device.Validate, which the catalog's own entries pass through
		// while the catalog is built.)
		if a, ok := ArchForCC(d.ComputeCapability); ok && d.Arch != ArchCPU && d.Arch != "" && d.Arch != a.Family {
			return fmt.Errorf("devices[%d]: device %q: arch %q contradicts compute_capability %s, a %s GPU: want arch %q", i, d.Name, d.Arch, d.ComputeCapability, a.Family, a.Family)
		}
		if devs[d.Name] {
			return fmt.Errorf("devices[%d]: duplicate device name %q", i, d.Name)
		}
		devs[d.Name] = true
	}
	ids := map[string]string{}
	for i, g := range t.GPUs {
		if g.ID == "" {
			return fmt.Errorf("gpus[%d]: empty id", i)
		}
		if prev, dup := ids[g.ID]; dup {
			return fmt.Errorf("gpu %q: id already used by %s", g.ID, prev)
		}
		ids[g.ID] = "a gpu"
		if !devs[g.Device] {
			return fmt.Errorf("gpu %q: device %q is not in devices", g.ID, g.Device)
		}
		// sim prices every rank with one device's specs and one engine
		// profile (its GPU architecture): a box of mixed GPU models is
		// not one it can price, so it is refused here, where the file
		// and field are known, not after the work has started.
		if g.Device != t.GPUs[0].Device {
			return fmt.Errorf("gpus[%d].device: %q, want %q as gpus[0] (a box of mixed GPU models is not modelled)", i, g.Device, t.GPUs[0].Device)
		}
		if g.PCIeGen < 0 || g.PCIeGen > 7 || g.PCIeWidth < 0 || g.PCIeWidth > 32 {
			return fmt.Errorf("gpu %q: pcie gen %d width %d out of range", g.ID, g.PCIeGen, g.PCIeWidth)
		}
	}
	for i, nd := range t.Nodes {
		if nd.ID == "" {
			return fmt.Errorf("nodes[%d]: empty id", i)
		}
		if prev, dup := ids[nd.ID]; dup {
			return fmt.Errorf("node %q: id already used by %s", nd.ID, prev)
		}
		ids[nd.ID] = "a node"
		switch nd.Kind {
		case NodeCPU, NodeHostBridge, NodePCIeSwitch, NodeNVSwitch, NodeNIC:
		default:
			return fmt.Errorf("node %q: unknown kind %q (want cpu, host_bridge, pcie_switch, nvswitch, nic)", nd.ID, nd.Kind)
		}
	}
	for i, l := range t.Links {
		where := fmt.Sprintf("link %d (%s-%s)", i, l.A, l.B)
		if _, ok := ids[l.A]; !ok {
			return fmt.Errorf("%s: unknown endpoint %q", where, l.A)
		}
		if _, ok := ids[l.B]; !ok {
			return fmt.Errorf("%s: unknown endpoint %q", where, l.B)
		}
		if l.A == l.B {
			return fmt.Errorf("%s: link joins %q to itself", where, l.A)
		}
		switch l.Type {
		case LinkPCIe:
			if l.Gen < 1 || l.Gen > 7 {
				return fmt.Errorf("%s: pcie gen %d (want 1-7)", where, l.Gen)
			}
			switch l.Width {
			case 1, 2, 4, 8, 16, 32:
			default:
				return fmt.Errorf("%s: pcie width %d (want 1, 2, 4, 8, 16 or 32)", where, l.Width)
			}
		case LinkNVLink:
			if l.Count < 0 || l.Count > 64 {
				return fmt.Errorf("%s: nvlink count %d (want 0-64)", where, l.Count)
			}
		case LinkUPI, LinkXGMI, LinkInternal, LinkNet:
		default:
			return fmt.Errorf("%s: unknown link type %q (want pcie, nvlink, upi, xgmi, internal, net)", where, l.Type)
		}
		if !(l.BWGBps > 0) || math.IsInf(l.BWGBps, 0) {
			return fmt.Errorf("%s: bw_gbps must be > 0, got %v", where, l.BWGBps)
		}
		// No link carries 100 TB/s (NVLink 5: 900 GB/s a direction); a
		// larger figure is bytes per second in a GB/s field.
		if l.BWGBps > maxLinkGBps {
			return fmt.Errorf("%s: bw_gbps %v: want GB/s, at most %.0f (54 GB/s is 54, not 54000000000): a value in B/s?", where, l.BWGBps, float64(maxLinkGBps))
		}
		if !(l.NCCLBWGBps >= 0) || math.IsInf(l.NCCLBWGBps, 0) {
			return fmt.Errorf("%s: nccl_bw_gbps must be >= 0, got %v", where, l.NCCLBWGBps)
		}
		if !(l.LatUs >= 0) || math.IsInf(l.LatUs, 0) {
			return fmt.Errorf("%s: lat_us must be >= 0, got %v", where, l.LatUs)
		}
	}
	if err := t.validateTree(); err != nil {
		return err
	}
	h := t.Host
	switch h.Vendor {
	case "", "amd", "intel", "arm", "nvidia":
	default:
		return fmt.Errorf("host: unknown vendor %q (want amd, intel, arm, nvidia)", h.Vendor)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"sockets", float64(h.Sockets)}, {"inter_socket_nccl_gbps", h.InterSocketNCCLGBps},
		{"shm_lat_us", h.SHMLatUs}, {"shm_bw_gbps", h.SHMBWGBps}, {"launch_queue_depth", float64(h.LaunchQueueDepth)}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			return fmt.Errorf("host: %s must be >= 0, got %v", f.name, f.v)
		}
	}
	// A GPU box sends a collective's hops through host memory beyond
	// NCCL_P2P_LEVEL or with P2P disabled, at these two costs; a file
	// without them (a host block written by hand) had priced those hops
	// free. CPU ranks share one process's memory and have neither.
	if !t.IsCPUBox() {
		// The bounds lie far outside any host's (a bounce of 2-30 us at
		// 5-100 GB/s) and inside what the same number in a neighbouring
		// unit would read: a latency in seconds (14e-6), a bandwidth in
		// B/s (2.7e10), as gpuUnitRanges bounds the GPU's fields.
		for _, f := range []struct {
			name, want string
			v, lo, hi  float64
		}{{"shm_lat_us", "us, 0.1 to 100000 (14 us is 14, not 1.4e-05)", h.SHMLatUs, 0.1, 1e5},
			{"shm_bw_gbps", "GB/s, 0.1 to 100000 (27 GB/s is 27, not 2.7e+10)", h.SHMBWGBps, 0.1, 1e5}} {
			if !(f.v > 0) {
				return fmt.Errorf("host.%s: missing or 0, want the cost of a GPU-to-GPU hop through host memory, which NCCL takes beyond NCCL_P2P_LEVEL or with P2P disabled (the presets: shm_lat_us 14, shm_bw_gbps 27 on PCIe Gen5; 'tpscope topo show PRESET -o FILE' writes a complete file)", f.name)
			}
			if f.v < f.lo || f.v > f.hi {
				return fmt.Errorf("host.%s %v: want %s: a value in another unit?", f.name, f.v, f.want)
			}
		}
	}
	for k, p := range t.P2PUnsupported {
		for _, id := range p {
			if ids[id] != "a gpu" {
				return fmt.Errorf("p2p_unsupported[%d]: %q is not a gpu", k, id)
			}
		}
	}
	if c := t.Calibration; c != nil {
		for k, p := range c.Collectives {
			where := fmt.Sprintf("calibration.collectives[%d] (%s %s/%s)", k, p.Op, p.Algo, p.Proto)
			switch p.Op {
			case "", "allreduce", "allgather", "reducescatter", "alltoall":
			default:
				return fmt.Errorf("%s: unknown op %q", where, p.Op)
			}
			switch p.Algo {
			case "Ring", "Tree":
			default:
				return fmt.Errorf("%s: unknown algo %q (want Ring, Tree)", where, p.Algo)
			}
			switch p.Proto {
			case "LL", "LL128", "Simple":
			default:
				return fmt.Errorf("%s: unknown proto %q (want LL, LL128, Simple)", where, p.Proto)
			}
			// sim applies an entry only where its p2p_level is the
			// prediction's setting as P2PCondition names it: any other
			// spelling ("sys", "2", a typo) would never apply, without a
			// word.
			if l, err := ParseP2PLevel(p.P2PLevel); p.P2PLevel != "" && p.P2PLevel != "disabled" && (err != nil || l.String() != p.P2PLevel) {
				return fmt.Errorf("%s: p2p_level %q: want \"disabled\" or an NCCL_P2P_LEVEL name as NCCL spells it (LOC, NVL, NVB, PIX, PXB, PXN, PHB, SYS)", where, p.P2PLevel)
			}
			if p.Ranks < 1 {
				return fmt.Errorf("%s: ranks must be >= 1, got %d", where, p.Ranks)
			}
			if p.Channels < 0 {
				return fmt.Errorf("%s: channels must be >= 0 (0: NCCL's own count), got %d", where, p.Channels)
			}
			if !(p.BusBWGBps > 0) || math.IsInf(p.BusBWGBps, 0) {
				return fmt.Errorf("%s: bus_bw_gbps must be > 0, got %v", where, p.BusBWGBps)
			}
			if !(p.BaseLatUs >= 0) || !(p.HwLatUs >= 0) || math.IsInf(p.BaseLatUs+p.HwLatUs, 0) {
				return fmt.Errorf("%s: base_lat_us and hw_lat_us must be >= 0", where)
			}
		}
	}
	return nil
}

// inTree reports whether a link is part of the PCIe hierarchy: PCIe links
// and the on-die links from root complexes to their CPU.
func inTree(l *Link) bool { return l.Type == LinkPCIe || l.Type == LinkInternal }

// validateTree checks that the PCIe hierarchy (pcie and internal links) is
// a forest in which every element has one way up to at most one CPU. PCIe
// is a tree: a device or switch has one upstream port and a root complex
// belongs to one socket. A GPU with two PCIe links, a cycle, or an element
// under two CPUs has no single path level (PIX, PXB, PHB, NODE) and would
// let the router send traffic over a path the box does not have. Errors
// name the node. Links must already be checked (endpoints exist).
func (t *Topology) validateTree() error {
	up := map[string][]string{} // GPU id -> its tree neighbours
	gpu := map[string]bool{}
	for _, g := range t.GPUs {
		gpu[g.ID] = true
	}
	cpu := map[string]bool{}
	for _, nd := range t.Nodes {
		if nd.Kind == NodeCPU {
			cpu[nd.ID] = true
		}
	}
	for i := range t.Links {
		l := &t.Links[i]
		if !inTree(l) {
			continue
		}
		for _, end := range [2][2]string{{l.A, l.B}, {l.B, l.A}} {
			if gpu[end[0]] {
				up[end[0]] = append(up[end[0]], end[1])
			}
		}
	}
	for _, g := range t.GPUs {
		if p := up[g.ID]; len(p) > 1 {
			return fmt.Errorf("gpu %q: %d PCIe parents (%s): want one (a GPU has one PCIe upstream port)", g.ID, len(p), quoteList(p))
		}
	}
	// Union-find over the tree links in file order; the first link whose
	// ends are already joined closes a cycle.
	parent := map[string]string{}
	var find func(string) string
	find = func(v string) string {
		p, ok := parent[v]
		if !ok || p == v {
			return v
		}
		r := find(p)
		parent[v] = r
		return r
	}
	adj := map[string][]string{}
	for i := range t.Links {
		l := &t.Links[i]
		if !inTree(l) {
			continue
		}
		ra, rb := find(l.A), find(l.B)
		if ra == rb {
			cyc := append(treePath(adj, l.B, l.A), l.B)
			return fmt.Errorf("link %d (%s-%s): node %q closes a cycle in the PCIe tree (%s): want one path from each element up to its CPU", i, l.A, l.B, l.A, strings.Join(cyc, " - "))
		}
		parent[ra] = rb
		adj[l.A] = append(adj[l.A], l.B)
		adj[l.B] = append(adj[l.B], l.A)
	}
	// At most one CPU per tree: an element whose tree reaches two CPUs has
	// two ways up.
	first := map[string]string{} // tree root -> its first CPU (in node order)
	for _, nd := range t.Nodes {
		if !cpu[nd.ID] {
			continue
		}
		r := find(nd.ID)
		other, seen := first[r]
		if !seen {
			first[r] = nd.ID
			continue
		}
		path := treePath(adj, other, nd.ID)
		mid := path[len(path)/2]
		return fmt.Errorf("node %q hangs under two CPUs through PCIe (%s): want one upstream link per PCIe element", mid, strings.Join(path, " - "))
	}
	return nil
}

// treePath returns the vertices from a to b in the forest adj (a and b in
// one tree), both ends included.
func treePath(adj map[string][]string, a, b string) []string {
	prev := map[string]string{a: a}
	queue := []string{a}
	for len(queue) > 0 && prev[b] == "" {
		v := queue[0]
		queue = queue[1:]
		for _, w := range adj[v] {
			if _, ok := prev[w]; !ok {
				prev[w] = v
				queue = append(queue, w)
			}
		}
	}
	var rev []string
	for v := b; v != a; v = prev[v] {
		if prev[v] == "" {
			return []string{a, b} // not joined: cannot happen for callers
		}
		rev = append(rev, v)
	}
	rev = append(rev, a)
	slices.Reverse(rev)
	return rev
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}
