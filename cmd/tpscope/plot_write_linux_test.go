//go:build linux

package main

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

// TestPlotWriteFailureKeepsOldFile: a chart whose write fails part-way
// (the disk fills: here a file size limit of 4 KiB, in a child process,
// under predict's 54 KB PNG and 10 KB SVG) fails the verb naming the file, and leaves the
// chart written earlier under that name as it was and no other file. The
// PNG was written over the file it replaced, so a failure left it cut.
func TestPlotWriteFailureKeepsOldFile(t *testing.T) {
	if path := os.Getenv("TPSCOPE_TEST_FSIZE_PLOT"); path != "" {
		signal.Ignore(syscall.SIGXFSZ) // EFBIG instead of a kill
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 4 << 10, Max: 4 << 10}); err != nil {
			fmt.Println("setrlimit:", err)
			os.Exit(3)
		}
		var out, errb bytes.Buffer
		code := dispatch([]string{"predict", "--plot", path}, &out, &errb)
		fmt.Print(errb.String())
		os.Exit(code)
	}
	for _, name := range []string{"breakdown.png", "breakdown.svg"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, name)
			old := []byte("the chart drawn earlier")
			if err := os.WriteFile(path, old, 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestPlotWriteFailureKeepsOldFile$")
			cmd.Env = append(os.Environ(), "TPSCOPE_TEST_FSIZE_PLOT="+path)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("child: %v, output %q; want exit 1", err, out)
			}
			if !strings.Contains(string(out), path) || !strings.Contains(string(out), "file too large") {
				t.Errorf("error %q: want it to name %s and the failure", out, path)
			}
			if now, _ := os.ReadFile(path); !bytes.Equal(now, old) {
				t.Errorf("after a failed write %s holds %d bytes, want the earlier chart's %d", path, len(now), len(old))
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("%d files in the directory after a failed write, want the earlier chart alone", len(ents))
			}
		})
	}
}
