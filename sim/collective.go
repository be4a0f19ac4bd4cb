package sim

// Collective cost model: NCCL's own tuning model (src/graph/tuning.cc, see
// ../shared/reference/nccl-model.md) replayed on a topology, plus a
// prediction of the time the box actually takes.
//
// Per (algorithm, protocol), NCCL predicts
//
//	time_us = latency_us + bytes / (1000 * algBw_GBps)
//	latency = baseLat[algo][proto] + steps * hwLat[pathType][algo][proto]
//	busBw   = nChannels * bwIntra   (the ring's bottleneck, links shared)
//	algBw   = busBw * protocolFactor * busToAlg(op, n)
//
// and runs the pair with the least predicted time among the enabled ones.
// tpscope replays that choice with NCCL's link model (Link.NCCLBWGBps,
// Host.InterSocketNCCLGBps: what NCCL believes), then predicts the time of
// the chosen pair with the links' achieved bandwidths, the host-memory
// (SHM) hops where P2P is not allowed, the latency of the ring's slowest
// P2P hop (below), and calibrated constants when the topology carries
// them. Both times are reported.
//
// Hop latency. NCCL's hwLat is one number per link class (PCI, NVLink)
// and is what NCCL uses to choose; it does not see that a P2P hop across
// the sockets' interconnect is longer than one inside a root complex. A
// ring advances in lockstep, so every step waits for its slowest hop: the
// ring latency is 2(n-1) x the maximum hop latency (NCCL maintainer,
// github.com/NVIDIA/nccl-tests/issues/123: "network_latency should be
// called max_latency"). tpscope's prediction therefore adds, per step,
// the slowest P2P hop's path latency (Topology.Path LatUs) beyond the hop
// NCCL's hwLat prices (assumption): for PCI, a direct-attach P2P write
// inside one root complex, measured at 0.36-0.45 us (hardware.md; 0.4 us,
// pcieRefHopUs); for NVLink, the box's fastest NVLink pair (hardware.md
// gives no NVLink latency). On the dual-socket preset a cross-socket hop
// (0.8 us): +0.4 us per step, +5.6 us for an 8-GPU ring all-reduce.
// Host-memory hops keep their SHM latency; calibrated constants replace
// all of it.
//
// Units: bytes, microseconds, GB/s (1e9 B/s).

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"
	"sync"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/topology"
)

// Algorithm and protocol indices: ncclenv's, as array indices.
const (
	algoRing = int(ncclenv.Ring)
	algoTree = int(ncclenv.Tree)
	numAlgos = int(ncclenv.NumAlgorithms)

	protoLL     = int(ncclenv.LL)
	protoLL128  = int(ncclenv.LL128)
	protoSimple = int(ncclenv.Simple)
	numProtos   = int(ncclenv.NumProtocols)
)

var (
	algoNames  = [numAlgos]string{ncclenv.Ring.String(), ncclenv.Tree.String()}
	protoNames = [numProtos]string{ncclenv.LL.String(), ncclenv.LL128.String(), ncclenv.Simple.String()}
)

// NCCL constants (nccl-model.md, from NCCL src/graph/tuning.cc 2.23-2.30).
var (
	// baseLat[algo][proto], us.
	ncclBaseLatUs = [numAlgos][numProtos]float64{
		{6.6, 14.0, 8.4}, // Ring
		{6.8, 14.0, 8.4}, // Tree
	}
	// hwLat[path][algo][proto], us. path 0 NVLink, 1 PCI.
	ncclHwLatUs = [2][numAlgos][numProtos]float64{
		{{0.6, 1.9, 3.4}, {0.6, 1.25, 4.0}}, // NVLink: Ring, Tree
		{{1.0, 2.5, 5.7}, {1.0, 1.9, 4.0}},  // PCI: Ring, Tree
	}
)

const (
	pathNVLink = 0
	pathPCI    = 1
)

// Per-architecture bandwidth caps (nccl-model.md unless marked).
type archCaps struct {
	llMaxBwGBps          float64 // single node
	perChMaxTreeBwGBps   float64
	perChMaxRingLL128Bws float64
}

func capsFor(arch string) archCaps {
	switch strings.ToLower(arch) {
	case "blackwell":
		// nccl-model.md: llMaxBw 282, perChMaxTreeBw 70. perChMaxRingLL128Bw
		// 40: assumption (NCCL tuning.cc table, not in nccl-model.md).
		return archCaps{282, 70, 40}
	default:
		// nccl-model.md: Hopper llMaxBw 141, perChMaxTreeBw 38.7;
		// perChMaxRingLL128Bw 36.7: assumption (NCCL tuning.cc table).
		// Other architectures use Hopper's numbers (assumption).
		return archCaps{141, 38.7, 36.7}
	}
}

// Channel counts. NVLink: 16 (assumption: what NCCL's search typically
// settles on there). PCIe: see pcieRingChannels.
//
// NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS (ncclenv.Settings.Channels)
// change how many channels run (ncclTopoPostset caps and copies
// comm->nChannels), not NCCL's choice of algorithm and protocol: its
// tuning model prices busBw = graphs[a]->nChannels x bwIntra with the
// search's graph channels (src/graph/tuning.cc ncclTopoTuneModel), which
// neither variable touches. So NCCL's view (ringNCCLBw, the per-channel
// caps of protoBusBw) keeps NCCL's own count (groupInfo.ncclChannels) and
// the choice stays where NCCL puts it; tpscope's prediction prices the
// channels that run (groupInfo.channels): a channel is one CTA, so the
// ring's bandwidth (busAt) and the LL128 / Tree per-channel caps scale
// with the count until the links bind (Topology.Share).
//
// What one channel moves: on PCIe, pcieChannelP2PGBps (measured, below).
// On NVLink, the links' share over NCCL's own count (assumption: NCCL's
// model, busBw = nChannels x bwIntra, with its search packing channels of
// bwIntra onto the links until they are full), so NCCL's count reaches
// the links, more channels add nothing and fewer take their part away.
const (
	pcieChannels   = 2
	nvlinkChannels = 16
)

