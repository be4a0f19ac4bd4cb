package model

import (
	"fmt"
	"strings"
)

// Dtype names a storage format for weights, activations or the KV cache,
// including how its scales are stored. Its cost is BytesPerValue, which
// counts the scale overhead (an NVFP4 value costs 0.5 B of payload plus
// 1/16 B of FP8 block scale).
type Dtype string

// The dtypes tpscope models. The scale layouts follow the checkpoints in
// ../shared/reference/configs: NVIDIA ModelOpt NVFP4 (group 16, FP8 E4M3
// scale per group, one FP32 global scale per tensor), DeepSeek FP8
// (weight_block_size [128,128], one FP32 scale per 128x128 block),
// compressed-tensors pack-quantized INT4 (group 32, symmetric, one BF16 scale
// per group).
const (
	FP32        Dtype = "fp32"
	BF16        Dtype = "bf16"
	FP16        Dtype = "fp16"
	FP8         Dtype = "fp8"          // e4m3, per-tensor scale
	FP8Block128 Dtype = "fp8-block128" // e4m3, FP32 scale per 128x128 block
	NVFP4       Dtype = "nvfp4"        // e2m1, FP8 scale per 16 values
	INT4G32     Dtype = "int4-g32"     // W4A16, BF16 scale per 32 values
)

// BytesPerValue is the storage cost of one value in bytes, scales included.
// Per-tensor scales (one number per matrix) are negligible and not counted.
func (d Dtype) BytesPerValue() float64 {
	switch d {
	case FP32:
		return 4
	case BF16, FP16:
		return 2
	case FP8:
		return 1
	case FP8Block128:
		return 1 + 4.0/(128*128)
	case NVFP4:
		return 0.5 + 1.0/16
	case INT4G32:
		return 0.5 + 2.0/32
	}
	return 0
}

// ActivationBytesPerValue is the cost of one activation value quantized
// to d on the fly, scales included, as an MoE dispatch moves it: an
// FP8Block128 activation carries one FP32 scale per 128 values of its
// token (the 1 x 128 activation groups of DeepSeek's FP8 recipe, beside
// the weights' 128 x 128 blocks; vLLM's per_token_group_quant_fp8), an
// NVFP4 one its FP8 scale per 16, a per-tensor FP8 one none worth
// counting. 0 for INT4G32: W4A16 experts take 16-bit activations.
func (d Dtype) ActivationBytesPerValue() float64 {
	switch d {
	case FP8Block128:
		return 1 + 4.0/128
	case INT4G32:
		return 0
	}
	return d.BytesPerValue()
}

// ComputeDtype is the dtype the tensor cores run for a weight stored in d
// with activations in 16 bits: NVFP4 runs as FP4 (activations are quantized
// to FP4 too in ModelOpt NVFP4 W4A4), FP8 as FP8, INT4 W4A16 as BF16 after
// dequantization.
func (d Dtype) ComputeDtype() Dtype {
	switch d {
	case INT4G32, FP16, BF16:
		return BF16
	case FP8Block128:
		return FP8
	}
	return d
}

// Valid reports whether d is one of the known dtypes.
func (d Dtype) Valid() bool { return d.BytesPerValue() > 0 }

// KVDtypesAccepted names the KV-cache dtypes a workload may have (BF16,
// FP16, FP8: the ones the engines store the cache in), as the messages
// of ParseKVDtype and Validate say them.
const KVDtypesAccepted = "bf16, fp16 or fp8"

// IsKVDtype reports whether d is a KV-cache dtype a workload may have.
func IsKVDtype(d Dtype) bool { return d == BF16 || d == FP16 || d == FP8 }

// ParseKVDtype is ParseDtype of a KV-cache dtype: a name (or alias) of
// BF16, FP16 or FP8, in any case (engines and papers write FP8, vLLM's
// flag fp8); any other, a weight format included, is refused with the
// KV dtypes' list.
func ParseKVDtype(s string) (Dtype, error) {
	d, err := ParseDtype(strings.ToLower(s))
	if err != nil || !IsKVDtype(d) {
		return "", fmt.Errorf("want %s", KVDtypesAccepted)
	}
	return d, nil
}

// ParseDtype accepts the names above plus common aliases (fp8_e4m3, auto is
// not accepted here: callers resolve it against the checkpoint).
func ParseDtype(s string) (Dtype, error) {
	switch s {
	case "fp32", "float32":
		return FP32, nil
	case "bf16", "bfloat16":
		return BF16, nil
	case "fp16", "float16", "half":
		return FP16, nil
	case "fp8", "fp8_e4m3", "fp8-e4m3", "e4m3":
		return FP8, nil
	case "fp8-block128", "fp8_block128":
		return FP8Block128, nil
	case "nvfp4", "fp4":
		return NVFP4, nil
	case "int4-g32", "int4", "w4a16":
		return INT4G32, nil
	}
	return "", fmt.Errorf("unknown dtype %q: want one of bf16, fp16, fp8, fp8-block128, nvfp4, int4-g32, fp32", s)
}
