package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Report is everything the page shows, in order.
type Report struct {
	Title    string    `json:"title"`
	Subtitle string    `json:"subtitle,omitempty"`
	Sections []Section `json:"sections"`
}

// Section is a heading with any of: text lines, a timeline, a bar chart, a
// scatter chart, a table (drawn in that order).
type Section struct {
	Title    string    `json:"title"`
	Lines    []string  `json:"lines,omitempty"`
	Timeline *Timeline `json:"timeline,omitempty"`
	Bars     *Bars     `json:"bars,omitempty"`
	Scatter  *Scatter  `json:"scatter,omitempty"`
	Table    *Table    `json:"table,omitempty"`
}

// Scatter is an XY chart on linear axes: series of points (each point's
// hover label alongside), a series optionally joined in its order (a
// Pareto front), reference lines across the plot (an SLO), and marked
// points (the configuration chosen). Axes start at 0 and end past the
// largest value, so no point or line leaves them.
type Scatter struct {
	XLabel string          `json:"x_label"`
	YLabel string          `json:"y_label"`
	Series []ScatterSeries `json:"series"`
	// VLines are vertical lines at x = At, HLines horizontal ones at y = At.
	VLines []RefLine `json:"v_lines,omitempty"`
	HLines []RefLine `json:"h_lines,omitempty"`
	Marks  []Mark    `json:"marks,omitempty"`
}

// ScatterSeries is one legend entry: points [x, y], their hover labels
// (empty or one per point), drawn as dots, joined by a line when Line,
// muted when Faint (points that miss an objective).
type ScatterSeries struct {
	Name   string       `json:"name"`
	Points [][2]float64 `json:"points"`
	Labels []string     `json:"labels,omitempty"`
	Line   bool         `json:"line,omitempty"`
	Faint  bool         `json:"faint,omitempty"`
}

// RefLine is a labelled reference line.
type RefLine struct {
	At    float64 `json:"at"`
	Label string  `json:"label"`
}

// Mark is a labelled point drawn over the series.
type Mark struct {
	X     float64 `json:"x"`
	Y     float64 `json:"y"`
	Label string  `json:"label"`
}

// Timeline is one step drawn per rank: lanes of boxes over a shared time
// axis in microseconds from the step's start.
type Timeline struct {
	// Kinds lists the op kinds in legend order; a box's colour is that of
	// its op's kind.
	Kinds []string `json:"kinds"`
	// Ops describes each distinct op once (ID, kind, hover fields); boxes
	// refer to it by index, so eight ranks of one symmetric prediction
	// share one description per op.
	Ops   []Op   `json:"ops"`
	Lanes []Lane `json:"lanes"`
	// Links join the boxes of one collective across the lanes of its
	// group.
	Links []Link `json:"links,omitempty"`
	// EndUs is the initial view's right edge (the longest lane's end).
	EndUs float64 `json:"end_us"`
}

// Op is the description of one op shown on hover.
type Op struct {
	ID     string  `json:"id"`
	Kind   string  `json:"kind"`
	Fields []Field `json:"fields,omitempty"`
}

// Field is one labelled, preformatted value ("bound", "memory").
type Field struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Lane is the boxes of one rank from one source.
type Lane struct {
	Label    string `json:"label"`
	Rank     int    `json:"rank"`
	Measured bool   `json:"measured"`
	// Boxes sorted by StartUs.
	Boxes []Box `json:"boxes"`
}

// Box is one op in a lane. JSON: [op, start_us, dur_us] with a fourth
// element 1 when Critical (compact: a step of 8 ranks has ~11,000 boxes).
type Box struct {
	Op       int     // index into Timeline.Ops
	StartUs  float64 // from the step's start
	DurUs    float64 // 0 for an op that did not run (drawn as a tick)
	Critical bool    // on the step's critical path
}

// Link is one collective across lanes: the boxes of its group's members.
type Link struct {
	Boxes []BoxRef `json:"boxes"`
}

// BoxRef names a box by lane and position.
type BoxRef struct {
	Lane int `json:"lane"`
	Box  int `json:"box"`
}

