package traces

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"

	"go.opentelemetry.io/otel/trace"

	"github.com/tpscope/tpscope/traces/schema"
)

// PartialError reports a trace source that ends before its end or breaks:
// a file cut short (a copy or download interrupted, a full disk, a writer
// killed), a gzip stream without its end, bytes that are not the format.
// Read returns it, and no result, unless WithAllowPartial(true) asked to
// keep the complete steps read before the break (Result.Partial).
type PartialError struct {
	Source string `json:"source"` // the file or URL
	// Offset is the byte of the source's content as stored (the
	// compressed bytes of a gzip file) where it ends or breaks.
	Offset int64 `json:"offset"`
	// Line is the 1-based line of the (decompressed) JSON text where it
	// ends or breaks; 0 when the break comes before any text (a gzip
	// header).
	Line int64 `json:"line"`
	// What says, in words, what ends or breaks, where, and what is
	// missing; the message is Source + ": " + What, one line.
	What string `json:"what"`
	// Err is the cause: io.ErrUnexpectedEOF when the input ends early,
	// else what broke it (gzip.ErrChecksum, a JSON syntax error, an I/O
	// error).
	Err error `json:"-"`
}

func (e *PartialError) Error() string { return e.Source + ": " + e.What }
func (e *PartialError) Unwrap() error { return e.Err }

// WithAllowPartial says what Read does with a source that ends early or
// breaks (*PartialError). Default false: Read returns the error. True:
// Read keeps the complete steps read before the break, drops the steps the
// break cut short (see Result.keepComplete for what complete means) and
// says so in Result.Partial and in the first entry of Result.Skipped. A
// source of which no step is complete is still an error.
func WithAllowPartial(on bool) ReadOption { return func(rc *readConfig) { rc.allowPartial = on } }

// Partial reports what was kept of a source that ended early or broke,
// read with WithAllowPartial(true).
type Partial struct {
	Breaks       []*PartialError `json:"breaks"`        // one per damaged file, in reading order
	Steps        int             `json:"steps"`         // steps with spans read from the damaged files
	StepsKept    int             `json:"steps_kept"`    // the complete ones, kept
	SpansDropped int             `json:"spans_dropped"` // the spans of the others, left out
	// SpansAfter counts the Kineto kernels left out because they ran after
	// the last step read, outside every step: the start of a step the
	// break cut before it could be told a step, or work between steps.
	SpansAfter int `json:"spans_after_last_step,omitempty"`
}

