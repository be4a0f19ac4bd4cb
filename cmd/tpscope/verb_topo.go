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

func init() {
	register(&Verb{
		Name:  "topo show",
		Short: "print a topology's GPU link levels (like nvidia-smi topo -m) and modeled P2P bandwidth and latency",
		Long: `Shows a preset or a topology JSON file: the level of every GPU pair (X, NV#, PIX, PXB,
PHB, NODE, SYS), whether NCCL uses P2P on it under NCCL_P2P_LEVEL (default PXB; pairs beyond
it go through host memory and are marked *), the modeled bandwidth per direction (GB/s) of
that transfer and NCCL's own model of it, and the latency (us).

Presets: ` + strings.Join(topology.PresetNames(), ", ") + `; suffixes -gen4 (PCIe Gen4 GPU links),
-intel-spr, -intel-emr (socket interconnect), e.g. rtxpro6000-2s-gen4.`,
		Example: "tpscope topo show rtxpro6000-2s\ntpscope topo show rtxpro6000-switch --gpus 4 --p2p-level SYS --output json\ntpscope topo show box.json --save copy.json",
		Flags: func(fs *pflag.FlagSet) func([]string, io.Writer, io.Writer) error {
			gpus := fs.Int("gpus", 0, "use only the first N GPUs (0 = all)")
			level := fs.String("p2p-level", "", "NCCL_P2P_LEVEL: LOC, NVL, PIX, PXB, PHB, SYS (default PXB)")
			disable := fs.Bool("p2p-disable", false, "NCCL_P2P_DISABLE=1")
			out := fs.String("output", "table", "output format: table, json, or dot (the link graph for Graphviz)")
			save := fs.String("save", "", "also write the topology (after --gpus) as JSON to this file")
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
host bridges, sockets) is rebuilt from the pairwise levels; device specs come from the
matching preset device. Writes the same JSON that 'topo show' and every --topo flag read.`,
		Example: "tpscope topo discover -o box.json\ntpscope topo discover --probe-out probe.json",
		Flags: func(fs *pflag.FlagSet) func([]string, io.Writer, io.Writer) error {
			outFile := fs.StringP("out", "o", "", "write the topology JSON to this file (default: stdout)")
			probeOut := fs.String("probe-out", "", "also write the raw NVML readings as JSON to this file")
			return func(args []string, stdout, stderr io.Writer) error {
				if len(args) > 0 {
					return usageErrorf("topo discover takes no arguments, got %q", args)
				}
				t, p, err := nvmldiscover.Discover()
				if err != nil {
					return err
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
