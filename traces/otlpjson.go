package traces

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// OTLP JSON: the JSON encoding of an OTLP ExportTraceServiceRequest
// (opentelemetry-proto, "JSON Protobuf Encoding": hex trace/span IDs,
// 64-bit integers as decimal strings, enums as integers). The file exporter
// writes one request per line (JSON Lines), as the OpenTelemetry
// Collector's file exporter does; the reader accepts that, a single
// document, and Jaeger API v3's {"result": request} wrapper.

type otlpRequest struct {
	ResourceSpans []otlpResourceSpans `json:"resourceSpans"`
}

type otlpResourceSpans struct {
	Resource   otlpResource     `json:"resource"`
	ScopeSpans []otlpScopeSpans `json:"scopeSpans"`
	SchemaURL  string           `json:"schemaUrl,omitempty"`
}

type otlpResource struct {
	Attributes []otlpKV `json:"attributes"`
}

type otlpScopeSpans struct {
	Scope     otlpScope  `json:"scope"`
	Spans     []otlpSpan `json:"spans"`
	SchemaURL string     `json:"schemaUrl,omitempty"`
}

type otlpScope struct {
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
}

type otlpSpan struct {
	TraceID           string      `json:"traceId"`
	SpanID            string      `json:"spanId"`
	ParentSpanID      string      `json:"parentSpanId,omitempty"`
	Name              string      `json:"name"`
	Kind              otlpEnum    `json:"kind,omitempty"`
	StartTimeUnixNano otlpInt     `json:"startTimeUnixNano"`
	EndTimeUnixNano   otlpInt     `json:"endTimeUnixNano"`
	Attributes        []otlpKV    `json:"attributes,omitempty"`
	Events            []otlpEvent `json:"events,omitempty"`
	Status            otlpStatus  `json:"status"`
}

type otlpEvent struct {
	TimeUnixNano otlpInt  `json:"timeUnixNano"`
	Name         string   `json:"name"`
	Attributes   []otlpKV `json:"attributes,omitempty"`
}

type otlpStatus struct {
	Message string   `json:"message,omitempty"`
	Code    otlpEnum `json:"code,omitempty"`
}

type otlpKV struct {
	Key   string       `json:"key"`
	Value otlpAnyValue `json:"value"`
}

type otlpAnyValue struct {
	StringValue *string         `json:"stringValue,omitempty"`
	BoolValue   *bool           `json:"boolValue,omitempty"`
	IntValue    *otlpInt        `json:"intValue,omitempty"`
	DoubleValue *otlpFloat      `json:"doubleValue,omitempty"`
	ArrayValue  *otlpArrayValue `json:"arrayValue,omitempty"`
	KvlistValue json.RawMessage `json:"kvlistValue,omitempty"`
	BytesValue  *string         `json:"bytesValue,omitempty"`
}

type otlpArrayValue struct {
	Values []otlpAnyValue `json:"values"`
}

// otlpInt is an int64 written as a decimal string (proto3 JSON).
type otlpInt int64

func (i otlpInt) MarshalJSON() ([]byte, error) {
	return []byte(`"` + strconv.FormatInt(int64(i), 10) + `"`), nil
}

// otlpFloat is a double; proto3 JSON writes NaN and infinities as strings.
type otlpFloat float64

