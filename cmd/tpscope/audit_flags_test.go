package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// predictLines runs predict and returns its key lines by key (the first
// of each), failing the test on an error.
func predictLines(t *testing.T, args ...string) map[string]string {
	t.Helper()
	code, out, stderr := runCLI(t, append([]string{"predict", "--top", "1"}, args...)...)
	if code != 0 {
		t.Fatalf("predict %v: exit %d: %s", args, code, stderr)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(l, "  ")
		if !ok || k == "" {
			continue
		}
		if _, seen := lines[k]; !seen {
			lines[k] = strings.TrimSpace(v)
		}
	}
	return lines
}

// predictJSONObject runs predict --output json and returns its top-level
// object.
func predictJSONObject(t *testing.T, args ...string) map[string]any {
	t.Helper()
	code, out, stderr := runCLI(t, append([]string{"predict", "--output", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("predict %v: exit %d: %s", args, code, stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPredictDenseDSAFlag: --dense-dsa is recorded as chosen and shown in
// the options line and the JSON; the engine line names what was priced.
// On SM120 vLLM runs GLM-5 dense (no sparse kernels there), so
// --dense-dsa=false is a choice against the engine; on H200 it runs it
// sparse, so --dense-dsa is.
func TestPredictDenseDSAFlag(t *testing.T) {
	cases := []struct {
		args         []string
		option       string // a word of the options line, "" = none about dsa
		engineSuffix string
		dense, chose bool
	}{
		{[]string{"--model", "glm-5-nvfp4"}, "", ", DSA run dense", true, false},
		{[]string{"--model", "glm-5-nvfp4", "--dense-dsa=false"}, "dense-dsa=false", ", DSA sparse (--dense-dsa=false; the engine runs it dense here)", false, true},
		{[]string{"--model", "glm-5-nvfp4", "--topo", "h200-nvswitch", "--dense-dsa"}, "dense-dsa", ", DSA run dense (--dense-dsa; the engine runs it sparse here)", true, true},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			l := predictLines(t, tc.args...)
			var dsaWords []string
			for _, w := range strings.Fields(l["options"]) {
				if strings.HasPrefix(w, "dense-dsa") {
					dsaWords = append(dsaWords, w)
				}
			}
			if got := strings.Join(dsaWords, " "); got != tc.option {
				t.Errorf("options %q: dsa words %q, want %q", l["options"], got, tc.option)
			}
			if !strings.HasSuffix(l["engine"], tc.engineSuffix) {
				t.Errorf("engine %q: want it to end %q", l["engine"], tc.engineSuffix)
			}
			dsa, _ := predictJSONObject(t, tc.args...)["dsa"].(map[string]any)
			if dsa["dense"] != tc.dense || dsa["chosen"] != tc.chose {
				t.Errorf("JSON dsa %v: want dense %v chosen %v", dsa, tc.dense, tc.chose)
			}
		})
	}
	checkUsageErrors(t, []usageCase{
		{"kimi has no DSA", []string{"predict", "--model", "kimi-k2.5", "--dense-dsa"}, "--dense-dsa: kimi-k2.5 has no DSA sparse attention"},
		{"kimi has no DSA (=false)", []string{"schedule", "--model", "kimi-k2.5", "--dense-dsa=false"}, "--dense-dsa: kimi-k2.5 has no DSA sparse attention"},
		{"plan on kimi", []string{"plan", "--model", "kimi-k2.5", "--dense-dsa", "--plan", "tp8"}, "--dense-dsa: kimi-k2.5 has no DSA sparse attention"},
	})
}

// TestPredictSparseMLABackend: GLM-5 run sparse on SM90 / SM100 is priced
// on vLLM 0.24's sparse MLA backend, FLASHMLA_SPARSE (vLLM holds every
// dense MLA backend invalid for a model with index_topk), and the engine
// line names it with its five companions (flashmla_sparse.py forward_mqa:
// concat_mla_q, the top-k conversion, the padded query's fill and copy,
// the split merge); run dense (--dense-dsa, or SM120 where vLLM has no
// sparse kernel) it keeps the dense backend. --attention-backend naming
// a dense backend for the sparse model is refused in one line naming the
// flag, as vLLM refuses a selected backend that is not valid.
func TestPredictSparseMLABackend(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		want  string
		notIn string
	}{
		{[]string{"--model", "glm-5-nvfp4", "--topo", "nvswitch:8xb200"}, "attention FLASHMLA_SPARSE (sm_fill, 5 companion kernels)", "CUTLASS_MLA"},
		{[]string{"--model", "glm-5-nvfp4", "--topo", "h200-nvswitch"}, "attention FLASHMLA_SPARSE (sm_fill, 5 companion kernels)", "attention FLASHMLA "},
		{[]string{"--model", "glm-5-nvfp4", "--topo", "h200-nvswitch", "--kv-dtype", "bf16"}, "attention FLASHMLA_SPARSE (", "FLASH_ATTN_MLA"},
		{[]string{"--model", "glm-5-nvfp4", "--topo", "h200-nvswitch", "--dense-dsa"}, "attention FLASHMLA (sm_fill, 2 companion kernels)", "SPARSE"},
		{[]string{"--model", "glm-5-nvfp4"}, "attention TRITON_MLA (", "SPARSE"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			e := predictLines(t, tc.args...)["engine"]
			if !strings.Contains(e, tc.want) || strings.Contains(e, tc.notIn) {
				t.Errorf("engine %q: want %q, not %q", e, tc.want, tc.notIn)
			}
		})
	}
	for _, args := range [][]string{
		{"predict", "--model", "glm-5-nvfp4", "--topo", "h200-nvswitch", "--attention-backend", "FLASHMLA"},
		{"predict", "--model", "glm-5-nvfp4", "--topo", "nvswitch:8xb200", "--attention-backend", "cutlass_mla"},
	} {
		code, out, stderr := runCLI(t, args...)
		b := strings.ToLower(args[len(args)-1])
		want := "--attention-backend " + b + ": vllm@0.24's attention backend " + strings.ToUpper(b) + " is a dense MLA backend: a DSA model's sparse attention runs on a sparse one (FLASHMLA_SPARSE"
		if code != 2 || out != "" || !strings.Contains(stderr, want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", args, code, out, stderr, want)
		}
	}
}

// TestPredictSGLangSparseMLABackend: under SGLang 0.5 GLM-5 run sparse on
// SM100 (glm-5-nvfp4, FP8 cache) and on SM90 (GLM-5-FP8's config, bf16
// cache) is priced on its nsa backend, which server_args sets for a DSA
// model, and the engine line names it with its two companions (the
// query concatenation and FlashMLA's split merge, nsa_backend.py
// forward_decode); run dense (--dense-dsa, or SM120 where SGLang runs
// GLM-5 dense) the dense backend stays. A dense backend named with
// --attention-backend for the sparse model is refused in one line naming
// the flag and nsa; nsa named for the model run dense likewise.
func TestPredictSGLangSparseMLABackend(t *testing.T) {
	eng := []string{"--engine", "sglang@0.5"}
	for _, tc := range []struct {
		args  []string
		want  string
		notIn string
	}{
		{[]string{"--model", "glm-5-nvfp4", "--topo", "nvswitch:8xb200"}, "attention nsa (sm_fill, 2 companion kernels)", "attention flashinfer"},
		{[]string{"--model", "../../serving/testdata/models/glm-5-fp8", "--topo", "h200-nvswitch"}, "attention nsa (sm_fill, 2 companion kernels)", "attention fa3"},
		{[]string{"--model", "../../serving/testdata/models/glm-5-fp8", "--topo", "h200-nvswitch", "--kv-dtype", "fp8"}, "attention nsa (", "attention flashmla"},
		{[]string{"--model", "glm-5-nvfp4", "--topo", "nvswitch:8xb200", "--dense-dsa"}, "attention flashinfer (sm_fill, 1 companion kernel)", "attention nsa"},
		{[]string{"--model", "glm-5-nvfp4", "--topo", "nvswitch:8xb200", "--dense-dsa", "--attention-backend", "flashinfer"}, "attention flashinfer (", "attention nsa"},
		{[]string{"--model", "glm-5-nvfp4"}, "attention triton (8 KV splits, 2 companion kernels)", "attention nsa"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			e := predictLines(t, append(tc.args, eng...)...)["engine"]
			if !strings.Contains(e, tc.want) || strings.Contains(e, tc.notIn) {
				t.Errorf("engine %q: want %q, not %q", e, tc.want, tc.notIn)
			}
		})
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "glm-5-nvfp4", "--topo", "nvswitch:8xb200", "--attention-backend", "flashinfer"},
			"--attention-backend flashinfer: sglang@0.5's attention backend flashinfer is a dense MLA backend: a DSA model's sparse attention runs on a sparse one (nsa; --dense-dsa prices the model dense)"},
		{[]string{"--model", "../../serving/testdata/models/glm-5-fp8", "--topo", "h200-nvswitch", "--attention-backend", "fa3"},
			"--attention-backend fa3: sglang@0.5's attention backend fa3 is a dense MLA backend"},
		{[]string{"--model", "glm-5-nvfp4", "--attention-backend", "nsa"},
			"--attention-backend nsa: sglang@0.5's attention backend nsa runs DSA sparse attention only"},
	} {
		args := append(append([]string{"predict"}, c.args...), eng...)
		code, out, stderr := runCLI(t, args...)
		if code != 2 || out != "" || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", args, code, out, stderr, c.want)
		}
	}
}

