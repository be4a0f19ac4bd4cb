// Package topology describes a box: device specs (Device: SMs, clocks,
// memory, dense peaks per dtype, launch costs, efficiency priors) and the
// link graph between GPUs (Topology: PCIe links with generation and width,
// PCIe switches, host bridges, CPU sockets and their UPI/xGMI link,
// NVLink/NVSwitch, NICs), with presets that cite their sources, JSON
// load/save with validation, and discovery of the local box from NVML
// readings (FromProbe; the cgo NVML reader is topology/nvmldiscover).
//
// Path model: the route between two GPUs is the lowest-latency one that
// does not transit another GPU, preferring NVLink (as NCCL does). A path
// has the nvidia-smi level (X, NV#, PIX, PXB, PHB, NODE, SYS), a
// bottleneck bandwidth per direction both as achieved (Link.BWGBps) and as
// NCCL's topology search rates it (PCIe width x speed / 80, the CPU
// vendor's inter-socket constant, Intel's x 5/6 root-complex overhead),
// and a latency (sum of link latencies). Share and MaxLinkTimeUs count the
// flows crossing each directed link, so two GPUs behind one switch uplink
// share it.
//
// Units: bandwidth GB/s (1e9 B/s) per direction, latency and durations in
// microseconds, memory in bytes, clocks in MHz, throughput in TFLOPS.
// topology imports nothing of tpscope's.
package topology
