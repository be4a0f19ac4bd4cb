package cuda

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestKernelsEmulated compiles kernels.cu with a C++ compiler against
// testdata/emu/cuda_emu.h (CUDA's thread, warp and shared-memory model on
// the CPU, mma.sync/ldmatrix/cp.async from the PTX ISA's definitions) and
// runs testdata/emu/check.cpp: every kernel the backend launches for MLA
// decode (each tensor-core kernel with its splits merged in the kernel or
// by mla_combine, fp8 with a scale, MTP rows, several row groups), SiLU-and-
// mul, fused add + RMSNorm, the DCP merge and router top-k, each against a
// float64 reference on random inputs. Tolerances: bf16 outputs of bf16
// arithmetic, about 2e-3 from float64 (bf16 operands land between 1e-3
// and 1e-2), held to 1e-2; log-sum-exps in fp32, 1e-4; the e4m3 widening and the top-k picks
// exact. The GPU run of the same kernels is `cudacheck kernels`.
func TestKernelsEmulated(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles and runs the kernels on the CPU (about a minute)")
	}
	cxx, err := exec.LookPath("g++")
	if err != nil {
		t.Skip("no g++: the kernel emulation needs a C++20 compiler")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "check")
	cmd := exec.Command(cxx, "-std=c++20", "-O1", "-pthread", "-DTPSCOPE_EMU", "-I", "testdata/emu",
		"-include", "cuda_emu.h", "-x", "c++", "kernels/kernels.cu", "-x", "c++", "testdata/emu/check.cpp", "-o", bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("compile the kernels for the CPU: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	cases := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 || f[0] != "CASE" {
			continue
		}
		name := f[1]
		v, err := strconv.ParseFloat(f[2], 64)
		if err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		tol := 1e-2
		switch {
		case strings.HasSuffix(name, "/lse"):
			tol = 1e-4
		case strings.HasSuffix(name, "/sem-reset"), strings.HasPrefix(name, "e4m3"), strings.HasPrefix(name, "topk_router"):
			tol = 0
		}
		cases++
		t.Run(name, func(t *testing.T) {
			if !(v <= tol) {
				t.Errorf("relative error %g, want <= %g", v, tol)
			}
		})
	}
	// 22 MLA launches (55 checks: each output; the lse where the kernel
	// returns one (merged, or unsplit with lseOut); the in-kernel merge's
	// arrivals back at zero and its spare word untouched; the three
	// bulk-copy launches add 3 + 2 + 3, the four cluster-merge launches
	// 4 x 3), 3 SiLU widths, 3 norm widths
	// (output and residual), DCP, router, the two e4m3 widenings; the two
	// bench floor kernels' merge and arrivals (2 x 2).
	if cases != 72 {
		t.Fatalf("%d cases reported, want the 72 checks of check.cpp:\n%s", cases, out)
	}
}
