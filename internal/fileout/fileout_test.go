package fileout

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteFailureLeavesOldFile: a write that fails part-way leaves the
// file that was there as it was and no other file in its directory; one
// that succeeds replaces it whole and keeps its permissions.
func TestWriteFailureLeavesOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.html")
	if err := os.WriteFile(path, []byte("the earlier report"), 0o640); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	err := Write(path, func(w io.Writer) error {
		io.WriteString(w, "<!DOCTYPE html> half of it")
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want the write's error", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "the earlier report" {
		t.Errorf("after a failed write the file holds %q, want the earlier report", b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %q after a failed write, want only r.html", names)
	}
	if err := Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "the new report"); return err }); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if b, _ := os.ReadFile(path); string(b) != "the new report" || st.Mode().Perm() != 0o640 {
		t.Errorf("after a write the file holds %q with mode %v, want the new report with 0640", b, st.Mode().Perm())
	}
	// A new file: none left when its write fails.
	fresh := filepath.Join(dir, "new.png")
	if err := Write(fresh, func(w io.Writer) error { return boom }); err == nil {
		t.Fatal("a failed write of a new file succeeded")
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("a failed write left %s (stat: %v)", fresh, err)
	}
}
