package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/topology/nvmldiscover"
)

// discover reads the local box; a variable so tests can stand a fake probe
// in for NVML.
var discover = nvmldiscover.Discover

func init() {
	register(&Verb{
		Name:  "topo gpus",
		Short: "list the GPU catalog: SMs, clocks, dense peaks, memory, links and kernel priors per GPU",
		Long: `Lists the GPU catalog that box descriptions (nvswitch:8xh100-sxm) and discovery read:
per GPU its compute capability, SMs, the clock the dense peaks are quoted at, dense tensor
peaks (TFLOPS) for bf16, fp8 and fp4 where the chip has them, memory, bandwidth, L2, its
NVLink or PCIe link, and the kernel priors of its architecture: the node gap inside a CUDA
graph and the kernel floors of a small GEMM, norm and elementwise op (us). Every number has a
source in the JSON output (--output json).`,
		Example: "tpscope topo gpus\ntpscope topo gpus --output json",
		Flags: func(fs *pflag.FlagSet) func([]string, io.Writer, io.Writer) error {
			out := fs.String("output", "table", "output format: table or json")
			return func(args []string, stdout, _ io.Writer) error {
				if err := checkOutput(*out, "table", "json"); err != nil {
					return err
				}
				if len(args) > 0 {
					return usageErrorf("topo gpus takes no arguments, got %q", args)
				}
				gpus := topology.GPUs()
				if *out == "json" {
					enc := json.NewEncoder(stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(gpus)
				}
				writeGPUTable(stdout, gpus)
				return nil
			}
		},
	})
	register(&Verb{
		Name:  "topo show",
		Short: "print a topology's GPU link levels (like nvidia-smi topo -m) and modeled P2P bandwidth and latency",
		Long: `Shows a preset or a topology JSON file: the level of every GPU pair (X, NV#, PIX, PXB,
PHB, NODE, SYS), whether NCCL uses P2P on it under NCCL_P2P_LEVEL (default PXB; pairs beyond
it go through host memory and are marked *), the modeled bandwidth per direction (GB/s) of
that transfer and NCCL's own model of it, and the latency (us).

Presets: ` + strings.Join(topology.PresetNames(), ", ") + `; suffixes -gen4 (PCIe Gen4 GPU links),
-intel-spr, -intel-emr (socket interconnect), e.g. rtxpro6000-2s-gen4.

A box can also be described in one word, <fabric>:<count>x<gpu> with the same suffixes:
fabrics ` + strings.Join(topology.Fabrics(), ", ") + `; GPUs as 'tpscope topo gpus'
lists them, e.g. nvswitch:8xh100-sxm, pcie-switch:8xl40s, pcie-2s:8xrtxpro6000-server-gen4.`,
		Example: "tpscope topo show rtxpro6000-2s\ntpscope topo show rtxpro6000-switch --gpus 4 --p2p-level SYS --output json\ntpscope topo show nvswitch:8xh100-sxm\ntpscope topo show box.json -o copy.json",
		Flags: func(fs *pflag.FlagSet) func([]string, io.Writer, io.Writer) error {
			gpus := fs.Int("gpus", 0, "use only the first N GPUs (0 = all)")
			level := fs.String("p2p-level", "", "NCCL_P2P_LEVEL: LOC, NVL, PIX, PXB, PHB, SYS (default PXB)")
			disable := fs.Bool("p2p-disable", false, "NCCL_P2P_DISABLE=1")
			out := fs.String("output", "table", "output format: table, json, or dot (the link graph for Graphviz)")
			save := fs.StringP("out", "o", "", "also write the topology (after --gpus) as JSON to FILE")
			return func(args []string, stdout, _ io.Writer) error {
				if err := checkOutput(*out, "table", "json", "dot"); err != nil {
					return err
				}
				if len(args) > 1 {
					return usageErrorf("topo show takes one topology name or file, got %q", args)
				}
				name := topology.DefaultPreset
				if len(args) == 1 {
					name = args[0]
				}
				lv, err := topology.ParseP2PLevel(*level)
				if err != nil {
					return usageErrorf("--p2p-level: %v", err)
				}
				if *gpus < 0 {
					return usageErrorf("--gpus %d: want 0 (all) or more", *gpus)
				}
				t, err := topology.Resolve(name, *gpus)
				if err != nil {
					return err
				}
				if *save != "" {
					if err := t.Save(*save); err != nil {
						return err
					}
				}
				if *out == "dot" {
					_, err := io.WriteString(stdout, t.DOT())
					return err
				}
				m := t.Matrices(lv, *disable)
				if *out == "json" {
					enc := json.NewEncoder(stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(m)
				}
				if t.Description != "" {
					fmt.Fprintf(stdout, "%s\n", t.Description)
				}
				if t.Host.CPU != "" {
					fmt.Fprintf(stdout, "Host: %s, %d socket(s); NCCL models the socket link at %.0f GB/s\n", t.Host.CPU, t.Host.Sockets, t.Host.InterSocketNCCLGBps)
				}
				if t.Calibration != nil {
					fmt.Fprintf(stdout, "Calibrated: %d collective parameter sets from %s\n", len(t.Calibration.Collectives), t.Calibration.Source)
				}
				fmt.Fprintln(stdout)
				m.WriteTable(stdout)
				return nil
			}
		},
	})
	register(&Verb{
		Name:  "topo discover",
		Short: "read the local box through NVML and write it as a topology JSON",
		Long: `Discovers the GPUs of this machine through NVML (libnvidia-ml.so.1 from the NVIDIA driver):
names, PCIe bus IDs, link generation and width, the common PCIe ancestor of every pair, P2P
status, NVLink state, NUMA node and CPU affinity, memory and clocks. The PCIe tree (switches,
host bridges, sockets) is rebuilt from the pairwise levels; device specs come from the GPU
catalog entry matching the NVML name ('tpscope topo gpus'), or, for a GPU the catalog does
not know, are derived from its compute capability, SM count and clock. Writes the same JSON
that 'topo show' and every --topo flag read.

--as <fabric>:<count> writes instead the local GPU, as discovered, replicated onto that
fabric (fabrics ` + strings.Join(topology.Fabrics(), ", ") + `; suffixes -gen4, -intel-spr, ...):
the box you would have with N of this GPU.`,
		Example: "tpscope topo discover -o box.json\ntpscope topo discover --probe-out probe.json\ntpscope topo discover --as nvswitch:8 -o hgx.json",
		Flags: func(fs *pflag.FlagSet) func([]string, io.Writer, io.Writer) error {
			outFile := fs.StringP("out", "o", "", "write the topology JSON to this file (default: stdout)")
			probeOut := fs.String("probe-out", "", "also write the raw NVML readings as JSON to this file")
			as := fs.String("as", "", "replicate the local GPU onto a fabric: <fabric>:<count>, e.g. nvswitch:8 or pcie-2s:8")
			return func(args []string, stdout, stderr io.Writer) error {
				if len(args) > 0 {
					return usageErrorf("topo discover takes no arguments, got %q", args)
				}
				if *as != "" {
					b, err := topology.ParseBox(*as)
					if err != nil {
						return usageErrorf("--as: %v", err)
					}
					if b.GPU != "" {
						return usageErrorf("--as %q: name a fabric and a count only (e.g. %s:%d): the GPU is the discovered one", *as, b.Fabric, b.GPUs)
					}
				}
				t, p, err := discover()
				if err != nil {
					return err
				}
				if *as != "" {
					if t, err = topology.ReplicateOnto(t, *as); err != nil {
						return err
					}
				}
				if *probeOut != "" {
					b, _ := json.MarshalIndent(p, "", "  ")
					if err := os.WriteFile(*probeOut, append(b, '\n'), 0o644); err != nil {
						return err
					}
				}
				if *outFile == "" {
					b, err := t.Marshal()
					if err != nil {
						return err
					}
					_, err = stdout.Write(b)
					return err
				}
				if err := t.Save(*outFile); err != nil {
					return err
				}
				fmt.Fprintf(stderr, "wrote %s: %d GPUs (%s)\n", *outFile, t.NumGPUs(), t.Devices[0].Name)
				m := t.Matrices(topology.DefaultP2PLevel, false)
				m.WriteTable(stdout)
				return nil
			}
		},
	})
}

// writeGPUTable prints the catalog, one GPU a line.
func writeGPUTable(w io.Writer, gpus []topology.GPUSpec) {
	peak := func(d topology.Device, k string) string {
		if v, ok := d.PeakTFLOPS[k]; ok {
			return fmt.Sprintf("%.0f", v)
		}
		return "-"
	}
	fmt.Fprintf(w, "%-26s %-5s %4s %6s %6s %6s %6s %5s %6s %5s %-16s %5s %5s %5s %5s\n",
		"gpu", "cc", "SMs", "MHz", "bf16", "fp8", "fp4", "GB", "GB/s", "L2MB", "link", "graph", "gemm", "norm", "ew")
	for _, g := range gpus {
		d := g.Device
		link := fmt.Sprintf("PCIe Gen%d x%d", g.Interconnect.PCIeGen, g.Interconnect.PCIeWidth)
		if g.Interconnect.NVLinks > 0 {
			link = fmt.Sprintf("NV%d %s %.0f", g.Interconnect.NVLinkGen, g.Interconnect.NVLinkFabric, g.Interconnect.NVLinkGBps)
		}
		fmt.Fprintf(w, "%-26s %-5s %4d %6.0f %6s %6s %6s %5.0f %6.0f %5.0f %-16s %5.2f %5.2f %5.2f %5.2f\n",
			g.Key, d.ComputeCapability, d.SMs, d.BoostClockMHz, peak(d, "bf16"), peak(d, "fp8"), peak(d, "fp4"),
			float64(d.MemBytes)/1e9, d.MemBWGBps, float64(d.L2Bytes)/(1<<20), link, d.LaunchGraphUs,
			d.MinKernelUsByKind["gemm"], d.MinKernelUsByKind["norm"], d.MinKernelUsByKind["elementwise"])
	}
	fmt.Fprintln(w, "\nMHz: the clock the dense peaks (TFLOPS) are quoted at; link: NVLink generation, fabric and GB/s per direction;")
	fmt.Fprintln(w, "graph: device gap per CUDA-graph kernel node (us); gemm/norm/ew: kernel floors (us), derived per architecture.")
}
