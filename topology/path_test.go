package topology

import "testing"

// TestNVSwitchJoined: multicast memory needs an NVSwitch; an HGX box's
// GPUs share one, NVLink-bridged pairs and PCIe boxes do not.
func TestNVSwitchJoined(t *testing.T) {
	for _, c := range []struct {
		topo string
		gpus []int
		want bool
	}{
		{"nvswitch:8xh200-sxm", nil, true},
		{"nvswitch:8xb200", []int{0, 5}, true},
		{"nvl:2xh100-nvl", nil, false},
		{"rtxpro6000-2s", nil, false},
	} {
		tp, err := Resolve(c.topo, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := tp.NVSwitchJoined(c.gpus); got != c.want {
			t.Errorf("%s %v: NVSwitch-joined %v, want %v", c.topo, c.gpus, got, c.want)
		}
	}
}