// A PCIe ring's bandwidth is set by how many channels NCCL runs and what
// one channel moves, before the links bind.
//
// Channels: NCCL's search finds one ring at the per-channel bandwidth its
// link model allows (PCIe Gen5 x16 48 GB/s, an AMD socket link 16 GB/s,
// nccl-model.md), doubles the channels when that is at least 25 GB/s
// (src/graph/search.cc, ncclTopoCompute: bwIntra >= 25.0 -> dupChannels),
// and ncclTopoPostset (src/graph/connect.cc) doubles them once more: 2
// channels on a dual-socket AMD box (NCCL sees the ring at 16 GB/s), 4 on
// a switch box.
//
// Per channel: a channel is one CTA streaming posted P2P writes to its
// ring neighbour through its root port. On PCIe Gen5 it sustains 11.1
// GB/s (pcieChannelP2PGBps), below the 53-56 GB/s a copy engine or many
// CTAs reach on the same link (hardware.md's P2P write efficiency, 54 of
// 63 GB/s raw) and below a socket crossing's 39-51 GB/s.
//
// So an 8-GPU dual-socket ring reaches 2 x 11.1 = 22 GB/s bus bandwidth,
// not the 45 GB/s its slowest link (the socket crossing) would allow;
// more channels (NCCL_MIN_NCHANNELS) lift it until the root complexes and
// the socket link bind (37.6 GB/s measured with 8 channels on the box
// below; the model's 8 x 11.1 = 88.8 GB/s is above the socket crossing's
// 45, so the links' share binds there and 32 MB prices at 42 GB/s). The
// links' share model (Topology.Share: P2P write efficiency per link, the
// socket link per crossing flow) remains the bound beside the channels'.
const (
	// ncclDupChannelsGBps: NCCL's search-time channel duplication
	// threshold (search.cc).
	ncclDupChannelsGBps = 25.0
	// pcieChannelP2PGBps: all_reduce_perf bus bandwidth at 32 MB with
	// NCCL's default channels, 22.2 GB/s, on a dual EPYC Turin box with 8
	// RTX PRO 6000 Server GPUs direct-attached (Festr; voipmonitor/rtx6kpro
	// hardware/pcie-bandwidth.md, "NCCL AllReduce Bus Bandwidth"), over the
	// 2 channels NCCL runs there; the same box measured 37.6 GB/s with
	// NCCL_MIN_NCHANNELS=8, so at the default the channels bind, not the
	// fabric. A measurement of another box of the seed's class, not of any
	// table tpscope is tested against.
	pcieChannelP2PGBps = 22.2 / 2
)

// pcieRingChannels is the channel count NCCL runs for a PCIe ring whose
// per-flow bandwidth in NCCL's own link model is ncclGBps, before
// NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS.
func pcieRingChannels(ncclGBps float64) int {
	if ncclGBps >= ncclDupChannelsGBps {
		return 2 * pcieChannels
	}
	return pcieChannels
}

// Tree and LL128 protocol factors (nccl-model.md).
const (
	treeBwFactor    = 0.92
	treeLLFactor    = 1 / 3.8
	treeLL128Factor = 7.0 / 9.0
	ringLL128Factor = 0.92
	ringLLFactor    = 0.5
)

// pcieRefHopUs: the PCIe P2P hop NCCL's hwLat[PCI] is taken to price
// (assumption): a direct-attach GPU-to-GPU write inside one root complex,
// measured at 0.36-0.45 us (hardware.md); the middle, 0.4 us.
const pcieRefHopUs = 0.4

// p2pLLThresholdBytes: NCCL uses LL for a send/recv of at most this many
// bytes per peer (NCCL_P2P_LL_THRESHOLD default 16384).
const p2pLLThresholdBytes = 16384

// Custom all-reduce (vLLM-style, over CUDA IPC P2P) constants.
const (
	// customARBaseUs: kernel start + flag setup of a custom all-reduce
	// (assumption: one kernel of a CUDA graph, about 3 us; calibrate).
	// Datacenter Blackwell takes vLLM's measurement instead
	// (customARBlackwell).
	customARBaseUs = 3.0
	// p2pReadEfficiency: a custom all-reduce reads peers' buffers; PCIe
	// P2P reads reach less than posted writes (assumption: 0.8). NVLink
	// reads run at full speed.
	p2pReadEfficiency = 0.8
)

// ncclBlackwellStepUs: the latency a step of NCCL's ring or tree adds on
// NVLink between datacenter Blackwell GPUs (compute capability 10.x)
// beyond the hwLat NCCL's tuning model carries for every NVLink
// generation. vLLM measured NCCL's all-reduce (pynccl, CUDA graphs) on
// SM 10.3 GPUs joined by NVSwitch at 29 us for 16 KiB (PR #37756, the
// table customARBlackwell cites; its world size read as 8), where NCCL's
// own model and the links give 15.1 us on 8 GPUs (Ring/LL, 14 steps): 1.0
// us more a step (TestNCCLBlackwell checks the row is reproduced). Hopper's NCCL rows
// (aiconfigurator's h200_sxm, 16 us at 4 KiB) match the model without
// it. Held out against aiconfigurator's B200 NCCL table and vLLM PR
// #24111's B200 pynccl rows (TestNCCLBlackwell).
const ncclBlackwellStepUs = 1.0

// customARBlackwell: vLLM's custom all-reduce kernels on datacenter
// Blackwell (compute capability 10.x), as vLLM measured them on SM 10.3
// GPUs joined by NVSwitch (PR #37756, "Add SM 10.3 (B300/GB300)
// all-reduce communicator tuning", its benchmark_device_communicators
// table: bf16, CUDA graphs): the one-stage kernel (ca_1stage) takes 7 us
// at 16 KiB and 8-9 us to 256 KiB, the two-stage one (ca_2stage) 19 us at
// 16 KiB and 19-23 us to 1 MiB, where the link terms of the model above
// (barriers x pair latency, bytes x link load) give 1.5-2 us and the 3 us
// base 4.5-5. So the kernels' fixed time on these GPUs is the cited
// 16-KiB time less the group's own link terms at 16 KiB (anchorBytes);
// the terms carry the rest. The same kernel runs in SGLang (sgl-kernel's
// copy). Checked, held out, against aiconfigurator's B200 custom
// all-reduce table (TestCustomARBlackwell). The table's world size is not
// in the text read (6 or 8); at 16 KiB the link terms differ by under
// 0.1 us between them. Other families keep customARBaseUs: no Hopper
// measurement of the kernels outside the tables tpscope is tested
// against was found.
var customARBlackwell = struct {
	anchorBytes          float64
	oneShotUs, twoShotUs float64
}{16 << 10, 7, 19}

