package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/sim"
)

// showPoolCase is one scenario model show and predict both size a KV
// pool for: the engine, model, box and pool flags.
type showPoolCase struct {
	engine, model, topo string
	flags               []string
}

// checkShowIsPredict runs predict and model show on the same flags and
// wants the same pool from both: the KV budget (rule, fraction, where it
// came from, profiling step) and the capacity of the selected KV dtype,
// predict's own memory line being the reference; and the engine named.
func checkShowIsPredict(t *testing.T, c showPoolCase) {
	t.Helper()
	args := append([]string{"--engine", c.engine, "--model", c.model, "--topo", c.topo, "--output", "json"}, c.flags...)
	code, out, errs := runCLI(t, append([]string{"predict"}, args...)...)
	if code != 0 {
		t.Errorf("predict %q: exit %d: %s", args, code, errs)
		return
	}
	var pr struct {
		Memory struct {
			Tokens int64        `json:"kv_capacity_tokens"`
			Budget sim.KVBudget `json:"kv_budget"`
		} `json:"memory"`
	}
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatalf("predict %q: %v", args, err)
	}
	code, out, errs = runCLI(t, append([]string{"model", "show"}, args...)...)
	if code != 0 {
		t.Errorf("model show %q: exit %d: %s", args, code, errs)
		return
	}
	var sh struct {
		Tokens int64         `json:"kv_capacity_tokens"`
		Engine string        `json:"engine"`
		Budget *sim.KVBudget `json:"kv_budget"`
	}
	if err := json.Unmarshal([]byte(out), &sh); err != nil {
		t.Fatalf("model show %q: %v", args, err)
	}
	if pr.Memory.Tokens <= 0 || sh.Tokens != pr.Memory.Tokens {
		t.Errorf("%q: model show's KV capacity %d tokens, predict's %d", args, sh.Tokens, pr.Memory.Tokens)
	}
	if sh.Budget == nil || !reflect.DeepEqual(*sh.Budget, pr.Memory.Budget) {
		t.Errorf("%q: model show's KV budget %+v, predict's %+v", args, sh.Budget, pr.Memory.Budget)
	}
	if sh.Engine == "" || sh.Engine[:4] != c.engine[:4] {
		t.Errorf("%q: model show names engine %q", args, sh.Engine)
	}
}

// TestModelShowPoolOfVLLMEngines: model show shows the KV pool of the
// engine --engine names, the one predict's memory line gives for the same
// flags, for each vLLM (gpu_memory_utilization 0.92 for 0.24, vLLM's 0.9
// for the nightly, whose profile states none and takes no CUDA-graph
// estimate) and every model, DSA or not: the nightly on a model without
// DSA attention had been refused as changing nothing shown.
func TestModelShowPoolOfVLLMEngines(t *testing.T) {
	var cases []showPoolCase
	for _, e := range []string{"vllm@0.24", "vllm@0.16-nightly"} {
		for _, m := range []string{"kimi-k2.5-nvfp4", "glm-5-nvfp4", "deepseek-v3"} {
			for _, topo := range []string{"rtxpro6000-switch", "h200-nvswitch"} {
				cases = append(cases, showPoolCase{e, m, topo, nil})
			}
			for _, f := range [][]string{
				{"--gpu-mem-util", "0.88"},
				{"--max-num-batched-tokens", "4096"},
				{"--max-model-len", "32768", "--max-num-seqs", "64"},
			} {
				cases = append(cases, showPoolCase{e, m, "rtxpro6000-switch", f})
			}
		}
	}
	cases = append(cases, showPoolCase{"vllm@0.24", "glm-5-nvfp4", "rtxpro6000-switch", []string{"--cuda-graph-mem-gib", "4.77"}})
	for _, c := range cases {
		checkShowIsPredict(t, c)
	}
}

