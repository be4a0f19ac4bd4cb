package model

import (
	"reflect"
	"testing"
)

// TestBuilderMatchesBuildWith: a Builder lays what BuildWith lays, build
// after build in the same memory; with OneRank, rank 0's list alone
// exactly when every collective spans all ranks (TP, TP + EP, DCP over
// the whole TP group, DP 8 with TP 1: no TP collective, dispatch over all
// ranks), every rank's list otherwise (TP groups of a DP group, DCP
// below the world). Speculative steps too: an EAGLE-3 head at the
// target's TP, and a draft model at TP 4 right after a plain TP-8 step
// (its draft groups are not the TP groups the Builder kept).
func TestBuilderMatchesBuildWith(t *testing.T) {
	kimi := mustPreset(t, "kimi-k2.5-nvfp4")
	glm := mustPreset(t, "glm-5-nvfp4")
	head, err := ResolveDrafter("kimi-k2.5-eagle3-mla")
	if err != nil {
		t.Fatal(err)
	}
	moon, err := ResolveDrafter("moonlight-16b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	decode := func(batch, ctx int) Workload { return Workload{Phase: Decode, Batch: batch, Context: ctx} }
	spec := func(batch, ctx, k int) Workload {
		w := decode(batch, ctx)
		w.SpecTokens = k
		return w
	}
	cases := []struct {
		name     string
		a        *Arch
		p        Plan
		w        Workload
		o        BuildOptions
		oneRanks int // ranks laid under OneRank
	}{
		{"tp8", kimi, Plan{TP: 8}, decode(8, 4096), BuildOptions{}, 1},
		{"tp8 draft model at tp4", kimi, Plan{TP: 8}, spec(4, 4096, 3), BuildOptions{Spec: Spec{Method: SpecDraftModel, Draft: moon.Ref, Drafter: moon, DraftTP: 4}}, 8},
		{"tp8 eagle3", kimi, Plan{TP: 8}, spec(4, 4096, 3), BuildOptions{Spec: Spec{Method: SpecEagle3, Draft: head.Ref, Drafter: head}}, 1},
		{"tp8-ep graphed", kimi, Plan{TP: 8, EP: true}, decode(3, 4096), BuildOptions{Graphs: &GraphCapture{Sizes: []int{1, 2, 4, 8}}}, 1},
		{"tp8-dcp8", kimi, Plan{TP: 8, DCP: 8}, decode(1, 32768), BuildOptions{}, 1},
		{"tp8-dcp2", kimi, Plan{TP: 8, DCP: 2}, decode(1, 32768), BuildOptions{}, 8},
		{"tp4-dp2-ep", kimi, Plan{TP: 4, DP: 2, EP: true}, decode(16, 4096), BuildOptions{}, 8},
		{"dp8-ep power-law", kimi, Plan{TP: 1, DP: 8, EP: true}, decode(64, 1024), BuildOptions{Routing: powerLawRouting(1.2)}, 1},
		{"glm tp4 dense-dsa prefill", glm, Plan{TP: 4}, Workload{Phase: Prefill, Batch: 2, Context: 512}, BuildOptions{DenseDSA: true}, 1},
	}
	for _, oneRank := range []bool{false, true} {
		bd := Builder{OneRank: oneRank}
		for _, tc := range cases {
			t.Run(tc.name+map[bool]string{false: "/all-ranks", true: "/one-rank"}[oneRank], func(t *testing.T) {
				want, err := BuildWith(tc.a, tc.p, tc.w, tc.o)
				if err != nil {
					t.Fatal(err)
				}
				got, err := bd.Build(tc.a, tc.p, tc.w, tc.o)
				if err != nil {
					t.Fatal(err)
				}
				ranks := len(want.Ranks)
				if oneRank {
					ranks = tc.oneRanks
				}
				if len(got.Ranks) != ranks {
					t.Fatalf("%d ranks laid, want %d", len(got.Ranks), ranks)
				}
				w := *want
				w.Ranks = want.Ranks[:ranks]
				if !reflect.DeepEqual(*got, w) {
					t.Errorf("schedule differs from BuildWith's")
				}
			})
		}
	}
}

// TestBuilderErrors: a Builder refuses what BuildWith refuses, with the
// same error.
func TestBuilderErrors(t *testing.T) {
	kimi := mustPreset(t, "kimi-k2.5-nvfp4")
	var bd Builder
	_, err := bd.Build(kimi, Plan{TP: 3}, Workload{Phase: Decode, Batch: 1, Context: 64}, BuildOptions{})
	_, want := BuildWith(kimi, Plan{TP: 3}, Workload{Phase: Decode, Batch: 1, Context: 64}, BuildOptions{})
	if err == nil || want == nil || err.Error() != want.Error() {
		t.Errorf("error %v, want %v", err, want)
	}
}

// TestBuilderAllocs: a Builder that lays a step of the shape it laid last
// allocates nothing, speculative passes or not (a sweep builds thousands
// of schedules).
func TestBuilderAllocs(t *testing.T) {
	kimi := mustPreset(t, "kimi-k2.5-nvfp4")
	w := Workload{Phase: Decode, Batch: 8, Context: 4096}
	for _, oneRank := range []bool{false, true} {
		bd := Builder{OneRank: oneRank}
		if _, err := bd.Build(kimi, Plan{TP: 8}, w, BuildOptions{}); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(5, func() { _, _ = bd.Build(kimi, Plan{TP: 8}, w, BuildOptions{}) }); n != 0 {
			t.Errorf("one rank %v: %v allocations a build, want 0", oneRank, n)
		}
	}
}
