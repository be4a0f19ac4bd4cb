package model

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestRoutingText: the text form round-trips, aiconfigurator's spelling is
// read, and bad text is refused naming what is accepted.
func TestRoutingText(t *testing.T) {
	cases := []struct {
		in   string
		want Routing
		text string
		err  bool
	}{
		{in: "uniform", want: UniformRouting, text: "uniform"},
		{in: " Balanced ", want: BalancedRouting, text: "balanced"},
		{in: "power-law-1.01", want: powerLawRouting(1.01), text: "power-law-1.01"},
		{in: "power_law_1.2", want: powerLawRouting(1.2), text: "power-law-1.2"},
		{in: "power-law-2.0", want: powerLawRouting(2), text: "power-law-2"},
		{in: "power-law-1", err: true},
		{in: "power-law-0.5", err: true},
		{in: "power-law-11", err: true},
		{in: "power-law-NaN", err: true},
		{in: "power-law-", err: true},
		{in: "zipf", err: true},
		{in: "", err: true},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseRouting(tc.in)
			if tc.err {
				if err == nil || !strings.Contains(err.Error(), "want uniform, balanced or power-law-ALPHA") {
					t.Fatalf("ParseRouting(%q) = %v, %v; want an error listing the accepted forms", tc.in, got, err)
				}
				return
			}
			if err != nil || got != tc.want || got.String() != tc.text {
				t.Fatalf("ParseRouting(%q) = %+v (%q), %v; want %+v (%q)", tc.in, got, got.String(), err, tc.want, tc.text)
			}
			var back Routing
			b, err := got.MarshalText()
			if err != nil || back.UnmarshalText(b) != nil || back != got {
				t.Fatalf("text round trip %+v -> %q -> %+v", got, b, back)
			}
		})
	}
	// In JSON the uniform default is left out (old records read as
	// uniform) and a set routing is its text.
	for _, tc := range []struct {
		o    BuildOptions
		want string
	}{
		{BuildOptions{}, `{}`},
		{BuildOptions{Routing: powerLawRouting(1.2)}, `{"moe_routing":"power-law-1.2"}`},
	} {
		b, err := json.Marshal(tc.o)
		var back BuildOptions
		if err != nil || string(b) != tc.want || json.Unmarshal(b, &back) != nil || back != tc.o {
			t.Errorf("JSON %+v -> %s (%v) -> %+v; want %s", tc.o, b, err, back, tc.want)
		}
	}
}

// FuzzParseRouting: any text parses to a valid routing whose String parses
// back to it, or is an error; never a panic.
func FuzzParseRouting(f *testing.F) {
	for _, s := range []string{"uniform", "balanced", "power-law-1.01", "power_law_1.2", "power-law-1e0", "power-law-+Inf", "power-law--2", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRouting(s)
		if err != nil {
			return
		}
		if r.Validate() != nil {
			t.Fatalf("%q parsed to invalid %+v", s, r)
		}
		if back, err := ParseRouting(r.String()); err != nil || back != r {
			t.Fatalf("%q -> %q -> %+v, %v", s, r, back, err)
		}
	})
}

