package topology

import (
	"encoding/json"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestCatalog: the embedded catalog parses, every entry validates as a
// Device, and every number has a source.
func TestCatalog(t *testing.T) {
	if _, err := loadCatalog(); err != nil {
		t.Fatal(err)
	}
	gpus := GPUs()
	if len(gpus) < 19 {
		t.Fatalf("%d catalog entries, want at least the 19 of the brief", len(gpus))
	}
	for _, g := range gpus {
		t.Run(g.Key, func(t *testing.T) {
			d := g.Device
			if err := d.Validate(); err != nil {
				t.Fatal(err)
			}
			a, ok := Arch(g.ArchKey)
			if !ok {
				t.Fatalf("arch %q not in the catalog", g.ArchKey)
			}
			if d.Arch != a.Family || !slices.Contains(a.ComputeCapabilities, d.ComputeCapability) {
				t.Errorf("arch %s (%s, cc %v) vs device arch %q cc %s", a.Key, a.Family, a.ComputeCapabilities, d.Arch, d.ComputeCapability)
			}
			if !(d.SMClockMHz <= d.BoostClockMHz && d.BoostClockMHz <= g.MaxClockMHz*1.0001) {
				t.Errorf("clocks: sustained %.0f <= peak clock %.0f <= max %.0f does not hold", d.SMClockMHz, d.BoostClockMHz, g.MaxClockMHz)
			}
			if d.L2Bytes <= 0 || d.MinKernelUsByKind == nil || d.LaunchGraphUs <= 0 || len(d.Efficiency) == 0 {
				t.Errorf("incomplete: l2 %d, floors %v, graph gap %v, efficiency %v", d.L2Bytes, d.MinKernelUsByKind, d.LaunchGraphUs, d.Efficiency)
			}
			for _, k := range []string{"compute_capability", "sms", "boost_clock_mhz", "sm_clock_mhz", "mem_bytes", "mem_bw_gbps", "l2_bytes",
				"mem_efficiency", "launch_eager_us", "launch_graph_us", "kernel_gap_eager_us", "min_kernel_us", "min_kernel_us_by_kind", "efficiency"} {
				if d.Sources[k] == "" {
					t.Errorf("no source for %s", k)
				}
			}
			for k := range d.PeakTFLOPS {
				if d.Sources["peak_tflops."+k] == "" {
					t.Errorf("no source for peak_tflops.%s", k)
				}
			}
			for _, k := range []string{"max_clock_mhz", "tdp_w"} {
				if g.Sources[k] == "" {
					t.Errorf("no source for %s", k)
				}
			}
			if g.Interconnect.Source == "" || g.Interconnect.PCIeGen < 3 || g.Interconnect.PCIeWidth != 16 {
				t.Errorf("interconnect %+v", g.Interconnect)
			}
			if nv := g.Interconnect; nv.NVLinks > 0 {
				// hardware.md / datasheets: 25 GB/s per link per direction
				// for NVLink 3 and 4, 50 for NVLink 5.
				per := map[int]float64{3: 25, 4: 25, 5: 50}[nv.NVLinkGen]
				if nv.NVLinkGBps != per*float64(nv.NVLinks) || (nv.NVLinkFabric != "nvswitch" && nv.NVLinkFabric != "bridge") {
					t.Errorf("NVLink %d x %d links = %.0f GB/s, fabric %q; want %.0f per link", nv.NVLinkGen, nv.NVLinks, nv.NVLinkGBps, nv.NVLinkFabric, per)
				}
			}
		})
	}
}

// TestCatalogDtypes: which dtypes have a native tensor peak, written down
// from the architecture whitepapers independently of catalog.json: no FP8
// or FP4 on Ampere, no FP4 on Ada and Hopper, all of them on Blackwell.
func TestCatalogDtypes(t *testing.T) {
	want := map[string][]string{
		"ampere":    {"bf16", "fp16", "fp32"},
		"ada":       {"bf16", "fp16", "fp32", "fp8"},
		"hopper":    {"bf16", "fp16", "fp32", "fp8"},
		"blackwell": {"bf16", "fp16", "fp32", "fp4", "fp8"},
	}
	for _, g := range GPUs() {
		if got := slices.Sorted(maps.Keys(g.Device.PeakTFLOPS)); !slices.Equal(got, want[g.Device.Arch]) {
			t.Errorf("%s (%s): dtypes %v, want %v", g.Key, g.Device.Arch, got, want[g.Device.Arch])
		}
	}
}

// TestCatalogPeaksFollowArch is an independent check of the data: a dense
// peak divided by SMs x the architecture's FLOP/clk/SM (whitepaper rates,
// catalog.json archs) is the clock the vendor quoted it at. Tolerances:
// that clock must lie within [0.75, 1.01] x the max SM clock (vendors
// quote at or somewhat below boost: Hopper SXM tensor peaks are at 1,830 of
// 1,980 MHz), within 5 % of the device's stated peak clock
// (BoostClockMHz), and the tensor dtypes of one entry within 5 % of each
// other (B300's datasheet FP4 and BF16 figures are 3.6 % apart). For the
// SM120 and SM100 parts the per-SM rates were themselves read off one
// part's figures (see the arch sources), so the check there tests the
// other SKUs and the ratios between dtypes.
func TestCatalogPeaksFollowArch(t *testing.T) {
	for _, g := range GPUs() {
		t.Run(g.Key, func(t *testing.T) {
			d := g.Device
			a, _ := Arch(g.ArchKey)
			implied := map[string]float64{}
			for k, p := range d.PeakTFLOPS {
				rate, ok := a.FLOPsPerClkPerSM(k, g.Consumer)
				if !ok {
					t.Fatalf("peak_tflops.%s: the arch %s has no rate for it", k, a.Key)
				}
				implied[k] = p * 1e6 / (float64(d.SMs) * rate) // MHz
			}
			if g.PeakCheckExempt != "" {
				// The exemption must be real: the tensor peak far below the
				// architecture's rate at the max clock.
				if implied["bf16"] > 0.5*g.MaxClockMHz {
					t.Errorf("exempt (%s) but bf16 implies %.0f MHz of %.0f", g.PeakCheckExempt, implied["bf16"], g.MaxClockMHz)
				}
				return
			}
			lo, hi := math.Inf(1), 0.0
			for k, c := range implied {
				if c > 1.01*g.MaxClockMHz || c < 0.75*g.MaxClockMHz {
					t.Errorf("%s: %.1f TF implies %.0f MHz, outside [0.75, 1.01] x max clock %.0f", k, d.PeakTFLOPS[k], c, g.MaxClockMHz)
				}
				if math.Abs(c/d.BoostClockMHz-1) > 0.05 {
					t.Errorf("%s: implies %.0f MHz, more than 5 %% from the stated peak clock %.0f", k, c, d.BoostClockMHz)
				}
				if k != "fp32" {
					lo, hi = math.Min(lo, c), math.Max(hi, c)
				}
			}
			if hi/lo > 1.05 {
				t.Errorf("tensor dtypes imply clocks %.0f-%.0f MHz, more than 5 %% apart: %v", lo, hi, implied)
			}
		})
	}
}

// TestKernelFloors recomputes the Hopper floors by hand from the formula
// of catalog.go and the constants of catalog.json (ramp 600 + drain 200
// cycles, 0.5 us per DRAM round trip) at the H100 SXM's 1,830 MHz:
//
//	elementwise  800 / 1830 + 1 x 0.5 = 0.937
//	norm        1100 / 1830 + 2 x 0.5 = 1.601
//	gemm        1500 / 1830 + 2 x 0.5 = 1.820
//	router      3200 / 1830 + 1 x 0.5 = 2.249
//	moe_gemm    1500 / 1830 + 3 x 0.5 = 2.320
//
// Each is also the kind's ramp (the time added to the roofline term).
func TestKernelFloors(t *testing.T) {
	g, err := LookupGPU("h100-sxm")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"elementwise": 0.937, "norm": 1.601, "gemm": 1.820, "router": 2.249, "moe_gemm": 2.320}
	for k, w := range want {
		if got := g.Device.MinKernelUsByKind[k]; math.Abs(got-w) > 0.006 {
			t.Errorf("%s floor %.3f, want %.3f", k, got, w)
		}
		if got := g.Device.RampUs[k]; math.Abs(got-w) > 0.006 {
			t.Errorf("%s ramp %.3f, want the floor %.3f", k, got, w)
		}
	}
	if !strings.Contains(g.Device.Sources["ramp_us"], "not fitted") {
		t.Errorf("ramp source does not say how it was derived: %q", g.Device.Sources["ramp_us"])
	}
	if g.Device.MinKernelUs != g.Device.MinKernelUsByKind["elementwise"] {
		t.Errorf("min_kernel_us %.2f, want the smallest floor (elementwise)", g.Device.MinKernelUs)
	}
	if !strings.Contains(g.Device.Sources["min_kernel_us_by_kind"], "not fitted") {
		t.Errorf("floor source does not say how it was derived: %q", g.Device.Sources["min_kernel_us_by_kind"])
	}
}

