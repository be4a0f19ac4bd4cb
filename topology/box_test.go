package topology

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestParseBox(t *testing.T) {
	ok := []struct {
		in   string
		want Box
	}{
		{"nvswitch:8xh100-sxm", Box{Fabric: "nvswitch", GPUs: 8, GPU: "h100-sxm"}},
		{"pcie-switch:8xl40s", Box{Fabric: "pcie-switch", GPUs: 8, GPU: "l40s"}},
		{"pcie-2s:8xrtxpro6000-server", Box{Fabric: "pcie-2s", GPUs: 8, GPU: "rtx-pro-6000-server"}},
		{"pcie-1s:4xrtx5090", Box{Fabric: "pcie-1s", GPUs: 4, GPU: "rtx-5090"}},
		{"nvl:2xh100-nvl", Box{Fabric: "nvl", GPUs: 2, GPU: "h100-nvl"}},
		{" PCIe-2S:8xRTX-PRO-6000-Server-gen4-intel-emr ", Box{Fabric: "pcie-2s", GPUs: 8, GPU: "rtx-pro-6000-server", PCIeGen: 4, CPU: "intel-emr"}},
		{"pcie-2s:8xl40s-amd-gen3", Box{Fabric: "pcie-2s", GPUs: 8, GPU: "l40s", PCIeGen: 3, CPU: "amd"}},
		{"nvswitch:8", Box{Fabric: "nvswitch", GPUs: 8}},
		{"pcie-2s:8-gen4", Box{Fabric: "pcie-2s", GPUs: 8, PCIeGen: 4}},
		{"pcie-1s:3xl4", Box{Fabric: "pcie-1s", GPUs: 3, GPU: "l4"}},
	}
	for _, c := range ok {
		t.Run(c.in, func(t *testing.T) {
			b, err := ParseBox(c.in)
			if err != nil || b != c.want {
				t.Fatalf("ParseBox = %+v, %v; want %+v", b, err, c.want)
			}
			// Round trip through the canonical form.
			b2, err := ParseBox(b.String())
			if err != nil || b2 != b {
				t.Errorf("ParseBox(%q) = %+v, %v; want %+v", b.String(), b2, err, b)
			}
		})
	}
	bad := []struct{ in, want string }{
		{"h100", "want <fabric>:<count>x<gpu>"},
		{"hgx:8xh100-sxm", `unknown fabric "hgx" (want one of nvswitch, nvl, pcie-switch, pcie-1s, pcie-2s)`},
		{"nvswitch:xh100-sxm", "GPU count missing"},
		{"nvswitch:0xh100-sxm", "GPU count 0 out of range"},
		{"nvswitch:1000xh100-sxm", "GPU count 1000 out of range"},
		{"nvswitch:8xh999", `unknown GPU "h999" (want one of a100-pcie, a100-sxm,`},
		{"nvswitch:8h100-sxm", `"h100-sxm" after the count: want x<gpu>`},
		{"pcie-2s:3xl40s", "pcie-2s needs an even GPU count"},
		{"nvswitch:8xl40s", "l40s is not an NVSwitch part (nvswitch takes a100-sxm, b200,"},
		{"nvl:2xh100-sxm", "h100-sxm takes no NVLink bridge (nvl takes a100-pcie, h100-nvl, h100-pcie, h200-nvl)"},
		{"pcie-2s:8xh100-sxm", "h100-sxm is a sxm part, not a PCIe card"},
		{"pcie-2s:8xl40s-gen4-gen5", "two PCIe generations"},
		{"pcie-2s:8xl40s-amd-intel-spr", "two CPUs"},
		// One NVSwitch domain per box: an HGX baseboard holds 8 GPUs, an
		// NVL72 rack's NVLink domain 72.
		{"nvswitch:16xh200-sxm", "h200-sxm sits on an HGX baseboard of 8 GPUs, one NVSwitch domain: got 16"},
		{"nvswitch:10xb300", "b300 sits on an HGX baseboard of 8 GPUs"},
		{"nvswitch:74xgb200", "gb200 GPUs share one NVLink domain of at most 72"},
		{"nvswitch:8xgb200-intel-spr", "-intel-spr: gb200's CPUs are its superchips' Grace CPUs"},
	}
	for _, c := range bad {
		t.Run("bad/"+c.in, func(t *testing.T) {
			_, err := ParseBox(c.in)
			if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v; want one line containing %q", err, c.want)
			}
		})
	}
}

