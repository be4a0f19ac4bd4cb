package compare_test

import (
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/traces"
)

// spec is a scenario in the short form a step span records for people
// (model, topology, plan, workload, option names): what traces written
// before the scenario JSON hold, and what these tests write unless they
// write the JSON too.
type spec struct{ Model, Topology, Plan, Workload, Options string }

// scenario resolves the spec with the codecs a comparison uses.
func (s spec) scenario(t testing.TB) sim.Scenario {
	t.Helper()
	a, err := model.Resolve(s.Model)
	if err != nil {
		t.Fatal(err)
	}
	p, err := model.ParsePlan(s.Plan)
	if err != nil {
		t.Fatal(err)
	}
	w, err := model.ParseWorkload(s.Workload)
	if err != nil {
		t.Fatal(err)
	}
	o, unknown, err := sim.ParseNames(traces.OptionNames(s.Options))
	if err != nil || len(unknown) > 0 {
		t.Fatalf("options %q: %v (unknown %v)", s.Options, err, unknown)
	}
	ref, err := topology.NewRef(s.Topology, 0)
	if err != nil {
		t.Fatal(err)
	}
	box, err := ref.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	return sim.Scenario{Arch: a, Plan: p, Workload: w, Options: o, Topo: box, TopoRef: ref}
}

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }
