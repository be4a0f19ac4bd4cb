package sim

import (
	"fmt"
	"math"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/topology"
)

func collTopo(t testing.TB, name string, gpus int) *topology.Topology {
	t.Helper()
	tp, err := topology.Resolve(name, gpus)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

func collModel(t testing.TB, name string, gpus int, o ncclenv.Settings) *CollectiveModel {
	t.Helper()
	m, err := NewCollectiveModel(collTopo(t, name, gpus), o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func collNear(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// TestNCCLLatencyByHand checks NCCL's latency term against nccl-model.md's
// worked examples: baseLat[Ring][proto] + 2(n-1) hwLat[link][Ring][proto].
// With NCCL_P2P_LEVEL=SYS every hop is P2P; tpscope's own latency (before
// calibration) adds 2(n-1) x the slowest ring hop's path latency beyond the
// 0.4 us PCIe hop NCCL's hwLat prices, or beyond the box's fastest NVLink
// pair (collective.go "Hop latency"). Path latencies of
// the presets (topology/presets.go): 2s same host bridge 0.2 + 0.2 = 0.4,
// other host bridge of the socket 0.2 + 0.05 + 0.05 + 0.2 = 0.5, across
// sockets 0.2 + 0.05 + 0.3 + 0.05 + 0.2 = 0.8 us; switch box inside a
// switch 0.25 + 0.25 = 0.5, across switches 4 x 0.25 = 1.0 us; NVSwitch
// 0.35 + 0.35 = 0.7 for every pair.
func TestNCCLLatencyByHand(t *testing.T) {
	cases := []struct {
		name  string
		topo  string
		gpus  int
		proto string
		want  float64 // NCCL's estimate
		extra float64 // tpscope's hop-latency term
	}{
		// 6.6 + 14 x 1.0 = 20.6 (nccl-model.md worked example); ring
		// 0..7 crosses the sockets: 14 x (0.8 - 0.4) = 5.6.
		{"pcie/8gpu/LL", "rtxpro6000-2s", 8, "LL", 20.6, 5.6},
		// 6.6 + 6 x 1.0 = 12.6; one socket, slowest hop between its host
		// bridges: 6 x (0.5 - 0.4) = 0.6.
		{"pcie/4gpu/LL", "rtxpro6000-2s", 4, "LL", 12.6, 0.6},
		// 6.6 + 2 x 1.0 = 8.6; both hops inside one host bridge.
		{"pcie/2gpu/LL", "rtxpro6000-2s", 2, "LL", 8.6, 0},
		// 8.4 + 14 x 5.7 = 88.2; + 5.6 as for LL.
		{"pcie/8gpu/Simple", "rtxpro6000-2s", 8, "Simple", 88.2, 5.6},
		// 6.6 + 14 x 0.6 = 15.0; all NVSwitch paths alike.
		{"nvlink/8gpu/LL", "h200-nvswitch", 8, "LL", 15.0, 0},
		// 14.0 + 14 x 1.9 = 40.6
		{"nvlink/8gpu/LL128", "h200-nvswitch", 8, "LL128", 40.6, 0},
		// switch box: same PCI constants, 6.6 + 14 = 20.6; 14 x (1.0 - 0.4).
		{"switch/8gpu/LL", "rtxpro6000-switch", 8, "LL", 20.6, 14 * 0.6},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := collModel(t, c.topo, c.gpus, ncclenv.Settings{Proto: c.proto, Algo: "Ring", P2PLevel: "SYS"})
			got := m.Cost(model.AllReduce, nil, 1024)
			if got.Proto != c.proto || got.Algo != "Ring" {
				t.Fatalf("chose %s/%s, want Ring/%s", got.Algo, got.Proto, c.proto)
			}
			if !collNear(got.NCCLLatencyUs, c.want, 1e-9) {
				t.Errorf("NCCL latency %.4f us, want %.1f", got.NCCLLatencyUs, c.want)
			}
			if !collNear(got.LatencyUs, c.want+c.extra, 1e-9) {
				t.Errorf("latency %.4f us, want %.1f + %.1f", got.LatencyUs, c.want, c.extra)
			}
		})
	}
}

// TestBusAlgRatio: nccl-tests busbw = algbw x 2(n-1)/n for all-reduce
// (1.75 at 8 ranks), (n-1)/n for the others (0.875 at 8).
func TestBusAlgRatio(t *testing.T) {
	m := collModel(t, "rtxpro6000-2s", 8, ncclenv.Settings{})
	for _, c := range []struct {
		op   model.Collective
		want float64
	}{{model.AllReduce, 1.75}, {model.AllGather, 0.875}, {model.ReduceScatter, 0.875}, {model.AllToAll, 0.875}} {
		t.Run(string(c.op), func(t *testing.T) {
			got := m.Cost(c.op, nil, 64<<20)
			if r := got.BusBWGBps / got.AlgBWGBps; !collNear(r, c.want, 1e-12) {
				t.Errorf("busbw/algbw = %v, want %v", r, c.want)
			}
			if !collNear(got.AlgBWGBps, float64(64<<20)/(1000*got.TimeUs), 1e-9) {
				t.Errorf("algbw %v != bytes/time", got.AlgBWGBps)
			}
		})
	}
}

// TestBandwidthByHand derives the bandwidth term from the preset's link
// figures and NCCL's channels (collective.go, pcieRingChannels).
// rtxpro6000-2s at NCCL_P2P_LEVEL=SYS: the ring 0..7 crosses the socket
// link once each way; its slowest link is xGMI at 45 GB/s (hardware.md
// 39-51, middle) against 54 on the GPU links, but NCCL sees that link at
// 16 GB/s (hardware.md, AMD), below its 25 GB/s duplication threshold, so
// it runs 2 channels of 11.1 GB/s each: busBw min(45, 2 x 11.1) = 22.2.
// Ring Simple: algBw = 22.2 x 8/14; LL: busBw min(282, 22.2 x 0.5) = 11.1.
// NCCL's own view stays 16 GB/s.
func TestBandwidthByHand(t *testing.T) {
	const bytes = 512 << 20
	cases := []struct {
		name, topo, proto, algo string
		op                      model.Collective
		wantLatUs, wantAlgGBps  float64
		wantNCCLAlgGBps         float64
		hopUs                   float64 // tpscope's hop-latency term (TestNCCLLatencyByHand)
	}{
		{"2s/ring/simple", "rtxpro6000-2s", "Simple", "Ring", model.AllReduce, 88.2, 22.2 * 8.0 / 14, 16 * 8.0 / 14, 14 * 0.4},
		{"2s/ring/LL", "rtxpro6000-2s", "LL", "Ring", model.AllReduce, 20.6, 11.1 * 8.0 / 14, 8 * 8.0 / 14, 14 * 0.4},
		// switch box: uplinks carry one ring flow each way: 54 (real), 48
		// (NCCL, >= 25: channels duplicated, 4 of 11.1 = 44.4 GB/s).
		{"switch/ring/simple", "rtxpro6000-switch", "Simple", "Ring", model.AllReduce, 88.2, 44.4 * 8.0 / 14, 48 * 8.0 / 14, 14 * 0.6},
		// all-gather: steps n-1 = 7, algBw = busBw x 8/7.
		{"2s/allgather/simple", "rtxpro6000-2s", "Simple", "Ring", model.AllGather, 8.4 + 7*5.7, 22.2 * 8.0 / 7, 16 * 8.0 / 7, 7 * 0.4},
		// Tree (chain 0..7, reduce up and broadcast down at once): an
		// interior GPU sends to both neighbours over its one PCIe link, so
		// each GPU link carries 2 flows out: min(54/2, 45, 2 ch x 11.1) =
		// 22.2 real, min(48/2, 16) = 16 NCCL; busBw min(bw x 0.92, 2 ch x
		// 70); algBw x 0.5. The chain's 3-4 hop crosses the sockets:
		// 14 x 0.4.
		{"2s/tree/simple", "rtxpro6000-2s", "Simple", "Tree", model.AllReduce, 8.4 + 14*4.0, 22.2 * 0.92 * 0.5, 16 * 0.92 * 0.5, 14 * 0.4},
		// H200: NVLink 450 (hardware.md) real; NCCL 18 x 20.6 = 370.8. Simple ring.
		{"h200/ring/simple", "h200-nvswitch", "Simple", "Ring", model.AllReduce, 8.4 + 14*3.4, 450 * 8.0 / 14, 370.8 * 8.0 / 14, 0},
		// LL128: min(0.92 x bus, 16 ch x 36.7) = 0.92 x bus.
		{"h200/ring/LL128", "h200-nvswitch", "LL128", "Ring", model.AllReduce, 14 + 14*1.9, 0.92 * 450 * 8.0 / 14, 0.92 * 370.8 * 8.0 / 14, 0},
		// LL: min(llMaxBw 141 (Hopper), 0.5 x bus).
		{"h200/ring/LL", "h200-nvswitch", "LL", "Ring", model.AllReduce, 20.6 - 14*0.4, 141 * 8.0 / 14, 141 * 8.0 / 14, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := collModel(t, c.topo, 8, ncclenv.Settings{P2PLevel: "SYS"})
			got, ok := m.CostWith(c.op, nil, bytes, c.algo, c.proto)
			if !ok {
				t.Fatal("pair not available")
			}
			want := c.wantLatUs + c.hopUs + bytes/(1000*c.wantAlgGBps)
			if !collNear(got.TimeUs, want, 1e-6*want) {
				t.Errorf("time %.3f us, want %.3f (lat %.2f + %d B / %.3f GB/s)", got.TimeUs, want, c.wantLatUs, bytes, c.wantAlgGBps)
			}
			wantN := c.wantLatUs + bytes/(1000*c.wantNCCLAlgGBps)
			if !collNear(got.NCCLTimeUs, wantN, 1e-6*wantN) {
				t.Errorf("NCCL time %.3f us, want %.3f", got.NCCLTimeUs, wantN)
			}
		})
	}
}

// TestNCCLChannelsByHand: NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS set
// the channels the ring runs (NCCL's own count capped at the maximum,
// then raised to the minimum), and tpscope's bandwidth follows them:
// min(the links' share, channels x what one channel moves). NCCL's own
// estimate keeps its count (its tuning model reads the search's graph
// channels), so NCCL's time is TestBandwidthByHand's. 512 MiB, P2P SYS,
// 8 GPUs; latency and hop terms as TestBandwidthByHand.
//
//   - 2s, min 8: 8 x 11.1 = 88.8 above the socket link's 45: 45.
//   - 2s, min 3: 3 x 11.1 = 33.3.
//   - 2s, max 1: 11.1.
//   - 2s, min 8 and max 4: NCCL caps at 4, then copies up to 8: 45.
//   - switch, max 2: 2 x 11.1 = 22.2 under the uplinks' 54; NCCL's view 48.
//   - 2s Tree, min 8: the chain's share min(54/2, 45) = 27 under 8 x
//     11.1; x 0.92 (min with 8 x 70 Blackwell per-channel cap), algBw x 0.5.
//   - H200, max 4: NVLink's 450 over NCCL's 16 channels is 28.125 a
//     channel: 4 x 28.125 = 112.5.
//   - H200, min 32: 16 channels already reach the links: 450.
func TestNCCLChannelsByHand(t *testing.T) {
	const bytes = 512 << 20
	cases := []struct {
		name, topo, proto, algo string
		o                       ncclenv.Settings
		channels                int
		wantLatUs, wantAlgGBps  float64
		wantNCCLAlgGBps         float64
		hopUs                   float64
	}{
		{"2s/min 8", "rtxpro6000-2s", "Simple", "Ring", ncclenv.Settings{MinChannels: 8}, 8, 88.2, 45 * 8.0 / 14, 16 * 8.0 / 14, 14 * 0.4},
		{"2s/min 3", "rtxpro6000-2s", "Simple", "Ring", ncclenv.Settings{MinChannels: 3}, 3, 88.2, 33.3 * 8.0 / 14, 16 * 8.0 / 14, 14 * 0.4},
		{"2s/max 1", "rtxpro6000-2s", "Simple", "Ring", ncclenv.Settings{MaxChannels: 1}, 1, 88.2, 11.1 * 8.0 / 14, 16 * 8.0 / 14, 14 * 0.4},
		{"2s/min 8 over max 4", "rtxpro6000-2s", "Simple", "Ring", ncclenv.Settings{MinChannels: 8, MaxChannels: 4}, 8, 88.2, 45 * 8.0 / 14, 16 * 8.0 / 14, 14 * 0.4},
		{"2s/LL/min 8", "rtxpro6000-2s", "LL", "Ring", ncclenv.Settings{MinChannels: 8}, 8, 20.6, 45 * 0.5 * 8.0 / 14, 8 * 8.0 / 14, 14 * 0.4},
		{"switch/max 2", "rtxpro6000-switch", "Simple", "Ring", ncclenv.Settings{MaxChannels: 2}, 2, 88.2, 22.2 * 8.0 / 14, 48 * 8.0 / 14, 14 * 0.6},
		{"2s/tree/min 8", "rtxpro6000-2s", "Simple", "Tree", ncclenv.Settings{MinChannels: 8}, 8, 8.4 + 14*4.0, 27 * 0.92 * 0.5, 16 * 0.92 * 0.5, 14 * 0.4},
		{"h200/max 4", "h200-nvswitch", "Simple", "Ring", ncclenv.Settings{MaxChannels: 4}, 4, 8.4 + 14*3.4, 112.5 * 8.0 / 14, 370.8 * 8.0 / 14, 0},
		{"h200/min 32", "h200-nvswitch", "Simple", "Ring", ncclenv.Settings{MinChannels: 32}, 32, 8.4 + 14*3.4, 450 * 8.0 / 14, 370.8 * 8.0 / 14, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.o.P2PLevel = "SYS"
			m := collModel(t, c.topo, 8, c.o)
			got, ok := m.CostWith(model.AllReduce, nil, bytes, c.algo, c.proto)
			if !ok {
				t.Fatal("pair not available")
			}
			if got.Channels != c.channels || m.Channels(nil) != c.channels {
				t.Errorf("%d channels (model %d), want %d", got.Channels, m.Channels(nil), c.channels)
			}
			want := c.wantLatUs + c.hopUs + bytes/(1000*c.wantAlgGBps)
			if !collNear(got.TimeUs, want, 1e-6*want) {
				t.Errorf("time %.3f us, want %.3f (lat %.2f + %d B / %.3f GB/s)", got.TimeUs, want, c.wantLatUs, bytes, c.wantAlgGBps)
			}
			wantN := c.wantLatUs + bytes/(1000*c.wantNCCLAlgGBps)
			if !collNear(got.NCCLTimeUs, wantN, 1e-6*wantN) {
				t.Errorf("NCCL time %.3f us, want %.3f (NCCL's view keeps its own channels)", got.NCCLTimeUs, wantN)
			}
		})
	}
	// NCCL's choice does not move: on the dual-socket box LL and Simple
	// still cross at 618 kB in NCCL's view (TestNCCLChoice), whatever
	// the count that runs.
	for _, o := range []ncclenv.Settings{{P2PLevel: "SYS"}, {P2PLevel: "SYS", MinChannels: 8}, {P2PLevel: "SYS", MaxChannels: 1}} {
		m := collModel(t, "rtxpro6000-2s", 8, o)
		if lo, hi := m.Cost(model.AllReduce, nil, 512<<10), m.Cost(model.AllReduce, nil, 1<<20); lo.Proto != "LL" || hi.Proto != "Simple" {
			t.Errorf("%+v: 512 KiB %s, 1 MiB %s; want NCCL's LL and Simple", o, lo.Proto, hi.Proto)
		}
	}
}

