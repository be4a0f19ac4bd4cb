package engine

import (
	"strings"
	"testing"
)

// TestTRTLLMAllReduceTable: TensorRT-LLM's AllReduceStrategy AUTO picks
// by customAllReduceUtils.h's lookup table (selectStrategyLookUpTable),
// keyed by SM bucket (90 below SM 10.0, 100 from it), TP, fusion op, the
// hidden size rounded down to a power of two (7,168 and 6,144 read the
// 4,096 row) and the token count rounded down to a power of two, after
// allreduceOp.cpp's fallback to NCCL above the 64 MiB workspace. The
// expected cells are read off the source's rows (SM90, TP 8,
// RESIDUAL_RMS_NORM, hidden 4096: {4,4,4,4,4,4,4,0,...}; plain:
// {4,4,4,4,4,4,4,0,5,5,0,...}; SM100, TP 8, RESIDUAL_RMS_NORM, 4096:
// {4 x 9, 5, 5, 5, 5, 0, 0}); the workspace cut is 67,108,864 bytes over
// 7,168 x 2 bytes a token = 4,681 tokens.
func TestTRTLLMAllReduceTable(t *testing.T) {
	p := mustLookup(t, "trtllm")
	type pick struct{ ok, one bool }
	for _, c := range []struct {
		cc     string
		hidden int64
		fused  bool
		tokens int64
		want   pick
	}{
		{"9.0", 7168, true, 1, pick{true, true}},
		{"9.0", 7168, true, 127, pick{true, true}},
		{"9.0", 7168, true, 128, pick{false, false}},
		{"9.0", 7168, true, 4096, pick{false, false}},
		{"9.0", 6144, true, 100, pick{true, true}}, // GLM-5's hidden size, the same row
		{"9.0", 7168, false, 127, pick{true, true}},
		{"9.0", 7168, false, 128, pick{false, false}},
		{"9.0", 7168, false, 256, pick{true, false}},
		{"9.0", 7168, false, 1023, pick{true, false}},
		{"9.0", 7168, false, 1024, pick{false, false}},
		{"10.0", 7168, true, 511, pick{true, true}},
		{"10.0", 7168, true, 512, pick{true, false}},
		{"10.0", 7168, true, 4681, pick{true, false}},
		{"10.0", 7168, true, 4682, pick{false, false}}, // past the 64 MiB workspace
		{"10.3", 7168, true, 300, pick{true, true}},    // every SM from 10.0 reads the SM100 table
	} {
		m := ARMessage{Bytes: c.tokens * c.hidden * 2, Tokens: c.tokens, Hidden: c.hidden, Fused: c.fused}
		ok, one := p.AllReduce.Pick(c.cc, 8, true, m)
		if (pick{ok, one}) != c.want {
			t.Errorf("SM %s, TP 8, hidden %d, fused %v, %d tokens: custom %v, one-shot %v; want %v, %v", c.cc, c.hidden, c.fused, c.tokens, ok, one, c.want.ok, c.want.one)
		}
	}
	// Without NVLink between every pair the engine falls back to NCCL.
	if ok, _ := p.AllReduce.Pick("9.0", 8, false, ARMessage{Bytes: 7168 * 2, Tokens: 1, Hidden: 7168, Fused: true}); ok {
		t.Error("TP 8 without NVLink: custom all-reduce; want NCCL")
	}
	want := "one-shot up to 127 tokens, NCCL (norm apart) from 128 tokens"
	if got := p.AllReduce.TableBands("9.0", 8, ARFusionResidualRMSNorm, 7168); got != want {
		t.Errorf("SM90 bands %q, want %q", got, want)
	}
	want = "one-shot up to 511 tokens, two-shot up to 4681 tokens, NCCL (norm apart) from 4682 tokens"
	if got := p.AllReduce.TableBands("10.0", 8, ARFusionResidualRMSNorm, 7168); got != want {
		t.Errorf("SM100 bands %q, want %q", got, want)
	}
}

// TestStrategyTableRefused: a malformed strategy table is refused in one
// line naming the row's field and what the engine keys by.
func TestStrategyTableRefused(t *testing.T) {
	base := string(mustRead(t, "profiles/trtllm-1.3.yaml"))
	const row = `- {sm: 90, tp: 8, fusion: residual_rms_norm, hidden: 4096, codes: "444444400000000"}`
	if !strings.Contains(base, row) {
		t.Fatalf("the TensorRT-LLM profile lacks %q", row)
	}
	for _, c := range []struct{ edit, want string }{
		{`- {sm: 95, tp: 8, fusion: residual_rms_norm, hidden: 4096, codes: "444444400000000"}`, ".sm: 95: want 90 (every GPU before SM 10.0) or 100"},
		{`- {sm: 90, tp: 6, fusion: residual_rms_norm, hidden: 4096, codes: "444444400000000"}`, ".tp: 6: want a power of two >= 2"},
		{`- {sm: 90, tp: 8, fusion: rms_norm, hidden: 4096, codes: "444444400000000"}`, `.fusion: "rms_norm": want none or residual_rms_norm`},
		{`- {sm: 90, tp: 8, fusion: residual_rms_norm, hidden: 7168, codes: "444444400000000"}`, ".hidden: 7168: want a power of two"},
		{`- {sm: 90, tp: 8, fusion: residual_rms_norm, hidden: 4096, codes: "44444440000000x"}`, `.codes: "44444440000000x": want 1 to 62 strategy codes`},
		{`- {sm: 90, tp: 8, fusion: residual_rms_norm, hidden: 8192, codes: "444444400000000"}`, "sm 90, tp 8, fusion residual_rms_norm, hidden 8192 stated twice"},
	} {
		err := parseEdited(base, row, c.edit)
		if !oneLineWith(err, "custom_allreduce.strategy_table") || !oneLineWith(err, c.want) {
			t.Errorf("%s: error %v; want one line naming custom_allreduce.strategy_table and %q", c.edit, err, c.want)
		}
	}
	err := parseEdited(base, "  max_bytes: 67108864\n", "  max_bytes: 67108864\n  oneshot_below_bytes: 262144\n")
	if !oneLineWith(err, "custom_allreduce.strategy_table: stated with a byte rule") {
		t.Errorf("table and byte rule: error %v; want it refused in one line", err)
	}
}
