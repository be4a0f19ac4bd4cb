package topology

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustPreset(t testing.TB, name string) *Topology {
	t.Helper()
	tp, err := Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// TestPresetPaths checks levels, bottlenecks and latencies derived by hand
// from each preset's layout and its cited link figures.
func TestPresetPaths(t *testing.T) {
	cases := []struct {
		preset     string
		i, j       int
		level      string
		bw, ncclBW float64
		latUs      float64
	}{
		// 2s: gpu0,gpu1 on hb0 (PHB): two Gen5 hops, 54 GB/s (hardware.md
		// 53-56.6), NCCL 48; 0.2 + 0.2 us (hardware.md 0.36-0.45).
		{"rtxpro6000-2s", 0, 1, "PHB", 54, 48, 0.4},
		// gpu0 -> gpu2: hb0 -> cpu0 -> hb1: NODE; + 2 x 0.05 on-die.
		{"rtxpro6000-2s", 0, 2, "NODE", 54, 48, 0.5},
		// gpu0 -> gpu4: across xGMI: SYS, 45 GB/s (hardware.md 39-51),
		// NCCL 16 (AMD); + 0.3 SMP hop.
		{"rtxpro6000-2s", 0, 4, "SYS", 45, 16, 0.8},
		// Intel EMR variant: NCCL 40 x 5/6 (Intel root-complex overhead).
		{"rtxpro6000-2s-intel-emr", 0, 4, "SYS", 54, 40 * 5.0 / 6, 0.8},
		{"rtxpro6000-2s-intel-emr", 0, 1, "PHB", 54, 48 * 5.0 / 6, 0.4},
		// Gen4: 27 (half of 54), NCCL 24 (hardware.md).
		{"rtxpro6000-2s-gen4", 0, 1, "PHB", 27, 24, 0.4},
		// switch: PIX inside a switch (0.25 x 2), PHB across (4 hops + 0).
		{"rtxpro6000-switch", 0, 1, "PIX", 54, 48, 0.5},
		{"rtxpro6000-switch", 0, 2, "PHB", 54, 48, 1.0},
		// H200: NVLink through NVSwitch, NV18, 450 (hardware.md), NCCL 18 x 20.6.
		{"h200-nvswitch", 0, 7, "NV18", 450, 370.8, 0.7},
	}
	for _, c := range cases {
		t.Run(c.preset+"/"+c.level, func(t *testing.T) {
			p := mustPreset(t, c.preset).Path(c.i, c.j)
			if p.LevelString() != c.level || math.Abs(p.BWGBps-c.bw) > 1e-9 || math.Abs(p.NCCLBWGBps-c.ncclBW) > 1e-9 || math.Abs(p.LatUs-c.latUs) > 1e-9 {
				t.Errorf("gpu%d-gpu%d: %s %.3f GB/s (NCCL %.3f) %.3f us; want %s %.3f (%.3f) %.3f",
					c.i, c.j, p.LevelString(), p.BWGBps, p.NCCLBWGBps, p.LatUs, c.level, c.bw, c.ncclBW, c.latUs)
			}
		})
	}
}

// TestP2PAllowed: NCCL_P2P_LEVEL compares NCCL's path type (NODE counts as
// PHB) with the level; the default PXB allows only PIX/PXB/NV pairs.
func TestP2PAllowed(t *testing.T) {
	cases := []struct {
		preset string
		i, j   int
		level  string
		want   bool
	}{
		{"rtxpro6000-2s", 0, 1, "", false},
		{"rtxpro6000-2s", 0, 1, "PHB", true},
		{"rtxpro6000-2s", 0, 2, "PHB", true}, // NODE is PHB for NCCL
		{"rtxpro6000-2s", 0, 4, "PHB", false},
		{"rtxpro6000-2s", 0, 4, "SYS", true},
		{"rtxpro6000-switch", 0, 1, "", true},
		{"rtxpro6000-switch", 0, 1, "LOC", false},
		{"rtxpro6000-switch", 0, 2, "PXB", false},
		{"h200-nvswitch", 0, 5, "NVL", true},
		{"h200-nvswitch", 0, 5, "LOC", false},
	}
	for _, c := range cases {
		t.Run(c.preset+"/"+c.level, func(t *testing.T) {
			lv, err := ParseP2PLevel(c.level)
			if err != nil {
				t.Fatal(err)
			}
			if got := mustPreset(t, c.preset).P2PAllowed(c.i, c.j, lv); got != c.want {
				t.Errorf("P2PAllowed(%d,%d,%s) = %v, want %v", c.i, c.j, lv, got, c.want)
			}
		})
	}
	if _, err := ParseP2PLevel("BOGUS"); err == nil {
		t.Error("ParseP2PLevel(BOGUS): no error")
	}
}

// TestShare: flows sharing a directed link split it.
func TestShare(t *testing.T) {
	sw := mustPreset(t, "rtxpro6000-switch")
	cases := []struct {
		name  string
		tp    *Topology
		flows []Flow
		want  float64
		share int
	}{
		// gpu0->gpu2 and gpu1->gpu3 both climb sw0's uplink: 54/2.
		{"switch uplink shared", sw, []Flow{{0, 2, false}, {1, 3, false}}, 27, 2},
		// A ring 0..7 on the switch box: one flow per uplink direction: 54.
		{"switch ring", sw, ring(8), 54, 1},
		// Inside one switch no uplink is used: 54 on the GPU links.
		{"switch PIX pair", sw, []Flow{{0, 1, false}, {1, 0, false}}, 54, 1},
		// 2s ring: xGMI one flow per direction: 45.
		{"2s ring", mustPreset(t, "rtxpro6000-2s"), ring(8), 45, 1},
		// Through host memory: capped by Host.SHMBWGBps = 27.
		{"2s via host", mustPreset(t, "rtxpro6000-2s"), []Flow{{0, 1, true}}, 27, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := c.tp.Share(c.flows, false)
			if math.Abs(s.PerFlowGBps-c.want) > 1e-9 || s.Flows != c.share {
				t.Errorf("per-flow %.3f GB/s over %d flows at %s; want %.3f, %d", s.PerFlowGBps, s.Flows, s.Bottleneck, c.want, c.share)
			}
		})
	}
}

