// Package nccltests parses the text output of NVIDIA's nccl-tests
// (all_reduce_perf, all_gather_perf, reduce_scatter_perf, alltoall_perf and
// friends): the header (threads, GPUs, ranks and their devices) and the
// result rows with out-of-place and in-place time (us), algorithm bandwidth
// and bus bandwidth (GB/s).
//
// A result row is
//
//	size(B) count type [redop [root]] | time algbw busbw #wrong | time algbw busbw #wrong
//
// (out-of-place then in-place). Lines starting with '#' are comments or
// header; any other line that is not a result row (NCCL INFO output, a
// hostname, a blank line) is skipped and counted. What the header and
// NCCL's own lines record of the run beside its rows (its NCCL settings,
// CPU ranks) is read too (settings.go). A log that is cut or
// damaged is an error (ErrPartial): a line that starts like a row (size
// and count) but is not one, a last line cut mid-row, or a table that
// stops before the lines nccl-tests closes it with.
//
// nccl-tests 2.19 added per-iteration timing (-I 1): after each
// placement's #wrong four more columns, i_min, i_max, i_p99 and i_cv%
// (the iterations' fastest, slowest and 99th-percentile times in us, and
// their coefficient of variation in %), each iteration's time being the
// slowest GPU's; and JSON output (-J FILE.json, format version 3): the
// run's arguments, configuration and devices, and per size the same
// figures, with -I each placement's every iteration (times_us) and
// their min/max/avg/p50/p95/p99/stdev (NVIDIA/nccl-tests v2.19.6,
// src/util.cu writeBenchmarkLineBody, writePerIterReport,
// writeResultHeader, writeDeviceReport; src/common.cu BenchTime). Parse
// reads both; a JSON document cut before its end is ErrPartial.
//
// Write (write.go) writes the same formats, so timings measured elsewhere
// (tpscope's executor, a PyTorch harness) go through the same reader.
package nccltests

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tpscope/tpscope/ncclenv"
)

// Row is one message size of a run.
type Row struct {
	Line  int   // 1-based line number in the input
	Bytes int64 // the "size" column (nccl-tests convention per collective)
	Count int64
	Type  string // "float", "half", "bfloat16", ...
	RedOp string // "sum", "none", ... ("" when the column is absent)
	Root  int    // -1 when the column is absent or -1
	// Out-of-place and in-place results; a time of 0 means the run did not
	// report it.
	OutTimeUs, OutAlgBWGBps, OutBusBWGBps float64
	InTimeUs, InAlgBWGBps, InBusBWGBps    float64
	// OutIter and InIter are the per-iteration timing (-I 1) of each
	// placement; nil when the run did not collect it.
	OutIter, InIter *PerIter
}

// PerIter is one placement's per-iteration timing: nccl-tests' summary
// (text: MinUs, MaxUs, P99Us, CVPct; JSON adds the rest) over the
// iterations after the first Skipped (-K), each iteration's time the
// slowest GPU's, in microseconds.
type PerIter struct {
	MinUs, MaxUs, P99Us, CVPct float64
	// JSON only (0 or nil in text).
	AvgUs, P50Us, P95Us, StdevUs float64
	TimesUs                      []float64
	Skipped                      int
}

// Log is a parsed nccl-tests output.
type Log struct {
	Name string
	// Op is the collective as model.Collective names it ("allreduce",
	// "allgather", "reducescatter", "alltoall", or "broadcast", "reduce",
	// "sendrecv", "gather", "scatter", "hypercube"); "" if neither the
	// text nor the file name says.
	Op string
	// Ranks is the number of ranks: the "# Rank N ..." device lines when
	// present, else nThread x nGpus from the header (one process).
	Ranks   int
	Devices []string // device names from the rank lines, in rank order
	Rows    []Row
	// Skipped counts non-comment lines that were not result rows;
	// FirstSkipped is the first one's line number (0 none).
	Skipped      int
	FirstSkipped int
	// Warnings are problems that do not stop the log from being used, one
	// line each, for the caller to show: rows whose validation failed
	// (#wrong > 0).
	Warnings []string
	// JSONVersion is the version of a JSON log (-J), 0 for text.
	JSONVersion int
	// Iters and Warmup are the run's iterations and warm-up iterations,
	// when the log says (0 otherwise).
	Iters, Warmup int
	// NCCL is the NCCL settings the log records the run had, and
	// NCCLRecorded maps each variable it records (ncclenv.EnvProto, ...)
	// to the line that says so (0 in JSON): NCCL's own lines under
	// NCCL_DEBUG=INFO ("NCCL INFO NCCL_P2P_LEVEL set by environment to
	// SYS"), the NCCL_ variables of nccl-tests JSON's "env" list, and the
	// SettingsComment tpscope writes, which records all four (those it
	// does not name had NCCL's default). A variable not in NCCLRecorded
	// is not known: its zero value in NCCL is no evidence of NCCL's
	// default.
	NCCL         ncclenv.Settings
	NCCLRecorded map[string]int
	// CPURanks says the log was measured on tpscope's CPU backend
	// (goroutine ranks in host memory): its rank lines name CPURankDevice
	// or its header says CPURanksComment. Its times are no GPU box's.
	CPURanks bool
}

