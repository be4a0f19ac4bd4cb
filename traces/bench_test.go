package traces

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// benchOpIDs are the op names of one MLA+MoE decoder layer (16 ops), the
// shape model.Build gives DeepSeek-V3; 61 layers x 16 ops x 8 ranks is
// 7808 op spans per step, so 128 steps are ~1 million spans.
var benchOpIDs = []struct{ name, kind string }{
	{"attn.norm", "norm"}, {"attn.q_a_proj", "gemm"}, {"attn.q_b_proj", "gemm"}, {"attn.kv_a_proj", "gemm"},
	{"attn.rope", "elementwise"}, {"attn.kv_write", "elementwise"}, {"attn.core", "attention"}, {"attn.o_proj", "gemm"},
	{"attn.allreduce", "collective"}, {"moe.norm", "norm"}, {"moe.router", "gemm"}, {"moe.topk", "router"},
	{"moe.experts", "moe_gemm"}, {"moe.shared", "gemm"}, {"moe.act", "elementwise"}, {"moe.allreduce", "collective"},
}

// writeOTLPBench writes n op spans as the file exporter does (JSON Lines,
// 512 spans per line), each with the attributes exec puts on op spans,
// then a line with each step's root span and its ranks' spans (the
// parents the op spans name, ended after them). It returns the number of
// spans written.
func writeOTLPBench(path string, n int) (int, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var b []byte
	var tid [16]byte
	var sid [8]byte
	t0 := int64(1764633600000000000)
	for i := 0; i < n; {
		b = append(b[:0], `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"tpscope"}},{"key":"host.name","value":{"stringValue":"gpu-box-1"}}]},"scopeSpans":[{"scope":{"name":"github.com/tpscope/tpscope"},"spans":[`...)
		for j := 0; j < 512 && i < n; j, i = j+1, i+1 {
			step, r := i/7808, i%7808
			rank, r := r/976, r%976
			layer, op := r/16, r%16
			tid[0], tid[1], tid[15] = byte(step>>8), byte(step), 1
			sid[0], sid[1], sid[2], sid[3] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
			sid[7] = 1
			if j > 0 {
				b = append(b, ',')
			}
			start := t0 + int64(i)*5000
			b = append(b, `{"traceId":"`...)
			b = hex.AppendEncode(b, tid[:])
			b = append(b, `","spanId":"`...)
			b = hex.AppendEncode(b, sid[:])
			b = append(b, `","parentSpanId":"`...)
			b = append(b, benchRankSpanID(rank)...)
			b = append(b, `","name":"`...)
			id := fmt.Sprintf("L%02d.%s", layer, benchOpIDs[op].name)
			b = append(b, id...)
			b = append(b, `","kind":1,"startTimeUnixNano":"`...)
			b = strconv.AppendInt(b, start, 10)
			b = append(b, `","endTimeUnixNano":"`...)
			b = strconv.AppendInt(b, start+4321, 10)
			b = append(b, `","attributes":[{"key":"tpscope.op.id","value":{"stringValue":"`...)
			b = append(b, id...)
			b = append(b, `"}},{"key":"tpscope.op.kind","value":{"stringValue":"`...)
			b = append(b, benchOpIDs[op].kind...)
			b = append(b, `"}},{"key":"tpscope.layer","value":{"intValue":"`...)
			b = strconv.AppendInt(b, int64(layer), 10)
			b = append(b, `"}},{"key":"tpscope.rank","value":{"intValue":"`...)
			b = strconv.AppendInt(b, int64(rank), 10)
			b = append(b, `"}},{"key":"tpscope.flops","value":{"doubleValue":2.2020096e+07}},{"key":"tpscope.bytes","value":{"doubleValue":1.1010048e+07}},{"key":"tpscope.dtype","value":{"stringValue":"fp8"}},{"key":"tpscope.predicted_us","value":{"doubleValue":4.75}},{"key":"tpscope.device_us","value":{"doubleValue":4.321}},{"key":"tpscope.host.launch_us","value":{"doubleValue":2.5}}],"status":{}}`...)
		}
		b = append(b, "]}]}]}\n"...)
		if _, err := w.Write(b); err != nil {
			return 0, err
		}
	}
	// The steps' roots and rank spans: step s holds op spans s*7808 on,
	// rank r of it 976 of them from s*7808 + r*976.
	written := n
	b = append(b[:0], `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"tpscope"}}]},"scopeSpans":[{"scope":{"name":"github.com/tpscope/tpscope"},"spans":[`...)
	for step := 0; step*7808 < n; step++ {
		tid[0], tid[1], tid[15] = byte(step>>8), byte(step), 1
		first, last := step*7808, min(n, (step+1)*7808)-1
		if step > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"traceId":"%x","spanId":"fe00000000000000","name":"step","startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[{"key":"tpscope.step","value":{"intValue":"%d"}}]}`,
			tid, t0+int64(first)*5000, t0+int64(last)*5000+4321, step)
		written++
		for rank := 0; first+rank*976 <= last; rank++ {
			lo, hi := first+rank*976, min(last, first+rank*976+975)
			b = fmt.Appendf(b, `,{"traceId":"%x","spanId":"%s","parentSpanId":"fe00000000000000","name":"rank/%d","startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[{"key":"tpscope.rank","value":{"intValue":"%d"}}]}`,
				tid, benchRankSpanID(rank), rank, t0+int64(lo)*5000, t0+int64(hi)*5000+4321, rank)
			written++
		}
	}
	b = append(b, "]}]}]}\n"...)
	if _, err := w.Write(b); err != nil {
		return 0, err
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	return written, f.Close()
}