// TestPredictDispatchFlags: under DP attention + EP the MoE dispatch is
// priced, so the JSON names its kind and payload dtype (by default the
// engine's: vLLM's all-gather + reduce-scatter, moving the default
// model's tokens as its NVFP4 experts take them on the default box's
// SM120 GPUs, FlashInfer CUTLASS's input quantization before the
// gather), the engine line says which the engine runs, and the options
// line names a chosen --moe-dispatch and --dispatch-dtype; an NVFP4
// payload (0.5625 B a value) moves less than an FP8 one (1 B), which
// moves less than a BF16 one (2 B), so the steps grow in that order. A
// plan without DP attention dispatches nothing: the flags are refused
// there, even at their default values, and the JSON has no dispatch.
func TestPredictDispatchFlags(t *testing.T) {
	dp := []string{"--tp", "2", "--dp", "4", "--ep", "--batch", "64", "--context", "1024"}
	base := predictJSONObject(t, dp...)
	if base["moe_dispatch"] != "allgather_reducescatter" || base["moe_dispatch_chosen"] != nil || base["dispatch_dtype"] != "nvfp4" || base["dispatch_dtype_chosen"] != nil {
		t.Errorf("default dispatch %v (chosen %v) %v (chosen %v), want vLLM's allgather_reducescatter of nvfp4, unchosen", base["moe_dispatch"], base["moe_dispatch_chosen"], base["dispatch_dtype"], base["dispatch_dtype_chosen"])
	}
	if e := predictLines(t, dp...)["engine"]; !strings.Contains(e, "DP 4 MoE dispatch all-gather + reduce-scatter (its default: --all2all-backend allgather_reducescatter), nvfp4 tokens (the experts' input quantization, before the gather)") {
		t.Errorf("engine line %q: want it to name vLLM's default dispatch and its payload", e)
	}
	a2a := predictJSONObject(t, append(dp, "--moe-dispatch", "alltoall")...)
	if a2a["moe_dispatch"] != "alltoall" || a2a["moe_dispatch_chosen"] != true || a2a["step_us"] == base["step_us"] {
		t.Errorf("--moe-dispatch alltoall: %v (chosen %v), step %v, want alltoall, chosen, priced apart from %v", a2a["moe_dispatch"], a2a["moe_dispatch_chosen"], a2a["step_us"], base["step_us"])
	}
	fp8 := predictJSONObject(t, append(dp, "--dispatch-dtype", "fp8")...)
	bf16 := predictJSONObject(t, append(dp, "--dispatch-dtype", "bf16")...)
	if fp8["dispatch_dtype"] != "fp8" || fp8["dispatch_dtype_chosen"] != true || bf16["dispatch_dtype"] != "bf16" ||
		!(base["step_us"].(float64) < fp8["step_us"].(float64) && fp8["step_us"].(float64) < bf16["step_us"].(float64)) {
		t.Errorf("dispatch steps: nvfp4 %v, fp8 %v (%v), bf16 %v (%v), want chosen dtypes and steps rising in that order",
			base["step_us"], fp8["step_us"], fp8["dispatch_dtype"], bf16["step_us"], bf16["dispatch_dtype"])
	}
	ag := predictJSONObject(t, append(dp, "--moe-dispatch", "allgather_reducescatter")...)
	if ag["moe_dispatch"] != "allgather_reducescatter" {
		t.Errorf("moe_dispatch %v, want allgather_reducescatter", ag["moe_dispatch"])
	}
	for _, c := range []struct {
		args []string
		want string // the dispatch words of the options line
	}{
		{dp, ""},
		{append(dp, "--dispatch-dtype", "bf16"), "dispatch-dtype=bf16"},
		{append(dp, "--moe-dispatch", "alltoall", "--dispatch-dtype", "bf16"), "moe-dispatch=alltoall dispatch-dtype=bf16"},
		{append(dp, "--dispatch-dtype", "fp8"), "dispatch-dtype=fp8"},
		{append(dp, "--moe-dispatch", "allgather_reducescatter"), "moe-dispatch=allgather_reducescatter"},
	} {
		var got []string
		for _, w := range strings.Fields(predictLines(t, c.args...)["options"]) {
			if strings.Contains(w, "dispatch") {
				got = append(got, w)
			}
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("%v: options dispatch words %q, want %q", c.args, got, c.want)
		}
	}
	if tp := predictJSONObject(t); tp["moe_dispatch"] != nil || tp["dispatch_dtype"] != nil {
		t.Errorf("tp8 JSON has a dispatch: %v %v", tp["moe_dispatch"], tp["dispatch_dtype"])
	}
	checkUsageErrors(t, []usageCase{
		{"dtype without dp", []string{"predict", "--dispatch-dtype", "fp8"}, "--dispatch-dtype fp8: plan tp8 has no MoE dispatch to price"},
		{"kind without dp", []string{"predict", "--tp", "8", "--ep", "--moe-dispatch", "alltoall"}, "--moe-dispatch alltoall: plan tp8-ep has no MoE dispatch to price"},
		{"schedule", []string{"schedule", "--moe-dispatch", "allgather_reducescatter"}, "--moe-dispatch allgather_reducescatter: plan tp8 has no MoE dispatch"},
	})
}

