package traces

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tpscope/tpscope/traces/internal/kinetogen"
)

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// writeVLLMStream writes vLLM decode steps of Kimi-K2.5 rank 0 at TP 8
// (the Kimi fixture's structure: one CUDA-graph replay of 1,760 kernels
// and a few eager ones per step, every kernel event with the profiler's
// full args) with 1,500 Python function events per step (with_stack=True,
// vLLM's default), until size bytes are written.
func writeVLLMStream(w io.Writer, size int64) error {
	cw := &countWriter{w: w}
	kw := kinetogen.NewWriter(cw, kinetogen.Meta{Rank: 0, World: 8, BaseNs: 1764633600000000000, Device: "NVIDIA H200", SM: [2]int{9, 0}, NoTruth: true})
	kinetogen.VLLMGraphDecode(kw, kinetogen.Scenario{Model: kinetogen.KimiK25, Dur: kinetogen.KimiH200Decode32, World: 8, Batch: 32, Seed: 1,
		AllReduce:    "void vllm::cross_device_reduce_1stage<__nv_bfloat16, 8>(vllm::RankData*, vllm::RankSignals, vllm::Signal*, __nv_bfloat16*, int, int)",
		PythonEvents: 1500, More: func(int) bool { return cw.n.Load() < size }})
	return kw.Close()
}

// peakHeap samples the bytes of live and not-yet-collected heap objects
// until stop is closed, and returns the largest sample.
func peakHeap(stop <-chan struct{}, out chan<- uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak uint64
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for {
		metrics.Read(s)
		peak = max(peak, s[0].Value.Uint64())
		select {
		case <-stop:
			out <- peak
			return
		case <-t.C:
		}
	}
}

// vmHWM is the process's peak resident set (Linux: VmHWM), after
// resetting it with clear_refs when reset is true; 0 where unavailable.
func vmHWM(reset bool) uint64 {
	if reset {
		_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
		return 0
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkReadKinetoStream reads a vLLM-structured Kineto trace of the
// given size generated while it is read: the generator writes into a
// pipe the reader reads from, so no file holds it and the reader's memory
// is what the read needs. Metrics: spans (kernels in steps), spans/s,
// cpu-s/op (the process's CPU, the generator's included: gen-cpu-s is the
// generator's alone), peak-heap-MB (the largest heap of live and
// uncollected objects sampled during the read), live-MB (the heap still
// in use with the result held, after a GC), rss-peak-MB (the process's
// peak resident set during the read, Linux).
//
// Target: a 1 GB trace in under 1 GB of memory.
func BenchmarkReadKinetoStream(b *testing.B) {
	for _, mb := range []int64{100, 1024} {
		size := mb << 20
		b.Run(fmt.Sprintf("MB=%d", mb), func(b *testing.B) {
			c0 := cpuTime()
			if err := writeVLLMStream(io.Discard, size); err != nil {
				b.Fatal(err)
			}
			genCPU := cpuTime() - c0
			b.ReportAllocs()
			b.ResetTimer()
			var spans int
			var cpu time.Duration
			var peak, live, rss uint64
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				runtime.GC()
				vmHWM(true)
				pr, pw := io.Pipe()
				go func() { pw.CloseWithError(writeVLLMStream(pw, size)) }()
				stop, peakc := make(chan struct{}), make(chan uint64, 1)
				go peakHeap(stop, peakc)
				b.StartTimer()
				c0 := cpuTime()
				res := &Result{Source: "stream"}
				if _, err := readBody(context.Background(), pr, "stream", FormatKineto, res); err != nil {
					b.Fatal(err)
				}
				res.finish()
				cpu += cpuTime() - c0
				b.StopTimer()
				close(stop)
				peak = max(peak, <-peakc)
				rss = max(rss, vmHWM(false))
				spans = len(res.Spans)
				if len(res.Kineto) != 1 || res.Kineto[0].StepRule != StepRuleEngineRange || res.Kineto[0].PlacedFrac() < 0.95 {
					b.Fatalf("read %+v", res.Kineto)
				}
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				live = max(live, ms.HeapAlloc)
				runtime.KeepAlive(res)
				b.StartTimer()
			}
			b.ReportMetric(float64(spans), "spans")
			b.ReportMetric(float64(spans)*float64(b.N)/b.Elapsed().Seconds(), "spans/s")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(genCPU.Seconds(), "gen-cpu-s")
			b.ReportMetric(float64(peak)/1e6, "peak-heap-MB")
			b.ReportMetric(float64(live)/1e6, "live-MB")
			b.ReportMetric(float64(rss)/1e6, "rss-peak-MB")
		})
	}
}