// TestHopperFloorsAgainstH200Recording compares the derived Hopper priors
// with what tpscope's executor measured on one H200 in CUDA-graph mode
// (exec/cuda/testdata/h200/h200-tiny-mla-moe-tp1-graph.otlp.jsonl.gz, whose
// ops are small enough to sit at the floor; medians per kernel computed
// from the spans' tpscope.device_us with a short script: cublasGemmEx 5.28,
// rmsnorm 4.45, topk_router 4.86, ew_silu_mul 3.90 us). The executor
// brackets every op with two timing events, so a measured span holds the
// kernel, its node and its two events less the transition after the
// closing event: floor + LaunchGraphUs + 2 x TimingEventUs -
// TimingEventGapUs. The floors were not fitted to these numbers; the test
// asks they land within 20 % (the model has one constant per kind, the
// kernels have shapes).
func TestHopperFloorsAgainstH200Recording(t *testing.T) {
	g, _ := LookupGPU("h200-sxm")
	d := g.Device
	inSpan := d.LaunchGraphUs + 2*d.TimingEventUs - d.TimingEventGapUs
	measured := map[string]float64{"gemm": 5.28, "norm": 4.45, "router": 4.86, "elementwise": 3.90}
	for k, m := range measured {
		pred := d.MinKernelUsByKind[k] + inSpan
		if math.Abs(pred/m-1) > 0.20 {
			t.Errorf("%s: floor %.2f + %.2f in the span = %.2f us, measured span %.2f (%.0f %%)", k, d.MinKernelUsByKind[k], inSpan, pred, m, 100*(pred/m-1))
		}
	}
}

