package cpu

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/topology"
)

// TestFitRingRecoversParameters: samples generated from known parameters
// (base 2 us, 0.5 us per ring step, 10 GB/s bus) with sim's ring formula
// time = base + 2(n-1) hw + bytes 2(n-1)/n / (1000 bus) are fitted back.
func TestFitRingRecoversParameters(t *testing.T) {
	const base, hw, bus = 2.0, 0.5, 10.0
	var samples []CollectiveSample
	for _, n := range []int{4, 2} {
		for _, b := range []int64{4 << 10, 64 << 10, 512 << 10, 4 << 20} {
			us := base + 2*float64(n-1)*hw + float64(b)*2*float64(n-1)/float64(n)/(1000*bus)
			samples = append(samples, CollectiveSample{Ranks: n, Bytes: b, Us: us})
		}
	}
	p, rms := fitRing(samples, 4)
	if math.Abs(p.BaseLatUs-base) > 1e-6 || math.Abs(p.HwLatUs-hw) > 1e-6 || math.Abs(p.BusBWGBps-bus) > 1e-6 || rms > 1e-9 {
		t.Errorf("fit base %v hw %v bus %v rms %v; want %v %v %v 0", p.BaseLatUs, p.HwLatUs, p.BusBWGBps, rms, base, hw, bus)
	}
	if p.Ranks != 4 || p.Algo != "Ring" || p.Proto != "Simple" {
		t.Errorf("params %+v", p)
	}
}

// TestCalibrateWritesValidTopology runs the microbenchmarks briefly and
// checks the topology's shape (values depend on the machine): one device
// per rank, every (algo, proto) calibrated, efficiencies in (0, 1], and a
// JSON round trip through topology.Parse.
func TestCalibrateWritesValidTopology(t *testing.T) {
	for _, ranks := range []int{1, 3} {
		t.Run(fmt.Sprintf("ranks=%d", ranks), func(t *testing.T) {
			topo, rep, err := Calibrate(context.Background(), CalibrateConfig{Ranks: ranks, Duration: 3 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if topo.NumGPUs() != ranks || len(topo.Devices) != 1 || topo.Calibration == nil || len(topo.Calibration.Collectives) != 6 {
				t.Fatalf("topology %+v", topo)
			}
			if !(rep.GEMMPeakGFLOPS > 0) || !(rep.MemGBps > 0) {
				t.Errorf("report %+v", rep)
			}
			d := topo.Devices[0]
			if d.MemBWGBps != rep.MemGBps/2 {
				t.Errorf("mem_bw_gbps %v, want half of the float32 rate %v", d.MemBWGBps, rep.MemGBps)
			}
			for k, v := range d.Efficiency {
				if !(v > 0 && v <= 1) {
					t.Errorf("efficiency %s = %v", k, v)
				}
			}
			data, err := topo.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			back, err := topology.Parse(data, "cpu.json")
			if err != nil {
				t.Fatalf("round trip: %v", err)
			}
			if back.NumGPUs() != ranks {
				t.Errorf("round trip has %d ranks", back.NumGPUs())
			}
			// Its rates are of that many ranks sharing the cores: run
			// and verdict compare it with the ranks they run at once.
			if back.Host.CPURanksAtOnce != ranks || back.Host.CPUCores != rep.Cores {
				t.Errorf("cpu_ranks_at_once %d, cpu_cores %d; want %d and %d", back.Host.CPURanksAtOnce, back.Host.CPUCores, ranks, rep.Cores)
			}
			// Its figures are of the executor's kernels: the box says so,
			// or predict --topo cpu.json under its default engine (vLLM)
			// prices vLLM's kernels with them and no caveat.
			if ref, err := engprof.ParseRef(back.Devices[0].CalibratedEngine); err != nil || ref.Name != engprof.Executor || ref.Version == "" {
				t.Errorf("calibrated_engine %q, want the executor's engine@version", back.Devices[0].CalibratedEngine)
			}
		})
	}
	if _, _, err := Calibrate(context.Background(), CalibrateConfig{Ranks: 65}); err == nil {
		t.Error("65 ranks accepted")
	}
}

// TestFitRingOneRingSize: 'calibrate --backend cpu --ranks 2' times only
// 2-rank rings, where the per-step latency 2(n-1) hw is a constant that
// cannot be told from base. The fit must still recover what a 2-rank ring
// takes (base + 2 hw, and the bus), not give up with every term zero
// (collectives priced free at an RMS error of 100 %).
func TestFitRingOneRingSize(t *testing.T) {
	const base, hw, bus = 2.0, 0.5, 10.0
	var samples []CollectiveSample
	for _, b := range []int64{4 << 10, 64 << 10, 512 << 10, 4 << 20} {
		us := base + 2*hw + float64(b)*2*(2-1)/2/(1000*bus)
		samples = append(samples, CollectiveSample{Ranks: 2, Bytes: b, Us: us})
	}
	p, rms := fitRing(samples, 2)
	if math.Abs(p.BaseLatUs+2*p.HwLatUs-(base+2*hw)) > 1e-6 || math.Abs(p.BusBWGBps-bus) > 1e-6 || rms > 1e-9 {
		t.Errorf("fit base %v hw %v bus %v rms %v; want base + 2 hw = %v, bus %v, rms 0", p.BaseLatUs, p.HwLatUs, p.BusBWGBps, rms, base+2*hw, bus)
	}
}
