package nvmldiscover

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestNoDriver: on a machine without the NVIDIA driver, discovery fails
// with one line wrapping ErrNoNVML and does not panic. Skipped where a
// driver is installed.
func TestNoDriver(t *testing.T) {
	for _, dir := range []string{"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"} {
		if _, err := os.Stat(dir + "/libnvidia-ml.so.1"); err == nil {
			t.Skip("NVIDIA driver present")
		}
	}
	_, _, err := Discover()
	if !errors.Is(err, ErrNoNVML) {
		t.Fatalf("error %v, want ErrNoNVML", err)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "libnvidia-ml.so.1 not found") {
		t.Errorf("message %q: want one line naming libnvidia-ml.so.1", msg)
	}
}

func TestCPUList(t *testing.T) {
	cases := []struct {
		words []uint
		want  string
	}{
		{[]uint{0xffffffffffffffff, 0, 0xffffffffffffffff}, "0-63,128-191"},
		{[]uint{0b1011}, "0-1,3"},
		{[]uint{0}, ""},
		{[]uint{1 << 63, 1}, "63-64"},
	}
	for _, c := range cases {
		if got := cpuList(c.words); got != c.want {
			t.Errorf("cpuList(%x) = %q, want %q", c.words, got, c.want)
		}
	}
}

func TestFirstBit(t *testing.T) {
	for _, c := range []struct {
		words []uint
		want  int
	}{{[]uint{0, 0}, -1}, {[]uint{1}, 0}, {[]uint{0, 4}, 66}} {
		if got := firstBit(c.words); got != c.want {
			t.Errorf("firstBit(%v) = %d, want %d", c.words, got, c.want)
		}
	}
}
