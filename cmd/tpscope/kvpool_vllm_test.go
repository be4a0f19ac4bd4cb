package main

import (
	"encoding/json"
	"testing"
)

// TestVLLMDefaultFraction: with no --gpu-mem-util, vLLM 0.24 (the default
// engine) sizes its pool at its own default, gpu_memory_utilization 0.92
// (vLLM PR #38284, from 0.21.0; 0.9 before), and model show sizes the
// same pool predict does: it printed 0.90 and 14.57 GB of KV where predict
// said 0.92. The nightly of 0.16 keeps 0.9.
func TestVLLMDefaultFraction(t *testing.T) {
	scen := []string{"--model", "kimi-k2.5-nvfp4", "--topo", "rtxpro6000-2s", "--tp", "8", "--kv-dtype", "bf16"}
	type mem struct {
		Weight     float64 `json:"weight_bytes"`
		Activation float64 `json:"activation_bytes"`
		Tokens     int64   `json:"kv_capacity_tokens"`
		Budget     struct {
			Frac float64 `json:"frac"`
		} `json:"kv_budget"`
	}
	predict := func(extra ...string) mem {
		t.Helper()
		return predictMemory[mem](t, append(append([]string(nil), scen...), extra...)...)
	}
	const memB = 97887 << 20 // the RTX PRO 6000's memory, as nvidia-smi reports it
	for _, c := range []struct {
		engine string
		frac   float64
	}{{"vllm@0.24", 0.92}, {"vllm@0.16-nightly", 0.9}} {
		m := predict("--engine", c.engine)
		if want := int64((c.frac*memB - m.Weight - m.Activation) / 70272); m.Budget.Frac != c.frac || m.Tokens != want {
			t.Errorf("%s: %d tokens at %v, want (%v x %d - %.0f) / 70272 = %d", c.engine, m.Tokens, m.Budget.Frac, c.frac, int64(memB), m.Weight+m.Activation, want)
		}
	}
	def := predict()
	code, js, errs := runCLI(t, append(append([]string{"model", "show"}, scen...), "--output", "json")...)
	if code != 0 {
		t.Fatalf("model show: exit %d: %s", code, errs)
	}
	var s struct {
		Tokens int64   `json:"kv_capacity_tokens"`
		Frac   float64 `json:"gpu_mem_util_frac"`
	}
	if err := json.Unmarshal([]byte(js), &s); err != nil {
		t.Fatal(err)
	}
	if s.Frac != 0.92 || s.Tokens != def.Tokens {
		t.Errorf("model show: %d tokens at %v, want predict's %d at 0.92", s.Tokens, s.Frac, def.Tokens)
	}
}

// predictMemory runs predict with args and --batch 1 --output json and
// returns its memory object decoded into M, the fields a test reads.
func predictMemory[M any](t *testing.T, args ...string) M {
	t.Helper()
	args = append(append([]string{"predict"}, args...), "--batch", "1", "--output", "json")
	code, out, errs := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("%q: exit %d: %s", args, code, errs)
	}
	var p struct{ Memory M }
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatal(err)
	}
	return p.Memory
}
