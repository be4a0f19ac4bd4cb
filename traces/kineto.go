package traces

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tpscope/tpscope/traces/schema"
)

// Chrome trace / Kineto JSON, as written by the PyTorch profiler
// (torch.profiler export_chrome_trace; vLLM, SGLang and TensorRT-LLM with
// their profiler enabled): {"schemaVersion":1,
// "distributedInfo":{"rank":R,...}, "baseTimeNanoseconds":B,
// "traceEvents":[...]}. Complete events (ph "X") carry ts and dur in
// microseconds (fractions allowed), relative to B when present.
//
// The reader keeps GPU kernels (cat "kernel"), each as one Span whose
// OpKind comes from ClassifyKernel. It also notes the runtime calls that
// launch them (cat "cuda_runtime"/"cuda_driver", matched by correlation
// ID; a cudaGraphLaunch replays a whole graph, and every kernel of the
// replay carries the launch's correlation ID) and the step ranges
// (user_annotation on the CPU, gpu_user_annotation on the GPU timeline).
// After the file is read:
//
//  1. Steps (kineto_steps.go): the first rule that applies splits the
//     kernels into steps — engine ranges, ProfilerStep#N, the engine's
//     iteration frames, graph launches, the layer pattern of eager kernels
//     (StepRule* in schema_kineto.go). A kernel belongs to the step whose
//     CPU range its launch (found by correlation ID: what the profiler's
//     ac2g flow events draw) falls in, not to the one whose time window it
//     runs in: under CUDA graphs a step's CPU range ends long before its
//     kernels run. Kernels outside every step (warm-up, between
//     iterations, launched before the profiler recorded) are left out and
//     counted in Result.Skipped.
//  2. Layers and roles (kineto_layers.go, kineto_glue.go,
//     kineto_table.go): per step and rank, the decoder layers are
//     recovered from the repeating kernel sequence and each kernel gets
//     the op ID of the (layer, role) it implements, as model.Build names
//     ops, by its name (a KernelTable) or its class and position; kernels
//     no rule places keep no op ID and are reported by name
//     (KinetoFile.Unplaced, Result.Skipped).
//
// Synthesized IDs: a step's trace ID is derived from the step number, so
// per-rank files of one run put the same step in the same trace; a later
// file holding a step of a rank an earlier one holds is another profiler
// session, whose steps get traces of their own, unless it is the same
// step read again (stepTraces). A kernel's span ID is derived from (rank,
// event index in its file), so a file read twice repeats its span IDs. Kernels are roots
// (no step or rank span is synthesized); Rank, Step, Seq and KindSeq say
// where they belong, Layer and OpID what they implement.

// kinetoKernel is one GPU kernel as read, before steps and layers are known.
type kinetoKernel struct {
	span   int32 // index in res (Result.at)
	name   int32 // index in kinetoRead.names
	start  int64 // ns, relative to baseTimeNanoseconds
	dur    int64 // ns
	corr   int64 // correlation ID; -1 when absent
	launch int64 // host time of the launch (kfLaunch), ns, relative
	stream int64
	device int32
	step   int32 // index in kinetoRead.steps; -1 outside every step
	layer  int16 // -1 for embed/head roles and unplaced kernels
	role   role
	flags  uint8
	fused  int32 // index+1 in kinetoRead.fused; 0 when the kernel implements one op
}

const (
	kfStream   uint8 = 1 << iota // stream known
	kfGraphArg                   // the kernel event says it ran from a graph (graph id)
	kfGraph                      // resolved: launched from a CUDA graph
	kfLaunch                     // a launch event with its correlation ID exists
	kfCut                        // of a step the break in the file cut short (dropCutSteps)
	kfByName                     // placed by the kernel table (kineto_table.go), not by position
)

// kernelList holds the kernels in fixed-size chunks: a growing slice would
// leave every smaller copy behind as garbage (four times the final size
// for a million kernels), which the heap must make room for.
type kernelList struct {
	chunks [][]kinetoKernel
	n      int
}

const kernelChunk = 1 << 14

func (l *kernelList) len() int { return l.n }

