package traces

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/tpscope/tpscope/traces/schema"
)

// reader holds what the streaming readers share: the lexer, the result,
// the string interner and an arena the spans' attribute lists are cut from
// (one allocation per 64Ki attributes instead of one per span).
type reader struct {
	lx  *lexer
	res *Result
	src string
	in  interner

	tmp   []Attr // the attribute list being read
	arena []Attr
	vbuf  []byte // scratch for values that must outlive a lexer call
	kinds map[string]kernelInfo
}

func newReader(r io.Reader, res *Result, src string) *reader {
	return &reader{lx: newLexer(r), res: res, src: src}
}

func (o *reader) where() string { return fmt.Sprintf("%s:byte %d", o.src, o.lx.offset()) }

// keep copies attrs into the arena and returns the copy (capacity capped
// so appends by the caller reallocate instead of overwriting a neighbour).
func (o *reader) keep(attrs []Attr) []Attr {
	n := len(attrs)
	if n == 0 {
		return nil
	}
	if cap(o.arena)-len(o.arena) < n {
		o.arena = make([]Attr, 0, max(1<<16, n))
	}
	i := len(o.arena)
	o.arena = append(o.arena, attrs...)
	return o.arena[i : i+n : i+n]
}

// strVal reads a string value; a value of another kind is skipped (ok=false).
func (o *reader) strVal() (s []byte, ok bool, err error) {
	k, err := o.lx.kind()
	if err != nil {
		return nil, false, err
	}
	if k != 's' {
		return nil, false, o.lx.skip()
	}
	s, err = o.lx.str()
	return s, err == nil, err
}

func parseIntText(b []byte) (int64, bool) {
	v, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		u, uerr := strconv.ParseUint(string(b), 10, 64) // fixed64 times
		if uerr != nil {
			return 0, false
		}
		v = int64(u)
	}
	return v, true
}

func parseFloatText(b []byte) (float64, bool) {
	switch string(b) {
	case "NaN":
		return math.NaN(), true
	case "Infinity":
		return math.Inf(1), true
	case "-Infinity":
		return math.Inf(-1), true
	}
	f, err := strconv.ParseFloat(string(b), 64)
	return f, err == nil
}

// intVal reads an integer given as number or string.
func (o *reader) intVal() (int64, bool, error) {
	t, ok, err := o.lx.numText()
	if err != nil || !ok {
		return 0, false, err
	}
	v, ok := parseIntText(t)
	return v, ok, nil
}

// decodeID decodes a hex ID (OTLP JSON) or, failing that, base64 (protojson
// of bytes) into dst; it reports false for a missing or malformed ID.
func decodeID(s []byte, dst []byte) bool {
	if len(s) == 2*len(dst) {
		if _, err := hex.Decode(dst, s); err == nil {
			return true
		}
	}
	if len(s) == base64.StdEncoding.EncodedLen(len(dst)) {
		var b [24]byte
		if n, err := base64.StdEncoding.Decode(b[:], s); err == nil && n == len(dst) {
			copy(dst, b[:n])
			return true
		}
	}
	return false
}

// ---- OTLP JSON ----

// readOTLPStream reads OTLP JSON from r: JSON Lines of requests, one
// request, or a Jaeger v3 {"result": request}. It streams span by span:
// memory holds the span list, not the document.
func readOTLPStream(r io.Reader, res *Result, src string) error {
	o := newReader(r, res, src)
	return o.documents("(OTLP ExportTraceServiceRequest)", "OTLP JSON (resourceSpans)", o.otlpRequest)
}