// Bars is a horizontal bar chart: one row per label, one bar per series.
type Bars struct {
	Unit   string   `json:"unit"`   // shown on the axis ("us", "x")
	Series []string `json:"series"` // legend, one per value of a row
	Rows   []BarRow `json:"rows"`
	// RefLine, when > 0, draws a dashed line at that value (1 for a
	// speedup).
	RefLine float64 `json:"ref_line,omitempty"`
}

// BarRow is one label's values, one per series.
type BarRow struct {
	Label  string     `json:"label"`
	Values []BarValue `json:"values"`
	Note   string     `json:"note,omitempty"` // shown after the bars ("-58.0 %")
}

// BarValue is one bar; Lo and Hi, when Hi > 0, draw its spread.
type BarValue struct {
	V       float64 `json:"v"`
	Lo      float64 `json:"lo,omitempty"`
	Hi      float64 `json:"hi,omitempty"`
	Missing bool    `json:"missing,omitempty"` // no value for this series
}

// Table is rows of preformatted cells under named columns.
type Table struct {
	Columns []Column `json:"columns"`
	Rows    []Row    `json:"rows"`
}

// Column is a table column; Numeric columns align right and sort by the
// number their cells start with.
type Column struct {
	Name    string `json:"name"`
	Numeric bool   `json:"numeric,omitempty"`
}

// Row is one table row; Tone colours it ("good", "bad", "warn" or "").
type Row struct {
	Cells []string `json:"cells"`
	Tone  string   `json:"tone,omitempty"`
}

// MarshalJSON writes the box as [op, start_us, dur_us(, 1)] with times
// rounded to nanoseconds.
func (b Box) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(32)
	buf.WriteByte('[')
	buf.WriteString(strconv.Itoa(b.Op))
	buf.WriteByte(',')
	buf.WriteString(fmtUs(b.StartUs))
	buf.WriteByte(',')
	buf.WriteString(fmtUs(b.DurUs))
	if b.Critical {
		buf.WriteString(",1")
	}
	buf.WriteByte(']')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads the form MarshalJSON writes.
func (b *Box) UnmarshalJSON(data []byte) error {
	var a []float64
	if err := json.Unmarshal(data, &a); err != nil {
		return fmt.Errorf("box: %w", err)
	}
	if len(a) != 3 && len(a) != 4 {
		return fmt.Errorf("box: want [op, start_us, dur_us] or [op, start_us, dur_us, 1], got %d numbers", len(a))
	}
	if a[0] != math.Trunc(a[0]) || a[0] < 0 || a[0] > math.MaxInt32 {
		return fmt.Errorf("box: op index %v is not a non-negative integer", a[0])
	}
	*b = Box{Op: int(a[0]), StartUs: a[1], DurUs: a[2], Critical: len(a) == 4 && a[3] != 0}
	return nil
}

// fmtUs writes microseconds with at most three decimals (1 ns).
func fmtUs(v float64) string {
	return strconv.FormatFloat(math.Round(v*1e3)/1e3, 'f', -1, 64)
}

// Validate checks what the page relies on: every box refers to an op,
// times are finite and non-negative, lanes are sorted by start, links name
// existing boxes, bar rows have one value per series, table rows one cell
// per column. The error names the section and the field.
func (r *Report) Validate() error {
	if r == nil {
		return errors.New("report: nil")
	}
	var errs []error
	for si := range r.Sections {
		s := &r.Sections[si]
		where := fmt.Sprintf("section %d (%q)", si, s.Title)
		if t := s.Timeline; t != nil {
			if err := t.validate(); err != nil {
				errs = append(errs, fmt.Errorf("%s: timeline: %w", where, err))
			}
		}
		if b := s.Bars; b != nil {
			if err := b.validate(); err != nil {
				errs = append(errs, fmt.Errorf("%s: bars: %w", where, err))
			}
		}
		if sc := s.Scatter; sc != nil {
			if err := sc.validate(); err != nil {
				errs = append(errs, fmt.Errorf("%s: scatter: %w", where, err))
			}
		}
		if t := s.Table; t != nil {
			for ri, row := range t.Rows {
				if len(row.Cells) != len(t.Columns) {
					errs = append(errs, fmt.Errorf("%s: table row %d has %d cells for %d columns", where, ri, len(row.Cells), len(t.Columns)))
					break
				}
			}
		}
	}
	return errors.Join(errs...)
}

