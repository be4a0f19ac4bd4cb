// Package cublas binds cuBLAS (libcublas.so.13/.12) and cuBLASLt
// (libcublasLt.so.13/.12) through purego: BF16 GEMMs (cublasGemmEx,
// cublasGemmStridedBatchedEx, FP32 accumulation) and FP8 E4M3 GEMMs through
// cublasLtMatmul (Hopper and later). Errors carry the call name and the
// status name (cublasGetStatusName, or this package's table).
//
// Layout convention: every GEMM here is PyTorch's nn.Linear,
// Y[M,N] = X[M,K] · W[N,K]^T with row-major X, W, Y. In cuBLAS's
// column-major terms that is C(N×M) = op_T(A=W, K×N, lda K) · B(X, K×M,
// ldb K), the "TN" layout cuBLASLt requires for FP8.
package cublas

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/tpscope/tpscope/exec/cuda/internal/cu"
	"github.com/tpscope/tpscope/exec/cuda/internal/dl"
)

// Status is a cublasStatus_t.
type Status int32

var statusNames = map[Status]string{
	0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED", 3: "CUBLAS_STATUS_ALLOC_FAILED",
	7: "CUBLAS_STATUS_INVALID_VALUE", 8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR", 15: "CUBLAS_STATUS_NOT_SUPPORTED",
	16: "CUBLAS_STATUS_LICENSE_ERROR",
}

// StatusName returns the enum name of s.
func StatusName(s Status) string {
	if n, ok := statusNames[s]; ok {
		return n
	}
	return fmt.Sprintf("CUBLAS_STATUS_%d", int(s))
}

// Error is a failed cuBLAS or cuBLASLt call.
type Error struct {
	Call   string
	Status Status
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Call, StatusName(e.Status)) }

func check(call string, s Status) error {
	if s == 0 {
		return nil
	}
	return &Error{Call: call, Status: s}
}

// Data and compute types (library_types.h cudaDataType_t, cublasComputeType_t).
const (
	R32F        = 0
	R16F        = 2
	R16BF       = 14
	R8FE4M3     = 28
	Compute32F  = 68
	opN         = 0
	opT         = 1
	gemmDefault = -1
)

var (
	loadOnce sync.Once
	loadErr  error

	cublasCreate       func(h *uintptr) Status
	cublasDestroy      func(h uintptr) Status
	cublasSetStream    func(h uintptr, s cu.Stream) Status
	cublasSetWorkspace func(h uintptr, ws cu.DevPtr, n uint64) Status
	cublasGetVersion   func(h uintptr, v *int32) Status

	ltCreate            func(h *uintptr) Status
	ltDestroy           func(h uintptr) Status
	ltMatmulDescCreate  func(d *uintptr, compute int32, scale int32) Status
	ltMatmulDescDestroy func(d uintptr) Status
	ltMatmulDescSetAttr func(d uintptr, attr int32, buf unsafe.Pointer, n uint64) Status
	ltLayoutCreate      func(l *uintptr, t int32, rows, cols uint64, ld int64) Status
	ltLayoutDestroy     func(l uintptr) Status
	ltLayoutSetAttr     func(l uintptr, attr int32, buf unsafe.Pointer, n uint64) Status
	ltPrefCreate        func(p *uintptr) Status
	ltPrefDestroy       func(p uintptr) Status
	ltPrefSetAttr       func(p uintptr, attr int32, buf unsafe.Pointer, n uint64) Status
	ltAlgoGetHeuristic  func(h, desc, a, b, c, d, pref uintptr, req int32, res unsafe.Pointer, ret *int32) Status
	ltGetVersion        func() uint64
)

// Hot-path calls through purego.SyscallN (see package cu).
var symGemmEx, symGemmStridedBatchedEx, symLtMatmul uintptr

