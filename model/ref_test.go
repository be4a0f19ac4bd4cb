package model

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSameModel: a checkpoint's config copied to another directory is
// the same model (same content), an edited one is not, whatever its
// path; a preset is itself only; scales must agree.
func TestSameModel(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("presets", "tiny-mla-moe.json"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(sub string, b []byte) *Arch {
		t.Helper()
		p := filepath.Join(dir, sub)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "config.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		a, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	a, moved := write("a", data), write("elsewhere/b", data)
	edited := write("c", append(append([]byte(nil), data...), '\n'))
	preset, err := Preset("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	half, err := ScaleArch(a, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		x, y Ref
		want bool
	}{
		{"same file", a.Ref, a.Ref, true},
		{"moved copy", a.Ref, moved.Ref, true},
		{"edited copy", a.Ref, edited.Ref, false},
		{"same path, other content", a.Ref, Ref{Path: a.Ref.Path, SHA256: edited.Ref.SHA256}, false},
		{"path only, recorded before hashes", Ref{Path: a.Ref.Path}, Ref{Path: a.Ref.Path}, true},
		{"preset", preset.Ref, preset.Ref, true},
		{"preset against its file's copy", preset.Ref, a.Ref, false},
		{"another preset", preset.Ref, Ref{Name: "deepseek-v3"}, false},
		{"scaled", half.Ref, a.Ref, false},
		{"scale 1 is none", Ref{Name: "tiny-mla-moe", Scale: 1}, preset.Ref, true},
	} {
		if got := tc.x.SameModel(tc.y); got != tc.want {
			t.Errorf("%s: SameModel = %v, want %v", tc.name, got, tc.want)
		}
		if got := tc.y.SameModel(tc.x); got != tc.want {
			t.Errorf("%s (swapped): SameModel = %v, want %v", tc.name, got, tc.want)
		}
	}
}
