package engine

import (
	"fmt"
	"strings"
)

// Ref names an engine profile: the engine and, optionally, its version
// ("vllm", "vllm@0.24", "sglang@0.5", "executor"). A Ref without a version
// means the engine's default profile; the zero Ref means the default
// engine (DefaultEngine). Its text form is what --engine takes and what a
// recorded scenario holds.
type Ref struct {
	Name    string
	Version string
}

// DefaultEngine is the engine a scenario that names none is priced with:
// vLLM, the engine the seed scenario's team serves with.
const DefaultEngine = "vllm"

// Executor is tpscope's own executor (exec/cuda): it launches exactly the
// schedule's kernels.
const Executor = "executor"

// ExecutorRef is the Ref of tpscope's executor.
var ExecutorRef = Ref{Name: Executor}

// ParseRef reads NAME or NAME@VERSION (case of the name ignored); "" is
// the zero Ref (the default engine).
func ParseRef(s string) (Ref, error) {
	s = strings.TrimSpace(s)
	if s == "" || strings.EqualFold(s, "default") {
		return Ref{}, nil
	}
	name, ver, hasVer := strings.Cut(s, "@")
	name = strings.ToLower(strings.TrimSpace(name))
	ver = strings.TrimSpace(ver)
	if name == "" || (hasVer && ver == "") {
		return Ref{}, fmt.Errorf("engine %q: want NAME or NAME@VERSION (e.g. vllm@0.24)", s)
	}
	for _, r := range name + ver {
		if !(r == '.' || r == '-' || r == '_' || r == '+' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')) {
			return Ref{}, fmt.Errorf("engine %q: %q is not allowed in a name or version", s, r)
		}
	}
	return Ref{Name: name, Version: ver}, nil
}

// String is NAME or NAME@VERSION, "" for the zero Ref.
func (r Ref) String() string {
	if r.Version == "" {
		return r.Name
	}
	return r.Name + "@" + r.Version
}

// IsZero reports whether r names nothing (the default engine).
func (r Ref) IsZero() bool { return r.Name == "" && r.Version == "" }

// IsExecutor reports whether r names tpscope's executor.
func (r Ref) IsExecutor() bool { return r.Name == Executor }

// MarshalText writes String.
func (r Ref) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads ParseRef's form.
func (r *Ref) UnmarshalText(b []byte) error {
	v, err := ParseRef(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}
