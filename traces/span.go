package traces

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/tpscope/tpscope/traces/schema"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Span is one span in the normalized form every reader produces, whatever
// the source (OTLP JSON, Jaeger API v1/v3, Kineto/Chrome trace).
//
// Times: Start is Unix time in nanoseconds; Duration is in nanoseconds
// (time.Duration). Jaeger API v1 has microsecond resolution, so spans read
// through it have times rounded down to whole microseconds.
//
// The typed fields after Attrs are copies of the tpscope schema attributes
// (schema.go) for aligners; Attrs keeps every attribute as the source had it.
type Span struct {
	TraceID  trace.TraceID
	SpanID   trace.SpanID
	ParentID trace.SpanID // zero for a root span
	Name     string
	Start    int64         // Unix time, ns
	Duration time.Duration // ns

	Service       string    // service.name of the span's resource/process
	Resource      *Resource // shared by all spans of one resource/process; nil when the source has none
	Scope         string    // instrumentation scope name ("" when none)
	SpanKind      string    // OTel span kind in lower case: internal, server, client, producer, consumer ("" = unspecified)
	Status        string    // "", "ok" or "error"
	StatusMessage string

	Attrs []Attr // sorted by key

	// Typed copies of schema attributes. Absent values: OpID/OpKind "",
	// Layer/Rank/Step -1, PredictedUs/DeviceUs 0.
	OpID        string
	OpKind      string // model.OpKind value ("gemm", "collective", ...)
	Layer       int
	Rank        int
	Step        int     // step index: the root's schema.AttrStep for tpscope traces, ProfilerStep#N for Kineto
	PredictedUs float64 // schema.AttrPredictedUs
	DeviceUs    float64 // schema.AttrDeviceUs

	// Seq is the span's position among the op spans (children of a rank span,
	// or GPU kernels for Kineto) of its trace and rank, by start time, from 0.
	// KindSeq is its position among those with the same OpKind. Both are -1
	// for step and rank spans and spans outside the schema. An aligner
	// without op IDs (Kineto) matches the n-th kernel of a kind with the
	// n-th predicted op of that kind.
	Seq     int
	KindSeq int

	kernel     bool  // a GPU kernel from a Kineto trace: an op span without op ID
	drop       bool  // left out by the reader (finish does not keep it)
	traceStart int64 // start of the trace's first span (sort key)
}

// newSpan returns a Span with the "absent" markers set.
func newSpan() Span { return Span{Layer: -1, Rank: -1, Step: -1, Seq: -1, KindSeq: -1} }

// End is Start+Duration in Unix nanoseconds.
func (s *Span) End() int64 { return s.Start + int64(s.Duration) }

// IsRoot reports whether the span has no parent.
func (s *Span) IsRoot() bool { return !s.ParentID.IsValid() }

// Attr returns the value of the attribute named key.
func (s *Span) Attr(key string) (Value, bool) { return findAttr(s.Attrs, key) }

// Resource is a set of resource attributes (OTLP resource, Jaeger process).
type Resource struct {
	Attrs []Attr // sorted by key
}

// Attr returns the value of the resource attribute named key.
func (r *Resource) Attr(key string) (Value, bool) {
	if r == nil {
		return Value{}, false
	}
	return findAttr(r.Attrs, key)
}

func findAttr(attrs []Attr, key string) (Value, bool) {
	i := sort.Search(len(attrs), func(i int) bool { return attrs[i].Key >= key })
	if i < len(attrs) && attrs[i].Key == key {
		return attrs[i].Value, true
	}
	return Value{}, false
}

// Attr is one attribute.
type Attr struct {
	Key   string
	Value Value
}

func (a Attr) String() string { return a.Key + "=" + a.Value.String() }

// ValueType is the type of a Value.
type ValueType uint8