// customARFixedUs is the fixed part (kernel start, flag setup and
// fences) of the custom all-reduce's one-stage [0] and two-stage [1]
// kernels on group g: vLLM's Blackwell measurement where datacenter
// Blackwell GPUs are joined by NVLink, the base elsewhere.
func (m *CollectiveModel) customARFixedUs(g *groupInfo) [2]float64 {
	if !m.blackwellDC || g.pathType != pathNVLink {
		return [2]float64{customARBaseUs, customARBaseUs}
	}
	b := customARBlackwell.anchorBytes
	one := customARBlackwell.oneShotUs - (2*g.maxPairLatUs + b*g.customUsPerByte)
	two := customARBlackwell.twoShotUs - (3*g.maxPairLatUs + 2*b/float64(g.n)*g.customUsPerByte)
	return [2]float64{math.Max(0, one), math.Max(0, two)}
}

// Torch's symmetric-memory multimem all-reduce (vLLM's SymmMemCommunicator
// on the world sizes that take it). multimem_all_reduce_ launches at most
// 8 CTAs of 1,024 threads (pytorch torch/csrc/distributed/c10d/symm_mem/
// CUDASymmetricMemoryOps.cu: init_elementwise_launch_config(..., 8, 1024,
// ...)), each thread one 16-byte multimem ld_reduce and store per step
// over its rank's share of the message between two barriers, so the
// kernel runs far below the NVLink bandwidth (vLLM issue #33459: "Torch
// symm AllReduce seems suboptimal on 8xB200 (fixed CTA count?)") and
// costs a fixed part plus a time per byte of a rank's share. Both come
// from vLLM's own measurement of the kernel on 8 Hopper GPUs (vLLM PR
// #42324, its multimem column at 0.5-47.84 MiB: 11, 14, 16, 18, 23, 27,
// 46, 87, 165, 244 us), fitted by relative least squares: 8.65 us and
// 4.82 us per MiB of message, 38.55 us per MiB of a rank's share
// (TestMultimemMatchesVLLM). Blackwell takes Hopper's figures (no fit):
// held out against vLLM PR #24111's B200 rows, within 12 % on 6 GPUs and
// 21 % on 8 (the same test).
const (
	multimemBaseUs         = 8.65
	multimemUsPerShareByte = 38.55 / (1 << 20)
)

// CollectiveCost is the predicted cost of one collective call.
type CollectiveCost struct {
	// TimeUs is the predicted time = LatencyUs + LinkUs.
	TimeUs    float64
	LatencyUs float64 // fixed part
	LinkUs    float64 // bandwidth part: bytes / (1000 * AlgBWGBps_effective)
	// Algo is "Ring", "Tree", "P2P" (all-to-all as grouped send/recv),
	// "OneShot", "TwoShot" (custom all-reduce) or "" for a no-op.
	Algo  string
	Proto string
	// AlgBWGBps = bytes / TimeUs and BusBWGBps = AlgBW x the nccl-tests
	// factor (all-reduce 2(n-1)/n, others (n-1)/n), both in GB/s.
	AlgBWGBps float64
	BusBWGBps float64
	// NCCLTimeUs is NCCL's own estimate for the chosen pair (NCCL constants,
	// NCCL's link model); the pair is the one with the least NCCLTimeUs.
	NCCLTimeUs float64
	// NCCLLatencyUs is the latency term of NCCLTimeUs (baseLat + steps x
	// hwLat with NCCL's constants).
	NCCLLatencyUs float64
	Channels      int
	// SHMHops is how many of the ring's hops go through host memory.
	SHMHops    int
	Calibrated bool
	// Bottleneck names the binding directed link of the bandwidth term.
	Bottleneck string
}

// groupInfo is everything about a GPU group that does not depend on the
// message size, computed once per group.
type groupInfo struct {
	mask     uint64
	n        int
	pathType int // pathNVLink or pathPCI (NCCL's intra-node hwLat row)
	// ncclChannels is the channel count NCCL computes itself (its
	// search and duplication), what its tuning model prices; channels
	// the count that runs, ncclChannels after NCCL_MIN_NCHANNELS /
	// NCCL_MAX_NCHANNELS (ncclenv.Settings.Channels).
	ncclChannels, channels int
	shmHops                int
	shmFrac                float64 // fraction of ring hops through host memory
	// hopExtraUs: the ring's slowest P2P hop latency minus the box's
	// fastest GPU-pair path of the same link class (added per step to
	// tpscope's latency, not to NCCL's); a2aHopExtraUs the same over all
	// P2P pairs (all-to-all).
	hopExtraUs, a2aHopExtraUs float64
	// archStepUs: what a step of NCCL's algorithms takes beyond NCCL's
	// own hwLat on this group's NVLink generation (ncclBlackwellStepUs),
	// added to tpscope's latency, not to NCCL's.
	archStepUs float64
	// Ring (and chain for Tree) bottleneck bus bandwidth, GB/s: the
	// links' share bound (Topology.Share, before channels), tpscope's
	// prediction at the channels that run (busAt) and NCCL's view.
	ringShareBw, treeShareBw float64
	ringShareNeck            string
	ringBw, ringNCCLBw       float64
	treeBw, treeNCCLBw       float64
	ringNeck                 string
	// all-to-all: us per byte sent to each peer, on the busiest link.
	a2aPerByte  float64
	a2aNeckName string
	// custom all-reduce: all pairs allowed for P2P by the driver (p2pRefused).
	customOK        bool
	customUsPerByte float64 // busiest link, us per byte per pair
	customNeck      string
	maxPairLatUs    float64
	customFixedUs   [2]float64 // one-stage, two-stage kernels' fixed time (customARFixedUs)
	// multicast: the group's NVSwitch maps multicast memory
	// (MulticastJoined), which the multimem all-reduce needs.
	multicast bool
	protoOn   [3][numProtos]bool // per collOps[:3]: the protocols NCCL may run for the op on this group (its NCCL_PROTO clause, LL128 on NVLink by default)

	// Per (op, algo, proto), precomputed so Cost is a few multiply-adds:
	// NCCL's latency and us per byte, tpscope's latency and us per byte.
	ncclLat, ncclUsPerByte [3][numAlgos][numProtos]float64
	lat, usPerByte         [3][numAlgos][numProtos]float64
	calibrated             [3][numAlgos][numProtos]bool
}