// TestBalancedShape: the collector's balanced routing (balanced_logits:
// s = ceil(E/k); token t's j-th expert (t + j s) mod E for T >= s, else
// (floor(t s / T) + j s) mod E), worked out by hand:
//
//   - Kimi-K2.5 (E 384, top-8, s = 48), TP (all 384 local), T = 64: as
//     E = k s, the k slots of a residue class cover t ≡ p (mod 48), so
//     residues 0-15 get 2 rows (t = r, r + 48) and 16-47 one: 512 rows
//     over all 384 experts (uniform routing reads 284).
//   - T = 16 < s: offsets floor(48 t / 16) = 3t, 16 of them per stride,
//     8 strides: 128 experts, one row each.
//   - EP rank of 48 experts (one stride), T = 64: 16 x 2 + 32 x 1 = 64
//     rows, 48 experts; T = 8: offsets 6t, one stride: 8 rows, 8 experts;
//     T = 5: offsets 0, 9, 19, 28, 38: 5 and 5; T = 1: 1 and 1.
//   - T = 512: 512 = 10 x 48 + 32, residues 0-31 get 11, 32-47 get 10:
//     352 + 160 = 512 rows on 48 experts.
//   - DeepSeek-V3 (E 256, top-8, s = 32) on 16 EP ranks (16 experts, half
//     a stride), T = 40: residues 0-7 get 2 (t = r, r + 32 < 40), 8-15 one:
//     24 rows on 16 experts, where the uniform mean is 40 x 8 / 16 = 20
//     (the rank the collector times carries the stride's heavy half).
func TestBalancedShape(t *testing.T) {
	cases := []struct {
		name          string
		tokens        int64
		k, e, local   int
		rows, touched float64
	}{
		{"kimi/tp/64", 64, 8, 384, 384, 512, 384},
		{"kimi/tp/16", 16, 8, 384, 384, 128, 128},
		{"kimi/tp/1", 1, 8, 384, 384, 8, 8},
		{"kimi/ep8/64", 64, 8, 384, 48, 64, 48},
		{"kimi/ep8/8", 8, 8, 384, 48, 8, 8},
		{"kimi/ep8/5", 5, 8, 384, 48, 5, 5},
		{"kimi/ep8/1", 1, 8, 384, 48, 1, 1},
		{"kimi/ep8/512", 512, 8, 384, 48, 512, 48},
		{"dsv3/ep16/40", 40, 8, 256, 16, 24, 16},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := BalancedRouting.Shape(tc.tokens, tc.k, tc.e, tc.local, 0)
			if s.Rows != tc.rows || s.ExpertsTouched != tc.touched || s.Routing != BalancedRouting {
				t.Fatalf("rows %g touched %g (%s), want %g and %g", s.Rows, s.ExpertsTouched, s.Routing, tc.rows, tc.touched)
			}
			if err := s.Validate(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestBalancedShapeEnumerated: balancedShape's per-expert counting
// equals listing every (token, slot) pair balanced_logits makes, for
// token counts on both sides of the stride and of E, strides that do
// and do not divide E (E 160, top-6: s = 27, 6 s = 162), every EP
// degree.
func TestBalancedShapeEnumerated(t *testing.T) {
	for _, m := range []struct{ e, k int64 }{{384, 8}, {256, 8}, {160, 6}, {16, 4}} {
		s := (m.e + m.k - 1) / m.k
		for _, local := range []int64{m.e, m.e / 2, m.e / 8, m.e / 16} {
			for _, tokens := range []int64{1, 2, 3, s - 1, s, s + 1, 2*s + 7, m.e - 1, m.e + 5, 3*m.e + 11} {
				if tokens < 1 {
					continue
				}
				n := make([]int64, m.e)
				for tok := int64(0); tok < tokens; tok++ {
					for j := int64(0); j < m.k; j++ {
						p := (tok + j*s) % m.e
						if tokens < s {
							p = (tok*s/tokens + j*s) % m.e
						}
						n[p]++
					}
				}
				var rows, touched int64
				for _, c := range n[:local] {
					rows += c
					if c > 0 {
						touched++
					}
				}
				gr, gt := balancedShape(tokens, m.k, m.e, local)
				if gr != rows || gt != touched {
					t.Errorf("E %d top-%d local %d T %d: rows %d touched %d, enumerated %d and %d", m.e, m.k, local, tokens, gr, gt, rows, touched)
				}
			}
		}
	}
}

// powerLawGenerator is aiconfigurator's power-law routing generator
// (collector/helper.py, _generate_power_law_distribution, the path
// power_law_logits_v3 takes without EPLB), transcribed line by line
// (float64 where torch uses float32): it returns the per-expert counts
// after the most loaded EP rank was swapped to rank 0.
func powerLawGenerator(tokens, e, k, ep int, alpha float64, rng *rand.Rand) []int64 {
	xmin, xmax := 0.01, 2.0
	if tokens*k > e {
		xmin, xmax = 1, float64(tokens)*0.8
	}
	q := 1 - alpha
	x := make([]float64, e)
	sum := 0.0
	for i := range x {
		u := rng.Float64()
		x[i] = math.Pow((math.Pow(xmax, q)-math.Pow(xmin, q))*u+math.Pow(xmin, q), 1/q)
		sum += x[i]
	}
	target := int64(tokens * k)
	n := make([]int64, e)
	for i := range x {
		n[i] = int64(math.RoundToEven(x[i] / sum * float64(target)))
	}
	ub := int64(tokens)
	var overflow int64
	for i := range n {
		if n[i] > ub {
			overflow += n[i] - ub
			n[i] = ub
		}
	}
	per := e / ep
	// _round_robin_adjust_per_rank: one unit per rank in turn, onto the
	// rank's argmin (argmax) among the valid local experts.
	roundRobin := func(remaining int64, valid func(int64) bool, pickMin bool, step int64) {
		for remaining > 0 {
			progressed := false
			for r := 0; r < ep; r++ {
				best := -1
				for i := r * per; i < (r+1)*per; i++ {
					if valid(n[i]) && (best < 0 || (pickMin && n[i] < n[best]) || (!pickMin && n[i] > n[best])) {
						best = i
					}
				}
				if best < 0 {
					continue
				}
				n[best] += step
				remaining--
				progressed = true
				if remaining == 0 {
					break
				}
			}
			if !progressed {
				break
			}
		}
	}
	if overflow > 0 {
		roundRobin(overflow, func(v int64) bool { return v < ub }, true, 1)
	}
	var cur int64
	for _, v := range n {
		cur += v
	}
	if d := target - cur; d > 0 {
		roundRobin(d, func(v int64) bool { return v < ub }, true, 1)
	} else if d < 0 {
		roundRobin(-d, func(v int64) bool { return v > 0 }, false, -1)
	}
	best, bestSum := 0, int64(-1)
	for r := 0; r < ep; r++ {
		var s int64
		for _, v := range n[r*per : (r+1)*per] {
			s += v
		}
		if s > bestSum {
			best, bestSum = r, s
		}
	}
	for i := 0; i < per; i++ {
		n[i], n[best*per+i] = n[best*per+i], n[i]
	}
	return n
}

// TestPowerLawShapeMonteCarlo: the power-law shape (rows and distinct
// experts on the rank the collector times, rank 0 after the swap)
// against the mean of 400 draws of the generator itself (seeded PCG, so
// the figures are fixed), Kimi-K2.5 (E 384) and DeepSeek-V3 (E 256), top-8,
// TP (ep 1) and EP 8 and 16, both exponents of the tables. Tolerance 5 %:
// the derivation's approximations (the sum of loads at its mean, a normal
// block sum corrected for skew) are within 3 % here, and 400 draws leave
// about 1 % of sampling error.
//
// The smallest cases are also worked by hand: one token's 8 rows scale
// every load below 1/2 (loads of at most 2 out of a sum near 384 x 0.38),
// so all counts round to 0 and the deficit of 8 lands one row each on the
// least loaded experts, round-robin over the ranks: 8 rows on 8 experts
// under TP, 1 on 1 on the timed rank under EP 8.
func TestPowerLawShapeMonteCarlo(t *testing.T) {
	const trials = 400
	cases := []struct {
		e, ep  int
		tokens int64
	}{
		{384, 1, 1}, {384, 1, 16}, {384, 1, 64}, {384, 1, 256},
		{384, 8, 1}, {384, 8, 8}, {384, 8, 64}, {384, 8, 256},
		{256, 8, 32}, {256, 16, 64}, {256, 16, 1024},
	}
	for _, alpha := range []float64{1.01, 1.2} {
		for _, tc := range cases {
			name := powerLawRouting(alpha).String() + "/e" + strconv.Itoa(tc.e) + "/ep" + strconv.Itoa(tc.ep) + "/t" + strconv.FormatInt(tc.tokens, 10)
			t.Run(name, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(13, uint64(tc.tokens)))
				local := tc.e / tc.ep
				var rows, touched float64
				for i := 0; i < trials; i++ {
					n := powerLawGenerator(int(tc.tokens), tc.e, 8, tc.ep, alpha, rng)
					for _, c := range n[:local] {
						rows += float64(c)
						if c > 0 {
							touched++
						}
					}
				}
				rows /= trials
				touched /= trials
				s := powerLawRouting(alpha).Shape(tc.tokens, 8, tc.e, local, 0)
				t.Logf("rows %.2f (generator %.2f), touched %.2f (generator %.2f)", s.Rows, rows, s.ExpertsTouched, touched)
				if math.Abs(s.Rows/rows-1) > 0.05 || math.Abs(s.ExpertsTouched/touched-1) > 0.05 {
					t.Errorf("rows %.2f touched %.2f, generator %.2f and %.2f: want within 5 %%", s.Rows, s.ExpertsTouched, rows, touched)
				}
				if tc.tokens == 1 {
					want := 8.0 / float64(tc.ep)
					if s.Rows != want || s.ExpertsTouched != want {
						t.Errorf("one token: rows %g touched %g, want %g on %g", s.Rows, s.ExpertsTouched, want, want)
					}
				}
				if err := s.Validate(); err != nil {
					t.Error(err)
				}
			})
		}
	}
}

// TestExecutedSpread: the integer shape backends run under each routing
// keeps the rounded rows and experts, at least one row and at most
// RoutedTokens per expert; balanced spreads evenly (the generator's own
// spread: 64 rows on 48 experts as 16 x 2 + 32 x 1), power-law descends
// and, when there are more rows than experts, its heaviest expert carries
// more than the even share (rounded up).
func TestExecutedSpread(t *testing.T) {
	cases := []struct {
		name  string
		shape MoEShape
		want  []int // nil: check the invariants only
	}{
		{"balanced/ep8/64", BalancedRouting.Shape(64, 8, 384, 48, 96), append(repeat(2, 16), repeat(1, 32)...)},
		{"balanced/tp/16", BalancedRouting.Shape(16, 8, 384, 384, 0), repeat(1, 128)},
		{"power-law/ep8/256", powerLawRouting(1.2).Shape(256, 8, 384, 48, 0), nil},
		{"power-law/tp/64", powerLawRouting(1.01).Shape(64, 8, 384, 384, 0), nil},
		{"power-law/ep8/2", powerLawRouting(1.01).Shape(2, 8, 384, 48, 0), nil},
		{"power-law/ep16/1024", powerLawRouting(1.01).Shape(1024, 8, 256, 16, 0), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.shape.Executed()
			if tc.want != nil && !slices.Equal(got, tc.want) {
				t.Fatalf("Executed() = %v, want %v", got, tc.want)
			}
			rows := 0
			for i, r := range got {
				rows += r
				if r < 1 || int64(r) > tc.shape.RoutedTokens {
					t.Fatalf("expert %d runs %d rows: want 1..%d", i, r, tc.shape.RoutedTokens)
				}
			}
			if rows != int(math.Round(tc.shape.Rows)) {
				t.Fatalf("%d rows, want %g rounded", rows, tc.shape.Rows)
			}
			if n := len(got); n < int(math.Round(tc.shape.ExpertsTouched)) || n > tc.shape.LocalExperts {
				t.Fatalf("%d experts, want %g rounded (or more for the cap) and at most %d", n, tc.shape.ExpertsTouched, tc.shape.LocalExperts)
			}
			if tc.shape.Routing.Kind == RoutingPowerLaw {
				if !slices.IsSortedFunc(got, func(a, b int) int { return b - a }) {
					t.Fatalf("power-law spread %v not descending", got)
				}
				if even := (rows + len(got) - 1) / len(got); rows > len(got) && got[0] <= even {
					t.Fatalf("power-law spread %v: heaviest %d not above the even share %d", got, got[0], even)
				}
			}
		})
	}
}

