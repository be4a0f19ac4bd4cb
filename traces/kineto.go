package traces

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tpscope/tpscope/model"
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
// correlation ID of a cudaGraphLaunch runtime call and get AttrGraph=true.
//
// Synthesized IDs: a step's trace ID is derived from the step number only,
// so per-rank files of one run put the same step in the same trace; a
// kernel's span ID is derived from (rank, event index). Kernels are roots
// (no step or rank span is synthesized); Rank, Step, Seq and KindSeq say
// where they belong.

// Kineto-specific attributes.
const (
	AttrGraph    = "tpscope.kineto.graph"     // bool: launched from a CUDA graph (cudaGraphLaunch)
	AttrStream   = "tpscope.kineto.stream"    // int64: CUDA stream
	AttrKindRule = "tpscope.kineto.kind_rule" // string: the ClassifyKernel rule that matched ("default" = none)
)

type kinetoEvent struct {
	Ph   string          `json:"ph"`
	Cat  string          `json:"cat"`
	Name string          `json:"name"`
	Pid  json.RawMessage `json:"pid"`
	Tid  json.RawMessage `json:"tid"`
	Ts   json.Number     `json:"ts"`
	Dur  json.Number     `json:"dur"`
	Args struct {
		Correlation *int64 `json:"correlation"`
		Device      *int64 `json:"device"`
		Stream      *int64 `json:"stream"`
		GraphID     *int64 `json:"graph id"`
	} `json:"args"`
}

