// Package topology describes a box: device specs (Device: SMs, clocks,
// memory, dense peaks per dtype, launch costs, kernel floors, efficiency
// priors) and the link graph between GPUs (Topology: PCIe links with
// generation and width, PCIe switches, host bridges, CPU sockets and their
// UPI/xGMI link, NVLink/NVSwitch, NICs), with JSON load/save with
// validation and discovery of the local box from NVML readings (FromProbe;
// the cgo NVML reader is topology/nvmldiscover).
//
// GPU catalog (catalog.json, embedded; GPUs, LookupGPU, MatchNVMLName,
// DeriveDevice): datasheet numbers per GPU with a source each, and per
// architecture the dense FLOP/clk/SM per dtype, NCCL's NVLink constant,
// the launch costs and the constants of the kernel floors. A kernel floor
// is derived per op kind, not fitted: (ramp + drain + the kind's serial SM
// cycles) / SM clock + the kind's dependent DRAM round trips x the round
// trip; it is the kernel's own device time, the CUDA-graph node gap
// (LaunchGraphUs) comes on top. Discovery maps NVML names onto the catalog;
// an unknown name gets peaks from its compute capability, SM count and
// clock.
//
// Boxes in one word (ParseBox, Box.Build, Resolve):
// "<fabric>:<count>x<gpu>[-gen<N>][-amd|-intel-spr|-intel-emr]" with the
// fabrics nvswitch, nvl, pcie-switch, pcie-1s and pcie-2s; the presets
// (rtxpro6000-2s, rtxpro6000-switch, h200-nvswitch) are aliases of such
// descriptions (PresetDescription), built the same way with the catalog's
// device. ReplicateOnto lays a discovered GPU onto a fabric.
//
// Path model: the route between two GPUs is the lowest-latency one that
// does not transit another GPU, preferring NVLink (as NCCL does). A path
// has the nvidia-smi level (X, NV#, PIX, PXB, PHB, NODE, SYS), a
// bottleneck bandwidth per direction both as achieved (Link.BWGBps) and as
// NCCL's topology search rates it (PCIe width x speed / 80, the CPU
// vendor's inter-socket constant, Intel's x 5/6 root-complex overhead),
// and a latency (sum of link latencies). Share and MaxLinkTimeUs count the
// flows crossing each directed link, so two GPUs behind one switch uplink
// share it. Group predicates (AllNVLink, P2PRefused, SpansSockets) are
// what the collective model and the optimization catalog both ask of a
// box.
//
// Units: bandwidth GB/s (1e9 B/s) per direction, latency and durations in
// microseconds, memory in bytes, clocks in MHz, throughput in TFLOPS.
// topology imports nothing of tpscope's.
package topology
