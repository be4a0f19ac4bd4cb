package topology

import (
	"fmt"
	"math"
	"strings"
)

// Path is the route between two GPUs (or a GPU and a CPU) through the link
// graph, as chosen by the router: the lowest-latency route that does not
// transit another GPU (GPUs do not forward traffic). Bandwidths are per
// direction in GB/s, latency in microseconds.
type Path struct {
	From, To int // GPU indices (To may be -1 for a GPU->CPU path)
	Level    Level
	// NVLinks is the number of bonded NVLinks of the narrowest NVLink hop
	// when Level is LevelNV (printed NV#), else 0.
	NVLinks int
	// BWGBps is the bottleneck link bandwidth (what a transfer achieves).
	BWGBps float64
	// NCCLBWGBps is the bottleneck as NCCL's topology search rates it,
	// including the Intel root-complex P2P overhead (x 5/6) when the path
	// crosses a CPU of an Intel host.
	NCCLBWGBps float64
	LatUs      float64
	// edges are directed edge IDs: 2*linkIndex + dir (dir 0 = A->B).
	edges []int32
}

// LevelString prints the level as nvidia-smi does ("NV18", "PIX", "SYS").
func (p *Path) LevelString() string {
	if p.Level == LevelNV {
		return fmt.Sprintf("NV%d", p.NVLinks)
	}
	return p.Level.String()
}

// pathTable holds the precomputed path between every ordered GPU pair and
// from every GPU to the CPU of its socket (for host-memory bounce paths).
type pathTable struct {
	n      int
	gpu    []Path // n*n, row-major [from*n+to]
	toHost []Path // GPU i -> its nearest CPU
	// hostToGPU[c*n+j]: CPU vertex c (index into cpus) -> GPU j.
	hostToGPU []Path
	cpus      []int // vertex indices of CPU nodes
	hostOf    []int // index into cpus of GPU i's nearest CPU (-1 none)
	edgeBW    []float64
	edgeNCCL  []float64
	edgeName  []string
	// nvswitches[i]: the NVSwitch nodes GPU i has an NVLink to, bit k for
	// the k-th NVSwitch node of Nodes (NVSwitchJoined).
	nvswitches []uint64
}

// nonNVLinkPenaltyUs makes the router prefer any all-NVLink route over a
// PCIe one; it is removed from no reported number (Path.LatUs sums link
// latencies only).
const nonNVLinkPenaltyUs = 1000

type adjEdge struct {
	to   int
	edge int32 // directed edge ID
}

