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

// TestScenarioLineKVDtype: the one-line form always names the KV dtype
// the step runs with: a workload that names none reads as one that names
// the checkpoint's (bf16 for DeepSeek-V3, fp8 for Kimi-K2.5-NVFP4, whose
// checkpoint quantizes its KV cache), and a chosen one is named.
func TestScenarioLineKVDtype(t *testing.T) {
	topo, err := topology.Preset(topology.DefaultPreset)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		model string
		kv    model.Dtype
		want  string
	}{
		{"deepseek-v3", "", " decode b1 ctx4096 kv=bf16 on "},
		{"deepseek-v3", model.BF16, " decode b1 ctx4096 kv=bf16 on "},
		{"deepseek-v3", model.FP8, " decode b1 ctx4096 kv=fp8 on "},
		{"kimi-k2.5-nvfp4", "", " decode b1 ctx4096 kv=fp8 on "},
	} {
		a, err := model.Preset(c.model)
		if err != nil {
			t.Fatal(err)
		}
		sc := Scenario{Arch: a, Plan: model.Plan{TP: 8}, Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, KVDtype: c.kv}, Topo: topo}
		if line := sc.String(); !strings.Contains(line, c.want) {
			t.Errorf("%s kv %q: %q, want it to contain %q", c.model, c.kv, line, c.want)
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
	// The scenario's line names the box as predict names it (its name),
	// before and after: it had named the recording machine's path, which
	// here holds nothing (and elsewhere may hold another box).
	for _, s := range []Scenario{sc, back} {
		if line := s.String(); !strings.Contains(line, " on my-box, ") || strings.Contains(line, file) {
			t.Errorf("scenario line %q: want the box named my-box, not by the file %s", line, file)
		}
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

// TestScenarioRecordsDSA: a DSA model's prediction says how its attention
// was priced and whether --dense-dsa chose it: the engine line names what
// was priced (not the engine's own way when the flag chose otherwise),
// the options line names a chosen value, and the choice travels in the
// scenario's JSON. GLM-5 runs dense on SM120 (no DSA sparse kernels
// there) and sparse on SM90 (the vLLM profile's DSA fact); a model
// without an indexer has no DSA to report.
func TestScenarioRecordsDSA(t *testing.T) {
	glm, err := model.Preset("glm-5-nvfp4")
	if err != nil {
		t.Fatal(err)
	}
	kimi, err := model.Preset("kimi-k2.5-nvfp4")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name          string
		arch          *model.Arch
		box           string
		dense, chosen bool
		engine        string // the engine line's last part
		option        string // in the options line; "" = no dense-dsa there
		dsa           *DSAAttention
	}{
		{"sm120 as the engine runs it", glm, "rtxpro6000-2s", true, false, "DSA run dense", "", &DSAAttention{Dense: true}},
		{"sm120 chosen sparse", glm, "rtxpro6000-2s", false, true, "DSA sparse (--dense-dsa=false; the engine runs it dense here)", "dense-dsa=false", &DSAAttention{Chosen: true}},
		{"sm120 chosen dense", glm, "rtxpro6000-2s", true, true, "DSA run dense (--dense-dsa)", "dense-dsa", &DSAAttention{Dense: true, Chosen: true}},
		{"sm90 as the engine runs it", glm, "h200-nvswitch", false, false, "DSA sparse", "", &DSAAttention{}},
		{"sm90 chosen dense", glm, "h200-nvswitch", true, true, "DSA run dense (--dense-dsa; the engine runs it sparse here)", "dense-dsa", &DSAAttention{Dense: true, Chosen: true}},
		{"no indexer", kimi, "rtxpro6000-2s", false, false, "", "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			topo, err := topology.Preset(tc.box)
			if err != nil {
				t.Fatal(err)
			}
			sc := Scenario{Arch: tc.arch, Build: model.BuildOptions{DenseDSA: tc.dense}, DenseDSAChosen: tc.chosen, Plan: model.Plan{TP: 8},
				Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 4096}, Options: DefaultOptions(), Topo: topo}
			pr, _, err := Predict(sc)
			if err != nil {
				t.Fatal(err)
			}
			if (pr.DSA == nil) != (tc.dsa == nil) || pr.DSA != nil && *pr.DSA != *tc.dsa {
				t.Errorf("DSA %+v, want %+v", pr.DSA, tc.dsa)
			}
			last := pr.Engine[strings.LastIndex(pr.Engine, ", ")+2:]
			if tc.engine != "" && last != tc.engine || tc.engine == "" && strings.Contains(pr.Engine, "DSA") {
				t.Errorf("engine line %q: want it to end %q", pr.Engine, tc.engine)
			}
			opts := " " + pr.OptionsLabel() + " "
			if tc.option != "" && !strings.Contains(opts, " "+tc.option+" ") || tc.option == "" && strings.Contains(opts, "dense-dsa") {
				t.Errorf("options %q: want %q", opts, tc.option)
			}
			js, err := sc.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			back, err := DecodeScenario(js, topo)
			if err != nil || back.DenseDSAChosen != tc.chosen || back.Build.DenseDSA != tc.dense {
				t.Errorf("decoded dense %v chosen %v (%v), want %v %v", back.Build.DenseDSA, back.DenseDSAChosen, err, tc.dense, tc.chosen)
			}
		})
	}
}
