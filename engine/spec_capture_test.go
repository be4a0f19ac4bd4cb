package engine

import (
	"slices"
	"testing"
)

// sglangSpecTo is SGLang's speculative capture list written out by hand
// (server_args.py _generate_cuda_graph_batch_sizes: range(1, 9) +
// range(10, 33, 2) + range(40, 65, 4) + range(72, 257, 8) + range(272,
// cuda_graph_max_bs + 1, 16)) up to top sequences.
func sglangSpecTo(top int) []int {
	var out []int
	for _, r := range [][3]int{{1, 8, 1}, {10, 32, 2}, {40, 64, 4}, {72, 256, 8}, {272, 512, 16}} {
		for b := r[0]; b <= r[1] && b <= top; b += r[2] {
			out = append(out, b)
		}
	}
	return out
}

// TestSGLangSpecCapturePool: SGLang's verify graphs stop at the request
// pool (cuda_graph_runner.py get_batch_sizes_to_capture keeps the batches
// <= req_to_token_pool.size, the pool's size added where cuda_graph_bs
// ran past it; the pool is max_running_requests, 48 under speculation
// unless given). On an 80 GiB H100 at TP 8 (cuda_graph_max_bs 512): a
// pool of 48 captures 1..8, 10..32 step 2, 40, 44, 48 (23 batches, the
// pool on the list); 50 adds 50 after 48; 64 ends at 64, on the list; a
// pool of 600, above 512, leaves the list at 512 (272..512 step 16 at
// the top), and so does an unknown pool (0). On a 24 GiB L4 at TP 1
// (cuda_graph_max_bs 24) a pool of 48 is above the list: 1..8, 10..24.
// Each verify graph runs 1 + K tokens a sequence: K = 1 doubles them.
func TestSGLangSpecCapturePool(t *testing.T) {
	sg := mustLookup(t, "sglang@0.5")
	const h100, l4 = 81559 * MiB, 23034 * MiB
	first48 := []int{1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30, 32, 40, 44, 48}
	if got := sglangSpecTo(48); !slices.Equal(got, first48) {
		t.Fatalf("hand list to 48: %v, want %v", got, first48)
	}
	for _, c := range []struct {
		name     string
		memBytes int64
		tp, pool int
		want     []int
	}{
		{"H100 TP8 pool 48", h100, 8, 48, first48},
		{"H100 TP8 pool 50", h100, 8, 50, append(slices.Clone(first48), 50)},
		{"H100 TP8 pool 64", h100, 8, 64, append(slices.Clone(first48), 52, 56, 60, 64)},
		{"H100 TP8 pool 600", h100, 8, 600, sglangSpecTo(512)},
		{"H100 TP8 no pool", h100, 8, 0, sglangSpecTo(512)},
		{"L4 TP1 pool 48", l4, 1, 48, []int{1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16, 18, 20, 22, 24}},
	} {
		got := sg.SpecCaptureBatches(c.memBytes, c.tp, c.pool)
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: batches %v, want %v", c.name, got, c.want)
		}
		sizes := sg.SpecCaptureSizes(1, c.memBytes, c.tp, c.pool)
		if len(sizes) != len(c.want) {
			t.Errorf("%s: %d verify sizes, want %d", c.name, len(sizes), len(c.want))
			continue
		}
		for i, b := range c.want {
			if sizes[i] != 2*b {
				t.Errorf("%s: verify size %d is %d tokens, want %d x 2", c.name, i, sizes[i], b)
			}
		}
	}
	if top := sglangSpecTo(512); top[len(top)-1] != 512 || len(top) != 23+4+24+16 {
		t.Errorf("hand list to 512: %d batches ending %d, want 67 ending 512", len(top), top[len(top)-1])
	}
	// vLLM keeps its decode list under speculation: no spec list, no pool.
	if got := mustLookup(t, "vllm").SpecCaptureSizes(1, h100, 8, 48); got != nil {
		t.Errorf("vLLM: spec capture %v, want none (its decode list holds)", got)
	}
}

// sglangDecodeTo is SGLang's decode capture list written out by hand
// (server_args.py _generate_cuda_graph_batch_sizes: [1, 2, 4, 8, 12] +
// range(16, 257, 8) + range(272, 512, 16) + range(512,
// cuda_graph_max_bs + 1, 32)) up to top sequences.
func sglangDecodeTo(top int) []int {
	var out []int
	for _, b := range []int{1, 2, 4, 8, 12} {
		if b <= top {
			out = append(out, b)
		}
	}
	for _, r := range [][3]int{{16, 256, 8}, {272, 511, 16}, {512, 512, 32}} {
		for b := r[0]; b <= r[1] && b <= top; b += r[2] {
			out = append(out, b)
		}
	}
	return out
}

// TestSGLangDecodeCapturePool: SGLang's decode graphs stop at the request
// pool by the same rule as its verify graphs (get_batch_sizes_to_capture
// serves both: the batches <= req_to_token_pool.size, the pool's size
// added where cuda_graph_bs ran past it). On an H200 at TP 8
// (cuda_graph_max_bs 512) a pool of 100 (--max-running-requests 100)
// captures 1, 2, 4, 8, 12, 16..96 step 8 and 100, so a batch of 97 to 100
// pads to 100, not to the list's 104; a pool of 96 ends at 96, on the
// list; a pool of 600 or an unknown one (0) leaves the list at 512. vLLM
// states no such rule: its list stands under any pool.
func TestSGLangDecodeCapturePool(t *testing.T) {
	sg := mustLookup(t, "sglang@0.5")
	const h200 = 143771 * MiB
	to96 := []int{1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 80, 88, 96}
	if got := sglangDecodeTo(100); !slices.Equal(got, to96) {
		t.Fatalf("hand list to 100: %v, want %v", got, to96)
	}
	for _, c := range []struct {
		name string
		pool int
		want []int
	}{
		{"pool 100", 100, append(slices.Clone(to96), 100)},
		{"pool 96", 96, to96},
		{"pool 600", 600, sglangDecodeTo(512)},
		{"no pool", 0, sglangDecodeTo(512)},
	} {
		if got := sg.PoolCaptureSizes(h200, 8, c.pool); !slices.Equal(got, c.want) {
			t.Errorf("%s: decode sizes %v, want %v", c.name, got, c.want)
		}
	}
	if top := sglangDecodeTo(512); len(top) != 5+31+15+1 || top[len(top)-1] != 512 {
		t.Errorf("hand list to 512: %d sizes ending %d, want 52 ending 512", len(top), top[len(top)-1])
	}
	v := mustLookup(t, "vllm")
	if got, want := v.PoolCaptureSizes(h200, 8, 100), v.CaptureSizesFor(h200, 8); !slices.Equal(got, want) {
		t.Errorf("vLLM under a pool of 100: %v, want its list %v", got, want)
	}
}
