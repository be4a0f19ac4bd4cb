package model

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// refDir is where the real Hugging Face configs live relative to this
// package (../shared/reference/configs from the repository root).
const refDir = "../../shared/reference/configs"

// refFile returns the path of a reference config, skipping the test when
// the folder is absent (fresh clones outside the workspace).
func refFile(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(refDir, name)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("reference config %s not available: %v", name, err)
	}
	return p
}

// readRef reads a reference config (skipping the test when it is absent).
func readRef(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(refFile(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// parseRef parses the reference config cfg with the optional quantization
// config quant ("" for none), as Parse reads them from a checkpoint.
func parseRef(t testing.TB, cfg, quant string) *Arch {
	t.Helper()
	var quantJSON []byte
	if quant != "" {
		quantJSON = readRef(t, quant)
	}
	a, err := parse(cfg, readRef(t, cfg), quant, quantJSON)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustPreset(t testing.TB, name string) *Arch {
	t.Helper()
	a, err := Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func near(got, want, relTol float64) bool {
	if want == 0 {
		return math.Abs(got) <= relTol
	}
	return math.Abs(got-want) <= relTol*math.Abs(want)
}
