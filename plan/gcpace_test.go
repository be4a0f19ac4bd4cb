package plan

import (
	"runtime/debug"
	"testing"
)

// gcPercent reads the collector's pace (SetGCPercent is its only reader).
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

// TestPaceGC: a sweep runs the collector at sweepGCPercent and puts back
// the pace it found when the last of overlapping sweeps ends; a process
// that already runs it slower (GOGC above, or off) keeps its own.
func TestPaceGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	r1 := paceGC()
	if got := gcPercent(); got != sweepGCPercent {
		t.Fatalf("during a sweep: GC percent %d, want %d", got, sweepGCPercent)
	}
	r2 := paceGC()
	r1()
	if got := gcPercent(); got != sweepGCPercent {
		t.Fatalf("one of two sweeps ended: GC percent %d, want %d", got, sweepGCPercent)
	}
	r2()
	if got := gcPercent(); got != 100 {
		t.Fatalf("after the sweeps: GC percent %d, want the 100 found", got)
	}
	for _, slower := range []int{1000, -1} {
		debug.SetGCPercent(slower)
		r := paceGC()
		if got := gcPercent(); got != slower {
			t.Errorf("GOGC %d before the sweep: %d during it, want it kept", slower, got)
		}
		r()
		if got := gcPercent(); got != slower {
			t.Errorf("GOGC %d before the sweep: %d after it", slower, got)
		}
	}
}
