package topology

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/internal/topofiletest"
)

// pricedFieldNames are the device fields a step is priced with whose
// absence has no meaning of its own (Device's comments: the others, 0,
// say "as in a graph" or "LaunchGraphUs"), written out here rather than
// read from pricedFields so that a field dropped from that list fails.
var pricedFieldNames = []string{"arch", "compute_capability", "sms", "boost_clock_mhz", "sm_clock_mhz", "mem_bytes",
	"mem_bw_gbps", "mem_efficiency", "l2_bytes", "peak_tflops", "launch_eager_us", "launch_graph_us", "min_kernel_us", "efficiency"}

// TestCalibratedBoxMissingDeviceField: a calibrated topology JSON (a CPU
// box of 'calibrate --backend cpu' with its fitted collectives, an H100
// box of 'calibrate --trace' with calibrated_engine, an older one whose
// sources alone say "calibrated:") that lost a device field a step is
// priced with is refused in one line naming the file, the device and the
// field, even where the catalog knows the GPU: its calibration was fitted
// beside the lost value. Decoded, the field had read as 0 without a word:
// no launch cost, no kernel floor, the full compute and memory peak
// beside the fitted figures.
func TestCalibratedBoxMissingDeviceField(t *testing.T) {
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
			path := topofiletest.WithoutDeviceField(t, src, f)
			_, err := Load(path)
			want := path + `: devices[0] (`
			if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), `field "`+f+`" missing`) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s without %s: error %v; want one line starting %q naming the field", src, f, err, want)
			}
		}
	}
}

// writeBox writes tp as topo show -o does and returns the file's path.
func writeBox(t *testing.T, tp *Topology, name string) string {
	t.Helper()
	return topofiletest.Write(t, tp, name)
}

