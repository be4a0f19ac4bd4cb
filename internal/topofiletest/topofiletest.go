// Package topofiletest writes edited copies of a topology JSON file for
// tests: a device field left out or set, as a user editing the file by
// hand would. It reads the file as plain JSON and does not import
// topology, so topology's own (internal) tests can use it as well as the
// CLI's.
package topofiletest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Write writes box's JSON (a *topology.Topology, by its Marshal) to a file
// named name in the test's own temporary directory and returns its path:
// a box as a user holds it, to edit (EditDevice) or load.
func Write(t testing.TB, box interface{ Marshal() ([]byte, error) }, name string) string {
	t.Helper()
	b, err := box.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// EditDevice writes the topology JSON at src, its first device changed by
// edit (the device's JSON object), to a file named name in the test's own
// temporary directory and returns its path.
func EditDevice(t testing.TB, src, name string, edit func(dev map[string]any)) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]any
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	devs, ok := top["devices"].([]any)
	if !ok || len(devs) == 0 {
		t.Fatalf("%s: no devices", src)
	}
	dev, ok := devs[0].(map[string]any)
	if !ok {
		t.Fatalf("%s: devices[0] is not an object", src)
	}
	edit(dev)
	out, err := json.Marshal(top)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// WithoutDeviceField writes the topology JSON at src, field f of its
// first device deleted, and returns the copy's path; a device without f
// fails the test (the copy would test nothing).
func WithoutDeviceField(t testing.TB, src, f string) string {
	t.Helper()
	return EditDevice(t, src, "without-"+f+".json", func(dev map[string]any) {
		if _, ok := dev[f]; !ok {
			t.Fatalf("%s: devices[0] has no %s to delete", src, f)
		}
		delete(dev, f)
	})
}
