package cuda

import (
	"errors"
	"testing"

	"github.com/tpscope/tpscope/exec/cuda/internal/dl"
	"github.com/tpscope/tpscope/exec/cuda/internal/nccl"
)

// Each library, when absent, is named in the one-line message the issue
// asks for (e.g. "libnccl.so.2 not found; set TPSCOPE_CUDA_LIBS").
func TestMissingLibraryMessages(t *testing.T) {
	if err := LoadLibraries(true); err == nil {
		t.Skip("CUDA libraries present: nothing to check")
	}
	err := nccl.Load()
	if err == nil {
		t.Skip("NCCL present")
	}
	var nf *dl.NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("nccl.Load error %v: want a *dl.NotFoundError", err)
	}
	if want := "libnccl.so.2 not found; set TPSCOPE_CUDA_LIBS"; err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
}
