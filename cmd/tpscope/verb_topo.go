package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/topology/nvmldiscover"
)

// discover reads the local box; a variable so tests can stand a fake probe
// in for NVML.
var discover = nvmldiscover.Discover

var topoGPUsVerb = &Verb{
	UsageLine: "topo gpus [flags]",
	Short:     "list the GPU catalog: SMs, clocks, dense peaks, memory, links and kernel priors per GPU",
	Long: `Lists the GPU catalog that box descriptions (nvswitch:8xh100-sxm) and discovery read:
per GPU its compute capability, SMs, the clock the dense peaks are quoted at, dense tensor
peaks (TFLOPS) for bf16, fp8 and fp4 where the chip has them, memory, bandwidth, L2, its
NVLink or PCIe link, and the kernel priors of its architecture: the node gap inside a CUDA
graph and the kernel floors of a small GEMM, norm and elementwise op (us). Every number has a
source in the JSON output (--output json).`,
	Example: "tpscope topo gpus\ntpscope topo gpus --output json",
	New:     func() Options { return &topoGPUsOptions{output: formatTable} },
}

// topoGPUsOptions are topo gpus' flags.
type topoGPUsOptions struct{ output string }

func (o *topoGPUsOptions) Bind(fs *pflag.FlagSet) {
	fs.StringVar(&o.output, "output", o.output, "output format: table or json")
}

func (o *topoGPUsOptions) Run(ctx context.Context, args []string, std IO) error {
	if err := checkOutput(o.output, formatTable, formatJSON); err != nil {
		return err
	}
	if len(args) > 0 {
		return usageErrorf("topo gpus takes no arguments, got %q", args)
	}
	gpus := topology.GPUs()
	return render(std.Stdout, o.output, view{
		JSON: gpus,
		Text: func(w io.Writer, _ bool) error { return writeGPUTable(w, gpus) },
	})
}

var topoShowVerb = &Verb{
	UsageLine: "topo show [TOPOLOGY] [flags]",
	Short:     "print a topology's GPU link levels (like nvidia-smi topo -m) and modeled P2P bandwidth and latency",
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
	New:     func() Options { return &topoShowOptions{output: formatTable} },
}

// topoShowOptions are topo show's flags.
type topoShowOptions struct {
	gpus       int
	p2pLevel   string
	p2pDisable bool
	output     string // table, json or dot
	out        string // -o: the topology as JSON
}

func (o *topoShowOptions) Bind(fs *pflag.FlagSet) {
	fs.IntVar(&o.gpus, "gpus", o.gpus, "use only the first N GPUs (0 = all)")
	// The NCCL flags' help is the scenario verbs' own (sim.Options'
	// fields), which names every level topology.ParseP2PLevel reads.
	fs.StringVar(&o.p2pLevel, "p2p-level", o.p2pLevel, optionHelp("p2p-level"))
	fs.BoolVar(&o.p2pDisable, "p2p-disable", o.p2pDisable, optionHelp("p2p-disable"))
	fs.StringVar(&o.output, "output", o.output, "output format: table, json, or dot (the link graph for Graphviz)")
	fs.StringVarP(&o.out, "out", "o", o.out, "also write the topology (after --gpus) as JSON to FILE")
}

