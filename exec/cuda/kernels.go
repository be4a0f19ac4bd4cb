package cuda

import (
	_ "embed"
	"fmt"
	"sync"

	"github.com/tpscope/tpscope/exec/cuda/internal/nvrtc"
)

//go:embed kernels/kernels.cu
var kernelSource string

// KernelSource returns the embedded CUDA C source of the backend's kernels.
func KernelSource() string { return kernelSource }

var (
	cubinMu    sync.Mutex
	cubinCache = map[string][]byte{}
)

// compileKernels compiles the embedded kernels for sm_<major><minor> with
// NVRTC once per architecture and process.
func compileKernels(major, minor int) ([]byte, error) {
	arch := fmt.Sprintf("sm_%d%d", major, minor)
	cubinMu.Lock()
	defer cubinMu.Unlock()
	if c, ok := cubinCache[arch]; ok {
		return c, nil
	}
	c, _, err := nvrtc.Compile(kernelSource, "tpscope_kernels.cu", []string{
		"-arch=" + arch, "-std=c++17", "--use_fast_math",
	})
	if err != nil {
		return nil, fmt.Errorf("compile kernels for %s: %w", arch, err)
	}
	cubinCache[arch] = c
	return c, nil
}