const (
	TypeEmpty  ValueType = iota
	TypeString           // UTF-8 string
	TypeInt              // int64
	TypeFloat            // float64
	TypeBool             // bool
	TypeArray            // an array, kept as its canonical JSON text (see ArrayValue)
)

var typeNames = [...]string{"empty", "string", "int64", "float64", "bool", "array"}

func (t ValueType) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// Value is a typed attribute value, 24 bytes (no boxing).
type Value struct {
	str string
	num uint64
	typ ValueType
}

// StringValue, IntValue, FloatValue, BoolValue and ArrayValue make Values.
func StringValue(s string) Value { return Value{str: s, typ: TypeString} }
func IntValue(i int64) Value     { return Value{num: uint64(i), typ: TypeInt} }
func FloatValue(f float64) Value { return Value{num: math.Float64bits(f), typ: TypeFloat} }
func BoolValue(b bool) Value {
	v := Value{typ: TypeBool}
	if b {
		v.num = 1
	}
	return v
}

// ArrayValue keeps an array as JSON text: a list of plain JSON values
// (strings, numbers, bools), e.g. `["a","b"]`.
func ArrayValue(jsonText string) Value { return Value{str: jsonText, typ: TypeArray} }

func (v Value) Type() ValueType  { return v.typ }
func (v Value) AsString() string { return v.str }
func (v Value) AsInt() int64     { return int64(v.num) }
func (v Value) AsFloat() float64 { return math.Float64frombits(v.num) }
func (v Value) AsBool() bool     { return v.num != 0 }

// Number returns the value as float64 for int and float values.
func (v Value) Number() (float64, bool) {
	switch v.typ {
	case TypeInt:
		return float64(v.AsInt()), true
	case TypeFloat:
		return v.AsFloat(), true
	}
	return 0, false
}

// String formats the value; strings are not quoted.
func (v Value) String() string {
	switch v.typ {
	case TypeString, TypeArray:
		return v.str
	case TypeInt:
		return strconv.FormatInt(v.AsInt(), 10)
	case TypeFloat:
		return strconv.FormatFloat(v.AsFloat(), 'g', -1, 64)
	case TypeBool:
		return strconv.FormatBool(v.AsBool())
	}
	return ""
}

// Skip records something a reader left out and why.
type Skip struct {
	Where  string `json:"where"` // file/byte offset, trace or span ID, or event index
	Reason string `json:"reason"`
}

func (s Skip) String() string { return s.Where + ": " + s.Reason }

// In is the skip said under its source (a line that names source
// already): Where less the source it often begins with ("byte 1234: ..."
// for "SRC:byte 1234"), or the reason alone when Where is the source.
func (s Skip) In(source string) string {
	switch {
	case s.Where == source:
		return s.Reason
	case strings.HasPrefix(s.Where, source+":"):
		return strings.TrimPrefix(s.Where, source+":") + ": " + s.Reason
	}
	return s.String()
}

// Result is what a reader returns: the spans, trace by trace (traces in
// order of their first span's start, ties by ID), within a trace by
// (Start, SpanID); and the report of what was skipped.
type Result struct {
	Source string // what was read (path or URL)
	Format string // FormatOTLPJSON, FormatJaegerV1, ...
	Spans  []Span

	// Skipped lists the first MaxSkipDetails items skipped, in reading
	// order; SkippedTotal counts them all.
	Skipped      []Skip
	SkippedTotal int

	// Scenarios lists the distinct step-root scenarios (model, topology,
	// plan, workload, options) and the traces of each, in order of first
	// appearance in time. More than one means the source mixes scenarios: compare
	// them separately.
	Scenarios []Scenario

	// Kineto reports, per Kineto file read, how it was split into steps
	// and how much of its kernel time was placed on op IDs (nil for the
	// other formats).
	Kineto []KinetoFile

	// Partial says what was kept of a source that ended early or broke,
	// read with WithAllowPartial(true); nil for an intact source.
	Partial *Partial

	// noKernelPlacement: leave Kineto kernels without op IDs
	// (WithKernelPlacement(false)).
	noKernelPlacement bool
	// kernelTable: the kernel names per role (WithKernelTable); nil for
	// DefaultKernelTable.
	kernelTable *kernelTable
	// cut: traces with spans in a batch a break cut (markCut);
	// cutSteps: what the Kineto reader kept of cut files.
	cut      map[trace.TraceID]bool
	cutSteps partialSteps
	// kinetoSeen: the steps of each rank the Kineto files read so far
	// hold, per session (kinetoRead.stepTraces).
	kinetoSeen map[kinetoStepKey][]kinetoStepSeen
	// files: where each file of a file or directory source begins among
	// the spans read (fileReader), so that finish can name the file of a
	// repeat.
	files []fileStart

	chunks [][]Span // spans being read (see add)
	n      int      // spans in chunks
}

