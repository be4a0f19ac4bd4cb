//go:build linux

package report

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReportWriteFileFailureKeepsOldFile: a report whose write fails
// part-way (the disk fills: here a file size limit of 64 KiB, in a child
// process, under a 1.4 MB report) leaves the report written earlier under
// that name as it was, and no other file. The page was written over the
// file it replaced, so a failure left it cut at the limit.
func TestReportWriteFileFailureKeepsOldFile(t *testing.T) {
	if path := os.Getenv("TPSCOPE_TEST_FSIZE_WRITE"); path != "" {
		// The child: writes past its file size limit fail with EFBIG
		// instead of killing it.
		signal.Ignore(syscall.SIGXFSZ)
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 64 << 10, Max: 64 << 10}); err != nil {
			fmt.Println("setrlimit:", err)
			os.Exit(3)
		}
		if err := WriteFile(path, bigStep(8, 61, 22)); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "r.html")
	old := []byte("<!DOCTYPE html><p>the earlier report</p>")
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReportWriteFileFailureKeepsOldFile$")
	cmd.Env = append(os.Environ(), "TPSCOPE_TEST_FSIZE_WRITE="+path)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("child: %v, output %q; want exit 1 with the write's error", err, out)
	}
	if !strings.Contains(string(out), path) || !strings.Contains(string(out), "file too large") {
		t.Errorf("error %q: want it to name %s and the failure", out, path)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, old) {
		t.Errorf("after a failed write %s holds %d bytes, want the earlier report's %d", path, len(now), len(old))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files in the directory after a failed write, want the earlier report alone", len(ents))
	}
}
