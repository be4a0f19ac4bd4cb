package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// synthetic builds a timeline of ranks x layers x the per-layer ops below,
// predicted and (for the first measuredRanks ranks) measured, with one
// all-reduce per layer linked across the ranks' predicted lanes. Box
// counts: every lane holds layers x len(layerOps) boxes.
var layerOps = []struct{ name, kind string }{
	{"attn.norm", "norm"}, {"attn.q_proj", "gemm"}, {"attn.mla_decode", "attention"}, {"attn.o_proj", "gemm"},
	{"attn.allreduce", "collective"}, {"moe.norm", "norm"}, {"moe.router", "router"}, {"moe.experts", "moe_gemm"},
	{"moe.act", "elementwise"}, {"moe.allreduce", "collective"},
}

func synthetic(ranks, measuredRanks, layers int) *Report {
	tl := &Timeline{Kinds: []string{"gemm", "moe_gemm", "attention", "norm", "elementwise", "router", "collective"}}
	for l := 0; l < layers; l++ {
		for _, o := range layerOps {
			tl.Ops = append(tl.Ops, Op{ID: fmt.Sprintf("L%02d.%s", l, o.name), Kind: o.kind,
				Fields: []Field{{Name: "bound", Value: "memory"}, {Name: "predicted", Value: "10.0 us"}}})
		}
	}
	durUs := func(k int, measured bool) float64 {
		d := 4 + float64(k%7)*3 // 4..22 us
		if measured {
			d *= 1.3
		}
		return d
	}
	lane := func(r int, measured bool) Lane {
		ln := Lane{Label: fmt.Sprintf("rank %d predicted", r), Rank: r, Measured: measured}
		if measured {
			ln.Label = fmt.Sprintf("rank %d measured", r)
		}
		t := 0.0
		for i := range tl.Ops {
			d := durUs(i, measured)
			ln.Boxes = append(ln.Boxes, Box{Op: i, StartUs: t, DurUs: d, Critical: !measured && r == 0 && i%3 == 0})
			t += d
		}
		if t > tl.EndUs {
			tl.EndUs = t
		}
		return ln
	}
	predLane := map[int]int{}
	for r := 0; r < ranks; r++ {
		predLane[r] = len(tl.Lanes)
		tl.Lanes = append(tl.Lanes, lane(r, false))
		if r < measuredRanks {
			tl.Lanes = append(tl.Lanes, lane(r, true))
		}
	}
	if ranks > 1 {
		for i, o := range tl.Ops {
			if o.Kind != "collective" {
				continue
			}
			var k Link
			for r := 0; r < ranks; r++ {
				k.Boxes = append(k.Boxes, BoxRef{Lane: predLane[r], Box: i})
			}
			tl.Links = append(tl.Links, k)
		}
	}
	return &Report{Title: "synthetic <step> & co", Subtitle: "test data", Sections: []Section{
		{Title: "Summary", Lines: []string{"step 1.0 ms predicted", `a line with </script> inside`}},
		{Title: "Timeline", Timeline: tl},
		{Title: "Per kind", Bars: &Bars{Unit: "us", Series: []string{"predicted", "measured"}, Rows: []BarRow{
			{Label: "gemm", Values: []BarValue{{V: 100}, {V: 130, Lo: 120, Hi: 140}}, Note: "-23.1 %"},
			{Label: "attention", Values: []BarValue{{V: 50}, {Missing: true}}},
		}}},
		{Title: "Ops", Table: &Table{Columns: []Column{{Name: "op"}, {Name: "predicted us", Numeric: true}},
			Rows: []Row{{Cells: []string{"L00.attn.q_proj", "7.0"}, Tone: "good"}, {Cells: []string{"L00.moe.experts", "22.0"}}}}},
	}}
}