// MaxSkipDetails bounds Result.Skipped so that a file of a million bad
// spans does not make a million-entry report.
const MaxSkipDetails = 1000

// Scenario is the scenario recorded on step root spans: the short
// attributes people read (model, topology, plan, workload, options), the
// machine-readable value (JSON: schema.AttrScenario, absent in traces
// recorded before it existed) and whether the measured steps replayed CUDA
// graphs (Graphs: "true", "false", or "" when not recorded).
type Scenario struct {
	Model, Topology, Plan, Workload, Options string
	JSON                                     string
	Graphs                                   string
	Backend                                  string // schema.AttrBackend: cpu, cuda, or "" (Kineto, other harnesses)
	// GPU is the device the run executed on (the step root's resource,
	// schema.ResGPUModel), "" where the trace does not say.
	GPU    string
	Traces []trace.TraceID
}

// Key is the scenario as one comparable string.
func (s *Scenario) Key() string {
	return s.Model + "|" + s.Topology + "|" + s.Plan + "|" + s.Workload + "|" + s.Options + "|" + s.Graphs + "|" + s.Backend + "|" + s.GPU + "|" + s.JSON
}

// String names every field Key tells scenarios apart by but the JSON
// (whose box the topology names): where the run executed (backend, GPU)
// and whether it replayed CUDA graphs matter as much as the box it was
// priced on (a CPU run records the default GPU box as its topology), and
// two scenarios differing only there are two lines that differ.
func (s *Scenario) String() string {
	out := fmt.Sprintf("model=%s topology=%s plan=%s workload=%q options=%q", s.Model, s.Topology, s.Plan, s.Workload, s.Options)
	if s.Backend != "" {
		out += " backend=" + s.Backend
	}
	if s.GPU != "" {
		out += fmt.Sprintf(" gpu=%q", s.GPU)
	}
	if s.Graphs != "" {
		out += " graphs=" + s.Graphs
	}
	return out + fmt.Sprintf(" (%d traces)", len(s.Traces))
}

// largeSpanListBytes is the span-list size from which finish collects
// garbage before allocating the final list (256 MB: a few hundred thousand
// spans; a collection then costs a small part of the read).
const largeSpanListBytes = 256 << 20

// chunkSpans is the size of the chunks readers collect spans in: a growing
// slice would copy a million-span list several times and leave up to half
// its capacity unused; chunks are copied once, into the exact final list.
const chunkSpans = 1 << 14

// add appends a span to the chunks (see commit).
func (r *Result) add(s Span) {
	*r.slot() = s
	r.commit()
}

// slot returns a fresh span (absent markers set) at the end of the chunks
// for a reader to fill in place; commit keeps it, drop discards it. One
// slot is open at a time.
func (r *Result) slot() *Span {
	if n := len(r.chunks); n == 0 || len(r.chunks[n-1]) == cap(r.chunks[n-1]) {
		r.chunks = append(r.chunks, make([]Span, 0, chunkSpans))
	}
	c := &r.chunks[len(r.chunks)-1]
	*c = (*c)[:len(*c)+1]
	s := &(*c)[len(*c)-1]
	*s = newSpan()
	return s
}

