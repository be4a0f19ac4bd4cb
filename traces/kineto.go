package traces

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/traces/schema"
)

// Chrome trace / Kineto JSON, as written by the PyTorch profiler
// (torch.profiler export_chrome_trace; vLLM and SGLang with their profiler
// enabled): {"schemaVersion":1, "distributedInfo":{"rank":R,...},
// "baseTimeNanoseconds":B, "traceEvents":[...]}. Complete events (ph "X")
// carry ts and dur in microseconds (fractions allowed), relative to B when
// present. The reader keeps GPU kernels (cat "kernel"), each as one Span
// without op ID whose OpKind comes from ClassifyKernel; ProfilerStep#N
// annotations (cat "gpu_user_annotation" on the GPU timeline, else
// "user_annotation" on the CPU, matched through the launch's correlation
// ID) assign kernels to steps. Kernels replayed from a CUDA graph have the
// correlation ID of a cudaGraphLaunch runtime call and get AttrKinetoGraph=true.
//
// Synthesized IDs: a step's trace ID is derived from the step number only,
// so per-rank files of one run put the same step in the same trace; a
// kernel's span ID is derived from (rank, event index). Kernels are roots
// (no step or rank span is synthesized); Rank, Step, Seq and KindSeq say
// where they belong.

// Kineto-specific attributes.
const (
	AttrKinetoGraph    attribute.Key = "tpscope.kineto.graph"     // bool: launched from a CUDA graph (cudaGraphLaunch)
	AttrKinetoStream   attribute.Key = "tpscope.kineto.stream"    // int64: CUDA stream
	AttrKinetoKindRule attribute.Key = "tpscope.kineto.kind_rule" // string: the ClassifyKernel rule that matched ("default" = none)
)

type kinetoKernel struct {
	span        int // index in res (Result.at)
	startNs     int64
	correlation int64
	device      int64
}

type stepRange struct {
	step   int
	lo, hi int64 // ns, relative
	gpu    bool
}

// parseUsToNs converts a decimal microsecond value ("1234.567") to
// nanoseconds exactly, without going through float64.
func parseUsToNs(n []byte) (int64, bool) {
	s := string(n)
	orig := s
	if s == "" {
		return 0, false
	}
	neg := false
	if s[0] == '-' {
		neg, s = true, s[1:]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	if strings.ContainsAny(s, "eE") {
		f, err := strconv.ParseFloat(orig, 64)
		if err != nil || f > 9e12 || f < -9e12 {
			return 0, false
		}
		return int64(f*1000 + 0.5), true
	}
	// Absolute epoch times are ~1.8e15 µs; 9e15 µs keeps ns within int64.
	i, err := strconv.ParseInt(intPart, 10, 64)
	if err != nil || i > 9e15 {
		return 0, false
	}
	ns := i * 1000
	for k, scale := 0, int64(100); k < len(frac); k++ {
		c := frac[k]
		if c < '0' || c > '9' {
			return 0, false
		}
		if k < 3 { // digits below 1 ns are dropped
			ns += int64(c-'0') * scale
			scale /= 10
		}
	}
	if neg {
		ns = -ns
	}
	return ns, true
}

func parseStepName(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "ProfilerStep#")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0
}

// kinetoEvent is the part of a trace event the reader uses; name and cat
// are copied into reused buffers (keys come in any order).
type kinetoEvent struct {
	ph, cat, name []byte
	pid           int64
	havePid       bool
	ts, dur       int64
	tsOK, durOK   bool
	tsText        []byte
	correlation   int64
	device        int64
	stream        int64
	haveCorr      bool
	haveDevice    bool
	haveStream    bool
	graph         bool
}

func (o *reader) kinetoNum() (int64, bool, error) {
	t, ok, err := o.lx.numText()
	if !ok || err != nil {
		return 0, false, err
	}
	v, ok := parseIntText(t)
	if !ok { // a float-valued ID
		f, fok := parseFloatText(t)
		if !fok || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, false, nil
		}
		v, ok = int64(f), true
	}
	return v, ok, nil
}