// documents reads the JSON objects of o's stream one after another (JSON
// Lines, or objects merely concatenated), calling doc to consume each. want
// says what the objects should be, for a stream that holds something else;
// empty says what was expected, for a stream with no object at all. A
// stream that ends inside a document or breaks is a *streamBreak: the
// spans read before it stay in o.res for a caller that keeps partial input.
func (o *reader) documents(want, empty string, doc func() error) error {
	docs := 0
	for {
		c, err := o.lx.peek()
		if err == io.EOF {
			break
		}
		if err != nil {
			return o.broke(err, "between documents")
		}
		if c != '{' {
			return o.broke(o.lx.errorf("want a JSON object %s, got %q", want, c), "between documents")
		}
		if err := doc(); err != nil {
			return o.broke(err, "in the top-level object")
		}
		docs++
	}
	if docs == 0 {
		return fmt.Errorf("%s: empty: want %s", o.src, empty)
	}
	return nil
}

// wrongType turns errWrongType for a structural field into a skip entry.
func (o *reader) wrongType(err error, field string) error {
	if errors.Is(err, errWrongType) {
		o.res.skip(o.where(), fmt.Sprintf("%q is not the JSON type OTLP/Jaeger JSON has there; ignored", field))
		return nil
	}
	return err
}

func (o *reader) otlpRequest() error {
	return o.wrongType(o.lx.object(func(key []byte) error {
		switch string(key) {
		case "resourceSpans":
			return o.wrongType(o.lx.array(o.otlpResourceSpans), "resourceSpans")
		case "result":
			return o.otlpRequest()
		}
		return o.lx.skip()
	}), "request")
}

func (o *reader) otlpResourceSpans() error {
	var res *Resource
	svc := ""
	start := o.res.count()
	err := o.lx.object(func(key []byte) error {
		switch string(key) {
		case "resource":
			return o.wrongType(o.lx.object(func(key []byte) error {
				if string(key) != "attributes" {
					return o.lx.skip()
				}
				attrs, err := o.otlpAttrs()
				if err != nil {
					return err
				}
				sortAttrs(attrs)
				res = &Resource{Attrs: attrs}
				if v, ok := res.Attr(string(schema.ResServiceName)); ok {
					svc = o.in.s(v.String())
				}
				return nil
			}), "resource")
		case "scopeSpans", "instrumentationLibrarySpans":
			return o.wrongType(o.lx.array(func() error { return o.otlpScopeSpans(res, svc) }), "scopeSpans")
		}
		return o.lx.skip()
	})
	if res != nil { // resource after scopeSpans: attach now
		for i := start; i < o.res.count(); i++ {
			if s := o.res.at(i); s.Resource == nil {
				s.Resource, s.Service = res, svc
			}
		}
	}
	if err != nil && !errors.Is(err, errWrongType) {
		o.res.markCut(start) // the rest of this batch is lost
	}
	return o.wrongType(err, "resourceSpans[]")
}

func (o *reader) otlpScopeSpans(res *Resource, svc string) error {
	scope := ""
	start := o.res.count()
	err := o.lx.object(func(key []byte) error {
		switch string(key) {
		case "scope", "instrumentationLibrary":
			return o.wrongType(o.lx.object(func(key []byte) error {
				if string(key) != "name" {
					return o.lx.skip()
				}
				s, ok, err := o.strVal()
				if ok {
					scope = o.in.b(s)
				}
				return err
			}), "scope")
		case "spans":
			return o.wrongType(o.lx.array(func() error { return o.otlpSpan(res, svc, scope) }), "spans")
		}
		return o.lx.skip()
	})
	for i := start; i < o.res.count(); i++ { // scope after spans
		if s := o.res.at(i); s.Scope == "" {
			s.Scope = scope
		}
	}
	return o.wrongType(err, "scopeSpans[]")
}