// FuzzParseBox: the parser never panics, what it accepts round-trips
// through String, and building an accepted box with a GPU either succeeds
// with that many GPUs or fails with an error.
func FuzzParseBox(f *testing.F) {
	for _, s := range []string{"nvswitch:8xh100-sxm", "pcie-switch:8xl40s", "pcie-2s:8xrtxpro6000-server-gen4", "pcie-1s:4xrtx5090",
		"nvl:2xh100-nvl", "nvswitch:8", "pcie-2s:8-intel-emr", "nvl:4xh200-nvl-amd", ":", "x:1x", "pcie-1s:1x-gen6", "pcie-switch:7xl4-gen3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := ParseBox(s)
		if err != nil {
			return
		}
		b2, err := ParseBox(b.String())
		if err != nil || b2 != b {
			t.Fatalf("%q parsed to %+v, whose String %q parses to %+v, %v", s, b, b.String(), b2, err)
		}
		if b.GPU == "" {
			return
		}
		tp, err := b.Build()
		if err == nil && tp.NumGPUs() != b.GPUs {
			t.Fatalf("%q: built %d GPUs", s, tp.NumGPUs())
		}
	})
}

// TestBoxLayouts checks each fabric's links against what the description
// says, with levels and bandwidths derived by hand: NVLink 4 SXM = 18 x 25
// GB/s = 450 per direction (datasheet), the H100 NVL bridge 600 GB/s
// bidirectional = 300 per direction, PCIe Gen4 x16 = half the measured
// Gen5 54 GB/s (the presets' rule), a PCIe switch of 2 GPUs = PIX, two root
// complexes of one socket = NODE, across sockets = SYS.
func TestBoxLayouts(t *testing.T) {
	cases := []struct {
		desc   string
		n      int
		i, j   int
		level  string
		bwGBps float64
	}{
		{"nvswitch:8xh100-sxm", 8, 0, 7, "NV18", 450},
		{"nvswitch:8xb200", 8, 0, 7, "NV18", 900},
		{"nvswitch:8xa100-sxm", 8, 0, 7, "NV12", 300},
		{"pcie-switch:8xl40s", 8, 0, 1, "PIX", 27},
		{"pcie-switch:8xl40s", 8, 0, 2, "PHB", 27},
		{"pcie-2s:8xrtxpro6000-server", 8, 0, 1, "PHB", 54},
		{"pcie-2s:8xrtxpro6000-server", 8, 0, 2, "NODE", 54},
		{"pcie-2s:8xrtxpro6000-server", 8, 0, 4, "SYS", 45},
		{"pcie-1s:4xrtx5090", 4, 0, 1, "PHB", 54},
		{"pcie-1s:4xrtx5090", 4, 0, 3, "NODE", 54},
		{"pcie-1s:3xl4", 3, 0, 2, "NODE", 27},
		{"nvl:2xh100-nvl", 2, 0, 1, "NV12", 300},
		{"nvl:4xh200-nvl", 4, 0, 1, "NV18", 450},
		{"nvl:4xh200-nvl", 4, 0, 2, "SYS", 45},
		{"pcie-switch:7xl4", 7, 5, 6, "PHB", 27},
	}
	for _, c := range cases {
		t.Run(c.desc+"/"+c.level, func(t *testing.T) {
			tp, err := Resolve(c.desc, 0)
			if err != nil {
				t.Fatal(err)
			}
			p := tp.Path(c.i, c.j)
			if tp.NumGPUs() != c.n || p.LevelString() != c.level || math.Abs(p.BWGBps-c.bwGBps) > 1e-9 || tp.Name != c.desc {
				t.Errorf("%s: %d GPUs, gpu%d-gpu%d %s %.1f GB/s; want %d, %s %.1f", tp.Name, tp.NumGPUs(), c.i, c.j, p.LevelString(), p.BWGBps, c.n, c.level, c.bwGBps)
			}
		})
	}
	// --gpus cuts a described box like a preset.
	tp, err := Resolve("nvswitch:8xh100-sxm", 2)
	if err != nil || tp.NumGPUs() != 2 || tp.Name != "nvswitch:8xh100-sxm/2gpu" {
		t.Errorf("Resolve with --gpus 2: %v, %v", tp, err)
	}
	// A bad description is an error that says so; a name that is neither
	// a preset nor a description says "not a preset".
	if _, err := Resolve("nvswitch:8xh999", 0); err == nil || !strings.Contains(err.Error(), `unknown GPU "h999"`) || !strings.Contains(err.Error(), "not a preset") {
		t.Errorf("bad description: %v", err)
	}
}

