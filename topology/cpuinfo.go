package topology

import (
	"bufio"
	"io"
	"os"
	"strings"
)

// CPUInfo reads the CPU vendor and model name from /proc/cpuinfo (Linux):
// vendor "amd" or "intel" for AuthenticAMD and GenuineIntel, otherwise
// vendor_id in lower case; "" for what the file does not say (or without
// the file).
func CPUInfo() (vendor, model string) {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "", ""
	}
	defer f.Close()
	return parseCPUInfo(f)
}

// parseCPUInfo reads the first vendor_id and model name of a
// /proc/cpuinfo listing.
func parseCPUInfo(r io.Reader) (vendor, model string) {
	sc := bufio.NewScanner(r)
	for sc.Scan() && (vendor == "" || model == "") {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "vendor_id":
			switch v {
			case "AuthenticAMD":
				vendor = "amd"
			case "GenuineIntel":
				vendor = "intel"
			default:
				vendor = strings.ToLower(v)
			}
		case "model name":
			model = v
		}
	}
	return vendor, model
}