// CollectiveModel predicts collective costs on one topology under one set
// of NCCL options. Build it once with NewCollectiveModel; Cost is then a
// few arithmetic operations plus a cached per-group lookup. It is safe for
// concurrent use.
type CollectiveModel struct {
	topo  *topology.Topology
	opts  ncclenv.Settings
	level topology.P2PLevel
	caps  archCaps
	// blackwellDC: the box's GPUs are datacenter Blackwell (compute
	// capability 10.x), whose NVLink collectives take the measured terms
	// (ncclBlackwellStepUs, customARBlackwell).
	blackwellDC bool
	protoOn     [3][numProtos]int8 // per collOps[:3]: NCCL_PROTO's protocols for the op (its own clause where it has one): 1 on, 0 off, -1 default (LL128: NVLink only)
	a2aLL       bool               // send/recv may run LL (ncclenv.Parsed.Protocols of a function NCCL does not have)
	algoOn      [3][numAlgos]bool  // per collOps[:3]: NCCL_ALGO's algorithms for the op (its own clause where it has one)
	calib       [4][numAlgos][numProtos]*topology.CollectiveParams
	calibLevel  string

	// refLatUs[pathNVLink|pathPCI]: the path latency of the hop NCCL's
	// hwLat prices: the box's fastest NVLink pair; pcieRefHopUs for PCI.
	refLatUs [2]float64

	mu     sync.RWMutex
	groups map[uint64]*groupInfo
}

// NewCollectiveModel validates the options and prepares the model. The
// topology must be validated (Load, Resolve, Preset).
func NewCollectiveModel(t *topology.Topology, o ncclenv.Settings) (*CollectiveModel, error) {
	if t == nil || t.NumGPUs() == 0 {
		return nil, fmt.Errorf("collective model: empty topology")
	}
	if t.NumGPUs() > 64 {
		return nil, fmt.Errorf("collective model: %d GPUs; at most 64 per box are modeled", t.NumGPUs())
	}
	m := &CollectiveModel{topo: t, opts: o, groups: map[uint64]*groupInfo{}}
	parsed, err := o.Parse()
	if err != nil {
		return nil, errors.Unwrap(err) // NCCL's message, without the field
	}
	m.level = parsed.P2PLevel
	for oi, op := range collOps[:3] {
		m.algoOn[oi] = parsed.Algorithms(ncclenv.Collective(op))
		m.protoOn[oi] = parsed.Protocols(ncclenv.Collective(op))
	}
	m.a2aLL = parsed.Protocols(ncclenv.Collective(model.AllToAll))[ncclenv.LL] != 0
	// A hop through host memory without a route (P2P off on an NVL72
	// rack's GPUs of two Graces) is refused per group, for the GPUs a
	// plan uses (HostRouteRefusal, ValidateGroup), not for the box.
	dev := t.DeviceOf(0)
	m.caps = capsFor(dev.Arch)
	a, ok := engprof.ArchOf(dev.ComputeCapability)
	m.blackwellDC = ok && a == engprof.SM100
	m.refLatUs = [2]float64{math.Inf(1), pcieRefHopUs}
	for i := 0; i < t.NumGPUs(); i++ {
		for j := 0; j < t.NumGPUs(); j++ {
			if pa := t.Path(i, j); i != j && pathClass(pa) == pathNVLink {
				m.refLatUs[pathNVLink] = math.Min(m.refLatUs[pathNVLink], pa.LatUs)
			}
		}
	}
	m.calibLevel = o.P2PCondition()
	if c := t.Calibration; c != nil && !o.IgnoreCalibration {
		for k := range c.Collectives {
			p := &c.Collectives[k]
			if p.P2PLevel != "" && p.P2PLevel != m.calibLevel {
				continue
			}
			a, pr := indexOf(algoNames[:], p.Algo), indexOf(protoNames[:], p.Proto)
			if a < 0 || pr < 0 {
				continue
			}
			for oi, op := range collOps {
				if p.Op == "" && m.calib[oi][a][pr] == nil || p.Op == string(op) {
					m.calib[oi][a][pr] = p
				}
			}
		}
	}
	return m, nil
}

// pathClass is NCCL's hwLat row of a GPU-pair path.
func pathClass(pa *topology.Path) int {
	if pa.Level == topology.LevelNV {
		return pathNVLink
	}
	return pathPCI
}

// hopExtra is the latency of a P2P path beyond the hop NCCL's hwLat
// prices for its class, us (never negative).
func (m *CollectiveModel) hopExtra(pa *topology.Path) float64 {
	return math.Max(0, pa.LatUs-m.refLatUs[pathClass(pa)])
}

var collOps = [4]model.Collective{model.AllReduce, model.AllGather, model.ReduceScatter, model.AllToAll}

func opIndex(op model.Collective) int {
	for i, o := range collOps {
		if o == op {
			return i
		}
	}
	return -1
}

func indexOf(names []string, s string) int {
	for i, n := range names {
		if strings.EqualFold(n, s) {
			return i
		}
	}
	return -1
}

// ValidateGroup checks that group names distinct GPUs of the topology.
func (m *CollectiveModel) ValidateGroup(group []int) error {
	var seen uint64
	for _, r := range group {
		if r < 0 || r >= m.topo.NumGPUs() {
			return fmt.Errorf("collective group %v: rank %d is not a GPU of topology %q (it has %d)", group, r, m.topo.Name, m.topo.NumGPUs())
		}
		if seen&(1<<uint(r)) != 0 {
			return fmt.Errorf("collective group %v: rank %d twice", group, r)
		}
		seen |= 1 << uint(r)
	}
	return HostRouteRefusal(m.topo, m.opts, group)
}

