// Package cu binds the CUDA driver API (libcuda.so.1) through purego: the
// handful of calls tpscope's executor needs (devices, primary contexts,
// memory, streams, events, modules and launches, stream capture into CUDA
// graphs). Every call returns a Go error carrying the call name and the
// driver's own error name and string (cuGetErrorName, cuGetErrorString).
//
// Handles are opaque uintptrs; device pointers are DevPtr (CUdeviceptr,
// 64-bit). The CUDA context is current per OS thread: callers lock their
// goroutine to a thread (runtime.LockOSThread) and call SetCurrent.
package cu

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/tpscope/tpscope/exec/cuda/internal/dl"
)

// Result is a CUresult.
type Result int32

// Success is CUDA_SUCCESS; NotReady is CUDA_ERROR_NOT_READY (cuStreamQuery,
// cuEventQuery on work still running).
const (
	Success  Result = 0
	NotReady Result = 600
)

// DevPtr is a CUdeviceptr.
type DevPtr uint64

// Handles.
type (
	Context   uintptr
	Stream    uintptr
	Event     uintptr
	Module    uintptr
	Function  uintptr
	Graph     uintptr
	GraphExec uintptr
)

// Error is a failed driver call.
type Error struct {
	Call string
	Code Result
	Name string // e.g. CUDA_ERROR_OUT_OF_MEMORY
	Msg  string // e.g. out of memory
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s (%d): %s", e.Call, e.Name, int(e.Code), e.Msg)
}

// Raw addresses of the hot-path calls (event records, kernel launches),
// called through purego.SyscallN: about 0.2 us a call against 1.3-1.8 us
// and 7 allocations through a RegisterFunc wrapper (measured on the build
// machine with a libc function), which matters at thousands of ops a step.
var symEventRecord, symEventRecordWithFlags, symLaunchKernel, symLaunchKernelEx uintptr

var (
	loadOnce sync.Once
	loadErr  error

	cuInit                      func(flags uint32) Result
	cuDriverGetVersion          func(v *int32) Result
	cuGetErrorString            func(r Result, s **byte) Result
	cuGetErrorName              func(r Result, s **byte) Result
	cuDeviceGetCount            func(n *int32) Result
	cuDeviceGet                 func(d *int32, ordinal int32) Result
	cuDeviceGetName             func(name *byte, n int32, d int32) Result
	cuDeviceGetAttribute        func(v *int32, attr int32, d int32) Result
	cuDeviceTotalMem            func(b *uint64, d int32) Result
	cuDeviceGetPCIBusId         func(buf *byte, n int32, d int32) Result
	cuDevicePrimaryCtxRetain    func(c *Context, d int32) Result
	cuDevicePrimaryCtxRelease   func(d int32) Result
	cuCtxSetCurrent             func(c Context) Result
	cuMemAlloc                  func(p *DevPtr, n uint64) Result
	cuMemFree                   func(p DevPtr) Result
	cuMemGetInfo                func(free, total *uint64) Result
	cuMemcpyHtoD                func(dst DevPtr, src unsafe.Pointer, n uint64) Result
	cuMemcpyDtoH                func(dst unsafe.Pointer, src DevPtr, n uint64) Result
	cuMemsetD8                  func(dst DevPtr, v uint8, n uint64) Result
	cuStreamCreate              func(s *Stream, flags uint32) Result
	cuStreamDestroy             func(s Stream) Result
	cuStreamSynchronize         func(s Stream) Result
	cuStreamQuery               func(s Stream) Result
	cuEventCreate               func(e *Event, flags uint32) Result
	cuEventDestroy              func(e Event) Result
	cuEventElapsedTime          func(ms *float32, a, b Event) Result
	cuModuleLoadData            func(m *Module, image unsafe.Pointer) Result
	cuModuleUnload              func(m Module) Result
	cuModuleGetFunction         func(f *Function, m Module, name string) Result
	cuFuncSetAttribute          func(f Function, attr int32, v int32) Result
	cuFuncGetAttribute          func(v *int32, attr int32, f Function) Result
	cuOccupancyMaxBlocks        func(n *int32, f Function, block int32, smem uint64) Result
	cuMemcpyDtoDAsync           func(dst, src DevPtr, n uint64, s Stream) Result
	cuStreamBeginCapture        func(s Stream, mode int32) Result
	cuStreamEndCapture          func(s Stream, g *Graph) Result
	cuGraphInstantiateWithFlags func(e *GraphExec, g Graph, flags uint64) Result
	cuGraphLaunch               func(e GraphExec, s Stream) Result
	cuGraphExecDestroy          func(e GraphExec) Result
	cuGraphDestroy              func(g Graph) Result
	cuOccupancyMaxClusters      func(n *int32, f Function, cfg *launchConfig) Result
)

