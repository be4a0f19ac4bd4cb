package model

import "testing"

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

// TestParseKVDtype: the KV-cache dtypes and their aliases parse; a
// weight format or an unknown name is refused with the KV dtypes' list
// (not every dtype's).
func TestParseKVDtype(t *testing.T) {
	for in, want := range map[string]Dtype{"bf16": BF16, "bfloat16": BF16, "fp16": FP16, "half": FP16, "fp8": FP8, "e4m3": FP8} {
		if got, err := ParseKVDtype(in); err != nil || got != want {
			t.Errorf("ParseKVDtype(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"int8", "nvfp4", "int4-g32", "fp8-block128", "fp32", ""} {
		_, err := ParseKVDtype(in)
		if err == nil || err.Error() != "want bf16, fp16 or fp8" {
			t.Errorf("ParseKVDtype(%q): %v, want \"want bf16, fp16 or fp8\"", in, err)
		}
	}
}
