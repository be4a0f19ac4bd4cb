package model

import (
	"strings"
	"testing"
)

func TestComputeDtype(t *testing.T) {
	for d, want := range map[Dtype]Dtype{
		FP32: FP32, BF16: BF16, FP16: BF16, INT4G32: BF16,
		FP8: FP8, FP8Block128: FP8, NVFP4: NVFP4,
	} {
		if got := d.ComputeDtype(); got != want {
			t.Errorf("%s.ComputeDtype() = %s, want %s", d, got, want)
		}
	}
}

// TestSummarizeKVCapacity: the summary's capacity for the selected KV dtype
// (auto, one of KVDtypes, or one outside them) is KVCapacity's.
func TestSummarizeKVCapacity(t *testing.T) {
	a, err := Preset(DefaultPreset)
	if err != nil {
		t.Fatal(err)
	}
	p := Plan{TP: 8}
	for _, kv := range []Dtype{"", BF16, FP8, FP16} {
		for _, spec := range []int{0, 1} {
			w := Workload{Phase: Decode, Batch: 1, Context: 4096, SpecTokens: spec, KVDtype: kv}
			s := Summarize(a, p, w, BuildOptions{}, 96e9, 0, nil)
			c := KVCapacity(a, p, w, BuildOptions{}, 96e9, 0)
			if s.KVDtype != string(w.KVDtypeFor(a)) || s.KVCapacityTokens != c.KVCapacityTokens || s.KVCacheBytes != c.KVBytes ||
				s.ActivationBytes != c.ActivationBytes || s.WeightsShortBytes != c.WeightsDoNotFitBy {
				t.Errorf("kv %q spec %d: summary %s %d tokens, %v KV B, %v act B, %v short; KVCapacity %+v",
					kv, spec, s.KVDtype, s.KVCapacityTokens, s.KVCacheBytes, s.ActivationBytes, s.WeightsShortBytes, c)
			}
			if kv == BF16 || kv == FP8 {
				if got := s.KVCapacityByDtype[string(kv)]; got != c.KVCapacityTokens {
					t.Errorf("kv %s: by-dtype capacity %d, want %d", kv, got, c.KVCapacityTokens)
				}
			}
		}
	}
}

// TestParseKVDtype: the KV-cache dtypes and their aliases parse, in any
// case (FP8 as engines and papers write it); a weight format or an
// unknown name is refused with the KV dtypes' list (not every dtype's).
func TestParseKVDtype(t *testing.T) {
	for in, want := range map[string]Dtype{"bf16": BF16, "bfloat16": BF16, "fp16": FP16, "half": FP16, "fp8": FP8, "e4m3": FP8,
		"FP8": FP8, "BF16": BF16, "Fp16": FP16, "FP8_E4M3": FP8, "BFloat16": BF16} {
		if got, err := ParseKVDtype(in); err != nil || got != want {
			t.Errorf("ParseKVDtype(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"int8", "nvfp4", "int4-g32", "fp8-block128", "fp32", "", "NVFP4", "FP8-BLOCK128"} {
		_, err := ParseKVDtype(in)
		if err == nil || err.Error() != "want bf16, fp16 or fp8" {
			t.Errorf("ParseKVDtype(%q): %v, want \"want bf16, fp16 or fp8\"", in, err)
		}
	}
}

// A dispatched activation costs its values and its scales: FP8 block-128
// activations carry one FP32 scale per 128 values of a token (DeepSeek's
// 1 x 128 activation groups), not the weights' one per 128 x 128 block:
// DeepSeek-V3's hidden 7168 gathers 7168 + 56 x 4 = 7392 B a token. A
// schedule's all-gather dispatch of 64 gathered tokens moves 64 x 7392 =
// 473,088 B; W4A16 has no 4-bit activations to dispatch.
func TestActivationBytesPerValue(t *testing.T) {
	for _, c := range []struct {
		d    Dtype
		want float64
	}{{BF16, 2}, {FP8, 1}, {FP8Block128, 1 + 4.0/128}, {NVFP4, 0.5 + 1.0/16}, {INT4G32, 0}} {
		if got := c.d.ActivationBytesPerValue(); got != c.want {
			t.Errorf("%s: %g B a value, want %g", c.d, got, c.want)
		}
	}
	a := mustPreset(t, "deepseek-v3")
	p := Plan{TP: 1, DP: 8, EP: true}
	w := Workload{Phase: Decode, Batch: 64, Context: 4096}
	s, err := BuildWith(a, p, w, BuildOptions{MoEDispatch: DispatchAllGather, DispatchDtype: FP8Block128})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range s.Ranks[0] {
		if o.Role == RoleMoEDispatch {
			found = true
			if o.CommBytes != 64*(7168+7168/128*4) {
				t.Fatalf("%s: %d B, want 473088", o.ID, o.CommBytes)
			}
		}
	}
	if !found {
		t.Fatal("no moe.dispatch in the step")
	}
	if _, err := BuildWith(a, p, w, BuildOptions{MoEDispatch: DispatchAllGather, DispatchDtype: INT4G32}); err == nil ||
		!strings.Contains(err.Error(), "dispatch_dtype") || !strings.Contains(err.Error(), "activations travel in") {
		t.Errorf("int4-g32 dispatch: %v, want a refusal naming dispatch_dtype", err)
	}
}
