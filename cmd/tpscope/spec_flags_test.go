package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSpecFlagsRefused: a speculative scenario that cannot be priced is one
// line naming the flag, exit 2, on every verb that prices one, before any
// work (run and verdict would otherwise start ranks).
func TestSpecFlagsRefused(t *testing.T) {
	bad := []struct {
		name string
		args []string
		want string
	}{
		{"method", []string{"--spec", "medusa"}, `--spec "medusa": speculative method "medusa": want one of mtp, eagle3, draft, ngram, suffix`},
		{"tokens", []string{"--spec", "eagle3", "--spec-tokens", "0"}, "--spec-tokens 0: want at least 1 draft token per step for --spec eagle3"},
		{"head-for-another-model", []string{"--model", "glm-5-nvfp4", "--spec", "eagle3", "--draft-model", "kimi-k2.5-eagle3-mla"},
			"--draft-model kimi-k2.5-eagle3-mla: want a head for glm-5-nvfp4"},
		{"model-as-head", []string{"--spec", "eagle3", "--draft-model", "moonlight-16b-a3b"}, "--draft-model moonlight-16b-a3b: want an EAGLE-3 head"},
		{"accept", []string{"--spec", "eagle3", "--spec-accept", "1.5"}, "--spec-accept"},
	}
	verbs := [][]string{{"predict"}, {"advise", "--no-sweep"}, {"schedule"}, {"plan"},
		{"simulate", "--concurrency", "1", "--isl", "128", "--osl", "16"},
		{"run", "--backend", "cpu", "--scale", "64"},
		{"verdict", "--backend", "cpu", "--topo", filepath.Join(cpuRanksDir, "cpu-4r.json")}}
	for _, b := range bad {
		for _, verb := range verbs {
			args := append(append([]string(nil), verb...), b.args...)
			if !strings.Contains(strings.Join(b.args, " "), "--model") {
				args = append(args, "--model", "kimi-k2.5")
			}
			t.Run(b.name+"/"+verb[0], func(t *testing.T) {
				code, _, stderr := runCLI(t, args...)
				line := strings.TrimSuffix(stderr, "\n")
				if code != 2 || !strings.Contains(line, b.want) || strings.Contains(line, "\n") {
					t.Fatalf("%v: exit %d (want 2), stderr %q (want one line with %q)", args, code, stderr, b.want)
				}
			})
		}
	}
}

// TestAdviseHeadSpecAccept: advise's baseline line names the acceptance
// it priced when the baseline speculates (read from the workload by its
// codec; a substring test for "mtp" stopped matching when workloads
// began to print specN) and leaves it out when it does not.
func TestAdviseHeadSpecAccept(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"--mtp", "2", "--spec-accept", "0.7"}, true},
		{[]string{"--spec-accept", "0.7"}, false},
	} {
		args := append([]string{"advise", "--model", "glm-5-nvfp4", "--no-sweep"}, c.args...)
		code, out, stderr := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var base string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "baseline (") {
				base = l
			}
		}
		if got := strings.Contains(base, "spec-accept=0.7"); got != c.want || base == "" {
			t.Errorf("%v: baseline line %q names the acceptance: %v, want %v", args, base, got, c.want)
		}
	}
}