func ring(n int) []Flow {
	var f []Flow
	for i := 0; i < n; i++ {
		f = append(f, Flow{From: i, To: (i + 1) % n})
	}
	return f
}

// catalogDevice is the catalog's spec of a GPU (the presets' devices).
func catalogDevice(t testing.TB, key string) Device {
	t.Helper()
	g, err := LookupGPU(key)
	if err != nil {
		t.Fatal(err)
	}
	return g.Device
}

func TestDevice(t *testing.T) {
	d := catalogDevice(t, "rtx-pro-6000-server")
	// FP8 at the sustained clock: 940 x 1650 / 2430 (hardware.md peak,
	// assumed sustained clock).
	if got, ok := d.TFLOPS("fp8-block128"); !ok || math.Abs(got-940*1650.0/2430) > 1e-9 {
		t.Errorf("TFLOPS(fp8-block128) = %v, %v", got, ok)
	}
	if got, _ := d.TFLOPS("nvfp4"); math.Abs(got-1870*1650.0/2430) > 1e-9 {
		t.Errorf("TFLOPS(nvfp4) = %v", got)
	}
	h := catalogDevice(t, "h200-sxm")
	if _, ok := h.TFLOPS("nvfp4"); ok {
		t.Error("H200 reports FP4 support")
	}
	if e := d.EfficiencyFor("moe_gemm", "nvfp4"); e != 1.0 {
		t.Errorf("EfficiencyFor(moe_gemm, nvfp4) = %v, want the specific key's 1.0 (the padded FP4 tiles' rate)", e)
	}
	if e := d.EfficiencyFor("moe_gemm", "int4-g32"); e != 0.45 {
		t.Errorf("EfficiencyFor(moe_gemm, int4-g32) = %v, want the kind's 0.45", e)
	}
	if e := d.EfficiencyFor("unknown", ""); e != 0.5 {
		t.Errorf("EfficiencyFor(unknown) = %v, want default 0.5", e)
	}
	// Every number has a source.
	for _, dev := range []Device{d, h} {
		for _, k := range []string{"sms", "sm_clock_mhz", "mem_bw_gbps", "mem_bytes", "l2_bytes", "launch_eager_us", "launch_graph_us", "min_kernel_us", "efficiency", "mem_efficiency"} {
			if dev.Sources[k] == "" {
				t.Errorf("%s: no source for %s", dev.Name, k)
			}
		}
		for k := range dev.PeakTFLOPS {
			if dev.Sources["peak_tflops."+k] == "" {
				t.Errorf("%s: no source for peak_tflops.%s", dev.Name, k)
			}
		}
	}
}

func TestResolveAndSubset(t *testing.T) {
	cases := []struct {
		name   string
		gpus   int
		want   int
		levels string // level of gpu0-gpu(last)
	}{
		{"", 0, 8, "SYS"},
		{"rtxpro6000-2s", 4, 4, "NODE"},
		{"rtxpro6000-2s", 2, 2, "PHB"},
		{"rtxpro6000-2s", 1, 1, "X"},
		{"h200-nvswitch", 2, 2, "NV18"},
		{"rtxpro6000-switch", 4, 4, "PHB"},
	}
	for _, c := range cases {
		t.Run(c.name+"/"+c.levels, func(t *testing.T) {
			tp, err := Resolve(c.name, c.gpus)
			if err != nil {
				t.Fatal(err)
			}
			if tp.NumGPUs() != c.want || tp.Path(0, c.want-1).LevelString() != c.levels {
				t.Errorf("%d GPUs, level %s; want %d, %s", tp.NumGPUs(), tp.Path(0, c.want-1).LevelString(), c.want, c.levels)
			}
		})
	}
	if _, err := Resolve("rtxpro6000-2s", 9); err == nil || !strings.Contains(err.Error(), "8 GPUs") {
		t.Errorf("--gpus 9 on 8: %v", err)
	}
	if _, err := Resolve("no-such-box", 0); err == nil || !strings.Contains(err.Error(), "not a preset") {
		t.Errorf("unknown name: %v", err)
	}
}

