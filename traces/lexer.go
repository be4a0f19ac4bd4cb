package traces

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// lexer is a streaming JSON tokenizer for the readers' hot path. It keeps
// a window of the input in buf and hands out strings and numbers as byte
// slices into it, valid until the next lexer call, so reading a span
// allocates only what the span keeps. encoding/json's reflection-based
// Decode costs ~25 µs of CPU per OTLP span with ten attributes; this reads
// the same span in a few µs (BenchmarkRead).
//
// It is lenient where leniency costs nothing: raw control characters in
// strings are accepted.
//
// Errors: a *syntaxError (bad JSON, fatal: the stream cannot be resumed),
// io.ErrUnexpectedEOF (input ends inside a value), or a *readError from
// the underlying reader. Semantic problems (a string where a number
// belongs) are the parser's business: it skips the value and goes on.
// A fatal error leaving a container is wrapped in a *pathError that says
// where in the document it happened (resourceSpans[0].scopeSpans[0].spans[31]),
// so a cut or damaged file is reported by place, not by byte alone.
type lexer struct {
	r        io.Reader
	buf      []byte
	pos, end int
	off      int64 // input offset of buf[0]
	lines    int64 // newlines in the input before buf[0]
	rerr     error // sticky error from r (io.EOF at the end)
	scratch  []byte
	// depth is the number of open containers; keys[d] holds the key of
	// the member being read in the object at depth d+1 (empty between
	// members), kept per depth so that an error leaving a nested value
	// still finds the key of every object around it.
	depth int
	keys  [][]byte
}

type syntaxError struct {
	off int64
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("invalid JSON at byte %d: %s", e.off, e.msg) }

func newLexer(r io.Reader) *lexer {
	return &lexer{r: r, buf: make([]byte, 1<<18)}
}

// offset is the input offset of the next unread byte.
func (l *lexer) offset() int64 { return l.off + int64(l.pos) }

// inputEnd is the offset just past the last byte read from the input: where
// the input ended, once a read has failed or found its end.
func (l *lexer) inputEnd() int64 { return l.off + int64(l.end) }

// lineAt is the 1-based line of input offset off, which must lie in the
// window the lexer still holds (buf[0] .. buf[end]); an offset before it
// gets the window's first line.
func (l *lexer) lineAt(off int64) int64 {
	i := min(max(off-l.off, 0), int64(l.end))
	return 1 + l.lines + int64(bytes.Count(l.buf[:i], []byte{'\n'}))
}

func (l *lexer) errorf(format string, a ...any) error {
	return &syntaxError{off: l.offset(), msg: fmt.Sprintf(format, a...)}
}

// fill reads more input, keeping buf[keep:end]; it moves the kept bytes to
// the front (so slices handed out earlier become invalid) and grows buf
// when the kept part fills it. It returns false at the end of input.
func (l *lexer) fill(keep int) bool {
	if l.rerr != nil {
		return false
	}
	if keep > 0 {
		// Count the lines of what is let go: bytes.Count is vectorized,
		// a small cost next to lexing the same bytes, and a damaged file
		// is then reported by line as well as by byte.
		l.lines += int64(bytes.Count(l.buf[:keep], []byte{'\n'}))
		n := copy(l.buf, l.buf[keep:l.end])
		l.off += int64(keep)
		l.pos -= keep
		l.end = n
	}
	if l.end == len(l.buf) {
		nb := make([]byte, 2*len(l.buf))
		copy(nb, l.buf[:l.end])
		l.buf = nb
	}
	for tries := 0; tries < 100; tries++ {
		n, err := l.r.Read(l.buf[l.end:])
		l.end += n
		if err != nil {
			if err != io.EOF {
				err = &readError{err}
			}
			l.rerr = err
			return n > 0
		}
		if n > 0 {
			return true
		}
	}
	l.rerr = &readError{io.ErrNoProgress}
	return false
}

// eofErr is the error for input that ends where more was expected.
func (l *lexer) eofErr() error {
	if l.rerr != nil && l.rerr != io.EOF {
		return l.rerr
	}
	return io.ErrUnexpectedEOF
}