// TestPresetsUnchanged: every preset variant builds the topology it built
// before presets became names for box descriptions (testdata/presets/*.json,
// written by the previous builders), except the differences listed here
// on purpose:
//   - *-switch-gen4*: the description and the switch names said "Gen5"
//     though the links were Gen4; they now say Gen4 (labels only).
//   - h200-nvswitch-gen4*: the old builder ignored -gen4 for the GPU PCIe
//     links (kept Gen5) while halving the host-memory bounce; the GPU and
//     switch PCIe links now run at Gen4 as asked.
//   - all: the device is the catalog's entry for the GPU of the preset's
//     description (a preset is an alias of it), where the goldens hold the
//     presets' former hand-written devices (flat 2 us kernel floor, 1 us
//     graph-node gap, the H200's peaks derated from 1,980 MHz).
func TestPresetsUnchanged(t *testing.T) {
	ents, err := os.ReadDir("testdata/presets")
	if err != nil || len(ents) == 0 {
		t.Fatalf("golden presets: %v", err)
	}
	for _, e := range ents {
		name := strings.TrimSuffix(e.Name(), ".json")
		t.Run(name, func(t *testing.T) {
			want, err := Load("testdata/presets/" + e.Name())
			if err != nil {
				t.Fatal(err)
			}
			got, err := Preset(name)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(name, "switch-gen4") && !strings.Contains(name, "nvswitch") {
				want.Description = strings.Replace(want.Description, "PCIe Gen5 switches", "PCIe Gen4 switches", 1)
				for i := range want.Nodes {
					if want.Nodes[i].Kind == NodePCIeSwitch {
						want.Nodes[i].Name = "PCIe Gen4 switch (assumption: Broadcom PEX88000 class)"
					}
				}
			}
			if strings.HasPrefix(name, "h200-nvswitch-gen4") {
				for i := range want.GPUs {
					want.GPUs[i].PCIeGen = 4
				}
				for i, l := range want.Links {
					if l.Type == LinkPCIe {
						want.Links[i] = gpuLink(l.A, l.B, 4, l.LatUs)
					}
				}
			}
			base, _, _, _ := cutSuffixes(name)
			desc, _ := PresetDescription(base)
			b, err := ParseBox(desc)
			if err != nil {
				t.Fatal(err)
			}
			if len(want.Devices) != 1 || want.Devices[0].Name != catalogDevice(t, b.GPU).Name {
				t.Fatalf("golden devices %v: want one, named as the catalog's %s", want.Devices, b.GPU)
			}
			want.Devices = []Device{catalogDevice(t, b.GPU)}
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if string(g) != string(w) {
				t.Errorf("preset %s changed:\n got %s\nwant %s", name, g, w)
			}
		})
	}
}

// TestPresetIsDescription: a preset is an alias of its description: the
// same topology, device included, but for the name, which is the string
// asked for.
func TestPresetIsDescription(t *testing.T) {
	for _, base := range PresetNames() {
		desc, ok := PresetDescription(base)
		if !ok {
			t.Fatalf("%s: no description", base)
		}
		for _, suf := range []string{"", "-gen4", "-intel-emr", "-gen4-intel-spr", "-amd"} {
			t.Run(base+suf, func(t *testing.T) {
				p, err := Preset(base + suf)
				if err != nil {
					t.Fatal(err)
				}
				d, err := Resolve(desc+suf, 0)
				if err != nil {
					t.Fatal(err)
				}
				if p.Name != base+suf || d.Name == p.Name {
					t.Errorf("names: preset %q, description %q", p.Name, d.Name)
				}
				d.Name = p.Name
				if !reflect.DeepEqual(stripPaths(p), stripPaths(d)) {
					a, _ := json.Marshal(p)
					b, _ := json.Marshal(d)
					t.Errorf("differ:\n preset %s\n   desc %s", a, b)
				}
			})
		}
	}
}

func stripPaths(t *Topology) Topology {
	c := *t
	c.paths = nil
	return c
}

