// Package stats holds the order statistics tpscope's measurements share
// (exec's step summaries, the comparison's per-op medians and spreads).
// Values are in whatever unit the caller measures; NaN stands for "no
// values".
package stats

import "math"

// Quantile returns the q-quantile (0 <= q <= 1) of sorted values by linear
// interpolation between order statistics (R type 7, numpy's default):
// position q*(n-1), so p10 of 10 values lies between the 1st and 2nd
// smallest. It returns NaN for no values.
func Quantile(sorted []float64, q float64) float64 {
	n := len(sorted)
	switch {
	case n == 0:
		return math.NaN()
	case n == 1:
		return sorted[0]
	}
	x := q * float64(n-1)
	if x < 0 {
		return sorted[0]
	}
	i := int(x)
	if i >= n-1 {
		return sorted[n-1]
	}
	f := x - float64(i)
	return sorted[i]*(1-f) + sorted[i+1]*f
}
