package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServingModelFromResults: the model a result names (InferenceX's
// model, vllm bench serve's model_id) is checked against the scenario's,
// as its GPU is. The DSR1 results ran nvidia/DeepSeek-R1-0528-FP4 (their
// SOURCE.md), no preset's checkpoint; the generated vLLM results ran
// deepseek-ai/DeepSeek-V3, the deepseek-v3 preset's. Without --model, the
// default (kimi-k2.5-nvfp4) is refused in one line naming the file, its
// model and the --model to pass; a --model preset of another checkpoint
// is refused naming both; the matching preset and a --model config file
// run.
func TestServingModelFromResults(t *testing.T) {
	dsr1Level := dsr1Dir + "conc64.json"
	vllmLevel := "../../serving/testdata/bench/generated/vllm-detailed.json"
	o := filepath.Join(t.TempDir(), "o.json")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"simulate, default model, checkpoint of no preset", []string{"simulate", "--compare", dsr1Level, "--topo", "nvswitch:8xb200"},
			dsr1Level + ` ran "nvidia/DeepSeek-R1-0528-FP4"; the default model is kimi-k2.5-nvfp4: pass --model with its config.json`},
		{"calibrate, default model", []string{"calibrate", "--serving", dsr1Dir + "conc16.json", "--topo", "nvswitch:8xb200", "-o", o},
			dsr1Dir + `conc16.json ran "nvidia/DeepSeek-R1-0528-FP4"; the default model is kimi-k2.5-nvfp4: pass --model`},
		{"simulate, default model, a preset's checkpoint", []string{"simulate", "--compare", vllmLevel},
			vllmLevel + ` ran "deepseek-ai/DeepSeek-V3"; the default model is kimi-k2.5-nvfp4: pass --model deepseek-v3`},
		{"simulate, another preset", []string{"simulate", "--compare", vllmLevel, "--model", "kimi-k2.5"},
			`--model kimi-k2.5: want the model the --compare results ran: ` + vllmLevel + ` ran "deepseek-ai/DeepSeek-V3", which is preset deepseek-v3`},
		{"calibrate, another preset", []string{"calibrate", "--serving", vllmLevel, "--model", "glm-5", "-o", o},
			`--model glm-5: want the model the --serving results ran: ` + vllmLevel + ` ran "deepseek-ai/DeepSeek-V3", which is preset deepseek-v3`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runCLI(t, c.args...)
			if code != 2 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", code, out, errs, c.want)
			}
		})
	}
	// The box's GPU against the results' is judged before the scenario
	// is built: on an H200 box the DSR1 results' SGLang has no kernel for
	// their NVFP4 experts, which was the message instead of the GPU.
	code, out, errs := runCLI(t, append([]string{"simulate", "--compare", dsr1Level}, withFlags(dsr1, "--topo", "h200-nvswitch")...)...)
	if want := `usage: --topo h200-nvswitch: want a box of the GPU the --compare results ran on: ` + dsr1Level + ` ran on "b200", the box has NVIDIA H200`; code != 2 || !strings.Contains(errs, want) || out != "" {
		t.Errorf("B200 results on an H200 box: exit %d, stdout %q, stderr %q; want exit 2 and %q", code, out, errs, want)
	}
	code, out, errs = runCLI(t, "simulate", "--compare", vllmLevel, "--model", "deepseek-v3", "--topo", "h200-nvswitch")
	if code != 0 || !strings.HasPrefix(out, "simulate: deepseek-v3 tp8 on h200-nvswitch") {
		t.Errorf("the results' own preset: exit %d, stderr %q, output:\n%s", code, errs, out)
	}
	code, out, errs = runCLI(t, append([]string{"simulate", "--compare", dsr1Level}, dsr1...)...)
	if code != 0 || !strings.HasPrefix(out, "simulate: ../../serving/testdata/models/deepseek-r1-0528-fp4 tp8-ep") {
		t.Errorf("a --model config of the results' checkpoint: exit %d, stderr %q, output:\n%s", code, errs, out)
	}
}