// ErrMixed is wrapped by the error returned when the input holds more than
// one test: several collectives, or runs over different rank counts,
// concatenated. Their rows cannot be fitted as one; the error names the
// line where the second begins, to split the file there.
var ErrMixed = errors.New("more than one nccl-tests run")

// ParseError is a parse failure with its place in the input.
type ParseError struct {
	Name string
	Line int
	Err  error
}

func (e *ParseError) Error() string { return fmt.Sprintf("%s:%d: %v", e.Name, e.Line, e.Err) }
func (e *ParseError) Unwrap() error { return e.Err }

// ErrNoData is wrapped by the error returned when the input has no result
// row.
var ErrNoData = errors.New("no nccl-tests result rows")

// ErrPartial is wrapped by the error returned for a log that is cut or
// damaged: a result row that is garbled or cut mid-line, or a table that
// ends before its closing lines. Fitting what is left would fit part of
// a run as if it were all of it.
var ErrPartial = errors.New("the nccl-tests log is cut or damaged")

var (
	reHeader = regexp.MustCompile(`nThread\s+(\d+)\s+nGpus\s+(\d+)`)
	reIters  = regexp.MustCompile(`warmup iters:\s*(\d+)\s+iters:\s*(\d+)`)
	reDate   = regexp.MustCompile(`^\d{4}-\d\d-\d\d$`)
	reClock  = regexp.MustCompile(`^\d\d:\d\d:\d\d$`)
	reRank   = regexp.MustCompile(`^#\s*Rank\s+(\d+)\b.*?device\s+\d+\s+\[[^\]]*\]\s*(.*)$`)
	reTest   = regexp.MustCompile(`(all_reduce|all_gather|reduce_scatter|alltoall|broadcast|reduce|sendrecv|gather|scatter|hypercube)_perf`)
	// reHeading is the column heading nccl-tests prints before its rows;
	// reClose the lines it prints after them (every version prints "Avg
	// bus bandwidth"; 2.13 adds "Collective test concluded").
	reHeading = regexp.MustCompile(`^#\s*size\s+count\s+type\b`)
	// reErrorCol finds the column nccl-tests 2.10 and earlier print
	// where later versions print #wrong: the largest deviation from the
	// expected result ("%5.0le": 0e+00, 2e-07), not a count of wrong
	// elements; a rounding deviation is no error.
	reErrorCol = regexp.MustCompile(`\bbusbw\s+error\b`)
	reClose    = regexp.MustCompile(`^#\s*(Out of bounds values|Avg bus bandwidth|Collective test concluded)\b`)
	opByBinary = map[string]string{
		"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
		"alltoall": "alltoall", "broadcast": "broadcast", "reduce": "reduce", "sendrecv": "sendrecv",
		"gather": "gather", "scatter": "scatter", "hypercube": "hypercube",
	}
)

// maxLine bounds one line (nccl-tests lines are short; NCCL INFO lines
// can be long).
const maxLine = 1 << 20