// TestReplicateOnto: `topo discover --as` on a fake discovered box: the
// discovered device, unchanged, on the described fabric, with the host's
// CPU vendor and the GPU's PCIe generation.
func TestReplicateOnto(t *testing.T) {
	probe := func(name, cc string, cores, clock int, gen int) *Topology {
		p := &Probe{Hostname: "node1", CPUVendor: "amd", Ancestor: [][]int{{0}}, P2PRead: [][]bool{{true}},
			GPUs: []ProbeGPU{{Name: name, BusID: "00000000:18:00.0", ComputeCapability: cc, CUDACores: cores, MaxSMClockMHz: clock,
				MaxMemClockMHz: 2619, MemBusWidthBits: 5120, MemBytes: 85520809984, NUMANode: 0, PCIeGen: gen, PCIeWidth: 16}}}
		tp, err := FromProbe(p)
		if err != nil {
			t.Fatal(err)
		}
		return tp
	}
	h100 := probe("NVIDIA H100 80GB HBM3", "9.0", 16896, 1980, 5)
	got, err := ReplicateOnto(h100, "nvswitch:8")
	if err != nil {
		t.Fatal(err)
	}
	if got.NumGPUs() != 8 || !reflect.DeepEqual(got.Devices[0], h100.Devices[0]) || got.Path(0, 7).LevelString() != "NV18" ||
		got.Host.Vendor != "amd" || got.Name != "discovered-node1 as nvswitch:8-gen5-amd" {
		t.Errorf("nvswitch:8: %s, %d GPUs, device same %v, %s, vendor %s", got.Name, got.NumGPUs(), reflect.DeepEqual(got.Devices[0], h100.Devices[0]), got.Path(0, 7).LevelString(), got.Host.Vendor)
	}
	got, err = ReplicateOnto(h100, "pcie-2s:8-gen4")
	if err != nil || got.NumGPUs() != 8 || got.GPUs[0].PCIeGen != 4 || got.Path(0, 4).LevelString() != "SYS" {
		t.Errorf("pcie-2s:8-gen4: %v %v", got, err)
	}
	// An unknown GPU (derived spec) on PCIe works; on NVSwitch it needs
	// NVLinks, which neither the catalog nor NVML give it.
	h800 := probe("NVIDIA H800 PCIe", "9.0", 14592, 1755, 5)
	if got, err = ReplicateOnto(h800, "pcie-1s:4"); err != nil || got.NumGPUs() != 4 || got.Devices[0].Name != "NVIDIA H800 PCIe" {
		t.Errorf("derived device on pcie-1s:4: %v", err)
	}
	for desc, want := range map[string]string{
		"nvswitch:8xh100-sxm": "name a fabric and a count only",
		"nvl:2":               "has no NVLink of the bridge kind",
		"nvswitch:4":          "", // fine for the H100 SXM
	} {
		_, err := ReplicateOnto(h100, desc)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", desc, err, want)
		}
	}
	if _, err := ReplicateOnto(h800, "nvswitch:8"); err == nil || !strings.Contains(err.Error(), "has no NVLink of the nvswitch kind") {
		t.Errorf("H800 PCIe on nvswitch: %v", err)
	}
}

// TestSameBox: a preset and its description are one box; another
// generation, another CPU, a subset or another fabric is not.
func TestSameBox(t *testing.T) {
	get := func(name string, gpus int) *Topology {
		t.Helper()
		top, err := Resolve(name, gpus)
		if err != nil {
			t.Fatal(err)
		}
		return top
	}
	base := get("rtxpro6000-2s", 0)
	for _, tc := range []struct {
		name string
		gpus int
		same bool
	}{
		{"rtxpro6000-2s", 0, true},
		{"pcie-2s:8xrtx-pro-6000-server", 0, true},
		{"rtxpro6000-2s-gen4", 0, false},
		{"rtxpro6000-2s-intel-emr", 0, false},
		{"rtxpro6000-2s", 4, false},
		{"rtxpro6000-switch", 0, false},
		{"h200-nvswitch", 0, false},
	} {
		if got := base.SameBox(get(tc.name, tc.gpus)); got != tc.same {
			t.Errorf("rtxpro6000-2s and %s@%d: same box %v, want %v", tc.name, tc.gpus, got, tc.same)
		}
	}
}