// drop discards the open slot.
func (r *Result) drop() {
	c := &r.chunks[len(r.chunks)-1]
	(*c)[len(*c)-1] = Span{}
	*c = (*c)[:len(*c)-1]
}

// commit keeps the open slot after sorting its attributes and filling the
// typed fields (here, while the span is in cache, rather than in a second
// pass over a million spans). A span with a malformed op ID is left out:
// it cannot be aligned.
func (r *Result) commit() {
	c := r.chunks[len(r.chunks)-1]
	s := &c[len(c)-1]
	sortAttrs(s.Attrs)
	fillTyped(s)
	if s.OpID != "" && !ValidOpID(s.OpID) {
		r.skip("span "+s.SpanID.String(), fmt.Sprintf("op ID %q is not L{layer:02}.{block}.{name}, embed.*, head.* or mtp.*", truncName(s.OpID)))
		r.drop()
		return
	}
	r.n++
}

// count is the number of spans added so far; at(i) is the i-th.
func (r *Result) count() int     { return r.n }
func (r *Result) at(i int) *Span { return &r.chunks[i/chunkSpans][i%chunkSpans] }

func (r *Result) skip(where, reason string) {
	r.SkippedTotal++
	if len(r.Skipped) < MaxSkipDetails {
		r.Skipped = append(r.Skipped, Skip{Where: where, Reason: reason})
	}
}

// Formats a reader may report in Result.Format.
const (
	FormatOTLPJSON = "otlp-json"
	FormatJaegerV1 = "jaeger-v1" // {"data":[trace...]} from the query API v1 or the UI's download
	FormatJaegerV3 = "jaeger-v3" // {"result":{"resourceSpans":...}} from the query API v3
	FormatKineto   = "kineto"    // Chrome trace JSON from the PyTorch profiler
)

// ValidOpID reports whether id has the op ID form of DESIGN.md:
// L{layer:02}.{block}.{name} or embed.*, head.*, mtp.*, eagle.*, draft.*,
// spec.* (model/schedule.go Op.ID; model/build_spec.go), i.e. the regular
// expression
//
//	^(L[0-9]{2,}\.[a-z0-9_]+\.[A-Za-z0-9_.-]+|(embed|head|mtp|eagle|draft|spec)\.[A-Za-z0-9_.-]+)$
//
// written out by hand: it runs once per span of a million-span trace.
func ValidOpID(id string) bool {
	nameChars := func(s string) bool {
		if s == "" {
			return false
		}
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
				return false
			}
		}
		return true
	}
	for _, p := range []string{"embed.", "head.", "mtp.", "eagle.", "draft.", "spec."} {
		if rest, ok := strings.CutPrefix(id, p); ok {
			return nameChars(rest)
		}
	}
	if len(id) < 3 || id[0] != 'L' {
		return false
	}
	i := 1
	for i < len(id) && id[i] >= '0' && id[i] <= '9' {
		i++
	}
	if i < 3 || i >= len(id) || id[i] != '.' {
		return false
	}
	rest := id[i+1:]
	dot := strings.IndexByte(rest, '.')
	if dot <= 0 {
		return false
	}
	for j := 0; j < dot; j++ {
		c := rest[j]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return nameChars(rest[dot+1:])
}

// interner shares equal strings (op IDs, keys, kernel names repeat a
// million times in a large trace) so the span list holds one copy.
type interner struct{ m map[string]string }

func (in *interner) s(b string) string {
	if in.m == nil {
		in.m = make(map[string]string)
	}
	if v, ok := in.m[b]; ok {
		return v
	}
	if len(in.m) > 1<<20 { // unbounded distinct values: stop sharing
		return b
	}
	in.m[b] = b
	return b
}

