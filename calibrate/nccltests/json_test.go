package nccltests

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
)

// TestParsePerIter reads the generated nccl-tests 2.19 outputs (see
// calibrate/testdata/nccltests/README.md): the -I 1 text and the -J JSON of
// the same run. Sizes 1 KiB, 1 MiB, 16 MiB on 8 ranks; the 1 MiB row's
// five iterations 55, 52, 51, 53, 59 us: time (mean) 54, i_min 51, i_max
// 59, i_p99 = sorted[min(4, ceil(5 x 99 / 100) - 1)] = 59, p50 =
// sorted[2] = 53, population standard deviation sqrt((1 + 4 + 9 + 1 +
// 25) / 5) = 2.828, i_cv% 100 x 2.828 / 54 = 5.24 %. Both formats give
// the same rows; the JSON also every time.
func TestParsePerIter(t *testing.T) {
	sd := math.Sqrt(((55-54)*(55-54) + (52-54)*(52-54) + (51-54)*(51-54) + (53-54)*(53-54) + (59-54)*(59-54)) / 5.0)
	cv := 100 * sd / 54
	for _, f := range []string{"all_reduce_perf_8x_h200_I1.txt", "all_reduce_perf_8x_h200_J.json"} {
		t.Run(f, func(t *testing.T) {
			lg, err := ParseFile("../testdata/nccltests/" + f)
			if err != nil {
				t.Fatal(err)
			}
			if lg.Op != "allreduce" || lg.Ranks != 8 || len(lg.Rows) != 3 || lg.Iters != 5 {
				t.Fatalf("op %q ranks %d rows %d iters %d", lg.Op, lg.Ranks, len(lg.Rows), lg.Iters)
			}
			r := lg.Rows[1]
			if r.Bytes != 1<<20 || math.Abs(r.OutTimeUs-54) > 0.005 || r.OutIter == nil || r.InIter == nil {
				t.Fatalf("row %+v", r)
			}
			it := r.OutIter
			if it.MinUs != 51 || it.MaxUs != 59 || it.P99Us != 59 || math.Abs(it.CVPct-cv) > 0.005 {
				t.Errorf("per-iteration %+v; want min 51, max 59, p99 59, cv %.3f", it, cv)
			}
			if strings.HasSuffix(f, ".json") {
				if lg.JSONVersion != 3 || len(it.TimesUs) != 5 || it.TimesUs[4] != 59 || it.P50Us != 53 || math.Abs(it.StdevUs-sd) > 1e-6 {
					t.Errorf("JSON per-iteration %+v", it)
				}
			}
		})
	}
}

// TestIterStats: nccl-tests' computeIterStats on 5, 1, 4, 2, 3 (sorted
// 1..5): min 1, max 5, mean 3, p50 = sorted[2] = 3, p95 and p99 at index
// min(4, ceil(5 p / 100) - 1) = 4: 5; population deviation sqrt(2), cv
// 100 sqrt(2) / 3 %. Skipping the first two leaves 2, 3, 4: p50 3, p99 4.
func TestIterStats(t *testing.T) {
	s, err := IterStats([]float64{5, 1, 4, 2, 3}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if s.MinUs != 1 || s.MaxUs != 5 || s.AvgUs != 3 || s.P50Us != 3 || s.P95Us != 5 || s.P99Us != 5 || math.Abs(s.StdevUs-math.Sqrt2) > 1e-12 || math.Abs(s.CVPct-100*math.Sqrt2/3) > 1e-9 {
		t.Errorf("%+v", s)
	}
	s, err = IterStats([]float64{5, 1, 4, 2, 3}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if s.MinUs != 2 || s.P50Us != 3 || s.P99Us != 4 || len(s.TimesUs) != 5 || s.Skipped != 2 {
		t.Errorf("skip 2: %+v", s)
	}
	if _, err := IterStats([]float64{1}, 1); err == nil {
		t.Error("skipping every time: no error")
	}
}

// TestWriteReadPerIter: rows with per-iteration timing written as text
// (-I layout) and as JSON read back with the same times and summary,
// within the text's two decimals.
func TestWriteReadPerIter(t *testing.T) {
	it, _ := IterStats([]float64{40.5, 41.25, 39.75, 44}, 0)
	r, err := NewRow("allgather", 4, 4096, 4, "float", 41.375, 0)
	if err != nil {
		t.Fatal(err)
	}
	r.OutIter = it
	lg := &Log{Name: "x", Op: "allgather", Ranks: 4, Rows: []Row{r}}
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			write := Write
			if format == "json" {
				write = WriteJSON
			}
			if err := write(&buf, lg, WriteOptions{Comments: []string{"generated"}, Iters: 4}); err != nil {
				t.Fatal(err)
			}
			back, err := Parse(&buf, "round-trip")
			if err != nil {
				t.Fatalf("%v\n%s", err, buf.String())
			}
			got := back.Rows[0].OutIter
			if got == nil || math.Abs(got.MinUs-39.75) > 0.005 || math.Abs(got.MaxUs-44) > 0.005 || math.Abs(got.CVPct-it.CVPct) > 0.005 || back.Op != "allgather" || back.Ranks != 4 {
				t.Errorf("read back %+v (op %q, ranks %d), want %+v", got, back.Op, back.Ranks, it)
			}
			if format == "json" && len(got.TimesUs) != 4 {
				t.Errorf("JSON times %v", got.TimesUs)
			}
		})
	}
}

// TestParseJSONErrors: a cut document is ErrPartial; another version, or
// a string where a number goes, names the field.
func TestParseJSONErrors(t *testing.T) {
	full, err := os.ReadFile("../testdata/nccltests/all_reduce_perf_8x_h200_J.json")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, text string
		partial    bool
		msg        string
	}{
		{"cut", string(full[:len(full)/2]), true, "before its closing brace"},
		{"version", strings.Replace(string(full), `"version":3`, `"version":2`, 1), false, `"version"`},
		{"wrong type", strings.Replace(string(full), `"size":1024`, `"size":"big"`, 1), false, "size"},
		{"no results", `{"version":3,"args":["all_reduce_perf"],"results":[]}`, false, "no nccl-tests result"},
		// A string where jsonDouble writes a number names the field and
		// what it wants; it was "not nccl-tests JSON".
		{"time a word", strings.Replace(string(full), `"out_of_place":{"time":54.0`, `"out_of_place":{"time":"fast"`, 1), false,
			`j.json:1: field "results.out_of_place.time": want a number or "nan", got string "fast"`},
		// A size without a placement the others have (its samples half
		// gone) is refused; it was fitted on the other placement alone.
		{"placement missing", strings.Replace(string(full), `"out_of_place":{"time":54.0`, `"out_of_place_gone":{"time":54.0`, 1), false,
			`j.json:1: field "results[1].out_of_place": missing, and results[2] has it: want the same placements at every size`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(c.text), "j.json")
			var pe *ParseError
			if !errors.As(err, &pe) || errors.Is(err, ErrPartial) != c.partial || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %v; want a *ParseError (partial %v) mentioning %q", err, c.partial, c.msg)
			}
		})
	}
}
