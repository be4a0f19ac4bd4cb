package exec_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/exectest"
	"github.com/tpscope/tpscope/model"
)

// fuzzSchedule builds a schedule of up to 4 ranks from bytes: each byte
// pair is one op of rank b0%ranks; b1 picks a compute op or a collective
// with a small ID set and a group from a bit mask, or corrupts a field.
func fuzzSchedule(nRanks uint8, data []byte) *model.Schedule {
	n := int(nRanks%4) + 1
	s := &model.Schedule{Model: "fuzz", Ranks: make([][]model.Op, n)}
	for i := 0; i+1 < len(data) && i < 64; i += 2 {
		r, b := int(data[i])%n, data[i+1]
		op := model.Op{ID: fmt.Sprintf("L%02d.attn.op%d", i/2, b%3), Kind: model.KindGEMM, Rank: r}
		switch b % 8 {
		case 0, 1, 2:
			var g []int
			for m := range n {
				if b>>(3+m)&1 == 1 || m == r {
					g = append(g, m)
				}
			}
			op = model.Op{ID: fmt.Sprintf("coll%d", b>>6), Kind: model.KindCollective, Collective: model.AllReduce, Rank: r, Group: g, CommBytes: 64}
		case 3:
			op.Deps = []int{int(b>>3) - 2}
		case 4:
			op.Rank = int(b >> 3)
		}
		s.Ranks[r] = append(s.Ranks[r], op)
	}
	return s
}

// FuzzValidateSchedule: ValidateSchedule never panics, and a schedule it
// accepts runs to completion on goroutine ranks whose collectives really
// wait for their peers: the checks rule out deadlock.
func FuzzValidateSchedule(f *testing.F) {
	f.Add(uint8(1), []byte{0, 0, 1, 0, 0, 5, 1, 5})
	f.Add(uint8(3), []byte{0, 8, 1, 8, 2, 16, 3, 0, 0, 3, 1, 4})
	f.Add(uint8(2), []byte{0, 0x40, 1, 0x40, 0, 0x80, 1, 0x80})
	f.Add(uint8(2), []byte{0, 0x80, 0, 0x40, 1, 0x40, 1, 0x80}) // crossed order: must be rejected
	f.Fuzz(func(t *testing.T, nRanks uint8, data []byte) {
		s := fuzzSchedule(nRanks, data)
		if err := exec.ValidateSchedule(s); err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := exec.Run(ctx, s, exectest.New(), exec.WithSteps(2), exec.WithWarmup(0)); err != nil {
			t.Fatalf("valid schedule failed to run (deadlock?): %v", err)
		}
	})
}
