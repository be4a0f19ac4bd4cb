package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
)

func init() {
	register(&Verb{
		Name:  "predict",
		Short: "predict one step of a model on a box: step time, tokens/s, where the time goes",
		Long: `Builds the step's schedule (model, plan, workload), prices every op on the
topology (compute roofline per kernel family, NCCL collectives per
algorithm x protocol on the box's links) and runs the discrete-event engine
(host launch queue, streams, collectives synchronizing their groups).

Prints the step time, tokens/s per request and in aggregate, the time by op
kind, by block and by op name, the communication share, the longest ops and
the per-GPU memory fit. --output json holds every op row (id, kind, bound,
flops, bytes, comm_bytes, us and the cost parameters used) so each number
traces back to its inputs. --plot writes a PNG or SVG of the breakdown.

A scenario whose weights and KV cache do not fit in GPU memory is an error
that names the shortfall in GB.`,
		Example: `tpscope predict --model kimi-k2.5-nvfp4 --tp 8 --batch 1 --context 4096 --kv-dtype bf16 --nccl-proto LL --p2p-level SYS`,
		Flags: func(fs *pflag.FlagSet) func(args []string, stdout, stderr io.Writer) error {
			sc := addScenarioFlags(fs)
			output := fs.String("output", "table", "output format: table or json")
			plotFile := fs.String("plot", "", "write a breakdown chart to FILE.png or FILE.svg")
			top := fs.Int("top", 10, "how many op names and ops to list in the table")
			return func(args []string, stdout, stderr io.Writer) error {
				if len(args) > 0 {
					return usageErrorf("unexpected arguments %q", args)
				}
				if err := checkOutput(*output, "table", "json"); err != nil {
					return err
				}
				if err := checkPlotPath(*plotFile); err != nil {
					return err
				}
				scen, err := sc.scenario()
				if err != nil {
					return err
				}
				topo := scen.Topo
				pr, _, err := sim.Predict(scen)
				if err != nil {
					var pe *model.PlanError
					if errors.As(err, &pe) {
						return usageErrorf("%v", flagWords(err))
					}
					return err
				}
				if m := pr.Memory; m != nil && !m.Fits {
					return fmt.Errorf("%s %s on %s does not fit in GPU memory: short by %.1f GB per GPU (weights %.1f GB + activations %.1f GB + KV %.1f GB for %d tokens, usable %.1f GB of %.1f GB)",
						scen.Arch.Name, scen.Plan.Normalized(), topo.Name, m.ShortfallGB, gb(m.WeightBytes), gb(m.ActivationBytes), gb(m.KVBytes), m.KVTokensNeeded, gb(m.UsableBytes), gb(m.DeviceBytes))
				}
				if *plotFile != "" {
					if err := writePredictPlot(*plotFile, pr); err != nil {
						return err
					}
				}
				if *output == "json" {
					enc := json.NewEncoder(stdout)
					enc.SetIndent("", " ")
					return enc.Encode(pr)
				}
				return writePredictTable(stdout, pr, *top)
			}
		},
	})
}

func gb(b int64) float64 { return float64(b) / 1e9 }

// writePredictTable renders the prediction for people.
func writePredictTable(w io.Writer, pr *sim.Prediction, top int) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	o := pr.Options
	fmt.Fprintf(tw, "model\t%s\n", pr.Model)
	fmt.Fprintf(tw, "topology\t%s\n", pr.Topology)
	fmt.Fprintf(tw, "plan\t%s\n", pr.Plan)
	fmt.Fprintf(tw, "workload\t%s batch %d (run as %d), context %d, spec tokens %d, kv %s\n", pr.Workload.Phase, pr.Sequences, pr.PaddedBatch, pr.Workload.Context, pr.Workload.SpecTokens, pr.Workload.KVDtype)
	fmt.Fprintf(tw, "options\t%s\n", o)
	fmt.Fprintf(tw, "step\t%.1f us (%d kernels per rank, host launch %.0f us, idle %.0f us)\n", pr.StepUs, pr.Kernels, pr.HostUs, pr.IdleUs)
	fmt.Fprintf(tw, "tokens/s\t%.1f per request, %.1f aggregate (%.2f tokens per step per request)\n", pr.TokensPerSPerRequest, pr.TokensPerS, pr.TokensPerStep)
	fmt.Fprintf(tw, "communication\t%.1f us, %.1f %% of the step\n", pr.CommUs, 100*pr.CommShare)
	fmt.Fprintf(tw, "critical path\t%s\n", criticalPathString(pr))
	if m := pr.Memory; m != nil {
		fmt.Fprintf(tw, "memory per GPU\tweights %.1f GB + activations %.1f GB + KV %.2f GB (%d tokens x %.0f B) of %.1f GB usable; KV capacity %d tokens\n",
			gb(m.WeightBytes), gb(m.ActivationBytes), gb(m.KVBytes), m.KVTokensNeeded, m.KVBytesPerToken, gb(m.UsableBytes), m.KVCapacityTokens)
	}
	for _, c := range pr.Caveats {
		fmt.Fprintf(tw, "caveat\t%s\n", c)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	section := func(title string, rows []sim.Share, n int) {
		fmt.Fprintf(w, "\n%s\n", title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "name\tus\tshare\tcount\t")
		for i, r := range rows {
			if n > 0 && i >= n {
				break
			}
			fmt.Fprintf(tw, "%s\t%.1f\t%.1f %%\t%d\t\n", r.Name, r.Us, 100*r.Share, r.Count)
		}
		tw.Flush()
	}
	section("time by op kind (rank 0)", pr.ByKind, 0)
	section("time by block", pr.ByBlock, 0)
	section("time by op name, all layers", pr.ByName, top)
	fmt.Fprintf(w, "\nlongest ops\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "id\tus\tbound\tdetail")
	for i, k := range pr.TopOps {
		if i >= top {
			break
		}
		op := &pr.Ops[k]
		fmt.Fprintf(tw, "%s\t%.1f\t%s\t%s\n", op.ID, op.Us, op.Bound, costDetail(op))
	}
	return tw.Flush()
}

// costDetail explains one op's cost in a line.
func costDetail(op *sim.OpResult) string {
	c := &op.Cost
	if op.Kind == model.KindCollective {
		return fmt.Sprintf("%d B, %s/%s, latency %.1f us + link %.1f us", op.CommBytes, c.Algo, c.Proto, c.LatencyUs, c.LinkUs)
	}
	d := fmt.Sprintf("%.3g FLOP, %.3g B; compute %.1f us (%s %.0f TF x eff %.2f x fill %.2f), memory %.1f us (%.0f GB/s, %.0f CTAs)",
		op.FLOPs, op.Bytes, c.ComputeUs, c.ComputeDtype, c.PeakTFLOPS, c.Efficiency, c.Fill, c.MemoryUs, c.MemGBps, c.CTAs)
	if c.RampUs > 0 {
		d += fmt.Sprintf(" + ramp %.1f us", c.RampUs)
	}
	return d
}

// criticalPathString summarizes the critical path: its length and what
// released its ops (host launches, dependencies, collective peers).
func criticalPathString(pr *sim.Prediction) string {
	counts := map[sim.Wait]int{}
	for _, i := range pr.CriticalPath {
		counts[pr.Ops[i].WaitedOn]++
	}
	var parts []string
	for w := sim.Wait(0); int(w) < 5; w++ {
		if n := counts[w]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", w, n))
		}
	}
	return fmt.Sprintf("%d ops, released by: %s", len(pr.CriticalPath), strings.Join(parts, ", "))
}