// String is one line: what was kept and dropped, and the first break.
func (p *Partial) String() string {
	dropped := p.Steps - p.StepsKept
	s := fmt.Sprintf("kept %d complete %s of %d; dropped %d %s (%d %s) that the break cut short",
		p.StepsKept, plural(p.StepsKept, "step", "steps"), p.Steps, dropped, plural(dropped, "step", "steps"), p.SpansDropped, plural(p.SpansDropped, "span", "spans"))
	if p.SpansAfter > 0 {
		s += fmt.Sprintf(", and %d %s after the last step read", p.SpansAfter, plural(p.SpansAfter, "kernel", "kernels"))
	}
	if len(p.Breaks) > 0 {
		s += ": " + p.Breaks[0].Error()
	}
	if n := len(p.Breaks) - 1; n > 0 {
		s += fmt.Sprintf(" (and %d more damaged %s)", n, plural(n, "file", "files"))
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// streamBreak is a stream reader's fatal error with its place in the
// JSON text; partialError turns it into a *PartialError once the caller
// knows how the text was stored (plain or gzip).
type streamBreak struct {
	textOff int64  // offset in the text where it ends (input ended) or breaks (bad byte)
	line    int64  // line of textOff
	where   string // "inside resourceSpans[0].scopeSpans[0].spans[31]", "between documents", ...
	err     error  // the cause, without its path
}

func (b *streamBreak) Error() string {
	return fmt.Sprintf("byte %d, line %d, %s: %v", b.textOff, b.line, b.where, b.err)
}
func (b *streamBreak) Unwrap() error { return b.err }

// broke records where a stream reader stopped on err: inside the value
// the error's path names, or outside (what the caller says lies around
// it when the path is empty). The place is where the input ended for a
// cut or failed read, the bad byte for a syntax error, the next unread
// byte otherwise.
func (o *reader) broke(err error, outside string) error {
	b := &streamBreak{err: err, where: outside}
	var pe *pathError
	if errors.As(err, &pe) {
		b.err = pe.err
		if p := pe.path(); p != "" {
			b.where = "inside " + p
		}
	}
	var se *syntaxError
	var re *readError
	switch {
	case errors.As(b.err, &se):
		b.textOff = se.off
	case errors.Is(b.err, io.ErrUnexpectedEOF), errors.As(b.err, &re):
		b.textOff = o.lx.inputEnd()
	default:
		b.textOff = o.lx.offset()
	}
	b.line = o.lx.lineAt(b.textOff)
	return b
}

// countReader counts the bytes gzip takes from the file, so a cut gzip
// file is reported at the compressed byte where it ends. It is a
// flate.Reader (ReadByte), so gzip reads it without a buffer of its own.
type countReader struct {
	r *bufio.Reader
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// partialError turns a *streamBreak into the *PartialError of src; gz
// counts the compressed bytes when the text was un-gzipped (nil for plain
// text). Other errors pass as they are.
func partialError(err error, src string, gz *countReader) error {
	var b *streamBreak
	if !errors.As(err, &b) {
		return err
	}
	pe := &PartialError{Source: src, Offset: b.textOff, Line: b.line, Err: b.err}
	at := fmt.Sprintf("byte %d (line %d)", b.textOff, b.line)
	ofText := ""
	if gz != nil {
		pe.Offset = gz.n
		at = fmt.Sprintf("byte %d (line %d) of the decompressed text", b.textOff, b.line)
		ofText = " before it was compressed"
	}
	cut := errors.Is(b.err, io.ErrUnexpectedEOF)
	var re *readError
	var se *syntaxError
	switch {
	case errors.As(b.err, &re) && gz != nil:
		// The gzip stream failed: the file, not the JSON, ends or is damaged.
		pe.Err = re.err
		if cut {
			pe.What = fmt.Sprintf("gzip stream ends at byte %d before its end: the file was cut (its text ends at byte %d, line %d, %s)", gz.n, b.textOff, b.line, b.where)
		} else {
			pe.What = fmt.Sprintf("gzip stream is damaged at byte %d (%s): its text breaks at byte %d, line %d, %s", gz.n, gzipWords(re.err), b.textOff, b.line, b.where)
		}
	case errors.As(b.err, &re):
		pe.Err = re.err
		if cut {
			pe.What = fmt.Sprintf("the data ends at byte %d before its end, %s: the transfer or read was cut", b.textOff, b.where)
		} else {
			pe.What = fmt.Sprintf("reading fails at byte %d (line %d), %s: %v", b.textOff, b.line, b.where, re.err)
		}
	case cut:
		pe.What = fmt.Sprintf("JSON ends %s at %s: the file was cut%s", b.where, at, ofText)
	case errors.As(b.err, &se):
		pe.What = fmt.Sprintf("invalid JSON at %s, %s: %s", at, b.where, se.msg)
	default:
		pe.What = fmt.Sprintf("unreadable at %s, %s: %v", at, b.where, b.err)
	}
	return pe
}

// gzipWords names a gzip failure for people.
func gzipWords(err error) string {
	switch {
	case errors.Is(err, gzip.ErrChecksum):
		return "its checksum does not match its content"
	case errors.Is(err, gzip.ErrHeader):
		return "bytes after it are not gzip"
	}
	return err.Error()
}

// breakRange is a damaged file of a Result: its break and the spans read
// from it (the committed spans lo..hi-1, see Result.at).
type breakRange struct {
	err    *PartialError
	lo, hi int
}

// markCut records that the spans committed from index start on were read
// from a batch the break cut (an OTLP resourceSpans element, a Jaeger
// trace object): their traces may have had more spans in it.
func (r *Result) markCut(start int) {
	for i := start; i < r.n; i++ {
		if r.cut == nil {
			r.cut = map[trace.TraceID]bool{}
		}
		r.cut[r.at(i).TraceID] = true
	}
}

// keepComplete keeps, of the traces with spans read from a damaged file,
// the complete steps, drops the others, and reports both in r.Partial and
// the first entry of r.Skipped. It runs before finish.
//
// A step is one trace. It is complete when
//
//  1. it has its root span "step" (schema.SpanStep, no parent): the
//     runner ends the root after every span of its step, and exporters
//     write spans in the order they end (the SDK's batch processor and
//     tpscope's file exporter append each batch as it ends), so a root
//     read before the break means every span exported before it was read;
//  2. every span's parent is in the trace: a span whose parent is missing
//     lost it to the break;
//  3. none of its spans was read from the batch the break cut (the OTLP
//     resourceSpans element or the Jaeger trace object being read; see
//     markCut): the rest of that batch, with possibly more of its spans,
//     is lost. A complete step that shared that batch is dropped too: the
//     input cannot show it complete.
//
// Kineto kernels have no root or parents: the Kineto reader drops the
// steps the break cut itself (kinetoRead.dropCutSteps) and counts them in
// r.cutSteps.
func (r *Result) keepComplete(breaks []breakRange) {
	if len(breaks) == 0 {
		return
	}
	p := &Partial{Steps: r.cutSteps.steps, StepsKept: r.cutSteps.kept, SpansDropped: r.cutSteps.spans, SpansAfter: r.cutSteps.after}
	touched := map[trace.TraceID]bool{}
	for _, b := range breaks {
		p.Breaks = append(p.Breaks, b.err)
		for i := b.lo; i < b.hi; i++ {
			if s := r.at(i); !s.kernel && !s.drop {
				touched[s.TraceID] = true
			}
		}
	}
	type step struct {
		root  bool
		ids   map[trace.SpanID]bool
		spans []int
	}
	steps := map[trace.TraceID]*step{}
	var order []trace.TraceID // reading order, so the counts do not depend on map order
	for i := 0; i < r.n; i++ {
		s := r.at(i)
		if s.kernel || s.drop || !touched[s.TraceID] {
			continue
		}
		st := steps[s.TraceID]
		if st == nil {
			st = &step{ids: map[trace.SpanID]bool{}}
			steps[s.TraceID] = st
			order = append(order, s.TraceID)
		}
		st.ids[s.SpanID] = true
		st.spans = append(st.spans, i)
		if s.Name == schema.SpanStep && s.IsRoot() {
			st.root = true
		}
	}
	for _, id := range order {
		st := steps[id]
		complete := st.root && !r.cut[id]
		for _, i := range st.spans {
			if s := r.at(i); complete && !s.IsRoot() && !st.ids[s.ParentID] {
				complete = false
			}
		}
		p.Steps++
		if complete {
			p.StepsKept++
			continue
		}
		for _, i := range st.spans {
			r.at(i).drop = true
		}
		p.SpansDropped += len(st.spans)
	}
	r.Partial = p
	b := breaks[0].err
	sk := Skip{Where: fmt.Sprintf("%s:byte %d", b.Source, b.Offset), Reason: "partial input: " + p.String()}
	r.Skipped = append([]Skip{sk}, r.Skipped...)
	if len(r.Skipped) > MaxSkipDetails {
		r.Skipped = r.Skipped[:MaxSkipDetails]
	}
	r.SkippedTotal++
}

// partialSteps is what the Kineto reader kept and dropped of the files a
// break cut.
type partialSteps struct{ steps, kept, spans, after int }

// cutBetweenBatches finds the steps of tpscope's own traces that lost
// spans although every file read whole: a file that ends between two
// batches (a JSON-lines file cut after a complete line, a writer stopped
// before the step's last batch, a collector's file read before the batch
// with the step's root arrived) is a sequence of complete documents, yet
// its last step has op spans whose rank span and root "step" never came.
// A span of tpscope's schema (an op or rank span: an op ID or a rank)
// whose parent is not in its trace is the sign: tpscope exports every
// such span's parent. Spans of the files that broke (breaks) are left to
// keepComplete. It returns the break to report, over the spans from the
// first such step's to the last one's, and false when there is none.
func (r *Result) cutBetweenBatches(breaks []breakRange) (breakRange, bool) {
	inBreak := func(i int) bool {
		for _, b := range breaks {
			if i >= b.lo && i < b.hi {
				return true
			}
		}
		return false
	}
	// The parents the schema's spans name (a few per step: its ranks'),
	// then which of them were read: no set of every span's ID.
	type ref struct {
		tr trace.TraceID
		id trace.SpanID
	}
	schemaSpan := func(i int) (*Span, bool) {
		s := r.at(i)
		return s, !s.kernel && !s.drop && !inBreak(i) && (s.OpID != "" || s.Rank >= 0) && !s.IsRoot()
	}
	read := map[ref]bool{}
	for i := 0; i < r.n; i++ {
		if s, ok := schemaSpan(i); ok {
			read[ref{s.TraceID, s.ParentID}] = false
		}
	}
	for i := 0; i < r.n; i++ {
		s := r.at(i)
		if _, ok := read[ref{s.TraceID, s.SpanID}]; ok && !s.drop && !inBreak(i) {
			read[ref{s.TraceID, s.SpanID}] = true
		}
	}
	lo, hi := -1, -1
	lost := map[trace.TraceID]int{} // spans of each step that lost their parent
	var order []trace.TraceID
	for i := 0; i < r.n; i++ {
		s, ok := schemaSpan(i)
		if !ok || read[ref{s.TraceID, s.ParentID}] {
			continue
		}
		if lo < 0 {
			lo = i
		}
		hi = i + 1
		if _, ok := lost[s.TraceID]; !ok {
			order = append(order, s.TraceID)
		}
		lost[s.TraceID]++
	}
	if lo < 0 {
		return breakRange{}, false
	}
	file := r.fileOf(int32(lo))
	var size int64
	if st, err := os.Stat(file); err == nil {
		size = st.Size()
	}
	what := fmt.Sprintf("the file ends between a step's batches, at byte %d: %d %s of trace %s %s no rank or step span (%d %s so cut): it was cut, or read before its writer finished",
		size, lost[order[0]], plural(lost[order[0]], "span", "spans"), order[0], plural(lost[order[0]], "has", "have"), len(order), plural(len(order), "step", "steps"))
	return breakRange{err: &PartialError{Source: file, Offset: size, What: what, Err: io.ErrUnexpectedEOF}, lo: lo, hi: hi}, true
}