func (l *kernelList) at(i int) *kinetoKernel { return &l.chunks[i/kernelChunk][i%kernelChunk] }

func (l *kernelList) add(k kinetoKernel) {
	if l.n%kernelChunk == 0 {
		l.chunks = append(l.chunks, make([]kinetoKernel, kernelChunk))
	}
	l.chunks[l.n/kernelChunk][l.n%kernelChunk] = k
	l.n++
}

// kinetoLaunch is a runtime call with a correlation ID.
type kinetoLaunch struct {
	ts    int64 // ns, relative
	graph bool  // cudaGraphLaunch / cuGraphLaunch
}

// kinetoRead holds one file's events between reading and emitting spans.
type kinetoRead struct {
	o   *reader
	src string
	// first is the index in res of the file's first event's span: span
	// IDs number the file's events from it.
	first   int32
	world   int64    // distributedInfo.world_size (0: not recorded)
	devices []string // deviceProperties[].name, in order
	kernels kernelList
	names   []string
	infos   []kernelInfo
	// table: the kernel names per role; tableRoles the role it gives each
	// name (roleNone: none or several).
	table      *kernelTable
	tableRoles []role
	nameIdx    map[string]int32
	launches   map[int64]kinetoLaunch
	ranges     []kinetoRange
	steps      []stepMeta
	fused      [][]opRef
	rule       string
	engine     string
	place      bool

	opIDs      map[int32]string
	placements []placement
	stepNotes  []string // left-out steps, for Result.Skipped

	// cut: the trace ends early or breaks; broken: the trace is whole but
	// the input breaks after it (a gzip stream cut after its text);
	// lastKernelNs is the latest start of a kernel read (dropCutSteps).
	cut, broken  bool
	lastKernelNs int64
	// launched: some kernel's launch (the runtime call with its
	// correlation ID) was recorded (resolveGraphs).
	launched bool
}

func (kr *kinetoRead) nameID(name string) int32 {
	if i, ok := kr.nameIdx[name]; ok {
		return i
	}
	i := int32(len(kr.names))
	kr.names = append(kr.names, name)
	kr.infos = append(kr.infos, kr.o.classify(name))
	kr.tableRoles = append(kr.tableRoles, kr.tableRole(name))
	kr.nameIdx[name] = i
	return i
}

