package main

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/topology"
)

// sglangDefaultFrac is SGLang's default mem_fraction_static as
// ServerArgs._handle_gpu_memory_settings computes it, written out here
// from its source and not from tpscope's engine profile: round((gpu_mem -
// reserved) / gpu_mem, 3), gpu_mem in MiB, reserved = 512 + max(chunk,
// 2048) x 1.5 + cuda_graph_max_bs x 2 + tp_size / 8 x 1024 (no DP
// attention, no draft; gpu_mem below 60 GiB: no 10 GiB floor).
func sglangDefaultFrac(gpuMiB, chunk, graphMaxBS, tp float64) float64 {
	reserved := 512 + math.Max(chunk, 2048)*1.5 + graphMaxBS*2 + tp/8*1024
	return math.RoundToEven((gpuMiB-reserved)/gpuMiB*1000) / 1000
}

// TestSGLangDefaultFractionBelowZero: on a 24 GiB L4, SGLang's default
// mem_fraction_static goes below zero when the reserve it holds for
// chunked_prefill_size 16384 (simulate --max-num-batched-tokens) or for a
// cuda_graph_max_bs of 16384 (--graph-sizes) passes the GPU's memory.
// SGLang takes the fraction as computed and its start-up stops ("Not
// enough memory. Please try to increase --mem-fraction-static"); simulate
// and predict had printed the fraction as a budget, "weights 0.0 GB +
// activations 0.0 GB exceed the usable -1.8 GB per GPU
// (mem_fraction_static -0.069 ...)". Each now refuses in one line that
// says why SGLang does not start, with the fraction and its reserve;
// advise, which prices a baseline that does not fit and warns, says the
// same in its warning in place of "short by 13.4 GB per GPU".
func TestSGLangDefaultFractionBelowZero(t *testing.T) {
	l4, err := topology.LookupGPU("l4")
	if err != nil {
		t.Fatal(err)
	}
	gpuMiB := float64(l4.Device.MemBytes >> 20)
	// cuda_graph_max_bs on a GPU of 20 to 35 GiB at tp_size >= 4: 80.
	cases := []struct {
		name string
		args []string
		frac float64
	}{
		{"simulate chunk 16K", []string{"simulate", "--engine", "sglang", "--topo", "pcie-1s:8xl4", "--model", "tiny-mla-moe", "--tp", "8",
			"--max-num-batched-tokens", "16K", "--concurrency", "4", "--requests", "20"}, sglangDefaultFrac(gpuMiB, 16384, 80, 8)},
		{"predict graphs to 16384", []string{"predict", "--engine", "sglang", "--topo", "pcie-1s:8xl4", "--model", "tiny-mla-moe", "--tp", "8",
			"--graph-sizes", "1,16384"}, sglangDefaultFrac(gpuMiB, 2048, 16384, 8)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !(tc.frac < 0) {
				t.Fatalf("SGLang's default fraction %v: the case does not reach below zero", tc.frac)
			}
			code, stdout, stderr := runCLI(t, tc.args...)
			frac := fmt.Sprintf("mem_fraction_static %.3g,", tc.frac)
			if code != exitFailed || stdout != "" || strings.Count(stderr, "\n") != 1 {
				t.Fatalf("exit %d, stdout %q, stderr %q: want exit 1 and one line", code, stdout, stderr)
			}
			for _, want := range []string{frac, "Not enough memory. Please try to increase --mem-fraction-static", "--gpu-mem-util"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q: want %q", stderr, want)
				}
			}
			if strings.Contains(stderr, "usable") || strings.Contains(stderr, "short by") {
				t.Errorf("stderr %q: prices a pool SGLang never allocates", stderr)
			}
		})
	}
	code, _, stderr := runCLI(t, "advise", "--engine", "sglang", "--topo", "pcie-1s:8xl4", "--model", "tiny-mla-moe", "--tp", "8",
		"--graph-sizes", "1,16384", "--no-sweep", "--transfer", "", "--compare-topos", "", "--entries", "fp8-kv")
	warn := "warning: the baseline does not fit in GPU memory: " + fmt.Sprintf("mem_fraction_static %.3g,", sglangDefaultFrac(gpuMiB, 2048, 16384, 8))
	if code != exitOK || !strings.Contains(stderr, warn) || !strings.Contains(stderr, "Not enough memory") || strings.Contains(stderr, "short by") {
		t.Errorf("advise: exit %d, stderr %q; want the warning %q saying SGLang does not start", code, stderr, warn)
	}
}