// TestNCCLChoice replays NCCL's min-time choice. rtxpro6000-2s, NCCL's
// view at level SYS: LL = 20.6 + b/(1000 x 8 x 8/14), Simple = 88.2 +
// b/(1000 x 16 x 8/14); they cross at b = 67.6 / (1/4571.4 - 1/9142.9) us
// = 618 kB: LL below, Simple above. LL128 is off on PCIe unless asked for.
func TestNCCLChoice(t *testing.T) {
	cases := []struct {
		name      string
		topo      string
		o         ncclenv.Settings
		op        model.Collective
		bytes     int64
		wantAlgo  string
		wantProto string
	}{
		{"2s/small/LL", "rtxpro6000-2s", ncclenv.Settings{P2PLevel: "SYS"}, model.AllReduce, 512 << 10, "Ring", "LL"},
		{"2s/large/Simple", "rtxpro6000-2s", ncclenv.Settings{P2PLevel: "SYS"}, model.AllReduce, 1 << 20, "Ring", "Simple"},
		{"2s/proto=LL/large", "rtxpro6000-2s", ncclenv.Settings{Proto: "LL"}, model.AllReduce, 256 << 20, "Ring", "LL"},
		// Without LL (and LL128, off PCIe by default), NCCL's table favours
		// Tree for tiny messages: Tree Simple 8.4 + 14 x 4.0 = 64.4 us <
		// Ring Simple 88.2 us.
		{"2s/proto=^LL,LL128/small", "rtxpro6000-2s", ncclenv.Settings{Proto: "^LL,LL128"}, model.AllReduce, 1024, "Tree", "Simple"},
		{"2s/proto=^LL,LL128/algo=Ring/small", "rtxpro6000-2s", ncclenv.Settings{Proto: "^LL,LL128", Algo: "Ring"}, model.AllReduce, 1024, "Ring", "Simple"},
		// "^LL" sets every other protocol on, LL128 included (parseList
		// writes the clause's whole row; tuning.cc's NVLink check is only
		// for LL128's default 2), so LL128 runs on PCIe as if listed:
		// Tree 14 + 14 x 1.9 = 40.6 us < Tree Simple 64.4 us; Ring alone
		// 14 + 14 x 2.5 = 49.0 us < Ring Simple 88.2 us.
		{"2s/proto=^LL/small", "rtxpro6000-2s", ncclenv.Settings{Proto: "^LL"}, model.AllReduce, 1024, "Tree", "LL128"},
		{"2s/proto=^LL/algo=Ring/small", "rtxpro6000-2s", ncclenv.Settings{Proto: "^LL", Algo: "Ring"}, model.AllReduce, 1024, "Ring", "LL128"},
		// Per collective: the all-reduce's clause keeps it off LL128,
		// the all-gather's "^LL" turns LL128 on for it alone.
		{"2s/proto=^LL;allreduce:^LL,LL128/allreduce", "rtxpro6000-2s", ncclenv.Settings{Proto: "^LL;allreduce:^LL,LL128", Algo: "Ring"}, model.AllReduce, 1024, "Ring", "Simple"},
		// Ring all-gather, 7 steps: LL128 14 + 7 x 2.5 = 31.5 us < Simple
		// 8.4 + 7 x 5.7 = 48.3 us.
		{"2s/proto=^LL;allreduce:^LL,LL128/allgather", "rtxpro6000-2s", ncclenv.Settings{Proto: "^LL;allreduce:^LL,LL128", Algo: "Ring"}, model.AllGather, 1024, "Ring", "LL128"},
		// Explicit LL128 is honoured off NVLink: Tree 14 + 14 x 1.9 = 40.6 <
		// Ring 14 + 14 x 2.5 = 49.0.
		{"2s/proto=LL128 forced on PCIe", "rtxpro6000-2s", ncclenv.Settings{Proto: "LL128"}, model.AllReduce, 1024, "Tree", "LL128"},
		{"2s/algo=Tree", "rtxpro6000-2s", ncclenv.Settings{Algo: "Tree"}, model.AllReduce, 1024, "Tree", "LL"},
		{"2s/algo=Tree/allgather falls back to Ring", "rtxpro6000-2s", ncclenv.Settings{Algo: "Tree"}, model.AllGather, 1024, "Ring", "LL"},
		// H200: LL128 allowed on NVLink; at 4 MiB NCCL's view: LL 15.0 +
		// b/(1000 x 141 x 8/14) = 67.0 us, LL128 40.6 + b/(1000 x 341.1 x
		// 8/14) = 62.1 us, Simple 56.0 + b/(1000 x 370.8 x 8/14) = 75.8 us.
		{"h200/4MiB/LL128", "h200-nvswitch", ncclenv.Settings{}, model.AllReduce, 4 << 20, "Ring", "LL128"},
		{"h200/small/LL", "h200-nvswitch", ncclenv.Settings{}, model.AllReduce, 4096, "Ring", "LL"},
		{"h200/proto=^LL128/4MiB", "h200-nvswitch", ncclenv.Settings{Proto: "^LL128"}, model.AllReduce, 4 << 20, "Ring", "LL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := collModel(t, c.topo, 8, c.o)
			got := m.Cost(c.op, nil, c.bytes)
			if got.Algo != c.wantAlgo || got.Proto != c.wantProto {
				t.Errorf("chose %s/%s, want %s/%s", got.Algo, got.Proto, c.wantAlgo, c.wantProto)
			}
		})
	}
}

