package nccltests

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// A 2-rank all_gather_perf excerpt in the layout of nccl-tests 2.13
// (redop "none", root -1), with NCCL INFO noise and a validation-off row
// (#wrong "N/A").
const allGather2 = `# nThread 1 nGpus 2 minBytes 1024 maxBytes 4096 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 0 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   1234 on     node device  0 [0x18] NVIDIA H200
#  Rank  1 Group  0 Pid   1234 on     node device  1 [0x2a] NVIDIA H200
node:1234:1234 [0] NCCL INFO comm 0x55 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0
#
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
        1024           128     float    none      -1    10.50    0.10    0.05    N/A    10.20    0.10    0.05    N/A
        2048           256     float    none      -1    10.60    0.19    0.10    N/A    10.40    0.20    0.10    N/A
        4096           512     float    none      -1    11.00    0.37    0.19    N/A    10.90    0.38    0.19    N/A
# Avg bus bandwidth    : 0.11
`

// Older nccl-tests print no redop/root for all_gather: 11 fields.
const oldLayout = `# nThread 1 nGpus 4 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
           8             2     float    21.0    0.00    0.00      0    20.0    0.00    0.00      0
          16             4     float    22.0    0.00    0.00      0    21.0    0.00    0.00      0
`

func TestParse(t *testing.T) {
	cases := []struct {
		name      string
		file      string
		text      string
		wantOp    string
		wantRanks int
		wantRows  int
		wantSkip  int
		first     Row
	}{
		{"allgather 2 ranks", "log.txt", allGather2, "", 2, 3, 1,
			Row{Line: 9, Bytes: 1024, Count: 128, Type: "float", RedOp: "none", Root: -1, OutTimeUs: 10.5, OutAlgBWGBps: 0.10, OutBusBWGBps: 0.05, InTimeUs: 10.2, InAlgBWGBps: 0.10, InBusBWGBps: 0.05}},
		{"op from file name", "runs/all_gather_perf-2x.txt", allGather2, "allgather", 2, 3, 1,
			Row{Line: 9, Bytes: 1024, Count: 128, Type: "float", RedOp: "none", Root: -1, OutTimeUs: 10.5, OutAlgBWGBps: 0.10, OutBusBWGBps: 0.05, InTimeUs: 10.2, InAlgBWGBps: 0.10, InBusBWGBps: 0.05}},
		{"old layout, ranks from header", "reduce_scatter_perf.log", oldLayout, "reducescatter", 4, 2, 0,
			Row{Line: 2, Bytes: 8, Count: 2, Type: "float", Root: -1, OutTimeUs: 21, InTimeUs: 20}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lg, err := Parse(strings.NewReader(c.text), c.file)
			if err != nil {
				t.Fatal(err)
			}
			if lg.Op != c.wantOp || lg.Ranks != c.wantRanks || len(lg.Rows) != c.wantRows || lg.Skipped != c.wantSkip {
				t.Errorf("op %q ranks %d rows %d skipped %d; want %q %d %d %d", lg.Op, lg.Ranks, len(lg.Rows), lg.Skipped, c.wantOp, c.wantRanks, c.wantRows, c.wantSkip)
			}
			if lg.Rows[0] != c.first {
				t.Errorf("first row\n got %+v\nwant %+v", lg.Rows[0], c.first)
			}
		})
	}
}

// TestParseTestdata reads the 8-rank all_reduce_perf log of the sim tests:
// 27 sizes 8 B .. 512 MiB, 8 rank lines, op from "Collective test starting".
func TestParseTestdata(t *testing.T) {
	lg, err := ParseFile("../testdata/nccltests/all_reduce_perf_8x_pcie.txt")
	if err != nil {
		t.Fatal(err)
	}
	if lg.Op != "allreduce" || lg.Ranks != 8 || len(lg.Rows) != 27 || lg.Rows[26].Bytes != 512<<20 || len(lg.Devices) != 8 {
		t.Errorf("op %q ranks %d rows %d last %d devices %d", lg.Op, lg.Ranks, len(lg.Rows), lg.Rows[len(lg.Rows)-1].Bytes, len(lg.Devices))
	}
	if lg.Devices[0] != "NVIDIA RTX PRO 6000 Blackwell Server Edition" {
		t.Errorf("device %q", lg.Devices[0])
	}
}