// peek skips whitespace and returns the next byte without consuming it;
// io.EOF at a clean end of input.
func (l *lexer) peek() (byte, error) {
	for {
		for l.pos < l.end {
			c := l.buf[l.pos]
			if c == ' ' || c == '\n' || c == '\r' || c == '\t' {
				l.pos++
				continue
			}
			return c, nil
		}
		if !l.fill(l.pos) {
			if l.rerr == io.EOF {
				return 0, io.EOF
			}
			return 0, l.rerr
		}
	}
}

// next peeks a byte where the value must go on: end of input is an error.
// next is small enough to inline: the common case, a non-blank byte in
// the buffer, costs a compare; whitespace and refills go to nextSlow.
func (l *lexer) next() (byte, error) {
	if l.pos < l.end {
		if c := l.buf[l.pos]; c > ' ' {
			return c, nil
		}
	}
	return l.nextSlow()
}

func (l *lexer) nextSlow() (byte, error) {
	c, err := l.peek()
	if err == io.EOF {
		return 0, io.ErrUnexpectedEOF
	}
	return c, err
}

func (l *lexer) expect(want byte) error {
	if l.pos < l.end && l.buf[l.pos] == want {
		l.pos++
		return nil
	}
	c, err := l.next()
	if err != nil {
		return err
	}
	if c != want {
		return l.errorf("want %q, got %q", want, c)
	}
	l.pos++
	return nil
}

// str reads a string (the next value must be one) and returns its
// unescaped bytes.
func (l *lexer) str() ([]byte, error) {
	if err := l.expect('"'); err != nil {
		return nil, err
	}
	start := l.pos
	for {
		// Find the closing quote. Most strings are short and unescaped: a
		// plain loop beats vectorized search there; a backslash sends the
		// string to the escape-aware path.
		i := l.pos
		for i < l.end {
			c := l.buf[i]
			if c == '"' {
				l.pos = i + 1
				return l.buf[start:i], nil
			}
			if c == '\\' {
				break
			}
			i++
		}
		if i < l.end { // escaped string: find the unescaped closing quote
			for i < l.end {
				c := l.buf[i]
				if c == '\\' {
					i += 2
					continue
				}
				if c == '"' {
					l.pos = i + 1
					return l.unescape(l.buf[start:i])
				}
				i++
			}
		}
		// Need more input; keep the string's bytes read so far.
		l.pos = start
		if !l.fill(start) {
			return nil, l.eofErr()
		}
		start = l.pos
	}
}

// unescape decodes JSON escapes into l.scratch.
func (l *lexer) unescape(s []byte) ([]byte, error) {
	out := l.scratch[:0]
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			out = append(out, c)
			continue
		}
		i++
		if i >= len(s) {
			return nil, l.errorf("bad escape")
		}
		switch s[i] {
		case '"', '\\', '/':
			out = append(out, s[i])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, n := decodeU(s[i+1:])
			if n == 0 {
				return nil, l.errorf("bad \\u escape")
			}
			i += n
			out = utf8.AppendRune(out, r)
		default:
			return nil, l.errorf("bad escape \\%c", s[i])
		}
	}
	l.scratch = out
	return out, nil
}

// decodeU decodes XXXX (and a following \uXXXX low surrogate) after "\u";
// it returns the rune and the bytes consumed (0 if malformed).
func decodeU(s []byte) (rune, int) {
	hex4 := func(b []byte) (rune, bool) {
		if len(b) < 4 {
			return 0, false
		}
		var r rune
		for _, c := range b[:4] {
			switch {
			case c >= '0' && c <= '9':
				r = r<<4 | rune(c-'0')
			case c >= 'a' && c <= 'f':
				r = r<<4 | rune(c-'a'+10)
			case c >= 'A' && c <= 'F':
				r = r<<4 | rune(c-'A'+10)
			default:
				return 0, false
			}
		}
		return r, true
	}
	r, ok := hex4(s)
	if !ok {
		return 0, 0
	}
	if r >= 0xD800 && r < 0xDC00 && len(s) >= 10 && s[4] == '\\' && s[5] == 'u' {
		if r2, ok := hex4(s[6:]); ok && r2 >= 0xDC00 && r2 < 0xE000 {
			return (r-0xD800)<<10 | (r2 - 0xDC00) + 0x10000, 10
		}
	}
	if r >= 0xD800 && r < 0xE000 {
		return utf8.RuneError, 4
	}
	return r, 4
}