// TestRackBoxHost: a GB200/GB300 box is (a slice of) an NVL72 rack, whose
// host is no dual-socket x86 HGX server: each superchip is one Grace CPU
// with two GPUs (NVLink-C2C), two superchips a compute tray, each tray a
// host numbering its Graces NUMA 0 and 1 (NVIDIA's Multi-Node Tuning
// Guide: 18 compute trays of 4 GPUs). "topo show nvswitch:72xgb200" had
// described "(HGX), dual socket host, Intel Xeon Sapphire Rapids". No
// link joins two Graces, so a hop through host memory has a route only
// between the two GPUs of one superchip. An HGX box keeps its host.
func TestRackBoxHost(t *testing.T) {
	for _, n := range []int{8, 36, 72} {
		desc := fmt.Sprintf("nvswitch:%dxgb200", n)
		top, err := Resolve(desc, 0)
		if err != nil {
			t.Fatalf("%s: %v", desc, err)
		}
		d := top.Description
		if strings.Contains(d, "HGX") || strings.Contains(d, "dual socket") || strings.Contains(top.Host.CPU, "Xeon") ||
			!strings.Contains(top.Host.CPU, "Grace") || !strings.Contains(d, fmt.Sprintf("(%d trays)", n/4)) {
			t.Errorf("%s: description %q, host %q; want Grace CPUs and %d compute trays, no HGX or Xeon", desc, d, top.Host.CPU, n/4)
		}
		if top.Host.Sockets != n/2 || top.Host.InterSocketNCCLGBps != 0 {
			t.Errorf("%s: %d sockets, socket link %v GB/s; want one Grace per superchip (%d), no socket link", desc, top.Host.Sockets, top.Host.InterSocketNCCLGBps, n/2)
		}
		for i, g := range top.GPUs {
			if g.Socket != i/2 || g.NUMANode != (i/2)%2 {
				t.Errorf("%s: %s on socket %d NUMA %d; want socket %d NUMA %d", desc, g.ID, g.Socket, g.NUMANode, i/2, (i/2)%2)
			}
			for j := range top.GPUs {
				if want := i/2 == j/2; top.HostRoute(i, j) != want {
					t.Errorf("%s: host route %s-%s %v, want %v", desc, g.ID, top.GPUs[j].ID, !want, want)
				}
				if i != j && top.Path(i, j).Level != LevelNV {
					t.Errorf("%s: %s-%s level %v; want NVLink", desc, g.ID, top.GPUs[j].ID, top.Path(i, j).Level)
				}
			}
		}
	}
	h, err := Resolve("h200-nvswitch", 0)
	if err != nil {
		t.Fatal(err)
	}
	if h.Host.Sockets != 2 || !strings.Contains(h.Host.CPU, "Sapphire Rapids") || !h.HostRoute(0, 7) {
		t.Errorf("h200-nvswitch: host %+v; want its dual-socket Xeon host, GPUs 0 and 7 routed through it", h.Host)
	}
}