// TestSHMLatency: hops beyond NCCL_P2P_LEVEL go through host memory and
// add Host.SHMLatUs (hardware.md: about 14 us) per step, weighted by the
// fraction of ring hops that bounce. 2s at the default PXB: all 8 hops
// bounce: 6.6 + 14 x (1.0 + 14) = 216.6 us. Switch box: 4 of 8 hops
// (across switches) bounce: 6.6 + 14 x (1.0 + 0.5 x 14) = 118.6 us, plus
// 14 x 0.1 us for the P2P hops inside a switch (0.5 us path beyond the
// 0.4 us hop NCCL's hwLat prices, TestNCCLLatencyByHand): 120.0 us.
// P2P disabled on the switch box: all 8 bounce: 216.6 us.
func TestSHMLatency(t *testing.T) {
	cases := []struct {
		name    string
		topo    string
		o       ncclenv.Settings
		wantLat float64
		wantSHM int
	}{
		{"2s/default", "rtxpro6000-2s", ncclenv.Settings{Proto: "LL"}, 216.6, 8},
		// + 14 x 0.4 for the cross-socket P2P hops (TestNCCLLatencyByHand).
		{"2s/SYS", "rtxpro6000-2s", ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"}, 20.6 + 14*0.4, 0},
		// The two cross-socket hops bounce; the slowest P2P hop joins the
		// socket's two host bridges: + 0.5 - 0.4 per step.
		{"2s/PHB", "rtxpro6000-2s", ncclenv.Settings{Proto: "LL", P2PLevel: "PHB"}, 6.6 + 14*(1+14*2.0/8+0.1), 2},
		{"switch/default", "rtxpro6000-switch", ncclenv.Settings{Proto: "LL"}, 118.6 + 14*0.1, 4},
		{"switch/p2p-disabled", "rtxpro6000-switch", ncclenv.Settings{Proto: "LL", P2PDisable: true}, 216.6, 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := collModel(t, c.topo, 8, c.o).Cost(model.AllReduce, nil, 1024)
			if !collNear(got.LatencyUs, c.wantLat, 1e-9) || got.SHMHops != c.wantSHM {
				t.Errorf("latency %.3f us with %d SHM hops, want %.3f with %d", got.LatencyUs, got.SHMHops, c.wantLat, c.wantSHM)
			}
		})
	}
}