// TestSpecAcceptFileSaysExtrapolation: a vLLM /metrics file with only
// position 0's counter (80 accepted of 100 drafts), priced at k = 3:
// positions 2 and 3 are 0.8^2 = 0.64 and 0.8^3 = 0.51, and the line says
// that position 1 was measured and those extrapolated.
func TestSpecAcceptFileSaysExtrapolation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.prom")
	prom := "vllm:spec_decode_num_drafts_total 100\nvllm:spec_decode_num_accepted_tokens_total 80\n" +
		"vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} 80\n"
	if err := os.WriteFile(path, []byte(prom), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "predict", "--model", "kimi-k2.5", "--spec", "eagle3", "--spec-tokens", "3", "--spec-accept-file", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"per-position acceptance 0.80, 0.64, 0.51 from vLLM /metrics: 100 drafts",
		"; position 1 measured, positions 2-3 extrapolated (x0.80 a position: position 1's rate as a per-token chain)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestTraceVerbsRefuseAcceptance: an acceptance (--spec-accept,
// --spec-accept-file, --mtp-accept) sets the tokens a speculative step
// yields, not its time, so compare, calibrate --trace and report --trace,
// which price the steps a trace measured, have nothing it changes. They
// had taken it and named it as an override ("scenario recorded in the
// trace; overridden by --spec-accept 0.5") over a comparison it left as
// it was; now it is one line naming the flag, exit 2, before any work.
func TestTraceVerbsRefuseAcceptance(t *testing.T) {
	dir := t.TempDir()
	acc := filepath.Join(dir, "metrics.txt")
	if err := os.WriteFile(acc, []byte("vllm:spec_decode_num_drafts_total 100\nvllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} 60\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A speculative run's trace: the acceptance would apply to its steps.
	trace := filepath.Join(dir, "eagle3.otlp.jsonl")
	if code, _, stderr := runCLI(t, "run", "--backend", "cpu", "--model", "tiny-mla-moe", "--tp", "2", "--batch", "2", "--context", "256",
		"--steps", "2", "--warmup", "1", "--spec", "eagle3", "--topo", filepath.Join(cpuRanksDir, "cpu-4r.json"), "--trace", "file:"+trace); code != 0 {
		t.Fatalf("run --spec eagle3: exit %d: %s", code, stderr)
	}
	out := filepath.Join(dir, "box.json")
	verbs := [][]string{{"compare", "--trace", trace}, {"calibrate", "--trace", trace, "--force", "-o", out}, {"report", "--trace", trace, "-o", filepath.Join(dir, "r.html")}}
	for _, acceptance := range [][]string{{"--spec-accept", "0.5"}, {"--spec-accept-file", acc}, {"--mtp-accept", "0.7"}} {
		for _, v := range verbs {
			args := append(append([]string{}, v...), acceptance...)
			t.Run(strings.Join(args[:1], "")+acceptance[0], func(t *testing.T) {
				code, stdout, stderr := runCLI(t, args...)
				want := acceptance[0] + " " + acceptance[1] + ": "
				if code != 2 || stdout != "" || !strings.Contains(stderr, want) || !strings.Contains(stderr, "tokens a step yields") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
					t.Errorf("%v: exit %d, stdout %d bytes, stderr %q; want 2 and one line with %q saying the acceptance sets the tokens a step yields", args, code, len(stdout), stderr, want)
				}
				if _, err := os.Stat(out); err == nil {
					t.Fatalf("%s was written", out)
				}
			})
		}
	}
}

// TestSpecAcceptFileMeanLengthAtItsK: a /metrics text whose drafts were of
// 3 tokens (3000 draft tokens over 1000 drafts) and accepted 1.65 a
// draft is a mean length of 2.65 at K = 3, a per-token chain a with
// a + a^2 + a^3 = 1.65 (a = 0.72953); a step of 5 drafts carries that
// chain on: 1 + a + ... + a^5 = 3.140 tokens per step. It had been read
// as 2.65 at the step's own K, 5: 2.65 tokens per step, and the line did
// not say which positions were measured.
func TestSpecAcceptFileMeanLengthAtItsK(t *testing.T) {
	path := filepath.Join(t.TempDir(), "metrics.prom")
	prom := "vllm:spec_decode_num_drafts_total 1000\nvllm:spec_decode_num_draft_tokens_total 3000\nvllm:spec_decode_num_accepted_tokens_total 1650\n"
	if err := os.WriteFile(path, []byte(prom), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "predict", "--model", "kimi-k2.5", "--spec", "eagle3", "--spec-tokens", "5", "--spec-accept-file", path, "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var pr struct {
		TokensPerStep float64 `json:"tokens_per_step"`
		Spec          struct {
			GivenPositions int `json:"given_positions"`
		} `json:"spec"`
	}
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatal(err)
	}
	if math.Abs(pr.TokensPerStep-3.13989) > 1e-4 || pr.Spec.GivenPositions != 3 {
		t.Errorf("tokens per step %.5f, measured positions %d; want 3.13989 (2.65 at K 3, its chain carried to 5) and 3", pr.TokensPerStep, pr.Spec.GivenPositions)
	}
}

// TestSpecAcceptFileSGLangAtItsSteps: an SGLang log whose server_args ran
// 3 draft steps and whose decode batches accepted 2.7 tokens a step is a
// per-token chain a with a + a^2 + a^3 = 1.7 (a = 0.74174); a step of 5
// drafts carries it on, 1 + a + ... + a^5 = 3.2272 tokens per step. It
// had been read as 2.7 at the step's own 5 drafts.
func TestSpecAcceptFileSGLangAtItsSteps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sglang.log")
	log := "[2026-05-01 09:59:00] server_args=ServerArgs(model_path='moonshotai/Kimi-K2.5', speculative_algorithm='EAGLE3', speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4)\n" +
		"[2026-05-01 10:00:00] Decode batch, #running-req: 1, #token: 2048, token usage: 0.01, accept len: 2.60, accept rate: 0.65, cuda graph: True, gen throughput (token/s): 95.10, #queue-req: 0\n" +
		"[2026-05-01 10:00:10] Decode batch, #running-req: 1, #token: 2090, token usage: 0.01, accept len: 2.80, accept rate: 0.70, cuda graph: True, gen throughput (token/s): 99.00, #queue-req: 0\n"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "predict", "--model", "kimi-k2.5", "--engine", "sglang@0.5", "--spec", "eagle3", "--spec-tokens", "5", "--spec-accept-file", path, "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var pr struct {
		TokensPerStep float64 `json:"tokens_per_step"`
	}
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatal(err)
	}
	if math.Abs(pr.TokensPerStep-3.22721) > 1e-4 {
		t.Errorf("tokens per step %.5f; want 3.22721 (2.7 at 3 steps, its chain carried to 5)", pr.TokensPerStep)
	}
}