// ParseFile parses the nccl-tests output in path.
func ParseFile(path string) (*Log, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("nccl-tests log: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads nccl-tests output; name labels errors and guesses the
// collective when the text does not name it (e.g. "all_reduce_perf.txt").
func Parse(r io.Reader, name string) (*Log, error) {
	lg := &Log{Name: name}
	sr := &settingsReader{lg: lg}
	if m := reTest.FindStringSubmatch(filepath.Base(name)); m != nil {
		lg.Op = opByBinary[m[1]]
	}
	br := bufio.NewReader(r)
	if isJSON(br) {
		return parseJSON(br, lg, sr)
	}
	lr := &lastByteReader{r: br}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 64*1024), maxLine)
	var threads, gpus int
	headerAt := 0 // the line of the first nThread/nGpus header
	ranks := map[int]string{}
	line := 0
	// What the rows read so far measured: the test named in the text
	// (rowsTest, "" until one is named) and the header's thread and GPU
	// counts. A second test or header that disagrees starts another run.
	rowsTest, textTest := "", ""
	rowsHeader := ""
	var repeats []int // lines of headers after rows that repeat the first run's
	wrong, firstWrong := 0, 0
	// The table being read: the line of its column heading (0 when none
	// is open) and its rows so far. nccl-tests closes every table it
	// heads; one that stops before that was cut.
	tableAt, tableRows := 0, 0
	cutTable := func(at int) error {
		return &ParseError{name, at, fmt.Errorf("%w: the table headed at line %d stops after %d result rows, before nccl-tests' closing \"# Avg bus bandwidth\" line: the run's output was cut", ErrPartial, tableAt, tableRows)}
	}
	var bad *ParseError // a row-like line that is not a row, kept until the next line says garbled or cut
	var badCut error
	cols := "11 to 13 columns (21 with per-iteration timing)" // as many as the rows read, once there are some
	perIter := false                                          // the table's heading names the -I columns
	maxDelta := false                                         // the table's heading names an "error" column, not "#wrong"
	for sc.Scan() {
		line++
		if bad != nil {
			return nil, bad
		}
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		if strings.HasPrefix(text, "#") {
			switch {
			case reHeading.MatchString(text):
				if tableAt > 0 && tableRows > 0 {
					return nil, cutTable(line)
				}
				tableAt, tableRows = line, 0
				perIter = strings.Contains(text, "i_min")
				maxDelta = reErrorCol.MatchString(text)
			case reClose.MatchString(text):
				tableAt, tableRows = 0, 0
			}
			if err := sr.comment(strings.TrimPrefix(text, "#"), line); err != nil {
				return nil, err
			}
			if m := reIters.FindStringSubmatch(text); m != nil {
				lg.Warmup, _ = strconv.Atoi(m[1])
				lg.Iters, _ = strconv.Atoi(m[2])
			}
			if m := reHeader.FindStringSubmatch(text); m != nil {
				threads, _ = strconv.Atoi(m[1])
				gpus, _ = strconv.Atoi(m[2])
				if headerAt == 0 {
					headerAt = line
				}
				h := fmt.Sprintf("nThread %d nGpus %d", threads, gpus)
				switch {
				case len(lg.Rows) == 0:
					rowsHeader = h
				case rowsHeader != "" && h != rowsHeader:
					return nil, mixed(name, line, "a run with "+h, len(lg.Rows), "a run with "+rowsHeader)
				default:
					repeats = append(repeats, line)
				}
			}
			if m := reRank.FindStringSubmatch(text); m != nil {
				if k, err := strconv.Atoi(m[1]); err == nil && k >= 0 && k < 1<<16 {
					ranks[k] = strings.TrimSpace(m[2])
				}
			}
			if m := reTest.FindStringSubmatch(text); m != nil {
				test := m[1] + "_perf"
				if len(lg.Rows) > 0 && rowsTest == "" {
					rowsTest = test // the log names its test only after the rows ("concluded")
				}
				if rowsTest != "" && test != rowsTest {
					return nil, mixed(name, line, test, len(lg.Rows), rowsTest)
				}
				textTest = test
				lg.Op = opByBinary[m[1]]
			}
			continue
		}
		fields := strings.Fields(text)
		// -S appends the time of each row: a date and a clock.
		if n := len(fields); n > 2 && reDate.MatchString(fields[n-2]) && reClock.MatchString(fields[n-1]) {
			fields = fields[:n-2]
		}
		row, nwrong, ok, problem := parseRow(fields, perIter, maxDelta)
		if problem != "" {
			// Garbled, or cut if it is the last line and has no newline:
			// the next line (or the end of the input) tells.
			row := truncate(strings.Join(fields, " "))
			bad = &ParseError{name, line, fmt.Errorf("%w: garbled result row %q: %s", ErrPartial, row, problem)}
			badCut = fmt.Errorf("%w: the log ends mid-row (%q: %d columns, a row has %s): the file was cut", ErrPartial, row, len(fields), cols)
			continue
		}
		if !ok {
			if err := sr.info(text, line); err != nil {
				return nil, err
			}
			lg.Skipped++
			if lg.FirstSkipped == 0 {
				lg.FirstSkipped = line
			}
			continue
		}
		if rowsTest == "" {
			rowsTest = textTest
		}
		if nwrong > 0 {
			wrong++
			if firstWrong == 0 {
				firstWrong = line
			}
		}
		row.Line = line
		lg.Rows = append(lg.Rows, row)
		tableRows++
		cols = fmt.Sprintf("%d like the one before it", len(fields))
	}
	if err := sc.Err(); err != nil {
		return nil, &ParseError{name, line + 1, err}
	}
	if bad != nil {
		if lr.last != '\n' {
			bad.Err = badCut
		}
		return nil, bad
	}
	if tableAt > 0 && tableRows > 0 {
		return nil, cutTable(line)
	}
	if len(repeats) > 0 {
		lg.Warnings = append(lg.Warnings, fmt.Sprintf("%d more runs of the same test follow the first (headers at lines %s); their rows are fitted together, so they must have run with the same NCCL settings",
			len(repeats), joinInts(repeats)))
	}
	if wrong > 0 {
		lg.Warnings = append(lg.Warnings, fmt.Sprintf("%d of %d rows report #wrong > 0 (first at line %d): the collective returned wrong data there; its times are used but the run is suspect",
			wrong, len(lg.Rows), firstWrong))
	}
	if len(lg.Rows) == 0 {
		return nil, &ParseError{name, max(line, 1), fmt.Errorf("%w (want lines like \"  1048576  262144  float  sum  -1  52.1  20.13  35.23  0  51.9  20.20  35.35  0\"; %d other lines skipped)", ErrNoData, lg.Skipped)}
	}
	if len(ranks) > 0 {
		if err := checkRankLines(ranks, threads, gpus); err != nil {
			return nil, &ParseError{name, max(headerAt, 1), err}
		}
		lg.Ranks = len(ranks)
		for k := 0; k < 1<<16 && len(lg.Devices) < len(ranks); k++ {
			if d, ok := ranks[k]; ok {
				lg.Devices = append(lg.Devices, d)
			}
		}
	} else if threads > 0 && gpus > 0 {
		lg.Ranks = threads * gpus
	}
	sr.devices(lg.Devices)
	return lg, nil
}