// deviceJSON is a device's fields as its JSON has them.
func deviceJSON(t *testing.T, d *Device) map[string]any {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestHandWrittenBoxTakesCatalogFields: a topology file that states no
// calibration (the preset box as 'topo show -o' writes it, edited by
// hand) whose device is a catalog GPU ("NVIDIA H200", the catalog's
// h200-sxm) may leave out any priced field: the catalog entry's value is
// taken (compared with the entry itself, not with what the file said),
// its source says so and the device's FromCatalog names the field for
// the prediction's caveat. Before, a left-out field read as 0 without a
// word (no launch cost, no floor, the full peak). A field that defaults
// to a left-out one (the per-kind floors and ramps to min_kernel_us) is
// taken with it where the file leaves it out too; a stated one is kept.
func TestHandWrittenBoxTakesCatalogFields(t *testing.T) {
	preset := writeBox(t, mustPreset(t, "h200-nvswitch"), "h200.json")
	g, err := LookupGPU("h200-sxm")
	if err != nil {
		t.Fatal(err)
	}
	cat := deviceJSON(t, &g.Device)
	check := func(t *testing.T, path string, took []string) *Device {
		t.Helper()
		tp, err := Load(path)
		if err != nil {
			t.Fatalf("without %v: %v", took, err)
		}
		d := &tp.Devices[0]
		if d.FromCatalog == nil || d.FromCatalog.GPU != "h200-sxm" || !slices.Equal(d.FromCatalog.Fields, took) {
			t.Errorf("without %v: from_catalog %+v, want h200-sxm %v", took, d.FromCatalog, took)
		}
		got := deviceJSON(t, d)
		for _, f := range took {
			if f == efficiencyDefault {
				continue
			}
			if !reflect.DeepEqual(got[f], cat[f]) {
				t.Errorf("without %s: %v, want the catalog's %v", f, got[f], cat[f])
			}
			if !strings.HasPrefix(d.Sources[f], "GPU catalog h200-sxm (not in the file)") {
				t.Errorf("without %s: source %q, want the catalog's cited", f, d.Sources[f])
			}
		}
		return d
	}
	for _, f := range pricedFieldNames {
		if f == "compute_capability" {
			continue // the check that the entry is this GPU: TestHandWrittenBoxMissingDeviceField
		}
		t.Run(f, func(t *testing.T) {
			check(t, topofiletest.WithoutDeviceField(t, preset, f), []string{f})
		})
	}
	t.Run("floors", func(t *testing.T) {
		path := topofiletest.EditDevice(t, preset, "floors.json", func(dev map[string]any) {
			delete(dev, "min_kernel_us")
			delete(dev, "ramp_us")
		})
		d := check(t, path, []string{"min_kernel_us", "ramp_us"})
		// The stated per-kind floors are the file's, not the catalog's.
		if !reflect.DeepEqual(deviceJSON(t, d)["min_kernel_us_by_kind"], cat["min_kernel_us_by_kind"]) {
			t.Errorf("stated min_kernel_us_by_kind changed: %v", d.MinKernelUsByKind)
		}
	})
	t.Run("efficiency.default", func(t *testing.T) {
		path := topofiletest.EditDevice(t, preset, "eff.json", func(dev map[string]any) {
			eff := dev["efficiency"].(map[string]any)
			delete(eff, "default")
			eff["gemm"] = 0.6
		})
		d := check(t, path, []string{efficiencyDefault})
		if d.Efficiency["default"] != g.Device.Efficiency["default"] || d.Efficiency["gemm"] != 0.6 {
			t.Errorf("efficiency %v: want the catalog's default %v and the file's gemm 0.6", d.Efficiency, g.Device.Efficiency["default"])
		}
	})
	// The box written out again states the fields and still says where
	// they came from.
	tp, err := Load(topofiletest.WithoutDeviceField(t, preset, "launch_eager_us"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := Load(writeBox(t, tp, "again.json"))
	if err != nil || again.Devices[0].FromCatalog == nil || !slices.Equal(again.Devices[0].FromCatalog.Fields, []string{"launch_eager_us"}) {
		t.Errorf("written out and read again: %v, from_catalog %+v", err, again.Devices[0].FromCatalog)
	}
}

// TestHandWrittenBoxMissingDeviceField: a hand-written file whose device
// the catalog does not know ("Acme X1"), or whose compute capability is
// not the catalog entry's it names, must state every priced field: one
// left out is refused in one line naming the file, the device, the field
// and what is wanted, before any work. The complete file loads.
func TestHandWrittenBoxMissingDeviceField(t *testing.T) {
	tp := mustPreset(t, "h200-nvswitch")
	tp.Devices[0].Name = "Acme X1"
	for i := range tp.GPUs {
		tp.GPUs[i].Device = "Acme X1"
	}
	acme := writeBox(t, tp, "acme.json")
	if _, err := Load(acme); err != nil {
		t.Fatalf("complete file: %v", err)
	}
	for _, f := range pricedFieldNames {
		path := topofiletest.WithoutDeviceField(t, acme, f)
		_, err := Load(path)
		want := path + `: devices[0] ("Acme X1"): field "` + f + `" missing: want `
		if err == nil || !strings.HasPrefix(err.Error(), want) || f != "compute_capability" && !strings.Contains(err.Error(), "no GPU of the catalog") || strings.Contains(err.Error(), "\n") {
			t.Errorf("without %s: error %v; want one line starting %q", f, err, want)
		}
	}
	eff := topofiletest.EditDevice(t, acme, "eff.json", func(dev map[string]any) { delete(dev["efficiency"].(map[string]any), "default") })
	if _, err := Load(eff); err == nil || !strings.Contains(err.Error(), `field "efficiency.default" missing`) {
		t.Errorf("efficiency without default: %v", err)
	}
	h200 := writeBox(t, mustPreset(t, "h200-nvswitch"), "h200.json")
	cc := topofiletest.EditDevice(t, h200, "cc.json", func(dev map[string]any) {
		dev["compute_capability"] = "8.0"
		delete(dev, "l2_bytes")
	})
	if _, err := Load(cc); err == nil || !strings.Contains(err.Error(), `field "l2_bytes" missing`) || !strings.Contains(err.Error(), `compute_capability "8.0" is not that of the catalog's h200-sxm`) {
		t.Errorf("H200 named, compute capability 8.0, l2_bytes left out: %v", err)
	}
	// No catalog entry stands in for the compute capability: it is the
	// check that the entry is this GPU.
	noCC := topofiletest.WithoutDeviceField(t, h200, "compute_capability")
	if _, err := Load(noCC); err == nil || !strings.HasPrefix(err.Error(), noCC+`: devices[0] ("NVIDIA H200"): field "compute_capability" missing: want MAJOR.MINOR`) {
		t.Errorf("H200 without compute_capability: %v", err)
	}
}

// TestDeviceExplicitZero: a 0 that is no figure is refused naming the
// field (sim had read mem_efficiency 0 as the full bandwidth and
// boost_clock_mhz 0 as peaks quoted at the sustained clock); a 0 that
// means something is taken as written (l2_bytes: unknown, as discovery
// writes it; a launch cost: free, a what-if).
func TestDeviceExplicitZero(t *testing.T) {
	h200 := writeBox(t, mustPreset(t, "h200-nvswitch"), "h200.json")
	for _, c := range []struct {
		field string
		set   func(dev map[string]any)
		want  string
	}{
		{"mem_efficiency", func(dev map[string]any) { dev["mem_efficiency"] = 0 }, "mem_efficiency must be in (0,1], got 0"},
		{"boost_clock_mhz", func(dev map[string]any) { dev["boost_clock_mhz"] = 0 }, "boost_clock_mhz must be > 0, got 0"},
		{"efficiency.gemm", func(dev map[string]any) { dev["efficiency"].(map[string]any)["gemm"] = 0 }, "efficiency.gemm must be in (0,1], got 0"},
		{"l2_bytes", func(dev map[string]any) { dev["l2_bytes"] = 0 }, ""},
		{"launch_eager_us", func(dev map[string]any) { dev["launch_eager_us"] = 0 }, ""},
	} {
		path := topofiletest.EditDevice(t, h200, c.field+".json", c.set)
		_, err := Load(path)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s 0: %v; want it taken as written", c.field, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s 0: %v; want %q", c.field, err, c.want)
		}
	}
}

// TestDeviceArchContradictsCC: a device whose arch names another family
// than its compute capability's is refused naming both: sim takes the
// NCCL limits from the arch and the kernels from the compute capability,
// so the box would be priced as two GPUs at once. The family that
// matches is taken as written.
func TestDeviceArchContradictsCC(t *testing.T) {
	h200 := writeBox(t, mustPreset(t, "h200-nvswitch"), "h200.json")
	for _, c := range []struct{ arch, want string }{
		{"blackwell", `arch "blackwell" contradicts compute_capability 9.0, a hopper GPU: want arch "hopper"`},
		{"hopper", ""},
	} {
		path := topofiletest.EditDevice(t, h200, c.arch+".json", func(dev map[string]any) { dev["arch"] = c.arch })
		_, err := Load(path)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("arch %s: %v; want it accepted", c.arch, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), c.want)):
			t.Errorf("arch %s: %v; want %q", c.arch, err, c.want)
		}
	}
}