func TestReportValidate(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(r *Report)
		wantErr string // substring; "" = valid
	}{
		{"valid", func(r *Report) {}, ""},
		{"op index out of range", func(r *Report) { r.Sections[1].Timeline.Lanes[0].Boxes[3].Op = 10_000 }, `lane 0 ("rank 0 predicted") box 3: op 10000 not in ops`},
		{"negative start", func(r *Report) { r.Sections[1].Timeline.Lanes[0].Boxes[0].StartUs = -1 }, "box 0: start_us -1"},
		{"NaN duration", func(r *Report) { r.Sections[1].Timeline.Lanes[1].Boxes[2].DurUs = math.NaN() }, "box 2: start_us"},
		{"unsorted boxes", func(r *Report) { r.Sections[1].Timeline.Lanes[0].Boxes[5].StartUs = 0 }, "want boxes sorted by start"},
		{"link to a missing box", func(r *Report) { r.Sections[1].Timeline.Links[0].Boxes[0].Box = 99_999 }, "link 0: box 99999"},
		{"infinite end", func(r *Report) { r.Sections[1].Timeline.EndUs = math.Inf(1) }, "end_us +Inf"},
		{"bar values per series", func(r *Report) { r.Sections[2].Bars.Rows[0].Values = r.Sections[2].Bars.Rows[0].Values[:1] }, `row 0 ("gemm"): 1 values for 2 series`},
		{"bar spread inverted", func(r *Report) { r.Sections[2].Bars.Rows[0].Values[1].Lo = 150 }, "want finite values >= 0 with lo <= hi"},
		{"table cells per column", func(r *Report) { r.Sections[3].Table.Rows[1].Cells = []string{"x"} }, "table row 1 has 1 cells for 2 columns"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := synthetic(2, 1, 2)
			c.mutate(r)
			err := r.Validate()
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("Validate = %v, want an error containing %q", err, c.wantErr)
			}
			if werr := Write(&bytes.Buffer{}, r); werr == nil {
				t.Fatal("Write accepted a report Validate refuses")
			}
		})
	}
}

func TestReportBoxJSON(t *testing.T) {
	cases := []struct {
		name string
		box  Box
		want string
	}{
		// 1.23456789 us rounds to the nanosecond: 1.235.
		{"rounded to ns", Box{Op: 7, StartUs: 1.23456789, DurUs: 0.5}, "[7,1.235,0.5]"},
		{"critical", Box{Op: 0, StartUs: 100, DurUs: 12.25, Critical: true}, "[0,100,12.25,1]"},
		{"zero duration", Box{Op: 3, StartUs: 2, DurUs: 0}, "[3,2,0]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(c.box)
			if err != nil || string(b) != c.want {
				t.Fatalf("Marshal = %s, %v; want %s", b, err, c.want)
			}
			var got Box
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			if got.Op != c.box.Op || got.Critical != c.box.Critical || math.Abs(got.StartUs-c.box.StartUs) > 5e-4 || math.Abs(got.DurUs-c.box.DurUs) > 5e-4 {
				t.Fatalf("round trip = %+v, want %+v within 1 ns", got, c.box)
			}
		})
	}
	for _, bad := range []string{`[1,2]`, `[1.5,0,1]`, `[-1,0,1]`, `{"op":1}`, `[1,2,3,4,5]`} {
		t.Run("reject "+bad, func(t *testing.T) {
			var b Box
			if err := json.Unmarshal([]byte(bad), &b); err == nil {
				t.Fatalf("Unmarshal(%s) accepted: %+v", bad, b)
			}
		})
	}
}

