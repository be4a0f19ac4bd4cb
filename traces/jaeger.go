package traces

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Jaeger JSON, query API v1 (GET /api/traces, /api/traces/{id}) and the
// UI's "Download JSON": {"data":[trace...]}; a trace is {traceID, spans,
// processes}; a span has startTime and duration in microseconds, tags
// {key,type,value}, references (CHILD_OF the parent) and processID, which
// names an entry of processes {serviceName, tags}. Jaeger turns OTLP scope,
// span kind and status into tags (otel.scope.name, span.kind, error,
// otel.status_code, otel.status_description); the reader turns them back
// into Span fields so both APIs yield the same Span.

type jaegerSpan struct {
	TraceID       string          `json:"traceID"`
	SpanID        string          `json:"spanID"`
	ParentSpanID  string          `json:"parentSpanID"` // older Jaeger JSON
	OperationName string          `json:"operationName"`
	References    []jaegerRef     `json:"references"`
	StartTime     json.Number     `json:"startTime"` // µs since the epoch
	Duration      json.Number     `json:"duration"`  // µs
	Tags          []jaegerTag     `json:"tags"`
	ProcessID     string          `json:"processID"`
	Process       *jaegerProcess  `json:"process"` // inline in some exports
	Logs          json.RawMessage `json:"logs"`
}

type jaegerRef struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