// TestDirection: changing the box changes the prediction the right way.
func TestDirection(t *testing.T) {
	type setup struct {
		topo string
		o    ncclenv.Settings
	}
	cases := []struct {
		name           string
		faster, slower setup
		bytes          int64
	}{
		// PIX pairs inside a switch keep P2P at the default level; the
		// dual-socket box bounces every hop through host memory.
		{"switch beats 2s at default level, 16 KiB", setup{"rtxpro6000-switch", ncclenv.Settings{}}, setup{"rtxpro6000-2s", ncclenv.Settings{}}, 16 << 10},
		// At SYS both are all-P2P; the switch uplink (54) beats xGMI (45).
		{"switch beats 2s at SYS, 256 MiB", setup{"rtxpro6000-switch", ncclenv.Settings{P2PLevel: "SYS"}}, setup{"rtxpro6000-2s", ncclenv.Settings{P2PLevel: "SYS"}}, 256 << 20},
		{"SYS beats default on 2s, 16 KiB", setup{"rtxpro6000-2s", ncclenv.Settings{P2PLevel: "SYS"}}, setup{"rtxpro6000-2s", ncclenv.Settings{}}, 16 << 10},
		{"SYS beats default on 2s, 64 MiB", setup{"rtxpro6000-2s", ncclenv.Settings{P2PLevel: "SYS"}}, setup{"rtxpro6000-2s", ncclenv.Settings{}}, 64 << 20},
		{"Gen5 beats Gen4 (switch, SYS), 64 MiB", setup{"rtxpro6000-switch", ncclenv.Settings{P2PLevel: "SYS"}}, setup{"rtxpro6000-switch-gen4", ncclenv.Settings{P2PLevel: "SYS"}}, 64 << 20},
		{"Gen5 beats Gen4 (2s, default), 64 MiB", setup{"rtxpro6000-2s", ncclenv.Settings{}}, setup{"rtxpro6000-2s-gen4", ncclenv.Settings{}}, 64 << 20},
		{"P2P beats P2P disabled (switch)", setup{"rtxpro6000-switch", ncclenv.Settings{}}, setup{"rtxpro6000-switch", ncclenv.Settings{P2PDisable: true}}, 1 << 20},
		{"NVSwitch beats PCIe", setup{"h200-nvswitch", ncclenv.Settings{}}, setup{"rtxpro6000-2s", ncclenv.Settings{P2PLevel: "SYS"}}, 1 << 20},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := collModel(t, c.faster.topo, 8, c.faster.o).Cost(model.AllReduce, nil, c.bytes)
			s := collModel(t, c.slower.topo, 8, c.slower.o).Cost(model.AllReduce, nil, c.bytes)
			if !(f.TimeUs < s.TimeUs) {
				t.Errorf("%s: %.2f us (%s/%s) is not below %s: %.2f us (%s/%s)", c.faster.topo, f.TimeUs, f.Algo, f.Proto, c.slower.topo, s.TimeUs, s.Algo, s.Proto)
			}
		})
	}
}

