package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/serving"
)

// TestServingOverheadsOrigin: overheads are one engine's host time and
// its kernels' error on one GPU. A file fitted under SGLang on the B200
// box is refused under another engine (vLLM, the default) and on another
// GPU (the default RTX PRO 6000 box), one line each; on the B200 box
// under SGLang it applies, with a caveat line when the model differs, or
// when the file does not record the plan, kernels and options (written
// before they were), and without one (written before its origin was
// recorded, or a bare object) with a caveat saying so. calibrate
// --serving records the deployment it fitted on, the plan, the attention
// backend, the MoE kernel and the options included (README's DSR1 run:
// tp8-ep, trtllm_mla, flashinfer_trtllm, "ar-norm-fusion
// attention-backend=trtllm_mla cuda-graphs"): on that deployment they
// apply without a caveat; at TP 4 with the engine's own attention
// backend (flashinfer) the caveat names the plan, the backend and the
// options.
func TestServingOverheadsOrigin(t *testing.T) {
	dir := t.TempDir()
	fitted := filepath.Join(dir, "b200-sglang.json")
	if err := os.WriteFile(fitted, []byte(`{"overheads": {"prefill_step_us": 190000, "decode_scale": 0.95},
		"fitted_on": {"engine": "sglang@0.5", "topology": "nvswitch:8xb200", "gpu": "NVIDIA B200", "model": "deepseek-v3"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(dir, "old.json")
	if err := os.WriteFile(old, []byte(`{"overheads": {"decode_scale": 0.95}, "source": ["fitted on r.json"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	load := []string{"simulate", "--qps", "2", "--requests", "20", "--timeline", "0"}
	refusals := []struct {
		name string
		args []string
		want string
	}{
		{"another engine", []string{"--serving-overheads", fitted},
			"--serving-overheads " + fitted + ": want overheads fitted under this run's engine: fitted under sglang@0.5, this run is vllm@0.24"},
		{"another GPU", []string{"--engine", "sglang", "--serving-overheads", fitted},
			"--serving-overheads " + fitted + ": want overheads fitted on this box's GPU: fitted on NVIDIA B200 (nvswitch:8xb200), the box rtxpro6000-2s has NVIDIA RTX PRO 6000"},
	}
	for _, c := range refusals {
		code, out, errs := runCLI(t, append(append([]string(nil), load...), c.args...)...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 || out != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", c.name, code, out, errs, c.want)
		}
	}
	b200 := []string{"--engine", "sglang", "--topo", "nvswitch:8xb200"}
	for _, c := range []struct {
		name string
		args []string
		note string // "" = no caveat line
	}{
		{"the plan and kernels not recorded", []string{"--model", "deepseek-v3", "--serving-overheads", fitted},
			"overheads from " + fitted + " record the engine, box and model they were fitted on, not the plan, kernels and options: applied as given"},
		{"another model", []string{"--model", "kimi-k2.5", "--serving-overheads", fitted},
			"overheads from " + fitted + " were fitted on another deployment (model deepseek-v3, not kimi-k2.5; the plan, kernels and options not recorded): applied as given"},
		{"origin not recorded", []string{"--serving-overheads", old},
			"overheads from " + old + ": where they were fitted is not recorded (engine, GPU, model): applied as given"},
	} {
		code, out, errs := runCLI(t, append(append(append([]string(nil), load...), b200...), c.args...)...)
		if code != 0 {
			t.Errorf("%s: exit %d, stderr %q", c.name, code, errs)
			continue
		}
		if !strings.Contains(out, "; overheads step 0 us") {
			t.Errorf("%s: the engine line names no overheads:\n%s", c.name, out)
		}
		if c.note == "" && strings.Contains(out, "overheads from ") {
			t.Errorf("%s: a caveat where none is due:\n%s", c.name, out)
		}
		if c.note != "" && !strings.Contains(out, "\n"+c.note+"\n") {
			t.Errorf("%s: output lacks the line %q:\n%s", c.name, c.note, out)
		}
	}

	o := filepath.Join(dir, "fitted.json")
	code, _, errs := runCLI(t, append([]string{"calibrate", "--serving", dsr1Dir + "conc16.json", "-o", o}, dsr1Run...)...)
	if code != 0 {
		t.Fatalf("calibrate --serving: exit %d, stderr %q", code, errs)
	}
	f, err := serving.LoadOverheadsFile(o)
	if err != nil {
		t.Fatal(err)
	}
	modelDir, err := filepath.Abs("../../serving/testdata/models/deepseek-r1-0528-fp4")
	if err != nil {
		t.Fatal(err)
	}
	want := serving.OverheadsOrigin{Engine: engprof.Ref{Name: "sglang", Version: "0.5"}, Topology: "nvswitch:8xb200", GPU: "NVIDIA B200", Model: modelDir,
		Plan: "tp8-ep", Attention: "trtllm_mla", MoEKernel: "flashinfer_trtllm", Options: "ar-norm-fusion attention-backend=trtllm_mla cuda-graphs",
		KVDtype: "fp8", Scheduler: "max-num-seqs=256 max-num-batched-tokens=16384 block-size=64 scheduler-recv-interval=30 stream-interval=10"}
	// block-size=64: the page SGLang forces under trtllm_mla.
	if f.FittedOn == nil || *f.FittedOn != want {
		t.Errorf("calibrate --serving records fitted_on %+v, want %+v", f.FittedOn, want)
	}
	for _, c := range []struct {
		name string
		args []string
		note string
	}{
		{"the deployment fitted", dsr1Run, ""},
		// The engine's own attention for DeepSeek-R1 on a B200 is the
		// fitted trtllm_mla (SGLang's model-specific default), so only the
		// options that named it differ.
		{"TP 4 with the engine's attention", withFlags(dsr1, "--tp", "4"),
			"overheads from " + o + " were fitted on another deployment (plan tp8-ep, not tp4-ep; options ar-norm-fusion attention-backend=trtllm_mla cuda-graphs, not cuda-graphs; " +
				"scheduler max-num-seqs=256 max-num-batched-tokens=16384 block-size=64 scheduler-recv-interval=30 stream-interval=10, not max-num-seqs=256 max-num-batched-tokens=16384 block-size=64): applied as given"},
		// The decode scale is the step's kernels' error, the attention's
		// over the KV cache included: a BF16 cache is other kernels.
		{"another KV dtype", withFlags(dsr1Run, "--kv-dtype", "bf16"),
			"overheads from " + o + " were fitted on another deployment (KV dtype fp8, not bf16): applied as given"},
		// The scheduler's settings decide which steps the terms were fitted
		// to: SGLang's receive interval of 30 held arrivals back while the
		// prefill step's host time was fitted.
		{"the default scheduler settings", withoutFlag(withFlags(dsr1Run, "--scheduler-recv-interval", "1"), "max-num-seqs"),
			"overheads from " + o + " were fitted on another deployment (scheduler max-num-seqs=256 max-num-batched-tokens=16384 block-size=64 scheduler-recv-interval=30 stream-interval=10, not max-num-seqs=kv-pool max-num-batched-tokens=16384 block-size=64 stream-interval=10): applied as given"},
	} {
		code, out, errs := runCLI(t, append(append(append(append([]string(nil), load...), "--engine", "sglang"), c.args...), "--serving-overheads", o)...)
		if code != 0 {
			t.Errorf("%s: exit %d, stderr %q", c.name, code, errs)
			continue
		}
		if c.note == "" && strings.Contains(out, "overheads from ") {
			t.Errorf("%s: a caveat where none is due:\n%s", c.name, out)
		}
		if c.note != "" && !strings.Contains(out, "\n"+c.note+"\n") {
			t.Errorf("%s: output lacks the line %q:\n%s", c.name, c.note, out)
		}
	}
}
