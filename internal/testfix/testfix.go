// Package testfix resolves the model presets and boxes tests build their
// scenarios from, failing the test on a name that does not resolve.
package testfix

import (
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
