package traces

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/tpscope/tpscope/traces/schema"
)

// readJaegerV1Stream reads {"data":[trace...]} (several documents allowed)
// span by span.
func readJaegerV1Stream(r io.Reader, res *Result, src string) error {
	o := newReader(r, res, src)
	return o.documents(`{"data":[...]} (Jaeger JSON)`, `Jaeger JSON {"data":[...]}`, o.jaegerDocument)
}

// jaegerDocument reads one {"data":[trace...],"errors":[...]} document.
func (o *reader) jaegerDocument() error {
	res, src := o.res, o.src
	return o.wrongType(o.lx.object(func(key []byte) error {
		switch string(key) {
		case "data":
			return o.wrongType(o.lx.array(o.jaegerTrace), "data")
		case "errors":
			return o.wrongType(o.lx.array(func() error {
				var code int64
				msg, tid := "", ""
				err := o.lx.object(func(k []byte) error {
					switch string(k) {
					case "code":
						v, _, err := o.intVal()
						code = v
						return err
					case "msg", "traceID":
						isMsg := k[0] == 'm' // k is only valid until the next lexer call
						s, ok, err := o.strVal()
						if ok && isMsg {
							msg = string(s)
						} else if ok {
							tid = string(s)
						}
						return err
					}
					return o.lx.skip()
				})
				if err == nil {
					res.skip(src, fmt.Sprintf("Jaeger reported error %d for trace %s: %s", code, tid, msg))
				}
				return o.wrongType(err, "errors[]")
			}), "errors")
		}
		return o.lx.skip()
	}), "document")
}

// jaegerTag is a tag whose value is kept as text until its type is known
// (JSON does not fix the order of "type" and "value").
type jaegerTag struct {
	key   string
	typ   string
	text  []byte // string contents, or the number/literal text
	isStr bool
}

// jaegerTags reads [{"key","type","value"}...] into tags (reused).
func (o *reader) jaegerTags(tags []jaegerTag) ([]jaegerTag, error) {
	tags = tags[:0]
	err := o.lx.array(func() error {
		t := jaegerTag{}
		var buf []byte
		if len(tags) < cap(tags) {
			buf = tags[:len(tags)+1][len(tags)].text[:0]
		}
		err := o.lx.object(func(k []byte) error {
			switch string(k) {
			case "key":
				s, ok, err := o.strVal()
				if ok {
					t.key = o.in.b(s)
				}
				return err
			case "type":
				s, ok, err := o.strVal()
				if ok {
					t.typ = o.in.b(s)
				}
				return err
			case "value":
				kd, err := o.lx.kind()
				if err != nil {
					return err
				}
				switch kd {
				case 's':
					s, err := o.lx.str()
					buf, t.isStr = append(buf, s...), true
					return err
				case '0', 'b', 'n':
					s, err := o.lx.scalar()
					buf = append(buf, s...)
					return err
				}
				b, err := o.lx.raw(buf)
				buf = b
				return err
			}
			return o.lx.skip()
		})
		t.text = buf
		if err == nil {
			tags = append(tags, t)
		}
		if errors.Is(err, errWrongType) {
			return nil
		}
		return err
	})
	if errors.Is(err, errWrongType) {
		err = nil
	}
	return tags, err
}

func (o *reader) jaegerValue(t *jaegerTag) (Value, error) {
	switch strings.ToLower(t.typ) {
	case "string", "":
		if !t.isStr {
			return Value{}, fmt.Errorf("tag %q: want a string value, got %s", t.key, truncBytes(t.text))
		}
		return StringValue(o.in.b(t.text)), nil
	case "int64":
		i, err := strconv.ParseInt(string(t.text), 10, 64)
		if err != nil {
			return Value{}, fmt.Errorf("tag %q: want an int64 value, got %q", t.key, truncBytes(t.text))
		}
		return IntValue(i), nil
	case "float64":
		f, ok := parseFloatText(t.text)
		if !ok {
			return Value{}, fmt.Errorf("tag %q: want a float64 value, got %q", t.key, truncBytes(t.text))
		}
		return FloatValue(f), nil
	case "bool":
		if t.isStr || (string(t.text) != "true" && string(t.text) != "false") {
			return Value{}, fmt.Errorf("tag %q: want a bool value, got %q", t.key, truncBytes(t.text))
		}
		return BoolValue(t.text[0] == 't'), nil
	case "binary":
		return StringValue(string(t.text)), nil
	}
	return Value{}, fmt.Errorf("tag %q: unknown type %q", t.key, t.typ)
}

