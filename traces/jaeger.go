package traces

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tpscope/tpscope/traces/schema"
)

// Jaeger JSON, query API v1 (GET /api/traces, /api/traces/{id}) and the
// UI's "Download JSON": {"data":[trace...]}; a trace is {traceID, spans,
// processes}; a span has startTime and duration in microseconds, tags
// {key,type,value}, references (CHILD_OF the parent) and processID, which
// names an entry of processes {serviceName, tags}. Jaeger turns OTLP scope,
// span kind and status into tags (otel.scope.name, span.kind, error,
// otel.status_code, otel.status_description); the reader turns them back
// into Span fields so both APIs yield the same Span.

// Tags Jaeger adds when it converts OTLP to its v1 model.
const (
	jaegerTagScopeName    = "otel.scope.name"
	jaegerTagScopeVersion = "otel.scope.version"
	jaegerTagSpanKind     = "span.kind"
	jaegerTagError        = "error"
	jaegerTagStatusCode   = "otel.status_code"
	jaegerTagStatusDesc   = "otel.status_description"
)

// decodeJaegerID decodes a hex ID; Jaeger drops leading zeros, so shorter
// IDs are left-padded.
func decodeJaegerID(s string, dst []byte) bool {
	if len(s) == 0 || len(s) > 2*len(dst) {
		return false
	}
	if len(s) < 2*len(dst) {
		s = strings.Repeat("0", 2*len(dst)-len(s)) + s
	}
	return decodeID([]byte(s), dst)
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
	q := JaegerQuery{BaseURL: "http://" + u.Host, Service: schema.ServiceName, Limit: 20, API: "v3", Lookback: 24 * time.Hour}
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
		err = readJaegerV1Stream(resp.Body, res, u)
	} else {
		res.Format = FormatJaegerV3
		err = readOTLPStream(resp.Body, res, u)
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%s: %w", src, cerr)
	}
	return partialError(err, u, nil)
}