func TestLookupGPU(t *testing.T) {
	for name, want := range map[string]string{
		"h100-sxm": "h100-sxm", "H100 SXM": "h100-sxm", "h100sxm": "h100-sxm", "NVIDIA H100 SXM5": "h100-sxm",
		"rtxpro6000-server": "rtx-pro-6000-server", "RTX PRO 6000 Server": "rtx-pro-6000-server", "rtxpro6000": "rtx-pro-6000-server",
		"rtx5090": "rtx-5090", "4090": "rtx-4090", "H200": "h200-sxm", "gb300-nvl72": "gb300",
	} {
		g, err := LookupGPU(name)
		if err != nil || g.Key != want {
			t.Errorf("LookupGPU(%q) = %s, %v; want %s", name, g.Key, err, want)
		}
	}
	_, err := LookupGPU("h999")
	if err == nil || !strings.Contains(err.Error(), `"h999"`) || !strings.Contains(err.Error(), "l40s") || strings.Contains(err.Error(), "\n") {
		t.Errorf("unknown GPU: %v; want one line naming it and listing the catalog", err)
	}
}

// TestMatchNVMLName: names as nvidia-smi / NVML print them (and spellings
// other tools use) map to the right entry; names of GPUs the catalog does
// not hold match nothing, even when they share a token (RTX 4090 D has
// 114 SMs, not the 4090's 128; the L40 is not the L40S).
func TestMatchNVMLName(t *testing.T) {
	cases := map[string]string{
		"NVIDIA H100 80GB HBM3": "h100-sxm",
		"NVIDIA H100-SXM5-80GB": "h100-sxm",
		"H100 SXM5 80GB":        "h100-sxm",
		"NVIDIA H100 PCIe":      "h100-pcie",
		"NVIDIA H100 NVL":       "h100-nvl",
		"NVIDIA H200":           "h200-sxm",
		"NVIDIA H200 NVL":       "h200-nvl",
		"NVIDIA H20":            "h20",
		"NVIDIA A100-SXM4-80GB": "a100-sxm",
		"NVIDIA A100-SXM4-40GB": "a100-sxm",
		"NVIDIA A100 80GB PCIe": "a100-pcie",
		"NVIDIA A100-PCIE-40GB": "a100-pcie",
		"NVIDIA B200":           "b200",
		"NVIDIA B300 SXM6 AC":   "b300",
		"NVIDIA GB200":          "gb200",
		"NVIDIA GB300":          "gb300",
		"NVIDIA L40S":           "l40s",
		"NVIDIA L4":             "l4",
		"NVIDIA RTX PRO 6000 Blackwell Server Edition":            "rtx-pro-6000-server",
		"NVIDIA RTX PRO 6000 Blackwell Workstation Edition":       "rtx-pro-6000-workstation",
		"NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition": "rtx-pro-6000-maxq",
		"NVIDIA GeForce RTX 5090":                                 "rtx-5090",
		"NVIDIA GeForce RTX 4090":                                 "rtx-4090",
		"NVIDIA GeForce RTX 4090 D":                               "",
		// Variants with other memory or rates than the entry's: the
		// H20 with 141 GB of HBM3e, the export 5090.
		"NVIDIA H20-3e":                  "",
		"NVIDIA GeForce RTX 5090 D":      "",
		"NVIDIA L40":                     "",
		"NVIDIA RTX 6000 Ada Generation": "",
		"NVIDIA H800":                    "",
		"Tesla V100-SXM2-32GB":           "",
		"":                               "",
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			g, ok := MatchNVMLName(name)
			if ok != (want != "") || g.Key != want {
				t.Errorf("MatchNVMLName(%q) = %q, %v; want %q", name, g.Key, ok, want)
			}
		})
	}
	for _, g := range GPUs() {
		if m, ok := MatchNVMLName(g.Device.Name); !ok || m.Key != g.Key {
			t.Errorf("the entry's own NVML name %q matches %q, %v; want %s", g.Device.Name, m.Key, ok, g.Key)
		}
	}
}

