package perfdb

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Resolution says how a lookup reached its answer.
type Resolution uint8

const (
	// Exact: every axis hit a measured row; the answer is that row's
	// latency, verbatim.
	Exact Resolution = iota + 1
	// Interpolated: some axis fell between two measured values and was
	// blended linearly; every axis stayed inside the measured range.
	Interpolated
	// Held: some axis fell outside the measured range (or a ragged
	// branch was missing); the answer holds the nearest measured
	// point's utilization (speed-of-light time / measured time) and
	// rescales it to the query's speed of light.
	Held
)

var resolutionNames = [...]string{"", "exact", "interpolated", "held"}

func (r Resolution) String() string {
	if int(r) < len(resolutionNames) {
		return resolutionNames[r]
	}
	return "unknown"
}

// blend is how an axis is interpolated between its two bracketing
// measured values (aiconfigurator docs/design/perf_interp_design.md,
// "value transform").
type blend uint8

const (
	// blendRaw: latency linear in the axis value.
	blendRaw blend = iota
	// blendUtil: utilization linear in the axis value, latency =
	// SOL / utilization. Used where a neighbour's latency says nothing
	// at the query (another GEMM shape) but its efficiency transfers.
	blendUtil
)

// grid is one slice of a table (fixed categorical keys): latency in us
// over numeric axes, outermost first, possibly ragged (a branch may lack
// values its siblings have). It never smooths: a query on a measured
// point returns the measurement.
//
// Resolution per axis, recursively from the outermost:
//   - the query value is a measured key: descend into it;
//   - it lies between two keys: resolve both branches (at the bracket's
//     values) and blend them per the axis' blend, with t = (x-lo)/(hi-lo);
//   - it lies beyond the keys, or one bracket branch cannot resolve:
//     resolve the one available branch and rescale its latency by
//     SOL(query) / SOL(branch point): the branch's utilization held.
//     An axis measured at a single value under a node is not a trend:
//     nothing is held across it (the lookup misses; e.g. FP8-KV MLA
//     rows measured at one head only, because the kernel fails at more).
//
// Cost: O(2^blended axes x log keys) per lookup, no allocation.
type grid struct {
	axes   []string
	blends []blend
	// sol is the speed-of-light time at a point of the axes (any unit:
	// only ratios are used); must be > 0.
	sol func(x gridPoint) float64
	// maxHold bounds, per axis, how far a held utilization may be carried
	// (ratio of query to anchor value; 0 or nil: unbounded, as along a
	// measured curve). GEMM's (n, k) sites are distinct shapes: an
	// efficiency transfers only to nearby shapes.
	maxHold []float64
	root    gnode
	n       int // measured points
	dups    int // points dropped as duplicates of an earlier row
}

type gnode struct {
	keys []float64
	kids []gnode   // inner axes
	us   []float64 // innermost axis: latency, us
	rows []int32   // innermost axis: row in the file
}

type gpoint struct {
	x   []float64
	us  float64
	row int32
}

// maxAxes bounds a grid's axes (lookups keep the query on the stack).
const maxAxes = 4

// gridPoint is a point of a grid, one value per axis (unused axes zero),
// passed by value so that a lookup does not allocate.
type gridPoint = [maxAxes]float64

// newGrid builds a grid from points (coordinates per axes, latency us,
// row). Points with the same coordinates keep the first in row order.
func newGrid(axes []string, blends []blend, sol func(gridPoint) float64, pts []gpoint) *grid {
	if len(axes) == 0 || len(axes) > maxAxes || len(blends) != len(axes) {
		panic("perfdb: grid axes")
	}
	g := &grid{axes: axes, blends: blends, sol: sol}
	slices.SortFunc(pts, func(p, q gpoint) int {
		for k := range p.x {
			if c := cmp.Compare(p.x[k], q.x[k]); c != 0 {
				return c
			}
		}
		return cmp.Compare(p.row, q.row)
	})
	out := pts[:0]
	for i := range pts {
		if len(out) > 0 && equalX(out[len(out)-1].x, pts[i].x) {
			g.dups++
			continue
		}
		out = append(out, pts[i])
	}
	g.n = len(out)
	g.root = buildNode(out, 0, len(axes))
	return g
}

