package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/serving"
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
		// The case's --topo replaces dsr1's.
		args := append([]string{c.args[0]}, withFlags(dsr1, c.args[1:]...)...)
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

// TestServingPlanFromResults: the InferenceX DeepSeek-R1 results record
// the plan they ran ("tp": 8, "ep": 8, "gpu": {"n_gpus": 8}): without the
// plan flags the run is priced at TP 8 with EP and the output says so;
// --tp 8 alone takes EP from the results; a plan flag that contradicts
// them (--tp 4, --tp 4 --dp 2, --ep=false) and a box of fewer GPUs than
// they ran on are one line each naming the flag, the file and what it
// records, before any work: in simulate --compare and calibrate
// --serving alike (which fitted 8-GPU measurements on a 4-GPU TP-4 box).
func TestServingPlanFromResults(t *testing.T) {
	level := dsr1Dir + "conc16.json"
	model := []string{"--model", "../../serving/testdata/models/deepseek-r1-0528-fp4", "--kv-dtype", "fp8"}
	for _, c := range []struct {
		name  string
		args  []string
		taken string // the note's flags
	}{
		{"no plan flag", nil, "as --ep"},
		{"--tp 8 alone", []string{"--tp", "8"}, "as --ep"},
		{"the whole plan", []string{"--tp", "8", "--ep"}, ""},
	} {
		args := append(append([]string{"simulate", "--output", "json", "--topo", "nvswitch:8xb200", "--compare", level}, model...), c.args...)
		code, out, errs := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, errs)
		}
		var res struct {
			Plan     string `json:"plan"`
			GPUs     int    `json:"gpus"`
			PlanNote string `json:"plan_note"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatal(err)
		}
		note := ""
		if c.taken != "" {
			note = "plan tp8-ep: recorded in the results (tp 8, ep 8 on 8 GPUs in " + level + "), " + c.taken
		}
		if res.Plan != "tp8-ep" || res.GPUs != 8 || res.PlanNote != note {
			t.Errorf("%s: plan %s on %d GPUs, note %q; want tp8-ep on 8, note %q", c.name, res.Plan, res.GPUs, res.PlanNote, note)
		}
	}
	out4 := filepath.Join(t.TempDir(), "o4.json")
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"simulate --tp 4", []string{"simulate", "--compare", level, "--topo", "nvswitch:8xb200", "--tp", "4"},
			"--tp 4: want the plan the --compare results ran: " + level + " records tp 8, ep 8 on 8 GPUs, which is tp8-ep (--tp 8)"},
		{"simulate --tp 4 --dp 2 --ep", []string{"simulate", "--compare", level, "--topo", "nvswitch:8xb200", "--tp", "4", "--dp", "2", "--ep"},
			"--tp 4: want the plan the --compare results ran: "},
		{"simulate --ep=false", []string{"simulate", "--compare", level, "--topo", "nvswitch:8xb200", "--ep=false"},
			"--ep false: want the plan the --compare results ran: " + level + " records tp 8, ep 8 on 8 GPUs, which is tp8-ep (--ep true)"},
		{"calibrate --tp 4 on 4 GPUs", []string{"calibrate", "--serving", level, "--topo", "nvswitch:4xb200", "--tp", "4", "-o", out4},
			"--tp 4: want the plan the --serving results ran: " + level + " records tp 8, ep 8 on 8 GPUs"},
		{"calibrate on 4 GPUs", []string{"calibrate", "--serving", level, "--topo", "nvswitch:4xb200", "-o", out4},
			"--topo nvswitch:4xb200: want a box of the 8 GPUs the --serving results ran on: " + level + " records tp 8, ep 8 on 8 GPUs, the box has 4"},
		{"the first 4 GPUs", []string{"simulate", "--compare", level, "--topo", "nvswitch:8xb200", "--gpus", "4"},
			"--gpus 4: want a box of the 8 GPUs the --compare results ran on"},
	} {
		args := append(append([]string(nil), c.args[:1]...), append(append([]string(nil), model...), c.args[1:]...)...)
		code, out, errs := runCLI(t, args...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 || out != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", c.name, code, out, errs, c.want)
		}
		if _, err := os.Stat(out4); err == nil {
			t.Fatalf("%s: %s written", c.name, out4)
		}
	}
}

// TestServingEngineUnprofiled: results measured under an engine tpscope
// has no profile of (InferenceX's framework "dynamo-sglang"; vllm bench's
// backend "tgi") are refused in one line naming the file, the engine and
// --engine, and priced under --engine with a line saying so; an API's
// name (openai-chat) names no engine, and bench_serving's vllm-chat is
// vLLM. On 601a891 an unknown framework was read as naming no engine: the
// default vllm@0.24 priced the run, and nothing said so.
func TestServingEngineUnprofiled(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(dsr1Dir + "conc16.json")
	if err != nil {
		t.Fatal(err)
	}
	dyn := filepath.Join(dir, "dynamo.json")
	if err := os.WriteFile(dyn, []byte(strings.Replace(string(data), `"framework": "sglang"`, `"framework": "dynamo-sglang"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	o := filepath.Join(dir, "o.json")
	for _, c := range []struct {
		name string
		args []string
	}{
		{"simulate", append([]string{"simulate", "--compare", dyn}, dsr1...)},
		{"calibrate", append([]string{"calibrate", "--serving", dyn, "-o", o}, dsr1...)},
	} {
		code, out, errs := runCLI(t, c.args...)
		want := dyn + ` ran under "dynamo-sglang", an engine tpscope has no profile of (it has sglang@0.5, trtllm@1.3, vllm@0.16-nightly, vllm@0.24): pass --engine`
		if code != 2 || out != "" || !strings.Contains(errs, want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", c.name, code, out, errs, want)
		}
	}
	code, out, errs := runCLI(t, append([]string{"simulate", "--engine", "sglang", "--compare", dyn}, dsr1...)...)
	if code != 0 || !strings.Contains(out, "engine: sglang policy") ||
		!strings.Contains(out, `engine recorded in the results: "dynamo-sglang" (in `+dyn+`), which tpscope has no profile of; priced as --engine sglang`) {
		t.Errorf("--engine sglang over dynamo-sglang: exit %d, stderr %q, output:\n%s", code, errs, out)
	}
	for name, want := range map[string]bool{"tgi": true, "lmdeploy": true, "openai-chat": false, "vllm-chat": false, "sglang-oai": false, "": false} {
		m := serving.Measured{Engine: name}
		if got := m.EngineUnprofiled(); got != want {
			t.Errorf("backend %q: unprofiled %v, want %v", name, got, want)
		}
	}
	if r, ok := (&serving.Measured{Engine: "vllm-chat"}).EngineRef(); !ok || r.Name != "vllm" {
		t.Errorf("backend vllm-chat: %v %v, want vllm", r, ok)
	}
}

