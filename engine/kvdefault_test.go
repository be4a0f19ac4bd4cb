package engine

import (
	"strings"
	"testing"
)

// TestKVDefault: what each engine runs for the KV cache when none is
// named, as its profile states.
//   - SGLang 0.5 sets a DSA model's dtype itself before reading the
//     checkpoint (server_args _set_default_nsa_kv_cache_dtype: fp8_e4m3
//     where the device's major capability is 10 or more, so SM100 and
//     SM120, bfloat16 below), whatever the checkpoint's KV scheme; any
//     other model takes a ModelOpt KV scheme (configure_kv_cache_dtype
//     reads the quant config's kv_cache_quant_algo, which only ModelOpt's
//     configs set) and ignores a compressed-tensors one.
//   - vLLM 0.24 has no DSA default (auto stays the model's dtype on
//     FLASHMLA_SPARSE) and reads a KV scheme only from a modelopt
//     quant_method (resolve_kv_cache_dtype_string; MLAAttention takes no
//     compressed-tensors kv_cache_scheme).
//   - TensorRT-LLM 1.3 states none: its auto is the checkpoint's
//     kv_cache_quant_algo, a compressed-tensors scheme included.
func TestKVDefault(t *testing.T) {
	sg, vl, tr := mustLookup(t, "sglang@0.5"), mustLookup(t, "vllm@0.24"), mustLookup(t, "trtllm@1.3")
	dsa := func(a Arch) KVDefaultUse { return KVDefaultUse{Arch: a, DSA: true} }
	ct := KVDefaultUse{Arch: SM90, Scheme: true, Method: "compressed-tensors"}
	mo := KVDefaultUse{Arch: SM100, Scheme: true, Method: "modelopt"}
	for _, c := range []struct {
		name    string
		p       *Profile
		u       KVDefaultUse
		kv      KVDtype // the rule's dtype; KVUnknown: no rule
		ignores bool
	}{
		{"sglang DSA SM100", sg, dsa(SM100), KVFP8, false},
		{"sglang DSA SM120", sg, dsa(SM120), KVFP8, false},
		{"sglang DSA SM90", sg, dsa(SM90), KV16, false},
		{"sglang DSA SM90 over a ModelOpt FP8 scheme", sg, KVDefaultUse{Arch: SM90, DSA: true, Scheme: true, Method: "modelopt"}, KV16, false},
		{"sglang DSA on an unknown GPU", sg, dsa(ArchUnknown), KVUnknown, false},
		{"sglang MLA SM100", sg, KVDefaultUse{Arch: SM100}, KVUnknown, false},
		{"sglang ModelOpt scheme", sg, mo, KVUnknown, false},
		{"sglang compressed-tensors scheme", sg, ct, KVUnknown, true},
		{"vllm DSA SM100", vl, dsa(SM100), KVUnknown, false},
		{"vllm ModelOpt scheme", vl, mo, KVUnknown, false},
		{"vllm compressed-tensors scheme", vl, ct, KVUnknown, true},
		{"vllm fp8 checkpoint's scheme", vl, KVDefaultUse{Arch: SM90, Scheme: true, Method: "fp8"}, KVUnknown, true},
		{"vllm compressed-tensors without a scheme", vl, KVDefaultUse{Arch: SM90, Method: "compressed-tensors"}, KVUnknown, false},
		{"trtllm compressed-tensors scheme", tr, ct, KVUnknown, false},
		{"trtllm DSA SM100", tr, dsa(SM100), KVUnknown, false},
	} {
		got := c.p.KVDefault(c.u)
		kv := KVUnknown
		if got.Rule != nil {
			kv = got.Rule.KV
		}
		if kv != c.kv || got.IgnoresScheme != c.ignores {
			t.Errorf("%s: rule kv %v, ignores scheme %v; want %v, %v", c.name, kv, got.IgnoresScheme, c.kv, c.ignores)
		}
	}
}

// TestKVDefaultParseErrors: a bad kv_default is one line naming the
// field and what it wants.
func TestKVDefaultParseErrors(t *testing.T) {
	base := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	const rule = "- {dsa: true, archs: [sm100, sm120], kv: fp8, cite: [kv-default-nsa]}"
	const methods = "checkpoint_methods: [modelopt]"
	for _, c := range []struct {
		name, old, new, want string
	}{
		{"unknown method", methods, "checkpoint_methods: [awq]", `kv_default.checkpoint_methods[0]: "awq": want one of fp8, compressed-tensors, modelopt`},
		{"method twice", methods, "checkpoint_methods: [modelopt, modelopt]", `kv_default.checkpoint_methods[1]: "modelopt" is named twice`},
		{"rule without archs", rule, "- {dsa: true, kv: fp8, cite: [kv-default-nsa]}", "kv_default.rules[0].archs: missing"},
		{"rule without kv", rule, "- {dsa: true, archs: [sm100], cite: [kv-default-nsa]}", "kv_default.rules[0].kv: missing: want bf16 or fp8"},
		{"rule of an unknown kv", rule, "- {dsa: true, archs: [sm100], kv: fp4, cite: [kv-default-nsa]}", `KV dtype "fp4": want bf16 or fp8`},
		{"rule of an unknown arch", rule, "- {dsa: true, archs: [sm110], kv: fp8, cite: [kv-default-nsa]}", `architecture "sm110"`},
		{"rule uncited", rule, "- {dsa: true, archs: [sm100], kv: fp8, cite: []}", "kv_default.rules[0].cite: missing"},
		{"rule citing nothing known", rule, "- {dsa: true, archs: [sm100], kv: fp8, cite: [nowhere]}", `kv_default.rules[0].cite: "nowhere" is not a key of sources`},
		{"section uncited", "  cite: [kv-auto-sglang, kv-default-nsa]", "  cite: []", "kv_default.cite: missing"},
		{"unknown field", "checkpoint_methods:", "checkpoint_method:", "field checkpoint_method not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !strings.Contains(base, c.old) {
				t.Fatalf("%q not in the profile", c.old)
			}
			if err := parseEdited(base, c.old, c.new); !oneLineWith(err, c.want) || !strings.HasPrefix(err.Error(), "engine profile edited.yaml: ") {
				t.Errorf("error %v, want one line naming edited.yaml and %q", err, c.want)
			}
		})
	}
	// A section that cites a default but states none.
	vl := string(mustRead(t, "profiles/vllm-0.24.yaml"))
	if err := parseEdited(vl, "  checkpoint_methods: [modelopt]\n", ""); !oneLineWith(err, "kv_default: cites a default but states none") {
		t.Errorf("cited empty kv_default: %v", err)
	}
}
