package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPredictBadFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"tp does not divide heads", []string{"predict", "--tp", "3"}, 2, "tp"},
		{"batch 0", []string{"predict", "--batch", "0"}, 2, "--batch 0: want an integer from 1"},
		{"bad nccl proto", []string{"predict", "--nccl-proto", "LLX"}, 2, "--nccl-proto LLX"},
		{"bad nccl algo", []string{"predict", "--nccl-algo", "Rign"}, 2, "--nccl-algo Rign"},
		{"unknown model", []string{"predict", "--model", "nope"}, 2, `unknown model "nope"`},
		{"unknown topology", []string{"predict", "--topo", "nope"}, 2, "--topo nope"},
		{"bad p2p level", []string{"predict", "--p2p-level", "FOO"}, 2, "--p2p-level"},
		{"bad custom ar", []string{"predict", "--custom-ar", "threeshot"}, 2, "--custom-ar"},
		{"bad output", []string{"predict", "--output", "xml"}, 2, "--output"},
		{"more gpus than the box", []string{"predict", "--tp", "8", "--gpus", "4"}, 2, "needs 8 GPUs"},
		// glm-5 (BF16) needs ~190 GB of weights per GPU at TP 8.
		{"does not fit", []string{"predict", "--model", "glm-5"}, 1, "does not fit in GPU memory: short by"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := dispatch(tc.args, &out, &errb)
			if code != tc.code || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tc.code, errb.String(), tc.want)
			}
			if strings.Count(strings.TrimSpace(errb.String()), "\n") != 0 {
				t.Errorf("error is not one line: %q", errb.String())
			}
		})
	}
}

