package sim

import (
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
		{"power-law", model.PowerLawRouting(1.2), `"build":{"moe_routing":"power-law-1.2"}`, " moe-routing=power-law-1.2 "},
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
