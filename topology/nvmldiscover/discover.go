// Package nvmldiscover reads the local box through NVML
// (github.com/NVIDIA/go-nvml, cgo; libnvidia-ml.so.1 is loaded at run
// time, so it builds without the driver) into a topology.Probe and builds
// the topology with topology.FromProbe, which takes each GPU's spec from
// topology's GPU catalog by its NVML name (topology.MatchNVMLName) or
// derives it from the compute capability, SM count and clock
// (topology.DeriveDevice). It is a separate package so that topology
// itself stays free of cgo.
package nvmldiscover

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/tpscope/tpscope/topology"
)

// ErrNoNVML is wrapped by the error Discover returns when the NVML library
// cannot be loaded or initialized (no NVIDIA driver).
var ErrNoNVML = errors.New("NVML not available")

// Discover probes the local box and builds its topology.
func Discover() (*topology.Topology, *topology.Probe, error) {
	p, err := ProbeNVML()
	if err != nil {
		return nil, nil, err
	}
	t, err := topology.FromProbe(p)
	return t, p, err
}

// ProbeNVML reads every GPU NVML sees. It returns an error wrapping
// ErrNoNVML when the library is missing (a one-line message, no panic).
func ProbeNVML() (p *topology.Probe, err error) {
	defer func() {
		// go-nvml panics on some symbol-lookup failures of old drivers.
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("%w: %v", ErrNoNVML, r)
		}
	}()
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			return nil, fmt.Errorf("%w (libnvidia-ml.so.1 not found): %v", ErrNoNVML, ret)
		}
		return nil, fmt.Errorf("%w: nvmlInit: %v", ErrNoNVML, ret)
	}
	defer nvml.Shutdown()
	p = &topology.Probe{}
	p.Hostname, _ = os.Hostname()
	if v, ret := nvml.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		p.Driver = v
	}
	p.CPUVendor, p.CPUModel = topology.CPUInfo()
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvmlDeviceGetCount: %v", ret)
	}
	if n == 0 {
		return nil, errors.New("NVML sees no GPU")
	}
	devs := make([]nvml.Device, n)
	for i := range devs {
		d, ret := nvml.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("nvmlDeviceGetHandleByIndex(%d): %v", i, ret)
		}
		devs[i] = d
		p.GPUs = append(p.GPUs, probeGPU(d))
	}
	p.Ancestor = make([][]int, n)
	p.P2PRead = make([][]bool, n)
	for i := range devs {
		p.Ancestor[i] = make([]int, n)
		p.P2PRead[i] = make([]bool, n)
		for j := range devs {
			if i == j {
				p.P2PRead[i][j] = true
				continue
			}
			lvl, ret := devs[i].GetTopologyCommonAncestor(devs[j])
			if ret != nvml.SUCCESS {
				lvl = nvml.TOPOLOGY_SYSTEM
			}
			p.Ancestor[i][j] = int(lvl)
			st, ret := devs[i].GetP2PStatus(devs[j], nvml.P2P_CAPS_INDEX_READ)
			p.P2PRead[i][j] = ret == nvml.SUCCESS && st == nvml.P2P_STATUS_OK
		}
	}
	return p, nil
}

func probeGPU(d nvml.Device) topology.ProbeGPU {
	g := topology.ProbeGPU{NUMANode: -1}
	g.Name, _ = d.GetName()
	g.UUID, _ = d.GetUUID()
	if pci, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
		g.BusID = cString(pci.BusId[:])
	}
	if ma, mi, ret := d.GetCudaComputeCapability(); ret == nvml.SUCCESS {
		g.ComputeCapability = fmt.Sprintf("%d.%d", ma, mi)
	}
	g.CUDACores, _ = d.GetNumGpuCores()
	if v, ret := d.GetMaxClockInfo(nvml.CLOCK_SM); ret == nvml.SUCCESS {
		g.MaxSMClockMHz = int(v)
	}
	if v, ret := d.GetMaxClockInfo(nvml.CLOCK_MEM); ret == nvml.SUCCESS {
		g.MaxMemClockMHz = int(v)
	}
	if v, ret := d.GetMemoryBusWidth(); ret == nvml.SUCCESS {
		g.MemBusWidthBits = int(v)
	}
	if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
		g.MemBytes = int64(m.Total)
	}
	if v, ret := d.GetNumaNodeId(); ret == nvml.SUCCESS && v >= 0 {
		g.NUMANode = v
	} else if words, ret := d.GetMemoryAffinity(64, nvml.AFFINITY_SCOPE_NODE); ret == nvml.SUCCESS {
		// nvmlDeviceGetNumaNodeId is the GPU's own NUMA node (coherent
		// GPU memory); for a PCIe GPU the nearest host memory node is
		// the memory affinity, as nvidia-smi topo -m prints it.
		g.NUMANode = firstBit(words)
	}
	if words, ret := d.GetCpuAffinity(1024); ret == nvml.SUCCESS {
		g.CPUAffinity = cpuList(words)
	}
	g.PCIeGen, _ = d.GetMaxPcieLinkGeneration()
	g.PCIeWidth, _ = d.GetMaxPcieLinkWidth()
	g.CurPCIeGen, _ = d.GetCurrPcieLinkGeneration()
	g.CurPCIeWidth, _ = d.GetCurrPcieLinkWidth()
	for l := 0; l < nvml.NVLINK_MAX_LINKS; l++ {
		st, ret := d.GetNvLinkState(l)
		if ret != nvml.SUCCESS || st != nvml.FEATURE_ENABLED {
			continue
		}
		rp, ret := d.GetNvLinkRemotePciInfo(l)
		if ret != nvml.SUCCESS {
			continue
		}
		if g.NVLinks == nil {
			g.NVLinks = map[string]int{}
		}
		g.NVLinks[cString(rp.BusId[:])]++
	}
	return g
}

// firstBit is the index of the lowest set bit of a bitmask of 64-bit
// words, -1 if none.
func firstBit(words []uint) int {
	for w, x := range words {
		for b := 0; b < 64; b++ {
			if x&(1<<uint(b)) != 0 {
				return 64*w + b
			}
		}
	}
	return -1
}

func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// cpuList turns NVML's affinity bitmask (64-bit words, CPU 0 in bit 0 of
// word 0) into a list like "0-63,128-191".
func cpuList(words []uint) string {
	var parts []string
	start := -1
	total := len(words) * 64
	for c := 0; c <= total; c++ {
		on := c < total && words[c/64]&(1<<(uint(c)%64)) != 0
		if on && start < 0 {
			start = c
		}
		if !on && start >= 0 {
			if start == c-1 {
				parts = append(parts, fmt.Sprint(start))
			} else {
				parts = append(parts, fmt.Sprintf("%d-%d", start, c-1))
			}
			start = -1
		}
	}
	return strings.Join(parts, ",")
}
