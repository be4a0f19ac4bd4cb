package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModelShowJSON checks the JSON contract of `model show` against
// figures derived by hand (see model/memory_test.go for the derivations):
// Kimi-K2.5 1,026,408,232,448 parameters, 32,861,500,928 active; MLA KV
// 576 x 61 x 2 = 70,272 B/token/GPU in bf16, 35,136 in fp8, divided by 8
// under DCP 8.
func TestModelShowJSON(t *testing.T) {
	cases := []struct {
		name           string
		args           []string
		bf16, fp8      float64
		total, active  float64
		kvDtype        string
		capacityPosite bool
	}{
		{"default tp8", []string{"model", "show", "--output", "json"}, 70272, 35136, 1026408232448, 32861500928, "fp8", true},
		{"positional dcp8 bf16", []string{"model", "show", "kimi-k2.5-nvfp4", "--dcp", "8", "--kv-dtype", "bf16", "--output", "json"}, 70272.0 / 8, 35136.0 / 8, 1026408232448, 32861500928, "bf16", true},
		{"tp1 does not fit", []string{"model", "show", "--model", "kimi-k2.5", "--tp", "1", "--output", "json"}, 70272, 35136, 1026408232448, 32861500928, "bf16", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runCLI(t, c.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var s struct {
				ParamsTotal      float64            `json:"params_total"`
				ParamsActive     float64            `json:"params_active"`
				KV               map[string]float64 `json:"kv_bytes_per_token"`
				WeightBytes      float64            `json:"weight_bytes_per_gpu"`
				KVCapacityTokens int64              `json:"kv_capacity_tokens"`
				KVDtype          string             `json:"kv_dtype"`
			}
			if err := json.Unmarshal([]byte(out), &s); err != nil {
				t.Fatal(err)
			}
			if s.KV["bf16"] != c.bf16 || s.KV["fp8"] != c.fp8 || s.KVDtype != c.kvDtype {
				t.Errorf("kv %v (%s), want bf16 %g fp8 %g (%s)", s.KV, s.KVDtype, c.bf16, c.fp8, c.kvDtype)
			}
			if s.ParamsTotal != c.total || s.ParamsActive != c.active {
				t.Errorf("params %g / %g", s.ParamsTotal, s.ParamsActive)
			}
			if s.WeightBytes <= 0 || (s.KVCapacityTokens > 0) != c.capacityPosite {
				t.Errorf("weights %g capacity %d", s.WeightBytes, s.KVCapacityTokens)
			}
		})
	}
}

// TestScheduleOutputs: json has an ops array with the contract fields, and
// Kimi-K2.5 at TP 8, batch 4 has 123 all-reduces of 4 x 14,336 B on rank 0
// (serving-facts.md); csv has the same number of rows.
func TestScheduleOutputs(t *testing.T) {
	code, out, errs := runCLI(t, "schedule", "--batch", "4", "--context", "1024", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc struct {
		Ranks int              `json:"ranks"`
		Ops   []map[string]any `json:"ops"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	ar := 0
	for _, op := range doc.Ops {
		for _, k := range []string{"id", "kind", "flops", "bytes", "comm_bytes", "rank"} {
			if _, ok := op[k]; !ok {
				t.Fatalf("op %v lacks %q", op, k)
			}
		}
		if op["collective"] == "allreduce" && op["comm_bytes"].(float64) == 4*14336 {
			ar++
		}
	}
	if doc.Ranks != 8 || ar != 123 {
		t.Errorf("ranks %d, all-reduces %d, want 8 and 123", doc.Ranks, ar)
	}
	code, out, _ = runCLI(t, "schedule", "--batch", "4", "--context", "1024", "--output", "csv")
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if code != 0 || err != nil || len(rows) != len(doc.Ops)+1 {
		t.Errorf("csv: exit %d err %v rows %d, want %d", code, err, len(rows), len(doc.Ops)+1)
	}
	code, out, _ = runCLI(t, "schedule", "--model", "tiny-mla-moe", "--tp", "4", "--rank", "-1")
	if code != 0 || !strings.Contains(out, "L03.moe.allreduce") || !strings.Contains(out, "total") {
		t.Errorf("table: exit %d\n%s", code, out)
	}
}

// TestModelVerbErrors: bad flags are usage errors (exit 2); a malformed
// config is an error naming the file and field (exit 1).
func TestModelVerbErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "config.json")
	if err := os.WriteFile(bad, []byte(`{"model_type": "deepseek_v3", "hidden_size": 7168}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"tp not dividing heads", []string{"schedule", "--tp", "3"}, 2, `--tp 3: want a divisor of num_attention_heads (64)`},
		{"unknown model", []string{"model", "show", "--model", "llama-7b"}, 2, `unknown model "llama-7b"`},
		{"bad output", []string{"model", "show", "--output", "xml"}, 2, `--output "xml"`},
		{"bad kv dtype", []string{"schedule", "--kv-dtype", "int3"}, 2, `--kv-dtype "int3": want bf16, fp16 or fp8`},
		{"dp without ep", []string{"schedule", "--tp", "1", "--dp", "8"}, 2, "needs expert parallelism"},
		{"experts vs ep ranks", []string{"schedule", "--model", "deepseek-v3", "--tp", "1", "--dp", "3", "--ep"}, 2, "n_routed_experts (256) divisible"},
		{"malformed config", []string{"model", "load", dir}, 1, `config.json: field "num_hidden_layers": missing, want a positive integer`},
		{"load needs an argument", []string{"model", "load"}, 2, "one DIR_OR_FILE"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errs := runCLI(t, c.args...)
			if code != c.code || !strings.Contains(errs, c.msg) {
				t.Errorf("exit %d stderr %q, want %d containing %q", code, errs, c.code, c.msg)
			}
		})
	}
}

