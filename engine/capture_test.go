package engine

import (
	"slices"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/internal/testfix"
)

// vllmGrid is vLLM's default list up to largest (testfix.VLLMCaptureGrid,
// written out from _set_cudagraph_sizes).
var vllmGrid = testfix.VLLMCaptureGrid

// roundToQuery is adjust_cudagraph_sizes_for_spec_decode: each size
// rounded up to a multiple of q, those above the list's last dropped.
func roundToQuery(sizes []int, q int) []int {
	top := sizes[len(sizes)-1]
	seen := map[int]bool{}
	var out []int
	for _, s := range sizes {
		u := ((s + q - 1) / q) * q
		if u <= top && !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	slices.Sort(out)
	return out
}

// TestServingCaptureSizes: vLLM captures its grid up to min(max_num_seqs x
// (1 + k) x 2, 512, max_num_batched_tokens) (0.24 adding
// max_num_batched_tokens when that is the largest, and rounding to
// multiples of 1 + k under full decode graphs); SGLang and TensorRT-LLM
// state no such rule, so their lists stand.
func TestServingCaptureSizes(t *testing.T) {
	v24 := mustLookup(t, "vllm@0.24")
	v16 := mustLookup(t, "vllm@0.16-nightly")
	cases := []struct {
		name            string
		p               *Profile
		seqs, budget, k int
		full            bool
		want            []int
	}{
		// 32 x 2 = 64 tokens: a mixed step of 65 or more runs eagerly.
		{"0.24 seqs 32", v24, 32, 8192, 0, true, vllmGrid(64)},
		// The default on a large GPU, 1024 x 2 capped at 512: unchanged.
		{"0.24 default large GPU", v24, 1024, 8192, 0, true, vllmGrid(512)},
		// 256 x 2 = 512 on a small GPU, under its budget of 2048.
		{"0.24 default small GPU", v24, 256, 2048, 0, true, vllmGrid(512)},
		// The budget of 300 caps 512; 0.24 captures 300 itself.
		{"0.24 budget 300", v24, 256, 300, 0, true, append(vllmGrid(300), 300)},
		{"0.16 budget 300", v16, 256, 300, 0, true, vllmGrid(300)},
		// MTP 2: 32 x 3 x 2 = 192, rounded to multiples of 3 under full
		// decode graphs, left as they are under piecewise ones.
		{"0.24 seqs 32 k 2 full", v24, 32, 8192, 2, true, roundToQuery(vllmGrid(192), 3)},
		{"0.24 seqs 32 k 2 piecewise", v24, 32, 8192, 2, false, vllmGrid(192)},
		{"0.16 seqs 32 k 2", v16, 32, 8192, 2, true, vllmGrid(192)},
		// One request, k 3: max 8; 1, 2, 4, 8 round to 4 and 8.
		{"0.24 seqs 1 k 3", v24, 1, 8192, 3, true, []int{4, 8}},
	}
	for _, c := range cases {
		got, ok := c.p.ServingCaptureSizes(c.seqs, c.budget, c.k, c.full)
		if !ok || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v (rule %v), want %v", c.name, got, ok, c.want)
		}
	}
	if s := roundToQuery(vllmGrid(192), 3); s[0] != 3 || s[len(s)-1] != 192 || slices.Contains(s, 32) {
		t.Fatalf("rounding helper: %v", s)
	}
	for _, name := range []string{"sglang", "trtllm"} {
		if got, ok := mustLookup(t, name).ServingCaptureSizes(32, 8192, 0, true); ok {
			t.Errorf("%s: a serving rule (%v), want none: its list stands", name, got)
		}
	}
}

// TestServingMaxChecked: a serving_max rule without a factor of 1 or more,
// or without a citation, is one error naming the field.
func TestServingMaxChecked(t *testing.T) {
	base := string(mustRead(t, "profiles/vllm-0.24.yaml"))
	if err := parseEdited(base, "seqs_factor: 2", "seqs_factor: 2"); err != nil {
		t.Fatalf("the profile as it is: %v", err)
	}
	for _, c := range []struct{ old, new, field string }{
		{"seqs_factor: 2", "seqs_factor: 0", "cuda_graphs.serving_max.seqs_factor"},
		{"cite: [graphs-doc, capture-budget, capture-spec]", "cite: []", "cuda_graphs.serving_max"},
	} {
		err := parseEdited(base, c.old, c.new)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: error %v, want one naming %s", c.new, err, c.field)
		}
	}
}