// scalar reads a number or literal (true, false, null) and returns its text.
func (l *lexer) scalar() ([]byte, error) {
	if _, err := l.next(); err != nil {
		return nil, err
	}
	for {
		i := l.pos
		for i < l.end {
			c := l.buf[i]
			if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == ':' {
				break
			}
			if c == '"' || c == '{' || c == '[' {
				return nil, l.errorf("unexpected %q", c)
			}
			i++
		}
		if i < l.end || l.rerr != nil {
			if i == l.end && l.rerr != nil && l.rerr != io.EOF {
				return nil, l.rerr
			}
			s := l.buf[l.pos:i]
			l.pos = i
			if len(s) == 0 {
				return nil, l.errorf("want a value")
			}
			if !validScalar(s) {
				return nil, l.errorf("bad value %q", truncBytes(s))
			}
			return s, nil
		}
		if !l.fill(l.pos) && l.rerr != io.EOF {
			return nil, l.rerr
		}
	}
}

func truncBytes(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

func validScalar(s []byte) bool {
	switch string(s) {
	case "true", "false", "null":
		return true
	}
	c := s[0]
	if c != '-' && (c < '0' || c > '9') {
		return false
	}
	for _, c := range s[1:] {
		if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
			return false
		}
	}
	return true
}

// isNull consumes a null if one is next.
func (l *lexer) isNull() (bool, error) {
	c, err := l.next()
	if err != nil || c != 'n' {
		return false, err
	}
	s, err := l.scalar()
	if err != nil {
		return false, err
	}
	if string(s) != "null" {
		return false, l.errorf("bad literal %q", truncBytes(s))
	}
	return true, nil
}

// object iterates the members of an object: fn gets each key (valid only
// until fn calls the lexer) and must consume the value. A null is an empty
// object; another kind of value is skipped and reported as errWrongType.
func (l *lexer) object(fn func(key []byte) error) error {
	return l.container('{', '}', "object", func() error {
		d := l.depth - 1
		l.keys[d] = l.keys[d][:0]
		key, err := l.str()
		if err != nil {
			return err
		}
		// expect may refill the buffer, which moves the bytes key points to.
		l.keys[d] = append(l.keys[d], key...)
		if err := l.expect(':'); err != nil {
			l.keys[d] = l.keys[d][:0] // not inside the member's value yet
			return err
		}
		return fn(l.keys[d])
	})
}

// errWrongType reports a value of the wrong JSON kind, already skipped.
var errWrongType = errors.New("value of the wrong JSON type")

// array iterates the elements of an array; fn must consume each. A null is
// an empty array; another kind of value is skipped and reported as errWrongType.
func (l *lexer) array(fn func() error) error {
	return l.container('[', ']', "array", fn)
}

// container walks the comma-separated entries between open and close,
// calling entry to consume each one; it is the loop object and array
// share. A null is an empty container; another kind of value is skipped and
// reported as errWrongType. kind names the container in errors.
func (l *lexer) container(open, close byte, kind string, entry func() error) error {
	c, err := l.next()
	if err != nil {
		return err
	}
	if c != open {
		if err := l.skip(); err != nil {
			return err
		}
		if c == 'n' {
			return nil
		}
		return errWrongType
	}
	l.pos++
	if l.depth == len(l.keys) {
		l.keys = append(l.keys, nil)
	}
	l.depth++
	for n := 0; ; n++ {
		c, err := l.next()
		if err != nil {
			return l.leave(err, open, n, false)
		}
		if c == close {
			l.pos++
			l.depth--
			return nil
		}
		if n > 0 {
			if c != ',' {
				return l.leave(l.errorf("want ',' or '%c' in %s, got %q", close, kind, c), open, n, false)
			}
			l.pos++
		}
		if err := entry(); err != nil {
			return l.leave(err, open, n, true)
		}
	}
}

