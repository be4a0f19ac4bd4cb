// Package units renders quantities for people with their unit in the
// text: bytes in decimal units (GB = 1e9 B, as GPU vendors and NCCL state
// sizes) and counts with SI suffixes (parameters, FLOPs); microseconds
// to the hundredth, the unit left to the caller's text.
package units

import (
	"fmt"
	"math"
	"strconv"
)

// Us renders a time in microseconds to the hundredth ("30.66"), and one
// that rounds to zero there as "0" (a fit's 5.259e-14 us is none).
func Us(us float64) string {
	if math.Abs(us) < 0.005 {
		return "0"
	}
	return fmt.Sprintf("%.2f", us)
}

// Bytes renders b bytes: "1.50 GB", "12.3 kB", "512 B".
func Bytes(b float64) string {
	switch {
	case b >= 1e9:
		return fmt.Sprintf("%.2f GB", b/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.2f MB", b/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", b/1e3)
	}
	return fmt.Sprintf("%.0f B", b)
}

// BinaryBytes renders b bytes in binary units, as engines state their
// buffer caps (vLLM's sizes in MiB): "512 KiB", "4 MiB", "0.5 KiB".
func BinaryBytes(b int64) string {
	if b >= 1<<20 {
		return strconv.FormatFloat(float64(b)/(1<<20), 'f', -1, 64) + " MiB"
	}
	return strconv.FormatFloat(float64(b)/(1<<10), 'f', -1, 64) + " KiB"
}

// Count renders a count: "1.027T", "61.50G", "3.2k".
func Count(n float64) string {
	switch {
	case n >= 1e12:
		return fmt.Sprintf("%.3fT", n/1e12)
	case n >= 1e9:
		return fmt.Sprintf("%.2fG", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fk", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}