// build computes every path. It returns an error naming the GPU that has
// no route to another GPU.
func (t *Topology) buildPaths() error {
	n := len(t.GPUs)
	nv := n + len(t.Nodes)
	index := make(map[string]int, nv)
	for i, g := range t.GPUs {
		index[g.ID] = i
	}
	for i, nd := range t.Nodes {
		index[nd.ID] = n + i
	}
	kind := func(v int) NodeKind {
		if v < n {
			return "gpu"
		}
		return t.Nodes[v-n].Kind
	}
	adj := make([][]adjEdge, nv)
	pt := &pathTable{n: n}
	pt.edgeBW = make([]float64, 2*len(t.Links))
	pt.edgeNCCL = make([]float64, 2*len(t.Links))
	pt.edgeName = make([]string, 2*len(t.Links))
	for li, l := range t.Links {
		a, b := index[l.A], index[l.B]
		adj[a] = append(adj[a], adjEdge{b, int32(2 * li)})
		adj[b] = append(adj[b], adjEdge{a, int32(2*li + 1)})
		nb := t.linkNCCLBW(&l)
		pt.edgeBW[2*li], pt.edgeBW[2*li+1] = l.BWGBps, l.BWGBps
		pt.edgeNCCL[2*li], pt.edgeNCCL[2*li+1] = nb, nb
		pt.edgeName[2*li] = fmt.Sprintf("%s(%s->%s)", l.Type, l.A, l.B)
		pt.edgeName[2*li+1] = fmt.Sprintf("%s(%s->%s)", l.Type, l.B, l.A)
	}
	linkOf := func(e int32) *Link { return &t.Links[e/2] }
	// Each NVSwitch node's bit, and each GPU's NVLinks to those nodes.
	switchBit := make(map[int]uint64)
	for i, nd := range t.Nodes {
		if nd.Kind == NodeNVSwitch && len(switchBit) < 64 {
			switchBit[n+i] = 1 << uint(len(switchBit))
		}
	}
	pt.nvswitches = make([]uint64, n)
	for _, l := range t.Links {
		if l.Type != LinkNVLink {
			continue
		}
		a, b := index[l.A], index[l.B]
		if a < n {
			pt.nvswitches[a] |= switchBit[b]
		}
		if b < n {
			pt.nvswitches[b] |= switchBit[a]
		}
	}

	// Dijkstra from src over latency (+ a tiny per-hop term so equal
	// latency prefers fewer hops); GPUs other than src are sinks.
	dist := make([]float64, nv)
	prevEdge := make([]int32, nv)
	prevVert := make([]int, nv)
	done := make([]bool, nv)
	route := func(src int) {
		for v := range dist {
			dist[v] = math.Inf(1)
			prevEdge[v] = -1
			prevVert[v] = -1
			done[v] = false
		}
		dist[src] = 0
		for {
			u := -1
			for v := 0; v < nv; v++ { // O(V^2): graphs have tens of vertices
				if !done[v] && !math.IsInf(dist[v], 1) && (u < 0 || dist[v] < dist[u]) {
					u = v
				}
			}
			if u < 0 {
				return
			}
			done[u] = true
			if u != src && kind(u) == "gpu" {
				continue // GPUs do not forward
			}
			for _, ae := range adj[u] {
				l := linkOf(ae.edge)
				w := l.LatUs + 1e-6
				if l.Type != LinkNVLink {
					// NCCL routes GPU pairs over NVLink whenever it can.
					w += nonNVLinkPenaltyUs
				}
				if d := dist[u] + w; d < dist[ae.to] {
					dist[ae.to] = d
					prevEdge[ae.to] = ae.edge
					prevVert[ae.to] = u
				}
			}
		}
	}
	trace := func(src, dst int) ([]int32, []int, bool) {
		if math.IsInf(dist[dst], 1) {
			return nil, nil, false
		}
		var edges []int32
		var verts []int
		for v := dst; v != src; v = prevVert[v] {
			edges = append(edges, prevEdge[v])
			if v != dst {
				verts = append(verts, v)
			}
		}
		for i, j := 0, len(edges)-1; i < j; i, j = i+1, j-1 {
			edges[i], edges[j] = edges[j], edges[i]
		}
		for i, j := 0, len(verts)-1; i < j; i, j = i+1, j-1 {
			verts[i], verts[j] = verts[j], verts[i]
		}
		return edges, verts, true
	}
	intel := strings.EqualFold(t.Host.Vendor, "intel")
	mkPath := func(from, to int, edges []int32, verts []int) Path {
		p := Path{From: from, To: to, edges: edges, BWGBps: math.Inf(1), NCCLBWGBps: math.Inf(1)}
		allNV := len(edges) > 0
		minNV := math.MaxInt
		for _, e := range edges {
			l := linkOf(e)
			p.LatUs += l.LatUs
			p.BWGBps = math.Min(p.BWGBps, pt.edgeBW[e])
			p.NCCLBWGBps = math.Min(p.NCCLBWGBps, pt.edgeNCCL[e])
			if l.Type == LinkNVLink {
				minNV = min(minNV, max(l.Count, 1))
			} else {
				allNV = false
			}
		}
		var cpus, hbs, sws int
		for _, v := range verts {
			switch kind(v) {
			case NodeCPU:
				cpus++
			case NodeHostBridge:
				hbs++
			case NodePCIeSwitch:
				sws++
			}
		}
		switch {
		case from == to:
			p.Level = LevelX
		case allNV:
			p.Level, p.NVLinks = LevelNV, minNV
		case cpus >= 2:
			p.Level = LevelSYS
		case hbs >= 2:
			p.Level = LevelNODE
		case hbs == 1 || cpus == 1:
			p.Level = LevelPHB
		case sws >= 2:
			p.Level = LevelPXB
		default:
			p.Level = LevelPIX
		}
		if (cpus > 0 || hbs > 0) && intel {
			// NCCL src/graph/paths.cc: P2P through an Intel root complex
			// consumes bandwidth x 6/5 (INTEL_P2P_OVERHEAD); nccl-model.md.
			p.NCCLBWGBps *= 5.0 / 6.0
		}
		if len(edges) == 0 {
			p.BWGBps, p.NCCLBWGBps = 0, 0
		}
		return p
	}

	pt.gpu = make([]Path, n*n)
	pt.toHost = make([]Path, n)
	pt.hostOf = make([]int, n)
	for v := n; v < nv; v++ {
		if kind(v) == NodeCPU {
			pt.cpus = append(pt.cpus, v)
		}
	}
	for i := 0; i < n; i++ {
		route(i)
		for j := 0; j < n; j++ {
			if i == j {
				pt.gpu[i*n+j] = Path{From: i, To: j, Level: LevelX}
				continue
			}
			edges, verts, ok := trace(i, j)
			if !ok {
				return fmt.Errorf("gpu %q: no path to gpu %q through the links", t.GPUs[i].ID, t.GPUs[j].ID)
			}
			pt.gpu[i*n+j] = mkPath(i, j, edges, verts)
		}
		pt.hostOf[i] = -1
		best := math.Inf(1)
		for ci, c := range pt.cpus {
			if dist[c] < best {
				best, pt.hostOf[i] = dist[c], ci
			}
		}
		if pt.hostOf[i] >= 0 {
			edges, verts, _ := trace(i, pt.cpus[pt.hostOf[i]])
			pt.toHost[i] = mkPath(i, -1, edges, verts)
		}
	}
	pt.hostToGPU = make([]Path, len(pt.cpus)*n)
	for ci, c := range pt.cpus {
		route(c)
		for j := 0; j < n; j++ {
			if edges, verts, ok := trace(c, j); ok {
				pt.hostToGPU[ci*n+j] = mkPath(-1, j, edges, verts)
			}
		}
	}
	t.paths = pt
	return nil
}