// TestAllToAllByHand: H200, 8 ranks, 64 MiB send buffer. Every rank sends
// 8 MiB to each of 7 peers at once; each GPU's NVLink to the NVSwitch
// carries 7 flows out: 7 x 8 MiB / 450 GB/s. Latency: Simple, 8.4 + 7 x 3.4.
func TestAllToAllByHand(t *testing.T) {
	m := collModel(t, "h200-nvswitch", 8, ncclenv.Settings{})
	const b = 64 << 20
	got := m.Cost(model.AllToAll, nil, b)
	want := 8.4 + 7*3.4 + 7*float64(b/8)/(1000*450)
	if got.Proto != "Simple" || !collNear(got.TimeUs, want, 1e-6*want) {
		t.Errorf("all-to-all %s %.3f us, want Simple %.3f", got.Proto, got.TimeUs, want)
	}
	// 2s at SYS: the socket link carries 4 x 4 = 16 flows of b/8 per
	// direction at 45 GB/s; the GPU links 7 flows at 54: xGMI binds. The
	// slowest pair crosses the sockets: 7 rounds x (0.8 - 0.4) us.
	m2 := collModel(t, "rtxpro6000-2s", 8, ncclenv.Settings{P2PLevel: "SYS"})
	got = m2.Cost(model.AllToAll, nil, b)
	want = 8.4 + 7*(5.7+0.4) + 16*float64(b/8)/(1000*45)
	if !collNear(got.TimeUs, want, 1e-6*want) {
		t.Errorf("2s all-to-all %.3f us, want %.3f (bottleneck %s)", got.TimeUs, want, got.Bottleneck)
	}
}

