package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/model"
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
carries it). The group is the first --ranks GPUs.

--measure also runs the collective through tpscope's executor at each size (exec/collbench: one
step holds --iters back-to-back ops per size; warm-up steps, then --steps measured steps) on
--backend cuda (NCCL on the first --ranks GPUs of this process; the NCCL flags are exported as
NCCL_* variables) or cpu (goroutine ranks, shared-memory ring collectives checked against a serial
sum), and prints the measured time (mean over steps, iterations and ranks, as nccl-tests reports
it) beside the prediction. -o FILE writes the measurement as nccl-tests output, which
'calibrate --nccl-tests FILE' reads; --reference FILE shows another nccl-tests log of the same
collective (nccl-tests itself, or scripts/gpu-collectives-torch.py) beside it.`,
		Example: "tpscope collective --topo rtxpro6000-2s --op allreduce --ranks 8 --sizes 512:512M\ntpscope collective --topo h200-nvswitch --op allgather --sizes 1K:1G --output json\ntpscope collective --op allreduce --sizes 8K:1M --p2p-level SYS --custom-ar oneshot\ntpscope collective --measure --backend cuda --topo h200-nvswitch --ranks 8 --op allreduce --sizes 512:512M -o all_reduce_perf.txt --reference torch-all_reduce_perf.txt\ntpscope collective --measure --backend cpu --ranks 4 --op allgather --sizes 512:1M --iters 3 -o all_gather_perf.txt",
		Flags: func(fs *pflag.FlagSet) func([]string, io.Writer, io.Writer) error {
			topo := fs.String("topo", topology.DefaultPreset, topoHelp)
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
			out := addOutputFlag(fs, "one row per size", allFormats...)
			meas := addMeasureFlags(fs)
			return func(args []string, stdout, stderr io.Writer) error {
				if len(args) > 0 {
					return usageErrorf("collective takes no arguments, got %q", args)
				}
				if err := checkOutput(*out, allFormats...); err != nil {
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
				ref, err := meas.check(coll, n, sz, *custom)
				if err != nil {
					return err
				}
				m, err := sim.NewCollectiveModel(t, no)
				if err != nil {
					return usageErrorf("%v", err)
				}
				if meas.on {
					mr, pred, err := meas.run(coll, n, sz, no, m, ref, stderr)
					if err != nil {
						return err
					}
					return writeMeasured(stdout, *out, t.Name, coll, n, m.Options(), mr, pred)
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
				title := fmt.Sprintf("%s on %d ranks of %s (NCCL_PROTO=%q NCCL_ALGO=%q NCCL_P2P_LEVEL=%s%s)",
					coll, n, t.Name, no.Proto, no.Algo, sim.P2PCondition(m.Options()), map[bool]string{true: " custom=" + *custom, false: ""}[*custom != ""])
				cells := make([][]string, 0, len(rows))
				for _, r := range rows {
					cells = append(cells, []string{strconv.FormatInt(r.Bytes, 10), fmt.Sprintf("%.2f", r.TimeUs), fmt.Sprintf("%.2f", r.AlgBWGBps), fmt.Sprintf("%.2f", r.BusBWGBps),
						r.Algo, r.Proto, fmt.Sprintf("%.2f", r.NCCLTimeUs), strconv.Itoa(r.SHMHops), strconv.FormatBool(r.Calibrated)})
				}
				header := []string{"size_bytes", "time_us", "algbw_GBps", "busbw_GBps", "algo", "proto", "nccl_us", "shm_hops", "calibrated"}
				if *out == formatCSV {
					return writeCSV(stdout, header, cells)
				}
				return writeTable(stdout, title, "", header, cells, *out == formatMarkdown)
			}
		},
	})
}

// writeMeasured prints a --measure run in the output format.
func writeMeasured(w io.Writer, format, topo string, coll model.Collective, n int, opts sim.NCCLOptions, mr *measureRun, pred []sim.CollectiveRow) error {
	if format == formatJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Topology string              `json:"topology"`
			Op       string              `json:"op"`
			Ranks    int                 `json:"ranks"`
			Options  sim.NCCLOptions     `json:"options"`
			Rows     []sim.CollectiveRow `json:"rows"`
			Measured *measureRun         `json:"measured"`
		}{topo, string(coll), n, opts, pred, mr})
	}
	header, rows := measuredTable(mr, pred)
	if format == formatCSV {
		return writeCSV(w, header, rows)
	}
	mode := "eager"
	if mr.Graphs {
		mode = "CUDA graphs"
	}
	title := fmt.Sprintf("%s on %d ranks: measured on the %s backend (%s, %s; %d steps x %d ops per size) against the prediction on %s",
		coll, n, mr.Backend, mr.Timing, mode, mr.Steps, mr.Iters, topo)
	if err := writeTable(w, title, "", header, rows, format == formatMarkdown); err != nil {
		return err
	}
	if pct, b := worstVsReference(mr); !math.IsNaN(pct) {
		fmt.Fprintf(w, "largest difference from %s: %+.1f %% at %d B\n", mr.Reference, pct, b)
	}
	if mr.Out != "" {
		fmt.Fprintf(w, "wrote %s (nccl-tests format)\n", mr.Out)
	}
	return nil
}