// HostRouteRefusal refuses P2P settings (NCCL_P2P_DISABLE, an
// NCCL_P2P_LEVEL below a pair's path) that send a hop between two GPUs of
// group (nil: every GPU of t) through host memory where the box has no
// route there (topology.Topology.HostRoute: an NVL72 rack's GPUs of two
// Grace CPUs, which no link of the box joins), in one line naming the
// flag that set it (--p2p-disable, --p2p-level). Only the group's pairs
// count: two GPUs of one Grace keep their route with P2P off. nil where
// every hop has a route, where s does not parse (Validate says why), or
// where group names a GPU t lacks (ValidateGroup and the plan's GPU
// count refuse that).
func HostRouteRefusal(t *topology.Topology, s ncclenv.Settings, group []int) error {
	level, err := topology.ParseP2PLevel(s.P2PLevel)
	if err != nil || t == nil {
		return nil
	}
	if group == nil {
		group = FirstRanks(t.NumGPUs())
	}
	for _, r := range group {
		if r < 0 || r >= t.NumGPUs() {
			return nil // a plan larger than the box: the GPU count's refusal says so
		}
	}
	for _, i := range group {
		for _, j := range group {
			if s.P2PDisable || !t.P2PAllowed(i, j, level) {
				if t.HostRoute(i, j) {
					continue
				}
				flag := "--p2p-disable (NCCL_P2P_DISABLE=1)"
				if !s.P2PDisable {
					flag = fmt.Sprintf("--p2p-level %s (NCCL_P2P_LEVEL=%s)", s.P2PLevel, s.P2PCondition())
				}
				return fmt.Errorf("%s: %s and %s of %s hang off CPUs no link joins (%s), so their hop through host memory has no route here (NCCL would cross a compute tray's two Graces or the network between trays, neither priced): leave P2P on, or keep the GPUs on one CPU", flag, t.GPUs[i].ID, t.GPUs[j].ID, t.Name, t.Host.CPU)
			}
		}
	}
	return nil
}

// Cost predicts one collective over group (ranks = GPU indices in ring
// order; nil means every GPU of the topology) moving bytes, in the
// nccl-tests convention for "size": all-reduce the buffer, all-gather the
// gathered output, reduce-scatter the input, all-to-all one rank's send
// buffer. It panics if group names a GPU outside the topology or a GPU
// twice (a programmer error: check with ValidateGroup).
func (m *CollectiveModel) Cost(op model.Collective, group []int, bytes int64) CollectiveCost {
	g := m.group(group)
	if g.n <= 1 || bytes <= 0 {
		return CollectiveCost{Channels: g.channels}
	}
	oi := opIndex(op)
	if oi < 0 {
		panic(fmt.Sprintf("sim: collective %q is not a known model.Collective", op))
	}
	if op == model.AllToAll {
		return m.allToAll(g, bytes)
	}
	b := float64(bytes)
	best, bestA, bestP := math.Inf(1), -1, -1
	for a := 0; a < numAlgos; a++ {
		for p := 0; p < numProtos; p++ {
			if !m.algoOn[oi][a] || !g.protoOn[oi][p] || (a == algoTree && op != model.AllReduce) {
				continue
			}
			if t := g.ncclLat[oi][a][p] + b*g.ncclUsPerByte[oi][a][p]; t < best {
				best, bestA, bestP = t, a, p
			}
		}
	}
	if bestA < 0 {
		// NCCL_ALGO without Ring for a non-all-reduce (Tree, or
		// allgather:nvls): NCCL fails the call (Settings.Fails; scenarios
		// and the collective verb refuse it), or runs NVLS where the box
		// has it (^Ring on an NVSwitch: a caveat says so); priced as Ring
		// for a caller that asks anyway.
		for p := 0; p < numProtos; p++ {
			if g.protoOn[oi][p] {
				if t := g.ncclLat[oi][algoRing][p] + b*g.ncclUsPerByte[oi][algoRing][p]; t < best {
					best, bestA, bestP = t, algoRing, p
				}
			}
		}
	}
	if bestA < 0 {
		// NCCL_PROTO without a protocol for op ("allgather:^LL,LL128,Simple"):
		// NCCL fails the call (Settings.NoProtocol; scenarios and the
		// collective verb refuse it); priced as Ring with Simple for a
		// caller that asks anyway.
		bestA, bestP = algoRing, protoSimple
		best = g.ncclLat[oi][algoRing][protoSimple] + b*g.ncclUsPerByte[oi][algoRing][protoSimple]
	}
	c := g.result(oi, op, bestA, bestP, b)
	c.NCCLTimeUs = best
	return c
}

// CostWith predicts the time of one given (algo, proto) pair, bypassing
// NCCL's choice (what NCCL_ALGO=algo NCCL_PROTO=proto forces). ok is false
// when the pair does not exist for op.
func (m *CollectiveModel) CostWith(op model.Collective, group []int, bytes int64, algo, proto string) (c CollectiveCost, ok bool) {
	a, p, oi := indexOf(algoNames[:], algo), indexOf(protoNames[:], proto), opIndex(op)
	if a < 0 || p < 0 || oi < 0 || op == model.AllToAll || (a == algoTree && op != model.AllReduce) {
		return CollectiveCost{}, false
	}
	g := m.group(group)
	if g.n <= 1 || bytes <= 0 {
		return CollectiveCost{Channels: g.channels}, true
	}
	c = g.result(oi, op, a, p, float64(bytes))
	c.NCCLTimeUs = g.ncclLat[oi][a][p] + float64(bytes)*g.ncclUsPerByte[oi][a][p]
	return c, true
}

// CollectivePrior is the uncalibrated model of one (algorithm, protocol)
// pair of a collective on a group, in the terms a calibration fits
// (package calibrate):
//
//	time_us = BaseLatUs + Steps x StepLatUs + bytes / (1000 x BusBWGBps x BusToAlg)
//
// BaseLatUs is NCCL's baseLat; StepLatUs tpscope's latency per ring step
// (NCCL's hwLat for the group's link class, host-memory hops and the
// ring's slowest P2P hop beyond the one hwLat prices); BusBWGBps the
// group's bus bandwidth after the protocol's factors and caps; Steps and
// BusToAlg NCCL's step count and bus-to-algorithm bandwidth ratio.
type CollectivePrior struct {
	BaseLatUs, StepLatUs, BusBWGBps float64
	Steps, BusToAlg                 float64
}

// Prior returns the uncalibrated model of (algo, proto) for op over
// group (nil: every GPU), whatever calibration the topology carries; ok
// is false when the pair does not exist for op (Tree is all-reduce only;
// all-to-all is NCCL's send/recv) or the group has one rank. It panics
// on a group outside the topology, as Cost does.
func (m *CollectiveModel) Prior(op model.Collective, group []int, algo ncclenv.Algorithm, proto ncclenv.Protocol) (CollectivePrior, bool) {
	a, p := int(algo), int(proto)
	if a >= numAlgos || p >= numProtos || opIndex(op) < 0 || op == model.AllToAll || (a == algoTree && op != model.AllReduce) {
		return CollectivePrior{}, false
	}
	g := m.group(group)
	if g.n <= 1 {
		return CollectivePrior{}, false
	}
	bus := g.ringBw
	if a == algoTree {
		bus = g.treeBw
	}
	return CollectivePrior{BaseLatUs: ncclBaseLatUs[a][p], StepLatUs: m.stepLatUs(g, a, p), BusBWGBps: m.protoBusBw(a, p, bus, g.channels),
		Steps: steps(op, a, g.n), BusToAlg: busToAlg(op, a, g.n)}, true
}

