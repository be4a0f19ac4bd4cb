// Package nvrtc binds NVRTC (libnvrtc.so.13/.12) through purego to compile
// tpscope's embedded CUDA C kernels at start-up for the device's exact
// architecture (sm_XY cubin). Errors carry the call, nvrtcGetErrorString's
// text and, for compile failures, the compiler log.
package nvrtc

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/tpscope/tpscope/exec/cuda/internal/dl"
)

// Result is an nvrtcResult.
type Result int32

// Error is a failed NVRTC call.
type Error struct {
	Call string
	Code Result
	Msg  string
	Log  string // compile log, for nvrtcCompileProgram
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s (%d)", e.Call, e.Msg, int(e.Code))
	if e.Log != "" {
		s += "\n" + e.Log
	}
	return s
}

var (
	loadOnce sync.Once
	loadErr  error

	nvrtcVersion           func(major, minor *int32) Result
	nvrtcGetErrorString    func(r Result) string
	nvrtcCreateProgram     func(p *uintptr, src, name string, nh int32, headers, names unsafe.Pointer) Result
	nvrtcDestroyProgram    func(p *uintptr) Result
	nvrtcCompileProgram    func(p uintptr, n int32, opts unsafe.Pointer) Result
	nvrtcGetProgramLogSize func(p uintptr, n *uint64) Result
	nvrtcGetProgramLog     func(p uintptr, buf unsafe.Pointer) Result
	nvrtcGetCUBINSize      func(p uintptr, n *uint64) Result
	nvrtcGetCUBIN          func(p uintptr, buf unsafe.Pointer) Result
)

// Load opens NVRTC and binds the functions.
func Load() error {
	loadOnce.Do(func() {
		l, err := dl.Open("libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so")
		if err != nil {
			loadErr = err
			return
		}
		b := &dl.Binder{Lib: l}
		b.Bind(&nvrtcVersion, "nvrtcVersion")
		b.Bind(&nvrtcGetErrorString, "nvrtcGetErrorString")
		b.Bind(&nvrtcCreateProgram, "nvrtcCreateProgram")
		b.Bind(&nvrtcDestroyProgram, "nvrtcDestroyProgram")
		b.Bind(&nvrtcCompileProgram, "nvrtcCompileProgram")
		b.Bind(&nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize")
		b.Bind(&nvrtcGetProgramLog, "nvrtcGetProgramLog")
		b.Bind(&nvrtcGetCUBINSize, "nvrtcGetCUBINSize")
		b.Bind(&nvrtcGetCUBIN, "nvrtcGetCUBIN")
		loadErr = b.Err
	})
	return loadErr
}

func check(call string, r Result) error {
	if r == 0 {
		return nil
	}
	return &Error{Call: call, Code: r, Msg: nvrtcGetErrorString(r)}
}

// Version returns NVRTC's "major.minor".
func Version() string {
	var a, b int32
	if nvrtcVersion(&a, &b) != 0 {
		return ""
	}
	return fmt.Sprintf("%d.%d", a, b)
}

// Compile compiles src (named name in messages) with options (e.g.
// "-arch=sm_90", "-O3") and returns the cubin and the compiler log.
func Compile(src, name string, options []string) (cubin []byte, log string, err error) {
	var p uintptr
	if err := check("nvrtcCreateProgram", nvrtcCreateProgram(&p, src, name, 0, nil, nil)); err != nil {
		return nil, "", err
	}
	defer nvrtcDestroyProgram(&p)
	cs := make([][]byte, len(options))
	ptrs := make([]*byte, len(options)+1)
	for i, o := range options {
		cs[i] = append([]byte(o), 0)
		ptrs[i] = &cs[i][0]
	}
	r := nvrtcCompileProgram(p, int32(len(options)), unsafe.Pointer(&ptrs[0]))
	runtime.KeepAlive(cs)
	var n uint64
	if nvrtcGetProgramLogSize(p, &n) == 0 && n > 1 {
		buf := make([]byte, n)
		if nvrtcGetProgramLog(p, unsafe.Pointer(&buf[0])) == 0 {
			log = string(buf[:n-1])
		}
	}
	if r != 0 {
		return nil, log, &Error{Call: "nvrtcCompileProgram(" + name + ")", Code: r, Msg: nvrtcGetErrorString(r), Log: log}
	}
	if err := check("nvrtcGetCUBINSize", nvrtcGetCUBINSize(p, &n)); err != nil {
		return nil, log, err
	}
	cubin = make([]byte, n)
	if err := check("nvrtcGetCUBIN", nvrtcGetCUBIN(p, unsafe.Pointer(&cubin[0]))); err != nil {
		return nil, log, err
	}
	return cubin, log, nil
}
