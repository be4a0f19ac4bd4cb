package cuda

import (
	"context"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/exec"
)

// On a machine without the NVIDIA libraries the backend reports the first
// missing one in a single line naming TPSCOPE_CUDA_LIBS.
func TestNewWithoutLibraries(t *testing.T) {
	_, err := New(exec.BackendConfig{})
	if err == nil {
		t.Skip("CUDA libraries present: nothing to check")
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.HasSuffix(msg, "not found; set TPSCOPE_CUDA_LIBS") {
		t.Fatalf("error %q: want one line ending in 'not found; set TPSCOPE_CUDA_LIBS'", msg)
	}
}

// TestGPUTiny runs tiny-mla-moe end to end on device 0, eager and graphs.
func TestGPUTiny(t *testing.T) {
	b, err := New(exec.BackendConfig{Seed: 1})
	if err != nil {
		t.Skipf("no CUDA: %v", err)
	}
	s := buildSched(t, "tiny-mla-moe", 1, 8, 512)
	for _, graphs := range []bool{false, true} {
		res, err := exec.Run(context.Background(), s, b, exec.WithSteps(3), exec.WithWarmup(1), exec.WithGraphs(graphs))
		if err != nil {
			t.Fatalf("graphs=%v: %v", graphs, err)
		}
		if res.Graphs != graphs || res.Steps != 3 || !(res.Summary.StepMedianUs > 0) {
			t.Fatalf("graphs=%v: result %+v", graphs, res.Summary)
		}
	}
}
