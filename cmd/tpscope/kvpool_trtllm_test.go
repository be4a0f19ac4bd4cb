package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTRTLLMKVPool: under --engine trtllm, predict and model show size the
// KV pool as TensorRT-LLM does, free_gpu_memory_fraction of the memory
// the weights and activations leave: DeepSeek-V3 at TP 8 on an H200
// (143,771 MiB) holds floor(0.9 x (mem - weights - activations) / 70,272)
// tokens a GPU, where vLLM 0.24's rule holds floor((0.92 x mem - weights -
// activations) / 70,272) (its CUDA-graph estimate not given); both verbs
// say which rule, and --gpu-mem-util is that fraction.
func TestTRTLLMKVPool(t *testing.T) {
	scen := []string{"--model", "deepseek-v3", "--topo", "h200-nvswitch", "--tp", "8", "--kv-dtype", "bf16"}
	type mem struct {
		Weight     float64 `json:"weight_bytes"`
		Activation float64 `json:"activation_bytes"`
		Tokens     int64   `json:"kv_capacity_tokens"`
		Budget     struct {
			Rule string  `json:"rule"`
			Frac float64 `json:"frac"`
		} `json:"kv_budget"`
	}
	predict := func(extra ...string) mem {
		t.Helper()
		return predictMemory[mem](t, append(append([]string(nil), scen...), extra...)...)
	}
	tr, vl := predict("--engine", "trtllm"), predict("--engine", "vllm")
	if tr.Budget.Rule != "free_gpu_memory_fraction" || tr.Budget.Frac != 0.9 {
		t.Errorf("trtllm budget %+v, want free_gpu_memory_fraction 0.9", tr.Budget)
	}
	if tr.Weight != vl.Weight || tr.Activation != vl.Activation {
		t.Fatalf("weights %v / %v, activations %v / %v: the engines load the same", tr.Weight, vl.Weight, tr.Activation, vl.Activation)
	}
	wa := tr.Weight + tr.Activation
	const memB = 143771 << 20 // the H200's memory, as NVML reports it
	if want := int64(0.9 * (memB - wa) / 70272); tr.Tokens != want {
		t.Errorf("trtllm capacity %d tokens, want 0.9 x (%d - %.0f) / 70272 = %d", tr.Tokens, int64(memB), wa, want)
	}
	// vLLM 0.24's pool: 0.92 of the memory (PR #38284) less the weights
	// and activations, its CUDA-graph estimate not given.
	if want := int64((0.92*memB - wa) / 70272); vl.Tokens != want {
		t.Errorf("vllm capacity %d tokens, want (0.92 x %d - %.0f) / 70272 = %d", vl.Tokens, int64(memB), wa, want)
	}
	if g := predict("--engine", "trtllm", "--gpu-mem-util", "0.8"); g.Tokens != int64(0.8*(memB-wa)/70272) {
		t.Errorf("--gpu-mem-util 0.8 under trtllm: %d tokens, want 0.8 x (%d - %.0f) / 70272 = %d", g.Tokens, int64(memB), wa, int64(0.8*(memB-wa)/70272))
	}

	const line = "free_gpu_memory_fraction 0.9 of the memory free after weights and activations, trtllm@1.3's default"
	code, out, errs := runCLI(t, append(append([]string{"predict"}, scen...), "--batch", "1", "--engine", "trtllm")...)
	if code != 0 || !strings.Contains(out, line) {
		t.Errorf("predict --engine trtllm: exit %d %s; memory line without %q:\n%s", code, errs, line, out)
	}
	show := append([]string{"model", "show"}, scen...)
	code, out, errs = runCLI(t, append(show, "--engine", "trtllm", "--output", "json")...)
	if code != 0 {
		t.Fatalf("model show --engine trtllm: exit %d: %s", code, errs)
	}
	var s struct {
		Tokens int64  `json:"kv_capacity_tokens"`
		Pool   string `json:"kv_pool"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	if s.Tokens != tr.Tokens || !strings.Contains(s.Pool, line) {
		t.Errorf("model show --engine trtllm: %d tokens under %q, want predict's %d under %q", s.Tokens, s.Pool, tr.Tokens, line)
	}
	code, out, _ = runCLI(t, append(show, "--engine", "trtllm")...)
	if code != 0 || !strings.Contains(out, line) || !strings.Contains(out, "KV pool rule            trtllm@1.3's free_gpu_memory_fraction") {
		t.Errorf("model show --engine trtllm's table names not the rule it sized by:\n%s", out)
	}
}