// jaegerProcess reads {"serviceName","tags"} into a Resource.
func (o *reader) jaegerProcess() (*Resource, error) {
	var tags []jaegerTag
	svc := ""
	err := o.lx.object(func(k []byte) error {
		switch string(k) {
		case "serviceName":
			s, ok, err := o.strVal()
			if ok {
				svc = o.in.b(s)
			}
			return err
		case "tags":
			var err error
			tags, err = o.jaegerTags(nil)
			return err
		}
		return o.lx.skip()
	})
	if err != nil {
		return nil, err
	}
	o.tmp = append(o.tmp[:0], Attr{Key: string(schema.ResServiceName), Value: StringValue(svc)})
	for i := range tags {
		v, err := o.jaegerValue(&tags[i])
		if err != nil {
			o.res.skip(o.where(), "process "+err.Error())
			continue
		}
		o.tmp = append(o.tmp, Attr{Key: tags[i].key, Value: v})
	}
	r := &Resource{Attrs: append([]Attr(nil), o.tmp...)}
	sortAttrs(r.Attrs)
	return r, nil
}

// jaegerTrace reads one trace object; spans may come before processes.
func (o *reader) jaegerTrace() error {
	start := o.res.count()
	var pids []string
	var inline []*Resource
	procs := map[string]*Resource{}
	var tags []jaegerTag
	err := o.lx.object(func(key []byte) error {
		switch string(key) {
		case "spans":
			return o.wrongType(o.lx.array(func() error {
				var pid string
				var proc *Resource
				var err error
				tags, pid, proc, err = o.jaegerSpan(tags)
				if err == nil && o.res.count() > start+len(pids) {
					pids = append(pids, pid)
					inline = append(inline, proc)
				}
				return err
			}), "spans")
		case "processes":
			return o.wrongType(o.lx.object(func(k []byte) error {
				id := string(k)
				r, err := o.jaegerProcess()
				if err == nil {
					procs[id] = r
				}
				return o.wrongType(err, "processes."+id)
			}), "processes")
		}
		return o.lx.skip()
	})
	if err != nil && !errors.Is(err, errWrongType) {
		o.res.markCut(start) // the rest of this trace object is lost
	}
	// Attach processes to the spans read (also when the trace is cut short).
	for i, pid := range pids {
		sp := o.res.at(start + i)
		r := procs[pid]
		if r == nil {
			r = inline[i]
		}
		if r == nil {
			o.res.skip(o.where(), fmt.Sprintf("span %s: processID %q not in the trace's processes; service unknown", sp.SpanID, pid))
			continue
		}
		sp.Resource = r
		if v, ok := r.Attr(string(schema.ResServiceName)); ok {
			sp.Service = v.String()
		}
	}
	return o.wrongType(err, "data[]")
}