// TestWriteSelfContained checks the page needs nothing outside the file:
// no src/href to another resource, no URL scheme that fetches, and that
// text from the data cannot close the data element early.
func TestReportWriteSelfContained(t *testing.T) {
	var buf bytes.Buffer
	r := synthetic(2, 1, 3)
	if err := Write(&buf, r); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, re := range []string{`(?i)\bsrc\s*=`, `(?i)@import`, `(?i)url\(`, `(?i)\bfetch\(`, `(?i)XMLHttpRequest`} {
		if m := regexp.MustCompile(re).FindString(page); m != "" {
			t.Errorf("page references something outside the file: %q matches %s", m, re)
		}
	}
	// The one URL allowed is SVG's namespace name, which nothing fetches.
	for _, m := range regexp.MustCompile(`(?i)(https?|wss?|ftp)://[^\s"'<)]*`).FindAllString(page, -1) {
		if m != "http://www.w3.org/2000/svg" {
			t.Errorf("page holds the URL %q", m)
		}
	}
	if n := strings.Count(page, "</script>"); n != 2 {
		t.Errorf("page has %d </script> tags, want 2 (data and script): data text must be escaped", n)
	}
	if !strings.Contains(page, "<title>synthetic &lt;step&gt; &amp; co</title>") {
		t.Error("title not HTML-escaped")
	}
	// The embedded data decodes back to the report.
	start := strings.Index(page, `id="`+DataElementID+`">`) + len(`id="`+DataElementID+`">`)
	end := strings.Index(page[start:], "</script>")
	var back Report
	if err := json.Unmarshal([]byte(page[start:start+end]), &back); err != nil {
		t.Fatalf("embedded data: %v", err)
	}
	if back.BoxCount() != r.BoxCount() || back.Sections[0].Lines[1] != r.Sections[0].Lines[1] {
		t.Errorf("embedded data differs: %d boxes (want %d), line %q", back.BoxCount(), r.BoxCount(), back.Sections[0].Lines[1])
	}
}

func TestReportWriteFileInvalidLeavesNoFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.html")
	r := synthetic(1, 1, 1)
	r.Sections[1].Timeline.Lanes[0].Boxes[0].Op = -1
	if err := WriteFile(path, r); err == nil {
		t.Fatal("WriteFile accepted an invalid report")
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("an invalid report left %s (stat: %v)", path, err)
	}
}

// TestScatterValidate: a scatter's points, lines and marks must be finite
// and >= 0, and labels none or one per point; the error names the
// section and what is wrong.
func TestScatterValidate(t *testing.T) {
	good := Scatter{XLabel: "x", YLabel: "y", Series: []ScatterSeries{{Name: "a", Points: [][2]float64{{1, 2}, {3, 4}}, Labels: []string{"p", "q"}}},
		VLines: []RefLine{{At: 2, Label: "SLO"}}, Marks: []Mark{{X: 1, Y: 2, Label: "chosen"}}}
	cases := []struct {
		name string
		edit func(s *Scatter)
		want string
	}{
		{"good", func(*Scatter) {}, ""},
		{"NaN point", func(s *Scatter) { s.Series[0].Points[1][0] = math.NaN() }, `series 0 ("a") point 1`},
		{"negative line", func(s *Scatter) { s.VLines[0].At = -1 }, `reference line "SLO"`},
		{"labels", func(s *Scatter) { s.Series[0].Labels = s.Series[0].Labels[:1] }, "1 labels for 2 points"},
		{"infinite mark", func(s *Scatter) { s.Marks[0].Y = math.Inf(1) }, `mark "chosen"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sc := good
			sc.Series = []ScatterSeries{{Name: "a", Points: [][2]float64{{1, 2}, {3, 4}}, Labels: []string{"p", "q"}}}
			sc.VLines = []RefLine{{At: 2, Label: "SLO"}}
			sc.Marks = []Mark{{X: 1, Y: 2, Label: "chosen"}}
			c.edit(&sc)
			err := (&Report{Sections: []Section{{Title: "cap", Scatter: &sc}}}).Validate()
			if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
				t.Errorf("error %v, want one mentioning %q", err, c.want)
			}
			if c.want == "" && sc.PointCount() != 2 {
				t.Errorf("PointCount %d, want 2", sc.PointCount())
			}
		})
	}
}