func (f otlpFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	case math.IsInf(v, 1):
		return []byte(`"Infinity"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Infinity"`), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

// otlpEnum is an enum written as an integer.
type otlpEnum int

// enumNames are the proto names readers also accept for an enum
// ("SPAN_KIND_SERVER", "STATUS_CODE_ERROR"; see enumValue).
var enumNames = map[string]otlpEnum{
	"SPAN_KIND_UNSPECIFIED": 0, "SPAN_KIND_INTERNAL": 1, "SPAN_KIND_SERVER": 2, "SPAN_KIND_CLIENT": 3,
	"SPAN_KIND_PRODUCER": 4, "SPAN_KIND_CONSUMER": 5,
	"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2,
}

var spanKindNames = []string{"", "internal", "server", "client", "producer", "consumer"}

// ---- writing ----

func otlpValue(v attribute.Value) otlpAnyValue {
	switch v.Type() {
	case attribute.BOOL:
		b := v.AsBool()
		return otlpAnyValue{BoolValue: &b}
	case attribute.INT64:
		i := otlpInt(v.AsInt64())
		return otlpAnyValue{IntValue: &i}
	case attribute.FLOAT64:
		f := otlpFloat(v.AsFloat64())
		return otlpAnyValue{DoubleValue: &f}
	case attribute.STRING:
		s := v.AsString()
		return otlpAnyValue{StringValue: &s}
	case attribute.BOOLSLICE:
		return otlpArray(v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return otlpArray(v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return otlpArray(v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return otlpArray(v.AsStringSlice(), attribute.StringValue)
	}
	s := v.Emit()
	return otlpAnyValue{StringValue: &s}
}

// otlpArray encodes a slice attribute as an OTLP arrayValue of its
// elements, each made an attribute value by elem and encoded by otlpValue.
func otlpArray[T any](xs []T, elem func(T) attribute.Value) otlpAnyValue {
	var a otlpArrayValue
	for _, x := range xs {
		a.Values = append(a.Values, otlpValue(elem(x)))
	}
	return otlpAnyValue{ArrayValue: &a}
}

func otlpKVs(kvs []attribute.KeyValue) []otlpKV {
	out := make([]otlpKV, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, otlpKV{Key: string(kv.Key), Value: otlpValue(kv.Value)})
	}
	return out
}

// otlpFromSDK groups SDK spans by resource and scope into one request.
func otlpFromSDK(spans []sdktrace.ReadOnlySpan) otlpRequest {
	var req otlpRequest
	rsIndex := map[string]int{}
	ssIndex := map[[2]string]int{}
	for _, s := range spans {
		rkey := ""
		var rattrs []attribute.KeyValue
		schema := ""
		if r := s.Resource(); r != nil {
			rkey = r.Encoded(attribute.DefaultEncoder()) + "|" + r.SchemaURL()
			rattrs = r.Attributes()
			schema = r.SchemaURL()
		}
		ri, ok := rsIndex[rkey]
		if !ok {
			ri = len(req.ResourceSpans)
			rsIndex[rkey] = ri
			req.ResourceSpans = append(req.ResourceSpans, otlpResourceSpans{
				Resource: otlpResource{Attributes: otlpKVs(rattrs)}, SchemaURL: schema})
		}
		sc := s.InstrumentationScope()
		skey := [2]string{rkey, sc.Name + "\x00" + sc.Version + "\x00" + sc.SchemaURL}
		rs := &req.ResourceSpans[ri]
		si, ok := ssIndex[skey]
		if !ok {
			si = len(rs.ScopeSpans)
			ssIndex[skey] = si
			rs.ScopeSpans = append(rs.ScopeSpans, otlpScopeSpans{
				Scope: otlpScope{Name: sc.Name, Version: sc.Version}, SchemaURL: sc.SchemaURL})
		}
		os := otlpSpan{
			TraceID:           s.SpanContext().TraceID().String(),
			SpanID:            s.SpanContext().SpanID().String(),
			Name:              s.Name(),
			Kind:              otlpEnum(s.SpanKind()),
			StartTimeUnixNano: otlpInt(s.StartTime().UnixNano()),
			EndTimeUnixNano:   otlpInt(s.EndTime().UnixNano()),
			Attributes:        otlpKVs(s.Attributes()),
		}
		if p := s.Parent(); p.SpanID().IsValid() {
			os.ParentSpanID = p.SpanID().String()
		}
		for _, e := range s.Events() {
			os.Events = append(os.Events, otlpEvent{TimeUnixNano: otlpInt(e.Time.UnixNano()), Name: e.Name, Attributes: otlpKVs(e.Attributes)})
		}
		switch st := s.Status(); st.Code {
		case codes.Ok:
			os.Status = otlpStatus{Code: 1, Message: st.Description}
		case codes.Error:
			os.Status = otlpStatus{Code: 2, Message: st.Description}
		}
		rs.ScopeSpans[si].Spans = append(rs.ScopeSpans[si].Spans, os)
	}
	return req
}

// FileExporter is an sdktrace.SpanExporter that appends each batch as one
// OTLP-JSON ExportTraceServiceRequest line to a file. A path ending in
// .gz is gzip, as its name says: each line is a gzip member of its own
// (concatenated members are one gzip stream to every reader), so what
// was exported is complete on disk after each batch, as the plain file's
// lines are. Safe for concurrent use.
type FileExporter struct {
	mu   sync.Mutex
	path string
	f    *os.File
	w    *bufio.Writer
	gz   bool
}

var _ sdktrace.SpanExporter = (*FileExporter)(nil)

// NewFileExporter creates (truncates) path and returns an exporter writing to it.
func NewFileExporter(path string) (*FileExporter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("trace file: %w", err)
	}
	return &FileExporter{path: path, f: f, w: bufio.NewWriterSize(f, 1<<16), gz: strings.HasSuffix(path, ".gz")}, nil
}

// Path is the file written.
func (e *FileExporter) Path() string { return e.path }

// ExportSpans writes spans as one line and flushes it to the OS, so a
// crash after ExportSpans returns loses nothing that was exported.
func (e *FileExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	b, err := json.Marshal(otlpFromSDK(spans))
	if err != nil {
		return fmt.Errorf("encode spans for %s: %w", e.path, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.f == nil {
		return fmt.Errorf("trace file %s: exporter is shut down", e.path)
	}
	b = append(b, '\n')
	if e.gz {
		zw := gzip.NewWriter(e.w)
		if _, err := zw.Write(b); err != nil {
			return fmt.Errorf("write %s: %w", e.path, err)
		}
		if err := zw.Close(); err != nil {
			return fmt.Errorf("write %s: %w", e.path, err)
		}
	} else if _, err := e.w.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", e.path, err)
	}
	if err := e.w.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", e.path, err)
	}
	return nil
}

// Shutdown flushes and closes the file. Later calls return nil.
func (e *FileExporter) Shutdown(context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.f == nil {
		return nil
	}
	err := e.w.Flush()
	if cerr := e.f.Close(); err == nil {
		err = cerr
	}
	e.f = nil
	if err != nil {
		return fmt.Errorf("close %s: %w", e.path, err)
	}
	return nil
}

// ---- reading helpers ----

func sortAttrs(a []Attr) {
	// insertion sort: attribute lists are short and often already sorted
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j].Key < a[j-1].Key; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// readError marks an error of the underlying reader (I/O, gzip, ctx).
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }
