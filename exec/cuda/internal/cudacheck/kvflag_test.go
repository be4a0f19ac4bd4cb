package main

import (
	"testing"

	"github.com/tpscope/tpscope/model"
)

// TestKVFlag: -kv reads a KV dtype as tpscope's --kv-dtype does (any case),
// and a weight format or unknown name is one line naming the flag with the
// KV dtypes' list.
func TestKVFlag(t *testing.T) {
	for in, want := range map[string]model.Dtype{"": "", "fp8": model.FP8, "FP8": model.FP8, "BF16": model.BF16} {
		if d, err := kvFlag(in); err != nil || d != want {
			t.Errorf("kvFlag(%q) = %q, %v; want %q", in, d, err, want)
		}
	}
	for _, in := range []string{"nvfp4", "int4-g32", "bogus"} {
		_, err := kvFlag(in)
		want := `-kv "` + in + `": want ` + model.KVDtypesAccepted
		if err == nil || err.Error() != want {
			t.Errorf("kvFlag(%q) error %v; want %q", in, err, want)
		}
	}
}
