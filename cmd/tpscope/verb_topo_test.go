package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/topology"
)

func TestTopoShow(t *testing.T) {
	code, out, errs := runCLI(t, "topo", "show", "rtxpro6000-2s")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	// gpu0 row: X PHB NODE NODE SYS SYS SYS SYS (see topology tests).
	if !strings.Contains(out, "gpu0           X     PHB    NODE    NODE     SYS     SYS     SYS     SYS") {
		t.Errorf("level matrix row missing:\n%s", out)
	}
	code, out, _ = runCLI(t, "topo", "show", "h200-nvswitch", "--gpus", "2", "--output", "json")
	var m struct {
		Level  [][]string  `json:"level"`
		BWGBps [][]float64 `json:"bw_gbps"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &m) != nil || len(m.Level) != 2 || m.Level[0][1] != "NV18" || m.BWGBps[0][1] != 450 {
		t.Errorf("json: exit %d, %+v", code, m)
	}
	save := filepath.Join(t.TempDir(), "box.json")
	if code, _, errs = runCLI(t, "topo", "show", "rtxpro6000-switch", "-o", save); code != 0 {
		t.Fatalf("-o: exit %d %s", code, errs)
	}
	if code, out, _ = runCLI(t, "topo", "show", save); code != 0 || !strings.Contains(out, "PIX") {
		t.Errorf("reload of saved file: exit %d", code)
	}
	if code, _, errs = runCLI(t, "topo", "show", "nope"); code != 2 || !strings.Contains(errs, "not a preset") || strings.Count(errs, "\n") != 1 {
		t.Errorf("unknown topology: exit %d, %q", code, errs)
	}
	if code, _, _ = runCLI(t, "topo", "show", "--p2p-level", "XYZ"); code != 2 {
		t.Errorf("bad --p2p-level: exit %d, want 2", code)
	}
}

// TestTopoDiscoverNoDriver: without the NVIDIA driver, one line and exit 1.
func TestTopoDiscoverNoDriver(t *testing.T) {
	for _, dir := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"} {
		if _, err := os.Stat(dir + "/libnvidia-ml.so.1"); err == nil {
			t.Skip("NVIDIA driver present")
		}
	}
	code, _, errs := runCLI(t, "topo", "discover")
	want := "tpscope topo discover: NVML not available (libnvidia-ml.so.1 not found): "
	if code != 1 || !strings.HasPrefix(errs, want) || strings.Count(errs, "\n") != 1 {
		t.Errorf("exit %d, stderr %q; want 1 and one line starting %q", code, errs, want)
	}
}

// TestTopoGPUs: the catalog listing names every entry (table) and carries
// the sources (json).
func TestTopoGPUs(t *testing.T) {
	code, out, errs := runCLI(t, "topo", "gpus")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, key := range topology.GPUNames() {
		if !strings.Contains(out, "\n"+key+" ") {
			t.Errorf("table lacks %s", key)
		}
	}
	// The H100 SXM row: cc 9.0, 132 SMs, peaks quoted at 1,830 MHz, BF16
	// 989 and FP8 1979 TF dense, no FP4 (H100 datasheet).
	if !strings.Contains(out, "h100-sxm                   9.0    132   1830    989   1979      -") {
		t.Errorf("h100-sxm row missing or wrong:\n%s", out)
	}
	code, out, _ = runCLI(t, "topo", "gpus", "--output", "json")
	var gpus []topology.GPUSpec
	if code != 0 || json.Unmarshal([]byte(out), &gpus) != nil || len(gpus) != len(topology.GPUNames()) || gpus[0].Device.Sources["sms"] == "" {
		t.Errorf("json: exit %d, %d entries", code, len(gpus))
	}
	if code, _, _ = runCLI(t, "topo", "gpus", "--output", "csv"); code != 2 {
		t.Errorf("--output csv: exit %d, want 2", code)
	}
}

// TestTopoShowDescription: topo show reads one-word box descriptions and
// names the wrong part of a bad one in one line.
func TestTopoShowDescription(t *testing.T) {
	code, out, errs := runCLI(t, "topo", "show", "nvswitch:8xh100-sxm", "--output", "json")
	var m struct {
		Level  [][]string  `json:"level"`
		BWGBps [][]float64 `json:"bw_gbps"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &m) != nil || len(m.Level) != 8 || m.Level[0][7] != "NV18" || m.BWGBps[0][7] != 450 {
		t.Errorf("exit %d %s: %+v", code, errs, m)
	}
	code, _, errs = runCLI(t, "topo", "show", "pcie-2s:3xl40s")
	if code != 2 || !strings.Contains(errs, "pcie-2s needs an even GPU count") || strings.Count(errs, "\n") != 1 {
		t.Errorf("bad description: exit %d, %q", code, errs)
	}
}