// TestBuildRouting: the build option reaches every routed-expert op's
// shape, the grouped GEMM follows it (Kimi-K2.5, TP 8, batch 64: balanced
// reads all 384 experts at 512 / 384 rows each, M = 2), and a bad routing
// is refused naming the option.
func TestBuildRouting(t *testing.T) {
	a := mustPreset(t, "kimi-k2.5-nvfp4")
	s := mustBuild(t, a, Plan{TP: 8}, Workload{Batch: 64, Context: 4096}, BuildOptions{Routing: BalancedRouting})
	for r := range s.Ranks {
		g := find(t, s, r, "L05.moe.experts_gate_up")
		if g.MoE == nil || g.MoE.Routing != BalancedRouting || g.MoE.Rows != 512 || g.MoE.ExpertsTouched != 384 || g.Batch != 384 || g.M != 2 {
			t.Fatalf("rank %d gate_up: M %d batch %g shape %+v; want balanced 512 rows over 384 experts", r, g.M, g.Batch, g.MoE)
		}
	}
	_, err := BuildWith(a, Plan{TP: 8}, Workload{Batch: 1, Context: 4096}, BuildOptions{Routing: Routing{Kind: RoutingPowerLaw, Alpha: 0.5}})
	if err == nil || !strings.Contains(err.Error(), "moe_routing") {
		t.Fatalf("power-law-0.5: %v, want an error naming moe_routing", err)
	}
}
