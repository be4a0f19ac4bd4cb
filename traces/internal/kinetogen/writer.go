// Package kinetogen writes Chrome/Kineto traces with the structure the
// serving engines' PyTorch-profiler traces have, for the traces package's
// fixtures, tests and benchmarks: step ranges on the CPU thread and their
// GPU copies, runtime launch calls linked to kernels by correlation ID,
// CUDA-graph replays (one cudaGraphLaunch, every node kernel carrying its
// correlation ID, as CUPTI reports graph kernels), eager launches, and
// kernels with the engines' names. It knows nothing of how the traces
// package reads them: every kernel it writes carries the op it implements
// as the generator's author mapped it by hand from the engine's source
// (Kernel.Op), so tests compare the reader's placement with that truth.
//
// Time model (microseconds, the unit of the Chrome trace format): a CPU
// clock that advances by each runtime call's duration and a GPU clock per
// device; an eager kernel starts after its launch call plus a launch
// latency, or when the GPU frees up; a graph replay's kernels start after
// the cudaGraphLaunch call and run back to back with a small gap. Output
// is deterministic (no map iteration, no clock).
package kinetogen

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
)

// Kernel is one kernel to write.
type Kernel struct {
	Name string
	Us   float64 // duration
	// Op is the op ID the kernel implements ("" for glue the schedule has
	// no op for); Ops lists all op IDs of a fused kernel (Op first).
	Op  string
	Ops []string
	// Stream is the CUDA stream (0 = the writer's default stream).
	Stream int
	// Grid is the kernel's grid x dimension (1 when 0).
	Grid int
}

// Launch latencies and gaps of the time model, us. Eager: the launch call
// takes LaunchCallUs on the CPU and the kernel can start LaunchLatencyUs
// after the call begins; graph replays: GraphLaunchCallUs on the CPU, the
// first node starts GraphStartUs after the call begins, nodes are
// NodeGapUs apart. Values of the order the profiler shows on H100/H200
// (a few us per launch call, sub-us gaps inside a replay).
const (
	LaunchCallUs      = 4.0
	LaunchLatencyUs   = 6.0
	GraphLaunchCallUs = 12.0
	GraphStartUs      = 9.0
	NodeGapUs         = 0.6
	EagerGapUs        = 1.2
)

// Writer writes one trace file (one rank). Calls are not safe for
// concurrent use.
type Writer struct {
	w       *bufio.Writer
	err     error
	first   bool
	cpuUs   float64 // CPU clock of the launching thread
	gpuUs   float64 // GPU clock (end of the last kernel)
	corr    int64
	ext     int64
	device  int
	stream  int
	pid     int
	tid     int
	replays int
	minimal bool
	noTruth bool
	buf     []byte
	// Truth records the op of every kernel written, in writing order.
	Truth []KernelTruth
}

// KernelTruth is what the writer wrote for one kernel.
type KernelTruth struct {
	Name    string
	StartNs int64 // as written (relative to baseTimeNanoseconds)
	DurNs   int64
	Op      string
	Ops     []string
	// Step is the step the scenario meant the kernel for under the rule
	// its structure calls for; -1 outside every step.
	Step int
	// Replay is the index of the CUDA-graph replay that ran it; -1 eager.
	Replay int
}

// Meta is the header of a trace.
type Meta struct {
	Rank, World int
	BaseNs      int64  // baseTimeNanoseconds
	Device      string // deviceProperties name
	SM          [2]int // compute capability
	Extra       string // extra top-level JSON members, without braces ("" for none)
	// Minimal writes only what readers use (correlation, device, stream,
	// graph ids; no occupancy, grid or External ids): small fuzz seeds.
	Minimal bool
	// NoTruth: do not keep Writer.Truth (streams of millions of kernels).
	NoTruth bool
}

// NewWriter starts a trace: the header, then events as they are written.
func NewWriter(out io.Writer, m Meta) *Writer {
	w := &Writer{w: bufio.NewWriterSize(out, 1<<16), first: true, device: m.Rank % 8, stream: 7, pid: 4000 + m.Rank, tid: 4000 + m.Rank, cpuUs: 1000, gpuUs: 1000, minimal: m.Minimal, noTruth: m.NoTruth}
	fmt.Fprintf(w.w, `{"schemaVersion":1,"deviceProperties":[{"id":%d,"name":%q,"totalGlobalMem":150121545728,"computeMajor":%d,"computeMinor":%d,"numSms":132}],`,
		w.device, m.Device, m.SM[0], m.SM[1])
	fmt.Fprintf(w.w, `"distributedInfo":{"backend":"nccl","rank":%d,"world_size":%d,"pg_count":2},"record_shapes":0,"with_stack":0,`, m.Rank, m.World)
	if m.Extra != "" {
		w.w.WriteString(m.Extra)
		w.w.WriteByte(',')
	}
	fmt.Fprintf(w.w, `"baseTimeNanoseconds":%d,"traceEvents":[`+"\n", m.BaseNs)
	return w
}

// CPU returns the CPU clock, us.
func (w *Writer) CPU() float64 { return w.cpuUs }

