package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestNVFP4ExpertsOnSM90Refused: an H200 has no FP4 tensor cores, and no
// engine runs NVFP4 experts through a CUTLASS grouped GEMM there (vLLM's
// FlashInferExperts takes the NVFP4 scheme on SM100 only, SGLang refuses
// modelopt_fp4 below 10.0, TensorRT-LLM lists no FP4 for Hopper): naming
// that kernel is refused in one line naming --moe-kernel, and SGLang and
// TensorRT-LLM are refused for such a checkpoint; vLLM's default stays
// its weight-only Marlin FP4 path.
func TestNVFP4ExpertsOnSM90Refused(t *testing.T) {
	box := []string{"predict", "--model", "kimi-k2.5-nvfp4", "--topo", "h200-nvswitch", "--batch", "8"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--engine", "vllm", "--moe-kernel", "flashinfer_cutlass"}, "--moe-kernel flashinfer_cutlass: vllm@0.24's MoE kernel flashinfer_cutlass runs nvfp4 experts on sm100, sm120 only"},
		{[]string{"--engine", "sglang", "--moe-kernel", "flashinfer_cutlass"}, "--moe-kernel flashinfer_cutlass: sglang@0.5's MoE kernel flashinfer_cutlass runs nvfp4 experts on sm100, sm120 only"},
		{[]string{"--engine", "trtllm", "--moe-kernel", "cutlass"}, "--moe-kernel cutlass: trtllm@1.3's MoE kernel cutlass runs nvfp4 experts on sm100 only"},
		{[]string{"--engine", "sglang"}, "--engine sglang@0.5: sglang@0.5 has no MoE kernel for nvfp4 experts on sm90"},
		{[]string{"--engine", "trtllm"}, "--engine trtllm@1.3: trtllm@1.3 has no MoE kernel for nvfp4 experts on sm90"},
	} {
		var out, errb bytes.Buffer
		code := dispatch(append(append([]string{}, box...), c.args...), &out, &errb)
		msg := strings.TrimSpace(errb.String())
		if code != 2 || out.Len() != 0 || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
			t.Errorf("%v: exit %d, stdout %d bytes, stderr %q; want exit 2 and one line with %q", c.args, code, out.Len(), msg, c.want)
		}
	}
	var out, errb bytes.Buffer
	if code := dispatch(append(box, "--engine", "vllm"), &out, &errb); code != 0 || !strings.Contains(out.String(), "MoE marlin for nvfp4 experts") {
		t.Errorf("vllm's default: exit %d, stderr %q; want Marlin's weight-only FP4 priced:\n%s", code, errb.String(), out.String())
	}
}
