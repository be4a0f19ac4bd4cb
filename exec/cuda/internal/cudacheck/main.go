// Command cudacheck validates tpscope's CUDA backend on a GPU machine:
//
//	cudacheck info                       driver, CUDA, cuBLAS, NCCL, NVRTC versions and the device
//	cudacheck kernels                    kernel arithmetic against float64 references on random inputs
//	cudacheck gemm [-json F] SHAPE...    cuBLAS/cuBLASLt GEMM device times (median of events per call)
//	cudacheck bench [-json F]            copy bandwidth, launch floor, and every kernel's time and achieved bandwidth
//	cudacheck run -model M -tp N ...     a scenario's schedule run through the pipeline (as tpscope run) with spans to a file
//
// SHAPE is MxNxK[xBATCH]:DTYPE with DTYPE bf16 or fp8, the nn.Linear
// convention Y[M,N] = X[M,K]·W[N,K]^T. GEMM timing: weights rotate through
// copies totalling at least 4x the L2 size so every call streams from
// device memory; a spin kernel keeps the GPU busy while the host enqueues
// all timed calls, so the events bracket device time only.
// scripts/gpu-gemm-torch.py times the same shapes the same way in PyTorch.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/tpscope/tpscope/exec/cuda"
	"github.com/tpscope/tpscope/exec/cuda/internal/cu"
	"github.com/tpscope/tpscope/exec/cuda/internal/cublas"
	"github.com/tpscope/tpscope/exec/cuda/internal/nccl"
	"github.com/tpscope/tpscope/exec/cuda/internal/nvrtc"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/pipeline"
	"github.com/tpscope/tpscope/sim"
)

func main() {
	runtime.LockOSThread()
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: cudacheck info|kernels|gemm|bench|timeline|run ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "info":
		err = info()
	case "kernels":
		err = kernels()
	case "gemm":
		err = gemm(os.Args[2:])
	case "bench":
		err = bench(os.Args[2:])
	case "timeline":
		err = timeline(os.Args[2:])
	case "run":
		err = runModel(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cudacheck:", err)
		os.Exit(1)
	}
}

type env struct {
	info   cu.DeviceInfo
	stream cu.Stream
	mod    cu.Module
	blas   *cublas.Handle
}

func setup() (*env, error) {
	if err := cuda.LoadLibraries(false); err != nil {
		return nil, err
	}
	e := &env{}
	var err error
	if e.info, err = cu.Info(0); err != nil {
		return nil, err
	}
	c, err := cu.PrimaryContext(0)
	if err != nil {
		return nil, err
	}
	if err := cu.SetCurrent(c); err != nil {
		return nil, err
	}
	if e.stream, err = cu.NewStream(); err != nil {
		return nil, err
	}
	arch := fmt.Sprintf("-arch=sm_%d%d", e.info.CCMajor, e.info.CCMinor)
	t0 := time.Now()
	cubin, log, err := nvrtc.Compile(cuda.KernelSource(), "kernels.cu", []string{arch, "-std=c++17", "--use_fast_math"})
	if err != nil {
		return nil, err
	}
	fmt.Printf("nvrtc %s compiled kernels for %s in %v (%d B cubin)%s\n", nvrtc.Version(), arch[6:], time.Since(t0).Round(time.Millisecond), len(cubin), strings.TrimSpace("\n"+log))
	if e.mod, err = cu.LoadModule(cubin); err != nil {
		return nil, err
	}
	if e.blas, err = cublas.New(e.stream); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *env) fn(name string) cu.Function {
	f, err := cu.GetFunction(e.mod, name)
	if err != nil {
		panic(err)
	}
	return f
}

// launch launches a kernel with arguments given as uint64 slots (ints and
// floats in the low bytes, little-endian).
func (e *env) launch(name string, grid, block [3]uint32, smem uint32, vals ...uint64) error {
	return e.launchCluster(name, grid, block, smem, 1, vals...)
}

// launchCluster is launch with the grid cut into thread-block clusters of
// cluster x 1 x 1 blocks (cluster > 1).
func (e *env) launchCluster(name string, grid, block [3]uint32, smem, cluster uint32, vals ...uint64) error {
	ptrs := make([]unsafe.Pointer, len(vals)+1) // one spare: a kernel without arguments still gets an array
	for i := range vals {
		ptrs[i] = unsafe.Pointer(&vals[i])
	}
	var err error
	if cluster > 1 {
		err = cu.LaunchCluster(e.fn(name), grid, block, smem, e.stream, unsafe.Pointer(&ptrs[0]), cluster)
	} else {
		err = cu.Launch(e.fn(name), grid, block, smem, e.stream, unsafe.Pointer(&ptrs[0]))
	}
	runtime.KeepAlive(vals)
	return err
}

// clustered is g with its splits merged through their cluster's shared
// memory where the device runs all of the launch's clusters at once (the
// planner's rule, MLAGeometry.Clustered); g unchanged before sm_90.
func (e *env) clustered(k string, g cuda.MLAGeometry, s cuda.MLAShape) (cuda.MLAGeometry, error) {
	if e.info.CCMajor < 9 || g.Splits < 2 || g.Splits > 16 {
		return g, nil
	}
	n, err := cu.MaxActiveClusters(e.fn(k), g.Threads, g.SmemBytes, g.Splits)
	if err != nil {
		return g, err
	}
	return g.Clustered(s, n), nil
}