func TestJSONRoundTrip(t *testing.T) {
	for _, name := range PresetNames() {
		t.Run(name, func(t *testing.T) {
			tp := mustPreset(t, name)
			path := filepath.Join(t.TempDir(), "box.json")
			if err := tp.Save(path); err != nil {
				t.Fatal(err)
			}
			back, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			a, _ := tp.Marshal()
			b, _ := back.Marshal()
			if string(a) != string(b) {
				t.Error("save/load changed the topology")
			}
			if a, b := back.Path(0, 7), tp.Path(0, 7); a.BWGBps != b.BWGBps || a.LatUs != b.LatUs || a.Level != b.Level {
				t.Error("paths differ after reload")
			}
		})
	}
}

// TestValidationErrors: a bad file gets an error naming the element.
func TestValidationErrors(t *testing.T) {
	base, _ := mustPreset(t, "rtxpro6000-switch").Marshal()
	cases := []struct {
		name   string
		edit   func(m map[string]any)
		wantIn []string
	}{
		{"unknown link type", func(m map[string]any) { link(m, 0)["type"] = "infiniband" }, []string{"link 0 (hb0-cpu0)", `unknown link type "infiniband"`}},
		{"negative bandwidth", func(m map[string]any) { link(m, 3)["bw_gbps"] = -5.0 }, []string{"link 3", "bw_gbps must be > 0"}},
		{"gpu without a path", func(m map[string]any) {
			ls := m["links"].([]any)
			var keep []any
			for _, l := range ls {
				if l.(map[string]any)["a"] != "gpu5" {
					keep = append(keep, l)
				}
			}
			m["links"] = keep
		}, []string{`gpu "gpu0": no path to gpu "gpu5"`}},
		{"unknown endpoint", func(m map[string]any) { link(m, 2)["b"] = "sw9" }, []string{"link 2", `unknown endpoint "sw9"`}},
		// A calibration entry's p2p_level in a spelling sim never
		// matches (it compares P2PCondition's names) would apply under
		// no setting; it was accepted.
		{"calibration p2p level", func(m map[string]any) { calibrationEntry(m)["p2p_level"] = "sys" },
			[]string{"calibration.collectives[0] (allreduce Ring/LL)", `p2p_level "sys": want "disabled" or an NCCL_P2P_LEVEL name as NCCL spells it`}},
		{"calibration p2p typo", func(m map[string]any) { calibrationEntry(m)["p2p_level"] = "XYZ" }, []string{`p2p_level "XYZ"`}},
		// A fitted term the file lost read as 0: the collective priced
		// with no latency; calibrate writes every one, 0 included.
		{"calibration latency missing", func(m map[string]any) { delete(calibrationEntry(m), "base_lat_us") },
			[]string{`calibration.collectives[0]: field "base_lat_us" missing: want each of algo, proto, ranks, base_lat_us, hw_lat_us, bus_bw_gbps`}},
		{"calibration hop latency missing", func(m map[string]any) { delete(calibrationEntry(m), "hw_lat_us") }, []string{`field "hw_lat_us" missing`}},
		{"calibration without collectives", func(m map[string]any) { calibrationEntry(m); m["calibration"] = map[string]any{"source": "test"} },
			[]string{`calibration: field "collectives" missing`}},
		{"unknown device", func(m map[string]any) { m["gpus"].([]any)[3].(map[string]any)["device"] = "B200" }, []string{`gpu "gpu3"`, `device "B200"`}},
		// A second, known device on gpus[4]: sim prices one device per
		// box, so the file is refused naming the field.
		{"mixed devices", func(m map[string]any) {
			devs := m["devices"].([]any)
			other := map[string]any{}
			for k, v := range devs[0].(map[string]any) {
				other[k] = v
			}
			other["name"] = "Other GPU"
			m["devices"] = append(devs, other)
			m["gpus"].([]any)[4].(map[string]any)["device"] = "Other GPU"
		}, []string{"box.json: ", `gpus[4].device: "Other GPU", want "NVIDIA RTX PRO 6000 Blackwell Server Edition" as gpus[0]`, "mixed GPU models is not modelled"}},
		{"unknown node kind", func(m map[string]any) { m["nodes"].([]any)[1].(map[string]any)["kind"] = "router" }, []string{`node "hb0"`, `unknown kind "router"`}},
		{"bad pcie width", func(m map[string]any) { link(m, 1)["width"] = 3.0 }, []string{"link 1", "pcie width 3"}},
		{"negative peak", func(m map[string]any) {
			m["devices"].([]any)[0].(map[string]any)["peak_tflops"].(map[string]any)["fp8"] = -1.0
		}, []string{"peak_tflops.fp8 must be > 0"}},
		{"zero per-kind floor", func(m map[string]any) {
			m["devices"].([]any)[0].(map[string]any)["min_kernel_us_by_kind"] = map[string]any{"norm": 0.0}
		}, []string{"min_kernel_us_by_kind.norm", "> 0"}},
		{"negative ramp", func(m map[string]any) {
			m["devices"].([]any)[0].(map[string]any)["ramp_us"] = map[string]any{"gemm/bf16": -1.0}
		}, []string{"ramp_us.gemm/bf16", ">= 0"}},
		{"unknown field", func(m map[string]any) { m["gpus"].([]any)[0].(map[string]any)["nvlink"] = 1.0 }, []string{`unknown field "nvlink"`}},
		{"no gpus", func(m map[string]any) { m["gpus"] = []any{} }, []string{"no GPU"}},
		// The PCIe hierarchy is a tree (one upstream port per element):
		// rtxpro6000-switch hangs sw0..sw3 under hb0 under cpu0.
		{"gpu with two parents", func(m map[string]any) { addLink(m, "gpu3", "sw2", "pcie") },
			[]string{`gpu "gpu3": 2 PCIe parents ("sw1", "sw2")`, "want one"}},
		{"cycle of switches", func(m map[string]any) { addLink(m, "sw1", "sw0", "pcie") },
			[]string{`link 13 (sw1-sw0): node "sw1" closes a cycle in the PCIe tree (sw0 - hb0 - sw1 - sw0)`}},
		{"switch under two CPUs", func(m map[string]any) {
			m["nodes"] = append(m["nodes"].([]any), map[string]any{"id": "cpu1", "kind": "cpu", "socket": 1},
				map[string]any{"id": "hb1", "kind": "host_bridge", "socket": 1})
			addLink(m, "hb1", "cpu1", "internal")
			addLink(m, "cpu0", "cpu1", "xgmi")
			link(m, 10)["b"] = "hb1"         // sw3 now under hb1 ...
			addLink(m, "sw3", "hb0", "pcie") // ... and hb0 as well
		}, []string{`node "sw3" hangs under two CPUs through PCIe (cpu0 - hb0 - sw3 - hb1 - cpu1)`}},
		{"field of the wrong kind", func(m map[string]any) { m["gpus"] = map[string]any{} }, []string{`field "gpus": want a JSON array, got an object`}},
		// A GPU's compute capability picks its family (the engine's
		// kernels, the priors): absent or misspelt, the box had been
		// priced as some family's anyway.
		{"no compute capability", func(m map[string]any) { delete(m["devices"].([]any)[0].(map[string]any), "compute_capability") },
			[]string{`field "compute_capability" missing: want MAJOR.MINOR`}},
		// Hops through host memory are priced at these; without them
		// they had been free (41.0 -> 16.6 ms on the seed box at NCCL's
		// default P2P level).
		{"no host", func(m map[string]any) { delete(m, "host") }, []string{"host.shm_lat_us: missing or 0, want the cost of a GPU-to-GPU hop through host memory"}},
		{"no shm bandwidth", func(m map[string]any) { delete(m["host"].(map[string]any), "shm_bw_gbps") }, []string{"host.shm_bw_gbps: missing or 0"}},
		{"shm latency in seconds", func(m map[string]any) { m["host"].(map[string]any)["shm_lat_us"] = 14e-6 }, []string{"host.shm_lat_us 1.4e-05: want us"}},
		{"shm bandwidth in B/s", func(m map[string]any) { m["host"].(map[string]any)["shm_bw_gbps"] = 2.7e10 }, []string{"host.shm_bw_gbps 2.7e+10: want GB/s"}},
		// A figure in a neighbouring unit: priced silently before (the
		// memory bandwidth in B/s stepped the seed box 12.6 % faster, in
		// TB/s 250 times slower; 96 for mem_bytes left no memory).
		{"memory in GB", func(m map[string]any) { m["devices"].([]any)[0].(map[string]any)["mem_bytes"] = 96.0 },
			[]string{"mem_bytes 96: want bytes, 1 GiB to 1 PiB for a GPU"}},
		{"memory bandwidth in B/s", func(m map[string]any) { m["devices"].([]any)[0].(map[string]any)["mem_bw_gbps"] = 1.597e12 },
			[]string{"mem_bw_gbps 1.597e+12: want GB/s, 10 to 100000 for a GPU"}},
		{"memory bandwidth in TB/s", func(m map[string]any) { m["devices"].([]any)[0].(map[string]any)["mem_bw_gbps"] = 1.597 },
			[]string{"mem_bw_gbps 1.597: want GB/s"}},
		{"clock in GHz", func(m map[string]any) { m["devices"].([]any)[0].(map[string]any)["sm_clock_mhz"] = 1.65 },
			[]string{"sm_clock_mhz 1.65: want MHz, 100 to 10000 for a GPU"}},
		{"L2 in MB", func(m map[string]any) { m["devices"].([]any)[0].(map[string]any)["l2_bytes"] = 128.0 },
			[]string{"l2_bytes 128: want bytes, 1 MiB to 1 TiB"}},
		{"link bandwidth in B/s", func(m map[string]any) { link(m, 1)["bw_gbps"] = 54e9 },
			[]string{"link 1", "bw_gbps 5.4e+10: want GB/s, at most 100000"}},
		{"compute capability as sm_120", func(m map[string]any) { m["devices"].([]any)[0].(map[string]any)["compute_capability"] = "sm_120" },
			[]string{`compute_capability "sm_120": want MAJOR.MINOR`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var m map[string]any
			if err := json.Unmarshal(base, &m); err != nil {
				t.Fatal(err)
			}
			c.edit(m)
			data, _ := json.Marshal(m)
			_, err := Parse(data, "box.json")
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "box.json: ") || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line starting with the file name", msg)
			}
			for _, w := range c.wantIn {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
	if _, err := Parse([]byte("{\n \"name\": 3\n}"), "x.json"); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("type error without line: %v", err)
	}
}

func link(m map[string]any, i int) map[string]any { return m["links"].([]any)[i].(map[string]any) }

// addLink appends a Gen5 x16 (or on-die, or socket) link between a and b.
func addLink(m map[string]any, a, b, typ string) {
	l := map[string]any{"a": a, "b": b, "type": typ, "bw_gbps": 54.0, "lat_us": 0.2}
	if typ == "pcie" {
		l["gen"], l["width"] = 5.0, 16.0
	}
	m["links"] = append(m["links"].([]any), l)
}

// TestJSONErrorWords: decoding errors name the line, the field and the JSON
// kind wanted, never a Go type or a bare EOF.
func TestJSONErrorWords(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"empty", "", "x.json: empty: want a JSON object"},
		{"blank", " \n", "x.json: empty: want a JSON object"},
		{"array", "[1, 2]", "x.json: line 1: want a JSON object, got an array"},
		{"truncated", "{\"name\": \"a\",", "x.json: truncated: the JSON ends inside a value"},
		{"not JSON", "name: a", "x.json: line 1: not JSON: invalid character"},
		{"string for int", "{\n\"gpus\": [{\"id\": \"g\", \"pcie_gen\": \"5\"}]}", `x.json: line 2: field "gpus.pcie_gen": want an integer, got a string`},
		{"fraction for int", `{"gpus": [{"id": "g", "pcie_gen": 4.5}]}`, `field "gpus.pcie_gen": want an integer, got 4.5`},
		{"object for string", `{"name": {}}`, `field "name": want a string, got an object`},
		{"model config", `{"_source": "x", "model_type": "kimi_k25", "text_config": {}}`, "x.json: a model's config.json (it has model_type or architectures), not a topology: want a topology JSON"},
		{"otlp trace", `{"resourceSpans": []}`, "x.json: an OTLP trace (it has resourceSpans), not a topology"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.in), "x.json")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
			for _, bad := range []string{"Go value", "topology.", "[]", "EOF", "\n"} {
				if strings.Contains(err.Error(), bad) {
					t.Errorf("error %q contains %q", err, bad)
				}
			}
		})
	}
}