// otlpAttrs reads [{"key":K,"value":AnyValue}...] and returns the list
// (in the arena, not sorted).
func (o *reader) otlpAttrs() ([]Attr, error) {
	o.tmp = o.tmp[:0]
	err := o.lx.array(func() error {
		if a, ok := o.fastAttr(); ok {
			o.tmp = append(o.tmp, a)
			return nil
		}
		key := ""
		var v Value
		have := false
		err := o.lx.object(func(k []byte) error {
			switch string(k) {
			case "key":
				s, ok, err := o.strVal()
				if ok {
					key = o.in.b(s)
				}
				return err
			case "value":
				var err error
				v, have, err = o.anyValue()
				return err
			}
			return o.lx.skip()
		})
		if errors.Is(err, errWrongType) {
			return nil
		}
		if err == nil && have {
			o.tmp = append(o.tmp, Attr{Key: key, Value: v})
		}
		return err
	})
	if errors.Is(err, errWrongType) {
		err = nil
	}
	return o.keep(o.tmp), err
}

// anyValue reads an OTLP AnyValue object; have=false for an empty or
// unusable one.
func (o *reader) anyValue() (v Value, have bool, err error) {
	err = o.lx.object(func(k []byte) error {
		switch string(k) {
		case "stringValue", "bytesValue":
			s, ok, err := o.strVal()
			if ok {
				v, have = StringValue(o.in.b(s)), true
			}
			return err
		case "intValue":
			i, ok, err := o.intVal()
			if ok {
				v, have = IntValue(i), true
			}
			return err
		case "doubleValue":
			t, ok, err := o.lx.numText()
			if ok {
				if f, ok := parseFloatText(t); ok {
					v, have = FloatValue(f), true
				}
			}
			return err
		case "boolValue":
			t, err := o.lx.scalar()
			if err == nil && (string(t) == "true" || string(t) == "false") {
				v, have = BoolValue(t[0] == 't'), true
			}
			return err
		case "arrayValue":
			o.vbuf = o.vbuf[:0]
			b, err := o.arrayJSON(o.vbuf)
			o.vbuf = b
			if err == nil {
				v, have = ArrayValue(o.in.b(b)), true
			}
			return err
		case "kvlistValue":
			b, err := o.lx.raw(o.vbuf[:0])
			o.vbuf = b
			if err == nil {
				v, have = StringValue(o.in.b(b)), true
			}
			return err
		}
		return o.lx.skip()
	})
	if errors.Is(err, errWrongType) {
		return Value{}, false, nil
	}
	return v, have, err
}

// arrayJSON reads {"values":[AnyValue...]} and appends it as plain JSON
// (["a",1,2.5,true]) to dst.
func (o *reader) arrayJSON(dst []byte) ([]byte, error) {
	dst = append(dst, '[')
	n := 0
	err := o.lx.object(func(k []byte) error {
		if string(k) != "values" {
			return o.lx.skip()
		}
		return o.lx.array(func() error {
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
			wrote := false
			err := o.lx.object(func(k []byte) error {
				var err error
				switch string(k) {
				case "stringValue", "bytesValue":
					var s []byte
					var ok bool
					if s, ok, err = o.strVal(); ok {
						dst, wrote = strconv.AppendQuote(dst, string(s)), true
					}
				case "intValue":
					var i int64
					var ok bool
					if i, ok, err = o.intVal(); ok {
						dst, wrote = strconv.AppendInt(dst, i, 10), true
					}
				case "doubleValue":
					var t []byte
					var ok bool
					if t, ok, err = o.lx.numText(); ok {
						if f, ok := parseFloatText(t); ok {
							if math.IsNaN(f) || math.IsInf(f, 0) {
								dst = strconv.AppendQuote(dst, strconv.FormatFloat(f, 'g', -1, 64))
							} else {
								dst = strconv.AppendFloat(dst, f, 'g', -1, 64)
							}
							wrote = true
						}
					}
				case "boolValue":
					var t []byte
					if t, err = o.lx.scalar(); err == nil && (string(t) == "true" || string(t) == "false") {
						dst, wrote = append(dst, t...), true
					}
				case "arrayValue":
					dst, err = o.arrayJSON(dst)
					wrote = err == nil
				default:
					err = o.lx.skip()
				}
				return err
			})
			if !wrote {
				dst = append(dst, "null"...)
			}
			if errors.Is(err, errWrongType) {
				return nil
			}
			return err
		})
	})
	if errors.Is(err, errWrongType) {
		err = nil
	}
	return append(dst, ']'), err
}

