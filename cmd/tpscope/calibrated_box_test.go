package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTopoCalibratedBoxMissingField: --topo with a calibrated box that
// lost a device field a step is priced with (here the H100 box calibrated
// on a trace of a run, without launch_eager_us) is refused in one line
// naming the flag, the file and the field, before any work; it had priced
// every launch at nothing beside the fitted floors. The box as calibrate
// wrote it runs.
func TestTopoCalibratedBoxMissingField(t *testing.T) {
	const src = "../../exec/cuda/testdata/h100/spec-1645-1207/h100-cal-b1.json"
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	delete(top["devices"].([]any)[0].(map[string]any), "launch_eager_us")
	out, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cal.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
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
