package units

import "testing"

// TestUs: hundredths of a microsecond; what rounds to zero there is 0,
// not 0.00 or an exponent.
func TestUs(t *testing.T) {
	for in, want := range map[float64]string{30.664: "30.66", 4.286: "4.29", 0.005: "0.01", 0.0049: "0", 5.259e-14: "0", -1e-9: "0", 0: "0", -2.5: "-2.50"} {
		if got := Us(in); got != want {
			t.Errorf("Us(%g) = %q, want %q", in, got, want)
		}
	}
}

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

// TestBinaryBytes: caps as engines state them in binary units (vLLM's
// FI_ALLREDUCE_FUSION_MAX_SIZE_MB: 0.5, 1, 4 MiB).
func TestBinaryBytes(t *testing.T) {
	for b, want := range map[int64]string{512: "0.5 KiB", 1 << 19: "512 KiB", 1 << 20: "1 MiB", 4 << 20: "4 MiB", 3 << 19: "1.5 MiB"} {
		if got := BinaryBytes(b); got != want {
			t.Errorf("BinaryBytes(%d) = %q, want %q", b, got, want)
		}
	}
}