// ncclPCIeGBps is NCCL's model of a PCIe link: width * speed / 80 GB/s with
// speed per generation in NCCL's units (nccl-model.md / hardware.md: Gen5
// x16 = 48, Gen4 x16 = 24 GB/s; each generation doubles).
func ncclPCIeGBps(gen, width int) float64 {
	if gen < 1 || width < 1 {
		return 0
	}
	speed := 15.0 * math.Pow(2, float64(gen-1)) // Gen1 15 ... Gen5 240
	return float64(width) * speed / 80
}

// linkNCCLBW is the bandwidth NCCL's search gives link l.
func (t *Topology) linkNCCLBW(l *Link) float64 {
	if l.NCCLBWGBps > 0 {
		return l.NCCLBWGBps
	}
	switch l.Type {
	case LinkPCIe:
		return ncclPCIeGBps(l.Gen, l.Width)
	case LinkUPI, LinkXGMI:
		if t.Host.InterSocketNCCLGBps > 0 {
			return t.Host.InterSocketNCCLGBps
		}
	case LinkInternal:
		// NCCL src/graph/topo.h LOC_BW 5000: on-die links never bind.
		return 5000
	}
	return l.BWGBps
}

// Path returns the path from GPU i to GPU j. It panics if the topology was
// not validated or i, j are out of range (programmer errors).
func (t *Topology) Path(i, j int) *Path {
	return &t.mustPaths().gpu[i*t.paths.n+j]
}