// Load opens libcuda.so.1, binds the functions and calls cuInit(0). It is
// safe to call many times; the first result is kept.
func Load() error {
	loadOnce.Do(func() {
		l, err := dl.Open("libcuda.so.1", "libcuda.so")
		if err != nil {
			loadErr = err
			return
		}
		b := &dl.Binder{Lib: l}
		b.Bind(&cuInit, "cuInit")
		b.Bind(&cuDriverGetVersion, "cuDriverGetVersion")
		b.Bind(&cuGetErrorString, "cuGetErrorString")
		b.Bind(&cuGetErrorName, "cuGetErrorName")
		b.Bind(&cuDeviceGetCount, "cuDeviceGetCount")
		b.Bind(&cuDeviceGet, "cuDeviceGet")
		b.Bind(&cuDeviceGetName, "cuDeviceGetName")
		b.Bind(&cuDeviceGetAttribute, "cuDeviceGetAttribute")
		b.Bind(&cuDeviceTotalMem, "cuDeviceTotalMem_v2")
		b.Bind(&cuDeviceGetPCIBusId, "cuDeviceGetPCIBusId")
		b.Bind(&cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
		b.Bind(&cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")
		b.Bind(&cuCtxSetCurrent, "cuCtxSetCurrent")
		b.Bind(&cuMemAlloc, "cuMemAlloc_v2")
		b.Bind(&cuMemFree, "cuMemFree_v2")
		b.Bind(&cuMemGetInfo, "cuMemGetInfo_v2")
		b.Bind(&cuMemcpyHtoD, "cuMemcpyHtoD_v2")
		b.Bind(&cuMemcpyDtoH, "cuMemcpyDtoH_v2")
		b.Bind(&cuMemsetD8, "cuMemsetD8_v2")
		b.Bind(&cuStreamCreate, "cuStreamCreate")
		b.Bind(&cuStreamDestroy, "cuStreamDestroy_v2")
		b.Bind(&cuStreamSynchronize, "cuStreamSynchronize")
		b.Bind(&cuStreamQuery, "cuStreamQuery")
		b.Bind(&cuEventCreate, "cuEventCreate")
		b.Bind(&cuEventDestroy, "cuEventDestroy_v2")
		b.Bind(&cuEventElapsedTime, "cuEventElapsedTime")
		b.Bind(&cuModuleLoadData, "cuModuleLoadData")
		b.Bind(&cuModuleUnload, "cuModuleUnload")
		b.Bind(&cuModuleGetFunction, "cuModuleGetFunction")
		b.Bind(&cuFuncSetAttribute, "cuFuncSetAttribute")
		b.Bind(&cuFuncGetAttribute, "cuFuncGetAttribute")
		b.Bind(&cuOccupancyMaxBlocks, "cuOccupancyMaxActiveBlocksPerMultiprocessor")
		b.Bind(&cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")
		b.Bind(&cuStreamBeginCapture, "cuStreamBeginCapture_v2")
		b.Bind(&cuStreamEndCapture, "cuStreamEndCapture")
		b.Bind(&cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags")
		b.Bind(&cuGraphLaunch, "cuGraphLaunch")
		b.Bind(&cuGraphExecDestroy, "cuGraphExecDestroy")
		b.Bind(&cuGraphDestroy, "cuGraphDestroy")
		symEventRecord = b.Require("cuEventRecord")
		symEventRecordWithFlags = b.Require("cuEventRecordWithFlags")
		symLaunchKernel = b.Require("cuLaunchKernel")
		// Thread-block clusters (CUDA 11.8+ drivers); without them launches
		// with clusters report ErrNoClusters and planners do without.
		if b.Optional(&cuOccupancyMaxClusters, "cuOccupancyMaxActiveClusters") {
			symLaunchKernelEx, _ = purego.Dlsym(l.Handle, "cuLaunchKernelEx")
		}
		if b.Err != nil {
			loadErr = b.Err
			return
		}
		loadErr = check("cuInit", cuInit(0))
	})
	return loadErr
}

func cstr(p *byte) string {
	if p == nil {
		return ""
	}
	var n int
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

func check(call string, r Result) error {
	if r == Success {
		return nil
	}
	e := &Error{Call: call, Code: r, Name: "CUDA_ERROR", Msg: "unknown error"}
	var s *byte
	if cuGetErrorName != nil && cuGetErrorName(r, &s) == Success {
		e.Name = cstr(s)
	}
	if cuGetErrorString != nil && cuGetErrorString(r, &s) == Success {
		e.Msg = cstr(s)
	}
	return e
}

// DriverVersion returns the CUDA version the driver supports, e.g. 13000.
func DriverVersion() (int, error) {
	var v int32
	err := check("cuDriverGetVersion", cuDriverGetVersion(&v))
	return int(v), err
}

// DeviceCount returns the number of visible devices.
func DeviceCount() (int, error) {
	var n int32
	err := check("cuDeviceGetCount", cuDeviceGetCount(&n))
	return int(n), err
}

// Device attributes (CUdevice_attribute).
const (
	AttrMultiprocessorCount    = 16
	AttrComputeCapabilityMajor = 75
	AttrComputeCapabilityMinor = 76
	AttrL2CacheSize            = 38
	AttrMaxSharedPerBlockOptin = 97
)

// DeviceInfo describes one device.
type DeviceInfo struct {
	Ordinal    int
	Name       string
	CCMajor    int
	CCMinor    int
	SMs        int
	L2Bytes    int64
	TotalBytes uint64
	SmemOptinB int
}

// Info queries device ordinal.
func Info(ordinal int) (DeviceInfo, error) {
	var d int32
	if err := check("cuDeviceGet", cuDeviceGet(&d, int32(ordinal))); err != nil {
		return DeviceInfo{}, err
	}
	var name [256]byte
	if err := check("cuDeviceGetName", cuDeviceGetName(&name[0], int32(len(name)), d)); err != nil {
		return DeviceInfo{}, err
	}
	attr := func(a int32) int {
		var v int32
		if cuDeviceGetAttribute(&v, a, d) != Success {
			return 0
		}
		return int(v)
	}
	var tot uint64
	if err := check("cuDeviceTotalMem", cuDeviceTotalMem(&tot, d)); err != nil {
		return DeviceInfo{}, err
	}
	return DeviceInfo{
		Ordinal: ordinal, Name: cstr(&name[0]),
		CCMajor: attr(AttrComputeCapabilityMajor), CCMinor: attr(AttrComputeCapabilityMinor),
		SMs: attr(AttrMultiprocessorCount), L2Bytes: int64(attr(AttrL2CacheSize)),
		TotalBytes: tot, SmemOptinB: attr(AttrMaxSharedPerBlockOptin),
	}, nil
}

// PCIBusID returns device ordinal's PCI bus id ("0000:18:00.0").
func PCIBusID(ordinal int) (string, error) {
	var d int32
	if err := check("cuDeviceGet", cuDeviceGet(&d, int32(ordinal))); err != nil {
		return "", err
	}
	var buf [64]byte
	if err := check("cuDeviceGetPCIBusId", cuDeviceGetPCIBusId(&buf[0], int32(len(buf)), d)); err != nil {
		return "", err
	}
	return cstr(&buf[0]), nil
}

// PrimaryContext retains device ordinal's primary context (the one the
// CUDA runtime, cuBLAS and NCCL use too).
func PrimaryContext(ordinal int) (Context, error) {
	var d int32
	if err := check("cuDeviceGet", cuDeviceGet(&d, int32(ordinal))); err != nil {
		return 0, err
	}
	var c Context
	err := check("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain(&c, d))
	return c, err
}

// ReleasePrimaryContext releases one retain of ordinal's primary context.
func ReleasePrimaryContext(ordinal int) error {
	return check("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease(int32(ordinal)))
}

// SetCurrent makes c current on the calling OS thread.
func SetCurrent(c Context) error { return check("cuCtxSetCurrent", cuCtxSetCurrent(c)) }

// Alloc allocates n bytes of device memory (never managed memory).
func Alloc(n uint64) (DevPtr, error) {
	if n == 0 {
		n = 256
	}
	var p DevPtr
	if err := check("cuMemAlloc", cuMemAlloc(&p, n)); err != nil {
		return 0, fmt.Errorf("%w (asked %d bytes)", err, n)
	}
	return p, nil
}

// Free frees device memory; Free(0) does nothing.
func Free(p DevPtr) error {
	if p == 0 {
		return nil
	}
	return check("cuMemFree", cuMemFree(p))
}

// MemInfo returns free and total bytes of the current context's device.
func MemInfo() (free, total uint64, err error) {
	err = check("cuMemGetInfo", cuMemGetInfo(&free, &total))
	return
}

// HtoD copies len(src) bytes to dst (synchronous).
func HtoD(dst DevPtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return check("cuMemcpyHtoD", cuMemcpyHtoD(dst, unsafe.Pointer(&src[0]), uint64(len(src))))
}

// DtoH copies len(dst) bytes from src (synchronous).
func DtoH(dst []byte, src DevPtr) error {
	if len(dst) == 0 {
		return nil
	}
	return check("cuMemcpyDtoH", cuMemcpyDtoH(unsafe.Pointer(&dst[0]), src, uint64(len(dst))))
}

// Memset8 sets n bytes at p to v (synchronous with respect to the host).
func Memset8(p DevPtr, v uint8, n uint64) error {
	return check("cuMemsetD8", cuMemsetD8(p, v, n))
}

// NewStream creates a non-blocking stream (CU_STREAM_NON_BLOCKING = 1), so
// legacy-default-stream work elsewhere never serialises with it.
func NewStream() (Stream, error) {
	var s Stream
	err := check("cuStreamCreate", cuStreamCreate(&s, 1))
	return s, err
}

// DestroyStream destroys s.
func DestroyStream(s Stream) error { return check("cuStreamDestroy", cuStreamDestroy(s)) }

// StreamSync waits for s.
func StreamSync(s Stream) error { return check("cuStreamSynchronize", cuStreamSynchronize(s)) }

// StreamDone reports whether all work on s has completed.
func StreamDone(s Stream) (bool, error) {
	r := cuStreamQuery(s)
	if r == NotReady {
		return false, nil
	}
	return r == Success, check("cuStreamQuery", r)
}

// NewEvent creates a timing event (flags 0: CU_EVENT_DEFAULT, timing on).
func NewEvent() (Event, error) {
	var e Event
	err := check("cuEventCreate", cuEventCreate(&e, 0))
	return e, err
}

// DestroyEvent destroys e.
func DestroyEvent(e Event) error { return check("cuEventDestroy", cuEventDestroy(e)) }

// Record records e on s. Inside stream capture pass external=true: that
// makes it an event-record node of the graph (CU_EVENT_RECORD_EXTERNAL),
// which fires at every replay, instead of a capture-internal marker.
func Record(e Event, s Stream, external bool) error {
	if external {
		r, _, _ := purego.SyscallN(symEventRecordWithFlags, uintptr(e), uintptr(s), 1)
		return check("cuEventRecordWithFlags", Result(int32(r)))
	}
	r, _, _ := purego.SyscallN(symEventRecord, uintptr(e), uintptr(s))
	return check("cuEventRecord", Result(int32(r)))
}

// Elapsed returns the time from a to b in milliseconds (resolution about
// 0.5 us per the driver documentation).
func Elapsed(a, b Event) (float32, error) {
	var ms float32
	err := check("cuEventElapsedTime", cuEventElapsedTime(&ms, a, b))
	return ms, err
}

// LoadModule loads a cubin or PTX image.
func LoadModule(image []byte) (Module, error) {
	img := append([]byte(nil), image...)
	img = append(img, 0)
	var m Module
	err := check("cuModuleLoadData", cuModuleLoadData(&m, unsafe.Pointer(&img[0])))
	return m, err
}

// UnloadModule unloads m.
func UnloadModule(m Module) error { return check("cuModuleUnload", cuModuleUnload(m)) }

// GetFunction looks up a kernel by its (extern "C") name.
func GetFunction(m Module, name string) (Function, error) {
	var f Function
	if err := check("cuModuleGetFunction", cuModuleGetFunction(&f, m, name)); err != nil {
		return 0, fmt.Errorf("kernel %s: %w", name, err)
	}
	return f, nil
}

// SetMaxDynamicSmem raises f's dynamic shared-memory limit
// (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8).
func SetMaxDynamicSmem(f Function, bytes int) error {
	return check("cuFuncSetAttribute", cuFuncSetAttribute(f, 8, int32(bytes)))
}

// Function attributes (CUfunction_attribute) FuncAttr reads.
const (
	FuncSharedSizeBytes = 1 // static shared memory
	FuncLocalSizeBytes  = 3 // local memory per thread (spills, stack)
	FuncNumRegs         = 4 // registers per thread
)

// FuncAttr reads attribute attr of f.
func FuncAttr(f Function, attr int32) (int, error) {
	var v int32
	err := check("cuFuncGetAttribute", cuFuncGetAttribute(&v, attr, f))
	return int(v), err
}

// MaxActiveBlocks is how many blocks of f (block threads, smem bytes of
// dynamic shared memory each) fit on one multiprocessor at once
// (cuOccupancyMaxActiveBlocksPerMultiprocessor).
func MaxActiveBlocks(f Function, block, smem int) (int, error) {
	var n int32
	err := check("cuOccupancyMaxActiveBlocksPerMultiprocessor", cuOccupancyMaxBlocks(&n, f, int32(block), uint64(smem)))
	return int(n), err
}

// CopyDtoD enqueues a device-to-device copy of n bytes on s.
func CopyDtoD(dst, src DevPtr, n uint64, s Stream) error {
	return check("cuMemcpyDtoDAsync", cuMemcpyDtoDAsync(dst, src, n, s))
}

// Launch launches f. params points to an array of pointers, one per kernel
// argument (the cuLaunchKernel convention); the caller keeps it alive.
func Launch(f Function, grid, block [3]uint32, smem uint32, s Stream, params unsafe.Pointer) error {
	r, _, _ := purego.SyscallN(symLaunchKernel, uintptr(f),
		uintptr(grid[0]), uintptr(grid[1]), uintptr(grid[2]), uintptr(block[0]), uintptr(block[1]), uintptr(block[2]),
		uintptr(smem), uintptr(s), uintptr(params), 0)
	return check("cuLaunchKernel", Result(int32(r)))
}

// launchConfig and launchAttr are CUlaunchConfig and CUlaunchAttribute
// (cuda.h: the attribute's 4-byte id, 4 bytes of padding, a 64-byte value
// union; the config's stream 8-byte aligned after seven uint32).
type launchAttr struct {
	id    uint32
	_     uint32
	value [16]uint32
}

type launchConfig struct {
	gridX, gridY, gridZ    uint32
	blockX, blockY, blockZ uint32
	smem                   uint32
	_                      uint32
	stream                 Stream
	attrs                  *launchAttr
	numAttrs               uint32
	_                      uint32
}

// attrClusterDim is CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION; funcNonPortable
// is CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED (clusters of more
// than 8 blocks, up to 16 on sm_90).
const (
	attrClusterDim  = 4
	funcNonPortable = 14
)

// ErrNoClusters: the driver has no cuLaunchKernelEx.
var ErrNoClusters = fmt.Errorf("cuLaunchKernelEx: the driver does not launch thread-block clusters")

func clusterConfig(grid, block [3]uint32, smem uint32, s Stream, clusterX uint32) (*launchConfig, *launchAttr) {
	a := &launchAttr{id: attrClusterDim}
	a.value[0], a.value[1], a.value[2] = clusterX, 1, 1
	return &launchConfig{gridX: grid[0], gridY: grid[1], gridZ: grid[2], blockX: block[0], blockY: block[1], blockZ: block[2],
		smem: smem, stream: s, attrs: a, numAttrs: 1}, a
}

// LaunchCluster launches f with its grid cut into clusters of clusterX x 1
// x 1 blocks (grid[0] a multiple of clusterX), whose blocks run at once
// and share their shared memory (cuLaunchKernelEx).
func LaunchCluster(f Function, grid, block [3]uint32, smem uint32, s Stream, params unsafe.Pointer, clusterX uint32) error {
	if symLaunchKernelEx == 0 {
		return ErrNoClusters
	}
	cfg, a := clusterConfig(grid, block, smem, s, clusterX)
	r, _, _ := purego.SyscallN(symLaunchKernelEx, uintptr(unsafe.Pointer(cfg)), uintptr(f), uintptr(params), 0)
	runtime.KeepAlive(cfg)
	runtime.KeepAlive(a)
	return check("cuLaunchKernelEx", Result(int32(r)))
}

// MaxActiveClusters is how many clusters of clusterX blocks of f (block
// threads, smem bytes of dynamic shared memory each) the device runs at
// once (cuOccupancyMaxActiveClusters, which counts the GPCs that hold a
// whole cluster); clusters of more than 8 blocks are allowed for f first.
// 0 and no error where the driver has no clusters.
func MaxActiveClusters(f Function, block, smem, clusterX int) (int, error) {
	if cuOccupancyMaxClusters == nil || symLaunchKernelEx == 0 {
		return 0, nil
	}
	if clusterX > 8 {
		if err := check("cuFuncSetAttribute", cuFuncSetAttribute(f, funcNonPortable, 1)); err != nil {
			return 0, err
		}
	}
	var n int32
	cfg, a := clusterConfig([3]uint32{uint32(clusterX), 1, 1}, [3]uint32{uint32(block), 1, 1}, uint32(smem), 0, uint32(clusterX))
	err := check("cuOccupancyMaxActiveClusters", cuOccupancyMaxClusters(&n, f, cfg))
	runtime.KeepAlive(a)
	return int(n), err
}

// BeginCapture starts capturing s into a graph in thread-local mode
// (CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1), so ranks capturing on other
// threads do not interfere.
func BeginCapture(s Stream) error {
	return check("cuStreamBeginCapture", cuStreamBeginCapture(s, 1))
}

// AbandonCapture ends a capture on s that will not be used (a step that
// failed while it was being recorded) and frees what was captured, so the
// stream can be synchronised and destroyed.
func AbandonCapture(s Stream) error {
	var g Graph
	err := check("cuStreamEndCapture", cuStreamEndCapture(s, &g))
	if g != 0 {
		_ = cuGraphDestroy(g)
	}
	return err
}

// EndCapture ends capture on s and instantiates the graph.
func EndCapture(s Stream) (Graph, GraphExec, error) {
	var g Graph
	if err := check("cuStreamEndCapture", cuStreamEndCapture(s, &g)); err != nil {
		return 0, 0, err
	}
	var e GraphExec
	if err := check("cuGraphInstantiateWithFlags", cuGraphInstantiateWithFlags(&e, g, 0)); err != nil {
		_ = cuGraphDestroy(g)
		return 0, 0, err
	}
	return g, e, nil
}

// LaunchGraph replays e on s.
func LaunchGraph(e GraphExec, s Stream) error { return check("cuGraphLaunch", cuGraphLaunch(e, s)) }

// DestroyGraph frees a graph and its executable.
func DestroyGraph(g Graph, e GraphExec) error {
	var err error
	if e != 0 {
		err = check("cuGraphExecDestroy", cuGraphExecDestroy(e))
	}
	if g != 0 {
		if e2 := check("cuGraphDestroy", cuGraphDestroy(g)); err == nil {
			err = e2
		}
	}
	return err
}