// TestCustomAllReduceByHand: 2s box, 8 GPUs. Farthest pair (across
// sockets): 0.2 + 0.05 + 0.3 + 0.05 + 0.2 = 0.8 us. One-shot: 3 + 2 x 0.8
// = 4.6 us latency; every rank reads the buffer from 7 peers, the socket
// link carries 16 flows per direction at 45 GB/s, PCIe read efficiency 0.8.
// Two-shot: 3 + 3 x 0.8 = 5.4 us; 2 x b/8 per pair.
func TestCustomAllReduceByHand(t *testing.T) {
	m := collModel(t, "rtxpro6000-2s", 8, ncclenv.Settings{})
	const b = 1 << 20
	one, ok := m.CustomAllReduce(nil, b, false)
	if !ok {
		t.Fatal("one-shot not available on 2s")
	}
	want := 4.6 + 16*float64(b)/(1000*45)/0.8
	if !collNear(one.TimeUs, want, 1e-6*want) {
		t.Errorf("one-shot %.3f us, want %.3f", one.TimeUs, want)
	}
	two, _ := m.CustomAllReduce(nil, b, true)
	want = 5.4 + 16*2*float64(b)/8/(1000*45)/0.8
	if !collNear(two.TimeUs, want, 1e-6*want) {
		t.Errorf("two-shot %.3f us, want %.3f", two.TimeUs, want)
	}
	// Small messages: one-shot beats NCCL at the default level (216.6 us latency).
	small, _ := m.CustomAllReduce(nil, 16<<10, false)
	if nc := m.Cost(model.AllReduce, nil, 16<<10); !(small.TimeUs < nc.TimeUs) {
		t.Errorf("one-shot 16 KiB %.2f us not below NCCL %.2f us", small.TimeUs, nc.TimeUs)
	}
	if _, ok := collModel(t, "rtxpro6000-2s", 8, ncclenv.Settings{P2PDisable: true}).CustomAllReduce(nil, b, false); ok {
		t.Error("custom all-reduce available with P2P disabled")
	}
}

