package stats

import (
	"fmt"
	"math"
	"testing"
)

func TestQuantile(t *testing.T) {
	// R type 7 by hand: position q*(n-1).
	v := []float64{10, 20, 30, 40, 50}
	for _, tc := range []struct {
		q, want float64
	}{
		{0, 10}, {0.5, 30}, {1, 50},
		{0.1, 14}, // pos 0.4: 10 + 0.4*10
		{0.9, 46}, // pos 3.6: 40 + 0.6*10
	} {
		t.Run(fmt.Sprintf("q=%v", tc.q), func(t *testing.T) {
			if got := Quantile(v, tc.q); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("Quantile(%v) = %v, want %v", tc.q, got, tc.want)
			}
		})
	}
	if !math.IsNaN(Quantile(nil, 0.5)) {
		t.Error("Quantile of nothing is not NaN")
	}
}