func finiteNonNeg(v float64) bool { return v >= 0 && !math.IsInf(v, 1) }

func (t *Timeline) validate() error {
	if !finiteNonNeg(t.EndUs) {
		return fmt.Errorf("end_us %v: want a finite time >= 0", t.EndUs)
	}
	for li := range t.Lanes {
		l := &t.Lanes[li]
		prev := 0.0
		for bi, b := range l.Boxes {
			if b.Op < 0 || b.Op >= len(t.Ops) {
				return fmt.Errorf("lane %d (%q) box %d: op %d not in ops[0:%d]", li, l.Label, bi, b.Op, len(t.Ops))
			}
			if !finiteNonNeg(b.StartUs) || !finiteNonNeg(b.DurUs) {
				return fmt.Errorf("lane %d (%q) box %d: start_us %v, dur_us %v: want finite times >= 0", li, l.Label, bi, b.StartUs, b.DurUs)
			}
			if b.StartUs < prev {
				return fmt.Errorf("lane %d (%q) box %d: start_us %v before the previous box's %v: want boxes sorted by start", li, l.Label, bi, b.StartUs, prev)
			}
			prev = b.StartUs
		}
	}
	for ki, k := range t.Links {
		for _, ref := range k.Boxes {
			if ref.Lane < 0 || ref.Lane >= len(t.Lanes) || ref.Box < 0 || ref.Box >= len(t.Lanes[ref.Lane].Boxes) {
				return fmt.Errorf("link %d: box %d of lane %d does not exist", ki, ref.Box, ref.Lane)
			}
		}
	}
	return nil
}

func (b *Bars) validate() error {
	if b.RefLine < 0 || math.IsNaN(b.RefLine) || math.IsInf(b.RefLine, 0) {
		return fmt.Errorf("ref_line %v: want a finite value >= 0", b.RefLine)
	}
	for ri, row := range b.Rows {
		if len(row.Values) != len(b.Series) {
			return fmt.Errorf("row %d (%q): %d values for %d series", ri, row.Label, len(row.Values), len(b.Series))
		}
		for vi, v := range row.Values {
			if v.Missing {
				continue
			}
			if !finiteNonNeg(v.V) || !finiteNonNeg(v.Lo) || !finiteNonNeg(v.Hi) || v.Lo > v.Hi {
				return fmt.Errorf("row %d (%q) value %d: v %v, lo %v, hi %v: want finite values >= 0 with lo <= hi", ri, row.Label, vi, v.V, v.Lo, v.Hi)
			}
		}
	}
	return nil
}

func (s *Scatter) validate() error {
	ok := func(v float64) bool { return finiteNonNeg(v) && !math.IsNaN(v) }
	for si, se := range s.Series {
		if len(se.Labels) != 0 && len(se.Labels) != len(se.Points) {
			return fmt.Errorf("series %d (%q): %d labels for %d points: want none or one per point", si, se.Name, len(se.Labels), len(se.Points))
		}
		for pi, p := range se.Points {
			if !ok(p[0]) || !ok(p[1]) {
				return fmt.Errorf("series %d (%q) point %d: (%v, %v): want finite coordinates >= 0", si, se.Name, pi, p[0], p[1])
			}
		}
	}
	for _, l := range append(append([]RefLine(nil), s.VLines...), s.HLines...) {
		if !ok(l.At) {
			return fmt.Errorf("reference line %q at %v: want a finite value >= 0", l.Label, l.At)
		}
	}
	for _, m := range s.Marks {
		if !ok(m.X) || !ok(m.Y) {
			return fmt.Errorf("mark %q at (%v, %v): want finite coordinates >= 0", m.Label, m.X, m.Y)
		}
	}
	return nil
}

// PointCount is the number of points over every series of a scatter.
func (s *Scatter) PointCount() int {
	n := 0
	for _, se := range s.Series {
		n += len(se.Points)
	}
	return n
}

// BoxCount is the number of boxes over all lanes of every timeline.
func (r *Report) BoxCount() int {
	n := 0
	for _, s := range r.Sections {
		if s.Timeline != nil {
			for _, l := range s.Timeline.Lanes {
				n += len(l.Boxes)
			}
		}
	}
	return n
}
