package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/exec/cpu"
)

// cpuCalibrateMode is the --backend cpu mode of calibrate.
type cpuCalibrateMode struct {
	backend string // --backend: cpu
	ranks   int
	benchMs int
	name    string
}

func newCPUCalibrateMode() *cpuCalibrateMode { return &cpuCalibrateMode{ranks: 4, benchMs: 300} }

func (m *cpuCalibrateMode) flag() (string, string) { return "backend", "cpu" }

func (m *cpuCalibrateMode) chosen(c *calibrateOptions) bool {
	return c.given("backend", m.backend != "")
}

func (m *cpuCalibrateMode) bind(fs *pflag.FlagSet) {
	fs.StringVar(&m.backend, "backend", m.backend, "cpu: measure this machine for the CPU backend (GEMM rate, memory bandwidth, per-kind kernel rates, goroutine ring all-reduce) with --ranks goroutine ranks and write a topology with one device per rank (--topo and the other scenario flags are refused)")
	fs.IntVar(&m.ranks, "ranks", m.ranks, "--backend cpu: goroutine ranks to measure for (the --tp of the runs to predict)")
	fs.IntVar(&m.benchMs, "bench-ms", m.benchMs, "--backend cpu: milliseconds per microbenchmark")
	fs.StringVar(&m.name, "name", m.name, "--backend cpu: topology name (default cpu-<ranks>r)")
}

// usesScenarioFlag: the cpu mode measures this machine and writes its own
// box; no scenario flag enters it.
func (m *cpuCalibrateMode) usesScenarioFlag(string) (bool, string) {
	return false, "it measures this machine with --ranks goroutine ranks and writes a box of its own"
}

func (m *cpuCalibrateMode) run(ctx context.Context, c *calibrateOptions, std IO) error {
	if m.backend != "cpu" {
		return flagError("--backend", quote(m.backend), "only cpu is measured here (GPU boxes: --nccl-tests, or traces of tpscope run --backend cuda)")
	}
	if m.ranks < 1 || m.ranks > 64 {
		return flagError("--ranks", m.ranks, "want 1..64")
	}
	if m.benchMs < 1 {
		return flagError("--bench-ms", m.benchMs, "want >= 1")
	}
	t, rep, err := cpu.Calibrate(ctx, cpu.CalibrateConfig{Ranks: m.ranks, Duration: time.Duration(m.benchMs) * time.Millisecond, Name: m.name})
	if err != nil {
		return err
	}
	if err := t.Save(c.out); err != nil {
		return err
	}
	return render(std.Stdout, c.output, view{
		JSON: rep,
		Text: func(w io.Writer, _ bool) error { return writeCPUCalibration(w, t.Name, c.out, rep) },
	})
}

// writeCPUCalibration is the table of a --backend cpu calibration.
func writeCPUCalibration(w io.Writer, name, out string, rep *cpu.CalibrateReport) error {
	fmt.Fprintf(w, "%s: %d goroutine ranks on %d cores (%s); wrote %s\n", name, rep.Ranks, rep.Cores, rep.CPU, out)
	fmt.Fprintf(w, "per rank: peak %.2f GFLOPS, stream %.2f GB/s (float32), min op %.2f us, runner %.2f us/op\n",
		rep.GEMMPeakGFLOPS, rep.MemGBps, rep.MinKernelUs, rep.RunnerOpUs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "kind\tefficiency\tshape")
	kinds := make([]string, 0, len(rep.Efficiency))
	for k := range rep.Efficiency {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Fprintf(tw, "%s\t%.3f\t%s\n", k, rep.Efficiency[k], rep.EfficiencyShapes[k])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	f := rep.AllReduceFit
	// The error in percent, as the nccl-tests fit prints its own: a bare
	// 0.36 read as a third of a percent.
	fmt.Fprintf(w, "all-reduce fit (%d samples, RMS relative error %.1f %%): base %.2f us + %.2f us per ring step + bytes at %.2f GB/s bus\n",
		len(rep.AllReduce), 100*rep.AllReduceRMSRel, f.BaseLatUs, f.HwLatUs, f.BusBWGBps)
	return nil
}
