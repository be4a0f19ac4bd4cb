package topology

import (
	"fmt"
	"io"
)

// PairMatrix is the modeled relation of every GPU pair, as `topo show`
// prints it: the nvidia-smi level, whether NCCL uses P2P under the given
// NCCL_P2P_LEVEL, and the modeled bandwidth (GB/s per direction) and
// latency (us) of the transfer NCCL would use (direct P2P, or the
// host-memory bounce when P2P is not allowed).
type PairMatrix struct {
	Topology string      `json:"topology"`
	P2PLevel string      `json:"p2p_level"`
	GPUs     []string    `json:"gpus"`
	Level    [][]string  `json:"level"`
	P2P      [][]bool    `json:"p2p"`
	BWGBps   [][]float64 `json:"bw_gbps"`
	NCCLGBps [][]float64 `json:"nccl_bw_gbps"`
	LatUs    [][]float64 `json:"lat_us"`
	// Affinity is each GPU's socket / NUMA node, like nvidia-smi's
	// "CPU Affinity / NUMA Affinity" columns.
	Socket []int `json:"socket"`
	NUMA   []int `json:"numa_node"`
	// HostRoute[i][j]: a hop from i to j through host memory has a route
	// (Topology.HostRoute); where it has none and P2P is off, the pair's
	// figures are 0.
	// Absent where every pair has one.
	HostRoute [][]bool `json:"host_route,omitempty"`
}

// Matrices computes the pair matrix under level (p2pDisable: no P2P at
// all, NCCL_P2P_DISABLE=1).
func (t *Topology) Matrices(level P2PLevel, p2pDisable bool) PairMatrix {
	n := len(t.GPUs)
	m := PairMatrix{Topology: t.Name, P2PLevel: level.String()}
	if p2pDisable {
		m.P2PLevel = "disabled"
	}
	for i := 0; i < n; i++ {
		m.GPUs = append(m.GPUs, t.GPUs[i].ID)
		m.Socket = append(m.Socket, t.GPUs[i].Socket)
		m.NUMA = append(m.NUMA, t.GPUs[i].NUMANode)
		lv := make([]string, n)
		p2p := make([]bool, n)
		bw := make([]float64, n)
		nb := make([]float64, n)
		lat := make([]float64, n)
		route := make([]bool, n)
		for j := 0; j < n; j++ {
			route[j] = t.HostRoute(i, j)
			p := t.Path(i, j)
			lv[j] = p.LevelString()
			if i == j {
				continue
			}
			p2p[j] = !p2pDisable && t.P2PAllowed(i, j, level)
			if p2p[j] {
				bw[j], nb[j], lat[j] = p.BWGBps, p.NCCLBWGBps, p.LatUs
			} else if route[j] {
				h := t.SHMHop(i, j)
				bw[j], nb[j], lat[j] = h.BWGBps, h.NCCLBWGBps, h.LatUs
			}
		}
		m.HostRoute = append(m.HostRoute, route)
		m.Level = append(m.Level, lv)
		m.P2P = append(m.P2P, p2p)
		m.BWGBps = append(m.BWGBps, bw)
		m.NCCLGBps = append(m.NCCLGBps, nb)
		m.LatUs = append(m.LatUs, lat)
	}
	if !m.anyNoHostRoute() {
		m.HostRoute = nil
	}
	return m
}

// NoHostRoute reports whether the hop from GPU i to GPU j goes through
// host memory (no P2P) and has no route there (Topology.HostRoute): its
// figures are 0, nothing priced.
func (m *PairMatrix) NoHostRoute(i, j int) bool {
	return len(m.HostRoute) > 0 && !m.P2P[i][j] && !m.HostRoute[i][j]
}

func (m *PairMatrix) anyNoHostRoute() bool {
	for i := range m.HostRoute {
		for j := range m.HostRoute[i] {
			if i != j && !m.HostRoute[i][j] {
				return true
			}
		}
	}
	return false
}

// anyNoHostCell reports whether a cell of the tables is a hop through
// host memory without a route (NoHostRoute), printed "-".
func (m *PairMatrix) anyNoHostCell() bool {
	for i := range m.GPUs {
		for j := range m.GPUs {
			if i != j && m.NoHostRoute(i, j) {
				return true
			}
		}
	}
	return false
}

// WriteTable prints the matrices as text tables in the layout of
// `nvidia-smi topo -m`.
func (m *PairMatrix) WriteTable(w io.Writer) {
	n := len(m.GPUs)
	header := func(title string) {
		fmt.Fprintf(w, "%s\n%-8s", title, "")
		for _, g := range m.GPUs {
			fmt.Fprintf(w, "%8s", g)
		}
	}
	header(fmt.Sprintf("Topology %s: link level (nvidia-smi topo -m)", m.Topology))
	fmt.Fprintf(w, "%8s%8s\n", "Socket", "NUMA")
	for i := 0; i < n; i++ {
		fmt.Fprintf(w, "%-8s", m.GPUs[i])
		for j := 0; j < n; j++ {
			fmt.Fprintf(w, "%8s", m.Level[i][j])
		}
		fmt.Fprintf(w, "%8d%8d\n", m.Socket[i], m.NUMA[i])
	}
	num := func(title string, v [][]float64, format string) {
		fmt.Fprintln(w)
		header(title)
		fmt.Fprintln(w)
		for i := 0; i < n; i++ {
			fmt.Fprintf(w, "%-8s", m.GPUs[i])
			for j := 0; j < n; j++ {
				if i == j {
					fmt.Fprintf(w, "%8s", "X")
					continue
				}
				s := fmt.Sprintf(format, v[i][j])
				if !m.P2P[i][j] {
					s += "*"
					if m.NoHostRoute(i, j) {
						s = "-"
					}
				}
				fmt.Fprintf(w, "%8s", s)
			}
			fmt.Fprintln(w)
		}
	}
	num(fmt.Sprintf("Modeled bandwidth per direction, GB/s (NCCL_P2P_LEVEL=%s; * = through host memory)", m.P2PLevel), m.BWGBps, "%.1f")
	num("NCCL's own model of the same paths, GB/s", m.NCCLGBps, "%.1f")
	num("Modeled latency, us", m.LatUs, "%.2f")
	fmt.Fprint(w, "\nLegend: X self; NV# NVLink (# links); PIX at most one PCIe switch; PXB several switches;")
	if m.anyNoHostCell() {
		fmt.Fprint(w, " - no route through host memory (GPUs of CPUs no link joins);")
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "PHB through a host bridge; NODE between host bridges of one NUMA node; SYS across sockets.")
}