// steps is the number of sequential ring steps of op on n ranks.
func steps(op model.Collective, a, n int) float64 {
	if op == model.AllReduce {
		return float64(2 * (n - 1)) // ring; tree intra-node: 2(n-1) hops too (nccl-model.md)
	}
	return float64(n - 1)
}

// busToAlg converts bus bandwidth to algorithm bandwidth (NCCL tuning.cc:
// ring ratio nRanks/nSteps; tree all-reduce 0.5).
func busToAlg(op model.Collective, a, n int) float64 {
	if a == algoTree {
		return 0.5
	}
	if op == model.AllReduce {
		return float64(n) / float64(2*(n-1))
	}
	return float64(n) / float64(n-1)
}

// busFactor is the nccl-tests busbw/algbw factor.
func busFactor(op model.Collective, n int) float64 {
	if op == model.AllReduce {
		return 2 * float64(n-1) / float64(n)
	}
	return float64(n-1) / float64(n)
}

// protoBusBw applies NCCL's protocol factors and caps to a bus bandwidth
// over channels channels (NCCL's own count for NCCL's view, the count
// that runs for tpscope's).
func (m *CollectiveModel) protoBusBw(a, p int, bus float64, channels int) float64 {
	ch := float64(channels)
	if a == algoRing {
		switch p {
		case protoLL:
			return math.Min(m.caps.llMaxBwGBps, bus*ringLLFactor)
		case protoLL128:
			return math.Min(bus*ringLL128Factor, ch*m.caps.perChMaxRingLL128Bws)
		}
		return bus
	}
	bus = math.Min(bus*treeBwFactor, ch*m.caps.perChMaxTreeBwGBps)
	switch p {
	case protoLL:
		return math.Min(bus*treeLLFactor, m.caps.llMaxBwGBps)
	case protoLL128:
		return bus * treeLL128Factor
	}
	return bus
}

// precompute fills the per-(op, algo, proto) tables of g.
//
// NCCL's view: NCCL constants and NCCL's link model, no SHM latency (NCCL
// rates host-memory paths as PCI). tpscope's prediction: calibrated
// constants when present, else NCCL's constants plus the SHM latency of
// host-memory hops weighted by their share of the ring; achieved link
// bandwidths with sharing.
func (m *CollectiveModel) precompute(g *groupInfo) {
	for oi, op := range collOps[:3] {
		for a := 0; a < numAlgos; a++ {
			for p := 0; p < numProtos; p++ {
				st := steps(op, a, g.n)
				ratio := busToAlg(op, a, g.n)
				bus, nbus := g.ringBw, g.ringNCCLBw
				if a == algoTree {
					bus, nbus = g.treeBw, g.treeNCCLBw
				}
				g.ncclLat[oi][a][p] = ncclBaseLatUs[a][p] + st*ncclHwLatUs[g.pathType][a][p]
				g.ncclUsPerByte[oi][a][p] = 1 / (1000 * m.protoBusBw(a, p, nbus, g.ncclChannels) * ratio)
				if cp := m.calib[oi][a][p]; cp != nil {
					cbus := cp.BusBWGBps
					if ref := m.refBw(g, cp.Ranks, a, cp.Channels); ref > 0 {
						cbus *= bus / ref
					}
					g.lat[oi][a][p] = cp.BaseLatUs + st*cp.HwLatUs
					g.usPerByte[oi][a][p] = 1 / (1000 * cbus * ratio)
					g.calibrated[oi][a][p] = true
					continue
				}
				g.lat[oi][a][p] = ncclBaseLatUs[a][p] + st*m.stepLatUs(g, a, p)
				g.usPerByte[oi][a][p] = 1 / (1000 * m.protoBusBw(a, p, bus, g.channels) * ratio)
			}
		}
	}
}

// stepLatUs is tpscope's uncalibrated latency per ring step of (a, p) on
// g: NCCL's hwLat for the group's path class, plus the SHM latency of
// host-memory hops weighted by their share of the ring, plus the ring's
// slowest P2P hop beyond the one NCCL's hwLat prices.
func (m *CollectiveModel) stepLatUs(g *groupInfo, a, p int) float64 {
	return ncclHwLatUs[g.pathType][a][p] + g.shmFrac*m.topo.Host.SHMLatUs + g.hopExtraUs + g.archStepUs
}

// result is the cost of (a, p) for b bytes from the tables.
func (g *groupInfo) result(oi int, op model.Collective, a, p int, b float64) CollectiveCost {
	c := CollectiveCost{Algo: algoNames[a], Proto: protoNames[p], Channels: g.channels, SHMHops: g.shmHops,
		Bottleneck: g.ringNeck, Calibrated: g.calibrated[oi][a][p], NCCLLatencyUs: g.ncclLat[oi][a][p]}
	c.LatencyUs = g.lat[oi][a][p]
	c.LinkUs = b * g.usPerByte[oi][a][p]
	c.TimeUs = c.LatencyUs + c.LinkUs
	c.AlgBWGBps = b / (1000 * c.TimeUs)
	c.BusBWGBps = c.AlgBWGBps * busFactor(op, g.n)
	return c
}

// refBw is the modeled (uncalibrated) bus bandwidth of the first ranks
// GPUs, the group a calibration was measured on, at the channels the
// measurement ran (channels; 0: NCCL's own count, an entry that records
// none); 0 if unknown. A calibrated bandwidth scales by the model's
// ratio between the group priced and this one, so an entry measured at
// NCCL's two channels prices eight by what the model says eight add.
func (m *CollectiveModel) refBw(own *groupInfo, ranks, a, channels int) float64 {
	if ranks < 2 || ranks > m.topo.NumGPUs() {
		return 0
	}
	g := own
	if mask := uint64(1)<<uint(ranks) - 1; mask != own.mask {
		// The reference group's links, not its pricing: building it
		// whole would price it against calibrations of yet another
		// group size, whose reference is this group (an all-reduce
		// fitted on 2 ranks and an all-gather on 4 built each other
		// until the stack overflowed).
		m.mu.RLock()
		g = m.groups[mask]
		m.mu.RUnlock()
		if g == nil {
			g = m.shapeGroup(mask, maskRanks(mask))
		}
	}
	if channels <= 0 {
		channels = g.ncclChannels
	}
	bw, _ := g.busAt(a, channels)
	return bw
}

