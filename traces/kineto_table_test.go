package traces

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
)

func TestKernelTableMatch(t *testing.T) {
	kt := compileTable(KernelTable{
		model.RoleMoETopK:     {"gatherTopK", "sort"},
		model.RoleExpertsDown: {"moe_sum", "sort"},
		"no.such_role":        {"anything"},
	})
	tests := []struct {
		name string
		want role
	}{
		{"void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(...)", roleFor(model.RoleMoETopK)},
		{"void vllm::moe::moe_sum_kernel<c10::BFloat16, 8>(...)", roleFor(model.RoleExpertsDown)},
		{"void at::native::bitonicSortKVInPlace<...>", roleNone}, // both roles name it
		{"anything", roleNone}, // not a role: not placed
		{"nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT", roleNone},
	}
	for _, tc := range tests {
		if got := kt.match(tc.name); got != tc.want {
			t.Errorf("match(%q) = %v, want %v", tc.name, got.model(), tc.want.model())
		}
	}
}

// TestKernelTablePlaces: a table entry places the kernels it names (and
// says so in ByNameNs); an empty table places everything by position; an
// entry that names a kernel for another op than its position wins and is
// noted.
func TestKernelTablePlaces(t *testing.T) {
	path := filepath.Join(realDir, "kimi-stack", "kimi-stack-eager-b1.pt.trace.json.gz")
	read := func(tab KernelTable) *Result {
		res, err := ReadAll(context.Background(), path, WithKernelTable(tab))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// The kernel time of PyTorch's top-k kernel in the steps, summed here.
	topk := func(res *Result) (ns int64) {
		for i := range res.Spans {
			if strings.Contains(res.Spans[i].Name, "gatherTopK") {
				ns += int64(res.Spans[i].Duration)
			}
		}
		return ns
	}
	none := read(KernelTable{})
	if k := none.Kineto[0]; k.ByNameNs != 0 || k.ByPositionNs != k.PlacedNs {
		t.Errorf("empty table: %d ns by name, %d by position of %d placed", k.ByNameNs, k.ByPositionNs, k.PlacedNs)
	}
	byName := read(KernelTable{model.RoleMoETopK: {"sbtopk::gatherTopK"}})
	k := byName.Kineto[0]
	if want := topk(byName); k.ByNameNs != want || want == 0 || k.PlacedNs != none.Kineto[0].PlacedNs {
		t.Errorf("by name %d ns (placed %d), want the top-k kernels' %d ns (placed as without the table: %d)", k.ByNameNs, k.PlacedNs, want, none.Kineto[0].PlacedNs)
	}
	for _, s := range k.Steps {
		if strings.Contains(s.Note, "placed by their name on another op") {
			t.Errorf("step %d: %s (the table agrees with the position)", s.Step, s.Note)
		}
	}
	// The cutlass grouped GEMM runs gate/up and down: a table naming it
	// for down moves the gate/up one, once per MoE layer and step.
	moved := read(KernelTable{model.RoleExpertsDown: {"GroupProblemShape"}})
	for _, s := range moved.Kineto[0].Steps {
		if !strings.Contains(s.Note, "5 kernels placed by their name on another op") {
			t.Errorf("step %d note %q, want 5 moved (one per MoE layer)", s.Step, s.Note)
		}
	}
}