func i32(v int) uint64     { return uint64(uint32(int32(v))) }
func f32(v float32) uint64 { return uint64(math.Float32bits(v)) }

func info() error {
	e, err := setup()
	if err != nil {
		return err
	}
	v, _ := cu.DriverVersion()
	fmt.Printf("device 0: %s sm_%d%d, %d SMs, L2 %d B, %d B memory, %d B smem/block opt-in\n",
		e.info.Name, e.info.CCMajor, e.info.CCMinor, e.info.SMs, e.info.L2Bytes, e.info.TotalBytes, e.info.SmemOptinB)
	fmt.Printf("CUDA driver API %d.%d, cuBLAS %d, cuBLASLt %d, NVRTC %s\n", v/1000, v%1000/10, e.blas.Version(), cublas.LtVersion(), nvrtc.Version())
	if err := nccl.Load(); err != nil {
		fmt.Println("NCCL:", err)
	} else {
		nv, _ := nccl.Version()
		fmt.Println("NCCL", nv)
	}
	n, _ := cu.DeviceCount()
	fmt.Println("devices:", n)
	return nil
}

// ---- host-side bf16/e4m3 helpers and references ----

func bf(u uint16) float64 { return float64(math.Float32frombits(uint32(u) << 16)) }
func e4m3(b byte) float64 {
	s, ex, m := b>>7, (b>>3)&15, b&7
	var v float64
	if ex == 0 {
		v = float64(m) / 8 * math.Pow(2, -6)
	} else {
		v = (1 + float64(m)/8) * math.Pow(2, float64(ex)-7)
	}
	if s == 1 {
		v = -v
	}
	return v
}
func tobf(f float64) uint16 {
	u := math.Float32bits(float32(f))
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

func randBF(r *rand.Rand, n int) []uint16 {
	x := make([]uint16, n)
	for i := range x {
		x[i] = tobf(r.Float64()*2 - 1)
	}
	return x
}

func upload(p []uint16) (cu.DevPtr, error) {
	d, err := cu.Alloc(uint64(len(p) * 2))
	if err != nil {
		return 0, err
	}
	return d, cu.HtoD(d, unsafe.Slice((*byte)(unsafe.Pointer(&p[0])), len(p)*2))
}

func downloadBF(d cu.DevPtr, n int) ([]uint16, error) {
	b := make([]uint16, n)
	err := cu.DtoH(unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), n*2), d)
	return b, err
}

func relErr(got, want []float64) float64 {
	var num, den float64
	for i := range got {
		if math.IsNaN(got[i]) {
			return math.Inf(1)
		}
		num += (got[i] - want[i]) * (got[i] - want[i])
		den += want[i] * want[i]
	}
	return math.Sqrt(num / den)
}