// busAt is tpscope's bus bandwidth of algorithm a on g over channels
// channels, and what binds it: the links' share, or the channels (see
// the channel counts above: on PCIe pcieChannelP2PGBps a channel, on
// NVLink the links over NCCL's own count).
func (g *groupInfo) busAt(a, channels int) (float64, string) {
	bw, neck := g.ringShareBw, g.ringShareNeck
	if a == algoTree {
		bw, neck = g.treeShareBw, ""
	}
	perCh := pcieChannelP2PGBps
	if g.pathType == pathNVLink {
		if channels >= g.ncclChannels {
			return bw, neck
		}
		perCh = bw / float64(g.ncclChannels)
	}
	if c := float64(channels) * perCh; c < bw {
		bw, neck = c, fmt.Sprintf("%d NCCL channels x %.1f GB/s", channels, perCh)
	}
	return bw, neck
}

// allToAll models NCCL's all-to-all as grouped send/recv: every rank sends
// bytes/n to every peer at once; the busiest link sets the bandwidth term.
// Latency: baseLat + (n-1) hwLat of the protocol NCCL's p2p path picks (LL
// up to NCCL_P2P_LL_THRESHOLD per peer, else Simple) — assumption: peers
// are served in n-1 rounds whose latencies add up.
func (m *CollectiveModel) allToAll(g *groupInfo, bytes int64) CollectiveCost {
	b := float64(bytes)
	perPeer := b / float64(g.n)
	p := protoSimple
	if perPeer <= p2pLLThresholdBytes && m.a2aLL {
		p = protoLL // NCCL_PROTO without LL keeps send/recv on Simple
	}
	st := float64(g.n - 1)
	lat := ncclBaseLatUs[algoRing][p] + st*(ncclHwLatUs[g.pathType][algoRing][p]+g.shmFrac*m.topo.Host.SHMLatUs+g.a2aHopExtraUs)
	eff := 1.0
	if p == protoLL {
		eff = ringLLFactor
	}
	link := perPeer * g.a2aPerByte / eff
	c := CollectiveCost{Algo: "P2P", Proto: protoNames[p], Channels: g.channels, SHMHops: g.shmHops,
		LatencyUs: lat, LinkUs: link, TimeUs: lat + link, Bottleneck: g.a2aNeckName}
	c.NCCLTimeUs = c.TimeUs - st*g.a2aHopExtraUs // NCCL does not see hop latencies
	c.AlgBWGBps = b / (1000 * c.TimeUs)
	c.BusBWGBps = c.AlgBWGBps * busFactor(model.AllToAll, g.n)
	return c
}

// CustomAllReduce is a custom all-reduce over CUDA IPC P2P (vLLM style),
// available when the driver allows P2P between every pair of the group
// (Topology.P2PUnsupported; NCCL_P2P_LEVEL does not apply). Whether to use
// it is the caller's decision: vLLM disables its custom all-reduce on more
// than two PCIe-only GPUs, and a one-shot PCIe all-reduce is an out-of-tree
// optimization.
//
//	one-shot: each rank reads the whole buffer from every peer and reduces.
//	  time = base + 2 barriers x max pair latency + bytes x busiest-link load
//	two-shot: reduce-scatter then all-gather, each reading bytes/n per peer.
//	  time = base + 3 barriers x max pair latency + 2 x (bytes/n) x busiest-link load
//
// ok is false when P2P is not available on some pair (NCCL_P2P_DISABLE or
// the driver).
func (m *CollectiveModel) CustomAllReduce(group []int, bytes int64, twoShot bool) (c CollectiveCost, ok bool) {
	g := m.group(group)
	if !g.customOK || m.opts.P2PDisable {
		return CollectiveCost{}, false
	}
	if g.n <= 1 || bytes <= 0 {
		return CollectiveCost{Algo: "OneShot"}, true
	}
	b := float64(bytes)
	c = CollectiveCost{Algo: "OneShot", Proto: "P2P", Bottleneck: g.customNeck}
	barriers, perPair := 2.0, b
	if twoShot {
		c.Algo, barriers, perPair = "TwoShot", 3, 2*b/float64(g.n)
	}
	fixed := g.customFixedUs[0]
	if twoShot {
		fixed = g.customFixedUs[1]
	}
	c.LatencyUs = fixed + barriers*g.maxPairLatUs
	c.LinkUs = perPair * g.customUsPerByte
	c.TimeUs = c.LatencyUs + c.LinkUs
	c.NCCLTimeUs = math.NaN()
	c.AlgBWGBps = b / (1000 * c.TimeUs)
	c.BusBWGBps = c.AlgBWGBps * busFactor(model.AllReduce, g.n)
	return c, true
}

// MultimemAllReduce is torch's multimem all-reduce (see multimemBaseUs)
// over group; ok is false where the group's GPUs map no multicast memory
// (MulticastJoined: no NVSwitch, or one before Hopper's).
func (m *CollectiveModel) MultimemAllReduce(group []int, bytes int64) (c CollectiveCost, ok bool) {
	g := m.group(group)
	if !g.multicast {
		return CollectiveCost{}, false
	}
	c = CollectiveCost{Algo: "Multimem", Proto: "NVLS", Bottleneck: "8 CTAs"}
	if g.n <= 1 || bytes <= 0 {
		return c, true
	}
	b := float64(bytes)
	c.LatencyUs = multimemBaseUs
	c.LinkUs = b / float64(g.n) * multimemUsPerShareByte
	c.TimeUs = c.LatencyUs + c.LinkUs
	c.NCCLTimeUs = math.NaN()
	c.AlgBWGBps = b / (1000 * c.TimeUs)
	c.BusBWGBps = c.AlgBWGBps * busFactor(model.AllReduce, g.n)
	return c, true
}