func (t *Topology) mustPaths() *pathTable {
	if t.paths == nil {
		panic("topology: path query on a topology that was not validated (use Load, Resolve, a preset or Validate)")
	}
	return t.paths
}

// P2PLevel is an NCCL_P2P_LEVEL value as an NCCL path type rank: LOC 0,
// NVL 1, NVB 2, PIX 3, PXB 4, PXN 5, PHB 6, SYS 7.
type P2PLevel int

const (
	P2PLOC P2PLevel = 0
	P2PNVL P2PLevel = 1
	P2PNVB P2PLevel = 2
	P2PPIX P2PLevel = 3
	P2PPXB P2PLevel = 4
	P2PPXN P2PLevel = 5
	P2PPHB P2PLevel = 6
	P2PSYS P2PLevel = 7
)

// DefaultP2PLevel is NCCL's default NCCL_P2P_LEVEL (nccl-model.md: PXB, no
// P2P across a host bridge).
const DefaultP2PLevel = P2PPXB

// ParseP2PLevel parses an NCCL_P2P_LEVEL value (case-insensitive). The
// empty string is the default, PXB. NCCL also accepts the legacy integers
// 0-5 (0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 SYS, 5 SYS) and "NODE" as PHB.
func ParseP2PLevel(s string) (P2PLevel, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "":
		return DefaultP2PLevel, nil
	case "LOC", "0":
		return P2PLOC, nil
	case "NVL":
		return P2PNVL, nil
	case "NVB":
		return P2PNVB, nil
	case "PIX", "1":
		return P2PPIX, nil
	case "PXB", "2":
		return P2PPXB, nil
	case "PXN":
		return P2PPXN, nil
	case "PHB", "NODE", "3":
		return P2PPHB, nil
	case "SYS", "4", "5":
		return P2PSYS, nil
	}
	return 0, fmt.Errorf("NCCL_P2P_LEVEL %q: want LOC, NVL, NVB, PIX, PXB, PXN, PHB or SYS", s)
}

// String returns the NCCL name of the level.
func (l P2PLevel) String() string {
	names := [...]string{"LOC", "NVL", "NVB", "PIX", "PXB", "PXN", "PHB", "SYS"}
	if l >= 0 && int(l) < len(names) {
		return names[l]
	}
	return "?"
}

// NCCLPathType maps an nvidia-smi level to NCCL's path type: NV -> NVL,
// NODE -> PHB (NCCL does not distinguish host bridges of one CPU).
func (l Level) NCCLPathType() P2PLevel {
	switch l {
	case LevelX:
		return P2PLOC
	case LevelNV:
		return P2PNVL
	case LevelPIX:
		return P2PPIX
	case LevelPXB:
		return P2PPXB
	case LevelPHB, LevelNODE:
		return P2PPHB
	}
	return P2PSYS
}

// P2PAllowed reports whether NCCL uses P2P between GPUs i and j under the
// given NCCL_P2P_LEVEL: the path type must not be farther than the level,
// and the pair must not be listed in P2PUnsupported (driver or BIOS says
// no, from discovery).
func (t *Topology) P2PAllowed(i, j int, level P2PLevel) bool {
	if i == j {
		return true
	}
	if t.Path(i, j).Level.NCCLPathType() > level {
		return false
	}
	for _, p := range t.P2PUnsupported {
		a, b := t.gpuIndex(p[0]), t.gpuIndex(p[1])
		if (a == i && b == j) || (a == j && b == i) {
			return false
		}
	}
	return true
}

func (t *Topology) gpuIndex(id string) int {
	for i, g := range t.GPUs {
		if g.ID == id {
			return i
		}
	}
	return -1
}

