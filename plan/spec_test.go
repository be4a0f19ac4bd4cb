package plan

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// TestSpecTPOTQuantile: step 10 ms, 2 tokens per step with variance 1, a
// 256-token request: sd = sqrt(1 / (256 x 8)) = 0.0221, so the 90th
// percentile is (0.5 + 1.2816 x 0.0221) x 10 = 5.283 ms.
func TestSpecTPOTQuantile(t *testing.T) {
	if got := SpecTPOTQuantileMs(10000, 2, 1, 256, z90); !near(got, 5.2832, 1e-3) {
		t.Errorf("%v ms, want 5.283", got)
	}
}
