// Package testfix resolves the model presets and boxes tests build their
// scenarios from, failing the test on a name that does not resolve.
package testfix

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

// Arch is model preset name.
func Arch(t testing.TB, name string) *model.Arch {
	t.Helper()
	a, err := model.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Box is topology preset name.
func Box(t testing.TB, name string) *topology.Topology {
	t.Helper()
	tp, err := topology.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// SamplePerfDBRel is the sample of aiconfigurator's measured database the
// workspace holds, relative to the workspace root
// (../shared/reference/perfdb/systems from the repository root).
const SamplePerfDBRel = "shared/reference/perfdb/systems"

// SamplePerfDB is the sample database's directory, looked for in the
// ancestors of the test's directory (so tests run from the main checkout
// and from worktrees alike), "" when it is absent (a clone on its own: CI).
func SamplePerfDB(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		p := filepath.Join(dir, SamplePerfDBRel)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p
		}
		dir = filepath.Dir(dir)
	}
	return ""
}

// EditedPreset writes model preset name's config.json, its first old
// replaced by new, to a file in a temporary directory and returns the
// file's path; a preset without old fails the test (the edit would test
// nothing).
func EditedPreset(t testing.TB, name, old, new string) string {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("testfix: no source path to find the presets from")
	}
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "..", "model", "presets", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(raw), old, new, 1)
	if edited == string(raw) {
		t.Fatalf("testfix: preset %s has no %q to replace", name, old)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// VLLMCaptureGrid is vLLM's default CUDA-graph capture list up to largest
// tokens, written out from vllm/config/vllm.py _set_cudagraph_sizes
// independently of the engine profile tests check: [1, 2, 4] up to
// largest, range(8, min(largest + 1, 256), 8), range(256, largest + 1, 16).
func VLLMCaptureGrid(largest int) []int {
	var s []int
	for _, b := range []int{1, 2, 4} {
		if b <= largest {
			s = append(s, b)
		}
	}
	for b := 8; b < min(largest+1, 256); b += 8 {
		s = append(s, b)
	}
	for b := 256; b <= largest; b += 16 {
		s = append(s, b)
	}
	return s
}
