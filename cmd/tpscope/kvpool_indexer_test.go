package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestIndexerWorkspaceDeduction: vLLM 0.24's profiling run reserves a DSA
// model's indexer K-gather workspace of 40 x max_model_len entries of
// index_head_dim + 4 bytes (get_max_prefill_buffer_size,
// _gather_workspace_shapes) and keeps it, so its pool is that much smaller
// and shrinks with --max-model-len: GLM-5 (index_head_dim 128) at its
// 202,752 against 65,536 is 40 x 137,216 x 132 B more activations and that
// many bytes fewer in the pool. Run dense (no indexer) or under SGLang,
// whose pool leaves the activations to its reserve, nothing moves.
func TestIndexerWorkspaceDeduction(t *testing.T) {
	type mem struct {
		Activation float64 `json:"activation_bytes"`
		PerToken   float64 `json:"kv_bytes_per_token"`
		Tokens     int64   `json:"kv_capacity_tokens"`
	}
	run := func(scen []string, extra ...string) mem {
		t.Helper()
		return predictMemory[mem](t, append(append(append([]string(nil), scen...), "--cuda-graph-mem-gib", "0"), extra...)...)
	}
	predict := func(extra ...string) mem { t.Helper(); return run(kvGraphScen, extra...) }
	const perEntryB = 128 + 4
	full, short := predict(), predict("--max-model-len", "65536")
	if same := predict("--max-model-len", "202752"); same != full {
		t.Errorf("--max-model-len 202752, GLM-5's own: %+v, want the default's %+v", same, full)
	}
	diff := 40.0 * (202752 - 65536) * perEntryB
	if got := full.Activation - short.Activation; got != diff {
		t.Errorf("activations at max_model_len 202,752 less at 65,536: %.0f B, want 40 x 137,216 x 132 = %.0f", got, diff)
	}
	// The pool is the same fraction less the workspace: the two counts of
	// tokens differ by the workspace's difference in tokens, to one token
	// each way for the floor.
	if got, want := float64(short.Tokens-full.Tokens), diff/full.PerToken; got < want-1 || got > want+1 {
		t.Errorf("pool at 65,536 less at 202,752: %.0f tokens, want %.1f (the workspace's difference / %.0f B a token)", got, want, full.PerToken)
	}
	denseScen := append([]string{}, kvGraphScen[:len(kvGraphScen)-1]...)
	if kvGraphScen[len(kvGraphScen)-1] != "--dense-dsa=false" {
		t.Fatalf("kvGraphScen %q: want --dense-dsa=false last", kvGraphScen)
	}
	dense := func(extra ...string) mem { return run(append(denseScen, "--dense-dsa=true"), extra...) }
	if d, ds := dense(), dense("--max-model-len", "65536"); d != ds || d.Activation >= full.Activation {
		t.Errorf("dense DSA: %+v at 202,752, %+v at 65,536; want the same, with less activation than sparse (%.0f B): no indexer runs", d, ds, full.Activation)
	}
	// On an H200 the NVFP4 experts run on Marlin, whose intermediate
	// caches share the workspace buffer: the buffer is the larger of the
	// two, so only the indexer's part above the routed caches (8,192 x
	// top-8 x (6,144 + 2 x 2,048 / 8) x 2 B) comes on top, and at 65,536
	// tokens none does.
	h200 := []string{"--model", "glm-5-nvfp4", "--topo", "h200-nvswitch", "--tp", "8", "--kv-dtype", "fp8", "--dense-dsa=false"}
	routed := 8192.0 * 8 * (6144 + 2*2048/8) * 2
	hFull, hShort := run(h200), run(h200, "--max-model-len", "65536")
	if got, want := hFull.Activation-hShort.Activation, 40*202752*perEntryB-routed; got != want {
		t.Errorf("H200 (Marlin MoE, shared buffer): activations at 202,752 less at 65,536: %.0f B, want the indexer's 40 x 202,752 x 132 less the routed caches' %.0f = %.0f", got, routed, want)
	}
	sg := func(extra ...string) mem {
		t.Helper()
		return predictMemory[mem](t, append(append([]string{"--engine", "sglang"}, kvGraphScen...), extra...)...)
	}
	if a, b := sg(), sg("--max-model-len", "65536"); a != b {
		t.Errorf("sglang: %+v at 202,752, %+v at 65,536; want the same pool", a, b)
	}
}

// TestModelShowMaxModelLen: model show sizes the pool at the
// --max-model-len given, as predict does (the indexer workspace 40 x
// 65,536 x 132 B for GLM-5), and its max context line says which
// max_model_len that is.
func TestModelShowMaxModelLen(t *testing.T) {
	show := func(extra ...string) (string, float64) {
		t.Helper()
		args := append([]string{"model", "show", "glm-5-nvfp4", "--topo", "rtxpro6000-2s", "--tp", "8", "--kv-dtype", "fp8", "--dense-dsa=false", "--cuda-graph-mem-gib", "0"}, extra...)
		code, out, errs := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errs)
		}
		code, js, errs := runCLI(t, append(args, "--output", "json")...)
		if code != 0 {
			t.Fatalf("%q --output json: exit %d: %s", args, code, errs)
		}
		var s struct {
			Activation float64 `json:"activation_bytes"`
		}
		if err := json.Unmarshal([]byte(js), &s); err != nil {
			t.Fatal(err)
		}
		return out, s.Activation
	}
	out, short := show("--max-model-len", "65536")
	_, full := show()
	if want := "max context   65536 tokens (--max-model-len; the model's is 202752"; !strings.Contains(out, want) {
		t.Errorf("model show --max-model-len 65536 does not say %q:\n%s", want, out)
	}
	if got, want := full-short, 40.0*(202752-65536)*(128+4); got != want {
		t.Errorf("model show activations at 202,752 less at 65,536: %.0f B, want %.0f", got, want)
	}
}

// TestMaxModelLenRefused: --max-model-len is refused negative, above the
// model's own (vLLM refuses a max_model_len above the one it derives) and
// below the context, which the engine would then not serve; and where it
// would price nothing: on run and verdict (the step's own KV cache) and
// over a trace (the traced step held its own).
func TestMaxModelLenRefused(t *testing.T) {
	p := func(extra ...string) []string {
		return append(append([]string{"predict"}, kvGraphScen...), extra...)
	}
	checkUsageErrors(t, []usageCase{
		{"negative", p("--max-model-len", "-1"), "--max-model-len -1: want tokens > 0"},
		{"above the model's", p("--max-model-len", "202753"), "--max-model-len 202753: above the 202752 tokens"},
		{"below the context", p("--max-model-len", "2048", "--context", "4096"), "--max-model-len 2048: shorter than the --context 4096"},
		{"not a number", p("--max-model-len", "long"), "--max-model-len"},
		{"run", []string{"run", "--max-model-len", "4096"}, "--max-model-len 4096: run and verdict allocate the measured step's KV cache"},
		{"compare over a trace", []string{"compare", "--trace", "../../exec/cuda/testdata/h200/h200-kimi-k2.5-tp8-rank0-eager.otlp.jsonl.gz", "--max-model-len", "4096"},
			"--max-model-len 4096: compare, calibrate --trace and report --trace price the steps a trace measured"},
	})
}