func equalX(a, b []float64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func buildNode(pts []gpoint, lvl, n int) gnode {
	var nd gnode
	for i := 0; i < len(pts); {
		j := i
		for j < len(pts) && pts[j].x[lvl] == pts[i].x[lvl] {
			j++
		}
		nd.keys = append(nd.keys, pts[i].x[lvl])
		if lvl == n-1 {
			nd.us = append(nd.us, pts[i].us)
			nd.rows = append(nd.rows, pts[i].row)
		} else {
			nd.kids = append(nd.kids, buildNode(pts[i:j], lvl+1, n))
		}
		i = j
	}
	return nd
}

// axisTrace records how the first path of a lookup crossed an axis.
type axisTrace struct {
	how    Resolution
	lo, hi float64 // bracket (blend), or the anchor in lo (held)
}

// lookup is one query's state.
type lookup struct {
	g       *grid
	x       gridPoint // working point: the query, with the axes being resolved set to branch values
	exclude int32     // a row treated as absent (leave-one-out); -1 for none
	how     Resolution
	trace   [maxAxes]axisTrace
}

// at resolves the query q (one value per axis). row is the measured row
// of an exact hit, -1 otherwise. ok is false when nothing anchors the
// query (an empty grid).
func (g *grid) at(q []float64) (us float64, row int32, lk lookup, ok bool) {
	return g.atExcluding(q, -1)
}

func (g *grid) atExcluding(q []float64, exclude int32) (us float64, row int32, lk lookup, ok bool) {
	lk = lookup{g: g, exclude: exclude, how: Exact}
	copy(lk.x[:], q)
	us, row, ok = lk.node(&g.root, 0)
	if !ok {
		return 0, -1, lk, false
	}
	if lk.how != Exact {
		row = -1
	}
	return us, row, lk, true
}

func (lk *lookup) note(lvl int, how Resolution, lo, hi float64) {
	if how > lk.how {
		lk.how = how
	}
	if lk.trace[lvl].how == 0 {
		lk.trace[lvl] = axisTrace{how: how, lo: lo, hi: hi}
	}
}

func (lk *lookup) node(n *gnode, lvl int) (float64, int32, bool) {
	v := lk.x[lvl]
	keys := n.keys
	i := sort.SearchFloat64s(keys, v)
	lo, hi := i-1, i
	if i < len(keys) && keys[i] == v {
		if us, row, ok := lk.child(n, lvl, i); ok {
			lk.note(lvl, Exact, v, v)
			return us, row, true
		}
		hi = i + 1 // the key holds only an excluded point: bracket around it
	}
	var a, b float64
	okA, okB := false, false
	if lo >= 0 {
		lk.x[lvl] = keys[lo]
		a, _, okA = lk.child(n, lvl, lo)
	}
	if hi < len(keys) {
		lk.x[lvl] = keys[hi]
		b, _, okB = lk.child(n, lvl, hi)
	}
	switch {
	case okA && okB:
		xl, xh := keys[lo], keys[hi]
		t := (v - xl) / (xh - xl)
		if lk.g.blends[lvl] == blendRaw {
			lk.x[lvl] = v
			lk.note(lvl, Interpolated, xl, xh)
			return (1-t)*a + t*b, -1, true
		}
		lk.x[lvl] = xl
		ua := lk.g.sol(lk.x) / a
		lk.x[lvl] = xh
		ub := lk.g.sol(lk.x) / b
		lk.x[lvl] = v
		lk.note(lvl, Interpolated, xl, xh)
		return lk.g.sol(lk.x) / ((1-t)*ua + t*ub), -1, true
	case (okA || okB) && len(keys) > 1:
		us, anchor := a, keys[max(lo, 0)]
		if !okA {
			us, anchor = b, keys[hi]
		}
		if r := lk.g.maxHold; r != nil && r[lvl] > 0 && math.Max(v/anchor, anchor/v) > r[lvl] {
			lk.x[lvl] = v
			return 0, -1, false // too far from any measured site to borrow its efficiency
		}
		lk.x[lvl] = anchor
		sb := lk.g.sol(lk.x)
		lk.x[lvl] = v
		sq := lk.g.sol(lk.x)
		lk.note(lvl, Held, anchor, anchor)
		return us * sq / sb, -1, true
	}
	lk.x[lvl] = v
	return 0, -1, false
}

// child resolves branch i of n (a leaf value on the innermost axis).
func (lk *lookup) child(n *gnode, lvl, i int) (float64, int32, bool) {
	if lvl == len(lk.g.axes)-1 {
		if n.rows[i] == lk.exclude {
			return 0, -1, false
		}
		return n.us[i], n.rows[i], true
	}
	return lk.node(&n.kids[i], lvl+1)
}

// describe writes the lookup's path: "tokens=1" for an exact axis,
// "step=4097 in [4096,8192]" for a blend, "m=40000 held at 32768" beyond;
// "no table row" for the zero Result of a failed lookup.
func (lk *lookup) describe(b *strings.Builder) {
	if lk.g == nil {
		b.WriteString("no table row")
		return
	}
	for i, name := range lk.g.axes {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(fmtNum(lk.queryValue(i)))
		t := lk.trace[i]
		switch t.how {
		case Interpolated:
			fmt.Fprintf(b, " in [%s,%s]", fmtNum(t.lo), fmtNum(t.hi))
		case Held:
			fmt.Fprintf(b, " held at %s", fmtNum(t.lo))
		}
	}
}

// queryValue is the query's value on axis i (the working point is
// restored to the query after each level).
func (lk *lookup) queryValue(i int) float64 { return lk.x[i] }

func fmtNum(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// each calls f for every measured point, in axis order.
func (g *grid) each(f func(x []float64, us float64, row int32)) {
	var x [maxAxes]float64
	var walk func(n *gnode, lvl int)
	walk = func(n *gnode, lvl int) {
		for i, k := range n.keys {
			x[lvl] = k
			if lvl == len(g.axes)-1 {
				f(x[:len(g.axes)], n.us[i], n.rows[i])
			} else {
				walk(&n.kids[i], lvl+1)
			}
		}
	}
	walk(&g.root, 0)
}

// size is the number of measured points (0 for a nil grid).
func (g *grid) size() int {
	if g == nil {
		return 0
	}
	return g.n
}
