package main

import "testing"

// TestBuildErrorsNameFlags: a scenario the schedule's builder refuses
// (model.Validate, the one check of plan, workload and build options) is
// a usage error naming the flag that set the field, before any work; a
// plan's after the model it does not fit.
func TestBuildErrorsNameFlags(t *testing.T) {
	checkUsageErrors(t, []usageCase{
		{"heads", []string{"predict", "--tp", "3"}, "kimi-k2.5-nvfp4: --tp 3: want a divisor of num_attention_heads (64)"},
		{"batch", []string{"predict", "--batch", "0"}, "--batch 0: want an integer from 1 to 1048576"},
		{"mtp without an mtp layer", []string{"predict", "--mtp", "2"}, "--mtp 2: want 0: kimi-k2.5-nvfp4 has no MTP layer"},
		{"dcp in prefill", []string{"predict", "--dcp", "2", "--phase", "prefill"}, "--dcp 2: want 1 in prefill"},
		{"dcp with dsa", []string{"predict", "--model", "glm-5", "--dense-dsa=false", "--dcp", "2"}, "glm-5: --dcp 2: want 1 with DSA sparse attention"},
		{"moe dispatch", []string{"predict", "--moe-dispatch", "a2a"}, `--moe-dispatch "a2a": want "alltoall" or "allgather_reducescatter"`},
	})
}