func kernels() error {
	e, err := setup()
	if err != nil {
		return err
	}
	fails := 0
	report := func(name string, re, tol float64) {
		st := "PASS"
		if !(re <= tol) {
			st = "FAIL"
			fails++
		}
		fmt.Printf("%-44s rel err %.2e (tol %.0e) %s\n", name, re, tol, st)
	}
	r := rand.New(rand.NewPCG(1, 2))
	// MLA decode: the CUDA-core kernels (several head groups, partial
	// groups, splits) and every tensor-core variant (splits merged in the
	// kernel through L2 (merge 1) or their cluster's shared memory (2), or
	// by mla_combine (0); MTP rows, two row groups, fp8 with a scale).
	for _, c := range []struct {
		kernel                string
		T, H, tps, ctx, chunk int
		fp8                   bool
		merge                 int
	}{
		{"core", 4, 8, 2, 1000, 352, false, 0},
		{"core", 4, 8, 2, 1000, 352, true, 0},
		{"core", 3, 20, 1, 777, 256, false, 0},
		{"core", 2, 3, 1, 50, 64, false, 0},
		{"core", 32, 16, 1, 300, 320, true, 0},
		{"mla_tc_bf16_r8_t64_s2", 4, 8, 1, 1000, 352, false, 1},
		{"mla_tc_bf16_r8_t64_s2", 4, 8, 1, 1000, 352, false, 0},
		{"mla_tc_bf16_r8_t64_s2", 3, 20, 1, 777, 256, false, 1},
		{"mla_tc_bf16_r8_t64_s2", 2, 8, 1, 777, 800, false, 0},
		{"mla_tc_bf16_r16_t64_s2", 4, 8, 2, 1000, 128, false, 1},
		{"mla_tc_bf16_r16_t64_s2", 4, 64, 1, 513, 96, false, 1},
		{"mla_ds_fp8c_r8_t64_s4_w16", 4, 8, 1, 1000, 352, true, 1},
		{"mla_ds_fp8c_r8_t64_s4_w16", 3, 20, 1, 777, 256, true, 1},
		{"mla_ds_fp8c_r8_t64_s4_w16", 4, 8, 1, 1000, 64, true, 0},
		{"mla_ds_fp8c_r8_t64_s4_w16", 4, 8, 2, 1000, 160, true, 0},
		{"mla_ds_fp8c_r16_t64_s4", 4, 8, 2, 1000, 160, true, 1},
		{"mla_ds_fp8c_r16_t64_s4", 2, 16, 1, 777, 800, true, 0},
		{"mla_ds_fp8_r8_t64_s4", 4, 8, 1, 1000, 352, true, 1},
		{"mla_ds_fp8_r16_t64_s4", 4, 8, 2, 1000, 160, true, 0},
		{"mla_tc_bf16_r8_t64_s2", 1, 8, 1, 1000, 64, false, 1},
		{"mla_ds_fp8c_r8_t64_s4_w16", 1, 8, 1, 1000, 64, true, 1},
		// Tiles by bulk copies: partial last tiles, stages reused, one-tile
		// splits, MTP rows, a partial row group.
		{"mla_ds_fp8c_r8_t64_s4_w16_b", 4, 8, 1, 1000, 352, true, 1},
		{"mla_ds_fp8c_r8_t64_s4_w16_b", 3, 20, 1, 777, 256, true, 0},
		{"mla_ds_fp8c_r8_t64_s4_w16_b", 1, 8, 1, 1000, 64, true, 1},
		{"mla_ds_fp8c_r16_t64_s4_b", 4, 8, 2, 1000, 160, true, 1},
		// Splits merged through the cluster's shared memory (sm_90): 16
		// splits (clusters of 16 blocks), a partial row group in 4, MTP rows
		// in 8, 7 (a cluster size that is no power of two).
		{"mla_tc_bf16_r8_t64_s2", 4, 8, 1, 1000, 64, false, 2},
		{"mla_ds_fp8c_r8_t64_s4_w16_b", 4, 8, 1, 1000, 64, true, 2},
		{"mla_ds_fp8c_r8_t64_s4_w16_b", 3, 20, 1, 777, 256, true, 2},
		{"mla_tc_bf16_r16_t64_s2", 4, 8, 2, 1000, 128, false, 2},
		{"mla_ds_fp8c_r16_t64_s4_b", 4, 8, 2, 1000, 160, true, 2},
	} {
		if c.merge == 2 && e.info.CCMajor < 9 {
			continue // no clusters before sm_90
		}
		re, what, err := checkMLA(e, r, c.kernel, c.T, c.H, c.tps, c.ctx, c.chunk, c.fp8, c.merge)
		if err != nil {
			return err
		}
		report(fmt.Sprintf("mla T=%d H=%d tps=%d ctx=%d %s", c.T, c.H, c.tps, c.ctx, what), re, 1e-2)
	}
	// RMSNorm.
	{
		rows, cols := 3, 7168
		x, w := randBF(r, rows*cols), randBF(r, cols)
		dx, _ := upload(x)
		dw, _ := upload(w)
		dy, _ := cu.Alloc(uint64(rows * cols * 2))
		cu.Memset8(dy, 0xff, uint64(rows*cols*2))
		if err := e.launch("rmsnorm", [3]uint32{uint32(rows), 1, 1}, [3]uint32{256, 1, 1}, 0, uint64(dx), uint64(0), uint64(dw), uint64(dy), i32(cols), f32(1e-6)); err != nil {
			return err
		}
		cu.StreamSync(e.stream)
		y, _ := downloadBF(dy, rows*cols)
		var got, want []float64
		for i := 0; i < rows; i++ {
			var ss float64
			for c := 0; c < cols; c++ {
				ss += bf(x[i*cols+c]) * bf(x[i*cols+c])
			}
			inv := 1 / math.Sqrt(ss/float64(cols)+1e-6)
			for c := 0; c < cols; c++ {
				want = append(want, bf(x[i*cols+c])*inv*bf(w[c]))
				got = append(got, bf(y[i*cols+c]))
			}
		}
		report("rmsnorm 3x7168", relErr(got, want), 1e-2)
	}
	// Router top-k: compare the selected scores (ties make ids ambiguous).
	{
		T, E, k := 5, 384, 8
		x := randBF(r, T*E)
		dx, _ := upload(x)
		aux, _ := cu.Alloc(uint64(T * k * 8))
		if err := e.launch("topk_router", [3]uint32{uint32((T*32 + 255) / 256), 1, 1}, [3]uint32{256, 1, 1}, 0, uint64(dx), i32(T), i32(E), i32(k), uint64(aux), uint64(aux)+uint64(T*k*4)); err != nil {
			return err
		}
		cu.StreamSync(e.stream)
		buf := make([]byte, T*k*8)
		cu.DtoH(buf, aux)
		var got, want []float64
		bad := 0
		for t := 0; t < T; t++ {
			row := make([]float64, E)
			for i := range row {
				row[i] = bf(x[t*E+i])
			}
			sort.Sort(sort.Reverse(sort.Float64Slice(row)))
			for j := 0; j < k; j++ {
				id := int(int32(uint32(buf[(t*k+j)*4]) | uint32(buf[(t*k+j)*4+1])<<8 | uint32(buf[(t*k+j)*4+2])<<16 | uint32(buf[(t*k+j)*4+3])<<24))
				if id < 0 || id >= E || bf(x[t*E+id]) != row[j] {
					bad++
				}
				w := math.Float32frombits(uint32(buf[T*k*4+(t*k+j)*4]) | uint32(buf[T*k*4+(t*k+j)*4+1])<<8 | uint32(buf[T*k*4+(t*k+j)*4+2])<<16 | uint32(buf[T*k*4+(t*k+j)*4+3])<<24)
				got = append(got, float64(w))
				want = append(want, row[j])
			}
		}
		re := relErr(got, want)
		if bad > 0 {
			re = math.Inf(1)
		}
		report(fmt.Sprintf("topk_router T=%d E=%d k=%d (%d bad ids)", T, E, k, bad), re, 1e-6)
	}
	// SiLU-and-mul, rows of 2d values (vector and scalar widths).
	for _, d := range []int{2304, 256, 100} {
		rows := 7
		x := randBF(r, rows*2*d)
		dx, _ := upload(x)
		dy, _ := cu.Alloc(uint64(rows * d * 2))
		cu.Memset8(dy, 0xff, uint64(rows*d*2))
		if err := e.launch("silu_mul", [3]uint32{3, 1, 1}, [3]uint32{256, 1, 1}, 0, uint64(dx), uint64(dy), i32(rows), i32(d)); err != nil {
			return err
		}
		cu.StreamSync(e.stream)
		y, _ := downloadBF(dy, rows*d)
		var got, want []float64
		for i := 0; i < rows; i++ {
			for c := 0; c < d; c++ {
				a, u := bf(x[i*2*d+c]), bf(x[i*2*d+d+c])
				want = append(want, a/(1+math.Exp(-a))*u)
				got = append(got, bf(y[i*d+c]))
			}
		}
		report(fmt.Sprintf("silu_mul rows=%d d=%d", rows, d), relErr(got, want), 1e-2)
		cu.Free(dx)
		cu.Free(dy)
	}
	// Fused residual add + RMSNorm: the output and the updated residual.
	{
		rows, cols := 5, 7168
		x, res, w := randBF(r, rows*cols), randBF(r, rows*cols), randBF(r, cols)
		dx, _ := upload(x)
		dr, _ := upload(res)
		dw, _ := upload(w)
		dy, _ := cu.Alloc(uint64(rows * cols * 2))
		cu.Memset8(dy, 0xff, uint64(rows*cols*2))
		if err := e.launch("rmsnorm", [3]uint32{uint32(rows), 1, 1}, [3]uint32{256, 1, 1}, 0, uint64(dx), uint64(dr), uint64(dw), uint64(dy), i32(cols), f32(1e-6)); err != nil {
			return err
		}
		cu.StreamSync(e.stream)
		y, _ := downloadBF(dy, rows*cols)
		r2, _ := downloadBF(dr, rows*cols)
		var got, want, rgot, rwant []float64
		for i := 0; i < rows; i++ {
			var ss float64
			s := make([]float64, cols)
			for c := range s {
				s[c] = bf(x[i*cols+c]) + bf(res[i*cols+c])
				ss += s[c] * s[c]
			}
			inv := 1 / math.Sqrt(ss/float64(cols)+1e-6)
			for c := range s {
				want = append(want, s[c]*inv*bf(w[c]))
				got = append(got, bf(y[i*cols+c]))
				rwant = append(rwant, s[c])
				rgot = append(rgot, bf(r2[i*cols+c]))
			}
		}
		report("rmsnorm fused add 5x7168 (output)", relErr(got, want), 1e-2)
		report("rmsnorm fused add 5x7168 (residual)", relErr(rgot, rwant), 1e-2)
		for _, p := range []cu.DevPtr{dx, dr, dw, dy} {
			cu.Free(p)
		}
	}
	// Decode context parallelism's merge: rows scaled by exp(lse - LSE).
	{
		rows, k, dv := 9, 4, 512
		o := randBF(r, rows*dv)
		all := make([]float32, k*rows)
		for i := range all {
			all[i] = float32(r.Float64()*6 - 3)
		}
		own := make([]float32, rows)
		copy(own, all[2*rows:3*rows]) // this rank is rank 2
		do, _ := upload(o)
		dl, _ := cu.Alloc(uint64(4 * rows))
		da, _ := cu.Alloc(uint64(4 * k * rows))
		cu.HtoD(dl, f32Bytes(own))
		cu.HtoD(da, f32Bytes(all))
		if err := e.launch("mla_dcp_correct", [3]uint32{uint32((rows + 3) / 4), 1, 1}, [3]uint32{256, 1, 1}, 0, uint64(do), uint64(dl), uint64(da), i32(rows), i32(k), i32(dv)); err != nil {
			return err
		}
		cu.StreamSync(e.stream)
		y, _ := downloadBF(do, rows*dv)
		var got, want []float64
		for i := 0; i < rows; i++ {
			var sum float64
			for j := 0; j < k; j++ {
				sum += math.Exp(float64(all[j*rows+i]))
			}
			f := math.Exp(float64(own[i])) / sum
			for c := 0; c < dv; c++ {
				want = append(want, bf(o[i*dv+c])*f)
				got = append(got, bf(y[i*dv+c]))
			}
		}
		report("mla_dcp_correct rows=9 k=4", relErr(got, want), 1e-2)
		for _, p := range []cu.DevPtr{do, dl, da} {
			cu.Free(p)
		}
	}
	// BF16 and FP8 GEMMs against float64.
	for _, c := range []struct {
		m, n, k, batch int
		fp8            bool
	}{{7, 96, 160, 1, false}, {5, 64, 128, 3, false}, {16, 96, 160, 1, true}, {3, 48, 64, 2, true}} {
		re, err := checkGEMM(e, r, c.m, c.n, c.k, c.batch, c.fp8)
		if err != nil {
			return err
		}
		report(fmt.Sprintf("gemm M=%d N=%d K=%d batch=%d fp8=%v", c.m, c.n, c.k, c.batch, c.fp8), re, 1e-2)
	}
	if fails > 0 {
		return fmt.Errorf("%d kernel checks failed", fails)
	}
	fmt.Println("all kernel checks passed")
	return nil
}