// bytes interns a []byte without allocating when already present.
func (in *interner) b(b []byte) string {
	if in.m == nil {
		in.m = make(map[string]string)
	}
	if v, ok := in.m[string(b)]; ok {
		return v
	}
	return in.s(string(b))
}

// finish validates and normalizes the spans a reader added (add, slot):
// fills typed fields, Step/Seq/KindSeq, sorts spans, lists scenarios.
func (r *Result) finish() {
	// Traces in order of their first span (then by ID), spans by start time:
	// chronological and independent of the random trace IDs. The sort works
	// on positions, so its cost does not grow with the size of a Span, and
	// the spans are then copied once, in order, into the exact final list.
	first := map[trace.TraceID]int64{}
	pos := make([]int32, 0, r.n)
	for k, c := range r.chunks {
		for i := range c {
			s := &c[i]
			if s.drop {
				continue
			}
			if t, ok := first[s.TraceID]; !ok || s.Start < t {
				first[s.TraceID] = s.Start
			}
			pos = append(pos, int32(k*chunkSpans+i))
		}
	}
	for _, c := range r.chunks {
		for i := range c {
			c[i].traceStart = first[c[i].TraceID]
		}
	}
	slices.SortFunc(pos, func(i, j int32) int {
		a, b := r.at(int(i)), r.at(int(j))
		if c := cmp.Compare(a.traceStart, b.traceStart); c != 0 {
			return c
		}
		if c := bytes.Compare(a.TraceID[:], b.TraceID[:]); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Start, b.Start); c != 0 {
			return c
		}
		if c := bytes.Compare(a.SpanID[:], b.SpanID[:]); c != 0 {
			return c
		}
		return cmp.Compare(i, j) // a span read twice: the first read first
	})
	pos = r.dropRepeats(pos)
	// The list about to be allocated doubles what the chunks hold. For
	// large reads, collect first: the garbage of reading (the readers'
	// scratch state) would otherwise share the heap's growth allowance
	// (twice the live heap of the last collection) with the list, and a
	// gigabyte trace would peak at well over twice its span list.
	if int64(len(pos))*int64(unsafe.Sizeof(Span{})) > largeSpanListBytes {
		debug.FreeOSMemory() // a collection, and the freed pages returned
	}
	// A chunk is released as soon as its last span is copied: spans are
	// read mostly in time order, so the list and the chunks do not both
	// hold every span at once (a 1 GB trace would need twice the memory).
	left := make([]int32, len(r.chunks))
	for _, p := range pos {
		left[p/chunkSpans]++
	}
	r.Spans = make([]Span, len(pos))
	for i, p := range pos {
		r.Spans[i] = *r.at(int(p))
		k := p / chunkSpans
		if left[k]--; left[k] == 0 {
			r.chunks[k] = nil
		}
	}
	r.chunks, r.n = nil, 0
	// Per trace: root step attributes, scenario, rank spans, op order.
	for _, tr := range SplitTraces(r.Spans) {
		r.finishTrace(tr)
	}
}

// fileStart is where one file of a source begins among the spans read
// (Result.count before it) and how many Kineto reports came before it.
type fileStart struct {
	path   string
	span   int
	kineto int
}

// fileOf names the file span position p was read from (the source when
// it is one file).
func (r *Result) fileOf(p int32) string {
	i := sort.Search(len(r.files), func(i int) bool { return r.files[i].span > int(p) }) - 1
	if i < 0 {
		return r.Source
	}
	return r.files[i].path
}

