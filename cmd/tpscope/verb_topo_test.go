package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if code, _, errs = runCLI(t, "topo", "show", "rtxpro6000-switch", "--save", save); code != 0 {
		t.Fatalf("--save: exit %d %s", code, errs)
	}
	if code, out, _ = runCLI(t, "topo", "show", save); code != 0 || !strings.Contains(out, "PIX") {
		t.Errorf("reload of saved file: exit %d", code)
	}
	if code, _, errs = runCLI(t, "topo", "show", "nope"); code != 1 || !strings.Contains(errs, "not a preset") || strings.Count(errs, "\n") != 1 {
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