// Load opens cuBLASLt then cuBLAS (cuBLAS depends on cuBLASLt; loading it
// first with RTLD_GLOBAL lets the dependency resolve from wheel folders).
func Load() error {
	loadOnce.Do(func() {
		lt, err := dl.Open("libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so")
		if err != nil {
			loadErr = err
			return
		}
		l, err := dl.Open("libcublas.so.13", "libcublas.so.12", "libcublas.so")
		if err != nil {
			loadErr = err
			return
		}
		b := &dl.Binder{Lib: l}
		b.Bind(&cublasCreate, "cublasCreate_v2")
		b.Bind(&cublasDestroy, "cublasDestroy_v2")
		b.Bind(&cublasSetStream, "cublasSetStream_v2")
		b.Bind(&cublasSetWorkspace, "cublasSetWorkspace_v2")
		b.Bind(&cublasGetVersion, "cublasGetVersion_v2")
		symGemmEx = b.Require("cublasGemmEx")
		symGemmStridedBatchedEx = b.Require("cublasGemmStridedBatchedEx")
		if b.Err != nil {
			loadErr = b.Err
			return
		}
		bl := &dl.Binder{Lib: lt}
		bl.Bind(&ltCreate, "cublasLtCreate")
		bl.Bind(&ltDestroy, "cublasLtDestroy")
		bl.Bind(&ltMatmulDescCreate, "cublasLtMatmulDescCreate")
		bl.Bind(&ltMatmulDescDestroy, "cublasLtMatmulDescDestroy")
		bl.Bind(&ltMatmulDescSetAttr, "cublasLtMatmulDescSetAttribute")
		bl.Bind(&ltLayoutCreate, "cublasLtMatrixLayoutCreate")
		bl.Bind(&ltLayoutDestroy, "cublasLtMatrixLayoutDestroy")
		bl.Bind(&ltLayoutSetAttr, "cublasLtMatrixLayoutSetAttribute")
		bl.Bind(&ltPrefCreate, "cublasLtMatmulPreferenceCreate")
		bl.Bind(&ltPrefDestroy, "cublasLtMatmulPreferenceDestroy")
		bl.Bind(&ltPrefSetAttr, "cublasLtMatmulPreferenceSetAttribute")
		bl.Bind(&ltAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic")
		bl.Bind(&ltGetVersion, "cublasLtGetVersion")
		symLtMatmul = bl.Require("cublasLtMatmul")
		loadErr = bl.Err
	})
	return loadErr
}

// WorkspaceBytes is the workspace each handle gets: 32 MiB, cuBLAS's
// recommendation for Hopper (cuBLAS docs, cublasSetWorkspace). Setting it
// explicitly also keeps cuBLAS from allocating during graph capture.
const WorkspaceBytes = 32 << 20

// Handle is a cuBLAS + cuBLASLt handle pair bound to one stream, with its
// own workspace and a cache of FP8 matmul plans.
type Handle struct {
	h, lt  uintptr
	stream cu.Stream
	ws     cu.DevPtr
	plans  map[ltKey]*FP8Plan
	alpha  float32
	beta   float32
}

// New creates a handle on the current context, bound to stream s.
func New(s cu.Stream) (*Handle, error) {
	h := &Handle{stream: s, plans: map[ltKey]*FP8Plan{}, alpha: 1, beta: 0}
	if err := check("cublasCreate", cublasCreate(&h.h)); err != nil {
		return nil, err
	}
	if err := check("cublasLtCreate", ltCreate(&h.lt)); err != nil {
		h.Close()
		return nil, err
	}
	var err error
	if h.ws, err = cu.Alloc(WorkspaceBytes); err != nil {
		h.Close()
		return nil, err
	}
	if err := check("cublasSetStream", cublasSetStream(h.h, s)); err != nil {
		h.Close()
		return nil, err
	}
	if err := check("cublasSetWorkspace", cublasSetWorkspace(h.h, h.ws, WorkspaceBytes)); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// Version returns cuBLAS's version number (e.g. 130100).
func (h *Handle) Version() int {
	var v int32
	if cublasGetVersion(h.h, &v) != 0 {
		return 0
	}
	return int(v)
}

// Close frees the handle, its plans and workspace.
func (h *Handle) Close() error {
	for _, p := range h.plans {
		p.free()
	}
	h.plans = nil
	if h.lt != 0 {
		ltDestroy(h.lt)
		h.lt = 0
	}
	if h.h != 0 {
		cublasDestroy(h.h)
		h.h = 0
	}
	err := cu.Free(h.ws)
	h.ws = 0
	return err
}

// GemmBF16 computes Y[M,N] = X[M,K]·W[N,K]^T for batch problems with
// element strides strideX, strideW, strideY (bf16 in, bf16 out, FP32
// accumulate). batch 1 calls cublasGemmEx, more cublasGemmStridedBatchedEx.
func (h *Handle) GemmBF16(m, n, k, batch int, x, w, y cu.DevPtr, strideX, strideW, strideY int64) error {
	// int arguments are 32-bit in C: pass them zero-extended (the callee
	// reads the low half of the register or stack slot).
	i := func(v int) uintptr { return uintptr(uint32(int32(v))) }
	alpha, beta := uintptr(unsafe.Pointer(&h.alpha)), uintptr(unsafe.Pointer(&h.beta))
	compute, algo := i(Compute32F), i(gemmDefault)
	if batch <= 1 {
		r, _, _ := purego.SyscallN(symGemmEx, h.h, opT, opN, i(n), i(m), i(k),
			alpha, uintptr(w), R16BF, i(k), uintptr(x), R16BF, i(k),
			beta, uintptr(y), R16BF, i(n), compute, algo)
		return check("cublasGemmEx", Status(int32(r)))
	}
	r, _, _ := purego.SyscallN(symGemmStridedBatchedEx, h.h, opT, opN, i(n), i(m), i(k),
		alpha, uintptr(w), R16BF, i(k), uintptr(strideW), uintptr(x), R16BF, i(k), uintptr(strideX),
		beta, uintptr(y), R16BF, i(n), uintptr(strideY), i(batch), compute, algo)
	return check("cublasGemmStridedBatchedEx", Status(int32(r)))
}

// cuBLASLt attribute numbers (cublasLt.h).
const (
	descTransA     = 3
	descTransB     = 4
	descFastAccum  = 25
	layoutBatch    = 5
	layoutStride   = 6
	prefMaxWS      = 1
	heuristicBytes = 96 // sizeof(cublasLtMatmulHeuristicResult_t): algo 64 + size_t + status + float + int[4]
)

type ltKey struct{ m, n, k, batch int }

// FP8Plan is a prepared cuBLASLt FP8 GEMM of one shape (descriptors and
// the heuristic's algorithm) on the Handle that built it.
type FP8Plan struct {
	desc, a, b, c, pref uintptr
	heur                [heuristicBytes]byte
}

func (p *FP8Plan) free() {
	if p.desc != 0 {
		ltMatmulDescDestroy(p.desc)
	}
	for _, l := range []uintptr{p.a, p.b, p.c} {
		if l != 0 {
			ltLayoutDestroy(l)
		}
	}
	if p.pref != 0 {
		ltPrefDestroy(p.pref)
	}
}

// FP8Aligned reports whether cuBLASLt's FP8 path accepts the shape: the
// column-major m (our N) and k must be multiples of 16 (cuBLASLt docs,
// "FP8 ... requirements").
func FP8Aligned(n, k int) bool { return n%16 == 0 && k%16 == 0 }

// PrepareFP8 returns the plan for an FP8 E4M3 GEMM of that shape, built
// once per shape and handle (freed by Close), so GemmFP8 does no set-up or
// lookup: the first timed call and graph capture find it ready.
func (h *Handle) PrepareFP8(m, n, k, batch int) (*FP8Plan, error) {
	key := ltKey{m, n, k, batch}
	if p, ok := h.plans[key]; ok {
		return p, nil
	}
	if !FP8Aligned(n, k) {
		return nil, fmt.Errorf("fp8 gemm M=%d N=%d K=%d: N and K must be multiples of 16", m, n, k)
	}
	p := &FP8Plan{}
	fail := func(err error) (*FP8Plan, error) {
		p.free()
		return nil, fmt.Errorf("fp8 gemm M=%d N=%d K=%d batch=%d: %w", m, n, k, batch, err)
	}
	if err := check("cublasLtMatmulDescCreate", ltMatmulDescCreate(&p.desc, Compute32F, R32F)); err != nil {
		return fail(err)
	}
	ta, tb := int32(opT), int32(opN)
	var fast int8 = 1
	if err := check("cublasLtMatmulDescSetAttribute(TRANSA)", ltMatmulDescSetAttr(p.desc, descTransA, unsafe.Pointer(&ta), 4)); err != nil {
		return fail(err)
	}
	if err := check("cublasLtMatmulDescSetAttribute(TRANSB)", ltMatmulDescSetAttr(p.desc, descTransB, unsafe.Pointer(&tb), 4)); err != nil {
		return fail(err)
	}
	// Fast accumulation, as serving engines run FP8 GEMMs (vLLM's
	// cutlass/torch._scaled_mm paths use use_fast_accum).
	if err := check("cublasLtMatmulDescSetAttribute(FAST_ACCUM)", ltMatmulDescSetAttr(p.desc, descFastAccum, unsafe.Pointer(&fast), 1)); err != nil {
		return fail(err)
	}
	mk := func(l *uintptr, t int32, rows, cols int, ld int) error {
		if err := check("cublasLtMatrixLayoutCreate", ltLayoutCreate(l, t, uint64(rows), uint64(cols), int64(ld))); err != nil {
			return err
		}
		if batch > 1 {
			bc := int32(batch)
			st := int64(rows) * int64(cols)
			if err := check("cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)", ltLayoutSetAttr(*l, layoutBatch, unsafe.Pointer(&bc), 4)); err != nil {
				return err
			}
			if err := check("cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)", ltLayoutSetAttr(*l, layoutStride, unsafe.Pointer(&st), 8)); err != nil {
				return err
			}
		}
		return nil
	}
	// A = W stored K×N (ld K), transposed; B = X, K×M (ld K); C = D = Y, N×M (ld N), bf16.
	if err := mk(&p.a, R8FE4M3, k, n, k); err != nil {
		return fail(err)
	}
	if err := mk(&p.b, R8FE4M3, k, m, k); err != nil {
		return fail(err)
	}
	if err := mk(&p.c, R16BF, n, m, n); err != nil {
		return fail(err)
	}
	if err := check("cublasLtMatmulPreferenceCreate", ltPrefCreate(&p.pref)); err != nil {
		return fail(err)
	}
	ws := uint64(WorkspaceBytes)
	if err := check("cublasLtMatmulPreferenceSetAttribute", ltPrefSetAttr(p.pref, prefMaxWS, unsafe.Pointer(&ws), 8)); err != nil {
		return fail(err)
	}
	var got int32
	if err := check("cublasLtMatmulAlgoGetHeuristic", ltAlgoGetHeuristic(h.lt, p.desc, p.a, p.b, p.c, p.c, p.pref, 1, unsafe.Pointer(&p.heur[0]), &got)); err != nil {
		return fail(err)
	}
	if got == 0 {
		return fail(fmt.Errorf("cublasLtMatmulAlgoGetHeuristic: no algorithm"))
	}
	h.plans[key] = p
	return p, nil
}

// GemmFP8 computes Y[M,N] (bf16) = X[M,K]·W[N,K]^T with X and W in FP8
// E4M3 (unit scales), batch problems laid out contiguously, with the shape
// of p, a plan from h.PrepareFP8.
func (h *Handle) GemmFP8(p *FP8Plan, x, w, y cu.DevPtr) error {
	if p == nil {
		return fmt.Errorf("cublasLtMatmul: no FP8 plan (PrepareFP8 first)")
	}
	r, _, _ := purego.SyscallN(symLtMatmul, h.lt, p.desc, uintptr(unsafe.Pointer(&h.alpha)), uintptr(w), p.a, uintptr(x), p.b,
		uintptr(unsafe.Pointer(&h.beta)), uintptr(y), p.c, uintptr(y), p.c, uintptr(unsafe.Pointer(&p.heur[0])),
		uintptr(h.ws), WorkspaceBytes, uintptr(h.stream))
	return check("cublasLtMatmul", Status(int32(r)))
}

// LtVersion returns cuBLASLt's version number.
func LtVersion() int { return int(ltGetVersion()) }
