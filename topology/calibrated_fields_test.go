package topology

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCalibratedBoxMissingDeviceField: a calibrated topology JSON (a CPU
// box of 'calibrate --backend cpu' with its fitted collectives, an H100
// box of 'calibrate --trace' with calibrated_engine, an older one whose
// sources alone say "calibrated:") that lost a device field a step is
// priced with is refused in one line naming the file, the device and the
// field. Decoded, the field had read as 0 without a word: no launch cost,
// no kernel floor, the full compute and memory peak beside the fitted
// figures. A box that states no calibration (the preset as 'topo show -o'
// writes it, edited by hand) is read as its fields say, as before.
func TestCalibratedBoxMissingDeviceField(t *testing.T) {
	// The fields a step's price reads from the device whose absence has no
	// meaning of its own (Device's comments: the others, 0, say "as in a
	// graph" or "LaunchGraphUs").
	fields := []string{"arch", "boost_clock_mhz", "mem_efficiency", "l2_bytes", "launch_eager_us", "launch_graph_us", "min_kernel_us", "efficiency"}
	calibrated := []string{
		"../cmd/tpscope/testdata/cpu-ranks/cpu-4r.json",
		"../exec/cuda/testdata/h100/spec-1645-1207/h100-cal-b1.json",
		"../exec/cuda/testdata/h100/spec-1322/h100-cal-b1.json",
	}
	for _, src := range calibrated {
		if _, err := Load(src); err != nil {
			t.Fatalf("%s as written: %v", src, err)
		}
		for _, f := range fields {
			path := withoutDeviceField(t, src, f)
			_, err := Load(path)
			want := path + `: devices[0] (`
			if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), `field "`+f+`" missing`) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s without %s: error %v; want one line starting %q naming the field", src, f, err, want)
			}
		}
	}
	// Uncalibrated: the preset box written out, its priced fields cut.
	b, err := mustPreset(t, "h200-nvswitch").Marshal()
	if err != nil {
		t.Fatal(err)
	}
	preset := filepath.Join(t.TempDir(), "h200.json")
	if err := os.WriteFile(preset, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range fields {
		if f == "arch" {
			continue // a GPU's architecture family: Validate's own check
		}
		if _, err := Load(withoutDeviceField(t, preset, f)); err != nil {
			t.Errorf("uncalibrated box without %s: %v; want it read as written", f, err)
		}
	}
}

// withoutDeviceField writes the topology JSON at src, field f of its first
// device deleted, to a file of the test's own and returns its path.
func withoutDeviceField(t *testing.T, src, f string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	dev := top["devices"].([]any)[0].(map[string]any)
	if _, ok := dev[f]; !ok {
		t.Fatalf("%s: devices[0] has no %s to delete", src, f)
	}
	delete(dev, f)
	out, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "without-"+f+".json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