// checkRankLines refuses rank lines that cannot be every rank of the run:
// nccl-tests lists ranks 0 to n-1, the threads x GPUs of each process for
// every process, so a gap, or fewer lines than a process runs, is a log
// whose rank lines were cut or edited out. Fitted, it would be a
// collective over the ranks it lists, which is not the size that ran.
func checkRankLines(ranks map[int]string, threads, gpus int) error {
	ks := slices.Sorted(maps.Keys(ranks))
	gap := ks[0] != 0 || ks[len(ks)-1] != len(ks)-1
	per := threads * gpus
	if !gap && (per <= 0 || len(ks)%per == 0) {
		return nil
	}
	var spans []string
	for i := 0; i < len(ks); {
		j := i
		for j+1 < len(ks) && ks[j+1] == ks[j]+1 {
			j++
		}
		if j > i {
			spans = append(spans, fmt.Sprintf("%d-%d", ks[i], ks[j]))
		} else {
			spans = append(spans, strconv.Itoa(ks[i]))
		}
		i = j + 1
	}
	listed := fmt.Sprintf("the log lists %d rank lines (ranks %s)", len(ks), strings.Join(spans, ", "))
	if per > 0 {
		return fmt.Errorf("%w: the header's nThread %d nGpus %d runs %d ranks in each process, and %s: rank lines are missing, so the ranks that ran are not known", ErrPartial, threads, gpus, per, listed)
	}
	return fmt.Errorf("%w: %s: rank lines are missing, so the ranks that ran are not known", ErrPartial, listed)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// mixed is the error for a second run that starts at line after rows rows
// of the first.
func mixed(name string, line int, second string, rows int, first string) error {
	return &ParseError{name, line, fmt.Errorf("%w: %s starts after %d result rows of %s; want one collective and one rank count per log (split the file before line %d)",
		ErrMixed, second, rows, first, line)}
}

// parseRow parses the fields of a result row: two integers, a type, up to
// two optional columns (redop, root), then four result columns per
// placement (time, algbw, busbw, #wrong); with per-iteration timing
// (perIter, or exactly 21 fields) redop and root are always there and
// each placement has eight (the four, then i_min, i_max, i_p99, i_cv%).
// wrong is the larger of the two #wrong counts (0 for "N/A"); under
// maxDelta (a heading of nccl-tests 2.10 or earlier) that column is the
// largest deviation, a number >= 0, and counts no wrong rows.
// A line that is not a row (its first two fields are not a size and a
// count) gives ok false and no problem; one that starts like a row but is
// not one gives the problem, for a garbled or cut row. A row with no time
// > 0 is not used: ok false, no problem.
func parseRow(f []string, perIter, maxDelta bool) (r Row, wrong int64, ok bool, problem string) {
	if len(f) < 2 {
		return r, 0, false, ""
	}
	var err error
	if r.Bytes, err = strconv.ParseInt(f[0], 10, 64); err != nil || r.Bytes < 0 {
		return r, 0, false, ""
	}
	if r.Count, err = strconv.ParseInt(f[1], 10, 64); err != nil || r.Count < 0 {
		return r, 0, false, ""
	}
	perIter = perIter || len(f) == 21
	per := 4 // result columns per placement
	if perIter {
		if len(f) != 21 {
			return r, 0, false, fmt.Sprintf("%d columns, want size count type redop root and time algbw busbw #wrong i_min i_max i_p99 i_cv%% out of place and in place (21)", len(f))
		}
		per = 8
	} else if len(f) < 11 || len(f) > 13 {
		return r, 0, false, fmt.Sprintf("%d columns, want size count type [redop [root]] and time algbw busbw #wrong out of place and in place (11 to 13)", len(f))
	}
	r.Type, r.Root = f[2], -1
	extra := f[3 : len(f)-2*per]
	if len(extra) >= 1 {
		r.RedOp = extra[0]
	}
	if len(extra) == 2 {
		if r.Root, err = strconv.Atoi(extra[1]); err != nil {
			return r, 0, false, fmt.Sprintf("root %q: want an integer", f[4])
		}
	}
	names := []string{"time", "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%"}
	vals := make([]float64, 2*per)
	for i, s := range f[len(f)-2*per:] {
		name := names[i%per]
		if i >= per {
			name = "in-place " + name
		}
		if i%per == 3 && maxDelta { // error: a deviation or N/A
			if v, err := strconv.ParseFloat(s, 64); s != "N/A" && (err != nil || !(v >= 0) || math.IsInf(v, 0)) {
				return r, 0, false, fmt.Sprintf("%s %q: want the largest deviation (a number >= 0) or N/A", strings.Replace(name, "#wrong", "error", 1), s)
			}
			continue
		}
		if i%per == 3 { // #wrong: an integer or N/A
			if s != "N/A" {
				n, err := strconv.ParseInt(s, 10, 64)
				if err != nil || n < 0 {
					return r, 0, false, fmt.Sprintf("%s %q: want a count >= 0 or N/A", name, s)
				}
				wrong = max(wrong, n)
			}
			continue
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return r, 0, false, fmt.Sprintf("%s %q: want a finite number >= 0", name, s)
		}
		vals[i] = v
	}
	r.OutTimeUs, r.OutAlgBWGBps, r.OutBusBWGBps = vals[0], vals[1], vals[2]
	r.InTimeUs, r.InAlgBWGBps, r.InBusBWGBps = vals[per], vals[per+1], vals[per+2]
	if perIter {
		r.OutIter = &PerIter{MinUs: vals[4], MaxUs: vals[5], P99Us: vals[6], CVPct: vals[7]}
		r.InIter = &PerIter{MinUs: vals[12], MaxUs: vals[13], P99Us: vals[14], CVPct: vals[15]}
	}
	if r.OutTimeUs <= 0 && r.InTimeUs <= 0 {
		return r, 0, false, ""
	}
	return r, wrong, true, ""
}

// lastByteReader remembers the last byte read, so the parser can tell a
// last line cut before its newline.
type lastByteReader struct {
	r    io.Reader
	last byte
}

func (l *lastByteReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if n > 0 {
		l.last = p[n-1]
	}
	return n, err
}

// truncate shortens a quoted line to what a one-line message holds.
func truncate(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

// Times returns the measured times of a row: out-of-place and in-place,
// those that are > 0.
func (r *Row) Times() []float64 {
	var t []float64
	if r.OutTimeUs > 0 {
		t = append(t, r.OutTimeUs)
	}
	if r.InTimeUs > 0 {
		t = append(t, r.InTimeUs)
	}
	return t
}
