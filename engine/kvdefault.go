package engine

import (
	"fmt"
	"slices"
	"strings"
)

// KVDefaultFacts are the KV-cache dtype the engine runs when the user
// names none (its --kv-cache-dtype auto). A profile that states none
// runs tpscope's rule (model.Workload.KVDtypeFor): the checkpoint's KV
// scheme (kv_cache_quant_algo / kv_cache_scheme), else the model's dtype.
type KVDefaultFacts struct {
	// CheckpointMethods are the checkpoint quantization methods
	// (quant_method, model.Quant.Method's spellings) whose KV scheme
	// 'auto' takes; a scheme under another method is ignored and the
	// cache keeps the model's dtype. None: every method's.
	CheckpointMethods []string `yaml:"checkpoint_methods"`
	// Rules decide before the checkpoint, the first that holds: the
	// engine sets the dtype itself (SGLang for a DSA model), whatever
	// the checkpoint's scheme.
	Rules []KVDefaultRule `yaml:"rules"`
	Cite  []string        `yaml:"cite"`
}

// KVDefaultRule is one engine default: the KV dtype on the families
// Archs, for a DSA model only when DSA is set (else for every model).
type KVDefaultRule struct {
	DSA   bool     `yaml:"dsa"`
	Archs ArchSet  `yaml:"archs"`
	KV    KVDtype  `yaml:"kv"`
	Cite  []string `yaml:"cite"`
}

// checkpointMethods are the quant_method values a checkpoint's KV scheme
// can come with (model.Quant.Method: the methods model parses).
var checkpointMethods = []string{"fp8", "compressed-tensors", "modelopt"}

// KVDefaultUse is what the engine's default KV dtype depends on: the
// box's family, whether the model has a DSA indexer, and the checkpoint's
// KV scheme (Scheme: it names one) and quantization method.
type KVDefaultUse struct {
	Arch   Arch
	DSA    bool
	Scheme bool
	Method string
}

// KVChoice is how the engine picks the KV dtype of a use: by Rule (nil:
// none holds), or, with no rule, by ignoring the checkpoint's scheme
// (IgnoresScheme: its method is not one 'auto' takes, so the cache keeps
// the model's dtype). The zero KVChoice is tpscope's rule: the
// checkpoint's scheme, else the model's dtype.
type KVChoice struct {
	Rule          *KVDefaultRule
	IgnoresScheme bool
}

// KVDefault is the engine's choice of KV dtype for u.
func (p *Profile) KVDefault(u KVDefaultUse) KVChoice {
	for i := range p.KVDefaults.Rules {
		r := &p.KVDefaults.Rules[i]
		if (!r.DSA || u.DSA) && r.Archs.Has(u.Arch) {
			return KVChoice{Rule: r}
		}
	}
	ms := p.KVDefaults.CheckpointMethods
	return KVChoice{IgnoresScheme: u.Scheme && len(ms) > 0 && !slices.Contains(ms, u.Method)}
}

// validateKVDefault checks kv_default: known methods named once, every
// rule with families, a dtype and a source, the section cited.
func (p *Profile) validateKVDefault(bad func(string, string, ...any) error, cite func(string, []string) error) error {
	k := &p.KVDefaults
	if len(k.CheckpointMethods) == 0 && len(k.Rules) == 0 && len(k.Cite) == 0 {
		return nil
	}
	if len(k.CheckpointMethods) == 0 && len(k.Rules) == 0 {
		return bad("kv_default", "cites a default but states none: want checkpoint_methods or rules")
	}
	for i, m := range k.CheckpointMethods {
		f := fmt.Sprintf("kv_default.checkpoint_methods[%d]", i)
		if !slices.Contains(checkpointMethods, m) {
			return bad(f, "%q: want one of %s", m, strings.Join(checkpointMethods, ", "))
		}
		if slices.Contains(k.CheckpointMethods[:i], m) {
			return bad(f, "%q is named twice: name each method once", m)
		}
	}
	if err := cite("kv_default", k.Cite); err != nil {
		return err
	}
	for i, r := range k.Rules {
		f := fmt.Sprintf("kv_default.rules[%d]", i)
		if len(r.Archs) == 0 {
			return bad(f+".archs", "missing: want the families the default holds on")
		}
		if r.KV == KVUnknown {
			return bad(f+".kv", "missing: want bf16 or fp8, the dtype the engine sets")
		}
		if err := cite(f, r.Cite); err != nil {
			return err
		}
	}
	return nil
}
