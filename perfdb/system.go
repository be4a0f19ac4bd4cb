package perfdb

import (
	"errors"
	"fmt"
	"math"
	"path"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Fabric is the class of GPU-to-GPU link inside one node of a system:
// what a collective table was measured over.
type Fabric string

const (
	// FabricPCIe: GPUs talk over PCIe only (the system's per-GPU
	// intra-node bandwidth is no more than its PCIe bandwidth).
	FabricPCIe Fabric = "pcie"
	// FabricNVLink: an NVLink / NVSwitch fabric faster than PCIe.
	FabricNVLink Fabric = "nvlink"
)

// Spec is one system's YAML (aiconfigurator systems/<name>.yaml): the GPU's
// peaks and memory, the node's bandwidths, the NCCL version its collective
// tables were taken with. Units are tpscope's: GB/s (1e9 B/s), TFLOPS
// (1e12 FLOP/s, dense), microseconds, bytes; the YAML states B/s, FLOP/s
// and seconds.
type Spec struct {
	// DataDir is the system's table directory, relative to the systems
	// root, slash-separated as the YAML writes it.
	DataDir string

	MemBWGBps float64 // gpu.mem_bw
	// MemBWScaleFrac is gpu.mem_bw_empirical_scaling_factor (0 when absent):
	// aiconfigurator's correction of mem_bw for memory-bound ops.
	MemBWScaleFrac float64
	// MemConstUs is gpu.mem_empirical_constant_latency (0 when absent).
	MemConstUs float64
	MemBytes   float64 // gpu.mem_capacity

	// Dense tensor-core peaks (0 when the chip has no such unit).
	BF16TFLOPS, FP8TFLOPS, FP4TFLOPS, INT8TFLOPS float64
	PowerW                                       float64
	// SMVersion is gpu.sm_version, e.g. 120 for compute capability 12.0;
	// 0 when absent (a GPU that is not NVIDIA's, e.g. the b60 system).
	SMVersion int

	GPUsPerNode   int     // node.num_gpus_per_node
	IntraNodeGBps float64 // node.intra_node_bw, per GPU, one direction
	InterNodeGBps float64 // node.inter_node_bw
	PCIeGBps      float64 // node.pcie_bw
	P2PLatencyUs  float64 // node.p2p_latency
	NCCLVersion   string  // misc.nccl_version ("" on a system with misc.oneccl_version instead)
}

// Fabric classifies the node's GPU interconnect from its bandwidths: an
// intra-node bandwidth no larger than the PCIe bandwidth is PCIe (the
// rtx_pro_6000_server YAML: 64 GB/s both, "PCIe Gen5 x16"; h200_sxm: 450
// GB/s intra against 64 GB/s PCIe, NVLink).
func (s *Spec) Fabric() Fabric {
	if s.PCIeGBps > 0 && s.IntraNodeGBps <= s.PCIeGBps {
		return FabricPCIe
	}
	return FabricNVLink
}

// systemYAML mirrors the fields tpscope reads. Pointers tell a missing
// field from a zero; unknown fields are ignored (the format grows).
type systemYAML struct {
	DataDir *string `yaml:"data_dir"`
	GPU     struct {
		MemBW       *float64 `yaml:"mem_bw"`
		MemBWScale  *float64 `yaml:"mem_bw_empirical_scaling_factor"`
		MemConstLat *float64 `yaml:"mem_empirical_constant_latency"`
		MemCapacity *float64 `yaml:"mem_capacity"`
		BF16        *float64 `yaml:"bfloat16_tc_flops"`
		FP8         *float64 `yaml:"fp8_tc_flops"`
		FP4         *float64 `yaml:"fp4_tc_flops"`
		INT8        *float64 `yaml:"int8_tc_flops"`
		Power       *float64 `yaml:"power"`
		SMVersion   *float64 `yaml:"sm_version"`
	} `yaml:"gpu"`
	Node struct {
		NumGPUs    *float64 `yaml:"num_gpus_per_node"`
		IntraBW    *float64 `yaml:"intra_node_bw"`
		InterBW    *float64 `yaml:"inter_node_bw"`
		PCIeBW     *float64 `yaml:"pcie_bw"`
		P2PLatency *float64 `yaml:"p2p_latency"`
	} `yaml:"node"`
	Misc struct {
		NCCLVersion   *string `yaml:"nccl_version"`
		OneCCLVersion *string `yaml:"oneccl_version"` // Intel GPUs (the b60 system)
	} `yaml:"misc"`
}

// ParseSpec parses one system YAML; name labels errors (the file's path).
// Every error is one line naming the file and the field.
func ParseSpec(name string, data []byte) (*Spec, error) {
	var y systemYAML
	if err := yaml.Unmarshal(data, &y); err != nil {
		return nil, &FileError{Path: name, Row: -1, Err: oneLine(err)}
	}
	fe := func(field, format string, a ...any) error {
		return &FileError{Path: name, Field: field, Row: -1, Err: fmt.Errorf(format, a...)}
	}
	if y.DataDir == nil || strings.TrimSpace(*y.DataDir) == "" {
		return nil, &FileError{Path: name, Field: "data_dir", Row: -1, Err: errNoDataDir}
	}
	dd := strings.TrimSpace(*y.DataDir)
	if path.IsAbs(dd) || filepath.IsAbs(dd) || strings.ContainsRune(dd, '\\') {
		return nil, fe("data_dir", "%q: want a slash-separated path relative to the systems root", dd)
	}
	if c := path.Clean(dd); c == ".." || strings.HasPrefix(c, "../") || c == "." {
		return nil, fe("data_dir", "%q: want a directory inside the systems root", dd)
	}
	s := &Spec{DataDir: path.Clean(dd)}

	// need reads a required positive number; opt an optional
	// non-negative one. scale converts the YAML unit to tpscope's.
	var err error
	need := func(field string, v *float64, scale float64) float64 {
		if err != nil {
			return 0
		}
		if v == nil {
			err = fe(field, "missing: want a number > 0")
			return 0
		}
		if !(*v > 0) || math.IsInf(*v, 0) {
			err = fe(field, "%v: want a finite number > 0", *v)
			return 0
		}
		return *v * scale
	}
	opt := func(field string, v *float64, scale float64) float64 {
		if err != nil || v == nil {
			return 0
		}
		if !(*v >= 0) || math.IsInf(*v, 0) {
			err = fe(field, "%v: want a finite number >= 0", *v)
			return 0
		}
		return *v * scale
	}
	g, n := &y.GPU, &y.Node
	s.MemBWGBps = need("gpu.mem_bw", g.MemBW, 1e-9)
	s.MemBWScaleFrac = opt("gpu.mem_bw_empirical_scaling_factor", g.MemBWScale, 1)
	s.MemConstUs = opt("gpu.mem_empirical_constant_latency", g.MemConstLat, 1e6)
	s.MemBytes = opt("gpu.mem_capacity", g.MemCapacity, 1)
	s.BF16TFLOPS = need("gpu.bfloat16_tc_flops", g.BF16, 1e-12)
	s.FP8TFLOPS = opt("gpu.fp8_tc_flops", g.FP8, 1e-12)
	s.FP4TFLOPS = opt("gpu.fp4_tc_flops", g.FP4, 1e-12)
	s.INT8TFLOPS = opt("gpu.int8_tc_flops", g.INT8, 1e-12)
	s.PowerW = opt("gpu.power", g.Power, 1)
	sm := opt("gpu.sm_version", g.SMVersion, 1)
	gpus := need("node.num_gpus_per_node", n.NumGPUs, 1)
	s.IntraNodeGBps = need("node.intra_node_bw", n.IntraBW, 1e-9)
	s.InterNodeGBps = opt("node.inter_node_bw", n.InterBW, 1e-9)
	s.PCIeGBps = opt("node.pcie_bw", n.PCIeBW, 1e-9)
	s.P2PLatencyUs = opt("node.p2p_latency", n.P2PLatency, 1e6)
	if err != nil {
		return nil, err
	}
	if sm != math.Trunc(sm) || sm > 1e4 {
		return nil, fe("gpu.sm_version", "%v: want an integer such as 90 or 120", sm)
	}
	if gpus != math.Trunc(gpus) || gpus > 1e6 {
		return nil, fe("node.num_gpus_per_node", "%v: want a whole number of GPUs", gpus)
	}
	s.SMVersion, s.GPUsPerNode = int(sm), int(gpus)
	// aiconfigurator writes the collective library's version last in
	// every system file (misc.nccl_version, or misc.oneccl_version on
	// Intel's): a file without it was cut short, and the fields it lost
	// would read as absent (zero) without a word.
	if y.Misc.NCCLVersion == nil && y.Misc.OneCCLVersion == nil {
		return nil, fe("misc.nccl_version", "missing: aiconfigurator writes it last in every system file, so this file was cut short (want misc: nccl_version: 'X.Y.Z')")
	}
	if y.Misc.NCCLVersion != nil {
		s.NCCLVersion = strings.TrimSpace(*y.Misc.NCCLVersion)
	}
	return s, nil
}

// errNoDataDir is the error of a YAML without data_dir: not a system spec
// (aiconfigurator's perf_data_reuse_manifest.yaml, say).
var errNoDataDir = errors.New("missing: want the table directory relative to the systems root")

// FileError is a failure to read a perf-database file: the file, the
// field or column at fault (when known), the row (0-based in file order;
// -1 when the error is not about one row) and the cause. Its message is
// one line.
type FileError struct {
	Path  string
	Field string // YAML field or Parquet column
	Row   int
	Err   error
}

func (e *FileError) Error() string {
	var b strings.Builder
	b.WriteString("perfdb: ")
	b.WriteString(e.Path)
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	if e.Row >= 0 {
		fmt.Fprintf(&b, " (row %d)", e.Row)
	}
	b.WriteString(": ")
	b.WriteString(strings.ReplaceAll(e.Err.Error(), "\n", "; "))
	return b.String()
}

func (e *FileError) Unwrap() error { return e.Err }

// oneLine flattens a multi-line error (yaml.v3's TypeError lists one
// problem per line).
func oneLine(err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return errors.New("yaml: " + strings.Join(te.Errors, "; "))
	}
	return errors.New(strings.ReplaceAll(err.Error(), "\n", "; "))
}
