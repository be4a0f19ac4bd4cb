package exec

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/tpscope/tpscope/ncclenv"
)

// BackendConfig is what a Factory gets from the command line: the settings
// every backend understands. Backend-specific settings belong in the
// backend package's own constructor options.
type BackendConfig struct {
	// Seed seeds every random draw of the backend (weights, inputs, the
	// MoE router), so two runs of one schedule do the same work.
	Seed int64
	// Devices are the device ordinals of the local ranks, in LocalRanks
	// order; nil means device i for the i-th local rank. The CPU backend
	// ignores it.
	Devices []int
	// NCCL are the run's NCCL settings (the scenario's, ncclenv.Settings):
	// a backend with NCCL sets their environment (NCCL.Env) in its
	// process before it initialises NCCL and puts it back afterwards; a
	// backend without NCCL ignores them.
	NCCL ncclenv.Settings
	// ARNormFusion asks for all-reduce + RMSNorm fusion (the catalog's
	// ar-norm-fusion): the RMSNorm right after an all-reduce works on the
	// all-reduce's output as one fused kernel's tail. A backend that cannot
	// fuse runs the two apart and says so on the norm's span.
	ARNormFusion bool
}

// Factory builds a Backend. It reports a missing driver or library as an
// error of one line that says what to install or set, e.g.
// "libnccl.so.2 not found; set TPSCOPE_CUDA_LIBS".
type Factory func(cfg BackendConfig) (Backend, error)

var (
	registryMu sync.Mutex
	registry   = map[string]Factory{}
)

// RegisterBackend makes a backend available by name to NewBackend (and so to
// `tpscope run --backend name`). Backend packages call it from init, like
// database/sql drivers:
//
//	func init() { exec.RegisterBackend("cuda", New) }
//
// and the command imports them for their side effect. RegisterBackend
// panics if name is empty, f is nil or name is already registered: these
// are programmer errors found at start-up.
func RegisterBackend(name string, f Factory) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if name == "" || f == nil {
		panic("exec: RegisterBackend with empty name or nil factory")
	}
	if _, dup := registry[name]; dup {
		panic("exec: RegisterBackend called twice for backend " + name)
	}
	registry[name] = f
}

// Backends lists the registered backend names, sorted.
func Backends() []string {
	registryMu.Lock()
	defer registryMu.Unlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NewBackend builds the backend registered under name. An unknown name is an
// error that lists the registered ones.
func NewBackend(name string, cfg BackendConfig) (Backend, error) {
	registryMu.Lock()
	f := registry[name]
	registryMu.Unlock()
	if f == nil {
		return nil, fmt.Errorf("backend %q is not available in this build (have: %s)", name, strings.Join(Backends(), ", "))
	}
	b, err := f(cfg)
	if err != nil {
		return nil, fmt.Errorf("backend %s: %w", name, err)
	}
	return b, nil
}
