package perfdb

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/internal/testfix"
)

// goodYAML is a system spec in aiconfigurator's layout (the numbers of
// the sample's rtx_pro_6000_server.yaml).
const goodYAML = `data_dir: data/rtx_pro_6000_server # relative to systems_dir
gpu:
  mem_bw: 1792000000000
  mem_bw_empirical_scaling_factor: 0.8
  mem_empirical_constant_latency: 0.000003
  mem_capacity: 102641958912
  bfloat16_tc_flops: 467800534963698
  int8_tc_flops: 935601069927397
  fp8_tc_flops: 935601069927397
  fp4_tc_flops: 1871202139854795
  power: 600
  sm_version: 120
node:
  num_gpus_per_node: 8
  inter_node_bw: 50000000000
  intra_node_bw: 64000000000
  pcie_bw: 64000000000
  p2p_latency: 0.00001
misc:
  nccl_mem:
    1: 0
  other_mem: 3758096384
  nccl_version: '2.29.2'
`

func TestParseSpec(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }
	t.Run("sample layout", func(t *testing.T) {
		s, err := ParseSpec("x.yaml", []byte(goodYAML))
		if err != nil {
			t.Fatal(err)
		}
		// The YAML's B/s, FLOP/s and seconds in GB/s, TFLOPS and us.
		want := Spec{DataDir: "data/rtx_pro_6000_server", MemBWGBps: 1792, MemBWScaleFrac: 0.8, MemConstUs: 3,
			MemBytes: 102641958912, BF16TFLOPS: 467.800534963698, FP8TFLOPS: 935.601069927397, FP4TFLOPS: 1871.202139854795,
			INT8TFLOPS: 935.601069927397, PowerW: 600, SMVersion: 120, GPUsPerNode: 8, IntraNodeGBps: 64, InterNodeGBps: 50,
			PCIeGBps: 64, P2PLatencyUs: 10, NCCLVersion: "2.29.2"}
		got := *s
		for _, f := range []struct {
			name string
			a, b float64
		}{{"mem_bw", got.MemBWGBps, want.MemBWGBps}, {"scale", got.MemBWScaleFrac, want.MemBWScaleFrac},
			{"const", got.MemConstUs, want.MemConstUs}, {"cap", got.MemBytes, want.MemBytes}, {"bf16", got.BF16TFLOPS, want.BF16TFLOPS},
			{"fp8", got.FP8TFLOPS, want.FP8TFLOPS}, {"fp4", got.FP4TFLOPS, want.FP4TFLOPS}, {"int8", got.INT8TFLOPS, want.INT8TFLOPS},
			{"power", got.PowerW, want.PowerW}, {"intra", got.IntraNodeGBps, want.IntraNodeGBps}, {"inter", got.InterNodeGBps, want.InterNodeGBps},
			{"pcie", got.PCIeGBps, want.PCIeGBps}, {"p2p", got.P2PLatencyUs, want.P2PLatencyUs}} {
			if !near(f.a, f.b) {
				t.Errorf("%s = %v, want %v", f.name, f.a, f.b)
			}
		}
		if got.DataDir != want.DataDir || got.SMVersion != 120 || got.GPUsPerNode != 8 || got.NCCLVersion != "2.29.2" {
			t.Errorf("got %+v", got)
		}
		if f := got.Fabric(); f != FabricPCIe {
			t.Errorf("fabric %s, want pcie (intra-node 64 GB/s = PCIe 64 GB/s)", f)
		}
	})
	bad := []struct {
		name, yaml, field string
	}{
		{"no data_dir", strings.Replace(goodYAML, "data_dir: data/rtx_pro_6000_server", "", 1), "data_dir"},
		{"absolute data_dir", strings.Replace(goodYAML, "data_dir: data/", "data_dir: /data/", 1), "data_dir"},
		{"escaping data_dir", strings.Replace(goodYAML, "data_dir: data/", "data_dir: ../../", 1), "data_dir"},
		{"no mem_bw", strings.Replace(goodYAML, "  mem_bw: 1792000000000\n", "", 1), "gpu.mem_bw"},
		{"zero mem_bw", strings.Replace(goodYAML, "mem_bw: 1792000000000", "mem_bw: 0", 1), "gpu.mem_bw"},
		{"negative p2p", strings.Replace(goodYAML, "p2p_latency: 0.00001", "p2p_latency: -1", 1), "node.p2p_latency"},
		{"string peak", strings.Replace(goodYAML, "bfloat16_tc_flops: 467800534963698", "bfloat16_tc_flops: lots", 1), ""},
		{"fractional sm", strings.Replace(goodYAML, "sm_version: 120", "sm_version: 12.5", 1), "gpu.sm_version"},
		{"no intra bw", strings.Replace(goodYAML, "  intra_node_bw: 64000000000\n", "", 1), "node.intra_node_bw"},
		{"syntax", "gpu: [unclosed\n", ""},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSpec("sys/x.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			var fe *FileError
			if !errors.As(err, &fe) || fe.Path != "sys/x.yaml" || fe.Field != tc.field {
				t.Errorf("error %v: want a FileError on sys/x.yaml field %q", err, tc.field)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "sys/x.yaml") {
				t.Errorf("error %q: want one line naming the file", msg)
			}
		})
	}
}

