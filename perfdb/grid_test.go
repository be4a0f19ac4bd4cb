package perfdb

import (
	"math"
	"testing"
)

func pts1(xs, us []float64) []gpoint {
	var p []gpoint
	for i := range xs {
		p = append(p, gpoint{x: []float64{xs[i]}, us: us[i], row: int32(i)})
	}
	return p
}

// Every expected value below is worked by hand from the points and the
// speed of light given.
func TestGrid1D(t *testing.T) {
	sol := func(x gridPoint) float64 { return x[0] } // time proportional to x
	g := newGrid([]string{"x"}, []blend{blendRaw}, sol, pts1([]float64{1, 3, 5}, []float64{10, 30, 20}))
	cases := []struct {
		name    string
		x       float64
		exclude int32
		us      float64
		how     Resolution
		row     int32
		desc    string
	}{
		{"exact", 1, -1, 10, Exact, 0, "x=1"},
		{"blend", 2, -1, 20, Interpolated, -1, "x=2 in [1,3]"},          // (10+30)/2
		{"blend down", 4, -1, 25, Interpolated, -1, "x=4 in [3,5]"},     // (30+20)/2
		{"hold above", 7, -1, 28, Held, -1, "x=7 held at 5"},            // 20 x 7/5
		{"hold below", 0.5, -1, 5, Held, -1, "x=0.5 held at 1"},         // 10 x 0.5/1
		{"held out inside", 3, 1, 15, Interpolated, -1, "x=3 in [1,5]"}, // (10+20)/2
		{"held out at the end", 5, 2, 50, Held, -1, "x=5 held at 3"},    // 30 x 5/3
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			us, row, lk, ok := g.atExcluding([]float64{tc.x}, tc.exclude)
			if !ok || math.Abs(us-tc.us) > 1e-12 || lk.how != tc.how || row != tc.row {
				t.Errorf("got %v us %v row %d ok %v, want %v %v row %d", us, lk.how, row, ok, tc.us, tc.how, tc.row)
			}
			r := resultOf(us, row, lk)
			if d := r.Describe(); d != tc.desc {
				t.Errorf("describe %q, want %q", d, tc.desc)
			}
		})
	}
}

// TestDescribeFailedLookup: the zero Result a failed lookup returns
// describes itself instead of panicking.
func TestDescribeFailedLookup(t *testing.T) {
	var g *grid
	r, ok := g.lookup(1)
	if ok {
		t.Fatal("a nil grid priced a point")
	}
	if d := r.Describe(); d != "no table row" {
		t.Errorf("describe %q, want %q", d, "no table row")
	}
}

func TestGridUtilBlend(t *testing.T) {
	// util(1) = 1/10, util(3) = 3/15; at 2 the blend is 0.15 and the
	// latency 2 / 0.15.
	sol := func(x gridPoint) float64 { return x[0] }
	g := newGrid([]string{"n"}, []blend{blendUtil}, sol, pts1([]float64{1, 3}, []float64{10, 15}))
	us, _, lk, ok := g.at([]float64{2})
	if !ok || math.Abs(us-2/0.15) > 1e-9 || lk.how != Interpolated {
		t.Errorf("got %v %v, want %v interpolated", us, lk.how, 2/0.15)
	}
}

func TestGridRagged(t *testing.T) {
	// a=1 has b in {1, 2}; a=2 has b=1 only. At (1.5, 2) the a=2 branch
	// cannot reach b=2 (one measured b: no trend to hold), so the a=1
	// branch (b=2: 20 us) is held: 20 x sol(1.5,2)/sol(1,2) = 20 x 3/2.
	sol := func(x gridPoint) float64 { return x[0] * x[1] }
	p := []gpoint{
		{x: []float64{1, 1}, us: 10, row: 0},
		{x: []float64{1, 2}, us: 20, row: 1},
		{x: []float64{2, 1}, us: 30, row: 2},
	}
	g := newGrid([]string{"a", "b"}, []blend{blendRaw, blendRaw}, sol, p)
	us, _, lk, ok := g.at([]float64{1.5, 2})
	if !ok || math.Abs(us-30) > 1e-12 || lk.how != Held {
		t.Errorf("got %v %v %v, want 30 held", us, lk.how, ok)
	}
	// (1.5, 1): both branches measured at b=1: (10+30)/2.
	us, _, lk, ok = g.at([]float64{1.5, 1})
	if !ok || math.Abs(us-20) > 1e-12 || lk.how != Interpolated {
		t.Errorf("got %v %v, want 20 interpolated", us, lk.how)
	}
	// A grid measured at one point answers only that point.
	one := newGrid([]string{"x"}, []blend{blendRaw}, sol, pts1([]float64{4}, []float64{7}))
	if us, _, _, ok := one.at([]float64{4}); !ok || us != 7 {
		t.Errorf("single point: %v %v", us, ok)
	}
	if _, _, _, ok := one.at([]float64{5}); ok {
		t.Error("a single measured value was extrapolated")
	}
}

func TestGridDuplicates(t *testing.T) {
	// Rows with the same coordinates: the first in file order stands.
	p := []gpoint{{x: []float64{1}, us: 5, row: 3}, {x: []float64{1}, us: 9, row: 1}, {x: []float64{2}, us: 6, row: 2}}
	g := newGrid([]string{"x"}, []blend{blendRaw}, func(x gridPoint) float64 { return x[0] }, p)
	us, row, _, _ := g.at([]float64{1})
	if us != 9 || row != 1 || g.dups != 1 || g.n != 2 {
		t.Errorf("got %v row %d dups %d n %d, want row 1 (9 us), 1 duplicate, 2 points", us, row, g.dups, g.n)
	}
}

// A bounded axis (GEMM's sites) holds a utilization only within its
// reach: from x=2, 8 is 4x away (held: 20 x 8/2), 9 is beyond.
func TestGridHoldReach(t *testing.T) {
	sol := func(x gridPoint) float64 { return x[0] }
	g := newGrid([]string{"n"}, []blend{blendUtil}, sol, pts1([]float64{1, 2}, []float64{10, 20}))
	g.maxHold = []float64{4}
	if us, _, lk, ok := g.at([]float64{8}); !ok || us != 80 || lk.how != Held {
		t.Errorf("x=8: %v %v %v, want 80 held", us, lk.how, ok)
	}
	if _, _, _, ok := g.at([]float64{9}); ok {
		t.Error("x=9 held beyond the axis' reach")
	}
	if _, _, _, ok := g.at([]float64{0.2}); ok {
		t.Error("x=0.2 held beyond the axis' reach (1/5 of the nearest site)")
	}
}