func (m *CollectiveModel) group(group []int) *groupInfo {
	var mask uint64
	if len(group) == 0 {
		mask = uint64(1)<<uint(m.topo.NumGPUs()) - 1
		if m.topo.NumGPUs() == 64 {
			mask = ^uint64(0)
		}
	} else {
		for _, r := range group {
			if r < 0 || r >= m.topo.NumGPUs() {
				panic(fmt.Sprintf("sim: collective group %v: rank %d outside topology %q (%d GPUs)", group, r, m.topo.Name, m.topo.NumGPUs()))
			}
			mask |= 1 << uint(r)
		}
		if len(group) != bits.OnesCount64(mask) {
			panic(fmt.Sprintf("sim: collective group %v names a rank twice", group))
		}
	}
	return m.groupMask(mask)
}

// groupMask returns the cached info of the group; the ring order is the
// ascending GPU index order (NCCL's search on the presets finds the same
// bottleneck with it).
func (m *CollectiveModel) groupMask(mask uint64) *groupInfo {
	m.mu.RLock()
	g := m.groups[mask]
	m.mu.RUnlock()
	if g != nil {
		return g
	}
	g = m.buildGroup(mask, maskRanks(mask))
	m.mu.Lock()
	m.groups[mask] = g
	m.mu.Unlock()
	return g
}

func (m *CollectiveModel) p2p(i, j int) bool {
	return !m.opts.P2PDisable && m.topo.P2PAllowed(i, j, m.level)
}

// maskRanks are the GPU indices a group mask holds, ascending.
func maskRanks(mask uint64) []int {
	var ranks []int
	for r := 0; r < 64; r++ {
		if mask&(1<<uint(r)) != 0 {
			ranks = append(ranks, r)
		}
	}
	return ranks
}

// buildGroup is the group's shape (shapeGroup) priced (precompute).
func (m *CollectiveModel) buildGroup(mask uint64, ranks []int) *groupInfo {
	g := m.shapeGroup(mask, ranks)
	if g.n > 1 {
		m.precompute(g)
	}
	return g
}

// shapeGroup is what the group's ranks and links make of it: its path
// class, channels, shared link bandwidths, hops and enabled algorithms,
// without the latency and bandwidth tables precompute fills.
func (m *CollectiveModel) shapeGroup(mask uint64, ranks []int) *groupInfo {
	t := m.topo
	n := len(ranks)
	g := &groupInfo{mask: mask, n: n, pathType: pathNVLink, ncclChannels: nvlinkChannels, multicast: MulticastJoined(t, ranks)}
	g.channels = m.opts.Channels(g.ncclChannels)
	if n <= 1 {
		return g
	}
	// Ring flows r[k] -> r[k+1]; the chain (tree) both ways between
	// neighbours.
	var ring, chain []topology.Flow
	for k := 0; k < n; k++ {
		i, j := ranks[k], ranks[(k+1)%n]
		via := !m.p2p(i, j)
		if via {
			g.shmHops++
		}
		if t.Path(i, j).Level != topology.LevelNV || via {
			g.pathType, g.ncclChannels = pathPCI, pcieChannels
		}
		ring = append(ring, topology.Flow{From: i, To: j, ViaHost: via})
		if !via {
			g.hopExtraUs = math.Max(g.hopExtraUs, m.hopExtra(t.Path(i, j)))
		}
		if k < n-1 {
			chain = append(chain, topology.Flow{From: i, To: j, ViaHost: via}, topology.Flow{From: j, To: i, ViaHost: !m.p2p(j, i)})
		}
	}
	g.shmFrac = float64(g.shmHops) / float64(len(ring))
	if g.pathType == pathNVLink && m.blackwellDC {
		g.archStepUs = ncclBlackwellStepUs
	}
	rs := t.Share(ring, false)
	g.ringShareBw, g.ringShareNeck = rs.PerFlowGBps, rs.Bottleneck
	g.ringNCCLBw = t.Share(ring, true).PerFlowGBps
	g.treeShareBw = t.Share(chain, false).PerFlowGBps
	g.treeNCCLBw = t.Share(chain, true).PerFlowGBps
	if g.pathType == pathPCI {
		g.ncclChannels = pcieRingChannels(g.ringNCCLBw)
	}
	g.channels = m.opts.Channels(g.ncclChannels)
	g.ringBw, g.ringNeck = g.busAt(algoRing, g.channels)
	g.treeBw, _ = g.busAt(algoTree, g.channels)

	// All pairs: all-to-all (NCCL transport per pair) and custom AR (P2P).
	var a2a, pairs []topology.Flow
	_, _, refused := t.P2PRefused(ranks)
	g.customOK = !refused
	for _, i := range ranks {
		for _, j := range ranks {
			if i == j {
				continue
			}
			a2a = append(a2a, topology.Flow{From: i, To: j, ViaHost: !m.p2p(i, j)})
			if m.p2p(i, j) {
				g.a2aHopExtraUs = math.Max(g.a2aHopExtraUs, m.hopExtra(t.Path(i, j)))
			}
			pairs = append(pairs, topology.Flow{From: i, To: j})
			g.maxPairLatUs = math.Max(g.maxPairLatUs, t.Path(i, j).LatUs)
		}
	}
	ll := t.MaxLinkTimeUs(a2a, 1, false)
	g.a2aPerByte, g.a2aNeckName = ll.Us, ll.Link
	if shm := t.Host.SHMBWGBps; shm > 0 && g.shmHops > 0 {
		// One rank's SHM sends share its host-memory bounce.
		g.a2aPerByte = math.Max(g.a2aPerByte, float64(n-1)/(1000*shm))
	}
	cl := t.MaxLinkTimeUs(pairs, 1, false)
	g.customUsPerByte, g.customNeck = cl.Us, cl.Link
	if g.pathType == pathPCI {
		g.customUsPerByte /= p2pReadEfficiency
	}
	g.customFixedUs = m.customARFixedUs(g)

	for oi := range m.protoOn {
		for p := 0; p < numProtos; p++ {
			on := m.protoOn[oi][p] != 0
			if m.protoOn[oi][p] < 0 && p == protoLL128 && g.pathType != pathNVLink {
				on = false // nccl-model.md: LL128 by default only on NVLink
			}
			g.protoOn[oi][p] = on
		}
	}
	return g
}

// Channels is how many channels NCCL runs for group's ring (nil: every
// GPU): NCCL's own count under NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS.
// It panics on a group outside the topology, as Cost does.
func (m *CollectiveModel) Channels(group []int) int { return m.group(group).channels }

// Options returns the options the model was built with.
func (m *CollectiveModel) Options() ncclenv.Settings { return m.opts }