// TestParseSpecCut: a system YAML cut short is a FileError naming the
// file. aiconfigurator writes misc.nccl_version last in every system file,
// so a cut anywhere before it is refused; a cut inside its quoted value
// breaks the YAML. Every prefix of goodYAML either fails so or, cut only
// in the last newline, reads as the whole file.
func TestParseSpecCut(t *testing.T) {
	whole, err := ParseSpec("sys/x.yaml", []byte(goodYAML))
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) int { return strings.Index(goodYAML, s) }
	cases := []struct {
		name, yaml, field string
	}{
		// Cut after other_mem: every gpu and node field is there, the
		// version is not.
		{"before nccl_version", goodYAML[:at("  nccl_version")], "misc.nccl_version"},
		{"before misc", goodYAML[:at("misc:")], "misc.nccl_version"},
		// p2p_latency 0.00001 cut to 0.0000 is a valid 0, which the file
		// would have meant as 10 us.
		{"inside a number", goodYAML[:at("0.00001")+6], "misc.nccl_version"},
		{"inside the version", goodYAML[:at("'2.29.2'")+3], ""},
		{"after the version key", goodYAML[:at("'2.29.2'")], "misc.nccl_version"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSpec("sys/x.yaml", []byte(tc.yaml))
			var fe *FileError
			if !errors.As(err, &fe) || fe.Path != "sys/x.yaml" || fe.Field != tc.field || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v: want a one-line FileError on sys/x.yaml field %q", err, tc.field)
			}
			if tc.field != "" && !strings.Contains(err.Error(), "cut short") {
				t.Errorf("error %q: want it to say the file was cut short", err)
			}
		})
	}
	t.Run("every prefix", func(t *testing.T) {
		for n := 0; n < len(goodYAML); n++ {
			s, err := ParseSpec("sys/x.yaml", []byte(goodYAML[:n]))
			var fe *FileError
			switch {
			case err != nil && !errors.As(err, &fe):
				t.Fatalf("cut at %d: error %v is not a FileError", n, err)
			case err == nil && *s != *whole:
				t.Fatalf("cut at %d (%q): accepted as %+v, want an error or the whole file's spec", n, goodYAML[max(0, n-20):n], *s)
			}
		}
	})
	// Intel's b60 names its collective library oneCCL instead.
	oneccl := strings.Replace(goodYAML, "nccl_version", "oneccl_version", 1)
	if s, err := ParseSpec("b60.yaml", []byte(oneccl)); err != nil || s.NCCLVersion != "" {
		t.Errorf("oneccl_version: %v, NCCL version %q; want it read, with no NCCL version", err, s.NCCLVersion)
	}
}