func (o *reader) kinetoEvent(ev *kinetoEvent) error {
	ev.ph, ev.cat, ev.name, ev.tsText = ev.ph[:0], ev.cat[:0], ev.name[:0], ev.tsText[:0]
	ev.havePid, ev.tsOK, ev.durOK, ev.haveCorr, ev.haveDevice, ev.haveStream, ev.graph = false, false, false, false, false, false, false
	return o.lx.object(func(k []byte) error {
		switch string(k) {
		case "ph", "cat", "name":
			c0 := k[0] // k is only valid until the next lexer call
			s, ok, err := o.strVal()
			if ok {
				switch c0 {
				case 'p':
					ev.ph = append(ev.ph, s...)
				case 'c':
					ev.cat = append(ev.cat, s...)
				default:
					ev.name = append(ev.name, s...)
				}
			}
			return err
		case "ts", "dur":
			isTs := k[0] == 't'
			t, ok, err := o.lx.numText()
			if ok {
				v, vok := parseUsToNs(t)
				if isTs {
					ev.ts, ev.tsOK, ev.tsText = v, vok, append(ev.tsText, t...)
				} else {
					ev.dur, ev.durOK = v, vok
				}
			}
			return err
		case "pid":
			v, ok, err := o.kinetoNum()
			ev.pid, ev.havePid = v, ok
			return err
		case "args":
			return o.wrongType(o.lx.object(func(k []byte) error {
				var p *int64
				var have *bool
				switch string(k) {
				case "correlation":
					p, have = &ev.correlation, &ev.haveCorr
				case "device":
					p, have = &ev.device, &ev.haveDevice
				case "stream":
					p, have = &ev.stream, &ev.haveStream
				case "graph id", "graph node id":
					ev.graph = true
					return o.lx.skip()
				default:
					return o.lx.skip()
				}
				v, ok, err := o.kinetoNum()
				*p, *have = v, ok
				return err
			}), "args")
		}
		return o.lx.skip()
	})
}