// TestModelShowPoolOfOtherRules: model show sizes SGLang's pool as
// predict does, its default mem_fraction_static from the step budget,
// the largest captured batch, the ranks and the drafter (before, it showed
// vLLM's gpu_memory_utilization pool for a DSA model, 703,697 fp8 tokens of
// GLM-5-NVFP4 on rtxpro6000-switch where predict gives 628,519, and
// refused the engine for another model), and TensorRT-LLM's and the
// executor's, for every model the engine runs on the box, and names the
// engine's rule.
func TestModelShowPoolOfOtherRules(t *testing.T) {
	var cases []showPoolCase
	for _, m := range []string{"kimi-k2.5-nvfp4", "glm-5-nvfp4", "deepseek-v3"} {
		for _, topo := range []string{"rtxpro6000-switch", "h200-nvswitch"} {
			cases = append(cases, showPoolCase{"executor", m, topo, nil})
		}
		for _, f := range [][]string{nil, {"--gpu-mem-util", "0.88"}, {"--max-num-batched-tokens", "4096"}} {
			cases = append(cases, showPoolCase{"sglang@0.5", m, "rtxpro6000-switch", f})
		}
	}
	cases = append(cases,
		// DP attention and a drafter enter SGLang's reserve; on SM90 it
		// runs the FP8 model.
		showPoolCase{"sglang@0.5", "glm-5-nvfp4", "rtxpro6000-switch", []string{"--tp", "4", "--dp", "2", "--ep"}},
		showPoolCase{"sglang@0.5", "glm-5-nvfp4", "rtxpro6000-switch", []string{"--spec", "mtp", "--spec-tokens", "2"}},
		showPoolCase{"sglang@0.5", "deepseek-v3", "h200-nvswitch", nil},
		showPoolCase{"trtllm@1.3", "deepseek-v3", "h200-nvswitch", nil},
		showPoolCase{"trtllm@1.3", "deepseek-v3", "h200-nvswitch", []string{"--gpu-mem-util", "0.8"}})
	for _, c := range cases {
		checkShowIsPredict(t, c)
	}
	// The table says whose rule it is, not vLLM's utilization.
	code, out, errs := runCLI(t, "model", "show", "--engine", "sglang@0.5", "--model", "glm-5-nvfp4", "--topo", "rtxpro6000-switch")
	if code != 0 || !strings.Contains(out, "KV pool rule      sglang@0.5's mem_fraction_static: ") || strings.Contains(out, "utilization") {
		t.Errorf("model show --engine sglang@0.5: exit %d %s; the table names not SGLang's rule:\n%s", code, errs, out)
	}
}

// TestModelShowGraphSizesOfSGLangPool: SGLang's default mem_fraction_static
// reserves for its largest captured batch (cuda_graph_max_bs), so
// --graph-sizes sizes the pool predict's memory line gives (356,697 fp8
// tokens for kimi-k2.5-nvfp4 on rtxpro6000-2s with graphs to batch 2,
// 324,563 to the default 512); model show refused the flag as changing
// nothing it shows, and could not give that capacity. A pool no capture
// size enters (vLLM's, a fraction given) still refuses it.
func TestModelShowGraphSizesOfSGLangPool(t *testing.T) {
	checkShowIsPredict(t, showPoolCase{"sglang@0.5", "kimi-k2.5-nvfp4", "rtxpro6000-2s", []string{"--graph-sizes", "1,2"}})
	checkUsageErrors(t, []usageCase{
		{"vllm", []string{"model", "show", "--graph-sizes", "1,2"}, "--graph-sizes 1+2: vllm@0.24's KV pool is gpu_memory_utilization 0.92"},
		{"sglang-fraction", []string{"model", "show", "--engine", "sglang@0.5", "--gpu-mem-util", "0.8", "--graph-sizes", "1,2"}, "--graph-sizes 1+2: sglang@0.5's KV pool is mem_fraction_static 0.8, given, which no capture size enters"},
	})
}