func (kr *kinetoRead) info(k *kinetoKernel) *kernelInfo { return &kr.infos[k.name] }

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
	external      int64
	haveCorr      bool
	haveDevice    bool
	haveStream    bool
	haveExternal  bool
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
	ev.havePid, ev.tsOK, ev.durOK, ev.haveCorr, ev.haveDevice, ev.haveStream, ev.haveExternal, ev.graph = false, false, false, false, false, false, false, false
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
				case "External id":
					p, have = &ev.external, &ev.haveExternal
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
	kr := &kinetoRead{o: o, src: src, first: int32(res.count()), nameIdx: map[string]int32{}, launches: map[int64]kinetoLaunch{}, place: !res.noKernelPlacement, table: res.kernelTable}
	if kr.table == nil {
		kr.table = defaultTable
	}
	var (
		baseNs  int64
		rank    int64 = -1
		ignored       = map[string]int{} // category -> count of non-kernel GPU events
		events  int
		ev      kinetoEvent
	)
	first, err := o.lx.peek()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return o.broke(err, "before the trace")
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
			if ev.haveCorr && ev.tsOK {
				// ROCm traces keep the category and name the HIP calls
				// (hipGraphLaunch replays a graph as cudaGraphLaunch does).
				graph := bytes.HasPrefix(ev.name, []byte("cudaGraphLaunch")) || bytes.HasPrefix(ev.name, []byte("cuGraphLaunch")) || bytes.HasPrefix(ev.name, []byte("hipGraphLaunch"))
				kr.launches[ev.correlation] = kinetoLaunch{ts: ev.ts, graph: graph}
			}
			return nil
		case "user_annotation", "gpu_user_annotation":
			info, ok := parseStepRange(ev.name)
			if !ok {
				return nil
			}
			if !ev.tsOK || !ev.durOK || ev.dur < 0 {
				res.skip(o.where(), fmt.Sprintf("event %d %q: ts/dur are not microseconds", events-1, truncBytes(ev.name)))
				return nil
			}
			rg := kinetoRange{lo: ev.ts, hi: ev.ts + ev.dur, gpu: string(ev.cat) == "gpu_user_annotation", ext: -1, name: o.in.b(ev.name), info: info}
			if ev.haveExternal {
				rg.ext = ev.external
			}
			kr.ranges = append(kr.ranges, rg)
			return nil
		case "python_function":
			info, ok := parseStepFrame(ev.name)
			if !ok || !ev.tsOK || !ev.durOK || ev.dur < 0 {
				return nil
			}
			kr.ranges = append(kr.ranges, kinetoRange{lo: ev.ts, hi: ev.ts + ev.dur, ext: -1, name: o.in.b(ev.name), info: info})
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
		if res.count() >= math.MaxInt32 {
			return fmt.Errorf("more than %d spans: split the source", math.MaxInt32)
		}
		sp := res.slot()
		sp.kernel = true
		sp.Name = o.in.b(ev.name)
		sp.Start = ev.ts
		sp.Duration = time.Duration(ev.dur)
		sp.Service = "kineto"
		k := kinetoKernel{span: int32(res.count()), name: kr.nameID(sp.Name), start: ev.ts, dur: ev.dur, corr: -1, device: -1, step: -1, layer: -1}
		sp.OpKind = string(kr.infos[k.name].kind)
		res.commit()
		if ev.haveCorr {
			k.corr = ev.correlation
		}
		if ev.haveDevice {
			k.device = int32(ev.device)
		} else if ev.havePid {
			k.device = int32(ev.pid)
		}
		if ev.haveStream {
			k.stream, k.flags = ev.stream, k.flags|kfStream
		}
		if ev.graph {
			k.flags |= kfGraphArg
		}
		kr.kernels.add(k)
		if kr.kernels.len() == 1 || ev.ts > kr.lastKernelNs {
			kr.lastKernelNs = ev.ts
		}
		return nil
	}

	var body func() error
	switch first {
	case '[': // a bare array of events (Chrome trace "JSON Array Format")
		body = func() error { return o.eventArray(readEvent) }
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
						var p *int64
						switch string(k) {
						case "rank":
							p = &rank
						case "world_size":
							p = &kr.world
						default:
							return o.lx.skip()
						}
						v, ok, err := o.kinetoNum()
						if ok {
							*p = v
						}
						return err
					}), "distributedInfo")
				case "deviceProperties":
					// The GPUs the profiler saw, by name: what a trace
					// without a scenario can say of its box.
					return o.wrongType(o.lx.array(func() error {
						return o.lx.object(func(k []byte) error {
							if string(k) != "name" {
								return o.lx.skip()
							}
							if c, err := o.lx.peek(); err != nil || c != '"' {
								return o.lx.skip()
							}
							name, err := o.lx.str()
							if err == nil && len(kr.devices) < maxKinetoDevices {
								kr.devices = append(kr.devices, string(name))
							}
							return err
						})
					}), "deviceProperties")
				}
				return o.lx.skip()
			})
		}
	default:
		return fmt.Errorf("%s: want a Chrome trace JSON object {\"traceEvents\":[...]} or array, got %q", src, first)
	}
	// A break keeps what was read: the caller decides whether partial
	// input is used (WithAllowPartial), and then the steps the break cut
	// are dropped below.
	var brk error
	if err := body(); err != nil {
		top := "object"
		if first == '[' {
			top = "array"
		}
		brk = o.broke(err, "in the top-level "+top)
		kr.cut = true
	} else if c, err := o.lx.peek(); err != io.EOF {
		// The trace is whole, but the input goes on: a gzip stream cut
		// after it, a read error, or bytes that are not JSON.
		if err == nil {
			err = o.lx.errorf("want the end of the input after the trace, got %q", c)
		}
		brk = o.broke(err, "after the trace")
		kr.broken = true
	}

	cats := make([]string, 0, len(ignored))
	for c := range ignored {
		cats = append(cats, c)
	}
	sort.Strings(cats)
	for _, c := range cats {
		res.skip(src, fmt.Sprintf("%d %s events are copies, not kernels; not in the span list", ignored[c], c))
	}
	kr.resolveGraphs()
	kr.splitSteps()
	if kr.cut || kr.broken {
		kr.dropCutSteps(res)
	}
	if kr.place {
		kr.placeSteps()
	}
	kr.emit(res, baseNs, rank)
	return brk
}