// readKinetoStream reads a Chrome/Kineto trace event by event.
func readKinetoStream(r io.Reader, res *Result, src string) error {
	o := newReader(r, res, src)
	var (
		baseNs      int64
		rank        int64 = -1
		kernels     []kinetoKernel
		steps       []stepRange
		launchNs    = map[int64]int64{} // correlation -> host launch time (ns, relative)
		graphLaunch = map[int64]bool{}  // correlation IDs of cudaGraphLaunch calls
		ignored     = map[string]int{}  // category -> count of non-kernel GPU events
		events      int
		ev          kinetoEvent
	)
	first, err := o.lx.peek()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("%s: %w", src, err)
	}
	readEvent := func() error {
		events++
		err := o.kinetoEvent(&ev)
		if errors.Is(err, errWrongType) {
			res.skip(o.where(), fmt.Sprintf("event %d: not a JSON object", events-1))
			return nil
		}
		if err != nil {
			return err
		}
		if string(ev.ph) != "X" {
			return nil // metadata, flow, counter and instant events
		}
		switch string(ev.cat) {
		case "kernel", "Kernel":
		case "cuda_runtime", "cuda_driver":
			if ev.haveCorr {
				if ev.tsOK {
					launchNs[ev.correlation] = ev.ts
				}
				if bytes.HasPrefix(ev.name, []byte("cudaGraphLaunch")) || bytes.HasPrefix(ev.name, []byte("cuGraphLaunch")) {
					graphLaunch[ev.correlation] = true
				}
			}
			return nil
		case "user_annotation", "gpu_user_annotation":
			if n, ok := parseStepName(string(ev.name)); ok {
				if !ev.tsOK || !ev.durOK || ev.dur < 0 {
					res.skip(o.where(), fmt.Sprintf("event %d %q: ts/dur are not microseconds", events-1, ev.name))
					return nil
				}
				steps = append(steps, stepRange{step: n, lo: ev.ts, hi: ev.ts + ev.dur, gpu: string(ev.cat) == "gpu_user_annotation"})
			}
			return nil
		case "gpu_memcpy", "gpu_memset", "Memcpy", "Memset":
			ignored[string(ev.cat)]++
			return nil
		default:
			return nil
		}
		if !ev.tsOK || !ev.durOK || ev.dur < 0 {
			res.skip(o.where(), fmt.Sprintf("kernel event %d %q: ts %q / dur are not microseconds", events-1, truncName(string(ev.name)), truncBytes(ev.tsText)))
			return nil
		}
		if len(ev.name) == 0 {
			res.skip(o.where(), fmt.Sprintf("kernel event %d has no name", events-1))
			return nil
		}
		sp := newSpan()
		sp.kernel = true
		sp.Name = o.in.b(ev.name)
		sp.Start = ev.ts
		sp.Duration = time.Duration(ev.dur)
		sp.Service = "kineto"
		kind, coll, rule := o.classify(sp.Name)
		sp.OpKind = string(kind)
		o.tmp = append(o.tmp[:0],
			Attr{Key: string(schema.AttrKernel), Value: StringValue(sp.Name)},
			Attr{Key: string(schema.AttrOpKind), Value: StringValue(sp.OpKind)},
			Attr{Key: string(AttrKinetoKindRule), Value: StringValue(rule)},
			Attr{Key: string(AttrKinetoGraph), Value: BoolValue(false)}, // set below
		)
		if coll != "" {
			o.tmp = append(o.tmp, Attr{Key: string(schema.AttrCollective), Value: StringValue(string(coll))})
		}
		if ev.haveStream {
			o.tmp = append(o.tmp, Attr{Key: string(AttrKinetoStream), Value: IntValue(ev.stream)})
		}
		o.tmp = append(o.tmp, Attr{Key: string(schema.AttrHostLaunchUnixNano)}) // filled below or dropped
		sp.Attrs = o.keep(o.tmp)
		k := kinetoKernel{span: res.count(), startNs: ev.ts, correlation: -1, device: -1}
		if ev.haveCorr {
			k.correlation = ev.correlation
		}
		if ev.haveDevice {
			k.device = ev.device
		} else if ev.havePid {
			k.device = ev.pid
		}
		if ev.graph {
			graphLaunch[k.correlation] = true
		}
		kernels = append(kernels, k)
		res.add(sp)
		return nil
	}

	var body func() error
	switch first {
	case '[': // a bare array of events (Chrome trace "JSON Array Format")
		body = func() error { return o.lx.array(readEvent) }
	case '{':
		body = func() error {
			return o.lx.object(func(key []byte) error {
				switch string(key) {
				case "traceEvents":
					return o.wrongType(o.lx.array(readEvent), "traceEvents")
				case "baseTimeNanoseconds":
					v, ok, err := o.intVal()
					if err == nil && !ok {
						return fmt.Errorf("baseTimeNanoseconds: want an integer")
					}
					baseNs = v
					return err
				case "distributedInfo":
					return o.wrongType(o.lx.object(func(k []byte) error {
						if string(k) != "rank" {
							return o.lx.skip()
						}
						v, ok, err := o.kinetoNum()
						if ok {
							rank = v
						}
						return err
					}), "distributedInfo")
				}
				return o.lx.skip()
			})
		}
	default:
		return fmt.Errorf("%s: want a Chrome trace JSON object {\"traceEvents\":[...]} or array, got %q", src, first)
	}
	if err := body(); err != nil {
		// The step annotations read so far count as something read.
		if err := truncated(res, src, o.lx.offset(), err, len(steps)); err != nil {
			return err
		}
	}

	cats := make([]string, 0, len(ignored))
	for c := range ignored {
		cats = append(cats, c)
	}
	sort.Strings(cats)
	for _, c := range cats {
		res.skip(src, fmt.Sprintf("%d %s events are copies, not kernels; not in the span list", ignored[c], c))
	}

	// Step assignment. GPU-side step annotations bound kernel times
	// directly; CPU-side ones bound the kernel's launch time.
	var gpuSteps, cpuSteps []stepRange
	for _, s := range steps {
		if s.gpu {
			gpuSteps = append(gpuSteps, s)
		} else {
			cpuSteps = append(cpuSteps, s)
		}
	}
	sortSteps := func(v []stepRange) { sort.Slice(v, func(i, j int) bool { return v[i].lo < v[j].lo }) }
	sortSteps(gpuSteps)
	sortSteps(cpuSteps)
	find := func(v []stepRange, t int64) int {
		i := sort.Search(len(v), func(i int) bool { return v[i].lo > t }) - 1
		if i >= 0 && t <= v[i].hi {
			return v[i].step
		}
		return -1
	}
	haveSteps := len(steps) > 0
	traceIDs := map[int][16]byte{}
	outside := 0
	for _, k := range kernels {
		sp := res.at(k.span)
		step := 0
		if haveSteps {
			step = -1
			if len(gpuSteps) > 0 {
				step = find(gpuSteps, k.startNs)
			}
			if step < 0 && len(cpuSteps) > 0 {
				if t, ok := launchNs[k.correlation]; ok {
					step = find(cpuSteps, t)
				} else {
					step = find(cpuSteps, k.startNs)
				}
			}
		}
		if step < 0 {
			sp.drop = true
			outside++
			continue
		}
		r := rank
		if r < 0 {
			r = k.device
		}
		if r < 0 {
			r = 0
		}
		sp.Step, sp.Rank = step, int(r)
		tid, ok := traceIDs[step]
		if !ok {
			tid = kinetoTraceID(step)
			traceIDs[step] = tid
		}
		sp.TraceID = tid
		binary.BigEndian.PutUint64(sp.SpanID[:], (uint64(r+1)<<48)|uint64(k.span+1))
		sp.Start += baseNs
		// Fill the launch-time and graph slots reserved when the kernel was
		// read (the list is sorted by key since).
		for i := 0; i < len(sp.Attrs); i++ {
			switch sp.Attrs[i].Key {
			case string(AttrKinetoGraph):
				sp.Attrs[i].Value = BoolValue(graphLaunch[k.correlation])
			case string(schema.AttrHostLaunchUnixNano):
				if t, ok := launchNs[k.correlation]; ok {
					sp.Attrs[i].Value = IntValue(t + baseNs)
				} else { // no launch event: drop the slot, keeping the order
					sp.Attrs = append(sp.Attrs[:i], sp.Attrs[i+1:]...)
					i--
				}
			}
		}
	}
	if outside > 0 {
		res.skip(src, fmt.Sprintf("%d kernels run outside every ProfilerStep#N annotation (warm-up or between steps); not in the span list", outside))
	}
	return nil
}