func checkGEMM(e *env, r *rand.Rand, m, n, k, batch int, fp8 bool) (float64, error) {
	var x, w []float64
	var dx, dw cu.DevPtr
	var err error
	if fp8 {
		xb, wb := make([]byte, batch*m*k), make([]byte, batch*n*k)
		for i := range xb {
			xb[i] = byte(r.IntN(256)) & 0xBF
			x = append(x, e4m3(xb[i]))
		}
		for i := range wb {
			wb[i] = byte(r.IntN(256)) & 0xBF
			w = append(w, e4m3(wb[i]))
		}
		dx, _ = cu.Alloc(uint64(len(xb)))
		dw, _ = cu.Alloc(uint64(len(wb)))
		cu.HtoD(dx, xb)
		cu.HtoD(dw, wb)
	} else {
		xs, ws := randBF(r, batch*m*k), randBF(r, batch*n*k)
		for _, v := range xs {
			x = append(x, bf(v))
		}
		for _, v := range ws {
			w = append(w, bf(v))
		}
		dx, _ = upload(xs)
		dw, _ = upload(ws)
	}
	dy, _ := cu.Alloc(uint64(batch * m * n * 2))
	cu.Memset8(dy, 0xff, uint64(batch*m*n*2))
	if fp8 {
		var plan *cublas.FP8Plan
		if plan, err = e.blas.PrepareFP8(m, n, k, batch); err == nil {
			err = e.blas.GemmFP8(plan, dx, dw, dy)
		}
	} else {
		err = e.blas.GemmBF16(m, n, k, batch, dx, dw, dy, int64(m*k), int64(n*k), int64(m*n))
	}
	if err != nil {
		return 0, err
	}
	if err := cu.StreamSync(e.stream); err != nil {
		return 0, err
	}
	y, _ := downloadBF(dy, batch*m*n)
	var got, want []float64
	for b := 0; b < batch; b++ {
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var s float64
				for kk := 0; kk < k; kk++ {
					s += x[b*m*k+i*k+kk] * w[b*n*k+j*k+kk]
				}
				want = append(want, s)
				got = append(got, bf(y[b*m*n+i*n+j]))
			}
		}
	}
	for _, p := range []cu.DevPtr{dx, dw, dy} {
		cu.Free(p)
	}
	return relErr(got, want), nil
}

