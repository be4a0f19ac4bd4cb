package units

import "testing"

// The thresholds are the decimal unit boundaries; each case sits on or
// just below one, so a shifted boundary fails.
func TestBytesAndCount(t *testing.T) {
	for _, tc := range []struct {
		in           float64
		bytes, count string
	}{
		{0, "0 B", "0"},
		{999, "999 B", "999"},
		{1000, "1.0 kB", "1.0k"},
		{1.5e6, "1.50 MB", "1.50M"},
		{2.94e9, "2.94 GB", "2.94G"},
		{1.027e12, "1027.00 GB", "1.027T"},
	} {
		if got := Bytes(tc.in); got != tc.bytes {
			t.Errorf("Bytes(%g) = %q, want %q", tc.in, got, tc.bytes)
		}
		if got := Count(tc.in); got != tc.count {
			t.Errorf("Count(%g) = %q, want %q", tc.in, got, tc.count)
		}
	}
}