// TestTopoDiscoverAs: --as lays the discovered GPU (a fake NVML probe of
// one H100 SXM) onto the fabric; a bad --as fails before discovery.
func TestTopoDiscoverAs(t *testing.T) {
	called := false
	old := discover
	t.Cleanup(func() { discover = old })
	discover = func() (*topology.Topology, *topology.Probe, error) {
		called = true
		p := &topology.Probe{Hostname: "node1", CPUVendor: "intel", Ancestor: [][]int{{0}}, P2PRead: [][]bool{{true}},
			GPUs: []topology.ProbeGPU{{Name: "NVIDIA H100 80GB HBM3", BusID: "00000000:18:00.0", ComputeCapability: "9.0", CUDACores: 16896,
				MaxSMClockMHz: 1980, MaxMemClockMHz: 2619, MemBusWidthBits: 5120, MemBytes: 85520809984, NUMANode: 0, PCIeGen: 5, PCIeWidth: 16}}}
		tp, err := topology.FromProbe(p)
		return tp, p, err
	}
	file := filepath.Join(t.TempDir(), "hgx.json")
	code, out, errs := runCLI(t, "topo", "discover", "--as", "nvswitch:8", "-o", file)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	tp, err := topology.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	d := tp.DeviceOf(0)
	if tp.NumGPUs() != 8 || tp.Path(0, 7).LevelString() != "NV18" || d.Name != "NVIDIA H100 80GB HBM3" || d.PeakTFLOPS["fp8"] != 1978.9 ||
		d.MemBytes != 85520809984 || tp.Host.Vendor != "intel" || !strings.Contains(out, "NV18") {
		t.Errorf("%s: %d GPUs, %s, device %s fp8 %v mem %d, vendor %s", tp.Name, tp.NumGPUs(), tp.Path(0, 7).LevelString(), d.Name, d.PeakTFLOPS["fp8"], d.MemBytes, tp.Host.Vendor)
	}
	called = false
	for bad, want := range map[string]string{
		"nvswitch:8xh100-sxm": "name a fabric and a count only (e.g. nvswitch:8)",
		"hgx:8":               `unknown fabric "hgx"`,
		// The grammar said is --as's own, not a box description's
		// <fabric>:<count>x<gpu>.
		"h100":        "want <fabric>:<count>, e.g. nvswitch:8",
		"nvswitch:8x": "name a fabric and a count only",
	} {
		if code, _, errs = runCLI(t, "topo", "discover", "--as", bad); code != 2 || called || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, want) || strings.Contains(errs, "x<gpu>") {
			t.Errorf("--as %s: exit %d, discovered %v, %q; want one line saying %q", bad, code, called, errs, want)
		}
	}
}

// TestMixedDeviceBoxRefused: a topology file whose gpus[4] is another GPU
// model is refused before any work, as a bad --topo file is (exit 2),
// naming the file and gpus[4].device: predict used to fail in sim (exit
// 1) and plan to print "no swept configuration fits" (exit 0).
func TestMixedDeviceBoxRefused(t *testing.T) {
	dir := t.TempDir()
	box := filepath.Join(dir, "box.json")
	if code, _, errs := runCLI(t, "topo", "show", "rtxpro6000-2s", "-o", box); code != 0 {
		t.Fatalf("topo show: exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(box)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	other := map[string]any{}
	for k, v := range m["devices"].([]any)[0].(map[string]any) {
		other[k] = v
	}
	other["name"] = "Other GPU"
	m["devices"] = append(m["devices"].([]any), other)
	m["gpus"].([]any)[4].(map[string]any)["device"] = "Other GPU"
	mixed := filepath.Join(dir, "mixed.json")
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mixed, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"predict", "--topo", mixed}, {"plan", "--topo", mixed, "--plan", "tp8"}} {
		code, out, errs := runCLI(t, args...)
		if code != 2 || !strings.Contains(errs, mixed+": ") || !strings.Contains(errs, `gpus[4].device: "Other GPU"`) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%s: exit %d stdout %q stderr %q, want exit 2 and one line naming %s and gpus[4].device", args[0], code, out, errs, mixed)
		}
	}
}

// TestTopoShowP2PLevelHelp: topo show's --p2p-level help names every
// level it takes, as predict's does (NCCL_P2P_LEVEL's LOC to SYS); it had
// left out NVB and PXN, which it read and priced.
func TestTopoShowP2PLevelHelp(t *testing.T) {
	code, out, errs := runCLI(t, "topo", "show", "--help")
	if code != 0 {
		t.Fatalf("topo show --help: exit %d: %s", code, errs)
	}
	var help string
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, "--p2p-level") && strings.Contains(line, "NCCL_P2P_LEVEL") {
			help = line
		}
	}
	for _, lv := range []string{"LOC", "NVL", "NVB", "PIX", "PXB", "PXN", "PHB", "SYS"} {
		if code, _, errs := runCLI(t, "topo", "show", "rtxpro6000-2s", "--p2p-level", lv); code != 0 {
			t.Errorf("topo show --p2p-level %s: exit %d: %s", lv, code, errs)
		}
		if !strings.Contains(help, " "+lv+",") && !strings.Contains(help, " "+lv+" ") {
			t.Errorf("topo show takes --p2p-level %s; its help does not name it: %q", lv, help)
		}
	}
}
