package model

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Routing is how a MoE layer's router spreads the token-expert assignments
// of a step over the experts: how many rows (token-expert pairs) land on a
// rank's experts and how many distinct experts they touch, which the
// grouped GEMMs' FLOPs and weight bytes follow. It travels on every
// routed-expert op (MoEShape.Routing) and in the build options, so sim,
// the executors and a perf DB read one fact. The zero value is uniform
// routing.
//
// The distributions (T tokens in the pool, each picking k of E experts; a
// rank holds L = E / ep of them):
//
//   - uniform: each token picks k distinct experts uniformly at random,
//     independently of the others: rows = T k L / E, touched = L (1 - (1 -
//     k/E)^T) (an expert is missed by one token with probability 1 - k/E).
//   - balanced: the routing aiconfigurator's collector measures its
//     "balanced" MoE tables under (collector/helper.py, balanced_logits):
//     with s = ceil(E / k), token t's j-th expert is (t + j s) mod E when
//     T >= s and (floor(t s / T) + j s) mod E below. Every expert gets
//     floor or ceil of T k / E rows; T k distinct experts are read while
//     T k <= E. Counted exactly (see balancedShape).
//   - power-law α: the collector's "power_law_α" tables
//     (power_law_logits_v3 without EPLB, collector/helper.py): per-expert
//     loads drawn from a power law x^-α truncated to [1, 0.8 T] (T k > E)
//     or [0.01, 2], scaled to T k rows, rounded, the rounding deficit
//     spread round-robin over the EP ranks onto their least loaded
//     experts, and the most loaded rank swapped to rank 0, which is the
//     rank the collector times (collector/vllm/collect_moe.py runs rank
//     0's experts, local_expert_offset 0). The shape is that rank's
//     expectation (see powerLawShape).
//
// The generators are read from github.com/ai-dynamo/aiconfigurator,
// collector/helper.py at commit 006afd7 and collector/vllm/collect_moe.py
// at 000b928; the perf DB sample's tables were collected at 095f58a, whose
// generator may differ in detail.
//
// Balanced and power-law shapes are the same on every rank: the rank the
// collector times (rank 0; for power-law the most loaded by construction,
// the one a step waits for). Under balanced routing the other ranks differ
// from it by at most one row per expert, and not at all when L is a
// multiple of s (Kimi-K2.5 and DeepSeek-V3 on 8 ranks: L = s).
//
// Text form (String, ParseRouting; the JSON form): "uniform", "balanced",
// "power-law-ALPHA" (e.g. power-law-1.2; aiconfigurator's spelling
// power_law_1.2 is read too).
type Routing struct {
	Kind RoutingKind
	// Alpha is the power-law exponent (RoutingPowerLaw only): above 1, at
	// most 10.
	Alpha float64
}

// RoutingKind names a routing distribution.
type RoutingKind uint8

const (
	RoutingUniform RoutingKind = iota
	RoutingBalanced
	RoutingPowerLaw
)

// The routings without parameters.
var (
	UniformRouting  = Routing{}
	BalancedRouting = Routing{Kind: RoutingBalanced}
)

// powerLawRouting is the power-law routing of exponent alpha.
func powerLawRouting(alpha float64) Routing { return Routing{Kind: RoutingPowerLaw, Alpha: alpha} }

// maxPowerLawAlpha bounds the exponent: beyond it the truncated law is a
// point mass at its lower end and x^(1-α) overflows float64 at 0.01.
const maxPowerLawAlpha = 10

// RoutingAccepted says which text ParseRouting accepts, for errors (the
// CLI's too).
const RoutingAccepted = "uniform, balanced or power-law-ALPHA (ALPHA above 1, at most 10; the perf DB's tables: power-law-1.01, power-law-1.2)"

const routingWant = "want " + RoutingAccepted

// String is the routing's text form: uniform, balanced, power-law-ALPHA.
func (r Routing) String() string {
	switch r.Kind {
	case RoutingUniform:
		return "uniform"
	case RoutingBalanced:
		return "balanced"
	case RoutingPowerLaw:
		return "power-law-" + strconv.FormatFloat(r.Alpha, 'g', -1, 64)
	}
	return fmt.Sprintf("routing(%d)", r.Kind)
}

// ParseRouting reads a routing's text form (case and surrounding space
// ignored; power_law_ALPHA as aiconfigurator writes it is read too).
func ParseRouting(s string) (Routing, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case "uniform":
		return UniformRouting, nil
	case "balanced":
		return BalancedRouting, nil
	}
	num, ok := strings.CutPrefix(t, "power-law-")
	if !ok {
		num, ok = strings.CutPrefix(t, "power_law_")
	}
	if !ok {
		return Routing{}, fmt.Errorf("routing %q: %s", s, routingWant)
	}
	a, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return Routing{}, fmt.Errorf("routing %q: %s", s, routingWant)
	}
	r := powerLawRouting(a)
	if err := r.Validate(); err != nil {
		return Routing{}, fmt.Errorf("routing %q: %s", s, routingWant)
	}
	return r, nil
}