type jaegerTag struct {
	Key   string          `json:"key"`
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

type jaegerProcess struct {
	ServiceName string      `json:"serviceName"`
	Tags        []jaegerTag `json:"tags"`
}

// Tags Jaeger adds when it converts OTLP to its v1 model.
const (
	jaegerTagScopeName    = "otel.scope.name"
	jaegerTagScopeVersion = "otel.scope.version"
	jaegerTagSpanKind     = "span.kind"
	jaegerTagError        = "error"
	jaegerTagStatusCode   = "otel.status_code"
	jaegerTagStatusDesc   = "otel.status_description"
)

func (o *otlpReader) jaegerValue(t *jaegerTag) (Value, error) {
	switch strings.ToLower(t.Type) {
	case "string", "":
		var s string
		if err := json.Unmarshal(t.Value, &s); err != nil {
			return Value{}, fmt.Errorf("tag %q: want a string value, got %s", t.Key, t.Value)
		}
		return StringValue(o.in.s(s)), nil
	case "int64":
		i, err := strconv.ParseInt(strings.Trim(string(t.Value), `"`), 10, 64)
		if err != nil {
			return Value{}, fmt.Errorf("tag %q: want an int64 value, got %s", t.Key, t.Value)
		}
		return IntValue(i), nil
	case "float64":
		var f otlpFloat
		if err := f.UnmarshalJSON(t.Value); err != nil {
			return Value{}, fmt.Errorf("tag %q: want a float64 value, got %s", t.Key, t.Value)
		}
		return FloatValue(float64(f)), nil
	case "bool":
		var b bool
		if err := json.Unmarshal(t.Value, &b); err != nil {
			return Value{}, fmt.Errorf("tag %q: want a bool value, got %s", t.Key, t.Value)
		}
		return BoolValue(b), nil
	case "binary":
		var s string
		_ = json.Unmarshal(t.Value, &s)
		return StringValue(s), nil
	}
	return Value{}, fmt.Errorf("tag %q: unknown type %q", t.Key, t.Type)
}

func (o *otlpReader) jaegerProcess(p *jaegerProcess, where string) *Resource {
	res := &Resource{Attrs: make([]Attr, 0, len(p.Tags)+1)}
	res.Attrs = append(res.Attrs, Attr{Key: string(ResServiceName), Value: StringValue(o.in.s(p.ServiceName))})
	for i := range p.Tags {
		v, err := o.jaegerValue(&p.Tags[i])
		if err != nil {
			o.res.skip(where, "process "+err.Error())
			continue
		}
		res.Attrs = append(res.Attrs, Attr{Key: o.in.s(p.Tags[i].Key), Value: v})
	}
	sortAttrs(res.Attrs)
	return res
}

// jaegerSpan converts one v1 span; it returns false (after a skip entry)
// for a span that cannot be used.
func (o *otlpReader) jaegerSpan(js *jaegerSpan, sp *Span) bool {
	*sp = newSpan()
	if !decodeJaegerID(js.TraceID, sp.TraceID[:]) || !sp.TraceID.IsValid() {
		o.res.skip(o.where(), fmt.Sprintf("span %q: traceID %q is not hex", js.OperationName, js.TraceID))
		return false
	}
	if !decodeJaegerID(js.SpanID, sp.SpanID[:]) || !sp.SpanID.IsValid() {
		o.res.skip(o.where(), fmt.Sprintf("span %q in trace %s: spanID %q is not hex", js.OperationName, js.TraceID, js.SpanID))
		return false
	}
	parent := js.ParentSpanID
	for _, r := range js.References {
		if r.RefType == "CHILD_OF" || (parent == "" && r.RefType == "FOLLOWS_FROM") {
			parent = r.SpanID
			break
		}
	}
	if parent != "" && parent != "0" && !decodeJaegerID(parent, sp.ParentID[:]) {
		o.res.skip(o.where(), fmt.Sprintf("span %s: parent spanID %q is not hex", js.SpanID, parent))
		return false
	}
	startUs, err1 := js.StartTime.Int64()
	durUs, err2 := js.Duration.Int64()
	if err1 != nil || err2 != nil || durUs < 0 || durUs > math.MaxInt64/1000 || startUs > math.MaxInt64/1000 || startUs < 0 {
		o.res.skip(o.where(), fmt.Sprintf("span %s: startTime %q/duration %q are not whole microseconds", js.SpanID, js.StartTime, js.Duration))
		return false
	}
	sp.Name = o.in.s(js.OperationName)
	sp.Start = startUs * 1000
	sp.Duration = time.Duration(durUs) * time.Microsecond
	sp.Attrs = make([]Attr, 0, len(js.Tags))
	isErr := false
	for i := range js.Tags {
		t := &js.Tags[i]
		v, err := o.jaegerValue(t)
		if err != nil {
			o.res.skip(o.where(), fmt.Sprintf("span %s: %v", js.SpanID, err))
			continue
		}
		switch t.Key {
		case jaegerTagScopeName:
			sp.Scope = v.String()
			continue
		case jaegerTagScopeVersion:
			continue
		case jaegerTagSpanKind:
			if k := v.String(); k != "unspecified" {
				sp.SpanKind = o.in.s(k)
			}
			continue
		case jaegerTagError:
			isErr = v.AsBool() || v.String() == "true"
			continue
		case jaegerTagStatusCode:
			sp.Status = strings.ToLower(v.String())
			continue
		case jaegerTagStatusDesc:
			sp.StatusMessage = v.String()
			continue
		}
		if t.Key == string(AttrOptions) && v.typ == TypeString && strings.HasPrefix(v.str, "[") {
			// Jaeger v1 writes array attributes as JSON text; the schema
			// says this one is a []string: restore the array so both APIs agree.
			var names []string
			if json.Unmarshal([]byte(v.str), &names) == nil {
				v = ArrayValue(canonicalJSON([]byte(v.str)))
			}
		}
		sp.Attrs = append(sp.Attrs, Attr{Key: o.in.s(t.Key), Value: v})
	}
	if isErr && sp.Status == "" {
		sp.Status = "error"
	}
	return true
}

// decodeJaegerID decodes a hex ID; Jaeger drops leading zeros, so shorter
// IDs are left-padded.
func decodeJaegerID(s string, dst []byte) bool {
	if len(s) == 0 || len(s) > 2*len(dst) {
		return false
	}
	if len(s) < 2*len(dst) {
		s = strings.Repeat("0", 2*len(dst)-len(s)) + s
	}
	return decodeID(s, dst)
}

// readJaegerV1Stream reads {"data":[trace...]} (several documents allowed)
// span by span.
func readJaegerV1Stream(r io.Reader, res *Result, src string) error {
	dec := json.NewDecoder(errTagReader{r})
	dec.UseNumber()
	o := &otlpReader{res: res}
	o.where = func() string { return fmt.Sprintf("%s:byte %d", src, dec.InputOffset()) }
	docs := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return truncated(res, src, dec.InputOffset(), err, docs)
		}
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return fmt.Errorf("%s: byte %d: want a JSON object {\"data\":[...]} (Jaeger JSON), got %v", src, dec.InputOffset(), tok)
		}
		err = walkObject(dec, func(key string) error {
			switch key {
			case "data":
				return walkArray(dec, func() error { return o.jaegerTrace(dec) })
			case "errors":
				var errs []struct {
					Code    int    `json:"code"`
					Msg     string `json:"msg"`
					TraceID string `json:"traceID"`
				}
				if err := dec.Decode(&errs); err != nil {
					return err
				}
				for _, e := range errs {
					res.skip(src, fmt.Sprintf("Jaeger reported error %d for trace %s: %s", e.Code, e.TraceID, e.Msg))
				}
				return nil
			}
			return skipValue(dec)
		})
		if err != nil {
			return truncated(res, src, dec.InputOffset(), err, docs)
		}
		docs++
	}
	if docs == 0 {
		return fmt.Errorf("%s: empty: want Jaeger JSON {\"data\":[...]}", src)
	}
	return nil
}