// TestServingDefaultsNamed: results that name no model and no GPU
// (LLMServingSim's request log, measured with Qwen3-30B on 2 GPUs) are
// priced on the default model and box, and the output says so in one
// line, naming what it priced and the flags that name others; a --model
// or --topo given leaves only the other default said; both given, or
// results that name both (the InferenceX DSR1 files), say nothing.
func TestServingDefaultsNamed(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"neither", []string{"--compare", qwenLog},
			"the results name no model and no GPU: priced as the default model kimi-k2.5-nvfp4 on the default box rtxpro6000-2s (--model and --topo name the ones they ran)"},
		{"--model given", []string{"--compare", qwenLog, "--model", "kimi-k2.5"},
			"the results name no GPU: priced on the default box rtxpro6000-2s (--topo names the one they ran)"},
		{"--topo given", []string{"--compare", qwenLog, "--topo", "h200-nvswitch"},
			"the results name no model: priced as the default model kimi-k2.5-nvfp4 (--model names the one they ran)"},
		{"both given", []string{"--compare", qwenLog, "--model", "kimi-k2.5", "--topo", "h200-nvswitch"}, ""},
		{"named by the results", append([]string{"--compare", dsr1Dir + "conc16.json"}, dsr1...), ""},
		// A checkpoint no preset is of, priced as the --model preset the
		// user named: not refused (resultsModel does not judge it), but
		// said, where nothing had said it.
		{"a preset for a checkpoint of none", []string{"--compare", dsr1Dir + "conc16.json", "--model", "deepseek-v3", "--topo", "nvswitch:8xb200"},
			`the results ran "nvidia/DeepSeek-R1-0528-FP4", which is no preset's checkpoint: priced as preset deepseek-v3, as --model names it (--model with the checkpoint's config.json prices the checkpoint itself)`},
	} {
		code, out, errs := runCLI(t, append([]string{"simulate", "--output", "json"}, c.args...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, errs)
		}
		var res struct {
			DefaultsNote string `json:"defaults_note"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		if res.DefaultsNote != c.want {
			t.Errorf("%s: note %q, want %q", c.name, res.DefaultsNote, c.want)
		}
	}
}

// TestServingResultsOfOneModel: results of two models (or two GPUs) are
// refused in one line naming both files and what each ran, as results of
// two engines or plans are: one scenario prices every level. On 601a891 a
// --model config file (not judged against a checkpoint's name) priced
// InferenceX's DeepSeek-R1 level and its GLM-5 level as the one model,
// under the engine and plan the first file recorded.
func TestServingResultsOfOneModel(t *testing.T) {
	dir := t.TempDir()
	glm := "../../serving/testdata/bench/inferencex-glm5-fp8-vllm-tp8-tokenpos/results/glm5_fp8_vllm_tp8_isl1024_osl128_conc4.json"
	// The DSR1 level as run on another GPU: the box is not judged
	// against a GPU name the catalog does not know, two names are.
	data, err := os.ReadFile(dsr1Dir + "conc16.json")
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other-gpu.json")
	if err := os.WriteFile(other, []byte(strings.Replace(string(data), `"hw": "b200"`, `"hw": "mi355x"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	o := filepath.Join(dir, "o.json")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"simulate, two models", append([]string{"simulate", "--compare", dsr1Dir + "conc64.json", "--compare", glm}, dsr1...),
			`--compare: want results of one model: ` + dsr1Dir + `conc64.json ran "nvidia/DeepSeek-R1-0528-FP4" and ` + glm + ` ran "zai-org/GLM-5-FP8"`},
		{"calibrate, two models", append([]string{"calibrate", "--serving", glm, "--serving", dsr1Dir + "conc64.json", "-o", o}, dsr1...),
			`--serving: want results of one model: ` + glm + ` ran "zai-org/GLM-5-FP8" and ` + dsr1Dir + `conc64.json ran "nvidia/DeepSeek-R1-0528-FP4"`},
		{"simulate, two GPUs", append([]string{"simulate", "--compare", other, "--compare", dsr1Dir + "conc64.json"}, dsr1...),
			`--compare: want results of one GPU: ` + other + ` ran "mi355x" and ` + dsr1Dir + `conc64.json ran "b200"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runCLI(t, c.args...)
			if code != 2 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", code, out, errs, c.want)
			}
		})
	}
}
