package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/exec/cpu"
)

func init() {
	registerCalibrateMode(calibrateMode{Flag: "backend", Arg: "cpu", Bind: bindCPUCalibrateMode})
}

// bindCPUCalibrateMode is the --backend cpu mode of calibrate.
func bindCPUCalibrateMode(fs *pflag.FlagSet) func(*calibrateCommon, io.Writer, io.Writer) error {
	backendFlag := fs.String("backend", "", "cpu: measure this machine for the CPU backend (GEMM rate, memory bandwidth, per-kind kernel rates, goroutine ring all-reduce) with --ranks goroutine ranks and write a topology with one device per rank (--topo is not used)")
	ranks := fs.Int("ranks", 4, "--backend cpu: goroutine ranks to measure for (the --tp of the runs to predict)")
	benchMs := fs.Int("bench-ms", 300, "--backend cpu: milliseconds per microbenchmark")
	name := fs.String("name", "", "--backend cpu: topology name (default cpu-<ranks>r)")
	return func(c *calibrateCommon, stdout, stderr io.Writer) error {
		if backend := *backendFlag; backend != "cpu" {
			return usageErrorf("--backend %q: only cpu is measured here (GPU boxes: --nccl-tests, or traces of tpscope run --backend cuda)", *backendFlag)
		}
		if *ranks < 1 || *ranks > 64 {
			return usageErrorf("--ranks %d: want 1..64", *ranks)
		}
		if *benchMs < 1 {
			return usageErrorf("--bench-ms %d: want >= 1", *benchMs)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		t, rep, err := cpu.Calibrate(ctx, cpu.CalibrateConfig{Ranks: *ranks, Duration: time.Duration(*benchMs) * time.Millisecond, Name: *name})
		if err != nil {
			return err
		}
		if err := t.Save(c.out); err != nil {
			return err
		}
		if c.output == "json" {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", " ")
			return enc.Encode(rep)
		}
		fmt.Fprintf(stdout, "%s: %d goroutine ranks on %d cores (%s); wrote %s\n", t.Name, rep.Ranks, rep.Cores, rep.CPU, c.out)
		fmt.Fprintf(stdout, "per rank: peak %.2f GFLOPS, stream %.2f GB/s (float32), min op %.2f us, runner %.2f us/op\n",
			rep.GEMMPeakGFLOPS, rep.MemGBps, rep.MinKernelUs, rep.RunnerOpUs)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "kind\tefficiency\tshape")
		kinds := make([]string, 0, len(rep.Efficiency))
		for k := range rep.Efficiency {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			fmt.Fprintf(tw, "%s\t%.3f\t%s\n", k, rep.Efficiency[k], rep.EfficiencyShapes[k])
		}
		tw.Flush()
		f := rep.AllReduceFit
		fmt.Fprintf(stdout, "all-reduce fit (%d samples, RMS rel. error %.2f): base %.2f us + %.2f us per ring step + bytes at %.2f GB/s bus\n",
			len(rep.AllReduce), rep.AllReduceRMSRel, f.BaseLatUs, f.HwLatUs, f.BusBWGBps)
		return nil
	}
}
