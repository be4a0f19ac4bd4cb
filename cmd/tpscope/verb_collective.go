package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

func init() {
	register(&Verb{
		Name:  "collective",
		Short: "predict a collective's time, algbw and busbw per message size on a topology",
		Long: `Predicts one NCCL collective (or a custom one-/two-shot all-reduce) per message size, in
nccl-tests conventions: size in bytes (all-reduce: the buffer; all-gather: the gathered output),
time in microseconds, algbw = size / time and busbw = algbw x 2(n-1)/n (all-reduce) or (n-1)/n
(others), in GB/s. The algorithm/protocol is NCCL's own choice (its cost model replayed on the
topology) unless --nccl-proto / --nccl-algo restrict it; nccl_us is NCCL's estimate, time_us tpscope's
(achieved link bandwidths, host-memory hops beyond --p2p-level, calibration when the topology
carries it). The group is the first --ranks GPUs.`,
		Example: "tpscope collective --topo rtxpro6000-2s --op allreduce --ranks 8 --sizes 512:512M\ntpscope collective --topo h200-nvswitch --op allgather --sizes 1K:1G --output json\ntpscope collective --op allreduce --sizes 8K:1M --p2p-level SYS --custom-ar oneshot",
		Flags: func(fs *pflag.FlagSet) func([]string, io.Writer, io.Writer) error {
			topo := fs.String("topo", topology.DefaultPreset, "topology preset ("+strings.Join(topology.PresetNames(), ", ")+") or JSON file")
			op := fs.String("op", "allreduce", "collective: allreduce, allgather, reducescatter, alltoall")
			ranks := fs.Int("ranks", 0, "ranks taking part: the first N GPUs (0 = all)")
			sizes := fs.String("sizes", "512:512M", "sizes MIN:MAX (doubling, K/M/G = 1024 multiples) or one size")
			nccl := map[string]*string{}
			for _, of := range sim.OptionFields() {
				if of.Env != "" && of.Kind == sim.OptionString {
					nccl[of.Name] = fs.String(of.Name, "", of.Help)
				}
			}
			disable := fs.Bool("p2p-disable", false, "NCCL_P2P_DISABLE=1: every GPU-to-GPU hop through host memory")
			custom := fs.String("custom-ar", "", "all-reduce only: oneshot or twoshot custom all-reduce over P2P instead of NCCL")
			nocal := fs.Bool("no-calibration", false, "ignore calibrated parameters in the topology file")
			out := fs.String("output", "table", "output format: table or json")
			return func(args []string, stdout, _ io.Writer) error {
				if len(args) > 0 {
					return usageErrorf("collective takes no arguments, got %q", args)
				}
				if err := checkOutput(*out, "table", "json"); err != nil {
					return err
				}
				coll, err := sim.ParseCollective(*op)
				if err != nil {
					return usageErrorf("--op: %v", err)
				}
				sz, err := sim.ParseSizeRange(*sizes)
				if err != nil {
					return usageErrorf("--sizes: %v", err)
				}
				if *custom != "" && *custom != "oneshot" && *custom != "twoshot" {
					return usageErrorf("--custom-ar %q: want oneshot or twoshot", *custom)
				}
				t, err := topology.Resolve(*topo, 0)
				if err != nil {
					return usageErrorf("--topo: %v", err)
				}
				n := *ranks
				if n == 0 {
					n = t.NumGPUs()
				}
				if n < 1 || n > t.NumGPUs() {
					return usageErrorf("--ranks %d: topology %s has %d GPUs", n, t.Name, t.NumGPUs())
				}
				no := sim.NCCLOptions{Proto: *nccl["nccl-proto"], Algo: *nccl["nccl-algo"], P2PLevel: *nccl["p2p-level"], P2PDisable: *disable, IgnoreCalibration: *nocal}
				if err := no.Validate(); err != nil {
					return usageErrorf("%v", err)
				}
				m, err := sim.NewCollectiveModel(t, no)
				if err != nil {
					return usageErrorf("%v", err)
				}
				group := make([]int, n)
				for i := range group {
					group[i] = i
				}
				rows, err := m.Sweep(coll, group, sz, *custom)
				if err != nil {
					return err
				}
				if *out == "json" {
					enc := json.NewEncoder(stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(struct {
						Topology string              `json:"topology"`
						Op       string              `json:"op"`
						Ranks    int                 `json:"ranks"`
						Options  sim.NCCLOptions     `json:"options"`
						Rows     []sim.CollectiveRow `json:"rows"`
					}{t.Name, string(coll), n, m.Options(), rows})
				}
				fmt.Fprintf(stdout, "# %s on %d ranks of %s (NCCL_PROTO=%q NCCL_ALGO=%q NCCL_P2P_LEVEL=%s%s)\n",
					coll, n, t.Name, no.Proto, no.Algo, sim.P2PCondition(m.Options()), map[bool]string{true: " custom=" + *custom, false: ""}[*custom != ""])
				tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
				fmt.Fprintln(tw, "size(B)\ttime(us)\talgbw(GB/s)\tbusbw(GB/s)\talgo\tproto\tnccl(us)\tshm-hops\tcalibrated\t")
				for _, r := range rows {
					fmt.Fprintf(tw, "%d\t%.2f\t%.2f\t%.2f\t%s\t%s\t%.2f\t%d\t%v\t\n", r.Bytes, r.TimeUs, r.AlgBWGBps, r.BusBWGBps, r.Algo, r.Proto, r.NCCLTimeUs, r.SHMHops, r.Calibrated)
				}
				return tw.Flush()
			}
		},
	})
}