// jaegerTrace reads one trace object; spans may come before processes.
func (o *otlpReader) jaegerTrace(dec *json.Decoder) error {
	start := len(o.res.Spans)
	var pids []string
	var inline []*jaegerProcess
	procs := map[string]*Resource{}
	err := expectObject(dec, func() error {
		return walkObject(dec, func(key string) error {
			switch key {
			case "spans":
				return walkArray(dec, func() error {
					var js jaegerSpan
					if err := dec.Decode(&js); err != nil {
						if fatalDecodeError(err) {
							return err
						}
						o.res.skip(o.where(), "span: "+err.Error())
						return nil
					}
					var sp Span
					if o.jaegerSpan(&js, &sp) {
						o.res.add(sp)
						pids = append(pids, js.ProcessID)
						inline = append(inline, js.Process)
					}
					return nil
				})
			case "processes":
				var ps map[string]jaegerProcess
				if err := dec.Decode(&ps); err != nil {
					return err
				}
				for id, p := range ps {
					procs[id] = o.jaegerProcess(&p, o.where())
				}
				return nil
			}
			return skipValue(dec)
		})
	})
	// Attach processes to the spans read (also when the trace is cut short).
	for i, pid := range pids {
		sp := &o.res.Spans[start+i]
		r := procs[pid]
		if r == nil && inline[i] != nil {
			r = o.jaegerProcess(inline[i], o.where())
		}
		if r == nil {
			o.res.skip(o.where(), fmt.Sprintf("span %s: processID %q not in the trace's processes; service unknown", sp.SpanID, pid))
			continue
		}
		sp.Resource = r
		if v, ok := r.Attr(string(ResServiceName)); ok {
			sp.Service = v.String()
		}
	}
	return err
}

// JaegerQuery is a query of Jaeger's HTTP query API, parsed from
// jaeger://host:port?service=S&limit=N&api=v3|v1&lookback=D&trace=ID.
// Defaults: service tpscope, limit 20, api v3, lookback 24h.
type JaegerQuery struct {
	BaseURL  string        // http://host:port
	Service  string        // service name
	Limit    int           // most traces
	API      string        // "v3" or "v1"
	Lookback time.Duration // v3: query.start_time_min = now - Lookback
	TraceID  string        // fetch this one trace instead of searching
}

// ParseJaegerURL parses a jaeger:// source.
func ParseJaegerURL(src string) (JaegerQuery, error) {
	u, err := url.Parse(src)
	if err != nil || (u.Scheme != "jaeger" && u.Scheme != "jaegers") || u.Host == "" {
		return JaegerQuery{}, fmt.Errorf("%q: want jaeger://host:port?service=S&limit=N", src)
	}
	q := JaegerQuery{BaseURL: "http://" + u.Host, Service: ServiceName, Limit: 20, API: "v3", Lookback: 24 * time.Hour}
	if u.Scheme == "jaegers" {
		q.BaseURL = "https://" + u.Host
	}
	if u.Path != "" && u.Path != "/" {
		q.BaseURL += strings.TrimSuffix(u.Path, "/")
	}
	v := u.Query()
	for k := range v {
		switch k {
		case "service", "limit", "api", "lookback", "trace":
		default:
			return JaegerQuery{}, fmt.Errorf("%q: unknown parameter %q (want service, limit, api, lookback, trace)", src, k)
		}
	}
	if s := v.Get("service"); s != "" {
		q.Service = s
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return JaegerQuery{}, fmt.Errorf("%q: limit=%q: want a positive integer", src, s)
		}
		q.Limit = n
	}
	if s := v.Get("api"); s != "" {
		if s != "v1" && s != "v3" {
			return JaegerQuery{}, fmt.Errorf("%q: api=%q: want v1 or v3", src, s)
		}
		q.API = s
	}
	if s := v.Get("lookback"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return JaegerQuery{}, fmt.Errorf("%q: lookback=%q: want a positive duration like 1h", src, s)
		}
		q.Lookback = d
	}
	if s := v.Get("trace"); s != "" {
		var id [16]byte
		if !decodeJaegerID(s, id[:]) {
			return JaegerQuery{}, fmt.Errorf("%q: trace=%q: want a hex trace ID", src, s)
		}
		q.TraceID = s
	}
	return q, nil
}

// URL is the HTTP URL of the query.
func (q JaegerQuery) URL(now time.Time) string {
	if q.API == "v1" {
		if q.TraceID != "" {
			return q.BaseURL + "/api/traces/" + url.PathEscape(q.TraceID)
		}
		return q.BaseURL + "/api/traces?" + url.Values{"service": {q.Service}, "limit": {strconv.Itoa(q.Limit)}}.Encode()
	}
	if q.TraceID != "" {
		return q.BaseURL + "/api/v3/traces/" + url.PathEscape(q.TraceID)
	}
	v := url.Values{
		"query.service_name":   {q.Service},
		"query.num_traces":     {strconv.Itoa(q.Limit)},
		"query.start_time_min": {now.Add(-q.Lookback).UTC().Format(time.RFC3339Nano)},
		"query.start_time_max": {now.Add(time.Minute).UTC().Format(time.RFC3339Nano)},
	}
	return q.BaseURL + "/api/v3/traces?" + v.Encode()
}

// readJaegerHTTP runs q and reads the response as it streams in.
func readJaegerHTTP(ctx context.Context, client *http.Client, q JaegerQuery, res *Result, src string) error {
	u := q.URL(time.Now())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: query Jaeger: %w", src, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && q.API == "v3" {
		// v3 answers 404 "No traces found" for an empty result.
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return nil
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: GET %s: %s: %s", src, u, resp.Status, strings.TrimSpace(string(b)))
	}
	if q.API == "v1" {
		res.Format = FormatJaegerV1
		return readJaegerV1Stream(resp.Body, res, u)
	}
	res.Format = FormatJaegerV3
	return readOTLPStream(resp.Body, res, u)
}