func TestParseNoData(t *testing.T) {
	for _, text := range []string{"", "# only comments\n#\n", "garbage\nmore garbage\n"} {
		_, err := Parse(strings.NewReader(text), "f.txt")
		var pe *ParseError
		if !errors.As(err, &pe) || !errors.Is(err, ErrNoData) || pe.Name != "f.txt" || pe.Line < 1 {
			t.Errorf("%q: error %v, want a ParseError wrapping ErrNoData with file and line", text, err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "f.txt:") {
			t.Errorf("message %q does not start with file:line", err)
		}
	}
	if _, err := ParseFile("does/not/exist.txt"); err == nil {
		t.Error("missing file: no error")
	}
}

func FuzzParse(f *testing.F) {
	f.Add(allGather2)
	f.Add(oldLayout)
	if b, err := os.ReadFile("../testdata/nccltests/all_reduce_perf_8x_pcie.txt"); err == nil {
		f.Add(string(b))
		// Cut mid-row, at a row boundary and in the closing lines.
		for _, frac := range []int{1, 2, 3} {
			f.Add(string(b[:len(b)*frac/4]))
		}
		f.Add(string(b[:strings.Index(string(b), "# Out of bounds")+10]))
	}
	f.Add(allGather2[:len(allGather2)-30])
	f.Add("#  Rank 99999999999 Group 0 device 0 [0x1] X\n8 2 float sum -1 1 1 1 0 1 1 1 0\n")
	f.Add("8 2 float sum -1 NaN 1 1 0 Inf 1 1 0\n")
	f.Add(allReduce2 + "# Collective test starting: all_gather_perf\n" + allGather2)
	f.Add(oldLayout + allGather2)
	f.Add(oldErrorColumn)
	f.Add(allReduce2 + allReduce2)
	f.Add("8 2 float sum -1 1 1 1 7 1 1 1 -2\n")
	// nccl-tests 2.19: -I columns, -S timestamps, -J JSON (generated
	// fixtures, see the testdata README), whole and cut.
	for _, name := range []string{"all_reduce_perf_8x_h200_I1.txt", "all_reduce_perf_8x_h200_J.json"} {
		if b, err := os.ReadFile("../testdata/nccltests/" + name); err == nil {
			f.Add(string(b))
			f.Add(string(b[:len(b)*2/3]))
		}
	}
	f.Add("8 2 float sum -1 1 1 1 0 1 1 1 0 2026-12-06 12:00:00\n")
	f.Add(`{"version":3,"results":[{"size":8,"out_of_place":{"time":"nan"}}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		lg, err := Parse(strings.NewReader(s), "fuzz")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz:") {
				t.Fatalf("error without file:line: %v", err)
			}
			return
		}
		if len(lg.Rows) == 0 {
			t.Fatal("no rows and no error")
		}
		for _, r := range lg.Rows {
			if r.Bytes < 0 || r.OutTimeUs < 0 || r.InTimeUs < 0 || len(r.Times()) == 0 {
				t.Fatalf("bad row %+v", r)
			}
		}
	})
}

// allReduce2 is a 2-rank all_reduce_perf run with its test banner, in the
// layout of allGather2.
const allReduce2 = `# Collective test starting: all_reduce_perf
# nThread 1 nGpus 2 minBytes 1024 maxBytes 2048 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
        1024           256     float     sum      -1    12.10    0.08    0.08      0    12.00    0.09    0.09      0
        2048           512     float     sum      -1    12.30    0.17    0.17      0    12.20    0.17    0.17      0
# Collective test concluded: all_reduce_perf
`

// TestParseMixed: concatenated runs of different collectives or rank
// counts are refused at the line where the second begins; repeats of one
// run and rows that failed validation are warnings.
func TestParseMixed(t *testing.T) {
	gather := "# Collective test starting: all_gather_perf\n" + allGather2
	cases := []struct {
		name     string
		text     string
		wantErr  string // substring of the error; "" for no error
		wantLine int    // line of the error
		wantRows int
		wantWarn string // substring of the one warning; "" for none
	}{
		// all_reduce rows (lines 4-5), then the all_gather banner at line 7.
		{name: "all_reduce then all_gather", text: allReduce2 + gather,
			wantErr: "more than one nccl-tests run: all_gather_perf starts after 2 result rows of all_reduce_perf", wantLine: 7},
		// The test is named only by the concluded line (line 4) after its
		// rows (oldLayout: lines 1-3); the all_reduce banner is line 5.
		{name: "unnamed rows then another test", text: oldLayout + "# Collective test concluded: reduce_scatter_perf\n" + allReduce2,
			wantErr: "all_reduce_perf starts after 2 result rows of reduce_scatter_perf", wantLine: 5},
		// 4 ranks (oldLayout: nThread 1 nGpus 4, lines 1-3), then 2
		// (allGather2's header after the "#" of line 4).
		{name: "different rank counts", text: oldLayout + "#\n" + allGather2,
			wantErr: "a run with nThread 1 nGpus 2 starts after 2 result rows of a run with nThread 1 nGpus 4", wantLine: 5},
		// allReduce2 is 6 lines: the second copy's header is line 8.
		{name: "same run twice", text: allReduce2 + allReduce2, wantRows: 4,
			wantWarn: "1 more runs of the same test follow the first (headers at lines 8)"},
		{name: "wrong results", text: strings.Replace(allReduce2, "12.20    0.17    0.17      0", "12.20    0.17    0.17      3", 1), wantRows: 2,
			wantWarn: "1 of 2 rows report #wrong > 0 (first at line 5)"},
		{name: "one run", text: allReduce2, wantRows: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lg, err := Parse(strings.NewReader(c.text), "runs.txt")
			if c.wantErr != "" {
				var pe *ParseError
				if !errors.As(err, &pe) || !errors.Is(err, ErrMixed) || pe.Line != c.wantLine || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v; want a ParseError at line %d wrapping ErrMixed saying %q", err, c.wantLine, c.wantErr)
				}
				if !strings.HasPrefix(err.Error(), "runs.txt:") || strings.Contains(err.Error(), "\n") {
					t.Errorf("error %q: want one line starting with the file name", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(lg.Rows) != c.wantRows {
				t.Errorf("%d rows, want %d", len(lg.Rows), c.wantRows)
			}
			switch {
			case c.wantWarn == "" && len(lg.Warnings) != 0:
				t.Errorf("warnings %q, want none", lg.Warnings)
			case c.wantWarn != "" && (len(lg.Warnings) != 1 || !strings.Contains(lg.Warnings[0], c.wantWarn)):
				t.Errorf("warnings %q, want one saying %q", lg.Warnings, c.wantWarn)
			}
		})
	}
}

// TestParsePartial: a log that is cut or damaged is a ParseError wrapping
// ErrPartial at the line where it shows: a last row cut before its
// newline, a table whose closing lines (nccl-tests prints "# Out of bounds
// values" and "# Avg bus bandwidth" after every table it heads) are
// missing, a garbled row. Complete logs, with or without a final newline,
// and excerpts without a column heading still read. Line numbers are
// those of the 8-rank log: heading at line 19, rows 21-47 (134217728 B
// at line 45), closing lines 48-49.
func TestParsePartial(t *testing.T) {
	b, err := os.ReadFile("../testdata/nccltests/all_reduce_perf_8x_pcie.txt")
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	lineStart := func(n int) int { // offset of line n (1-based)
		off := 0
		for i := 1; i < n; i++ {
			off += strings.IndexByte(log[off:], '\n') + 1
		}
		return off
	}
	row45 := log[lineStart(45):lineStart(46)]
	garbled := strings.Replace(log, row45, strings.Replace(row45, "11424.39", "11424.3x", 1), 1)
	short := strings.Replace(log, row45, "   134217728      33554432     float     sum      -1  11424.39   11.75\n", 1)
	// The 8-GPU log (one process, nThread 1 nGpus 8) without the rank
	// lines of ranks 4-7, or of rank 3 alone: it had been fitted as a
	// 4-rank all-reduce (ranks are what the rank lines list).
	withoutRanks := func(ks ...int) string {
		out := log
		for _, k := range ks {
			i := strings.Index(out, fmt.Sprintf("#  Rank  %d Group", k))
			out = out[:i] + out[i+strings.IndexByte(out[i:], '\n')+1:]
		}
		return out
	}
	// An MPI run prints one header for its first process (nGpus 1) and
	// the rank lines of every process.
	mpi := strings.Replace(allGather2, "nThread 1 nGpus 2", "nThread 1 nGpus 1", 1)
	cases := []struct {
		name     string
		text     string
		wantLine int    // 0: no error
		want     string // in the error
		wantRows int    // rows when there is no error
	}{
		{name: "cut mid-row", text: log[:lineStart(45)+strings.Index(row45, "11.75")], wantLine: 45,
			want: `the log ends mid-row ("134217728 33554432 float sum -1 11424.39": 6 columns, a row has 13 like the one before it): the file was cut`},
		{name: "cut at a row boundary", text: log[:lineStart(46)], wantLine: 45,
			want: "the table headed at line 19 stops after 25 result rows, before nccl-tests' closing"},
		{name: "cut in the closing lines", text: log[:lineStart(48)+12], wantLine: 48, want: "stops after 27 result rows"},
		{name: "garbled row", text: garbled, wantLine: 45, want: `garbled result row "134217728 33554432 float sum -1 11424.3x 11.75 20.56 0 11175.05 12.01 21.02 0": time "11424.3x": want a finite number >= 0`},
		{name: "row with columns missing", text: short, wantLine: 45, want: "garbled result row", wantRows: 0},
		// allReduce2 closes with "Collective test concluded"; the second
		// copy's heading is line 9, its rows 10-11.
		{name: "second run cut", text: allReduce2 + allReduce2[:len(allReduce2)-len("# Collective test concluded: all_reduce_perf\n")], wantLine: 11,
			want: "the table headed at line 9 stops after 2 result rows"},
		{name: "rank lines cut", text: withoutRanks(4, 5, 6, 7), wantLine: 4,
			want: "the header's nThread 1 nGpus 8 runs 8 ranks in each process, and the log lists 4 rank lines (ranks 0-3): rank lines are missing"},
		{name: "a rank line missing", text: withoutRanks(3), wantLine: 4, want: "lists 7 rank lines (ranks 0-2, 4-7): rank lines are missing"},
		{name: "rank lines of every process", text: mpi, wantRows: 3},
		{name: "complete log", text: log, wantRows: 27},
		{name: "complete log without its last newline", text: strings.TrimSuffix(allGather2, "\n"), wantRows: 3},
		{name: "closed by the concluded line", text: allReduce2, wantRows: 2},
		{name: "excerpt without a heading", text: oldLayout, wantRows: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lg, err := Parse(strings.NewReader(c.text), "all_reduce_perf.txt")
			if c.wantLine == 0 {
				if err != nil || len(lg.Rows) != c.wantRows {
					t.Fatalf("error %v; want %d rows", err, c.wantRows)
				}
				return
			}
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrPartial) || pe.Line != c.wantLine || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v; want a ParseError at line %d wrapping ErrPartial saying %q", err, c.wantLine, c.want)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, fmt.Sprintf("all_reduce_perf.txt:%d: ", c.wantLine)) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line starting with file:line", msg)
			}
		})
	}
}

// oldErrorColumn is nccl-tests 2.10 and earlier: no root column, and where
// later versions print #wrong an "error" column holding the largest
// deviation from the expected result ("%5.0le": 0e+00, 2e-07).
const oldErrorColumn = `# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#   Rank  0 Pid   1428 on    node1 device  0 [0x00] NVIDIA A10G
#   Rank  1 Pid   1429 on    node2 device  0 [0x00] NVIDIA A10G
#
#                                                       out-of-place                       in-place
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum    52.16    0.00    0.00  0e+00    52.04    0.00    0.00  0e+00
    33554432       8388608     float     sum    19902    1.69    1.69  2e-07    19898    1.69    1.69  2e-07
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.84
#
`

// TestParseMaxDeltaColumn: a log of nccl-tests 2.10 or earlier (the
// layout of public logs of that time) is read: its "error" column is a
// deviation, not a count of wrong elements, so 2e-07 is no wrong row. It
// was refused as a cut or damaged log ('#wrong "0e+00": want a count').
// Under a #wrong heading the same value is still refused.
func TestParseMaxDeltaColumn(t *testing.T) {
	lg, err := Parse(strings.NewReader(oldErrorColumn), "all_reduce_perf.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(lg.Rows) != 2 || lg.Rows[1].Bytes != 33554432 || lg.Rows[1].OutTimeUs != 19902 || lg.Rows[1].InTimeUs != 19898 || lg.Ranks != 2 || len(lg.Warnings) != 0 {
		t.Errorf("rows %+v, ranks %d, warnings %q; want 2 rows (the second 33554432 B in 19902 / 19898 us), 2 ranks, none", lg.Rows, lg.Ranks, lg.Warnings)
	}
	bad := strings.Replace(oldErrorColumn, "2e-07    19898", "x    19898", 1)
	if _, err := Parse(strings.NewReader(bad), "f.txt"); err == nil || !strings.Contains(err.Error(), `error "x": want the largest deviation (a number >= 0) or N/A`) {
		t.Errorf("a garbled error column: %v", err)
	}
	wrong := strings.ReplaceAll(oldErrorColumn, "busbw  error", "busbw #wrong")
	if _, err := Parse(strings.NewReader(wrong), "f.txt"); err == nil || !strings.Contains(err.Error(), `#wrong "0e+00": want a count`) {
		t.Errorf("0e+00 under #wrong: %v", err)
	}
}