func f32Bytes(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

// checkMLA runs MLA decode with chunk cached tokens per split against a
// float64 reference: kernel "core" is the CUDA-core kernel of the backend's
// head group for H followed by mla_combine; otherwise a tensor-core variant
// (mla_tc_*, mla_ds_*) merging the splits itself (merge 1: through L2; 2:
// through its clusters' shared memory) or through mla_combine (0). The
// fp8 cache carries a per-tensor scale of 0.37. It returns the relative
// error and a description of what ran.
func checkMLA(e *env, r *rand.Rand, kernel string, T, H, tps, ctx, chunk int, fp8 bool, merge int) (float64, string, error) {
	B := T / tps
	q := randBF(r, T*H*576)
	kvN := B * ctx * 576
	kvF := make([]float64, kvN)
	kscale := 1.0
	if fp8 && kernel != "core" {
		kscale = 0.37
	}
	var dkv cu.DevPtr
	if fp8 {
		b := make([]byte, kvN)
		for i := range b {
			b[i] = byte(r.IntN(256)) & 0xBF
			kvF[i] = e4m3(b[i]) * kscale
		}
		dkv, _ = cu.Alloc(uint64(kvN))
		cu.HtoD(dkv, b)
	} else {
		b := randBF(r, kvN)
		for i := range b {
			kvF[i] = bf(b[i])
		}
		dkv, _ = upload(b)
	}
	dq, _ := upload(q)
	S := (ctx + chunk - 1) / chunk
	part, _ := cu.Alloc(uint64(S * T * H * 512 * 4))
	lse, _ := cu.Alloc(uint64(S * T * H * 4))
	out, _ := cu.Alloc(uint64(T * H * 512 * 2))
	sem, _ := cu.Alloc(4096)
	cu.Memset8(sem, 0, 4096)
	cu.Memset8(out, 0xff, uint64(T*H*512*2)) // poison: NaN bf16
	kvs := "bf16"
	if fp8 {
		kvs = "fp8"
	}
	scale := float32(1 / math.Sqrt(192))
	var what string
	var combine bool // the splits' partials are left for mla_combine
	if kernel == "core" {
		g := cuda.MLALaunch(T, H, ctx, 576, e.info.SMs, fp8)
		name := fmt.Sprintf("mla_decode_%s_h%d", kvs, g.HeadGroup)
		what = fmt.Sprintf("%s S=%d", name, S)
		if err := cu.SetMaxDynamicSmem(e.fn(name), g.SmemBytes); err != nil {
			return 0, "", err
		}
		if err := e.launch(name, [3]uint32{uint32(S), uint32(g.Groups), uint32(T)}, [3]uint32{256, 1, 1}, uint32(g.SmemBytes),
			uint64(dq), uint64(dkv), uint64(part), uint64(lse), i32(T), i32(H), i32(ctx), i32(tps), i32(chunk), f32(scale), i32(576), i32(512)); err != nil {
			return 0, "", err
		}
		combine = true // the CUDA-core kernel always leaves partials
	} else {
		rows := cuda.MLAFwdRows(kernel)
		g := cuda.MLAGeometry{Threads: cuda.MLAFwdThreads(kernel), Groups: (tps*H + rows - 1) / rows, Splits: S, Chunk: chunk, SmemBytes: cuda.MLAFwdSmem(kernel)}
		if err := cu.SetMaxDynamicSmem(e.fn(kernel), g.SmemBytes); err != nil {
			return 0, "", err
		}
		if S == 1 {
			merge = 0 // nothing to merge: the kernel writes out
		}
		combine = S > 1 && merge == 0
		if merge == 2 {
			// Clusters of S blocks (more than 8 must be allowed first).
			if n, err := cu.MaxActiveClusters(e.fn(kernel), g.Threads, g.SmemBytes, S); err != nil || n == 0 {
				return 0, "", fmt.Errorf("%s: no cluster of %d blocks runs (%d, %v)", kernel, S, n, err)
			}
			g.Cluster = S
		}
		what = fmt.Sprintf("%s S=1", kernel)
		if S > 1 {
			what = fmt.Sprintf("%s S=%d merge=%s", kernel, S, [...]string{"mla_combine", "in-kernel", "cluster"}[merge])
		}
		if err := e.launchMLAFwd(kernel, g, B, mlaFwdArgs{q: dq, kv: dkv, out: out, part: part, lse: lse, sem: sem,
			T: T, H: H, ctx: ctx, tps: tps, scale: scale, kscale: float32(kscale), merge: merge}); err != nil {
			return 0, "", err
		}
	}
	if combine {
		if err := e.combineMLA(part, lse, out, T*H, S); err != nil {
			return 0, "", err
		}
	}
	if err := cu.StreamSync(e.stream); err != nil {
		return 0, "", err
	}
	o, _ := downloadBF(out, T*H*512)
	var got, want []float64
	for t := 0; t < T; t++ {
		seq := t / tps
		for h := 0; h < H; h++ {
			sc := make([]float64, ctx)
			mx := math.Inf(-1)
			for j := 0; j < ctx; j++ {
				var s float64
				for d := 0; d < 576; d++ {
					s += bf(q[(t*H+h)*576+d]) * float64(scale) * kvF[(seq*ctx+j)*576+d]
				}
				sc[j] = s
				mx = math.Max(mx, s)
			}
			var l float64
			for j := range sc {
				sc[j] = math.Exp(sc[j] - mx)
				l += sc[j]
			}
			for c := 0; c < 512; c++ {
				var v float64
				for j := 0; j < ctx; j++ {
					v += sc[j] * kvF[(seq*ctx+j)*576+c]
				}
				want = append(want, v/l)
				got = append(got, bf(o[(t*H+h)*512+c]))
			}
		}
	}
	for _, p := range []cu.DevPtr{dq, dkv, part, lse, out, sem} {
		cu.Free(p)
	}
	return relErr(got, want), what, nil
}

// ---- timing ----

type gemmResult struct {
	Shape    string  `json:"shape"`
	M        int     `json:"m"`
	N        int     `json:"n"`
	K        int     `json:"k"`
	Batch    int     `json:"batch"`
	Dtype    string  `json:"dtype"`
	MedianUs float64 `json:"median_us"`
	P10Us    float64 `json:"p10_us"`
	P90Us    float64 `json:"p90_us"`
	Copies   int     `json:"copies"`
	TFLOPS   float64 `json:"tflops"`
	GBps     float64 `json:"gbps"`
}

func parseShape(s string) (m, n, k, b int, dt string, err error) {
	sh, dt, ok := strings.Cut(s, ":")
	if !ok || (dt != "bf16" && dt != "fp8") {
		return 0, 0, 0, 0, "", fmt.Errorf("shape %q: want MxNxK[xB]:bf16|fp8", s)
	}
	parts := strings.Split(sh, "x")
	if len(parts) < 3 || len(parts) > 4 {
		return 0, 0, 0, 0, "", fmt.Errorf("shape %q: want MxNxK[xB]", s)
	}
	v := make([]int, 4)
	v[3] = 1
	for i, p := range parts {
		if v[i], err = strconv.Atoi(p); err != nil || v[i] <= 0 {
			return 0, 0, 0, 0, "", fmt.Errorf("shape %q: %q is not a positive integer", s, p)
		}
	}
	return v[0], v[1], v[2], v[3], dt, nil
}

func median(x []float64) (p10, p50, p90 float64) {
	sort.Float64s(x)
	q := func(f float64) float64 { return x[int(math.Round(f*float64(len(x)-1)))] }
	return q(0.1), q(0.5), q(0.9)
}

// timeCalls times iters calls of call(i) with an event pair each, after a
// spin kernel that lets the host enqueue everything ahead of the device.
func (e *env) timeCalls(iters int, call func(i int) error) ([]float64, error) {
	ev := make([]cu.Event, 2*iters)
	for i := range ev {
		ev[i], _ = cu.NewEvent()
	}
	defer func() {
		for _, x := range ev {
			cu.DestroyEvent(x)
		}
	}()
	// ~2 GHz SM clock: 30 ms of spin is more than the host needs to enqueue.
	if err := e.launch("spin", [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, uint64(60_000_000)); err != nil {
		return nil, err
	}
	for i := 0; i < iters; i++ {
		cu.Record(ev[2*i], e.stream, false)
		if err := call(i); err != nil {
			return nil, err
		}
		cu.Record(ev[2*i+1], e.stream, false)
	}
	if err := cu.StreamSync(e.stream); err != nil {
		return nil, err
	}
	out := make([]float64, iters)
	for i := range out {
		ms, err := cu.Elapsed(ev[2*i], ev[2*i+1])
		if err != nil {
			return nil, err
		}
		out[i] = float64(ms) * 1000
	}
	return out, nil
}

func fillRandom(e *env, p cu.DevPtr, n uint64, seed uint32) error {
	words := n / 4
	g := uint32(min(uint64(e.info.SMs)*16, max(1, (words+255)/256)))
	return e.launch("fill_words", [3]uint32{g, 1, 1}, [3]uint32{256, 1, 1}, 0, uint64(p), words, uint64(seed), i32(1), f32(1))
}

// jsonLines writes a bench's results as JSON lines to the -json file; a nil
// *jsonLines (no file asked for) writes nothing. Results also go to stdout,
// so a failed write is not an error of the bench.
type jsonLines struct {
	f   *os.File
	enc *json.Encoder
}

// createJSONLines creates path; "" means no JSON output and gives nil.
func createJSONLines(path string) (*jsonLines, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &jsonLines{f: f, enc: json.NewEncoder(f)}, nil
}

func (j *jsonLines) write(v any) {
	if j != nil {
		j.enc.Encode(v)
	}
}

func (j *jsonLines) Close() error {
	if j == nil {
		return nil
	}
	return j.f.Close()
}

// startBench parses a bench's flags, sets the device up and creates the
// bench's -json file (*jsonPath after parsing, "" for none).
func startBench(fs *flag.FlagSet, args []string, jsonPath *string) (*env, *jsonLines, error) {
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	e, err := setup()
	if err != nil {
		return nil, nil, err
	}
	out, err := createJSONLines(*jsonPath) // set by fs.Parse
	if err != nil {
		return nil, nil, err
	}
	return e, out, nil
}

func gemm(args []string) error {
	fs := flag.NewFlagSet("gemm", flag.ContinueOnError)
	jsonPath := fs.String("json", "", "write results as JSON lines")
	iters := fs.Int("iters", 100, "timed calls per shape")
	e, out, err := startBench(fs, args, jsonPath)
	if err != nil {
		return err
	}
	defer out.Close()
	fmt.Printf("%-28s %10s %10s %10s %7s %9s %8s\n", "shape", "median_us", "p10_us", "p90_us", "copies", "TFLOP/s", "GB/s")
	for _, s := range fs.Args() {
		m, n, k, b, dt, err := parseShape(s)
		if err != nil {
			return err
		}
		ab := uint64(2)
		if dt == "fp8" {
			ab = 1
		}
		wBytes := uint64(b*n*k) * ab
		copies := int(max(1, (4*uint64(e.info.L2Bytes)+wBytes-1)/wBytes))
		copies = min(copies, max(1, int((16<<30)/wBytes)))
		w, err := cu.Alloc(wBytes * uint64(copies))
		if err != nil {
			return err
		}
		x, _ := cu.Alloc(uint64(b*m*k) * ab)
		y, _ := cu.Alloc(uint64(b*m*n) * 2)
		fillRandom(e, w, wBytes*uint64(copies), 1)
		fillRandom(e, x, uint64(b*m*k)*ab, 2)
		var plan *cublas.FP8Plan
		if dt == "fp8" {
			if plan, err = e.blas.PrepareFP8(m, n, k, b); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		call := func(i int) error {
			wi := w + cu.DevPtr(uint64(i%copies)*wBytes)
			if dt == "fp8" {
				return e.blas.GemmFP8(plan, x, wi, y)
			}
			return e.blas.GemmBF16(m, n, k, b, x, wi, y, int64(m*k), int64(n*k), int64(m*n))
		}
		if _, err := e.timeCalls(10, call); err != nil { // warm-up, heuristics, lazy loading
			return fmt.Errorf("%s: %w", s, err)
		}
		ts, err := e.timeCalls(*iters, call)
		if err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
		p10, p50, p90 := median(ts)
		flops := 2 * float64(m) * float64(n) * float64(k) * float64(b)
		bytes := float64(wBytes) + float64(uint64(b*m*k)*ab) + float64(b*m*n*2)
		r := gemmResult{Shape: s, M: m, N: n, K: k, Batch: b, Dtype: dt, MedianUs: p50, P10Us: p10, P90Us: p90, Copies: copies,
			TFLOPS: flops / p50 / 1e6, GBps: bytes / p50 / 1e3}
		fmt.Printf("%-28s %10.2f %10.2f %10.2f %7d %9.1f %8.0f\n", s, p50, p10, p90, copies, r.TFLOPS, r.GBps)
		out.write(r)
		cu.Free(w)
		cu.Free(x)
		cu.Free(y)
	}
	return nil
}

// ---- whole-schedule runs through the pipeline ----

// kvFlag reads -kv with the one KV dtype codec (model.ParseKVDtype, as
// tpscope's --kv-dtype): any case, and a weight format such as nvfp4 is one
// line naming the flag. "" is the checkpoint's dtype.
func kvFlag(s string) (model.Dtype, error) {
	if s == "" {
		return "", nil
	}
	d, err := model.ParseKVDtype(s)
	if err != nil {
		return "", fmt.Errorf("-kv %q: %w", s, err)
	}
	return d, nil
}

func runModel(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	name := fs.String("model", "tiny-mla-moe", "preset or config path")
	tp := fs.Int("tp", 1, "tensor-parallel degree of the schedule")
	local := fs.String("local-ranks", "", "comma-separated ranks to run here (default all)")
	batch := fs.Int("batch", 32, "decode batch")
	ctxLen := fs.Int("context", 4096, "cached tokens per sequence")
	kv := fs.String("kv", "", "KV-cache dtype (default the checkpoint's)")
	steps := fs.Int("steps", 20, "measured steps")
	warmup := fs.Int("warmup", 3, "warm-up steps")
	graphs := fs.Bool("graphs", false, "CUDA-graph mode")
	traceDest := fs.String("trace", "none", "trace destination (file:PATH, none)")
	jsonPath := fs.String("json", "", "write the summary as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	a, err := model.Resolve(*name)
	if err != nil {
		return err
	}
	w := model.Workload{Phase: model.Decode, Batch: *batch, Context: *ctxLen}
	if w.KVDtype, err = kvFlag(*kv); err != nil {
		return err
	}
	// The same path as tpscope run (pipeline): the schedule as sim builds
	// it for the scenario (a graphed step's tokens padded to vLLM's capture sizes),
	// the backend configured from the scenario, spans to the destination.
	var lr []int
	if *local != "" {
		for _, f := range strings.Split(*local, ",") {
			v, err := strconv.Atoi(f)
			if err != nil {
				return fmt.Errorf("--local-ranks %q: %w", *local, err)
			}
			lr = append(lr, v)
		}
	}
	p, err := pipeline.Prepare(pipeline.Spec{Scenario: sim.Scenario{Arch: a, Plan: model.Plan{TP: *tp}, Workload: w, Options: sim.Options{CUDAGraphs: *graphs}},
		Backend: "cuda", Seed: 1, Steps: *steps, Warmup: *warmup, LocalRanks: lr, Trace: *traceDest})
	if err != nil {
		return err
	}
	sched := p.Schedule
	t0 := time.Now()
	out, err := pipeline.NewRunner(pipeline.WithIsolation(pipeline.IsolateNever)).Run(context.Background(), p, pipeline.RunOptions{})
	if err != nil {
		return err
	}
	res := out.Run
	s := res.Summary
	fmt.Printf("%s tp=%d local=%v batch=%d ctx=%d graphs=%v(used %v) trace=%s: step median %.1f us (p10 %.1f, p90 %.1f, min %.1f), %.0f tok/s, %d ops/rank, wall %v\n",
		*name, *tp, res.LocalRanks, *batch, *ctxLen, *graphs, res.Graphs, *traceDest, s.StepMedianUs, s.StepP10Us, s.StepP90Us, s.StepMinUs, s.TokensPerS, len(sched.Ranks[res.LocalRanks[0]]), time.Since(t0).Round(time.Millisecond))
	for _, k := range s.ByKind {
		fmt.Printf("  %-12s %4d ops %10.1f us %5.1f%%\n", k.Kind, k.Ops, k.Us, 100*k.ShareFrac)
	}
	if *jsonPath != "" {
		f, err := os.Create(*jsonPath)
		if err != nil {
			return err
		}
		defer f.Close()
		return json.NewEncoder(f).Encode(map[string]any{"model": *name, "tp": *tp, "local": res.LocalRanks, "batch": *batch, "context": *ctxLen,
			"graphs_requested": *graphs, "graphs": res.Graphs, "trace": *traceDest, "summary": s, "step_us": res.StepUs})
	}
	return nil
}