// The JSON holds the summary and one row per op whose times add up: the
// collective rows' us sum to comm_share x step_us.
func TestPredictJSON(t *testing.T) {
	var out, errb bytes.Buffer
	dir := t.TempDir()
	plot := filepath.Join(dir, "b.svg")
	code := dispatch([]string{"predict", "--kv-dtype", "bf16", "--cuda-graphs", "--nccl-proto", "LL", "--p2p-level", "SYS", "--output", "json", "--plot", plot}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got struct {
		StepUs        float64 `json:"step_us"`
		TokensPerS    float64 `json:"tokens_per_s"`
		CommShareFrac float64 `json:"comm_share_frac"`
		Ops           []struct {
			ID        string  `json:"id"`
			Kind      string  `json:"kind"`
			Bound     string  `json:"bound"`
			Us        float64 `json:"us"`
			FLOPs     float64 `json:"flops"`
			Bytes     float64 `json:"bytes"`
			CommBytes int64   `json:"comm_bytes"`
		} `json:"ops"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.StepUs <= 0 || got.TokensPerS <= 0 || len(got.Ops) == 0 {
		t.Fatalf("empty prediction: %+v", got)
	}
	comm := 0.0
	for _, o := range got.Ops {
		if o.ID == "" || o.Kind == "" || o.Bound == "" {
			t.Fatalf("op row without id/kind/bound: %+v", o)
		}
		if o.Kind == "collective" {
			comm += o.Us
		}
	}
	if d := comm/got.StepUs - got.CommShareFrac; d > 1e-9 || d < -1e-9 {
		t.Errorf("collective rows sum to %.1f us = %.4f of the step, comm_share %.4f", comm, comm/got.StepUs, got.CommShareFrac)
	}
	if fi, err := os.Stat(plot); err != nil || fi.Size() == 0 {
		t.Errorf("plot not written: %v", err)
	}
}

// TestPredictSGLangGraphMaxBS: on an L40S box at TP 8, SGLang captures
// decode graphs only up to batch 160 (its cuda_graph_max_bs below 60 GiB
// at tp_size >= 4): a batch of 200 runs eagerly (every kernel launched by
// the host, 47 us apiece, not one graph launch), the engine line says
// where graphs stop, and the memory line reserves for 160: 512 + 1.5 x
// 4096 + 2 x 160 + 1024 = 8000 MiB of 46068, mem_fraction_static
// 38068 / 46068 = 0.826. --graph-sizes up to 512 still wins (SGLang's
// --cuda-graph-bs): the batch replays its graph of 200 and the reserve
// counts 512.
func TestPredictSGLangGraphMaxBS(t *testing.T) {
	args := []string{"predict", "--engine", "sglang@0.5", "--topo", "pcie-2s:8xl40s", "--model", "tiny-mla-moe", "--tp", "8", "--batch", "200", "--context", "4096"}
	code, out, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"decode batch 200 (eager)",
		"decode graphs to batch 160 (cuda_graph_max_bs for 46068 MiB at tp_size 8; larger batches eager)",
		"mem_fraction_static 0.826, sglang@0.5's default: 46068 MiB GPU less 8000 MiB reserved for chunked_prefill_size 4096, cuda_graph_max_bs 160, tp_size 8",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	var stepUs, hostUs float64
	var kernels int
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "step ") {
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "step")), "%f us (%d kernels per rank, host launch %f us", &stepUs, &kernels, &hostUs)
		}
	}
	if kernels == 0 || hostUs < float64(kernels)*47 {
		t.Errorf("host launch %.0f us for %d kernels: want at least 47 us each (eager)", hostUs, kernels)
	}
	code, out, stderr = runCLI(t, append(args, "--graph-sizes", "1,8,200,512")...)
	if code != 0 {
		t.Fatalf("--graph-sizes: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"decode batch 200 (graph of 200 tokens)", "cuda_graph_max_bs 512, tp_size 8", "mem_fraction_static 0.811"} {
		if !strings.Contains(out, want) {
			t.Errorf("--graph-sizes: missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "decode graphs to batch") {
		t.Errorf("--graph-sizes: the engine line states the default capture's end:\n%s", out)
	}
}

// TestGPUsBeyondThePlan: --gpus N between the plan's GPU count and the
// box's prices nothing (the plan runs on the box's first GPUs, which the
// cut keeps), so it is refused in one line naming the flag, the plan's
// GPUs and the --gpus that names them, as a collective's option on a plan
// without that collective is. The premise is checked first: a TP-2 plan
// on the first 2 GPUs of an 8-GPU box and on the whole box prints the same
// JSON but for the box's name. --gpus of the plan's count or the box's
// stands, and advise, which prices plans on more GPUs, takes any.
func TestGPUsBeyondThePlan(t *testing.T) {
	base := []string{"predict", "--model", "tiny-mla-moe", "--topo", "rtxpro6000-2s", "--tp", "2", "--batch", "8", "--output", "json"}
	_, whole, _ := runCLI(t, base...)
	code, two, errs := runCLI(t, append(base, "--gpus", "2")...)
	if code != 0 {
		t.Fatalf("--gpus 2 --tp 2: exit %d, %s", code, errs)
	}
	if whole == "" || strings.Replace(two, `"rtxpro6000-2s/2gpu"`, `"rtxpro6000-2s"`, 1) != whole {
		t.Fatalf("tp2 on the first 2 GPUs is not priced as on the whole box:\n%s\nvs\n%s", two, whole)
	}
	if code, _, errs := runCLI(t, append(base, "--gpus", "8")...); code != 0 {
		t.Errorf("--gpus 8 (the whole box): exit %d, %s", code, errs)
	}
	want := "usage: --gpus 6: plan tp2 runs on the first 2 GPUs of rtxpro6000-2s and is priced the same on the first 6 as on all 8: leave it out, or give --gpus 2\n"
	for _, verb := range [][]string{{"predict"}, {"schedule"}, {"simulate", "--qps", "1"}} {
		code, _, errs := runCLI(t, append(verb, "--model", "tiny-mla-moe", "--topo", "rtxpro6000-2s", "--tp", "2", "--gpus", "6")...)
		if code != 2 || !strings.HasSuffix(errs, want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%s --tp 2 --gpus 6: exit %d, stderr %q; want exit 2 ending %q", verb, code, errs, want)
		}
	}
	if code, _, errs := runCLI(t, "advise", "--model", "tiny-mla-moe", "--topo", "rtxpro6000-2s", "--tp", "2", "--gpus", "6"); code != 0 {
		t.Errorf("advise --tp 2 --gpus 6: exit %d, %s", code, errs)
	}
}
