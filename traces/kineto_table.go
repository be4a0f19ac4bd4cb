package traces

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/tpscope/tpscope/model"
)

// Placement by name: a table of kernel-name patterns per op role says
// which kernels an engine runs for an op. The layer a kernel ran in comes
// from the step's layer recovery (kineto_layers.go); its role from the
// table when its name matches the patterns of exactly one role, otherwise
// from its class and position in the layer. KinetoStep.ByNameNs and
// ByPositionNs say how much kernel time each way placed.

// KernelTable lists, per op role, substrings of the names of the kernels
// that run it (matched without regard to case). An engine profile fills
// it for its engine, version and GPU; a name that matches the patterns of
// more than one role places no kernel by name.
type KernelTable map[model.Role][]string

// WithKernelTable sets the kernel-name table the Kineto reader places
// kernels by (KernelTable). Default: DefaultKernelTable. An empty table
// places every kernel by position.
func WithKernelTable(t KernelTable) ReadOption {
	return func(rc *readConfig) { rc.table = compileTable(t) }
}

// DefaultKernelTable is the table of the kernels whose name alone says the
// op they run in vLLM, SGLang and TensorRT-LLM (sources in
// kineto_kernels.go): attention kernels made for MLA decode, the KV-cache
// writes, RoPE, the DeepSeek router GEMM, the routing and MoE-sum kernels.
// Generic kernels (cuBLAS GEMMs, norms, PyTorch's elementwise kernels)
// are in no entry: the same name runs several ops.
func DefaultKernelTable() KernelTable {
	return KernelTable{
		model.RoleMLADecode: {"flash_fwd_splitkv_mla", "flash_fwd_mla_combine", "_fwd_grouped_kernel_stage1", "_fwd_kernel_stage2",
			"sm100fmhamlakernel", "batchmlapagedattention"},
		model.RoleKVCacheWrite:  {"concat_and_cache_mla", "set_mla_kv_buffer"},
		model.RoleRope:          {"rotary_embedding_kernel", "applyrotaryposids"},
		model.RoleMoEGate:       {"router_gemm"},
		model.RoleMoETopK:       {"grouped_topk", "topkgatingsoftmax", "moe_align_block_size", "count_and_sort_expert_tokens", "moe_fused_gate", "routingmainkernel", "routingindices"},
		model.RoleExpertsGateUp: {"expandinputrows"},
		model.RoleExpertsDown:   {"moe_sum", "finalizemoerouting"},
	}
}

// kernelTable is a KernelTable ready to match: (lower-case pattern, role)
// pairs in a fixed order.
type kernelTable struct {
	pats  []string
	roles []role
	// decodeOnly, prefillOnly: roles whose ops run only in that phase
	// (model's attention table), not placed by name in a step of the
	// other phase or a mixed one.
	decodeOnly, prefillOnly map[role]bool
}

var defaultTable = compileTable(DefaultKernelTable())

func compileTable(t KernelTable) *kernelTable {
	kt := &kernelTable{decodeOnly: map[role]bool{}, prefillOnly: map[role]bool{}}
	for r, pats := range t {
		rr := roleFor(r)
		if rr == roleNone {
			continue // not a role of the tables: nothing to place on
		}
		for _, p := range pats {
			if p != "" {
				kt.pats = append(kt.pats, strings.ToLower(p))
				kt.roles = append(kt.roles, rr)
			}
		}
	}
	idx := make([]int, len(kt.pats))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if c := cmp.Compare(kt.roles[a], kt.roles[b]); c != 0 {
			return c
		}
		return cmp.Compare(kt.pats[a], kt.pats[b])
	})
	pats, roles := make([]string, len(idx)), make([]role, len(idx))
	for i, j := range idx {
		pats[i], roles[i] = kt.pats[j], kt.roles[j]
	}
	kt.pats, kt.roles = pats, roles
	for _, sl := range model.ModAttention.Table() {
		switch {
		case sl.When&model.CondDecode != 0:
			kt.decodeOnly[roleFor(sl.Role)] = true
		case sl.When&model.CondPrefill != 0:
			kt.prefillOnly[roleFor(sl.Role)] = true
		}
	}
	return kt
}

// match is the one role whose patterns name matches, roleNone when none
// or several do.
func (kt *kernelTable) match(name string) role {
	if kt == nil || len(kt.pats) == 0 {
		return roleNone
	}
	lower := strings.ToLower(name)
	found := roleNone
	for i, p := range kt.pats {
		if strings.Contains(lower, p) {
			if found != roleNone && found != kt.roles[i] {
				return roleNone
			}
			found = kt.roles[i]
		}
	}
	return found
}

// fitsPhase reports whether r may be placed by name in a step of phase.
func (kt *kernelTable) fitsPhase(r role, phase string) bool {
	switch {
	case kt.decodeOnly[r]:
		return phase == PhaseDecode || phase == ""
	case kt.prefillOnly[r]:
		return phase == PhasePrefill || phase == ""
	}
	return true
}

// placeByName gives the kernels ks of a placed step (layers recovered)
// whose name the table places the table's role, in the layer the position
// placement found (embedding and head roles only outside the layers), and
// marks them placed by name; a kernel whose position gave another op is
// moved to the table's and the move counted in *moved.
func (kr *kinetoRead) placeByName(ks []int32, phase string, moved *int) {
	for _, i := range ks {
		k := kr.kernels.at(int(i))
		r := kr.tableRoles[k.name]
		if r == roleNone || !kr.table.fitsPhase(r, phase) {
			continue
		}
		if r.outsideLayers() != (k.layer < 0) {
			continue
		}
		switch {
		case k.role == r:
		case k.fused > 0 && kr.fused[k.fused-1][0].role == r:
		default:
			if k.role != roleNone {
				*moved++
			}
			k.role, k.fused = r, 0
		}
		k.flags |= kfByName
	}
}

// tableRole is the table's role for a new kernel name.
func (kr *kinetoRead) tableRole(name string) role { return kr.table.match(name) }

// movedNote says how many kernels the table moved off the op their
// position gave them.
func movedNote(n int) string {
	return fmt.Sprintf("%d kernels placed by their name on another op than their position in the layer gave (the kernel table wins)", n)
}
