package exec

import (
	"fmt"
	"math"
	"slices"

	"github.com/tpscope/tpscope/model"
)

// ValidateSchedule checks what the runner relies on to run sched without
// hanging or mislabelling spans: at least one rank; each op of rank r has
// Rank r and a non-empty ID unique within the rank; Deps point to earlier
// ops of the same rank; each collective's Group is sorted, in range, has no
// repeats and contains the rank; a moe_gemm op carries a valid routing
// shape (model.MoEShape) whose expected experts and rows are its Batch and
// M; each member of the group has a collective
// with the same ID, kind and group; and every pair of ranks meets the
// collectives they share in the same order. The error names the rank, op
// index and op ID.
func ValidateSchedule(s *model.Schedule) error {
	if s == nil {
		return fmt.Errorf("schedule: nil")
	}
	n := len(s.Ranks)
	if n == 0 {
		return fmt.Errorf("schedule %q: no ranks", s.Model)
	}
	// coll[r] maps collective op ID -> index in rank r's list.
	coll := make([]map[string]int, n)
	for r, ops := range s.Ranks {
		coll[r] = map[string]int{}
		seen := make(map[string]bool, len(ops))
		for i := range ops {
			op := &ops[i]
			where := func() string { return fmt.Sprintf("schedule %q rank %d op %d (%s)", s.Model, r, i, op.ID) }
			if op.ID == "" {
				return fmt.Errorf("schedule %q rank %d op %d: empty ID", s.Model, r, i)
			}
			if seen[op.ID] {
				return fmt.Errorf("%s: duplicate op ID in the rank's list", where())
			}
			seen[op.ID] = true
			if op.Rank != r {
				return fmt.Errorf("%s: field Rank = %d, want %d", where(), op.Rank, r)
			}
			for _, d := range op.Deps {
				if d < 0 || d >= i {
					return fmt.Errorf("%s: Deps entry %d: want an earlier op index in 0..%d", where(), d, i-1)
				}
			}
			if op.MoE != nil {
				if err := op.MoE.Validate(); err != nil {
					return fmt.Errorf("%s: %w", where(), err)
				}
				if op.Kind == model.KindMoEGEMM {
					if m := op.MoE; op.Batch != m.ExpertsTouched || (m.ExpertsTouched > 0 && op.M != int64(math.Ceil(m.Rows/m.ExpertsTouched))) {
						return fmt.Errorf("%s: grouped GEMM M = %d, Batch = %g: want ceil(rows/experts_touched) = %g and experts_touched = %g of its routing shape",
							where(), op.M, op.Batch, math.Ceil(m.Rows/m.ExpertsTouched), m.ExpertsTouched)
					}
				}
			} else if op.Kind == model.KindMoEGEMM {
				return fmt.Errorf("%s: moe_gemm without its routing shape (MoE)", where())
			}
			if !op.IsCollective() {
				continue
			}
			g := op.Group
			if len(g) == 0 {
				return fmt.Errorf("%s: collective with empty Group", where())
			}
			for j, m := range g {
				if m < 0 || m >= n || (j > 0 && m <= g[j-1]) {
					return fmt.Errorf("%s: Group %v: want ascending ranks in 0..%d without repeats", where(), g, n-1)
				}
			}
			if _, ok := slices.BinarySearch(g, r); !ok {
				return fmt.Errorf("%s: Group %v does not contain the rank", where(), g)
			}
			coll[r][op.ID] = i
		}
	}
	for r, ops := range s.Ranks {
		for i := range ops {
			op := &ops[i]
			if !op.IsCollective() {
				continue
			}
			for _, m := range op.Group {
				j, ok := coll[m][op.ID]
				if !ok {
					return fmt.Errorf("schedule %q rank %d op %s: group member rank %d has no collective with this ID", s.Model, r, op.ID, m)
				}
				peer := &s.Ranks[m][j]
				if peer.Collective != op.Collective || !slices.Equal(peer.Group, op.Group) {
					return fmt.Errorf("schedule %q op %s: rank %d has %s over %v, rank %d has %s over %v",
						s.Model, op.ID, r, op.Collective, op.Group, m, peer.Collective, peer.Group)
				}
			}
		}
	}
	// Pairwise order: the collectives r shares with m, in r's order, must be
	// in m's order too (otherwise each waits for the other: deadlock).
	for r := range n {
		for m := r + 1; m < n; m++ {
			var a, b []string
			for _, op := range s.Ranks[r] {
				if op.IsCollective() && slices.Contains(op.Group, m) {
					a = append(a, op.ID)
				}
			}
			for _, op := range s.Ranks[m] {
				if op.IsCollective() && slices.Contains(op.Group, r) {
					b = append(b, op.ID)
				}
			}
			for x := range min(len(a), len(b)) {
				if a[x] != b[x] {
					return fmt.Errorf("schedule %q: ranks %d and %d meet collectives in different orders (%s vs %s): the run would deadlock", s.Model, r, m, a[x], b[x])
				}
			}
		}
	}
	return nil
}