// TestCalibrationOverride: calibrated constants in the topology replace
// NCCL's for their (op, algo, proto, p2p level), scaled to other groups
// and to other channel counts by the modeled bandwidth ratio.
func TestCalibrationOverride(t *testing.T) {
	tp := collTopo(t, "rtxpro6000-2s", 0).Clone()
	tp.Calibration = &topology.Calibration{Source: "test", Collectives: []topology.CollectiveParams{
		{Op: "allreduce", Algo: "Ring", Proto: "LL", Ranks: 8, P2PLevel: "SYS", BaseLatUs: 10, HwLatUs: 2, BusBWGBps: 10},
	}}
	if err := tp.Validate(); err != nil {
		t.Fatal(err)
	}
	m, err := NewCollectiveModel(tp, ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"})
	if err != nil {
		t.Fatal(err)
	}
	const b = 1 << 20
	got := m.Cost(model.AllReduce, nil, b)
	// 10 + 14 x 2 = 38 us; algBw = 10 x 8/14.
	want := 38 + b/(1000*10*8.0/14)
	if !got.Calibrated || !collNear(got.TimeUs, want, 1e-6*want) {
		t.Errorf("calibrated %v time %.3f, want %.3f", got.Calibrated, got.TimeUs, want)
	}
	// 4 GPUs of socket 0: no socket link in the ring; NCCL sees it at 48
	// GB/s (>= 25: 4 channels), modeled min(54, 4 x 11.1) = 44.4 against
	// the 8-GPU reference's min(45, 2 x 11.1) = 22.2: busBw 10 x 44.4/22.2
	// = 20; 10 + 6 x 2 = 22 us.
	got = m.Cost(model.AllReduce, []int{0, 1, 2, 3}, b)
	want = 22 + b/(1000*20*4.0/6)
	if !collNear(got.TimeUs, want, 1e-6*want) {
		t.Errorf("4-rank calibrated time %.3f, want %.3f", got.TimeUs, want)
	}
	// Another P2P level: the entry does not apply.
	m2, _ := NewCollectiveModel(tp, ncclenv.Settings{Proto: "LL"})
	if m2.Cost(model.AllReduce, nil, b).Calibrated {
		t.Error("calibration measured at SYS applied at PXB")
	}
	// Channels: the entry above ran NCCL's own 2 (it records none); at
	// NCCL_MIN_NCHANNELS=8 the modeled ring goes from min(45, 2 x 11.1) =
	// 22.2 to min(45, 8 x 11.1) = 45: busBw 10 x 45/22.2.
	m8, _ := NewCollectiveModel(tp, ncclenv.Settings{Proto: "LL", P2PLevel: "SYS", MinChannels: 8})
	got = m8.Cost(model.AllReduce, nil, b)
	want = 38 + b/(1000*10*45/22.2*8.0/14)
	if !got.Calibrated || !collNear(got.TimeUs, want, 1e-6*want) {
		t.Errorf("calibrated at 2 channels, priced at 8: %.3f us, want %.3f", got.TimeUs, want)
	}
	// An entry measured at 8 channels (channels: 8) prices NCCL's own 2
	// at 10 x 22.2/45, and 8 as measured.
	tp8 := tp.Clone()
	tp8.Calibration.Collectives[0].Channels = 8
	m, _ = NewCollectiveModel(tp8, ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"})
	got = m.Cost(model.AllReduce, nil, b)
	want = 38 + b/(1000*10*22.2/45*8.0/14)
	if !collNear(got.TimeUs, want, 1e-6*want) {
		t.Errorf("calibrated at 8 channels, priced at 2: %.3f us, want %.3f", got.TimeUs, want)
	}
	m, _ = NewCollectiveModel(tp8, ncclenv.Settings{Proto: "LL", P2PLevel: "SYS", MinChannels: 8})
	got = m.Cost(model.AllReduce, nil, b)
	want = 38 + b/(1000*10*8.0/14)
	if !collNear(got.TimeUs, want, 1e-6*want) {
		t.Errorf("calibrated at 8 channels, priced at 8: %.3f us, want %.3f", got.TimeUs, want)
	}
}

func TestOptionErrors(t *testing.T) {
	tp := collTopo(t, "rtxpro6000-2s", 0)
	for _, o := range []ncclenv.Settings{{Proto: "LL129"}, {Proto: "^LL,LL128,Simple"}, {Algo: "Ringg"}, {Algo: "^Ring,Tree"}, {P2PLevel: "FOO"}} {
		t.Run(fmt.Sprintf("%+v", o), func(t *testing.T) {
			if _, err := NewCollectiveModel(tp, o); err == nil {
				t.Errorf("no error for %+v", o)
			}
		})
	}
	m, _ := NewCollectiveModel(tp, ncclenv.Settings{})
	if err := m.ValidateGroup([]int{0, 9}); err == nil {
		t.Error("group with rank 9 on 8 GPUs accepted")
	}
	if err := m.ValidateGroup([]int{1, 1}); err == nil {
		t.Error("group with a repeated rank accepted")
	}
	if c := m.Cost(model.AllReduce, []int{3}, 1<<20); c.TimeUs != 0 {
		t.Errorf("single-rank all-reduce costs %v us", c.TimeUs)
	}
}

func BenchmarkCollectiveCost(b *testing.B) {
	for _, c := range []struct {
		topo string
		op   model.Collective
	}{{"rtxpro6000-2s", model.AllReduce}, {"h200-nvswitch", model.AllReduce}, {"rtxpro6000-2s", model.AllToAll}} {
		b.Run(fmt.Sprintf("topo=%s/op=%s/ranks=8", c.topo, c.op), func(b *testing.B) {
			m := collModel(b, c.topo, 8, ncclenv.Settings{})
			group := []int{0, 1, 2, 3, 4, 5, 6, 7}
			m.Cost(c.op, group, 1)
			b.ReportAllocs()
			b.ResetTimer()
			var sink float64
			for i := 0; i < b.N; i++ {
				sink += m.Cost(c.op, group, int64(1024+i&0xffff)).TimeUs
			}
			_ = sink
		})
	}
}

// TestConcurrentCost: the model is shared by goroutines of a sweep; the
// per-group cache must be safe (run with -race). Every goroutine asks for
// groups the others are building and must get the same answer as a fresh
// model.
func TestConcurrentCost(t *testing.T) {
	m := collModel(t, "rtxpro6000-2s", 8, ncclenv.Settings{})
	fresh := collModel(t, "rtxpro6000-2s", 8, ncclenv.Settings{})
	groups := [][]int{{0, 1}, {0, 1, 2, 3}, {4, 5, 6, 7}, nil}
	done := make(chan error, 8)
	for w := 0; w < 8; w++ {
		go func(w int) {
			for i := 0; i < 200; i++ {
				g := groups[(w+i)%len(groups)]
				if m.Cost(model.AllReduce, g, 1<<20).TimeUs <= 0 {
					done <- fmt.Errorf("worker %d: non-positive time", w)
					return
				}
			}
			done <- nil
		}(w)
	}
	for w := 0; w < 8; w++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range groups {
		if a, b := m.Cost(model.AllReduce, g, 1<<20), fresh.Cost(model.AllReduce, g, 1<<20); a != b {
			t.Errorf("group %v: %+v != %+v", g, a, b)
		}
	}
}

// TestCalibrationsOfTwoGroupSizes: a box calibrated with an all-reduce
// fitted on 2 ranks and an all-gather on 4 (calibrate --trace of a TP-2
// run on a box whose all-gather came from a 4-rank fit) prices each group:
// a calibrated entry's bandwidth is scaled by the model's ratio between
// the group priced and the group it was measured on, whose links alone
// that takes. The 2-rank all-reduce is its own reference, so it is the
// entry's figures: 5 + 2 x 1 us of latency and 1 MiB at 10 GB/s bus (the
// ring's bus-to-algorithm ratio n/2(n-1) is 1 at 2 ranks), 104.8576 us.
func TestCalibrationsOfTwoGroupSizes(t *testing.T) {
	tp := collTopo(t, "h200-nvswitch", 0).Clone()
	tp.Calibration = &topology.Calibration{Source: "test", Collectives: []topology.CollectiveParams{
		{Op: "allreduce", Algo: "Ring", Proto: "LL", Ranks: 2, BaseLatUs: 5, HwLatUs: 1, BusBWGBps: 10},
		{Op: "allgather", Algo: "Ring", Proto: "LL", Ranks: 4, BaseLatUs: 7, HwLatUs: 2, BusBWGBps: 20},
	}}
	m, err := NewCollectiveModel(tp, ncclenv.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	c, ok := m.CostWith(model.AllReduce, []int{0, 1}, 1<<20, "Ring", "LL")
	if !ok || !c.Calibrated || math.Abs(c.LatencyUs-7) > 1e-9 || math.Abs(c.LinkUs-104.8576) > 1e-6 {
		t.Errorf("2-rank all-reduce: %+v (ok %v); want calibrated, latency 7 us, link 104.8576 us", c, ok)
	}
	g, ok := m.CostWith(model.AllGather, []int{0, 1, 2, 3}, 1<<20, "Ring", "LL")
	if !ok || !g.Calibrated || math.Abs(g.LatencyUs-(7+3*2)) > 1e-9 {
		t.Errorf("4-rank all-gather: %+v (ok %v); want calibrated, latency 13 us", g, ok)
	}
}