// otlpSpan reads one span object and adds it, or records why not.
func (o *reader) otlpSpan(res *Resource, svc, scope string) error {
	sp := o.res.slot()
	var start, end int64
	haveTrace, haveSpan := false, false
	// haveStart, haveEnd: the times were given. A writer omits neither (a
	// time of 0 is 1970): a span without one lost it, and read as 0 it
	// would last from 1970 to its end.
	haveStart, haveEnd := false, false
	bad := ""
	badf := func(format string, a ...any) {
		if bad == "" {
			bad = fmt.Sprintf(format, a...)
		}
	}
	err := o.lx.object(func(key []byte) error {
		switch string(key) {
		case "traceId":
			s, ok, err := o.strVal()
			if ok && decodeID(s, sp.TraceID[:]) {
				haveTrace = sp.TraceID.IsValid()
			} else if err == nil {
				badf("traceId %q is not 32 hex digits", truncBytes(s))
			}
			return err
		case "spanId":
			s, ok, err := o.strVal()
			if ok && decodeID(s, sp.SpanID[:]) {
				haveSpan = sp.SpanID.IsValid()
			} else if err == nil {
				badf("spanId %q is not 16 hex digits", truncBytes(s))
			}
			return err
		case "parentSpanId":
			s, ok, err := o.strVal()
			if ok && len(s) > 0 && !decodeID(s, sp.ParentID[:]) {
				badf("parentSpanId %q is not 16 hex digits", truncBytes(s))
			}
			return err
		case "name":
			s, ok, err := o.strVal()
			if ok {
				sp.Name = o.in.b(s)
			}
			return err
		case "kind":
			t, ok, err := o.lx.numText()
			if ok {
				if k, kok := enumValue(t); kok && k > 0 && k < len(spanKindNames) {
					sp.SpanKind = spanKindNames[k]
				}
			}
			return err
		case "startTimeUnixNano", "endTimeUnixNano":
			isStart := key[0] == 's' // key is only valid until the next lexer call
			field := "endTimeUnixNano"
			if isStart {
				field = "startTimeUnixNano"
			}
			v, ok, err := o.intVal()
			if err == nil && !ok {
				badf("%s is not an integer", field)
			}
			if isStart {
				start, haveStart = v, ok
			} else {
				end, haveEnd = v, ok
			}
			return err
		case "attributes":
			a, err := o.otlpAttrs()
			sp.Attrs = a
			return err
		case "status":
			return o.wrongType(o.lx.object(func(k []byte) error {
				switch string(k) {
				case "code":
					t, ok, err := o.lx.numText()
					if ok {
						switch c, _ := enumValue(t); c {
						case 1:
							sp.Status = "ok"
						case 2:
							sp.Status = "error"
						}
					}
					return err
				case "message":
					s, ok, err := o.strVal()
					if ok {
						sp.StatusMessage = string(s)
					}
					return err
				}
				return o.lx.skip()
			}), "status")
		}
		return o.lx.skip()
	})
	if errors.Is(err, errWrongType) {
		o.res.drop()
		o.res.skip(o.where(), "span: not a JSON object")
		return nil
	}
	if err != nil {
		o.res.drop()
		return err
	}
	switch {
	case bad != "":
	case !haveTrace:
		bad = `traceId "" is not 32 hex digits`
	case !haveSpan:
		bad = `spanId "" is not 16 hex digits`
	case !haveStart:
		bad = "no startTimeUnixNano"
	case !haveEnd:
		bad = "no endTimeUnixNano"
	case end < start:
		bad = fmt.Sprintf("ends (%d) before it starts (%d)", end, start)
	}
	if bad != "" {
		msg := fmt.Sprintf("span %q (trace %s, span %s): %s", truncName(sp.Name), sp.TraceID, sp.SpanID, bad)
		o.res.drop()
		o.res.skip(o.where(), msg)
		return nil
	}
	sp.Start, sp.Duration = start, time.Duration(end-start)
	sp.Service, sp.Resource, sp.Scope = svc, res, scope
	o.res.commit()
	return nil
}