// TestSpecAcceptFileBenchmarkReport: the acceptance a benchmark client
// reported of its server. vllm bench serve's section of an MTP 8 run
// (vLLM PR #48892) lists positions 0-7 at 76.17, 61.58, 51.25, ... %: a
// step of 3 drafts yields 1 + 0.7617 + 0.6158 + 0.5125 = 2.8900 tokens.
// SGLang bench_serving's JSONL of two runs at accept_length 2.6 and 2.8
// (2.7, at the step's own 3 draft passes) is a chain a + a^2 + a^3 =
// 1.7, 2.7 tokens a step.
func TestSpecAcceptFileBenchmarkReport(t *testing.T) {
	dir := t.TempDir()
	vllmOut := filepath.Join(dir, "bench.txt")
	sec := "---------------Speculative Decoding---------------\n" +
		"Acceptance rate (%):                     43.71     \nAcceptance length:                       4.50      \n" +
		"Drafts:                                  11043     \nDraft tokens:                            88344     \n" +
		"Accepted tokens:                         38611     \nPer-position acceptance (%):\n" +
		"  Position 0:                            76.17     \n  Position 1:                            61.58     \n" +
		"  Position 2:                            51.25     \n  Position 3:                            42.43     \n" +
		"  Position 4:                            36.40     \n  Position 5:                            30.94     \n" +
		"  Position 6:                            27.22     \n  Position 7:                            23.65     \n" +
		"==================================================\n"
	sglangOut := filepath.Join(dir, "sglang.jsonl")
	jsonl := `{"backend": "sglang", "request_rate": 4.0, "accept_length": 2.6}` + "\n" + `{"backend": "sglang", "request_rate": 8.0, "accept_length": 2.8}` + "\n"
	for p, s := range map[string]string{vllmOut: sec, sglangOut: jsonl} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		file   string
		engine string
		want   float64
	}{{vllmOut, "vllm@0.24", 2.8900}, {sglangOut, "sglang@0.5", 2.7}} {
		code, out, errs := runCLI(t, "predict", "--model", "kimi-k2.5", "--engine", c.engine, "--spec", "eagle3", "--spec-tokens", "3", "--spec-accept-file", c.file, "--output", "json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.file, code, errs)
		}
		var pr struct {
			TokensPerStep float64 `json:"tokens_per_step"`
		}
		if err := json.Unmarshal([]byte(out), &pr); err != nil {
			t.Fatal(err)
		}
		if math.Abs(pr.TokensPerStep-c.want) > 1e-4 {
			t.Errorf("%s: tokens per step %.5f, want %.4f", filepath.Base(c.file), pr.TokensPerStep, c.want)
		}
	}
	// A result of a server that did not speculate is one line, before work.
	plain := filepath.Join(dir, "plain.json")
	if err := os.WriteFile(plain, []byte(`{"backend": "vllm", "completed": 10, "mean_ttft_ms": 80.1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "predict", "--model", "kimi-k2.5", "--spec", "eagle3", "--spec-accept-file", plain)
	if code == 0 || out != "" || !strings.Contains(errs, "plain.json") || !strings.Contains(errs, "ran no speculative decoding") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q: want one line naming the file and why", code, out, errs)
	}
}

// TestSimulateSGLangSpecStepEngine: simulate's step engine line says the
// verify graphs the run replays: under SGLang with MTP they stop at the
// request pool the run serves with, the 48 SGLang sets for speculative
// decoding by default and the --max-num-seqs given (SGLang's
// --max-running-requests) otherwise, said to be given even where it is
// 48, never "decode graphs to batch 512".
func TestSimulateSGLangSpecStepEngine(t *testing.T) {
	base := []string{"simulate", "--topo", "h200-nvswitch", "--engine", "sglang", "--model", "deepseek-v3", "--spec", "mtp",
		"--concurrency", "8", "--requests", "20", "--timeline", "0"}
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{nil, "verify graphs to batch 48 of 2 tokens a sequence, the draft passes at the same batches (sglang@0.5's speculative list up to the request pool, max_running_requests 48 for NEXTN, below cuda_graph_max_bs 512"},
		{[]string{"--max-num-seqs", "100"}, "verify graphs to batch 100 of 2 tokens a sequence, the draft passes at the same batches (sglang@0.5's speculative list up to the request pool, max_running_requests 100 as given, below cuda_graph_max_bs 512"},
		// The limit given is the user's even where it equals SGLang's
		// own for the method: not "for NEXTN".
		{[]string{"--max-num-seqs", "48"}, "verify graphs to batch 48 of 2 tokens a sequence, the draft passes at the same batches (sglang@0.5's speculative list up to the request pool, max_running_requests 48 as given, below cuda_graph_max_bs 512"},
	} {
		code, out, errs := runCLI(t, append(slices.Clone(base), c.extra...)...)
		if code != 0 {
			t.Fatalf("simulate %v: exit %d: %s", c.extra, code, errs)
		}
		if !strings.Contains(out, "\nstep engine: ") || !strings.Contains(out, c.want) || strings.Contains(out, "decode graphs to batch") {
			t.Errorf("simulate %v: want the step engine line with %q:\n%s", c.extra, c.want, out)
		}
	}
}

// TestSimulateSGLangDecodeStepEngine: without speculation SGLang's decode
// graphs stop at the request pool as its verify graphs do: simulate
// --max-num-seqs 100 (its --max-running-requests) says the list ends at
// 100, the pool given, not at cuda_graph_max_bs 512; without the flag
// (a pool of at least 2,048) the line keeps cuda_graph_max_bs's end.
func TestSimulateSGLangDecodeStepEngine(t *testing.T) {
	base := []string{"simulate", "--topo", "h200-nvswitch", "--engine", "sglang", "--model", "deepseek-v3",
		"--concurrency", "8", "--requests", "20", "--timeline", "0"}
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{nil, "decode graphs to batch 512 (cuda_graph_max_bs for 143771 MiB at tp_size 8; larger batches eager)"},
		{[]string{"--max-num-seqs", "100"}, "decode graphs to batch 100 (sglang@0.5's list up to the request pool, max_running_requests 100 as given, below cuda_graph_max_bs 512 for 143771 MiB at tp_size 8; larger batches eager)"},
	} {
		code, out, errs := runCLI(t, append(slices.Clone(base), c.extra...)...)
		if code != 0 {
			t.Fatalf("simulate %v: exit %d: %s", c.extra, code, errs)
		}
		if !strings.Contains(out, "\nstep engine: ") || !strings.Contains(out, c.want) {
			t.Errorf("simulate %v: want the step engine line with %q:\n%s", c.extra, c.want, out)
		}
	}
}

// TestExecutorSpecFlagRuns: the engine flag predict prints for a
// speculative step under --engine executor is a tpscope command, so the
// drafter it names must be one tpscope takes: the built-in's name, not
// the Hugging Face id a serving engine loads (a path that is not there,
// which --draft-model refuses). Each drafter the flag names runs: predict
// with it as --draft-model prices the same step. A serving engine's flag
// keeps the id.
func TestExecutorSpecFlagRuns(t *testing.T) {
	flagOf := func(args ...string) string {
		t.Helper()
		code, stdout, stderr := runCLI(t, append([]string{"predict", "--output", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var pr struct {
			StepUs float64 `json:"step_us"`
			Spec   struct {
				EngineFlag string `json:"engine_flag"`
			} `json:"spec"`
		}
		if err := json.Unmarshal([]byte(stdout), &pr); err != nil {
			t.Fatal(err)
		}
		return pr.Spec.EngineFlag
	}
	for _, c := range []struct{ method, builtin, hf string }{
		{"eagle3", "kimi-k2.5-eagle3-mla", "lightseekorg/kimi-k2.5-eagle3-mla"},
		{"draft", "moonlight-16b-a3b", "moonshotai/Moonlight-16B-A3B-Instruct"},
	} {
		f := flagOf("--engine", "executor", "--spec", c.method)
		_, rest, ok := strings.Cut(f, "--draft-model ")
		if !ok || !strings.HasPrefix(f, "tpscope run ") {
			t.Fatalf("executor %s: engine flag %q: want a tpscope run command naming --draft-model", c.method, f)
		}
		named := strings.Fields(rest)[0]
		if named != c.builtin {
			t.Errorf("executor %s: engine flag %q names the drafter %q, want the built-in %q", c.method, f, named, c.builtin)
		}
		if code, _, stderr := runCLI(t, "predict", "--engine", "executor", "--spec", c.method, "--draft-model", named); code != 0 {
			t.Errorf("executor %s: the flag's --draft-model %s is refused: exit %d, %s", c.method, named, code, stderr)
		}
		if v := flagOf("--spec", c.method); !strings.Contains(v, c.hf) {
			t.Errorf("vllm %s: engine flag %q, want the checkpoint %q", c.method, v, c.hf)
		}
	}
}
