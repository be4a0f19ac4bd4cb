package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/internal/topofiletest"
)

// TestTopoCalibratedBoxMissingField: --topo with a calibrated box that
// lost a device field a step is priced with (here the H100 box calibrated
// on a trace of a run, without launch_eager_us) is refused in one line
// naming the flag, the file and the field, before any work; it had priced
// every launch at nothing beside the fitted floors. The box as calibrate
// wrote it runs.
func TestTopoCalibratedBoxMissingField(t *testing.T) {
	const src = "../../exec/cuda/testdata/h100/spec-1645-1207/h100-cal-b1.json"
	path := topofiletest.WithoutDeviceField(t, src, "launch_eager_us")
	args := []string{"predict", "--model", "tiny-mla-moe", "--tp", "8", "--topo"}
	code, stdout, stderr := runCLI(t, append(args, path)...)
	if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 ||
		!strings.Contains(stderr, "--topo "+path+": "+path+": devices[0]") || !strings.Contains(stderr, `field "launch_eager_us" missing`) {
		t.Errorf("exit %d, stdout %q, stderr %q: want exit 2 and one line naming --topo, %s and launch_eager_us", code, stdout, stderr, path)
	}
	if code, _, stderr := runCLI(t, append(args, src)...); code != exitOK {
		t.Errorf("--topo %s as calibrate wrote it: exit %d: %s", src, code, stderr)
	}
}

// TestTopoHandWrittenBoxMissingField: predict --topo with a hand-written
// box (the H200 preset as 'topo show -o' writes it) that leaves out
// launch_graph_us and min_kernel_us prints the preset's step and a caveat
// line naming the two fields and the catalog entry they were taken from;
// the same file with a device the catalog does not know is refused in one
// line naming the flag, the file, the device and the field, before any
// work. Before, both ran with the fields at 0: graph nodes and kernel
// floors free, a faster step than the box's, and no word of it.
func TestTopoHandWrittenBoxMissingField(t *testing.T) {
	full := filepath.Join(t.TempDir(), "h200.json")
	if code, _, stderr := runCLI(t, "topo", "show", "h200-nvswitch", "-o", full); code != exitOK {
		t.Fatalf("topo show -o: exit %d: %s", code, stderr)
	}
	cut := func(dev map[string]any) {
		delete(dev, "launch_graph_us")
		delete(dev, "min_kernel_us")
	}
	args := []string{"predict", "--model", "tiny-mla-moe", "--tp", "8", "--topo"}
	step := func(stdout string) string {
		for _, l := range strings.Split(stdout, "\n") {
			if strings.HasPrefix(l, "step ") {
				return l
			}
		}
		return ""
	}
	code, want, stderr := runCLI(t, append(args, full)...)
	if code != exitOK || step(want) == "" {
		t.Fatalf("--topo %s: exit %d: %s", full, code, stderr)
	}
	path := topofiletest.EditDevice(t, full, "cut.json", cut)
	code, got, stderr := runCLI(t, append(args, path)...)
	const caveat = `device "NVIDIA H200" does not state launch_graph_us, min_kernel_us; taken from the GPU catalog's h200-sxm`
	if code != exitOK || step(got) != step(want) || !strings.Contains(got, caveat) || strings.Contains(want, "taken from the GPU catalog") {
		t.Errorf("catalog GPU without launch_graph_us, min_kernel_us: exit %d (%s), %q (complete file: %q); want the complete file's step and a caveat %q", code, stderr, step(got), step(want), caveat)
	}

	data, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	acme := filepath.Join(t.TempDir(), "acme.json")
	if err := os.WriteFile(acme, []byte(strings.ReplaceAll(string(data), `"NVIDIA H200"`, `"Acme X1"`)), 0o644); err != nil {
		t.Fatal(err)
	}
	path = topofiletest.EditDevice(t, acme, "cut.json", cut)
	code, stdout, stderr := runCLI(t, append(args, path)...)
	if code != exitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 ||
		!strings.Contains(stderr, "--topo "+path+": "+path+`: devices[0] ("Acme X1"): field "launch_graph_us" missing (and "min_kernel_us"): want `) {
		t.Errorf("unknown GPU without launch_graph_us, min_kernel_us: exit %d, stdout %q, stderr %q: want exit 2 and one line naming --topo, the file, the device and the field", code, stdout, stderr)
	}
}