func (o *topoShowOptions) Run(ctx context.Context, args []string, std IO) error {
	if err := checkOutput(o.output, formatTable, formatJSON, "dot"); err != nil {
		return err
	}
	if len(args) > 1 {
		return usageErrorf("topo show takes one topology name or file, got %q", args)
	}
	name := topology.DefaultPreset
	if len(args) == 1 {
		name = args[0]
	}
	lv, err := topology.ParseP2PLevel(o.p2pLevel)
	if err != nil {
		return causeError("--p2p-level", nil, err)
	}
	// The NCCL P2P settings shape the P2P matrices, as predict's do its
	// collectives: both at once, or with the link graph, one of them
	// would be dropped without a word.
	if o.p2pDisable && o.p2pLevel != "" {
		return flagError("--p2p-disable and --p2p-level "+o.p2pLevel, nil,
			"give one: NCCL_P2P_DISABLE=1 turns P2P off at every level, so there is no P2P level to set")
	}
	if o.output == "dot" {
		for _, f := range []struct {
			name string
			set  bool
		}{{"--p2p-level", o.p2pLevel != ""}, {"--p2p-disable", o.p2pDisable}} {
			if f.set {
				return flagError(f.name, nil, "--output dot draws the link graph, which NCCL's P2P settings do not change: leave it out (they shape the P2P tables of --output table and json)")
			}
		}
	}
	if o.gpus < 0 {
		return flagError("--gpus", o.gpus, "want 0 (all) or more")
	}
	if err := checkOutputFile("-o", o.out); err != nil {
		return err
	}
	t, err := topology.Resolve(name, o.gpus)
	if err != nil {
		if _, serr := os.Stat(name); serr != nil {
			// Neither a preset, a box description nor a file there.
			return causeError("", nil, err)
		}
		return err
	}
	if o.out != "" {
		if err := t.Save(o.out); err != nil {
			return err
		}
	}
	if o.output == "dot" {
		_, err := io.WriteString(std.Stdout, t.DOT())
		return err
	}
	m := t.Matrices(lv, o.p2pDisable)
	return render(std.Stdout, o.output, view{
		JSON: m,
		Text: func(w io.Writer, _ bool) error {
			if t.Description != "" {
				fmt.Fprintf(w, "%s\n", t.Description)
			}
			switch {
			case t.Host.CPU != "" && t.Host.InterSocketNCCLGBps > 0:
				fmt.Fprintf(w, "Host: %s, %d socket(s); NCCL models the socket link at %.0f GB/s\n", t.Host.CPU, t.Host.Sockets, t.Host.InterSocketNCCLGBps)
			case t.Host.CPU != "":
				fmt.Fprintf(w, "Host: %s, %d socket(s); no link between sockets modeled\n", t.Host.CPU, t.Host.Sockets)
			}
			if t.Calibration != nil {
				fmt.Fprintf(w, "Calibrated: %d collective parameter sets from %s\n", len(t.Calibration.Collectives), t.Calibration.Source)
			}
			fmt.Fprintln(w)
			m.WriteTable(w)
			return nil
		},
	})
}

var topoDiscoverVerb = &Verb{
	UsageLine: "topo discover [flags]",
	Short:     "read the local box through NVML and write it as a topology JSON",
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
	New:     func() Options { return &topoDiscoverOptions{} },
}

// topoDiscoverOptions are topo discover's flags.
type topoDiscoverOptions struct {
	out      string // -o: the topology JSON ("" stdout)
	probeOut string // the raw NVML readings
	as       string // <fabric>:<count>
}

func (o *topoDiscoverOptions) Bind(fs *pflag.FlagSet) {
	fs.StringVarP(&o.out, "out", "o", o.out, "write the topology JSON to this file (default: stdout)")
	fs.StringVar(&o.probeOut, "probe-out", o.probeOut, "also write the raw NVML readings as JSON to this file")
	fs.StringVar(&o.as, "as", o.as, "replicate the local GPU onto a fabric: <fabric>:<count>, e.g. nvswitch:8 or pcie-2s:8")
}

func (o *topoDiscoverOptions) Run(ctx context.Context, args []string, std IO) error {
	if len(args) > 0 {
		return usageErrorf("topo discover takes no arguments, got %q", args)
	}
	if o.as != "" {
		if _, err := topology.ParseReplica(o.as); err != nil {
			return causeError("--as", nil, err)
		}
	}
	if err := checkOutputFile("-o", o.out); err != nil {
		return err
	}
	if err := checkOutputFile("--probe-out", o.probeOut); err != nil {
		return err
	}
	t, p, err := discover()
	if err != nil {
		return err
	}
	if o.as != "" {
		if t, err = topology.ReplicateOnto(t, o.as); err != nil {
			return err
		}
	}
	if o.probeOut != "" {
		if err := writeJSONFile("--probe-out", o.probeOut, p); err != nil {
			return err
		}
	}
	if o.out == "" {
		b, err := t.Marshal()
		if err != nil {
			return err
		}
		_, err = std.Stdout.Write(b)
		return err
	}
	if err := t.Save(o.out); err != nil {
		return err
	}
	fmt.Fprintf(std.Stderr, "wrote %s: %d GPUs (%s)\n", o.out, t.NumGPUs(), t.Devices[0].Name)
	m := t.Matrices(topology.DefaultP2PLevel, false)
	m.WriteTable(std.Stdout)
	return nil
}

// writeGPUTable prints the catalog, one GPU a line.
func writeGPUTable(w io.Writer, gpus []topology.GPUSpec) error {
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
	_, err := fmt.Fprintln(w, "graph: device gap per CUDA-graph kernel node (us); gemm/norm/ew: kernel floors (us), derived per architecture.")
	return err
}

// optionHelp is the help line of the sim.Options field called name.
func optionHelp(name string) string {
	for _, of := range sim.OptionFields() {
		if of.Name == name {
			return of.Help
		}
	}
	panic("no option field " + name)
}