// enumValue reads an OTLP enum given as a number or its proto name.
func enumValue(t []byte) (int, bool) {
	if v, ok := enumNames[string(t)]; ok {
		return int(v), true
	}
	v, err := strconv.Atoi(string(t))
	return v, err == nil
}

// fastAttr reads an attribute in the exact shape OTLP JSON writers emit,
// {"key":"K","value":{"T":V}} without blanks or escapes, when all of it is
// in the lexer's buffer; otherwise it consumes nothing and reports false,
// and the general path reads it. Attributes are most of an OTLP span's
// bytes, so this halves the reading time of a typical trace.
func (o *reader) fastAttr() (Attr, bool) {
	l := o.lx
	b := l.buf[l.pos:l.end]
	const p1, p2 = `{"key":"`, `","value":{"`
	if !bytes.HasPrefix(b, []byte(p1)) {
		return Attr{}, false
	}
	i := len(p1)
	j := bytes.IndexByte(b[i:], '"')
	if j < 0 {
		return Attr{}, false
	}
	key := b[i : i+j]
	i += j
	if bytes.IndexByte(key, '\\') >= 0 || !bytes.HasPrefix(b[i:], []byte(p2)) {
		return Attr{}, false
	}
	i += len(p2)
	j = bytes.IndexByte(b[i:], '"')
	if j < 0 || i+j+1 >= len(b) || b[i+j+1] != ':' {
		return Attr{}, false
	}
	typ := b[i : i+j]
	i += j + 2
	var v Value
	switch string(typ) {
	case "stringValue":
		if i >= len(b) || b[i] != '"' {
			return Attr{}, false
		}
		i++
		j = bytes.IndexByte(b[i:], '"')
		if j < 0 || bytes.IndexByte(b[i:i+j], '\\') >= 0 {
			return Attr{}, false
		}
		v = StringValue(o.in.b(b[i : i+j]))
		i += j + 1
	case "intValue":
		quoted := i < len(b) && b[i] == '"'
		if quoted {
			i++
		}
		k := i
		for k < len(b) && (b[k] == '-' || b[k] >= '0' && b[k] <= '9') {
			k++
		}
		n, ok := parseIntText(b[i:k])
		if !ok || k >= len(b) {
			return Attr{}, false
		}
		i = k
		if quoted {
			if b[i] != '"' {
				return Attr{}, false
			}
			i++
		}
		v = IntValue(n)
	case "doubleValue":
		k := i
		for k < len(b) && b[k] != '}' && b[k] != ',' {
			k++
		}
		t := b[i:k]
		if len(t) >= 2 && t[0] == '"' && t[len(t)-1] == '"' {
			t = t[1 : len(t)-1]
		}
		f, ok := parseFloatText(t)
		if !ok || k >= len(b) {
			return Attr{}, false
		}
		v, i = FloatValue(f), k
	case "boolValue":
		switch {
		case bytes.HasPrefix(b[i:], []byte("true")):
			v, i = BoolValue(true), i+4
		case bytes.HasPrefix(b[i:], []byte("false")):
			v, i = BoolValue(false), i+5
		default:
			return Attr{}, false
		}
	default:
		return Attr{}, false
	}
	if !bytes.HasPrefix(b[i:], []byte("}}")) {
		return Attr{}, false
	}
	a := Attr{Key: o.in.b(key), Value: v}
	l.pos += i + 2
	return a, true
}
