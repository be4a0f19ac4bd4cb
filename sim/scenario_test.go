package sim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

// TestScenarioRoutingCodec: the MoE routing travels in the scenario's
// JSON (build.moe_routing), reads back equal, is left out when uniform (so
// a scenario recorded before routing was a choice reads as the uniform
// routing it ran), shows in the one-line form, and a bad value is refused
// naming the field.
func TestScenarioRoutingCodec(t *testing.T) {
	a, err := model.Preset("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topology.Preset(topology.DefaultPreset)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		routing model.Routing
		json    string // substring of the encoding; "" = no moe_routing key
		line    string // substring of String(); "" = no moe-routing
	}{
		{"uniform", model.UniformRouting, "", ""},
		{"balanced", model.BalancedRouting, `"build":{"moe_routing":"balanced"}`, " moe-routing=balanced "},
		{"power-law", model.Routing{Kind: model.RoutingPowerLaw, Alpha: 1.2}, `"build":{"moe_routing":"power-law-1.2"}`, " moe-routing=power-law-1.2 "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := Scenario{Arch: a, Build: model.BuildOptions{Routing: tc.routing}, Plan: model.Plan{TP: 2},
				Workload: model.Workload{Phase: model.Decode, Batch: 4, Context: 256}, Topo: topo}
			js, err := sc.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if tc.json == "" && strings.Contains(string(js), "moe_routing") || tc.json != "" && !strings.Contains(string(js), tc.json) {
				t.Fatalf("JSON %s: want %q", js, tc.json)
			}
			back, err := DecodeScenario(js, topo)
			if err != nil || back.Build != sc.Build {
				t.Fatalf("decoded build %+v, %v; want %+v", back.Build, err, sc.Build)
			}
			if line := sc.String(); tc.line == "" && strings.Contains(line, "moe-routing") || tc.line != "" && !strings.Contains(line, tc.line) {
				t.Fatalf("String() = %q, want %q", line, tc.line)
			}
		})
	}
	sc := Scenario{Arch: a, Plan: model.Plan{TP: 2}, Workload: model.Workload{Phase: model.Decode, Batch: 4, Context: 256}, Topo: topo}
	js, err := sc.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(js), `"build":{}`, `"build":{"moe_routing":"zipf"}`, 1)
	if _, err := DecodeScenario([]byte(bad), topo); err == nil || !strings.Contains(err.Error(), "zipf") || !strings.Contains(err.Error(), "want uniform, balanced or power-law-ALPHA") {
		t.Fatalf("bad routing: %v, want an error naming the value and the accepted forms", err)
	}
}

// TestScenarioLineDispatch: the one-line form names the MoE dispatch
// only where the plan dispatches (DP attention + EP); at plain TP the
// option prices nothing and is left out.
func TestScenarioLineDispatch(t *testing.T) {
	a, err := model.Preset("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topology.Preset(topology.DefaultPreset)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		plan model.Plan
		want bool
	}{
		{"tp8", model.Plan{TP: 8}, false},
		{"tp8 ep", model.Plan{TP: 8, EP: true}, false},
		{"tp4 dp2 ep", model.Plan{TP: 4, DP: 2, EP: true}, true},
	} {
		sc := Scenario{Arch: a, Build: model.BuildOptions{MoEDispatch: model.DispatchAllToAll}, Plan: c.plan,
			Workload: model.Workload{Phase: model.Decode, Batch: 4, Context: 256}, Topo: topo}
		if got := strings.Contains(sc.String(), " moe-dispatch=alltoall "); got != c.want {
			t.Errorf("%s: %q names the dispatch %v, want %v", c.name, sc.String(), got, c.want)
		}
	}
}

// TestScenarioBoxTravels: a scenario records its box by value, so a trace
// decodes on the box it ran on after the topology file moved or was
// deleted; a recorded box whose hash does not match is refused; a box the
// caller passes replaces the recorded one; a scenario recorded before
// boxes travelled (no "box") whose file is gone says so and names --topo.
func TestScenarioBoxTravels(t *testing.T) {
	a, err := model.Preset("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	topo, err := topology.Preset(topology.DefaultPreset)
	if err != nil {
		t.Fatal(err)
	}
	// A box in a file, renamed so that only the file (or its record)
	// has that name.
	box := topo.Clone()
	box.Name = "my-box"
	file := filepath.Join(t.TempDir(), "box.json")
	if err := box.Save(file); err != nil {
		t.Fatal(err)
	}
	ref, err := topology.NewRef(file, 0)
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := ref.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	sc := Scenario{Arch: a, Plan: model.Plan{TP: 2}, Workload: model.Workload{Phase: model.Decode, Batch: 4, Context: 256}, Topo: fromFile, TopoRef: ref}
	js, err := sc.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	back, err := DecodeScenario(js, nil)
	if err != nil {
		t.Fatalf("decode with the box file gone: %v", err)
	}
	want, _ := json.Marshal(fromFile)
	got, _ := json.Marshal(back.Topo)
	if string(got) != string(want) || back.TopoRef != ref {
		t.Fatalf("decoded box %s (ref %+v), want the recorded %s (ref %+v)", got, back.TopoRef, want, ref)
	}

	other, err := topology.Preset("h200-nvswitch")
	if err != nil {
		t.Fatal(err)
	}
	if back, err = DecodeScenario(js, other); err != nil || back.Topo != other {
		t.Fatalf("decode with a box given: %v, topo %v; want the given box", err, back.Topo.Name)
	}

	var raw map[string]json.RawMessage
	if err := json.Unmarshal(js, &raw); err != nil {
		t.Fatal(err)
	}
	damaged := strings.Replace(string(js), `"my-box"`, `"my-bux"`, 1)
	if _, err := DecodeScenario([]byte(damaged), nil); err == nil || !strings.Contains(err.Error(), "edited or damaged") {
		t.Fatalf("damaged box: %v, want it refused", err)
	}
	delete(raw, "box")
	delete(raw, "box_sha256")
	old, _ := json.Marshal(raw)
	if _, err := DecodeScenario(old, nil); err == nil || !strings.Contains(err.Error(), "the file is gone") || !strings.Contains(err.Error(), "--topo") {
		t.Fatalf("pre-box record with the file gone: %v, want an error saying so and naming --topo", err)
	}
}