// TestServingInstancesOfResults: --instances above 1 against results that
// record the GPUs they ran on (InferenceX's DSR1: one tp8-ep server on 8
// B200s) is refused in one line before any work when the copies take more
// GPUs than the results ran on. On 601a891, on a 16-GPU box, two copies
// served the measured 64 clients and were set beside the one server's
// latencies. (No box description holds 16 B200s now, an HGX board being
// 8: the check comes before the box's size.)
func TestServingInstancesOfResults(t *testing.T) {
	level := dsr1Dir + "conc64.json"
	args := []string{"simulate", "--compare", level, "--model", "../../serving/testdata/models/deepseek-r1-0528-fp4", "--topo", "nvswitch:8xb200", "--instances", "2"}
	code, out, errs := runCLI(t, args...)
	want := "--instances 2: want the deployment the --compare results ran: " + level + " records tp 8, ep 8 on 8 GPUs, one server; 2 copies of tp8-ep take 16 GPUs"
	if code != 2 || out != "" || !strings.Contains(errs, want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", code, out, errs, want)
	}
}

// TestVLLMSchedulerOptionsUnderOtherEngines: --watermark,
// --long-prefill-token-threshold and --no-scheduler-reserve-full-isl are
// settings of vLLM's SchedulerConfig. TensorRT-LLM (GUARANTEED_NO_EVICT
// admission, no watermark, no per-request prefill cap) and SGLang have
// none of them, so under those engines each is one line naming the flag,
// exit 2, before any work, as SGLang's --scheduler-recv-interval is under
// vLLM; under vLLM they are taken.
func TestVLLMSchedulerOptionsUnderOtherEngines(t *testing.T) {
	box := []string{"--model", "deepseek-v3", "--topo", "h200-nvswitch", "--concurrency", "2", "--requests", "4", "--isl", "128", "--osl", "8"}
	for _, engine := range []string{"trtllm", "sglang"} {
		for _, f := range [][]string{{"--watermark", "0.1"}, {"--long-prefill-token-threshold", "512"}, {"--no-scheduler-reserve-full-isl"}} {
			args := append(append([]string{"simulate", "--engine", engine}, box...), f...)
			code, out, errs := runCLI(t, args...)
			line := strings.TrimPrefix(errs, "tpscope simulate: usage: ")
			if code != 2 || !(strings.HasPrefix(line, f[0]+" ") || strings.HasPrefix(line, f[0]+":")) || !strings.Contains(errs, "vLLM's option") ||
				strings.Count(strings.TrimSpace(errs), "\n") > 0 || out != "" {
				t.Errorf("%s %v: exit %d, stdout %q, stderr %q; want exit 2 and one line naming %s as vLLM's option", engine, f, code, out, errs, f[0])
			}
		}
	}
	code, _, errs := runCLI(t, append(append([]string{"simulate", "--engine", "vllm"}, box...), "--watermark", "0.1", "--long-prefill-token-threshold", "512", "--no-scheduler-reserve-full-isl")...)
	if code != 0 {
		t.Errorf("vLLM's own scheduler options under vllm: exit %d, stderr %q", code, errs)
	}
}