// dropRepeats leaves out of pos, sorted as finish sorts it, every span
// that repeats the one before it: the same trace ID, span ID and start.
// A span read twice (a directory holding a trace and its gzip copy, an
// exporter that sent a batch again) would count twice in every sum of a
// comparison and a fit. Each pair of files is said once in Skipped; the
// Kineto report of a file whose every span repeats another's is dropped
// with it.
func (r *Result) dropRepeats(pos []int32) []int32 {
	if len(pos) < 2 {
		return pos
	}
	type pair struct{ kept, again string }
	var pairs []pair
	repeats := map[pair]int{}
	out := pos[:1]
	for _, p := range pos[1:] {
		q := out[len(out)-1]
		a, b := r.at(int(q)), r.at(int(p))
		if b.SpanID.IsValid() && a.SpanID == b.SpanID && a.TraceID == b.TraceID && a.Start == b.Start {
			k := pair{r.fileOf(q), r.fileOf(p)}
			if repeats[k] == 0 {
				pairs = append(pairs, k)
			}
			repeats[k]++
			continue
		}
		out = append(out, p)
	}
	if len(pairs) == 0 {
		return out
	}
	// A file with repeats of which no span is kept was read whole before:
	// what its reader left out and its Kineto report are said already.
	whole := map[string]bool{}
	if len(r.files) > 1 {
		for _, k := range pairs {
			whole[k.again] = true
		}
		for _, p := range out {
			delete(whole, r.fileOf(p))
		}
	}
	if len(whole) > 0 {
		in := func(where string) bool {
			for f := range whole {
				if where == f || strings.HasPrefix(where, f+":") {
					return true
				}
			}
			return false
		}
		sk := r.Skipped[:0]
		for _, s := range r.Skipped {
			if in(s.Where) {
				r.SkippedTotal--
				continue
			}
			sk = append(sk, s)
		}
		r.Skipped = sk
		var ks []KinetoFile
		for i, f := range r.files {
			end := len(r.Kineto)
			if i+1 < len(r.files) {
				end = r.files[i+1].kineto
			}
			if !whole[f.path] {
				ks = append(ks, r.Kineto[f.kineto:end]...)
			}
		}
		r.Kineto = ks
	}
	for _, k := range pairs {
		if k.kept == k.again {
			r.skip(k.again, fmt.Sprintf("%d spans repeat spans read before from the same file (same trace ID, span ID and start); each kept once", repeats[k]))
		} else {
			r.skip(k.again, fmt.Sprintf("%d spans repeat those of %s (same trace ID, span ID and start: the same trace read twice); each kept once", repeats[k], k.kept))
		}
	}
	return out
}

func fillTyped(s *Span) {
	for _, a := range s.Attrs {
		switch a.Key {
		case string(schema.AttrOpID):
			if a.Value.typ == TypeString {
				s.OpID = a.Value.str
			}
		case string(schema.AttrOpKind):
			if a.Value.typ == TypeString {
				s.OpKind = a.Value.str
			}
		case string(schema.AttrLayer):
			if a.Value.typ == TypeInt {
				s.Layer = int(a.Value.AsInt())
			}
		case string(schema.AttrRank):
			if a.Value.typ == TypeInt {
				s.Rank = int(a.Value.AsInt())
			}
		case string(schema.AttrStep):
			if a.Value.typ == TypeInt {
				s.Step = int(a.Value.AsInt())
			}
		case string(schema.AttrPredictedUs):
			if f, ok := a.Value.Number(); ok {
				s.PredictedUs = f
			}
		case string(schema.AttrDeviceUs):
			if f, ok := a.Value.Number(); ok {
				s.DeviceUs = f
			}
		}
	}
	if s.Rank < 0 {
		if r, ok := schema.ParseRankSpanName(s.Name); ok {
			s.Rank = r
		}
	}
}

