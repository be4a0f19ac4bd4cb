package compare_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/traces"
)

// writeOTLPBench writes an OTLP-JSON file (one request per line, one line
// per step) of at least n op spans of the schedule's ops on every rank,
// each with the attributes the executor writes (OpAttributes + device and
// host-launch times), and returns the path and the op-span count.
func writeOTLPBench(b *testing.B, s *synth, spec spec, n int) (string, int) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "bench.jsonl")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	ranks := len(s.sched.Ranks)
	perStep := ranks * len(s.sched.Ranks[0])
	steps := (n + perStep - 1) / perStep
	t0 := int64(1764633600000000000)
	strAttr := func(buf []byte, k, v string) []byte {
		return fmt.Appendf(buf, `{"key":%q,"value":{"stringValue":%q}},`, k, v)
	}
	var buf []byte
	spans := 0
	for step := 0; step < steps; step++ {
		tid := fmt.Sprintf("%032x", step+1)
		buf = append(buf[:0], `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"tpscope"}}]},"scopeSpans":[{"scope":{"name":"tpscope"},"spans":[`...)
		buf = fmt.Appendf(buf, `{"traceId":%q,"spanId":"%016x","name":"step","startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[`, tid, 1, t0, t0+1)
		buf = strAttr(buf, "tpscope.model", spec.Model)
		buf = strAttr(buf, "tpscope.topology", spec.Topology)
		buf = strAttr(buf, "tpscope.plan", spec.Plan)
		buf = strAttr(buf, "tpscope.workload", spec.Workload)
		buf = fmt.Appendf(buf, `{"key":"tpscope.step","value":{"intValue":"%d"}}]}`, step)
		for r := 0; r < ranks; r++ {
			rid := uint64(r+2) << 32
			buf = fmt.Appendf(buf, `,{"traceId":%q,"spanId":"%016x","parentSpanId":"%016x","name":"rank/%d","startTimeUnixNano":"%d","endTimeUnixNano":"%d"}`, tid, rid, 1, r, t0, t0+1)
			at := t0
			for i := range s.sched.Ranks[r] {
				op := &s.sched.Ranks[r][i]
				d := int64(s.truth[i]*1e3) + 1
				buf = fmt.Appendf(buf, `,{"traceId":%q,"spanId":"%016x","parentSpanId":"%016x","name":%q,"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[`, tid, rid+uint64(i)+1, rid, op.ID, at, at+d)
				buf = strAttr(buf, "tpscope.op.id", op.ID)
				buf = strAttr(buf, "tpscope.op.kind", string(op.Kind))
				buf = fmt.Appendf(buf, `{"key":"tpscope.layer","value":{"intValue":"%d"}},{"key":"tpscope.rank","value":{"intValue":"%d"}},`, op.Layer, r)
				buf = fmt.Appendf(buf, `{"key":"tpscope.flops","value":{"doubleValue":%s}},{"key":"tpscope.bytes","value":{"doubleValue":%s}},`,
					strconv.FormatFloat(op.FLOPs, 'g', -1, 64), strconv.FormatFloat(op.Bytes(), 'g', -1, 64))
				buf = fmt.Appendf(buf, `{"key":"tpscope.device_us","value":{"doubleValue":%s}},{"key":"tpscope.host.launch_us","value":{"doubleValue":5.1}}]}`,
					strconv.FormatFloat(float64(d)/1e3, 'g', -1, 64))
				at += d
				spans++
			}
		}
		buf = append(buf, "]}]}]}\n"...)
		if _, err := w.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return path, spans
}

// BenchmarkReadAlign reads an OTLP-JSON file of about a million op spans
// (Kimi-K2.5 decode, TP 8: ~1300 ops x 8 ranks per step) and aligns it with
// the prediction by op ID (stage=read+align), and aligns an already read
// span list (stage=align). Target (issue 5): reading and aligning a million
// spans in under 5 s and 1 GB. live-MB is the live heap right after
// aligning (span list + alignment, after a GC); the process's peak is that
// plus the garbage the collector lets accumulate (GOGC).
func BenchmarkReadAlign(b *testing.B) {
	spec := spec{Model: "kimi-k2.5-nvfp4", Topology: "rtxpro6000-2s", Plan: "tp8", Workload: "decode b8 ctx4096"}
	for _, n := range []int{100_000, 1_000_000} {
		s := newSynth(b, spec)
		path, spans := writeOTLPBench(b, s, spec, n)
		check := func(b *testing.B, al *compare.Alignment) {
			if al.Matched != spans {
				b.Fatalf("matched %d of %d spans: %v", al.Matched, spans, al.Issues)
			}
		}
		b.Run(fmt.Sprintf("spans=%d/stage=read+align", n), func(b *testing.B) {
			b.ReportAllocs()
			var peak uint64
			for b.Loop() {
				res, err := traces.ReadAll(context.Background(), path)
				if err != nil {
					b.Fatal(err)
				}
				al := compare.Align(traces.SplitTraces(res.Spans), s.pr, compare.AlignByOpID)
				check(b, al)
				b.StopTimer()
				runtime.GC() // live heap: the span list and the alignment, garbage collected
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapAlloc)
				runtime.KeepAlive(res)
				runtime.KeepAlive(al)
				b.StartTimer()
			}
			b.ReportMetric(float64(peak)/1e6, "live-MB")
		})
		b.Run(fmt.Sprintf("spans=%d/stage=align", n), func(b *testing.B) {
			res, err := traces.ReadAll(context.Background(), path)
			if err != nil {
				b.Fatal(err)
			}
			tr := traces.SplitTraces(res.Spans)
			b.ReportAllocs()
			for b.Loop() {
				check(b, compare.Align(tr, s.pr, compare.AlignByOpID))
			}
		})
	}
}