// TestHGXHostIsReferenceDGX: an nvswitch box of SXM GPUs without a CPU
// suffix has the host of its GPU generation's reference DGX system, not
// a Sapphire Rapids host for every generation: DGX A100 ships two AMD
// EPYC 7742 (Rome; DGX A100 datasheet), DGX H100 and H200 two Xeon
// Platinum 8480C (Sapphire Rapids; their datasheets), DGX B200 two Xeon
// Platinum 8570 (Emerald Rapids; DGX B200 user guide), DGX B300 two Xeon
// 6776P (Granite Rapids). What the host prices is NCCL's model of a hop
// through it (topo.h, topo.cc, paths.cc): the socket link at AMD_BW 16
// for any AMD CPU, ERP_QPI_BW 40 for Emerald Rapids (model 0xCF) and
// SRP_QPI_BW 22 for Sapphire and Granite Rapids (0x8F, 0xAD), and an
// Intel root complex taking 6/5 of the bandwidth (INTEL_P2P_OVERHEAD). A
// hop from GPU 0 to GPU 4 (the other socket) through host memory is then
// bound by the socket link below the GPUs' PCIe (NCCL's x16 figures: Gen4
// 24, Gen5 48, Gen6 96 GB/s): A100 16 (it had been priced 22 x 5/6), B200
// 40 x 5/6 (had been 22 x 5/6), Hopper 22 x 5/6. A CPU suffix still picks
// the host, and the name says the reference host is assumed.
func TestHGXHostIsReferenceDGX(t *testing.T) {
	for _, c := range []struct {
		desc, cpu, vendor string
		link              LinkType
		ncclSocket, shm   float64
	}{
		{"nvswitch:8xa100-sxm", "AMD EPYC 7742 (Rome)", "amd", LinkXGMI, 16, 16},
		{"nvswitch:8xh100-sxm", "Intel Xeon Platinum 8480C (Sapphire Rapids)", "intel", LinkUPI, 22, 22 * 5.0 / 6},
		{"nvswitch:8xh200-sxm", "Intel Xeon Platinum 8480C (Sapphire Rapids)", "intel", LinkUPI, 22, 22 * 5.0 / 6},
		{"nvswitch:8xh20", "Intel Xeon Platinum 8480C (Sapphire Rapids)", "intel", LinkUPI, 22, 22 * 5.0 / 6},
		{"nvswitch:8xb200", "Intel Xeon Platinum 8570 (Emerald Rapids)", "intel", LinkUPI, 40, 40 * 5.0 / 6},
		{"nvswitch:8xb300", "Intel Xeon 6776P (Granite Rapids)", "intel", LinkUPI, 22, 22 * 5.0 / 6},
		{"nvswitch:8xa100-sxm-intel-spr", "Intel Xeon Sapphire Rapids", "intel", LinkUPI, 22, 22 * 5.0 / 6},
		{"nvswitch:8xb200-amd", "AMD EPYC", "amd", LinkXGMI, 16, 16},
	} {
		top, err := Resolve(c.desc, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.desc, err)
		}
		h := top.Host
		if !strings.Contains(h.CPU, c.cpu) || !strings.Contains(h.CPU, "assumed") || h.Vendor != c.vendor || h.Sockets != 2 || h.InterSocketNCCLGBps != c.ncclSocket {
			t.Errorf("%s: host %q (%s, %d sockets, NCCL socket link %v GB/s); want %q assumed (%s, 2 sockets, %v GB/s)", c.desc, h.CPU, h.Vendor, h.Sockets, h.InterSocketNCCLGBps, c.cpu, c.vendor, c.ncclSocket)
		}
		found := false
		for _, l := range top.Links {
			if l.A == "cpu0" && l.B == "cpu1" {
				found = l.Type == c.link
			}
		}
		if !found {
			t.Errorf("%s: no %s link between the sockets", c.desc, c.link)
		}
		if got := top.SHMHop(0, 4).NCCLBWGBps; math.Abs(got-c.shm) > 1e-9 {
			t.Errorf("%s: NCCL's bandwidth of GPU 0 to 4 through host memory %.4f GB/s, want %.4f", c.desc, got, c.shm)
		}
	}
}

// TestParseReplicaSaysItsGrammar: the fabric a discovered GPU is laid
// onto (topo discover --as) is <fabric>:<count>, and its errors say so:
// they had been ParseBox's, which asked for <fabric>:<count>x<gpu> (want
// x<gpu>, e.g. nvswitch:8xh100-sxm), the very form --as refuses.
func TestParseReplicaSaysItsGrammar(t *testing.T) {
	for in, want := range map[string]Box{
		"nvswitch:8":         {Fabric: "nvswitch", GPUs: 8},
		" PCIe-2S:8-gen4 ":   {Fabric: "pcie-2s", GPUs: 8, PCIeGen: 4},
		"pcie-1s:4-amd-gen3": {Fabric: "pcie-1s", GPUs: 4, PCIeGen: 3, CPU: "amd"},
	} {
		if b, err := ParseReplica(in); err != nil || b != want {
			t.Errorf("ParseReplica(%q) = %+v, %v; want %+v", in, b, err, want)
		}
	}
	for in, want := range map[string]string{
		"h100":                `box "h100": want <fabric>:<count>, e.g. nvswitch:8`,
		"nvswitch:8xh100-sxm": `box "nvswitch:8xh100-sxm": "xh100-sxm" after the count: name a fabric and a count only (e.g. nvswitch:8): the GPU is the discovered one`,
		"nvswitch:8x":         `"x" after the count: name a fabric and a count only (e.g. nvswitch:8)`,
		"nvswitch:xh100-sxm":  `GPU count missing after "nvswitch:" (want e.g. nvswitch:8)`,
		"hgx:8":               `unknown fabric "hgx"`,
		"pcie-2s:3":           "pcie-2s needs an even GPU count",
		"nvswitch:0":          "GPU count 0 out of range",
	} {
		_, err := ParseReplica(in)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseReplica(%q): %v, want %q", in, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "x<gpu>") || strings.Contains(err.Error(), "xh100-sxm)")) {
			t.Errorf("ParseReplica(%q): %v: asks for a GPU, which --as refuses", in, err)
		}
	}
}
