//go:build linux

package main

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/tpscope/tpscope/internal/fsizetest"
)

// TestPlotWriteFailureKeepsOldFile: a chart whose write fails part-way
// (the disk fills: here a file size limit of 4 KiB, in a child process,
// under predict's 54 KB PNG and 10 KB SVG) fails the verb naming the file, and leaves the
// chart written earlier under that name as it was and no other file. The
// PNG was written over the file it replaced, so a failure left it cut.
func TestPlotWriteFailureKeepsOldFile(t *testing.T) {
	c := fsizetest.Case{Env: "TPSCOPE_TEST_FSIZE_PLOT", LimitBytes: 4 << 10, Write: func(path string) int {
		var out, errb bytes.Buffer
		code := dispatch([]string{"predict", "--plot", path}, &out, &errb)
		fmt.Print(errb.String())
		return code
	}}
	c.Child()
	for _, name := range []string{"breakdown.png", "breakdown.svg"} {
		t.Run(name, func(t *testing.T) {
			c.KeepsOldFile(t, name, []byte("the chart drawn earlier"))
		})
	}
}