// TestSpecFlagsWithoutSpec: the speculative flags price nothing on a step
// without draft tokens, so each is refused there in one line (as
// --draft-model was), on predict and the verbs that price one scenario;
// advise keeps the acceptance for its speculative rows
// (TestAdviseHeadSpecAccept). A per-position --spec-accept longer than
// the step's draft positions would lose its tail: refused, naming the
// flag that set K. NCCL_P2P_DISABLE=1 leaves no P2P level to set.
func TestSpecFlagsWithoutSpec(t *testing.T) {
	dir := t.TempDir()
	metrics := filepath.Join(dir, "vllm.log")
	log := "INFO [metrics.py:120] SpecDecoding metrics: Mean acceptance length: 2.50, Accepted: 150 tokens, Drafted: 300 tokens, Per-position acceptance rate: 0.800, 0.500, 0.200, Avg Draft acceptance rate: 50.0%\n"
	if err := os.WriteFile(metrics, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	const noAccept = "want no acceptance without --spec or --mtp"
	checkUsageErrors(t, []usageCase{
		{"spec-accept", []string{"predict", "--spec-accept", "0.7"}, "--spec-accept 0.7: " + noAccept},
		{"mtp-accept", []string{"predict", "--mtp-accept", "0.9"}, "--mtp-accept 0.9: " + noAccept},
		{"mtp-accept at mtp 0", []string{"predict", "--model", "deepseek-v3", "--mtp", "0", "--mtp-accept", "0.9"}, "--mtp-accept 0.9: " + noAccept},
		{"spec-accept-file", []string{"predict", "--spec-accept-file", metrics}, "--spec-accept-file " + metrics + ": " + noAccept},
		{"draft-tp", []string{"predict", "--draft-tp", "2"}, "--draft-tp 2: want no draft TP without --spec draft"},
		{"spec-topk", []string{"predict", "--spec-topk", "2"}, "--spec-topk 2: want no tree without --spec"},
		{"spec-steps", []string{"predict", "--spec-steps", "2"}, "--spec-steps 2: want no draft passes without --spec"},
		{"plan spec-topk", []string{"plan", "--spec-topk", "2", "--plan", "tp8"}, "--spec-topk 2: want no tree without --spec"},
		{"rates past K (default K 3)", []string{"predict", "--spec", "eagle3", "--spec-accept", "0.9,0.8,0.7,0.6"},
			"--spec-accept 0.9,0.8,0.7,0.6 and --spec eagle3: want at most 3 per-position rates"},
		{"rates past K (--mtp)", []string{"predict", "--model", "deepseek-v3", "--mtp", "2", "--spec-accept", "0.9,0.8,0.7"},
			"--spec-accept 0.9,0.8,0.7 and --mtp 2: want at most 2 per-position rates"},
		{"p2p disable and level", []string{"predict", "--p2p-disable", "--p2p-level", "SYS"}, "--p2p-disable and --p2p-level SYS: give one"},
	})
	// As many rates as draft positions is the input's form.
	if l := predictLines(t, "--spec", "eagle3", "--spec-accept", "0.9,0.8,0.7"); !strings.Contains(l["options"], "spec-accept=0.9,0.8,0.7") {
		t.Errorf("options %q: want spec-accept=0.9,0.8,0.7", l["options"])
	}
}

// TestNoMTPNamesTheFlag: Kimi-K2.5 has no MTP layer, so --spec mtp is the
// fault and the error names it (not --spec-tokens, which the user may not
// have passed); --mtp N still names --mtp. advise's mtp row says why in
// the same words, not the builder's field name.
func TestNoMTPNamesTheFlag(t *testing.T) {
	const why = "kimi-k2.5-nvfp4 has no MTP layer (num_nextn_predict_layers 0), so it has no MTP draft"
	checkUsageErrors(t, []usageCase{
		{"spec mtp", []string{"predict", "--spec", "mtp"}, "--spec mtp: want a method with a draft: " + why},
		{"spec mtp with tokens", []string{"predict", "--spec", "mtp", "--spec-tokens", "2"}, "--spec mtp: want a method with a draft: " + why},
		{"mtp N", []string{"predict", "--mtp", "1"}, "--mtp 1: want 0: " + why},
	})
	code, out, stderr := runCLI(t, "advise", "--no-sweep", "--entries", "mtp")
	if code != 0 {
		t.Fatalf("advise: exit %d: %s", code, stderr)
	}
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "mtp ") && strings.Contains(l, ": ") {
			row = l
			break
		}
	}
	if !strings.Contains(row, "no: "+why) || strings.Contains(out, `field "`) {
		t.Errorf("advise mtp row %q (output %q): want %q and no field name", row, out, "no: "+why)
	}
}

