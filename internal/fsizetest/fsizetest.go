//go:build linux

// Package fsizetest checks that a write which fails part-way (the disk
// fills) leaves the file written earlier under its name as it was, and
// no other file. The failure is real: the write runs in a child process
// of the test binary under a file size limit (RLIMIT_FSIZE), where a write
// past the limit fails with EFBIG ("file too large").
package fsizetest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// Case is one write under a file size limit.
type Case struct {
	// Env carries the path from the test to its child; each test its own.
	Env string
	// LimitBytes is the child's file size limit: under what Write writes.
	LimitBytes uint64
	// Write writes path in the child, prints its error on stdout or
	// stderr and returns the exit code (1 for a failed write).
	Write func(path string) int
}

// Child makes this process the child where it was started as one (Env
// set): it runs Write under the limit and exits with its code. A test
// calls it first, before any subtest.
func (c Case) Child() {
	path := os.Getenv(c.Env)
	if path == "" {
		return
	}
	signal.Ignore(syscall.SIGXFSZ) // EFBIG instead of a kill
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: c.LimitBytes, Max: c.LimitBytes}); err != nil {
		fmt.Println("setrlimit:", err)
		os.Exit(3)
	}
	os.Exit(c.Write(path))
}

// KeepsOldFile writes old at dir/name, runs the calling top-level test
// again as the child writing that path, and checks that the child exits
// 1 with an error naming the path and the failure, and that the file still
// holds old, alone in dir.
func (c Case) KeepsOldFile(t *testing.T, name string, old []byte) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	test, _, _ := strings.Cut(t.Name(), "/")
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(test)+"$")
	cmd.Env = append(os.Environ(), c.Env+"="+path)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("child: %v, output %q; want exit 1 with the write's error", err, out)
	}
	if !strings.Contains(string(out), path) || !strings.Contains(string(out), "file too large") {
		t.Errorf("error %q: want it to name %s and the failure", out, path)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, old) {
		t.Errorf("after a failed write %s holds %d bytes, want the earlier file's %d", path, len(now), len(old))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("%d files in the directory after a failed write, want the earlier file alone", len(ents))
	}
}