// finishTrace works on the spans of one trace, sorted by start time.
func (r *Result) finishTrace(spans []Span) {
	step := -1
	var root *Span
	for i := range spans {
		if spans[i].Name == schema.SpanStep && spans[i].IsRoot() {
			root = &spans[i]
			step = root.Step
			break
		}
	}
	if root != nil {
		sc := Scenario{}
		for _, f := range []struct {
			k attribute.Key
			p *string
		}{{schema.AttrModel, &sc.Model}, {schema.AttrTopology, &sc.Topology}, {schema.AttrPlan, &sc.Plan}, {schema.AttrWorkload, &sc.Workload}, {schema.AttrOptions, &sc.Options}} {
			if v, ok := root.Attr(string(f.k)); ok {
				*f.p = v.String()
			}
		}
		if v, ok := root.Attr(string(schema.AttrScenario)); ok {
			sc.JSON = v.String()
		}
		if v, ok := root.Attr(string(schema.AttrBackend)); ok {
			sc.Backend = v.String()
		}
		if v, ok := root.Resource.Attr(string(schema.ResGPUModel)); ok {
			sc.GPU = v.String()
		}
		if v, ok := root.Attr(string(schema.AttrGraphs)); ok && v.Type() == TypeBool {
			sc.Graphs = strconv.FormatBool(v.AsBool())
		}
		found := false
		for i := range r.Scenarios {
			if r.Scenarios[i].Key() == sc.Key() {
				r.Scenarios[i].Traces = append(r.Scenarios[i].Traces, root.TraceID)
				found = true
				break
			}
		}
		if !found {
			sc.Traces = []trace.TraceID{root.TraceID}
			r.Scenarios = append(r.Scenarios, sc)
		}
	}
	// rank span IDs -> rank
	rankOf := map[trace.SpanID]int{}
	for i := range spans {
		s := &spans[i]
		if rk, ok := schema.ParseRankSpanName(s.Name); ok {
			rankOf[s.SpanID] = rk
		}
	}
	type key struct {
		rank int
		kind string
	}
	seq := map[int]int{}
	kseq := map[key]int{}
	for i := range spans {
		s := &spans[i]
		if s.Step < 0 {
			s.Step = step
		}
		isOp := s.kernel
		if !isOp {
			_, underRank := rankOf[s.ParentID]
			isOp = underRank || s.OpID != ""
			if rk, ok := rankOf[s.ParentID]; ok && s.Rank < 0 {
				s.Rank = rk
			}
		}
		if !isOp {
			continue
		}
		s.Seq = seq[s.Rank]
		seq[s.Rank]++
		k := key{s.Rank, s.OpKind}
		s.KindSeq = kseq[k]
		kseq[k]++
	}
}

// canonicalJSON re-encodes a JSON value compactly (for ArrayValue).
func canonicalJSON(raw []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return string(raw)
	}
	return buf.String()
}

// SplitTraces cuts a span list sorted by trace (as Result.Spans is) into
// the spans of each trace, without copying.
func SplitTraces(spans []Span) [][]Span {
	var out [][]Span
	for lo := 0; lo < len(spans); {
		hi := lo + 1
		for hi < len(spans) && spans[hi].TraceID == spans[lo].TraceID {
			hi++
		}
		out = append(out, spans[lo:hi])
		lo = hi
	}
	return out
}

// IsOpSpan reports whether s is an op span: a span with an op ID, a child
// of a rank span, or a Kineto kernel (the readers number those per rank in
// Seq). Readers, summaries and comparisons count op spans by it.
func IsOpSpan(s *Span) bool { return s.Seq >= 0 || s.OpID != "" }

// OptionNames splits a schema.AttrOptions value into sorted names. It accepts
// the comma-separated string of the schema and the JSON array text a
// string-slice attribute reads back as (`["a","b"]`).
func OptionNames(v string) []string {
	v = strings.TrimSpace(v)
	var names []string
	if strings.HasPrefix(v, "[") {
		var arr []string
		if json.Unmarshal([]byte(v), &arr) == nil {
			names = arr
		} else {
			v = strings.Trim(v, "[]")
		}
	}
	if names == nil {
		for _, p := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' }) {
			names = append(names, strings.Trim(p, `"`))
		}
	}
	out := names[:0]
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" && n != "eager" && n != "none" {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