// TestMTPAcceptOnMTPOnly: --mtp-accept is the acceptance of the MTP
// layers' drafts. A step drafting by another method does not take it (an
// EAGLE-3 step had been priced at 1.88 tokens per step "from --mtp-accept
// 0.5" instead of its head's 2.94), so predict refuses it there, and
// advise refuses it on a model without MTP layers, where it had priced
// every spec-* row; on a model with MTP layers advise prices its mtp row
// at it and leaves the others their own figures.
func TestMTPAcceptOnMTPOnly(t *testing.T) {
	checkUsageErrors(t, []usageCase{
		{"predict eagle3", []string{"predict", "--spec", "eagle3", "--mtp-accept", "0.5"},
			"--mtp-accept 0.5: want --spec mtp: it is the MTP layers' acceptance, and --spec eagle3 drafts without them"},
		{"predict ngram", []string{"predict", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--spec", "ngram", "--mtp-accept", "0.5"},
			"--mtp-accept 0.5: want --spec mtp"},
		{"advise without MTP layers", []string{"advise", "--mtp-accept", "0.5"},
			"--mtp-accept 0.5: want no MTP acceptance: kimi-k2.5-nvfp4 has no MTP layer"},
	})
	code, out, stderr := runCLI(t, "advise", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--mtp-accept", "0.5", "--no-sweep")
	if code != 0 {
		t.Fatalf("advise deepseek-v3 --mtp-accept 0.5: exit %d, %s", code, stderr)
	}
	mtpPriced := false
	for _, line := range strings.Split(out, "\n") {
		row := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(row, "mtp ") && strings.Contains(row, "at the acceptance priced"):
			// 1 + 0.5 at K = 1.
			mtpPriced = strings.Contains(row, "1.50 tokens per step at the acceptance priced (--mtp-accept 0.5)")
		case strings.HasPrefix(row, "spec-") && strings.Contains(row, "--mtp-accept"):
			t.Errorf("a spec-* row priced at --mtp-accept: %q", row)
		}
	}
	if !mtpPriced {
		t.Errorf("advise output has no mtp row at 1.50 tokens per step from --mtp-accept 0.5:\n%s", out)
	}
}

// TestSGLangDeepSeekBackendOnSM100: under SGLang on a B200, DeepSeek-V3
// runs trtllm_mla when no backend is named (SGLang's model-specific
// default; flashinfer was named and priced before), GLM-5 run sparse
// takes nsa (the backend SGLang sets for a DSA model) and run dense keeps
// flashinfer (not a DeepseekV3ForCausalLM), and with the perf DB the note
// on the stand-in MLA rows names the same backend the engine line does.
func TestSGLangDeepSeekBackendOnSM100(t *testing.T) {
	engineLine := func(out string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "engine ") {
				return l
			}
		}
		return ""
	}
	code, out, stderr := runCLI(t, "predict", "--engine", "sglang", "--model", "deepseek-v3", "--topo", "nvswitch:8xb200")
	if code != 0 || !strings.Contains(engineLine(out), "attention trtllm_mla") {
		t.Errorf("deepseek-v3: exit %d, engine line %q (%s); want trtllm_mla", code, engineLine(out), stderr)
	}
	code, out, stderr = runCLI(t, "predict", "--engine", "sglang", "--model", "glm-5-nvfp4", "--topo", "nvswitch:8xb200")
	if code != 0 || !strings.Contains(engineLine(out), "attention nsa") {
		t.Errorf("glm-5-nvfp4: exit %d, engine line %q (%s); want nsa", code, engineLine(out), stderr)
	}
	code, out, stderr = runCLI(t, "predict", "--engine", "sglang", "--model", "glm-5-nvfp4", "--topo", "nvswitch:8xb200", "--dense-dsa")
	if code != 0 || !strings.Contains(engineLine(out), "attention flashinfer") {
		t.Errorf("glm-5-nvfp4 --dense-dsa: exit %d, engine line %q (%s); want flashinfer", code, engineLine(out), stderr)
	}
	db := samplePerfDB(t, false)
	if db == "" {
		return
	}
	code, out, stderr = runCLI(t, "predict", "--engine", "sglang", "--model", "deepseek-v3", "--topo", "nvswitch:8xb200", "--perf-db", db)
	if code != 0 || !strings.Contains(out, "stand in for sglang@0.5's trtllm_mla") || strings.Contains(out, "sglang@0.5's flashinfer") {
		t.Errorf("deepseek-v3 with the tables: exit %d (%s); want the stand-in note naming trtllm_mla:\n%s", code, stderr, out)
	}
}