// SHMHop is the route of a GPU-to-GPU transfer through host memory (NCCL's
// SHM transport): GPU i up to the CPU of its socket, then down to GPU j.
// BWGBps is bounded by Host.SHMBWGBps when set; LatUs adds Host.SHMLatUs.
func (t *Topology) SHMHop(i, j int) Path {
	pt := t.mustPaths()
	up := pt.toHost[i]
	c := pt.hostOf[i]
	if c < 0 {
		return *t.Path(i, j) // no CPU in the graph: fall back to the direct path
	}
	down := pt.hostToGPU[c*pt.n+j]
	p := Path{From: i, To: j, Level: t.Path(i, j).Level}
	p.edges = append(append([]int32{}, up.edges...), down.edges...)
	p.BWGBps = math.Min(up.BWGBps, down.BWGBps)
	p.NCCLBWGBps = math.Min(up.NCCLBWGBps, down.NCCLBWGBps)
	if t.Host.SHMBWGBps > 0 {
		p.BWGBps = math.Min(p.BWGBps, t.Host.SHMBWGBps)
	}
	p.LatUs = up.LatUs + down.LatUs + t.Host.SHMLatUs
	return p
}

// HostRoute reports whether a hop from GPU i to GPU j through host memory
// (SHMHop) has a route in the graph: GPU j hangs below the CPU nearest GPU
// i, or one linked to it. A box whose CPUs share no link (the Grace CPUs
// of an NVL72 rack, nvlRack) has none between GPUs of two CPUs. Without a
// CPU in the graph SHMHop falls back to the direct path, a route.
func (t *Topology) HostRoute(i, j int) bool {
	pt := t.mustPaths()
	c := pt.hostOf[i]
	return i == j || c < 0 || len(pt.hostToGPU[c*pt.n+j].edges) > 0
}

// Flow is one simultaneous transfer between two GPUs. Via, when true,
// routes it through host memory (SHMHop) instead of the direct path.
type Flow struct {
	From, To int
	ViaHost  bool
}

// Sharing is the result of a shared-link query.
type Sharing struct {
	// PerFlowGBps is the rate every flow gets when all flows run at the
	// same rate (a ring moves at its slowest hop): min over directed links
	// of capacity / flows crossing it.
	PerFlowGBps float64
	// Bottleneck names the binding directed link, e.g.
	// "pcie(sw0->hb0)", and Flows how many flows share it.
	Bottleneck string
	Flows      int
}

// Share computes the per-flow bandwidth of a set of simultaneous,
// equal-rate flows, with every directed link's capacity split among the
// flows crossing it (two GPUs behind one switch uplink share it). ncclBW
// selects NCCL's link model instead of the achieved bandwidths. O(total
// hops). Flows between the same GPU are ignored.
func (t *Topology) Share(flows []Flow, ncclBW bool) Sharing {
	pt := t.mustPaths()
	var counts [64]int
	var cnt []int
	if 2*len(t.Links) <= len(counts) {
		cnt = counts[:2*len(t.Links)]
	} else {
		cnt = make([]int, 2*len(t.Links))
	}
	viaHost := false // some flow bounces through host memory
	for _, f := range flows {
		if f.From == f.To {
			continue
		}
		edges := pt.gpu[f.From*pt.n+f.To].edges
		if f.ViaHost {
			viaHost = true
			edges = t.SHMHop(f.From, f.To).edges
		}
		for _, e := range edges {
			cnt[e]++
		}
	}
	s := Sharing{PerFlowGBps: math.Inf(1)}
	for e, c := range cnt {
		if c == 0 {
			continue
		}
		bw := pt.edgeBW[e]
		if ncclBW {
			bw = pt.edgeNCCL[e]
		}
		if r := bw / float64(c); r < s.PerFlowGBps {
			s.PerFlowGBps, s.Bottleneck, s.Flows = r, pt.edgeName[e], c
		}
	}
	// Per-hop caps that are not links: the host-memory bounce.
	if viaHost && !ncclBW && t.Host.SHMBWGBps > 0 && t.Host.SHMBWGBps < s.PerFlowGBps {
		s.PerFlowGBps, s.Bottleneck, s.Flows = t.Host.SHMBWGBps, "host memory (SHM)", 1
	}
	if math.IsInf(s.PerFlowGBps, 1) {
		s.PerFlowGBps = 0
	}
	return s
}