// TestResolveNegativeGPUs: a negative GPU count is refused, not read as all.
func TestResolveNegativeGPUs(t *testing.T) {
	if _, err := Resolve("rtxpro6000-2s", -1); err == nil || !strings.Contains(err.Error(), "--gpus -1: want 0 (all) or more") {
		t.Errorf("Resolve(-1): %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, name := range PresetNames() {
		b, _ := mustPreset(f, name).Marshal()
		f.Add(b)
	}
	f.Add([]byte(`{"gpus":[{"id":"g","device":"d"}],"devices":[{"name":"d","sms":1,"sm_clock_mhz":1,"mem_bytes":1,"mem_bw_gbps":1,"peak_tflops":{"fp32":1}}]}`))
	f.Add([]byte(`{"gpus":[{"id":"a","device":"d"},{"id":"b","device":"d"}],"links":[{"a":"a","b":"b","type":"nvlink","bw_gbps":1e308,"lat_us":1e308}],"devices":[{"name":"d","sms":1,"sm_clock_mhz":1,"mem_bytes":1,"mem_bw_gbps":1,"peak_tflops":{"fp32":1}}]}`))
	f.Add([]byte(`{"gpus":[{"id":"g","device":"d"}],"devices":[{"name":"d","sms":1,"sm_clock_mhz":1,"mem_bytes":1,"mem_bw_gbps":1,"peak_tflops":{"fp32":1},"min_kernel_us_by_kind":{"norm":4},"ramp_us":{"gemm/bf16":3}}]}`))
	// A GPU with two PCIe parents and a cycle of switches.
	f.Add([]byte(`{"gpus":[{"id":"g","device":"d"}],"nodes":[{"id":"s","kind":"pcie_switch"},{"id":"t","kind":"pcie_switch"}],"links":[{"a":"g","b":"s","type":"pcie","gen":5,"width":16,"bw_gbps":1},{"a":"g","b":"t","type":"pcie","gen":5,"width":16,"bw_gbps":1}],"devices":[{"name":"d","sms":1,"sm_clock_mhz":1,"mem_bytes":1,"mem_bw_gbps":1,"peak_tflops":{"fp32":1}}]}`))
	f.Add([]byte(`{"gpus":[{"id":"g","device":"d"}],"nodes":[{"id":"s","kind":"pcie_switch"},{"id":"t","kind":"pcie_switch"},{"id":"u","kind":"pcie_switch"}],"links":[{"a":"g","b":"s","type":"pcie","gen":5,"width":16,"bw_gbps":1},{"a":"s","b":"t","type":"pcie","gen":5,"width":16,"bw_gbps":1},{"a":"t","b":"u","type":"pcie","gen":5,"width":16,"bw_gbps":1},{"a":"u","b":"s","type":"internal","bw_gbps":1}],"devices":[{"name":"d","sms":1,"sm_clock_mhz":1,"mem_bytes":1,"mem_bw_gbps":1,"peak_tflops":{"fp32":1}}]}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Add([]byte(`{"gpus":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tp, err := Parse(data, "fuzz.json")
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "fuzz.json: ") || strings.Contains(msg, "\n") ||
				strings.Contains(msg, "Go value") || strings.Contains(msg, "topology.") {
				t.Fatalf("error not one line naming the file without Go types: %v", err)
			}
			return
		}
		n := tp.NumGPUs()
		lv, _ := ParseP2PLevel("SYS")
		m := tp.Matrices(lv, false)
		for i := 0; i < n; i++ {
			for j := 0; j < n; j++ {
				p := tp.Path(i, j)
				if i != j && !(p.BWGBps > 0) {
					t.Fatalf("path %d-%d bandwidth %v", i, j, p.BWGBps)
				}
			}
		}
		if len(m.Level) != n {
			t.Fatal("matrix size")
		}
		if _, err := tp.Marshal(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFromProbe builds topologies from hand-written NVML probes.
func TestFromProbe(t *testing.T) {
	// An HGX-like box: 4 GPUs, pairs under one switch (SINGLE), switches
	// under one host bridge per socket... here two sockets (SYSTEM), all
	// GPUs on 18 NVLinks to NVSwitches (remote bus IDs not GPUs).
	anc := [][]int{
		{0, 10, 50, 50},
		{10, 0, 50, 50},
		{50, 50, 0, 10},
		{50, 50, 10, 0},
	}
	var gpus []ProbeGPU
	for i := 0; i < 4; i++ {
		gpus = append(gpus, ProbeGPU{Name: "NVIDIA H200", BusID: []string{"00000000:18:00.0", "00000000:2A:00.0", "00000000:9A:00.0", "00000000:AB:00.0"}[i],
			ComputeCapability: "9.0", MaxSMClockMHz: 1980, MemBytes: 150754820096, NUMANode: i / 2, PCIeGen: 5, PCIeWidth: 16,
			NVLinks: map[string]int{"00000000:05:00.0": 5, "00000000:06:00.0": 4, "00000000:07:00.0": 4, "00000000:08:00.0": 5}})
	}
	p2p := [][]bool{{true, true, true, true}, {true, true, true, true}, {true, true, true, false}, {true, true, false, true}}
	tp, err := FromProbe(&Probe{Hostname: "h", CPUVendor: "intel", GPUs: gpus, Ancestor: anc, P2PRead: p2p})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		i, j  int
		level string
	}{{0, 1, "NV18"}, {0, 3, "NV18"}} {
		if got := tp.Path(c.i, c.j).LevelString(); got != c.level {
			t.Errorf("gpu%d-gpu%d: %s, want %s", c.i, c.j, got, c.level)
		}
	}
	// Through PCIe only (no NVLink): PIX inside a switch, SYS across.
	for i := range gpus {
		gpus[i].NVLinks = nil
	}
	tp, err = FromProbe(&Probe{Hostname: "h", CPUVendor: "amd", GPUs: gpus, Ancestor: anc, P2PRead: p2p})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		i, j  int
		level string
	}{{0, 1, "PIX"}, {0, 2, "SYS"}, {2, 3, "PIX"}} {
		if got := tp.Path(c.i, c.j).LevelString(); got != c.level {
			t.Errorf("pcie: gpu%d-gpu%d: %s, want %s", c.i, c.j, got, c.level)
		}
	}
	lv, _ := ParseP2PLevel("SYS")
	if tp.P2PAllowed(2, 3, lv) {
		t.Error("P2P allowed on a pair NVML reports as unsupported")
	}
	if tp.Devices[0].MemBytes != 150754820096 || tp.Devices[0].SMs != 132 {
		t.Errorf("device: %+v", tp.Devices[0])
	}
	// NODE and PHB and PXB levels.
	anc2 := [][]int{
		{0, 20, 30, 40},
		{20, 0, 30, 40},
		{30, 30, 0, 40},
		{40, 40, 40, 0},
	}
	tp, err = FromProbe(&Probe{GPUs: gpus, Ancestor: anc2})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		i, j  int
		level string
	}{{0, 1, "PXB"}, {0, 2, "PHB"}, {0, 3, "NODE"}} {
		if got := tp.Path(c.i, c.j).LevelString(); got != c.level {
			t.Errorf("tree: gpu%d-gpu%d: %s, want %s", c.i, c.j, got, c.level)
		}
	}
	if _, err := FromProbe(&Probe{}); err == nil {
		t.Error("empty probe: no error")
	}
}

// TestDiscoveredFixture checks a `tpscope topo discover` output recorded on
// an H200 machine (one GPU or an HGX board), when present: it loads, every
// GPU is an H200 (hardware.md: 141 GB HBM3e, PCIe Gen5 x16) with a unique
// bus ID, the spec is the preset's, and on an HGX board every pair is
// NVLink-connected (NV#).
func TestDiscoveredFixture(t *testing.T) {
	const path = "testdata/discover-h200.json"
	if _, err := os.Stat(path); err != nil {
		t.Skip("no fixture recorded at " + path)
	}
	tp, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if tp.NumGPUs() < 1 || tp.NumGPUs() > 8 {
		t.Fatalf("%d GPUs, want 1-8", tp.NumGPUs())
	}
	if d := tp.DeviceOf(0); d.SMs != 132 || d.ComputeCapability != "9.0" {
		t.Errorf("device spec: %d SMs, cc %s; want 132, 9.0", d.SMs, d.ComputeCapability)
	}
	seen := map[string]bool{}
	for i, g := range tp.GPUs {
		if !strings.Contains(tp.DeviceOf(i).Name, "H200") {
			t.Errorf("gpu %d: device %q", i, tp.DeviceOf(i).Name)
		}
		if g.BusID == "" || seen[g.BusID] {
			t.Errorf("gpu %d: bus id %q empty or repeated", i, g.BusID)
		}
		seen[g.BusID] = true
		if g.PCIeGen != 5 || g.PCIeWidth != 16 {
			t.Errorf("gpu %d: PCIe Gen%d x%d, want Gen5 x16", i, g.PCIeGen, g.PCIeWidth)
		}
		for j := range tp.GPUs {
			if p := tp.Path(i, j); i != j && p.Level != LevelNV {
				t.Errorf("gpu%d-gpu%d: level %s, want NV#", i, j, p.LevelString())
			}
		}
	}
	if mem := tp.DeviceOf(0).MemBytes; mem < 140e9 || mem > 160e9 {
		t.Errorf("memory %d bytes, want about 141-150 GB", mem)
	}
}

// TestDOT: the graph's labels use DOT's own line break escape (a backslash
// and n inside the quoted label, which Graphviz draws as a new line), not a
// Go-quoted one (two backslashes: Graphviz draws them).
func TestDOT(t *testing.T) {
	d := mustPreset(t, "rtxpro6000-switch").DOT()
	if strings.Contains(d, `\\`) {
		t.Errorf("DOT has a doubled backslash:\n%s", d)
	}
	for _, want := range []string{`graph "rtxpro6000-switch" {`, `"gpu0" -- "sw0" [label="Gen5 x16 54 GB/s"];`, `"sw0" [label="sw0\npcie_switch"];`} {
		if !strings.Contains(d, want) {
			t.Errorf("DOT lacks %s:\n%s", want, d)
		}
	}
}

// TestRecordedProbe: FromProbe on the NVML readings recorded with the
// fixture rebuilds the fixture's GPUs and links.
func TestRecordedProbe(t *testing.T) {
	data, err := os.ReadFile("testdata/probe-h200.json")
	if err != nil {
		t.Skip("no recorded probe")
	}
	var p Probe
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatal(err)
	}
	got, err := FromProbe(&p)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Load("testdata/discover-h200.json")
	if err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(got.GPUs)
	w, _ := json.Marshal(want.GPUs)
	if string(g) != string(w) || len(got.Links) != len(want.Links) {
		t.Errorf("rebuilt GPUs/links differ:\n got %s\nwant %s", g, w)
	}
}