type kinetoKernel struct {
	span        int // index in res.Spans
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
func parseUsToNs(n json.Number) (int64, bool) {
	s := string(n)
	if s == "" {
		return 0, false
	}
	neg := false
	if s[0] == '-' {
		neg, s = true, s[1:]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	if strings.ContainsAny(s, "eE") {
		f, err := strconv.ParseFloat(string(n), 64)
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

// readKinetoStream reads a Chrome/Kineto trace event by event.
func readKinetoStream(r io.Reader, res *Result, src string) error {
	dec := json.NewDecoder(errTagReader{r})
	dec.UseNumber()
	o := &otlpReader{res: res}
	o.where = func() string { return fmt.Sprintf("%s:byte %d", src, dec.InputOffset()) }

	var (
		baseNs      int64
		rank        int64 = -1
		kernels     []kinetoKernel
		steps       []stepRange
		launchNs    = map[int64]int64{} // correlation -> host launch time (ns, relative)
		graphLaunch = map[int64]bool{}  // correlation IDs of cudaGraphLaunch calls
		ignored     = map[string]int{}  // category -> count of non-kernel GPU events
		events      int
	)
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	readEvent := func() error {
		events++
		var ev kinetoEvent
		if err := dec.Decode(&ev); err != nil {
			if fatalDecodeError(err) {
				return err
			}
			res.skip(o.where(), fmt.Sprintf("event %d: %v", events-1, err))
			return nil
		}
		if ev.Ph != "X" {
			return nil // metadata, flow, counter and instant events
		}
		switch ev.Cat {
		case "kernel", "Kernel":
		case "cuda_runtime", "cuda_driver":
			if ev.Args.Correlation != nil {
				if ts, ok := parseUsToNs(ev.Ts); ok {
					launchNs[*ev.Args.Correlation] = ts
				}
				if strings.HasPrefix(ev.Name, "cudaGraphLaunch") || strings.HasPrefix(ev.Name, "cuGraphLaunch") {
					graphLaunch[*ev.Args.Correlation] = true
				}
			}
			return nil
		case "user_annotation", "gpu_user_annotation":
			if n, ok := parseStepName(ev.Name); ok {
				lo, ok1 := parseUsToNs(ev.Ts)
				d, ok2 := parseUsToNs(ev.Dur)
				if !ok1 || !ok2 || d < 0 {
					res.skip(o.where(), fmt.Sprintf("event %d %q: ts %q / dur %q are not microseconds", events-1, ev.Name, ev.Ts, ev.Dur))
					return nil
				}
				steps = append(steps, stepRange{step: n, lo: lo, hi: lo + d, gpu: ev.Cat == "gpu_user_annotation"})
			}
			return nil
		case "gpu_memcpy", "gpu_memset", "Memcpy", "Memset":
			ignored[ev.Cat]++
			return nil
		default:
			return nil
		}
		ts, ok1 := parseUsToNs(ev.Ts)
		dur, ok2 := parseUsToNs(ev.Dur)
		if !ok1 || !ok2 || dur < 0 {
			res.skip(o.where(), fmt.Sprintf("kernel event %d %q: ts %q / dur %q are not microseconds", events-1, truncName(ev.Name), ev.Ts, ev.Dur))
			return nil
		}
		if ev.Name == "" {
			res.skip(o.where(), fmt.Sprintf("kernel event %d has no name", events-1))
			return nil
		}
		sp := newSpan()
		sp.kernel = true
		sp.Name = o.in.s(ev.Name)
		sp.Start = ts
		sp.Duration = time.Duration(dur)
		sp.Service = "kineto"
		kind, coll, rule := ClassifyKernel(ev.Name)
		sp.OpKind = string(kind)
		sp.Attrs = make([]Attr, 0, 6)
		sp.Attrs = append(sp.Attrs,
			Attr{Key: string(AttrKernel), Value: StringValue(sp.Name)},
			Attr{Key: string(AttrOpKind), Value: StringValue(string(kind))},
			Attr{Key: AttrKindRule, Value: StringValue(rule)},
		)
		if coll != "" {
			sp.Attrs = append(sp.Attrs, Attr{Key: string(AttrCollective), Value: StringValue(string(coll))})
		}
		if ev.Args.Stream != nil {
			sp.Attrs = append(sp.Attrs, Attr{Key: AttrStream, Value: IntValue(*ev.Args.Stream)})
		}
		k := kinetoKernel{span: len(res.Spans), startNs: ts, correlation: -1, device: -1}
		if ev.Args.Correlation != nil {
			k.correlation = *ev.Args.Correlation
		}
		if ev.Args.Device != nil {
			k.device = *ev.Args.Device
		} else if d, err := strconv.ParseInt(strings.Trim(string(ev.Pid), `"`), 10, 64); err == nil {
			k.device = d
		}
		if ev.Args.GraphID != nil {
			graphLaunch[k.correlation] = true
		}
		kernels = append(kernels, k)
		res.add(sp)
		return nil
	}

	var body func() error
	switch d, _ := tok.(json.Delim); d {
	case '[': // a bare array of events (Chrome trace "JSON Array Format")
		body = func() error {
			for dec.More() {
				if err := readEvent(); err != nil {
					return err
				}
			}
			_, err := dec.Token()
			return err
		}
	case '{':
		body = func() error {
			return walkObject(dec, func(key string) error {
				switch key {
				case "traceEvents":
					return walkArray(dec, func() error { return readEvent() })
				case "baseTimeNanoseconds":
					var n json.Number
					if err := dec.Decode(&n); err != nil {
						return err
					}
					b, err := n.Int64()
					if err != nil {
						return fmt.Errorf("baseTimeNanoseconds %q: want an integer", n)
					}
					baseNs = b
					return nil
				case "distributedInfo":
					var di struct {
						Rank *int64 `json:"rank"`
					}
					if err := dec.Decode(&di); err != nil {
						return err
					}
					if di.Rank != nil {
						rank = *di.Rank
					}
					return nil
				}
				return skipValue(dec)
			})
		}
	default:
		return fmt.Errorf("%s: want a Chrome trace JSON object {\"traceEvents\":[...]} or array, got %v", src, tok)
	}
	if err := body(); err != nil {
		if len(res.Spans) == 0 && len(steps) == 0 {
			return fmt.Errorf("%s: byte %d: %w", src, dec.InputOffset(), err)
		}
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			res.skip(fmt.Sprintf("%s:byte %d", src, dec.InputOffset()), "file ends mid-document (truncated); the rest is lost")
		} else {
			res.skip(fmt.Sprintf("%s:byte %d", src, dec.InputOffset()), "stopped reading: "+err.Error())
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
	drop := make([]bool, len(res.Spans))
	outside := 0
	for _, k := range kernels {
		sp := &res.Spans[k.span]
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
			drop[k.span] = true
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
		sp.TraceID = kinetoTraceID(step)
		binary.BigEndian.PutUint64(sp.SpanID[:], (uint64(r+1)<<48)|uint64(k.span+1))
		sp.Start += baseNs
		if t, ok := launchNs[k.correlation]; ok {
			sp.Attrs = append(sp.Attrs, Attr{Key: string(AttrHostLaunchUnixNano), Value: IntValue(t + baseNs)})
		}
		sp.Attrs = append(sp.Attrs,
			Attr{Key: string(AttrRank), Value: IntValue(r)},
			Attr{Key: string(AttrStep), Value: IntValue(int64(step))},
			Attr{Key: AttrGraph, Value: BoolValue(graphLaunch[k.correlation])},
		)
	}
	if outside > 0 {
		res.skip(src, fmt.Sprintf("%d kernels run outside every ProfilerStep#N annotation (warm-up or between steps); not in the span list", outside))
		j := 0
		for i := range res.Spans {
			if !drop[i] {
				res.Spans[j] = res.Spans[i]
				j++
			}
		}
		res.Spans = res.Spans[:j]
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
// CUTLASS and DeepGEMM.
var kernelRules = []kernelRule{
	{"nccl", model.KindCollective, []string{"nccldevkernel_", "ncclkernel_", "nccl"}},
	{"custom_allreduce", model.KindCollective, []string{"cross_device_reduce", "custom_all_reduce", "allreduce_fusion", "all_reduce", "allreduce", "oneshot_all", "twoshot_all", "lamport"}},
	{"deepep", model.KindCollective, []string{"deep_ep", "deepep"}},
	{"router", model.KindRouter, []string{"topk", "top_k", "router", "gating", "moe_align", "align_block_size", "count_and_sort_expert"}},
	{"kv_cache_write", model.KindElementwise, []string{"reshape_and_cache", "concat_and_cache", "set_mla_kv", "store_kvcache"}},
	{"norm", model.KindNorm, []string{"rms_norm", "rmsnorm", "layernorm", "layer_norm", "norm_kernel"}},
	{"attention", model.KindAttention, []string{"flash_fwd", "flash_attn", "flash::", "flashmla", "flash_mla", "mla", "attn", "attention", "fmha", "_fwd_kernel_stage", "_fwd_grouped_kernel_stage", "paged", "decode_kernel", "mha_", "xqa"}},
	{"moe_sum", model.KindElementwise, []string{"moe_sum"}},
	{"moe_gemm", model.KindMoEGEMM, []string{"fused_moe", "moe", "grouped", "m_grouped", "groupproblemshape", "group_gemm", "expert"}},
	{"gemm", model.KindGEMM, []string{"gemm", "gemv", "cutlass", "cublas", "xmma", "nvjet", "matmul", "splitkreduce", "s16816", "wgmma", "deep_gemm"}},
	{"rope", model.KindElementwise, []string{"rotary", "rope"}},
	{"embedding", model.KindEmbedding, []string{"embedding", "embed"}},
	{"elementwise", model.KindElementwise, []string{"elementwise", "act_and_mul", "silu", "gelu", "rotary", "rope", "softmax", "reduce_kernel", "copy", "fill", "cat", "index", "argmax", "sampl"}},
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
