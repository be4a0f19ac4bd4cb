//go:build linux

package report

import (
	"fmt"
	"testing"

	"github.com/tpscope/tpscope/internal/fsizetest"
)

// TestReportWriteFileFailureKeepsOldFile: a report whose write fails
// part-way (the disk fills: here a file size limit of 64 KiB, in a child
// process, under a 1.4 MB report) leaves the report written earlier under
// that name as it was, and no other file. The page was written over the
// file it replaced, so a failure left it cut at the limit.
func TestReportWriteFileFailureKeepsOldFile(t *testing.T) {
	c := fsizetest.Case{Env: "TPSCOPE_TEST_FSIZE_WRITE", LimitBytes: 64 << 10, Write: func(path string) int {
		if err := WriteFile(path, bigStep(8, 61, 22)); err != nil {
			fmt.Println(err)
			return 1
		}
		return 0
	}}
	c.Child()
	c.KeepsOldFile(t, "r.html", []byte("<!DOCTYPE html><p>the earlier report</p>"))
}
