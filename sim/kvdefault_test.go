package sim

import (
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/internal/testfix"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

// TestImpliedKVDefault: the KV dtype an engine runs when the user names
// none, where its profile decides it (engine/profiles, kv_default).
// GLM-5 (a DSA model, BF16 checkpoint without a KV scheme) under SGLang
// 0.5 takes fp8 on SM100 and SM120 and bf16 on SM90, whatever the
// checkpoint (server_args sets it before the model loads); GLM-5-NVFP4's
// ModelOpt FP8 scheme yields to bf16 on SM90 likewise. vLLM 0.24 and
// TensorRT-LLM 1.3 have no DSA default: tpscope's rule holds (nil).
// Kimi-K2.5 with a compressed-tensors FP8 KV scheme keeps its bf16 under
// vLLM and SGLang, whose 'auto' reads only ModelOpt's scheme, and takes
// the scheme under TensorRT-LLM (nil); Kimi-K2.5-NVFP4's ModelOpt scheme
// is read by every engine (nil).
func TestImpliedKVDefault(t *testing.T) {
	glm, glm4 := mustPreset(t, "glm-5"), mustPreset(t, "glm-5-nvfp4")
	kimi4 := mustPreset(t, "kimi-k2.5-nvfp4")
	path := testfix.EditedPreset(t, "kimi-k2.5", `"kv_cache_scheme": null`, `"kv_cache_scheme": {"num_bits": 8, "type": "float"}`)
	kimiCT, err := model.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if kimiCT.Quant.Method != "compressed-tensors" || !kimiCT.Quant.KVScheme() || kimiCT.Quant.KV != model.FP8 {
		t.Fatalf("edited kimi-k2.5: method %q, KV %q, want compressed-tensors with an FP8 scheme", kimiCT.Quant.Method, kimiCT.Quant.KV)
	}
	box := func(s string) *topology.Topology {
		tp, err := topology.Resolve(s, 0)
		if err != nil {
			t.Fatal(err)
		}
		return tp
	}
	b200, h200, rtx := box("nvswitch:8xb200"), box("h200-nvswitch"), box("rtxpro6000-2s")
	for _, c := range []struct {
		name string
		a    *model.Arch
		t    *topology.Topology
		eng  string
		want string // KVDefault.String(); "" = nil
		kv   model.Dtype
	}{
		{"sglang glm-5 b200", glm, b200, "sglang@0.5", "sglang@0.5's default for a DSA model on SM100", model.FP8},
		{"sglang glm-5 rtx pro 6000", glm, rtx, "sglang@0.5", "sglang@0.5's default for a DSA model on SM120", model.FP8},
		{"sglang glm-5 h200", glm, h200, "sglang@0.5", "sglang@0.5's default for a DSA model on SM90", model.BF16},
		{"sglang glm-5-nvfp4 h200", glm4, h200, "sglang@0.5", "sglang@0.5's default for a DSA model on SM90", model.BF16},
		{"vllm glm-5 b200", glm, b200, "vllm@0.24", "", ""},
		{"trtllm glm-5 b200", glm, b200, "trtllm@1.3", "", ""},
		{"vllm ct scheme", kimiCT, h200, "vllm@0.24", "vllm@0.24's default for a compressed-tensors KV scheme, which its auto does not read: the model's dtype", model.BF16},
		{"sglang ct scheme", kimiCT, h200, "sglang@0.5", "sglang@0.5's default for a compressed-tensors KV scheme, which its auto does not read: the model's dtype", model.BF16},
		{"trtllm ct scheme", kimiCT, h200, "trtllm@1.3", "", ""},
		{"executor ct scheme", kimiCT, h200, "executor@1", "", ""},
		{"vllm modelopt scheme", kimi4, b200, "vllm@0.24", "", ""},
		{"sglang modelopt scheme", kimi4, b200, "sglang@0.5", "", ""},
	} {
		r, err := engprof.ParseRef(c.eng)
		if err != nil {
			t.Fatal(err)
		}
		d := ImpliedKVDefault(c.a, c.t, r)
		switch {
		case c.want == "" && d != nil:
			t.Errorf("%s: %s, want tpscope's rule (nil)", c.name, d)
		case c.want != "" && (d == nil || d.String() != c.want || d.Dtype != c.kv):
			t.Errorf("%s: %v, want %s %q", c.name, d, c.kv, c.want)
		}
	}
}

// TestScenarioKVDefaultCodec: an engine-chosen KV dtype travels in the
// scenario's JSON (kv_default) and reads back; one whose dtype is not
// the workload's is refused in one line naming kv_default.
func TestScenarioKVDefaultCodec(t *testing.T) {
	topo, err := topology.Resolve("nvswitch:8xb200", 0)
	if err != nil {
		t.Fatal(err)
	}
	d := &KVDefault{Dtype: model.FP8, Engine: "sglang@0.5", Why: "for a DSA model on SM100"}
	sc := Scenario{Arch: mustPreset(t, "glm-5"), Plan: model.Plan{TP: 8}, Topo: topo, KVDefault: d,
		Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, KVDtype: model.FP8}}
	js, err := sc.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeScenario(js, topo)
	if err != nil || back.KVDefault == nil || *back.KVDefault != *d {
		t.Fatalf("decoded kv_default %v, %v; want %v", back.KVDefault, err, d)
	}
	bad := strings.Replace(string(js), `"kv_default":{"dtype":"fp8"`, `"kv_default":{"dtype":"bf16"`, 1)
	if bad == string(js) {
		t.Fatalf("no kv_default in %s", js)
	}
	if _, err := DecodeScenario([]byte(bad), topo); err == nil || !strings.Contains(err.Error(), "scenario kv_default") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("kv_default of another dtype: %v, want one line naming kv_default", err)
	}
}