// The sample's system YAMLs all parse; the fabric classes follow their
// bandwidths (rtx_pro_6000_server and l40s: PCIe only per their comments;
// h200_sxm, b200_sxm: NVLink).
func TestSampleSystems(t *testing.T) {
	db := sampleDB(t)
	names, err := db.Systems()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Fabric{"rtx_pro_6000_server": FabricPCIe, "l40s": FabricPCIe, "h200_sxm": FabricNVLink, "b200_sxm": FabricNVLink}
	got := map[string]bool{}
	for _, n := range names {
		got[n] = true
		s, err := db.System(n)
		if err != nil {
			t.Fatal(err)
		}
		if f, ok := want[n]; ok && s.Spec.Fabric() != f {
			t.Errorf("%s: fabric %s, want %s", n, s.Spec.Fabric(), f)
		}
	}
	for n := range want {
		if !got[n] {
			t.Errorf("system %s not listed (have %v)", n, names)
		}
	}
	// Every YAML with a data_dir parses, including systems whose tables
	// the sample leaves out.
	ents, _ := os.ReadDir(db.Root())
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".yaml") || e.Name() == "perf_data_reuse_manifest.yaml" {
			continue
		}
		if _, err := db.System(strings.TrimSuffix(e.Name(), ".yaml")); err != nil {
			t.Errorf("%s: %v", e.Name(), err)
		}
	}
	if _, err := db.System("perf_data_reuse_manifest"); err == nil {
		t.Error("the reuse manifest (no data_dir) parsed as a system")
	}
	if _, err := db.System("no_such_gpu"); err == nil || !strings.Contains(err.Error(), "rtx_pro_6000_server") {
		t.Errorf("unknown system: %v (want an error listing the systems)", err)
	} else if strings.Contains(err.Error(), "perf_data_reuse_manifest") || strings.Contains(err.Error(), "a100_pcie") {
		// The sample has a100_pcie.yaml but not its data/a100_pcie.
		t.Errorf("unknown system: %v lists the reuse manifest, or a YAML without its data, as a system", err)
	}
	if _, err := db.System("../x"); err == nil {
		t.Error("a path was accepted as a system name")
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing")); err == nil {
		t.Error("missing directory accepted")
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "no system YAML") {
		t.Errorf("empty directory: %v", err)
	}
	f := filepath.Join(dir, "f")
	os.WriteFile(f, nil, 0o644)
	if _, err := Open(f); err == nil {
		t.Error("a file accepted as the root")
	}
}

// FuzzParseSpec: any input either parses into a spec whose required
// numbers are positive and finite, or fails with a one-line FileError
// naming the file. Seeds: the layout above and the sample's YAMLs.
func FuzzParseSpec(f *testing.F) {
	f.Add([]byte(goodYAML))
	f.Add([]byte("data_dir: d\ngpu: {mem_bw: 1, bfloat16_tc_flops: 1, sm_version: 90}\nnode: {num_gpus_per_node: 1, intra_node_bw: 1}\n"))
	f.Add([]byte("data_dir: d\ngpu: {mem_bw: .inf}\n"))
	f.Add([]byte("misc:\n  nccl_version: 2.27\n"))
	f.Add([]byte("- a\n- b\n"))
	f.Add([]byte(goodYAML[:len(goodYAML)/2]))                           // cut in the gpu section
	f.Add([]byte(goodYAML[:strings.Index(goodYAML, "'2.29.2'")+3]))     // cut in the version
	f.Add([]byte(goodYAML[:strings.Index(goodYAML, "  nccl_version")])) // cut before it
	f.Add([]byte("data_dir: [1, 2]\n"))
	// The sample database's system files seed the corpus where it is found.
	if dir := testfix.SamplePerfDB(f); dir != "" {
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".yaml") {
				if b, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil {
					f.Add(b)
				}
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSpec("f.yaml", data)
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) || fe.Path != "f.yaml" {
				t.Fatalf("error %v is not a FileError naming the file", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q spans lines", err)
			}
			return
		}
		for _, v := range []float64{s.MemBWGBps, s.BF16TFLOPS, s.IntraNodeGBps, float64(s.GPUsPerNode)} {
			if !(v > 0) || math.IsInf(v, 0) {
				t.Fatalf("accepted a spec with a non-positive required number: %+v", s)
			}
		}
		if s.DataDir == "" || strings.HasPrefix(s.DataDir, "/") || strings.HasPrefix(s.DataDir, "..") {
			t.Fatalf("accepted data_dir %q", s.DataDir)
		}
	})
}