// TestDeriveDevice: a GPU the catalog does not hold gets its peaks from
// the architecture table. Expected values by hand:
//   - NVIDIA L40 (cc 8.9, 18,176 CUDA cores, 2,490 MHz): 142 SMs;
//     bf16 142 x 1024 x 2490 / 1e6 = 362.066 TF, fp8 724.132, fp32
//     142 x 256 x 2490 / 1e6 = 90.516, no fp4;
//     memory 9,001 MHz x 2 x 384 bit / 8 = 864.1 GB/s.
//   - NVIDIA GeForce RTX 4090 D (cc 8.9, 14,592 cores, 2,520 MHz): 114 SMs;
//     GeForce rates: bf16 114 x 512 x 2520 / 1e6 = 147.087 TF, fp8
//     294.175, fp32 114 x 256 x 2520 / 1e6 = 73.544.
//   - Tesla V100 (cc 7.0): not in the catalog's architectures: no derivation.
func TestDeriveDevice(t *testing.T) {
	cases := []struct {
		name  string
		g     ProbeGPU
		sms   int
		peaks map[string]float64
		bw    float64
	}{
		{"L40", ProbeGPU{Name: "NVIDIA L40", ComputeCapability: "8.9", CUDACores: 18176, MaxSMClockMHz: 2490, MaxMemClockMHz: 9001, MemBusWidthBits: 384, MemBytes: 48e9},
			142, map[string]float64{"bf16": 362.066, "fp16": 362.066, "fp8": 724.132, "fp32": 90.516}, 864.1},
		{"RTX 4090 D", ProbeGPU{Name: "NVIDIA GeForce RTX 4090 D", ComputeCapability: "8.9", CUDACores: 14592, MaxSMClockMHz: 2520, MaxMemClockMHz: 10501, MemBusWidthBits: 384, MemBytes: 24e9},
			114, map[string]float64{"bf16": 147.087, "fp16": 147.087, "fp8": 294.175, "fp32": 73.544}, 1008.1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, ok := DeriveDevice(c.g)
			if !ok {
				t.Fatal("not derived")
			}
			if d.SMs != c.sms || math.Abs(d.MemBWGBps-c.bw) > 0.1 || len(d.PeakTFLOPS) != len(c.peaks) {
				t.Errorf("SMs %d, bw %.1f, peaks %v; want %d, %.1f, %v", d.SMs, d.MemBWGBps, d.PeakTFLOPS, c.sms, c.bw, c.peaks)
			}
			for k, w := range c.peaks {
				if math.Abs(d.PeakTFLOPS[k]-w) > 0.001 {
					t.Errorf("peak %s %.3f, want %.3f", k, d.PeakTFLOPS[k], w)
				}
			}
			if !strings.Contains(d.Sources["peak_tflops.bf16"], "not in the GPU catalog") || d.MinKernelUsByKind["gemm"] <= 0 {
				t.Errorf("sources/floors: %q, %v", d.Sources["peak_tflops.bf16"], d.MinKernelUsByKind)
			}
			if err := d.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
	if _, ok := DeriveDevice(ProbeGPU{Name: "Tesla V100-SXM2-32GB", ComputeCapability: "7.0", CUDACores: 5120, MaxSMClockMHz: 1530}); ok {
		t.Error("V100 (cc 7.0) derived, but the catalog has no Volta architecture")
	}
}

// TestDiscoverH100Complete: discovery of an H100 SXM (a fake NVML probe)
// now writes complete tensor peaks, the L2 and the kernel priors, where it
// wrote {fp32: 66.9} alone before (the datasheet figures: FP8 1,979, BF16
// 989 TF dense, 50 MB L2).
func TestDiscoverH100Complete(t *testing.T) {
	p := &Probe{Hostname: "h", CPUVendor: "intel", Ancestor: [][]int{{0}}, P2PRead: [][]bool{{true}},
		GPUs: []ProbeGPU{{Name: "NVIDIA H100 80GB HBM3", BusID: "00000000:18:00.0", ComputeCapability: "9.0", CUDACores: 16896,
			MaxSMClockMHz: 1980, MaxMemClockMHz: 2619, MemBusWidthBits: 5120, MemBytes: 85520809984, NUMANode: 0, PCIeGen: 5, PCIeWidth: 16}}}
	tp, err := FromProbe(p)
	if err != nil {
		t.Fatal(err)
	}
	d := tp.DeviceOf(0)
	want := map[string]float64{"fp8": 1978.9, "bf16": 989.4, "fp16": 989.4, "fp32": 61.8}
	if !reflect.DeepEqual(d.PeakTFLOPS, want) || d.L2Bytes != 50<<20 || d.MemBytes != 85520809984 || len(d.MinKernelUsByKind) < 5 {
		t.Errorf("peaks %v (want %v), L2 %d, mem %d, floors %v", d.PeakTFLOPS, want, d.L2Bytes, d.MemBytes, d.MinKernelUsByKind)
	}
	if !strings.Contains(d.Sources["catalog"], "h100-sxm") || d.Sources["mem_bytes"] != "NVML memory total" {
		t.Errorf("sources: catalog %q, mem_bytes %q", d.Sources["catalog"], d.Sources["mem_bytes"])
	}
	b, _ := json.Marshal(d)
	for _, key := range []string{`"fp8":`, `"l2_bytes":52428800`, `"min_kernel_us_by_kind":`, `"efficiency":`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("discovered JSON lacks %s: %s", key, b)
		}
	}
	// An unknown name with a known architecture: derived, and said so.
	p.GPUs[0].Name = "NVIDIA H800"
	tp, err = FromProbe(p)
	if err != nil {
		t.Fatal(err)
	}
	if d := tp.DeviceOf(0); d.PeakTFLOPS["bf16"] < 1000 || !strings.Contains(d.Sources["sms"], "not in the GPU catalog") {
		// 132 SMs x 4096 x 1980 MHz = 1070.5 TF at the NVML max clock.
		t.Errorf("H800: peaks %v, sms source %q", d.PeakTFLOPS, d.Sources["sms"])
	}
}

// TestPresetGPUsFromHardwareMD: the catalog entries of the seed-scenario
// GPUs (the preset boxes' devices) carry hardware.md's table, copied here by
// hand: SMs, memory, L2, bandwidth and the dense peaks. The H200's peaks are
// quoted at 1,830 MHz, the clock at which 132 SMs x 4096 FLOP/clk/SM make
// its 989 TF BF16 (H100 whitepaper rate), so its BoostClockMHz is 1,830
// and not hardware.md's 1,980 MHz max clock; fp32 follows: 132 x 256 x
// 1.83 GHz = 61.8 TF. Memory is what the GPU reports, as the RTX PRO
// 6000's nvidia-smi 97,887 MiB: the H200's 143,771 MiB (NVML, recorded in
// testdata/discover-h200.json), not hardware.md's 141 GB HBM3e.
func TestPresetGPUsFromHardwareMD(t *testing.T) {
	for _, c := range []struct {
		key                 string
		sms                 int
		boostMHz, memBWGBps float64
		memBytes, l2Bytes   int64
		peaks               map[string]float64
	}{
		{"rtx-pro-6000-server", 188, 2430, 1597, 97887 << 20, 128 << 20,
			map[string]float64{"fp4": 1870, "fp8": 940, "bf16": 468, "fp16": 468, "fp32": 188 * 128 * 2 * 2430 / 1e6}},
		{"h200-sxm", 132, 1830, 4800, 143771 << 20, 60 << 20,
			map[string]float64{"fp8": 1979, "bf16": 989, "fp16": 989, "fp32": 61.8}},
	} {
		t.Run(c.key, func(t *testing.T) {
			g, err := LookupGPU(c.key)
			if err != nil {
				t.Fatal(err)
			}
			d := g.Device
			if d.SMs != c.sms || d.BoostClockMHz != c.boostMHz || d.MemBWGBps != c.memBWGBps || d.MemBytes != c.memBytes || d.L2Bytes != c.l2Bytes {
				t.Errorf("SMs %d, peak clock %.0f MHz, %.0f GB/s, %d B, L2 %d B; want %d, %.0f, %.0f, %d, %d",
					d.SMs, d.BoostClockMHz, d.MemBWGBps, d.MemBytes, d.L2Bytes, c.sms, c.boostMHz, c.memBWGBps, c.memBytes, c.l2Bytes)
			}
			if len(d.PeakTFLOPS) != len(c.peaks) {
				t.Errorf("peaks %v, want %v", d.PeakTFLOPS, c.peaks)
			}
			for k, v := range c.peaks {
				if math.Abs(d.PeakTFLOPS[k]-v) > 1e-6*v {
					t.Errorf("peak %s: catalog %v, hardware.md %v", k, d.PeakTFLOPS[k], v)
				}
			}
		})
	}
}

// TestRunsOn: a box runs on the GPU a driver's name stands for by catalog
// entry, whatever the spelling; a name the catalog does not know claims
// nothing.
func TestRunsOn(t *testing.T) {
	for _, c := range []struct {
		box, name   string
		same, known bool
	}{
		{"nvswitch:8xh100-sxm", "NVIDIA H100 80GB HBM3", true, true},
		{"nvswitch:8xh100-sxm", "NVIDIA H100-SXM5-80GB", true, true},
		{"nvswitch:8xh100-sxm", "NVIDIA H200", false, true},
		{"nvswitch:8xh100-sxm", "NVIDIA H100 PCIe", false, true},
		{"rtxpro6000-2s", "NVIDIA RTX PRO 6000 Blackwell Server Edition", true, true},
		{"rtxpro6000-2s", "Some Future GPU", false, false},
		{"rtxpro6000-2s", "", false, false},
	} {
		tp, err := Resolve(c.box, 0)
		if err != nil {
			t.Fatal(err)
		}
		if same, known := tp.RunsOn(c.name); same != c.same || known != c.known {
			t.Errorf("%s runs on %q: same %v known %v, want %v %v", c.box, c.name, same, known, c.same, c.known)
		}
	}
}

// TestUnknownArchLaunchCosts: a GPU whose architecture the catalog does
// not know takes the graph-node and timing-event costs measured on
// Hopper, the catalog's own figures (not a copy of them), each with a
// source saying so.
func TestUnknownArchLaunchCosts(t *testing.T) {
	d := deviceFromProbe(ProbeGPU{Name: "Future GPU", ComputeCapability: "99.0", CUDACores: 16384, MaxSMClockMHz: 2000, MemBytes: 96e9})
	hop, ok := Arch("hopper")
	if !ok {
		t.Fatal("no arch hopper")
	}
	k := hop.Kernel
	if d.LaunchGraphUs != k.LaunchGraphUs || d.TimingEventUs != k.TimingEventUs || d.TimingEventGapUs != k.TimingEventGapUs {
		t.Errorf("node %g, event %g, gap %g us; want Hopper's %g, %g, %g", d.LaunchGraphUs, d.TimingEventUs, d.TimingEventGapUs, k.LaunchGraphUs, k.TimingEventUs, k.TimingEventGapUs)
	}
	for _, f := range []string{"launch_graph_us", "timing_event_us", "timing_event_gap_us"} {
		if !strings.Contains(d.Sources[f], "arch hopper") {
			t.Errorf("source of %s: %q", f, d.Sources[f])
		}
	}
	if err := d.Validate(); err != nil {
		t.Error(err)
	}
}