// TestCCVersion: the one parser of Device.ComputeCapability
// ("major.minor") that the catalog checks, the caveats and the attention
// backend choice read.
func TestCCVersion(t *testing.T) {
	for _, c := range []struct {
		cc           string
		major, minor int
	}{
		{"12.0", 12, 0}, {"9.0", 9, 0}, {"8.9", 8, 9}, {"10.3", 10, 3}, {"12", 12, 0}, {"?", 0, 0}, {"", 0, 0},
	} {
		if major, minor := (&Device{ComputeCapability: c.cc}).CCVersion(); major != c.major || minor != c.minor {
			t.Errorf("CCVersion(%q) = %d.%d, want %d.%d", c.cc, major, minor, c.major, c.minor)
		}
	}
}

// TestResolveFileLabel: a topology file is named by its "name" only when
// it is the box that name stands for; a file carrying a preset's or a box
// description's name with another box (halved PCIe bandwidth, a
// calibration) is "name (path)", so that it is never reported as the
// preset; a file without a name is its path.
func TestResolveFileLabel(t *testing.T) {
	dir := t.TempDir()
	write := func(file string, edit func(*Topology)) string {
		t.Helper()
		base, err := Resolve("rtxpro6000-switch", 0)
		if err != nil {
			t.Fatal(err)
		}
		c := base.Clone()
		if edit != nil {
			edit(c)
		}
		path := filepath.Join(dir, file)
		if err := c.Save(path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	halve := func(c *Topology) {
		for i := range c.Links {
			if c.Links[i].Type == LinkPCIe {
				c.Links[i].BWGBps /= 2
			}
		}
	}
	same := write("sw.json", nil)
	half := write("sw_bwhalf.json", halve)
	cal := write("sw_cal.json", func(c *Topology) {
		c.Calibration = &Calibration{Source: "test", Collectives: []CollectiveParams{{Algo: "Ring", Proto: "LL", Ranks: 8, BusBWGBps: 20}}}
	})
	mine := write("mine.json", func(c *Topology) { halve(c); c.Name = "my-box" })
	anon := write("anon.json", func(c *Topology) { c.Name = "" })
	desc := write("desc.json", func(c *Topology) { halve(c); c.Name = "pcie-switch:8xrtx-pro-6000-server" })
	cases := []struct {
		path, want string
	}{
		{same, "rtxpro6000-switch"},
		{half, "rtxpro6000-switch (" + half + ")"},
		{cal, "rtxpro6000-switch (" + cal + ")"},
		{mine, "my-box"},
		{anon, anon},
		{desc, "pcie-switch:8xrtx-pro-6000-server (" + desc + ")"},
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.path), func(t *testing.T) {
			got, err := Resolve(c.path, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != c.want {
				t.Errorf("name %q, want %q", got.Name, c.want)
			}
		})
	}
}

// calibrationEntry gives the topology map a calibration of one entry (an
// all-reduce Ring/LL fit under SYS) and returns it for a case to edit.
func calibrationEntry(m map[string]any) map[string]any {
	e := map[string]any{"op": "allreduce", "algo": "Ring", "proto": "LL", "ranks": 8.0, "p2p_level": "SYS", "base_lat_us": 8.0, "hw_lat_us": 0.9, "bus_bw_gbps": 20.0}
	m["calibration"] = map[string]any{"source": "test", "collectives": []any{e}}
	return e
}

// TestSubsetKeepsTheWholeBox: a subset knows the GPUs of the box it was
// cut from (8 for the first 6, then 4, of an 8-GPU box), through a copy
// and a JSON round trip; a whole box is its own; a count below the GPUs
// listed is refused naming the field.
func TestSubsetKeepsTheWholeBox(t *testing.T) {
	whole := mustPreset(t, "h200-nvswitch")
	six, err := whole.Subset(6)
	if err != nil {
		t.Fatal(err)
	}
	four, err := six.Subset(4)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(four)
	if err != nil {
		t.Fatal(err)
	}
	var back Topology
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name          string
		t             *Topology
		gpus, boxGPUs int
	}{{"whole", whole, 8, 8}, {"six", six, 6, 8}, {"four of six", four, 4, 8}, {"round trip", &back, 4, 8}} {
		if c.t.NumGPUs() != c.gpus || c.t.BoxGPUs() != c.boxGPUs {
			t.Errorf("%s: %d GPUs of a box of %d; want %d of %d", c.name, c.t.NumGPUs(), c.t.BoxGPUs(), c.gpus, c.boxGPUs)
		}
	}
	back.WholeGPUs = 3
	if err := back.Validate(); err == nil || !strings.Contains(err.Error(), "whole_gpus 3") {
		t.Errorf("whole_gpus 3 on 4 GPUs: %v, want a refusal naming whole_gpus", err)
	}
}

// TestSniffTellsATopology: Sniff names the box of a topology's JSON (a
// preset marshalled, the CPU ranks' calibrate output) and nothing of
// other JSON (an OTLP trace, a model config, a saved prediction).
func TestSniffTellsATopology(t *testing.T) {
	b, err := json.Marshal(mustPreset(t, "h200-nvswitch"))
	if err != nil {
		t.Fatal(err)
	}
	cal, err := os.ReadFile("../cmd/tpscope/testdata/cpu-ranks/cpu-4r.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ doc, want string }{
		{string(b), "h200-nvswitch"},
		{string(cal), "cpu-4r"},
		{`{"resourceSpans":[]}`, ""},
		{`{"model_type":"deepseek_v3","architectures":["X"]}`, ""},
		{`{"ops":[],"step_us":1,"topology":"h200-nvswitch"}`, ""},
		{`not json`, ""},
	} {
		if got := Sniff([]byte(c.doc)); got != c.want {
			t.Errorf("Sniff(%.40s) = %q, want %q", c.doc, got, c.want)
		}
	}
}