// eventArray reads the events of a trace in the JSON Array Format, whose
// closing ']' is optional (Trace Event Format: a process that dies while
// tracing leaves the array open, and viewers read it), so the input may
// end after any complete event; it may not end inside one.
func (o *reader) eventArray(event func() error) error {
	l := o.lx
	if err := l.expect('['); err != nil {
		return err
	}
	for n := 0; ; n++ {
		c, err := l.peek()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if c == ']' {
			l.pos++
			return nil
		}
		if n > 0 {
			if c != ',' {
				return l.errorf("want ',' or ']' in array, got %q", c)
			}
			l.pos++
			if _, err := l.peek(); err == io.EOF {
				return nil // an open array ends with its separator
			}
		}
		if err := event(); err != nil {
			if errors.Is(err, errWrongType) {
				return err
			}
			var pe *pathError
			if !errors.As(err, &pe) {
				pe = &pathError{err: err}
				err = pe
			}
			pe.segs = append(pe.segs, "["+strconv.Itoa(n)+"]")
			return err
		}
	}
}

// dropCutSteps drops the steps a break in the file cut short and counts
// what it kept and dropped in res.cutSteps. A step is complete when it
// ended before the last kernel read started: the profiler writes events
// in time order and a step's kernels run before the next step's, so every
// kernel of such a step was read; the step the last kernel read belongs
// to, and any later one, may have lost kernels to the break. Kernels that
// run after the last step read, outside every step, are the beginning of
// a step the break cut before its rule could see it (its range not read,
// its forward not whole) or work between steps; they are counted apart
// (res.cutSteps.after), not as a step. When only the input after a
// whole trace broke (kr.broken), every step is complete: counted, kept.
func (kr *kinetoRead) dropCutSteps(res *Result) {
	end := make([]int64, len(kr.steps))
	has := make([]bool, len(kr.steps))
	lastEnd := int64(math.MinInt64)
	for i := range kr.kernels.len() {
		k := kr.kernels.at(i)
		if k.step >= 0 {
			end[k.step] = max(end[k.step], k.start+k.dur)
			has[k.step] = true
			lastEnd = max(lastEnd, k.start+k.dur)
		}
	}
	dropped := make([]bool, len(kr.steps))
	for s := range kr.steps {
		if has[s] {
			res.cutSteps.steps++
			if kr.broken || end[s] <= kr.lastKernelNs {
				res.cutSteps.kept++
			} else {
				dropped[s] = true
			}
		}
	}
	for i := range kr.kernels.len() {
		k := kr.kernels.at(i)
		switch {
		case k.step >= 0 && dropped[k.step]:
			k.step = -1
			res.cutSteps.spans++
		case k.step < 0 && k.start > lastEnd && !kr.broken:
			res.cutSteps.after++
		default:
			continue
		}
		k.flags |= kfCut
	}
}

// resolveGraphs marks the kernels launched from a CUDA graph: their
// correlation ID is a graph launch's, or CUPTI gave them a graph id.
func (kr *kinetoRead) resolveGraphs() {
	for i := range kr.kernels.len() {
		k := kr.kernels.at(i)
		var l kinetoLaunch
		ok := false
		if k.corr >= 0 {
			l, ok = kr.launches[k.corr]
		}
		if ok {
			k.flags |= kfLaunch
			k.launch = l.ts
			kr.launched = true
		}
		if k.flags&kfGraphArg != 0 || (ok && l.graph) {
			k.flags |= kfGraph
		}
	}
	kr.launches = nil // the kernels hold what they need
}

// launchTs is the host time of k's launch.
func (kr *kinetoRead) launchTs(k *kinetoKernel) (int64, bool) {
	return k.launch, k.flags&kfLaunch != 0
}