// TestModelLoadReference loads a real config directory layout: GLM-5's
// config.json with NVIDIA's hf_quant_config.json beside it.
func TestModelLoadReference(t *testing.T) {
	ref := "../../../shared/reference/configs"
	cfg, err1 := os.ReadFile(filepath.Join(ref, "zai-org--GLM-5_config.json"))
	quant, err2 := os.ReadFile(filepath.Join(ref, "nvidia--GLM-5-NVFP4_hf_quant_config.json"))
	if err1 != nil || err2 != nil {
		t.Skip("reference configs not available")
	}
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644)
	_ = os.WriteFile(filepath.Join(dir, "hf_quant_config.json"), quant, 0o644)
	type summary struct {
		KV    map[string]float64 `json:"kv_bytes_per_token"`
		Quant map[string]string  `json:"quant"`
	}
	load := func(args ...string) summary {
		t.Helper()
		code, out, errs := runCLI(t, append([]string{"model", "load", dir, "--output", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		var s summary
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	// On an H200 box DSA runs sparse: 78 x (576 x 2 + 132 indexer) =
	// 100,152 B per token in bf16; in fp8 the sparse kernels' scaled
	// layout (512 FP8 + 4 x 4 scale + 64 x 2 RoPE = 656 B a layer):
	// 78 x (656 + 132) = 61,464.
	if s := load("--topo", "h200-nvswitch"); s.KV["bf16"] != 100152 || s.KV["fp8"] != 61464 || s.Quant["routed_experts"] != "nvfp4" || s.Quant["kv_cache"] != "fp8" {
		t.Errorf("h200: kv %v quant %v", s.KV, s.Quant)
	}
	// On the default SM120 box its engines run it dense, with no indexer
	// cache: 78 x 576 x 2 = 89,856 B and 78 x 576 = 44,928.
	if s := load(); s.KV["bf16"] != 89856 || s.KV["fp8"] != 44928 {
		t.Errorf("SM120: kv %v, want the dense-MLA cache", s.KV)
	}
}

// TestModelLoadSourceNamesQuantFile: model load's source line says which
// file set the quantization: GLM-5's config.json has no
// quantization_config, so the hf_quant_config.json beside it decides, in
// the text and in the JSON's quant_source.
func TestModelLoadSourceNamesQuantFile(t *testing.T) {
	ref := "../../../shared/reference/configs"
	cfg, err1 := os.ReadFile(filepath.Join(ref, "zai-org--GLM-5_config.json"))
	quant, err2 := os.ReadFile(filepath.Join(ref, "nvidia--GLM-5-NVFP4_hf_quant_config.json"))
	if err1 != nil || err2 != nil {
		t.Skip("reference configs not available")
	}
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644)
	qpath := filepath.Join(dir, "hf_quant_config.json")
	_ = os.WriteFile(qpath, quant, 0o644)
	code, out, errs := runCLI(t, "model", "load", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := "source        " + dir + "; quantization from quantization of " + qpath + "\n"
	if !strings.Contains(out, want) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	code, out, errs = runCLI(t, "model", "load", dir, "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var s struct {
		QuantSource string `json:"quant_source"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if s.QuantSource != "quantization of "+qpath {
		t.Errorf("quant_source %q, want %q", s.QuantSource, "quantization of "+qpath)
	}
}

// TestModelShowSaysDefaults: a config that leaves out
// num_nextn_predict_layers and max_position_embeddings says so on a
// defaults line with the values used (transformers' DeepseekV3Config: no
// MTP layer, 4096 positions), and its max context is that 4096.
func TestModelShowSaysDefaults(t *testing.T) {
	cfg := `{"model_type": "deepseek_v3", "hidden_size": 256, "num_hidden_layers": 4, "first_k_dense_replace": 1,
		"num_attention_heads": 8, "q_lora_rank": 128, "kv_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
		"v_head_dim": 32, "intermediate_size": 512, "moe_intermediate_size": 128, "n_routed_experts": 16,
		"n_shared_experts": 1, "num_experts_per_tok": 4, "vocab_size": 1024}`
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "model", "load", path, "--tp", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{
		"defaults      absent from the config, set to its class's default: num_nextn_predict_layers = 0 (transformers' DeepseekV3Config), max_position_embeddings = 4096 (transformers' DeepseekV3Config)\n",
		"max context   4096 tokens",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestKVDtypeHelpNamesAccepted: --kv-dtype's help lists what it takes
// (fp16 included), on the scenario verbs and on plan.
func TestKVDtypeHelpNamesAccepted(t *testing.T) {
	for _, verb := range []string{"predict", "plan"} {
		code, out, _ := runCLI(t, verb, "--help")
		if code != 0 {
			t.Fatalf("%s --help: exit %d", verb, code)
		}
		var line string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "--kv-dtype ") {
				line = l
			}
		}
		if !strings.Contains(line, "bf16, fp16 or fp8") {
			t.Errorf("%s --help: --kv-dtype does not list bf16, fp16 or fp8", verb)
		}
	}
}

// TestModelShowRefusesUnusedFlags: model show prices no step, so the flags
// of a step (workload, kernels, collectives, cost tables) change nothing
// it prints and are refused naming the flag; --engine, whose KV-pool rule
// sizes the capacity shown (TestModelShowPoolOfVLLMEngines,
// TestModelShowPoolOfOtherRules), and the flags it does use pass.
func TestModelShowRefusesUnusedFlags(t *testing.T) {
	const why = "model show prices no step"
	db := t.TempDir()
	checkUsageErrors(t, []usageCase{
		{"batch", []string{"model", "show", "--batch", "8"}, "--batch 8: " + why},
		{"context", []string{"model", "show", "--context", "8K"}, "--context 8192: " + why},
		{"phase", []string{"model", "show", "--phase", "prefill"}, "--phase prefill: " + why},
		{"nccl-proto", []string{"model", "show", "--nccl-proto", "LL"}, "--nccl-proto LL: " + why},
		{"perf-db", []string{"model", "show", "--perf-db", db}, "--perf-db " + db + ": " + why},
		{"moe-routing", []string{"model", "show", "--moe-routing", "balanced"}, "--moe-routing balanced: " + why},
	})
	for _, args := range [][]string{
		{"model", "show", "glm-5", "--engine", "sglang"},
		{"model", "show", "glm-5", "--dense-dsa", "--engine", "sglang"},
		{"model", "show", "--engine", "sglang"},
		{"model", "show", "glm-5", "--dense-dsa", "--kv-dtype", "bf16", "--engine", "sglang"},
		{"model", "show", "--gpu-mem-util", "0.8", "--kv-dtype", "bf16", "--topo", "h200-nvswitch", "--gpus", "8"},
	} {
		code, out, errs := runCLI(t, args...)
		if code != 0 {
			t.Errorf("%q: exit %d: %s", args, code, errs)
		}
		// The capacity shown is the engine's rule, named.
		rule := "vllm@0.24's gpu_memory_utilization: "
		if args[len(args)-1] == "sglang" {
			rule = "sglang@0.5's mem_fraction_static: "
		}
		if !strings.Contains(out, rule) {
			t.Errorf("%q: the table names not the rule %q:\n%s", args, rule, out)
		}
	}
}