// GPU returns the GPU clock (end of the last kernel), us.
func (w *Writer) GPU() float64 { return w.gpuUs }

// Idle advances the CPU clock by us (host work between launches).
func (w *Writer) Idle(us float64) { w.cpuUs += us }

// SyncGPU moves the CPU clock to the GPU's (a host synchronization).
func (w *Writer) SyncGPU() {
	if w.gpuUs > w.cpuUs {
		w.cpuUs = w.gpuUs
	}
}

func (w *Writer) event(b []byte) {
	if w.err != nil {
		return
	}
	if !w.first {
		w.w.WriteString(",\n")
	}
	w.first = false
	_, w.err = w.w.Write(b)
}

// ns rounds us to whole nanoseconds: every time is written with three
// decimals, so a reader parsing them exactly gets these values back.
func ns(us float64) int64 { return int64(math.Round(us * 1000)) }

func f3(b []byte, us float64) []byte {
	v := ns(us)
	if v < 0 {
		b = append(b, '-')
		v = -v
	}
	b = strconv.AppendInt(b, v/1000, 10)
	b = append(b, '.')
	frac := v % 1000
	b = append(b, byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	return b
}

// CPURange writes a user_annotation (a record_function range) on the
// launching thread from lo to hi, with External id ext.
func (w *Writer) CPURange(name string, lo, hi float64, ext int64) {
	b := append(w.buf[:0], `{"ph":"X","cat":"user_annotation","name":`...)
	b = strconv.AppendQuote(b, name)
	b = fmt.Appendf(b, `,"pid":%d,"tid":%d,"ts":`, w.pid, w.tid)
	b = f3(b, lo)
	b = append(b, `,"dur":`...)
	b = f3(b, hi-lo)
	b = fmt.Appendf(b, `,"args":{"External id":%d,"Record function id":0,"Ev Idx":%d}}`, ext, ext)
	w.event(b)
	w.buf = b
}

// GPURange writes the GPU copy of a range (gpu_user_annotation) spanning
// the kernels it launched.
func (w *Writer) GPURange(name string, lo, hi float64, ext int64) {
	b := append(w.buf[:0], `{"ph":"X","cat":"gpu_user_annotation","name":`...)
	b = strconv.AppendQuote(b, name)
	b = fmt.Appendf(b, `,"pid":%d,"tid":%d,"ts":`, w.device, w.stream)
	b = f3(b, lo)
	b = append(b, `,"dur":`...)
	b = f3(b, hi-lo)
	b = fmt.Appendf(b, `,"args":{"External id":%d}}`, ext)
	w.event(b)
	w.buf = b
}

// CPUOp writes a CPU operator event (cat cpu_op) of us on the launching
// thread, advancing the CPU clock.
func (w *Writer) CPUOp(name string, us float64) {
	w.ext++
	if w.minimal {
		w.cpuUs += us
		return
	}
	b := append(w.buf[:0], `{"ph":"X","cat":"cpu_op","name":`...)
	b = strconv.AppendQuote(b, name)
	b = fmt.Appendf(b, `,"pid":%d,"tid":%d,"ts":`, w.pid, w.tid)
	b = f3(b, w.cpuUs)
	b = append(b, `,"dur":`...)
	b = f3(b, us)
	b = fmt.Appendf(b, `,"args":{"External id":%d,"Sequence number":%d,"Fwd thread id":0,"Ev Idx":%d}}`, w.ext, w.ext, w.ext)
	w.event(b)
	w.buf = b
	w.cpuUs += us
}

// Python writes n Python function events (cat python_function, as the
// profiler records with with_stack=True, vLLM's default) of us each on
// the launching thread, nested to the depth of a call stack, advancing
// the CPU clock by their total time.
func (w *Writer) Python(n int, us float64) {
	const depth = 12
	for i := 0; i < n; i++ {
		w.ext++
		d := i % depth
		b := append(w.buf[:0], `{"ph":"X","cat":"python_function","name":`...)
		b = fmt.Appendf(b, `"vllm/v1/worker/gpu_model_runner.py(%d): _prepare_inputs_%d"`, 1000+i%977, d)
		b = fmt.Appendf(b, `,"pid":%d,"tid":%d,"ts":`, w.pid, w.tid)
		b = f3(b, w.cpuUs+float64(d)*0.01)
		b = append(b, `,"dur":`...)
		b = f3(b, us)
		b = fmt.Appendf(b, `,"args":{"Python parent id":%d,"Python id":%d,"Python thread":0}}`, w.ext-1, w.ext)
		w.event(b)
		w.buf = b
		if d == depth-1 {
			w.cpuUs += us
		}
	}
}

// NextExt returns a fresh External id (for ranges).
func (w *Writer) NextExt() int64 {
	w.ext++
	return w.ext
}

func (w *Writer) runtime(name string, corr int64, us float64) {
	b := append(w.buf[:0], `{"ph":"X","cat":"cuda_runtime","name":`...)
	b = strconv.AppendQuote(b, name)
	b = fmt.Appendf(b, `,"pid":%d,"tid":%d,"ts":`, w.pid, w.tid)
	b = f3(b, w.cpuUs)
	b = append(b, `,"dur":`...)
	b = f3(b, us)
	if w.minimal {
		b = fmt.Appendf(b, `,"args":{"correlation":%d}}`, corr)
	} else {
		b = fmt.Appendf(b, `,"args":{"External id":%d,"cbid":211,"correlation":%d}}`, w.ext, corr)
	}
	w.event(b)
	w.buf = b
}

func (w *Writer) kernel(k *Kernel, start float64, corr int64, replay, step int) {
	graph := replay >= 0
	stream := w.stream
	if k.Stream != 0 {
		stream = k.Stream
	}
	grid := k.Grid
	if grid <= 0 {
		grid = 132
	}
	b := append(w.buf[:0], `{"ph":"X","cat":"kernel","name":`...)
	b = strconv.AppendQuote(b, k.Name)
	b = fmt.Appendf(b, `,"pid":%d,"tid":%d,"ts":`, w.device, stream)
	b = f3(b, start)
	b = append(b, `,"dur":`...)
	b = f3(b, k.Us)
	if w.minimal {
		b = fmt.Appendf(b, `,"args":{"device":%d,"stream":%d,"correlation":%d`, w.device, stream, corr)
	} else {
		b = fmt.Appendf(b, `,"args":{"External id":%d,"queued":0,"device":%d,"context":1,"stream":%d,"correlation":%d,"registers per thread":128,"shared memory":49152,"blocks per SM":1,"warps per SM":8,"grid":[%d,1,1],"block":[256,1,1],"est. achieved occupancy %%":12`,
			w.ext, w.device, stream, corr, grid)
	}
	if graph {
		b = fmt.Appendf(b, `,"graph id":%d,"graph node id":%d`, 1+corr%64, len(w.Truth)+1)
	}
	b = append(b, "}}"...)
	w.event(b)
	w.buf = b
	if !w.noTruth {
		w.Truth = append(w.Truth, KernelTruth{Name: k.Name, StartNs: ns(start), DurNs: ns(k.Us), Op: k.Op, Ops: k.Ops, Step: step, Replay: replay})
	}
	if end := start + k.Us; end > w.gpuUs {
		w.gpuUs = end
	}
}

// Eager launches each kernel with its own cudaLaunchKernel; step is the
// step the scenario means them for (-1: none).
func (w *Writer) Eager(ks []Kernel, step int) (firstUs, lastEndUs float64) {
	firstUs = -1
	for i := range ks {
		w.corr++
		w.ext++
		w.runtime("cudaLaunchKernel", w.corr, LaunchCallUs)
		start := max(w.gpuUs+EagerGapUs, w.cpuUs+LaunchLatencyUs)
		w.kernel(&ks[i], start, w.corr, -1, step)
		if firstUs < 0 {
			firstUs = start
		}
		w.cpuUs += LaunchCallUs
	}
	return firstUs, w.gpuUs
}

// Graph replays ks as one CUDA graph: one cudaGraphLaunch whose
// correlation ID every kernel carries.
func (w *Writer) Graph(ks []Kernel, step int) (firstUs, lastEndUs float64) {
	w.corr++
	w.ext++
	w.runtime("cudaGraphLaunch", w.corr, GraphLaunchCallUs)
	t := max(w.gpuUs+NodeGapUs, w.cpuUs+GraphStartUs)
	firstUs = t
	for i := range ks {
		w.kernel(&ks[i], t, w.corr, w.replays, step)
		t += ks[i].Us + NodeGapUs
	}
	w.replays++
	w.cpuUs += GraphLaunchCallUs
	return firstUs, w.gpuUs
}

// Memcpy writes a host-to-device copy on the GPU timeline (copies are not
// kernels; readers leave them out).
func (w *Writer) Memcpy(bytes int, us float64) {
	w.corr++
	w.ext++
	w.runtime("cudaMemcpyAsync", w.corr, 3)
	start := max(w.gpuUs+EagerGapUs, w.cpuUs+LaunchLatencyUs)
	b := append(w.buf[:0], `{"ph":"X","cat":"gpu_memcpy","name":"Memcpy HtoD (Pinned -> Device)",`...)
	b = fmt.Appendf(b, `"pid":%d,"tid":%d,"ts":`, w.device, w.stream)
	b = f3(b, start)
	b = append(b, `,"dur":`...)
	b = f3(b, us)
	b = fmt.Appendf(b, `,"args":{"External id":%d,"device":%d,"context":1,"stream":%d,"correlation":%d,"bytes":%d,"memory bandwidth (GB/s)":10}}`, w.ext, w.device, w.stream, w.corr, bytes)
	w.event(b)
	w.buf = b
	w.gpuUs = start + us
	w.cpuUs += 3
}

// Close ends the trace and flushes it.
func (w *Writer) Close() error {
	if w.err != nil {
		return w.err
	}
	w.w.WriteString("\n]}\n")
	return w.w.Flush()
}