// jaegerSpan reads one v1 span and adds it (or a skip entry). It returns
// the span's processID and inline process, if any.
func (o *reader) jaegerSpan(tags []jaegerTag) ([]jaegerTag, string, *Resource, error) {
	sp := newSpan()
	// The parent: the parentSpanID field when given, else the first
	// CHILD_OF reference, else the first FOLLOWS_FROM one (OpenTracing: a
	// CHILD_OF reference names the parent, in whatever order the
	// references come).
	var traceID, spanID, parent, childOf, followsFrom, opName, pid string
	var startUs, durUs int64
	haveStart, haveDur := false, false
	var proc *Resource
	err := o.lx.object(func(k []byte) error {
		switch string(k) {
		case "traceID", "spanID", "parentSpanID", "operationName", "processID":
			c0, c1 := k[0], k[1] // k is only valid until the next lexer call
			s, ok, err := o.strVal()
			if ok {
				switch c0 {
				case 't':
					traceID = string(s)
				case 's':
					spanID = string(s)
				case 'p':
					if c1 == 'a' {
						parent = string(s)
					} else {
						pid = o.in.b(s)
					}
				case 'o':
					opName = o.in.b(s)
				}
			}
			return err
		case "references":
			return o.wrongType(o.lx.array(func() error {
				var typ, id string
				err := o.lx.object(func(k []byte) error {
					switch string(k) {
					case "refType", "spanID":
						isType := k[0] == 'r'
						s, ok, err := o.strVal()
						if ok && isType {
							typ = string(s)
						} else if ok {
							id = string(s)
						}
						return err
					}
					return o.lx.skip()
				})
				if err == nil && typ == "CHILD_OF" && childOf == "" {
					childOf = id
				} else if err == nil && typ == "FOLLOWS_FROM" && followsFrom == "" {
					followsFrom = id
				}
				return o.wrongType(err, "references[]")
			}), "references")
		case "startTime", "duration":
			isStart := k[0] == 's'
			v, ok, err := o.intVal()
			if isStart {
				startUs, haveStart = v, ok
			} else {
				durUs, haveDur = v, ok
			}
			return err
		case "tags":
			var err error
			tags, err = o.jaegerTags(tags)
			return err
		case "process":
			r, err := o.jaegerProcess()
			proc = r
			return o.wrongType(err, "process")
		}
		return o.lx.skip()
	})
	if errors.Is(err, errWrongType) {
		o.res.skip(o.where(), "span: not a JSON object")
		return tags, "", nil, nil
	}
	if err != nil {
		return tags, "", nil, err
	}
	if parent == "" {
		parent = childOf
	}
	if parent == "" {
		parent = followsFrom
	}
	bad := ""
	switch {
	case !decodeJaegerID(traceID, sp.TraceID[:]) || !sp.TraceID.IsValid():
		bad = fmt.Sprintf("traceID %q is not hex", traceID)
	case !decodeJaegerID(spanID, sp.SpanID[:]) || !sp.SpanID.IsValid():
		bad = fmt.Sprintf("spanID %q is not hex", spanID)
	case parent != "" && parent != "0" && !decodeJaegerID(parent, sp.ParentID[:]):
		bad = fmt.Sprintf("parent spanID %q is not hex", parent)
	case !haveStart || !haveDur || durUs < 0 || durUs > math.MaxInt64/1000 || startUs > math.MaxInt64/1000 || startUs < 0:
		bad = "startTime/duration are not whole microseconds"
	}
	if bad != "" {
		o.res.skip(o.where(), fmt.Sprintf("span %q in trace %s: %s", truncName(opName), traceID, bad))
		return tags, "", nil, nil
	}
	sp.Name = opName
	sp.Start = startUs * 1000
	sp.Duration = time.Duration(durUs) * time.Microsecond
	o.tmp = o.tmp[:0]
	isErr := false
	for i := range tags {
		t := &tags[i]
		v, err := o.jaegerValue(t)
		if err != nil {
			o.res.skip(o.where(), fmt.Sprintf("span %s: %v", sp.SpanID, err))
			continue
		}
		switch t.key {
		case jaegerTagScopeName:
			sp.Scope = v.String()
			continue
		case jaegerTagScopeVersion:
			continue
		case jaegerTagSpanKind:
			if k := v.String(); k != "unspecified" {
				sp.SpanKind = k
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
		if t.key == string(schema.AttrOptions) && v.typ == TypeString && strings.HasPrefix(v.str, "[") {
			// Jaeger v1 writes array attributes as JSON text; the schema
			// says this one is a []string: restore the array so both APIs agree.
			var names []string
			if json.Unmarshal([]byte(v.str), &names) == nil {
				v = ArrayValue(canonicalJSON([]byte(v.str)))
			}
		}
		o.tmp = append(o.tmp, Attr{Key: t.key, Value: v})
	}
	sp.Attrs = o.keep(o.tmp)
	if isErr && sp.Status == "" {
		sp.Status = "error"
	}
	o.res.add(sp)
	return tags, pid, proc, nil
}