// kinetoTraceID derives a step's trace ID from the step number.
func kinetoTraceID(step int) (id [16]byte) {
	h := fnv.New128a()
	fmt.Fprintf(h, "tpscope kineto step %d", step)
	copy(id[:], h.Sum(nil))
	return id
}

func truncName(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// kernelRule is one name rule of ClassifyKernel: the first rule with a
// substring (case-insensitive) in the kernel name wins.
type kernelRule struct {
	name string
	kind model.OpKind
	subs []string
}

// kernelRules are ordered so that specific families come before the
// generic words they contain: "allreduce_fusion" (all-reduce + RMSNorm) is a
// collective, not a norm; "grouped_topk" is the router, not a grouped GEMM;
// "flash_fwd_splitkv_combine" and triton "_fwd_grouped_kernel_stage1" are
// attention; "flashinfer::norm::RMSNormKernel" is a norm (norms come before
// attention, and "flash" alone names a library, not attention);
// "rotary_embedding" is elementwise, not the embedding; "reshape_and_cache" is the KV-cache write (elementwise).
// Names from NCCL (ncclDevKernel_<Coll>_<RedOp>_<type>_<algo>_<proto>),
// vLLM custom all-reduce (csrc/custom_all_reduce.cuh cross_device_reduce_*),
// FlashInfer/TRT-LLM all-reduce fusion, DeepEP, vLLM/SGLang fused_moe,
// FlashMLA/FlashInfer/Triton attention, cuBLAS/cuBLASLt (nvjet, sm90_xmma),
// CUTLASS and DeepGEMM. A word that contains a word checked before it
// (of its own rule or an earlier one) could never decide, and is left out.
var kernelRules = []kernelRule{
	{"nccl", model.KindCollective, []string{"nccldevkernel_", "ncclkernel_", "nccl"}},
	{"custom_allreduce", model.KindCollective, []string{"cross_device_reduce", "custom_all_reduce", "allreduce_fusion", "all_reduce", "allreduce", "oneshot_all", "twoshot_all", "lamport"}},
	{"deepep", model.KindCollective, []string{"deep_ep", "deepep"}},
	{"router", model.KindRouter, []string{"topk", "top_k", "router", "gating", "moe_align", "align_block_size", "count_and_sort_expert"}},
	{"kv_cache_write", model.KindElementwise, []string{"reshape_and_cache", "concat_and_cache", "set_mla_kv", "store_kvcache"}},
	{"norm", model.KindNorm, []string{"rms_norm", "rmsnorm", "layernorm", "layer_norm", "norm_kernel"}},
	{"attention", model.KindAttention, []string{"flash_fwd", "flash_attn", "flash::", "flashmla", "flash_mla", "mla", "attn", "attention", "fmha", "_fwd_kernel_stage", "_fwd_grouped_kernel_stage", "paged", "decode_kernel", "mha_", "xqa"}},
	{"moe_sum", model.KindElementwise, []string{"moe_sum"}},
	{"moe_gemm", model.KindMoEGEMM, []string{"fused_moe", "moe", "grouped", "groupproblemshape", "group_gemm", "expert"}},
	{"gemm", model.KindGEMM, []string{"gemm", "gemv", "cutlass", "cublas", "xmma", "nvjet", "matmul", "splitkreduce", "s16816", "wgmma"}},
	{"rope", model.KindElementwise, []string{"rotary", "rope"}},
	{"embedding", model.KindEmbedding, []string{"embedding", "embed"}},
	{"elementwise", model.KindElementwise, []string{"elementwise", "act_and_mul", "silu", "gelu", "softmax", "reduce_kernel", "copy", "fill", "cat", "index", "argmax", "sampl"}},
}

// ClassifyKernel maps a GPU kernel name to an op kind, the collective it
// performs (for collectives: allreduce, allgather, reducescatter, alltoall,
// or "" when the name does not say) and the rule that matched; names no
// rule knows are elementwise with rule "default".
func ClassifyKernel(name string) (kind model.OpKind, coll model.Collective, rule string) {
	lower := strings.ToLower(name)
	for _, r := range kernelRules {
		for _, s := range r.subs {
			if strings.Contains(lower, s) {
				if r.kind == model.KindCollective {
					coll = collectiveOf(lower, r.name)
				}
				return r.kind, coll, r.name
			}
		}
	}
	return model.KindElementwise, "", "default"
}

func collectiveOf(lower, rule string) model.Collective {
	switch {
	case rule == "custom_allreduce":
		return model.AllReduce
	case rule == "deepep":
		return model.AllToAll
	case strings.Contains(lower, "allreduce") || strings.Contains(lower, "all_reduce"):
		return model.AllReduce
	case strings.Contains(lower, "allgather") || strings.Contains(lower, "all_gather"):
		return model.AllGather
	case strings.Contains(lower, "reducescatter") || strings.Contains(lower, "reduce_scatter"):
		return model.ReduceScatter
	case strings.Contains(lower, "sendrecv") || strings.Contains(lower, "alltoall"):
		return model.AllToAll
	}
	return ""
}

type kindResult struct {
	kind model.OpKind
	coll model.Collective
	rule string
}

// classify is ClassifyKernel with a per-read cache: a trace repeats a few
// hundred kernel names a million times.
func (o *reader) classify(name string) (model.OpKind, model.Collective, string) {
	if o.kinds == nil {
		o.kinds = map[string]kindResult{}
	}
	if r, ok := o.kinds[name]; ok {
		return r.kind, r.coll, r.rule
	}
	k, c, r := ClassifyKernel(name)
	if len(o.kinds) < 1<<16 {
		o.kinds[name] = kindResult{k, c, r}
	}
	return k, c, r
}