// pathError is a fatal error inside a JSON document with the place it
// happened: segs, innermost first, are ".key" for an object member and
// "[i]" for an array element.
type pathError struct {
	segs []string
	err  error
}

func (e *pathError) Error() string { return e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// path is the place as one string, outermost first:
// resourceSpans[0].scopeSpans[0].spans[31] ("" at the top level).
func (e *pathError) path() string {
	var b strings.Builder
	for i := len(e.segs) - 1; i >= 0; i-- {
		b.WriteString(e.segs[i])
	}
	return strings.TrimPrefix(b.String(), ".")
}

// leave closes the container at l.depth on err and adds its place to the
// error: the element or member being read when inEntry (the error came
// from inside it), nothing when it came between entries. errWrongType is
// the readers' signal to skip a value, not a failure: it passes as is.
func (l *lexer) leave(err error, open byte, n int, inEntry bool) error {
	l.depth--
	if errors.Is(err, errWrongType) {
		return err
	}
	seg := ""
	switch {
	case !inEntry:
	case open == '[':
		seg = "[" + strconv.Itoa(n) + "]"
	case len(l.keys[l.depth]) > 0:
		seg = "." + string(l.keys[l.depth])
	}
	var pe *pathError
	if !errors.As(err, &pe) {
		pe = &pathError{err: err}
		err = pe
	}
	if seg != "" {
		pe.segs = append(pe.segs, seg)
	}
	return err
}

// skip consumes one value of any kind and size.
func (l *lexer) skip() error {
	c, err := l.next()
	if err != nil {
		return err
	}
	switch c {
	case '"':
		_, err := l.str()
		return err
	case '{':
		return l.object(func([]byte) error { return l.skip() })
	case '[':
		return l.array(l.skip)
	}
	_, err = l.scalar()
	return err
}

// raw consumes one value and appends its compact JSON text to dst.
func (l *lexer) raw(dst []byte) ([]byte, error) {
	c, err := l.next()
	if err != nil {
		return dst, err
	}
	switch c {
	case '"':
		s, err := l.str()
		if err != nil {
			return dst, err
		}
		b, _ := json.Marshal(string(s))
		return append(dst, b...), nil
	case '{':
		dst = append(dst, '{')
		n := 0
		err := l.object(func(key []byte) error {
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
			b, _ := json.Marshal(string(key))
			dst = append(append(dst, b...), ':')
			var err error
			dst, err = l.raw(dst)
			return err
		})
		return append(dst, '}'), err
	case '[':
		dst = append(dst, '[')
		n := 0
		err := l.array(func() error {
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
			var err error
			dst, err = l.raw(dst)
			return err
		})
		return append(dst, ']'), err
	}
	s, err := l.scalar()
	return append(dst, s...), err
}

// value kinds for typed reads.
func (l *lexer) kind() (byte, error) {
	c, err := l.next()
	if err != nil {
		return 0, err
	}
	switch {
	case c == '"':
		return 's', nil
	case c == '{':
		return 'o', nil
	case c == '[':
		return 'a', nil
	case c == 't' || c == 'f':
		return 'b', nil
	case c == 'n':
		return 'n', nil
	}
	return '0', nil
}

// numText reads a number given as a JSON number or a string (proto3 JSON
// writes 64-bit integers as strings); wrong kinds are skipped, ok=false.
func (l *lexer) numText() (text []byte, ok bool, err error) {
	k, err := l.kind()
	if err != nil {
		return nil, false, err
	}
	switch k {
	case 's':
		s, err := l.str()
		return s, err == nil, err
	case '0':
		s, err := l.scalar()
		return s, err == nil, err
	}
	return nil, false, l.skip()
}
