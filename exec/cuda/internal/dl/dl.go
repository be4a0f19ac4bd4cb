// Package dl finds and opens the NVIDIA shared libraries (libcuda, cuBLAS,
// cuBLASLt, NCCL, NVRTC) at run time through purego, so tpscope builds and
// runs on machines without CUDA and only needs the libraries where it drives
// a GPU.
//
// Search order for a library with candidate names N1, N2, ... (e.g.
// libcublas.so.13, libcublas.so.12, libcublas.so):
//
//  1. the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache, RPATH);
//  2. each directory of TPSCOPE_CUDA_LIBS (colon-separated);
//  3. /usr/local/cuda/lib64, /usr/local/nvidia/lib64, /usr/lib/x86_64-linux-gnu,
//     /usr/lib64;
//  4. pip wheels' nvidia/*/lib folders under the Python site-packages of
//     $VIRTUAL_ENV, /opt/*/.venv, /usr/local/lib/python3*, /usr/lib/python3*
//     and ~/.local/lib/python3*.
package dl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/ebitengine/purego"
)

// EnvLibs is the environment variable naming extra library directories.
const EnvLibs = "TPSCOPE_CUDA_LIBS"

// NotFoundError says a library was found under none of its names.
type NotFoundError struct {
	Names []string // candidate file names, preferred first
	Tried []string // full paths tried after the loader's search
	Err   error    // the loader's message for the first name
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("%s not found; set %s", e.Names[0], EnvLibs)
}

// Unwrap returns the loader's error.
func (e *NotFoundError) Unwrap() error { return e.Err }

// Lib is an opened library.
type Lib struct {
	Name   string  // first candidate name, used in messages
	Path   string  // the name or path that opened
	Handle uintptr // dlopen handle
}

// SearchDirs returns the directories searched after the loader's own
// search, in order, for the environment value envLibs and home directory
// home. Globs that match nothing contribute nothing. Pure apart from
// filepath.Glob, so tests can check the order.
func SearchDirs(envLibs, home string) []string {
	var dirs []string
	for _, d := range strings.Split(envLibs, ":") {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	dirs = append(dirs, "/usr/local/cuda/lib64", "/usr/local/nvidia/lib64",
		"/usr/lib/x86_64-linux-gnu", "/usr/lib64")
	var sites []string
	if v := os.Getenv("VIRTUAL_ENV"); v != "" {
		sites = append(sites, v+"/lib/python3*/site-packages")
	}
	sites = append(sites,
		"/opt/*/.venv/lib/python3*/site-packages",
		"/usr/local/lib/python3*/dist-packages",
		"/usr/local/lib/python3*/site-packages",
		"/usr/lib/python3*/dist-packages",
		"/usr/lib/python3/dist-packages",
	)
	if home != "" {
		sites = append(sites, home+"/.local/lib/python3*/site-packages")
	}
	for _, s := range sites {
		m, _ := filepath.Glob(s + "/nvidia/*/lib")
		sort.Strings(m)
		dirs = append(dirs, m...)
	}
	return dirs
}

var (
	mu     sync.Mutex
	opened = map[string]*Lib{}
)

// Open opens the first of names that loads (RTLD_NOW|RTLD_GLOBAL, so later
// libraries resolve their dependencies against it) and caches the result.
// A library that loads nowhere gives a *NotFoundError.
func Open(names ...string) (*Lib, error) {
	mu.Lock()
	defer mu.Unlock()
	if l, ok := opened[names[0]]; ok {
		return l, nil
	}
	const mode = purego.RTLD_NOW | purego.RTLD_GLOBAL
	var firstErr error
	for _, n := range names {
		h, err := purego.Dlopen(n, mode)
		if err == nil {
			l := &Lib{Name: names[0], Path: n, Handle: h}
			opened[names[0]] = l
			return l, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	home, _ := os.UserHomeDir()
	var tried []string
	for _, d := range SearchDirs(os.Getenv(EnvLibs), home) {
		for _, n := range names {
			p := filepath.Join(d, n)
			if _, err := os.Stat(p); err != nil {
				continue
			}
			tried = append(tried, p)
			// NVRTC loads its builtins library by name at compile time;
			// load it first from the same folder so that lookup succeeds.
			if strings.HasPrefix(n, "libnvrtc.so") {
				if b, _ := filepath.Glob(filepath.Join(d, "libnvrtc-builtins.so*")); len(b) > 0 {
					sort.Strings(b)
					_, _ = purego.Dlopen(b[0], mode)
				}
			}
			h, err := purego.Dlopen(p, mode)
			if err == nil {
				l := &Lib{Name: names[0], Path: p, Handle: h}
				opened[names[0]] = l
				return l, nil
			}
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	if firstErr == nil {
		firstErr = errors.New("no candidate file")
	}
	return nil, &NotFoundError{Names: names, Tried: tried, Err: firstErr}
}

// Binder registers C functions of one library into Go function variables
// and remembers the first missing symbol.
type Binder struct {
	Lib *Lib
	Err error
}

// Bind sets *fptr (a pointer to a func variable) to the C function name.
// A missing symbol records an error naming the library and symbol; later
// calls do nothing once an error is recorded.
func (b *Binder) Bind(fptr any, name string) {
	if b.Err != nil {
		return
	}
	sym, err := purego.Dlsym(b.Lib.Handle, name)
	if err != nil || sym == 0 {
		b.Err = fmt.Errorf("%s (%s): symbol %s missing: %v", b.Lib.Name, b.Lib.Path, name, err)
		return
	}
	purego.RegisterFunc(fptr, sym)
}

// Optional is Bind for a symbol the caller can do without: it reports
// whether the symbol was found and never records an error.
func (b *Binder) Optional(fptr any, name string) bool {
	sym, err := purego.Dlsym(b.Lib.Handle, name)
	if err != nil || sym == 0 {
		return false
	}
	purego.RegisterFunc(fptr, sym)
	return true
}

// Require returns the raw address of a symbol, for hot-path calls through
// purego.SyscallN. A missing symbol records the error Bind would; it
// returns 0 then and once an error is recorded.
func (b *Binder) Require(name string) uintptr {
	if b.Err != nil {
		return 0
	}
	sym, err := purego.Dlsym(b.Lib.Handle, name)
	if err != nil || sym == 0 {
		b.Err = fmt.Errorf("%s (%s): symbol %s missing: %v", b.Lib.Name, b.Lib.Path, name, err)
		return 0
	}
	return sym
}