// Validate checks the kind and, for a power law, the exponent.
func (r Routing) Validate() error {
	switch r.Kind {
	case RoutingUniform, RoutingBalanced:
		if r.Alpha != 0 {
			return fmt.Errorf("routing %s with exponent %g: only power-law has one", r, r.Alpha)
		}
		return nil
	case RoutingPowerLaw:
		if !(r.Alpha > 1 && r.Alpha <= maxPowerLawAlpha) {
			return fmt.Errorf("routing %s: %s", r, routingWant)
		}
		return nil
	}
	return fmt.Errorf("routing kind %d: %s", r.Kind, routingWant)
}

// IsZero reports whether r is uniform routing (the zero value), for
// encoding/json's omitzero.
func (r Routing) IsZero() bool { return r == Routing{} }

// MarshalText writes the routing's String form.
func (r Routing) MarshalText() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return []byte(r.String()), nil
}

// UnmarshalText reads a routing with ParseRouting.
func (r *Routing) UnmarshalText(b []byte) error {
	v, err := ParseRouting(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Shape returns the routing shape of a pool of tokens routed top-k of e
// experts over the local experts from first: Rows and ExpertsTouched as
// the routing gives them (see Routing). Balanced and power-law shapes do
// not depend on first (every rank carries the timed rank's shape).
// Complexity: uniform O(1); balanced O(min(tokens, ceil(e/topk)) x topk +
// local x topk); power-law O(min(tokens, 256)) plus a one-off integral per
// EP degree.
func (r Routing) Shape(tokens int64, topk, e, local, first int) MoEShape {
	s := MoEShape{RoutedTokens: tokens, TopK: topk, Experts: e, LocalExperts: local, FirstExpert: first, Routing: r}
	if e <= 0 {
		return s
	}
	if r.Kind == RoutingUniform || tokens <= 0 || topk <= 0 || topk > e || local <= 0 || local > e || e%local != 0 {
		s.Rows = float64(tokens) * float64(topk) * float64(local) / float64(e)
		s.ExpertsTouched = float64(local) * (1 - math.Pow(1-float64(topk)/float64(e), float64(tokens)))
		return s
	}
	switch r.Kind {
	case RoutingBalanced:
		rows, touched := balancedShape(tokens, int64(topk), int64(e), int64(local))
		s.Rows, s.ExpertsTouched = float64(rows), float64(touched)
	case RoutingPowerLaw:
		s.Rows, s.ExpertsTouched = powerLawShape(r.Alpha, tokens, topk, e, local)
	}
	return s
}

// balancedShape counts the rows and distinct experts among experts
// [0, local) under the collector's balanced routing (balanced_logits):
// with s = ceil(e/k), token t's j-th expert is (t + j s) mod e for t >= s
// tokens in all, and (floor(t s / T) + j s) mod e for fewer (the float
// t s / T plus the integer j s, truncated, is the integer floor plus j s).
//
// T >= s: expert p is picked by token t in slot j when t = (p - j s) mod
// e (mod e), so it gets sum_j #{t < T : t ≡ (p - j s) mod e (mod e)}
// rows, O(local k); when e = k s those residues are all values ≡ p (mod
// s), and the sum is #{t < T : t ≡ p (mod s)}, O(local). T < s: the T k
// pairs are enumerated, O(T k).
func balancedShape(tokens, k, e, local int64) (rows, touched int64) {
	s := (e + k - 1) / k
	if tokens >= s {
		for p := int64(0); p < local; p++ {
			var n int64
			if e == k*s {
				// The k slots' residues (p - j s) mod e are every value
				// ≡ p (mod s): the rows are #{t < T : t ≡ p (mod s)}.
				n = (tokens-1-p%s)/s + 1
				rows += n
				touched++
				continue
			}
			for j := int64(0); j < k; j++ {
				c := ((p-j*s)%e + e) % e
				if c < tokens {
					n += (tokens-1-c)/e + 1
				}
			}
			rows += n
			if n > 0 {
				touched++
			}
		}
		return rows, touched
	}
	// A bit per local expert, on the stack up to 1024 experts (a perf DB
	// lookup prices through here and allocates nothing).
	var buf [16]uint64
	seen := buf[:]
	if words := (local + 63) / 64; words > int64(len(buf)) {
		seen = make([]uint64, words)
	}
	for t := int64(0); t < tokens; t++ {
		a := t * s / tokens
		for j := int64(0); j < k; j++ {
			if p := (a + j*s) % e; p < local {
				rows++
				if w, b := p/64, uint64(1)<<(p%64); seen[w]&b == 0 {
					seen[w] |= b
					touched++
				}
			}
		}
	}
	return rows, touched
}

// powerLaw is the truncated power law x^-α on [a, b] the collector draws
// per-expert loads from (sample_power_law: inverse CDF).
type powerLaw struct{ alpha, a, b, norm float64 }

// newPowerLaw is the law of T tokens top-k of e experts: [1, 0.8 T] when
// T k > e, else [0.01, 2] (_generate_power_law_distribution).
func newPowerLaw(alpha float64, tokens int64, k, e int) powerLaw {
	p := powerLaw{alpha: alpha, a: 0.01, b: 2}
	if tokens*int64(k) > int64(e) {
		p.a, p.b = 1, 0.8*float64(tokens)
	}
	p.norm = 1 / intPow(-alpha, p.a, p.b)
	return p
}

// intPow is ∫_lo^hi x^q dx (0 when hi <= lo).
func intPow(q, lo, hi float64) float64 {
	if hi <= lo {
		return 0
	}
	if math.Abs(q+1) < 1e-12 {
		return math.Log(hi / lo)
	}
	return (math.Pow(hi, q+1) - math.Pow(lo, q+1)) / (q + 1)
}

// moment is E[x^m; lo <= x < hi], the m-th partial moment over [lo, hi]
// clipped to the support (m = 0: the probability).
func (p powerLaw) moment(m, lo, hi float64) float64 {
	lo, hi = math.Max(lo, p.a), math.Min(hi, p.b)
	return p.norm * intPow(m-p.alpha, lo, hi)
}

// quantile is the inverse CDF at u in [0, 1].
func (p powerLaw) quantile(u float64) float64 {
	q := 1 - p.alpha
	return math.Pow((math.Pow(p.b, q)-math.Pow(p.a, q))*u+math.Pow(p.a, q), 1/q)
}

// powerLawExactCounts is how many rounded per-expert counts powerLawShape
// sums exactly before treating the rest as continuous (rounding then
// adds only its 1/12 variance).
const powerLawExactCounts = 256

// powerLawShape is the expected rows and distinct experts on the rank the
// collector times under power-law routing of T tokens top-k of e experts,
// local experts per rank (ep = e / local ranks). The derivation follows
// _generate_power_law_distribution (collector/helper.py):
//
//  1. Loads x_e are i.i.d. from the truncated law; the scaled load is
//     x_e T k / Σx. For e in the hundreds Σx is close to e μ (μ = E[x]),
//     so each expert's count is n = min(round(c x), T), c = T k / (e μ),
//     whose moments are integrals of the law over the rounding intervals
//     [(m - 1/2)/c, (m + 1/2)/c).
//  2. The deficit D = T k - e E[n] is spread round-robin over the ranks,
//     each unit onto the rank's least loaded expert: D/ep per rank, which
//     turns zero-count experts into one-row experts while there are any
//     (an excess, D < 0, comes off the most loaded and touches nothing).
//  3. The timed rank is the most loaded of ep: its rows are the expected
//     maximum of ep block sums of local counts, each of mean T k / ep and
//     standard deviation σ = sqrt(local Var n), skewness γ = γ_n /
//     sqrt(local): T k / ep + σ (e1 + γ/6 (e2 - 1)), with e1, e2 the first
//     two moments of the largest of ep standard normals (Cornish-Fisher to
//     first order), at least ceil(T k / ep).
//  4. Its zero-count experts are local P(n = 0) less the linear regression
//     of the zero count on the block sum (cov = -P(n = 0) E[n]) times the
//     block's excess over the mean; the deficit fills them (step 2).
//
// ep = 1 (every expert local, TP): rows = T k; touched = e P(n=0 not) +
// min(D, e P(n = 0)). Checked against a Monte-Carlo of the generator
// (TestPowerLawShapeMonteCarlo): within 5 % up to 16 ranks; with 4-6
// experts per rank (ep 64) rows within 8 % and touched within 20 %, where
// one heavy expert decides the block and the normal picture is rough.
func powerLawShape(alpha float64, tokens int64, k, e, local int) (rows, touched float64) {
	law := newPowerLaw(alpha, tokens, k, e)
	tk := float64(tokens) * float64(k)
	T := float64(tokens)
	c := tk / (float64(e) * law.moment(1, law.a, law.b))

	// Moments of n = min(round(c x), T).
	var en, en2, en3 float64
	top := math.Min(math.Min(T-1, powerLawExactCounts), math.Ceil(c*law.b+0.5))
	for m := 0.0; m <= top; m++ {
		p := law.moment(0, (m-0.5)/c, (m+0.5)/c)
		en += m * p
		en2 += m * m * p
		en3 += m * m * m * p
	}
	if lo, hi := (top+0.5)/c, (T-0.5)/c; hi > lo {
		p := law.moment(0, lo, hi)
		en += c * law.moment(1, lo, hi)
		en2 += c*c*law.moment(2, lo, hi) + p/12
		en3 += c * c * c * law.moment(3, lo, hi)
	}
	pc := law.moment(0, (T-0.5)/c, math.Inf(1))
	en += T * pc
	en2 += T * T * pc
	en3 += T * T * T * pc
	p0 := law.moment(0, math.Inf(-1), 0.5/c)
	vn := math.Max(0, en2-en*en)
	deficit := tk - float64(e)*en

	L := float64(local)
	ep := e / local
	if ep == 1 {
		rows = tk
		zeros := L * p0
		touched = L - zeros + math.Max(0, math.Min(deficit, zeros))
	} else {
		sd := math.Sqrt(L * vn)
		e1, e2 := maxNormalMoments(ep)
		skew := 0.0
		if vn > 0 {
			skew = (en3 - 3*en*en2 + 2*en*en*en) / math.Pow(vn, 1.5) / math.Sqrt(L)
		}
		mean := tk / float64(ep)
		rows = math.Max(math.Ceil(mean), mean+sd*(e1+skew/6*(e2-1)))
		rows = math.Min(rows, math.Min(L*T, tk))
		zeros := L * p0
		if vn > 0 {
			zeros = math.Max(0, zeros-p0*en/vn*(rows-mean))
		}
		touched = L - zeros + math.Max(0, math.Min(deficit/float64(ep), zeros))
	}
	touched = math.Min(touched, math.Min(L, rows))
	touched = math.Max(touched, math.Ceil(rows/T))
	return rows, touched
}

// maxNormal caches maxNormalMoments by n.
var maxNormal sync.Map // int -> [2]float64

// maxNormalMoments returns E[M] and E[M^2] for M the largest of n
// independent standard normals: ∫ x^i n φ(x) Φ(x)^(n-1) dx by Simpson's
// rule over [-9, 9] in steps of 0.01 (error below 1e-6 for n <= 1024).
func maxNormalMoments(n int) (e1, e2 float64) {
	if n <= 1 {
		return 0, 1
	}
	if v, ok := maxNormal.Load(n); ok {
		m := v.([2]float64)
		return m[0], m[1]
	}
	const lo, hi, steps = -9.0, 9.0, 1800
	h := (hi - lo) / steps
	for i := 0; i <= steps; i++ {
		x := lo + float64(i)*h
		w := 2.0
		switch {
		case i == 0 || i == steps:
			w = 1
		case i%2 == 1:
			w = 4
		}
		phi := math.Exp(-x*x/2) / math.Sqrt(2*math.Pi)
		cdf := 0.5 * math.Erfc(-x/math.Sqrt2)
		f := float64(n) * phi * math.Exp(float64(n-1)*math.Log(cdf))
		if cdf == 0 {
			f = 0
		}
		e1 += w * x * f
		e2 += w * x * x * f
	}
	e1, e2 = e1*h/3, e2*h/3
	maxNormal.Store(n, [2]float64{e1, e2})
	return e1, e2
}

// powerLawSpread spreads rows over n experts as the power law ranks their
// loads: the i-th most loaded gets a share of the law's quantile at 1 -
// (i + 1/2)/local (the expected order statistics of the local draws), at
// least one row and at most tokens (a token picks an expert once); the
// integer split keeps the largest remainders. Descending. The caller keeps
// n <= rows <= n x tokens.
func powerLawSpread(alpha float64, tokens int64, k, e, local, rows, n int) []int {
	law := newPowerLaw(alpha, tokens, k, e)
	w := make([]float64, n)
	for i := range w {
		w[i] = law.quantile(1 - (float64(i)+0.5)/float64(local))
	}
	limit := int(min(tokens, int64(rows)))
	out := make([]int, n)
	for i := range out {
		out[i] = 1
	}
	extra := rows - n
	// The weights descend, so the first expert not yet at the cap has the
	// largest share: cap it while its share would pass the cap, then split
	// what is left over the rest.
	for first := 0; extra > 0 && first < n; {
		sum := 0.0
		for _, x := range w[first:] {
			sum += x
		}
		if float64(out[first])+float64(extra)*w[first]/sum > float64(limit) {
			extra -= limit - out[first]
			out[first] = limit
			first++
			continue
		}
		type rem struct {
			i    int
			frac float64
		}
		rems := make([]rem, 0, n-first)
		placed := 0
		for i := first; i < n; i++ {
			share := float64(extra) * w[i] / sum
			add := int(math.Floor(share))
			out[i] += add
			placed += add
			rems = append(rems, rem{i, share - float64(add)})
		}
		sort.SliceStable(rems, func(a, b int) bool { return rems[a].frac > rems[b].frac })
		for j := 0; j < extra-placed && j < len(rems); j++ {
			out[rems[j].i]++
		}
		break
	}
	return out
}
