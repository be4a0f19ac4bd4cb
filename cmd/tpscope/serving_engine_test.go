package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestServingEngineFromResults: the run the results measured is the
// serving scenario. The InferenceX DeepSeek-R1 results name SGLang
// (framework "sglang") and the B200 (hw "b200"): without --engine they
// are priced and scheduled as SGLang (its kernels, its prefill-first
// policy) and the output says so; --engine vllm overrides them and is
// named; a policy other than the engine's, the executor (which serves
// no requests), a box of another GPU and results of two engines are one
// line each, before any work; calibrate --serving follows the same rule.
func TestServingEngineFromResults(t *testing.T) {
	level := dsr1Dir + "conc16.json"
	code, out, errs := runCLI(t, append([]string{"simulate", "--compare", level}, dsr1...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"cuda-graphs engine=sglang\n", "engine: sglang policy", "engine sglang@0.5: recorded in the results (\"sglang\" in " + level + ")"} {
		if !strings.Contains(out, want) {
			t.Errorf("simulate of SGLang's results: output lacks %q:\n%s", want, out)
		}
	}
	code, out, errs = runCLI(t, append([]string{"simulate", "--engine", "vllm", "--compare", level}, dsr1...)...)
	if code != 0 || !strings.Contains(out, "engine: vllm policy") ||
		!strings.Contains(out, "engine recorded in the results: sglang (\"sglang\" in "+level+"); overridden by --engine vllm") {
		t.Errorf("--engine vllm over SGLang's results: exit %d, stderr %q, output:\n%s", code, errs, out)
	}

	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"another engine's policy", []string{"simulate", "--policy", "vllm", "--compare", level},
			"--policy vllm: want sglang@0.5's own scheduler, sglang"},
		{"a policy without its engine", []string{"simulate", "--policy", "sglang", "--concurrency", "4"},
			"--policy sglang: want vllm@0.24's own scheduler, vllm"},
		{"SGLang's receive interval under vLLM", []string{"simulate", "--engine", "vllm", "--scheduler-recv-interval", "30", "--concurrency", "4"},
			"--scheduler-recv-interval 30: want 0 or 1 under vllm@0.24: SGLang's option"},
		{"a negative stream interval", []string{"simulate", "--stream-interval", "-3", "--compare", level},
			"--stream-interval -3: want a count of steps or tokens"},
		{"the executor", []string{"simulate", "--engine", "executor", "--concurrency", "4"},
			"--engine executor@1: want an engine that serves requests"},
		{"another GPU", []string{"simulate", "--compare", level, "--topo", "nvswitch:8xb300"},
			"--topo nvswitch:8xb300: want a box of the GPU the --compare results ran on: " + level + " ran on \"b200\""},
		{"two engines", []string{"simulate", "--compare", level, "--compare", "../../serving/testdata/bench/generated/vllm-detailed.json"},
			"--compare: want results of one engine: " + level + " names sglang (\"sglang\") and ../../serving/testdata/bench/generated/vllm-detailed.json names vllm (\"vllm\")"},
		{"calibrate, another engine's policy", []string{"calibrate", "--serving", level, "--policy", "vllm", "-o", filepath.Join(t.TempDir(), "o.json")},
			"--policy vllm: want sglang@0.5's own scheduler, sglang"},
	} {
		// The last flag given wins, so the case's --topo replaces dsr1's.
		args := append(append([]string(nil), c.args[:1]...), append(append([]string(nil), dsr1...), c.args[1:]...)...)
		code, out, errs := runCLI(t, args...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 || out != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", c.name, code, out, errs, c.want)
		}
	}

	o := filepath.Join(t.TempDir(), "overheads.json")
	code, out, errs = runCLI(t, append([]string{"calibrate", "--serving", level, "-o", o}, dsr1...)...)
	if code != 0 || !strings.Contains(out, "engine sglang@0.5: recorded in the results") || !strings.Contains(out, "sglang policy; objective") {
		t.Errorf("calibrate --serving of SGLang's results: exit %d, stderr %q, output:\n%s", code, errs, out)
	}
}
