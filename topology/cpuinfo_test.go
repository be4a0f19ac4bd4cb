package topology

import (
	"strings"
	"testing"
)

// The vendor comes from vendor_id, not the model name: a virtual machine's
// "Common KVM processor" on an AMD host is still amd.
func TestParseCPUInfo(t *testing.T) {
	for _, c := range []struct {
		name, text, vendor, model string
	}{
		{"amd", "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel name\t: AMD EPYC 9654 96-Core Processor\n", "amd", "AMD EPYC 9654 96-Core Processor"},
		{"intel", "vendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n", "intel", "Intel(R) Xeon(R) Platinum 8480+"},
		{"kvm on amd", "vendor_id\t: AuthenticAMD\nmodel name\t: Common KVM processor\n", "amd", "Common KVM processor"},
		{"other vendor", "vendor_id\t: HygonGenuine\nmodel name\t: Hygon C86 7285\n", "hygongenuine", "Hygon C86 7285"},
		{"arm, no vendor_id", "processor\t: 0\nBogoMIPS\t: 2000.00\nCPU implementer\t: 0x41\n", "", ""},
	} {
		v, m := parseCPUInfo(strings.NewReader(c.text))
		if v != c.vendor || m != c.model {
			t.Errorf("%s: vendor %q model %q, want %q %q", c.name, v, m, c.vendor, c.model)
		}
	}
}