// benchRankSpanID is the span ID of rank's span in writeOTLPBench's steps.
func benchRankSpanID(rank int) string { return fmt.Sprintf("ff000000000000%02x", rank+1) }

// writeKinetoBench writes n GPU kernels in ProfilerStep#k ranges of 1000
// kernels each, with a runtime launch event per kernel.
func writeKinetoBench(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	fmt.Fprintf(w, `{"schemaVersion":1,"distributedInfo":{"backend":"nccl","rank":0,"world_size":8},"baseTimeNanoseconds":1764633600000000000,"traceEvents":[`)
	names := []string{
		"nvjet_tst_64x8_64x16_4x1_v_bz_TNT", "void flash::flash_fwd_splitkv_mla_kernel<Flash_fwd_kernel_traits_mla<576, 64, 64, 8, cutlass::bfloat16_t, 512>, true>(Flash_fwd_mla_params)",
		"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "fused_moe_kernel",
		"void vllm::fused_add_rms_norm_kernel<c10::BFloat16, 8>(c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, float, int, int)",
	}
	var b []byte
	for i := 0; i < n; i++ {
		b = b[:0]
		if i > 0 {
			b = append(b, ',')
		}
		ts := float64(i) * 5
		if i%1000 == 0 {
			b = fmt.Appendf(b, `{"ph":"X","cat":"user_annotation","name":"ProfilerStep#%d","pid":1,"tid":1,"ts":%.3f,"dur":%.3f,"args":{}},`, i/1000, ts-1, 5000.0)
		}
		b = fmt.Appendf(b, `{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":%.3f,"dur":2.1,"args":{"correlation":%d,"External id":%d}},`, ts, i, i)
		b = fmt.Appendf(b, `{"ph":"X","cat":"kernel","name":"%s","pid":0,"tid":7,"ts":%.3f,"dur":4.321,"args":{"device":0,"stream":7,"correlation":%d,"registers per thread":128,"grid":[132,1,1],"block":[256,1,1]}}`, names[i%len(names)], ts+0.5, i)
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "]}\n")
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// kinetoBench is writeKinetoBench returning the kernels written.
func kinetoBench(path string, n int) (int, error) { return n, writeKinetoBench(path, n) }

// BenchmarkRead reads a generated file of spans. Metrics: ns/op and B/op
// (allocated) per whole read, spans/s, live-MB (the heap still in use with
// the result held: what the span list costs) and cpu-s/op (user+system CPU
// of the process during the read, GC included: on a shared machine
// wall-clock ns/op includes waiting for a core).
//
// Target (issue 5): a million spans in under 5 s and 1 GB.
func BenchmarkRead(b *testing.B) {
	for _, bc := range []struct {
		format string
		spans  int
		write  func(string, int) (int, error) // the spans written
	}{
		{FormatOTLPJSON, 1_000_000, writeOTLPBench},
		{FormatOTLPJSON, 100_000, writeOTLPBench},
		{FormatKineto, 100_000, kinetoBench},
		{FormatKineto, 1_000_000, kinetoBench},
	} {
		b.Run(fmt.Sprintf("format=%s/spans=%d", bc.format, bc.spans), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "bench.json")
			written, err := bc.write(path, bc.spans)
			if err != nil {
				b.Fatal(err)
			}
			fi, _ := os.Stat(path)
			b.ReportAllocs()
			b.ResetTimer()
			var live uint64
			var cpu time.Duration
			for i := 0; i < b.N; i++ {
				c0 := cpuTime()
				res, err := ReadAll(context.Background(), path)
				cpu += cpuTime() - c0
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Spans) != written {
					b.Fatalf("%d spans, want %d (skipped %v)", len(res.Spans), written, res.Skipped)
				}
				b.StopTimer()
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				live = max(live, ms.HeapAlloc)
				runtime.KeepAlive(res)
				b.StartTimer()
			}
			b.ReportMetric(float64(live)/1e6, "live-MB")
			b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			b.ReportMetric(float64(fi.Size())/1e6, "file-MB")
			b.ReportMetric(float64(bc.spans)*float64(b.N)/b.Elapsed().Seconds(), "spans/s")
		})
	}
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