// attrKey is what makes two kernels' attribute lists equal.
type attrKey struct {
	name   int32
	stream int64
	flags  uint8
	launch int64
	fused  int32
}

// maxKinetoDevices bounds the device names kept from one file.
const maxKinetoDevices = 64

// distinct returns the names in first-seen order without repeats.
func distinct(names []string) []string {
	var out []string
	for _, n := range names {
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// emit finishes the kernels' spans: step, rank, IDs, placement, attributes;
// drops kernels outside every step; writes the file's report.
func (kr *kinetoRead) emit(res *Result, baseNs, rank int64) {
	traceIDs := kr.stepTraces(res, baseNs, rank)
	shared := map[attrKey][]Attr{}
	fusedJSON := make([]string, len(kr.fused))
	for i, f := range kr.fused {
		ids := make([]string, len(f))
		for j, r := range f {
			ids[j] = kr.opID(r.layer, r.role)
		}
		b, _ := json.Marshal(ids)
		fusedJSON[i] = string(b)
	}
	rep := KinetoFile{Source: kr.src, Engine: kr.engine, StepRule: kr.rule, World: int(kr.world), Devices: distinct(kr.devices)}
	stepAt := map[kinetoStepKey]int{}
	unplaced := map[int32]*KernelCount{}
	outside := 0
	// Consecutive kernels mostly share their step and rank.
	var (
		lastTID  [16]byte
		lastTKey kinetoStepKey
		haveLast bool
		lastKey  kinetoStepKey
		lastJ    = -1
	)
	for i := range kr.kernels.len() {
		k := kr.kernels.at(i)
		sp := res.at(int(k.span))
		if k.step < 0 {
			sp.drop = true
			if k.flags&kfCut == 0 { // cut steps are reported in Result.Partial
				outside++
			}
			continue
		}
		r := kernelRank(k, rank)
		st := &kr.steps[k.step]
		sp.Step, sp.Rank = st.number, int(r)
		if tk := (kinetoStepKey{st.number, int(r)}); tk != lastTKey || !haveLast {
			lastTID, lastTKey, haveLast = traceIDs[tk], tk, true
		}
		sp.TraceID = lastTID
		binary.BigEndian.PutUint64(sp.SpanID[:], (uint64(r+1)<<48)|uint64(k.span-kr.first+1))
		sp.Start += baseNs
		if k.role != roleNone {
			sp.OpID = kr.opID(k.layer, k.role)
			sp.Layer = int(k.layer)
		} else if k.layer >= 0 {
			sp.Layer = int(k.layer) // in a recovered layer, no schedule op
		}
		sp.Attrs = kr.attrs(k, baseNs, shared, fusedJSON)

		key := kinetoStepKey{st.number, int(r)}
		if key != lastKey || lastJ < 0 {
			j, ok := stepAt[key]
			if !ok {
				j = len(rep.Steps)
				stepAt[key] = j
				rep.Steps = append(rep.Steps, st.report(int(r), kr.rule))
			}
			lastKey, lastJ = key, j
		}
		s := &rep.Steps[lastJ]
		s.Kernels++
		s.KernelNs += k.dur
		rep.KernelNs += k.dur
		if k.role != roleNone {
			s.PlacedNs += k.dur
			rep.PlacedNs += k.dur
			if k.flags&kfByName != 0 {
				s.ByNameNs += k.dur
				rep.ByNameNs += k.dur
			} else {
				s.ByPositionNs += k.dur
				rep.ByPositionNs += k.dur
			}
		} else {
			c := unplaced[k.name]
			if c == nil {
				c = &KernelCount{Name: kr.names[k.name]}
				unplaced[k.name] = c
			}
			c.Count++
			c.TotalNs += k.dur
		}
	}
	for _, pl := range kr.placements {
		if j, ok := stepAt[kinetoStepKey{kr.steps[pl.step].number, pl.rank(rank)}]; ok {
			rep.Steps[j].Layers = pl.layers
			rep.Steps[j].Note = pl.note
			rep.Steps[j].ARNormFused, rep.Steps[j].ARNormApart = pl.arFused, pl.arApart
		}
	}
	ranks := map[int]bool{}
	for _, s := range rep.Steps {
		ranks[s.Rank] = true
	}
	for r := range ranks {
		rep.Ranks = append(rep.Ranks, r)
	}
	sort.Ints(rep.Ranks)
	sort.SliceStable(rep.Steps, func(i, j int) bool {
		if rep.Steps[i].Step != rep.Steps[j].Step {
			return rep.Steps[i].Step < rep.Steps[j].Step
		}
		return rep.Steps[i].Rank < rep.Steps[j].Rank
	})
	for _, c := range unplaced {
		rep.Unplaced = append(rep.Unplaced, *c)
	}
	sortKernelCounts(rep.Unplaced)
	res.Kineto = append(res.Kineto, rep)

	if outside > 0 {
		res.skip(kr.src, fmt.Sprintf("%d kernels run %s; not in the span list", outside, outsideWhy(kr.rule, kr.engine)))
	}
	for _, m := range kr.stepNotes {
		res.skip(kr.src, m)
	}
	if n := len(rep.Unplaced); n > 0 && kr.place {
		kernels := 0
		for _, c := range rep.Unplaced {
			kernels += c.Count
		}
		byName, byPos, _ := rep.Shares()
		res.skip(kr.src, fmt.Sprintf("%d kernels (%.1f %% of the steps' kernel time, %d names) not placed on an op ID; kept without one (steps split by %s; placed %.1f %% by name, %.1f %% by position)",
			kernels, 100*(1-rep.PlacedFrac()), n, kr.rule, 100*byName, 100*byPos))
		for i, c := range rep.Unplaced {
			if i == maxUnplacedReported {
				res.skip(kr.src, fmt.Sprintf("... and %d more kernel names not placed (KinetoFile.Unplaced lists all)", n-i))
				break
			}
			res.skip(kr.src, fmt.Sprintf("kernel not placed on an op ID: %q x%d, %.1f us", truncName(c.Name), c.Count, float64(c.TotalNs)/1e3))
		}
	}
}

// outsideWhy says where the kernels outside every step ran, per rule.
func outsideWhy(rule, engine string) string {
	switch rule {
	case StepRuleProfilerStep:
		return "outside every ProfilerStep#N annotation (warm-up, between steps, or launched before the profiler recorded)"
	case StepRuleEngineRange:
		return "outside every " + engine + " step range (warm-up, between iterations, or work the engine runs outside the range, such as vLLM's sampler)"
	case StepRuleEngineFrame:
		return "launched outside every " + engine + " iteration frame (warm-up, between iterations)"
	case StepRuleGraphLaunch:
		return "eagerly outside the CUDA-graph replays that make the steps (input preparation, sampling)"
	}
	return "outside every complete forward"
}

// maxUnplacedReported bounds the per-name lines in Result.Skipped.
const maxUnplacedReported = 20

// attrs returns k's attribute list (sorted by key). Kernels of one graph
// replay share their launch, so lists are shared between kernels of the
// same name, stream and launch: a million-kernel trace holds a few
// thousand lists, not a million.
func (kr *kinetoRead) attrs(k *kinetoKernel, baseNs int64, shared map[attrKey][]Attr, fusedJSON []string) []Attr {
	launch, haveLaunch := kr.launchTs(k)
	key := attrKey{name: k.name, stream: k.stream, flags: k.flags, launch: launch, fused: k.fused}
	cache := k.flags&kfGraph != 0 && haveLaunch
	if cache {
		if a, ok := shared[key]; ok {
			return a
		}
	}
	ki := kr.info(k)
	o := kr.o
	o.tmp = append(o.tmp[:0],
		Attr{Key: string(schema.AttrKernel), Value: StringValue(kr.names[k.name])},
		Attr{Key: string(schema.AttrOpKind), Value: StringValue(string(ki.kind))},
		Attr{Key: string(AttrKinetoKindRule), Value: StringValue(ki.rule)},
		Attr{Key: string(AttrKinetoGraph), Value: BoolValue(k.flags&kfGraph != 0)},
	)
	if ki.coll != "" {
		o.tmp = append(o.tmp, Attr{Key: string(schema.AttrCollective), Value: StringValue(string(ki.coll))})
	}
	if k.flags&kfStream != 0 {
		o.tmp = append(o.tmp, Attr{Key: string(AttrKinetoStream), Value: IntValue(k.stream)})
	}
	if haveLaunch {
		o.tmp = append(o.tmp, Attr{Key: string(schema.AttrHostLaunchUnixNano), Value: IntValue(launch + baseNs)})
	}
	if k.fused > 0 {
		o.tmp = append(o.tmp, Attr{Key: string(AttrKinetoOps), Value: ArrayValue(fusedJSON[k.fused-1])})
	}
	sortAttrs(o.tmp)
	a := o.keep(o.tmp)
	if cache {
		shared[key] = a
	}
	return a
}

func decodeStringArray(s string) []string {
	var v []string
	if json.Unmarshal([]byte(s), &v) != nil {
		return nil
	}
	return v
}

// kinetoTraceID derives a step's trace ID from the step number.
func kinetoTraceID(step int) (id [16]byte) {
	h := fnv.New128a()
	fmt.Fprintf(h, "tpscope kineto step %d", step)
	copy(id[:], h.Sum(nil))
	return id
}

// kinetoSessionTraceID is the trace ID of a step of the n-th profiler
// session (n >= 1) read into one Result whose earlier files hold the
// same step of the same rank.
func kinetoSessionTraceID(step, n int) (id [16]byte) {
	h := fnv.New128a()
	fmt.Fprintf(h, "tpscope kineto step %d session %d", step, n)
	copy(id[:], h.Sum(nil))
	return id
}

// kinetoStepKey is a step of one rank.
type kinetoStepKey struct{ step, rank int }

// kinetoStepSeen is a step of one rank as a file of the Result read it:
// its first kernel's start (Unix ns), its kernel count and the trace it
// was given.
type kinetoStepSeen struct {
	startNs int64
	kernels int
	tid     [16]byte
}

// kernelRank is the rank of k: the file's, else its device's, else 0.
func kernelRank(k *kinetoKernel, rank int64) int64 {
	r := rank
	if r < 0 {
		r = int64(k.device)
	}
	return max(r, 0)
}

// stepTraces gives each step of each rank of the file its trace ID. Files
// of one Result that hold the same step of the same rank are several
// profiler sessions, or a file and its copy. A step whose first kernel
// starts when an earlier file's does, with as many kernels, is that
// step read again: it gets the earlier file's trace, and its spans,
// whose IDs then repeat the earlier ones, are left out as repeats
// (Result.finish). Any other is another session's: its trace is its own
// (kinetoSessionTraceID), so two sessions' step 2 do not add up to one
// step. Per-rank files of one run hold different ranks and share the
// step's trace.
func (kr *kinetoRead) stepTraces(res *Result, baseNs, rank int64) map[kinetoStepKey][16]byte {
	first := map[kinetoStepKey]*kinetoStepSeen{}
	var order []kinetoStepKey
	for i := range kr.kernels.len() {
		k := kr.kernels.at(i)
		if k.step < 0 {
			continue
		}
		key := kinetoStepKey{kr.steps[k.step].number, int(kernelRank(k, rank))}
		f := first[key]
		if f == nil {
			f = &kinetoStepSeen{startNs: k.start}
			first[key] = f
			order = append(order, key)
		}
		f.startNs = min(f.startNs, k.start)
		f.kernels++
	}
	if res.kinetoSeen == nil {
		res.kinetoSeen = map[kinetoStepKey][]kinetoStepSeen{}
	}
	out := make(map[kinetoStepKey][16]byte, len(order))
	for _, key := range order {
		f := first[key]
		f.startNs += baseNs
		seen := res.kinetoSeen[key]
		f.tid = kinetoTraceID(key.step)
		if n := len(seen); n > 0 {
			f.tid = kinetoSessionTraceID(key.step, n)
		}
		again := false
		for _, e := range seen {
			if e.startNs == f.startNs && e.kernels == f.kernels {
				f.tid, again = e.tid, true
				break
			}
		}
		if !again {
			res.kinetoSeen[key] = append(seen, *f)
		}
		out[key] = f.tid
	}
	return out
}

func truncName(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