// LinkLoad is the traffic a set of transfers puts on one directed link.
type LinkLoad struct {
	Link  string
	Bytes float64
	GBps  float64
	// Us is Bytes / GBps: the time the link needs to carry its load.
	Us float64
}

// MaxLinkTimeUs returns the time the busiest directed link needs to carry
// bytesPerFlow for every flow (flows given as GPU pairs): max over links
// of load/capacity. It models all-to-all and one-shot patterns where flows
// run concurrently and the busiest link finishes last. ncclBW selects
// NCCL's link model.
func (t *Topology) MaxLinkTimeUs(flows []Flow, bytesPerFlow float64, ncclBW bool) LinkLoad {
	pt := t.mustPaths()
	load := make([]float64, 2*len(t.Links))
	for _, f := range flows {
		if f.From == f.To {
			continue
		}
		edges := pt.gpu[f.From*pt.n+f.To].edges
		if f.ViaHost {
			edges = t.SHMHop(f.From, f.To).edges
		}
		for _, e := range edges {
			load[e] += bytesPerFlow
		}
	}
	var worst LinkLoad
	for e, b := range load {
		if b == 0 {
			continue
		}
		bw := pt.edgeBW[e]
		if ncclBW {
			bw = pt.edgeNCCL[e]
		}
		if us := b / (1000 * bw); us > worst.Us {
			worst = LinkLoad{Link: pt.edgeName[e], Bytes: b, GBps: bw, Us: us}
		}
	}
	return worst
}

// AllNVLink reports whether NVLink joins every pair of gpus (every GPU of
// the box when gpus is nil); false for a nil Topology.
func (t *Topology) AllNVLink(gpus []int) bool {
	if t == nil {
		return false
	}
	if gpus == nil {
		gpus = make([]int, t.NumGPUs())
		for i := range gpus {
			gpus[i] = i
		}
	}
	for _, a := range gpus {
		for _, b := range gpus {
			if a != b && t.Path(a, b).Level != LevelNV {
				return false
			}
		}
	}
	return true
}

// NVSwitchJoined reports whether every GPU of gpus (nil: all) has an
// NVLink to one NVSwitch fabric node: the group can map multicast memory
// (NVLink SHARP), which an NVLink bridge or PCIe cannot. False for a nil
// Topology, an empty group or a GPU index out of range.
func (t *Topology) NVSwitchJoined(gpus []int) bool {
	if t == nil || t.NumGPUs() == 0 {
		return false
	}
	pt := t.mustPaths()
	shared := ^uint64(0)
	if gpus == nil {
		for _, m := range pt.nvswitches {
			shared &= m
		}
		return shared != 0
	}
	for _, g := range gpus {
		if g < 0 || g >= pt.n {
			return false
		}
		shared &= pt.nvswitches[g]
	}
	return len(gpus) > 0 && shared != 0
}

// P2PRefused returns the first pair of gpus (in order a, then b) between
// which the driver refuses P2P at any NCCL_P2P_LEVEL (no P2P path, or
// P2PUnsupported); refused is false when every pair may use it. A kernel
// that reads peers' buffers directly (a custom all-reduce) needs every
// pair.
func (t *Topology) P2PRefused(gpus []int) (a, b int, refused bool) {
	for _, a := range gpus {
		for _, b := range gpus {
			if a != b && !t.P2PAllowed(a, b, P2PSYS) {
				return a, b, true
			}
		}
	}
	return 0, 0, false
}

// SpansSockets reports whether the first n GPUs sit on more than one CPU
// socket.
func (t *Topology) SpansSockets(n int) bool {
	for i := 1; i < n && i < t.NumGPUs(); i++ {
		if t.GPUs[i].Socket != t.GPUs[0].Socket {
			return true
		}
	}
	return false
}