// TestEnableChunkedPrefillOnlyWhereOff: --enable-chunked-prefill turns on
// TensorRT-LLM's enable_chunked_prefill (off by default there); under
// vLLM and SGLang, which cut prompts to the step's budget by default, it
// asks for nothing and is one line, exit 2, before any work.
func TestEnableChunkedPrefillOnlyWhereOff(t *testing.T) {
	box := []string{"--model", "deepseek-v3", "--topo", "h200-nvswitch", "--concurrency", "2", "--requests", "4", "--isl", "128", "--osl", "8", "--enable-chunked-prefill"}
	for _, engine := range []string{"vllm", "sglang"} {
		code, out, errs := runCLI(t, append([]string{"simulate", "--engine", engine}, box...)...)
		if code != 2 || out != "" || !strings.Contains(errs, "--enable-chunked-prefill") || !strings.Contains(errs, "by default") || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and one line naming the flag", engine, code, out, errs)
		}
	}
	if code, _, errs := runCLI(t, append([]string{"simulate", "--engine", "trtllm"}, box...)...); code != 0 {
		t.Errorf("trtllm: exit %d, stderr %q", code, errs)
	}
}

// TestNoChunkedPrefillOnlyWhereOn: --no-enable-chunked-prefill turns off
// the chunking vLLM and SGLang do by default; under TensorRT-LLM, whose
// enable_chunked_prefill is off by default, it asks for nothing and is
// one line, exit 2, before any work (it had been taken and dropped the
// engine's "chunked prefill off (trtllm@1.3's)" from the defaults line,
// as if the user had set it).
func TestNoChunkedPrefillOnlyWhereOn(t *testing.T) {
	box := []string{"--model", "deepseek-v3", "--topo", "h200-nvswitch", "--concurrency", "2", "--requests", "4", "--isl", "128", "--osl", "8", "--no-enable-chunked-prefill"}
	code, out, errs := runCLI(t, append([]string{"simulate", "--engine", "trtllm"}, box...)...)
	if code != 2 || out != "" || !strings.Contains(errs, "--no-enable-chunked-prefill: trtllm@1.3 leaves prompts whole by default") || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
		t.Errorf("trtllm: exit %d, stdout %q, stderr %q; want exit 2 and one line naming the flag", code, out, errs)
	}
	for _, engine := range []string{"vllm", "sglang"} {
		if code, _, errs := runCLI(t, append([]string{"simulate", "--engine", engine}, box...)...); code != 0 {
			t.Errorf("%s: exit %d, stderr %q", engine, code, errs)
		}
	}
}
