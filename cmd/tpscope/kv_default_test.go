package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/tpscope/tpscope/internal/testfix"
	"github.com/tpscope/tpscope/model"
)

// glm5FP8 is GLM-5-FP8's config (a DSA model: index_topk 2048; block-FP8
// weights, no KV scheme).
const glm5FP8 = "../../serving/testdata/models/glm-5-fp8"

// KV bytes a token of GLM-5 takes on each GPU over its 78 layers (the
// latent cache is replicated under TP; no MTP layer without speculation):
// FP8, the sparse FlashMLA layout of 656 B (512 fp8 latent values, 4
// fp32 tile scales, 64 bf16 rope values) and the indexer's key cache of
// 132 B (128 fp8 values and an fp32 scale); bf16, 576 values x 2 B and the
// same indexer cache.
const (
	glm5FP8KVBytes  = 78 * (512 + 4*4 + 64*2 + 128 + 4) // 61464
	glm5BF16KVBytes = 78 * (576*2 + 128 + 4)            // 100152
)

// TestKVDefaultSGLangDSA: with no --kv-dtype, SGLang 0.5 runs a DSA
// model's KV cache in fp8_e4m3 on SM100 and bfloat16 on SM90 (server_args
// _set_default_nsa_kv_cache_dtype, 'major >= 10'), and every verb prices
// the one dtype: predict's step, memory and capacity equal those of an
// explicit --kv-dtype fp8 and say whose default it is (the workload line
// and kv_default); simulate, model show and advise run and name the same
// dtype; plan's fp8 row at the same configuration is predict's. An
// explicit --kv-dtype bf16 wins; vLLM 0.24, with no DSA default, keeps the
// checkpoint's (bf16).
func TestKVDefaultSGLangDSA(t *testing.T) {
	// predict's defaults are batch 1, context 4096, which plan is given.
	sg := []string{"--engine", "sglang@0.5", "--model", glm5FP8, "--tp", "8"}
	b200 := append(append([]string{}, sg...), "--topo", "nvswitch:8xb200")
	h200 := append(append([]string{}, sg...), "--topo", "h200-nvswitch")

	type mem struct {
		PerToken float64 `json:"kv_bytes_per_token"`
		Capacity int64   `json:"kv_capacity_tokens"`
	}
	type pred struct {
		Workload  string     `json:"workload"`
		StepUs    float64    `json:"step_us"`
		Memory    mem        `json:"memory"`
		KVDefault *kvDefault `json:"kv_default"`
	}
	predict := func(args ...string) pred {
		t.Helper()
		code, out, errs := runCLI(t, append([]string{"predict", "--output", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("predict %v: exit %d: %s", args, code, errs)
		}
		var p pred
		if err := json.Unmarshal([]byte(out), &p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	b200Default := kvDefault{"fp8", "sglang@0.5", "for a DSA model on SM100"}
	def := predict(b200...)
	if !strings.Contains(def.Workload, "kv=fp8") || !def.KVDefault.is(b200Default) || def.Memory.PerToken != glm5FP8KVBytes {
		t.Errorf("B200 default: workload %q, kv_default %s, %.0f B/token; want kv=fp8, %s, %d", def.Workload, def.KVDefault, def.Memory.PerToken, b200Default, glm5FP8KVBytes)
	}
	named := predict(append(b200, "--kv-dtype", "fp8")...)
	if named.StepUs != def.StepUs || named.Memory != def.Memory || named.KVDefault != nil {
		t.Errorf("--kv-dtype fp8: step %v, memory %+v, kv_default %s; want the default's %v, %+v and none", named.StepUs, named.Memory, named.KVDefault, def.StepUs, def.Memory)
	}
	bf := predict(append(b200, "--kv-dtype", "bf16")...)
	if !strings.Contains(bf.Workload, "kv=bf16") || bf.KVDefault != nil || bf.Memory.PerToken != glm5BF16KVBytes {
		t.Errorf("--kv-dtype bf16 on B200: workload %q, kv_default %s, %.0f B/token; want kv=bf16, none, %d", bf.Workload, bf.KVDefault, bf.Memory.PerToken, glm5BF16KVBytes)
	}
	// One pool, two dtypes: each capacity is the pool over its bytes a
	// token, rounded down, so they hold the same bytes to within one
	// bf16 token.
	if got := math.Abs(float64(def.Memory.Capacity*glm5FP8KVBytes - bf.Memory.Capacity*glm5BF16KVBytes)); got >= glm5BF16KVBytes {
		t.Errorf("capacities %d (fp8) and %d (bf16) hold %.0f B apart; want the same pool", def.Memory.Capacity, bf.Memory.Capacity, got)
	}
	hp := predict(h200...)
	if !strings.Contains(hp.Workload, "kv=bf16") || !hp.KVDefault.is(kvDefault{"bf16", "sglang@0.5", "for a DSA model on SM90"}) || hp.Memory.PerToken != glm5BF16KVBytes {
		t.Errorf("H200 default: workload %q, kv_default %s, %.0f B/token; want kv=bf16 by SGLang's SM90 default, %d", hp.Workload, hp.KVDefault, hp.Memory.PerToken, glm5BF16KVBytes)
	}
	vl := predict("--model", glm5FP8, "--tp", "8", "--topo", "nvswitch:8xb200")
	if !strings.Contains(vl.Workload, "kv=bf16") || vl.KVDefault != nil {
		t.Errorf("vLLM on B200: workload %q, kv_default %s; want the checkpoint's bf16 and no engine default", vl.Workload, vl.KVDefault)
	}

	// The table says whose default it is.
	const note = "kv fp8 (sglang@0.5's default for a DSA model on SM100)"
	if l := predictLines(t, b200...)["workload"]; !strings.Contains(l, note) {
		t.Errorf("predict workload line %q, want %q", l, note)
	}
	// simulate runs the same dtype and says so.
	code, out, errs := runCLI(t, append([]string{"simulate", "--concurrency", "2", "--isl", "128", "--osl", "8", "--requests", "4"}, b200...)...)
	if code != 0 || !strings.Contains(strings.SplitN(out, "\n", 2)[0], note) {
		t.Errorf("simulate: exit %d (%s), first line %q; want %q", code, errs, strings.SplitN(out, "\n", 2)[0], note)
	}
	var simJS struct {
		KVDtype   string     `json:"kv_dtype"`
		KVDefault *kvDefault `json:"kv_default"`
	}
	runJSONInto(t, &simJS, append([]string{"simulate", "--output", "json", "--concurrency", "2", "--isl", "128", "--osl", "8", "--requests", "4"}, b200...)...)
	if simJS.KVDtype != "fp8" || !simJS.KVDefault.is(b200Default) {
		t.Errorf("simulate JSON: kv_dtype %q, kv_default %s; want fp8, %s", simJS.KVDtype, simJS.KVDefault, b200Default)
	}
	// model show selects it.
	var show struct {
		KVDtype   string     `json:"kv_dtype"`
		KVDefault *kvDefault `json:"kv_default"`
	}
	runJSONInto(t, &show, "model", "show", "--output", "json", "--engine", "sglang@0.5", "--model", glm5FP8, "--tp", "8", "--topo", "nvswitch:8xb200")
	if show.KVDtype != "fp8" || !show.KVDefault.is(b200Default) {
		t.Errorf("model show: kv_dtype %q, kv_default %s; want fp8, %s", show.KVDtype, show.KVDefault, b200Default)
	}
	// advise's baseline is it.
	var adv struct {
		Workload  string     `json:"workload"`
		KVDefault *kvDefault `json:"kv_default"`
		Baseline  struct {
			StepUs float64 `json:"step_us"`
		} `json:"baseline"`
	}
	runJSONInto(t, &adv, append([]string{"advise", "--output", "json"}, b200...)...)
	if !strings.Contains(adv.Workload, "kv=fp8") || !adv.KVDefault.is(b200Default) || adv.Baseline.StepUs != def.StepUs {
		t.Errorf("advise: workload %q, kv_default %s, baseline step %v; want kv=fp8, %s, predict's %v", adv.Workload, adv.KVDefault, adv.Baseline.StepUs, b200Default, def.StepUs)
	}
	// plan sweeps both dtypes; its fp8 row is predict's default.
	var pl struct {
		Points []struct {
			Plan     string  `json:"plan"`
			Batch    int     `json:"batch"`
			KVDtype  string  `json:"kv_dtype"`
			StepUs   float64 `json:"step_us"`
			Capacity int64   `json:"kv_capacity_tokens"`
		} `json:"points"`
	}
	runJSONInto(t, &pl, "plan", "--output", "json", "--engine", "sglang@0.5", "--model", glm5FP8, "--topo", "nvswitch:8xb200", "--tp", "8", "--batch", "1", "--context", "4096")
	found := false
	for _, p := range pl.Points {
		if p.Plan == "tp8" && p.Batch == 1 && p.KVDtype == "fp8" {
			found = true
			if math.Abs(p.StepUs-def.StepUs) > 1e-6*def.StepUs || p.Capacity != def.Memory.Capacity {
				t.Errorf("plan tp8 b1 fp8: step %v, capacity %d; want predict's %v, %d", p.StepUs, p.Capacity, def.StepUs, def.Memory.Capacity)
			}
		}
	}
	if !found {
		t.Errorf("plan has no tp8 batch-1 fp8 point: %+v", pl.Points)
	}
}

// TestKVDefaultIgnoredScheme: a compressed-tensors checkpoint's FP8 KV
// scheme is not what vLLM 0.24's or SGLang 0.5's 'auto' reads for an MLA
// model (vLLM resolves only a modelopt quant_method's scheme and
// MLAAttention keeps the cache dtype it is given; SGLang reads
// kv_cache_quant_algo, which compressed-tensors' config does not set):
// Kimi-K2.5 with such a scheme runs a bf16 cache there, 61 layers x 576
// values x 2 B = 70272 B a token, and says so; --kv-dtype fp8 wins (61 x
// 576 x 1 B = 35136 B); tpscope's executor keeps the checkpoint's fp8.
func TestKVDefaultIgnoredScheme(t *testing.T) {
	path := testfix.EditedPreset(t, "kimi-k2.5", `"kv_cache_scheme": null`, `"kv_cache_scheme": {"num_bits": 8, "type": "float"}`)
	base := []string{"--model", path, "--tp", "8", "--topo", "h200-nvswitch"}
	type pred struct {
		Workload string `json:"workload"`
		Memory   struct {
			PerToken float64 `json:"kv_bytes_per_token"`
		} `json:"memory"`
		KVDefault *struct {
			Why string `json:"why"`
		} `json:"kv_default"`
	}
	for _, c := range []struct {
		args     []string
		kv       string
		perToken float64
		why      string
	}{
		{nil, "bf16", 61 * 576 * 2, "for a compressed-tensors KV scheme, which its auto does not read: the model's dtype"},
		{[]string{"--engine", "sglang@0.5"}, "bf16", 61 * 576 * 2, "for a compressed-tensors KV scheme, which its auto does not read: the model's dtype"},
		{[]string{"--kv-dtype", "fp8"}, "fp8", 61 * 576, ""},
		{[]string{"--engine", "executor"}, "fp8", 61 * 576, ""},
	} {
		var p pred
		runJSONInto(t, &p, append(append([]string{"predict", "--output", "json"}, base...), c.args...)...)
		why := ""
		if p.KVDefault != nil {
			why = p.KVDefault.Why
		}
		if !strings.Contains(p.Workload, "kv="+c.kv) || p.Memory.PerToken != c.perToken || why != c.why {
			t.Errorf("%v: workload %q, %.0f B/token, why %q; want kv=%s, %.0f, %q", c.args, p.Workload, p.Memory.PerToken, why, c.kv, c.perToken, c.why)
		}
	}
}

// kvDefault is sim.KVDefault's JSON.
type kvDefault struct {
	Dtype  string `json:"dtype"`
	Engine string `json:"engine"`
	Why    string `json:"why"`
}

func (d *kvDefault) is(want kvDefault) bool { return d != nil && *d == want }

// runJSONInto runs a command line that writes JSON and decodes it into v.
func runJSONInto(t *testing.T, v any, args ...string) {
	t.Helper()
	code, out, errs := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errs)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
}

// TestKVDefaultNamedOverRecorded: --kv-dtype over a scenario whose KV
// dtype the engine chose (a recorded one, as compare and calibrate
// re-predict) names it: the scenario says the engine chose it no more.
func TestKVDefaultNamedOverRecorded(t *testing.T) {
	bind := func(args ...string) *scenarioFlags {
		t.Helper()
		f := newScenarioFlags()
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		f.Bind(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f
	}
	sc, err := bind("--engine", "sglang@0.5", "--model", glm5FP8, "--topo", "nvswitch:8xb200").scenario()
	if err != nil || sc.KVDefault == nil || sc.Workload.KVDtype != model.FP8 {
		t.Fatalf("scenario: kv %q, kv_default %v, %v; want fp8 by SGLang's default", sc.Workload.KVDtype, sc.KVDefault, err)
	}
	if err := bind("--kv-dtype", "bf16").override()(&sc); err != nil {
		t.Fatal(err)
	}
	if sc.Workload.KVDtype != model.BF16 || sc.KVDefault != nil {
		t.Errorf("after --kv-dtype bf16: kv %q, kv_default %v; want bf16 and none", sc.Workload.KVDtype, sc.KVDefault)
	}
}
