package nccltests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/tpscope/tpscope/internal/jsonerr"
)

// JSONVersion is the version of nccl-tests' JSON output this package
// reads and writes (JSON_FILE_VERSION in src/util.cu, v2.19.6).
const JSONVersion = 3

// maxJSONBytes bounds a JSON log (the per-iteration lists of many sizes
// and processes included).
const maxJSONBytes = 1 << 30

// isJSON reports whether the input's first non-space byte opens an
// object, without consuming it.
func isJSON(br *bufio.Reader) bool {
	for i := 1; ; i++ {
		b, err := br.Peek(i)
		if err != nil || len(b) < i {
			return false
		}
		switch c := b[i-1]; c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return true
		default:
			return false
		}
	}
}

// jsonFloat is a number nccl-tests wrote with jsonDouble: a number, or
// the string "nan" (NaN).
type jsonFloat float64

func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		if strings.EqualFold(strings.TrimSpace(s), "nan") {
			*f = jsonFloat(math.NaN())
			return nil
		}
		// A type error, so that the decoder names the field it is in.
		return &json.UnmarshalTypeError{Value: "string " + strconv.Quote(s), Type: reflect.TypeFor[jsonFloat]()}
	}
	var v float64
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*f = jsonFloat(v)
	return nil
}

// jsonBool is a flag nccl-tests wrote with jsonBool: the string "true"
// or "false" (jsonStr of the word); a bare boolean is read too.
type jsonBool bool

func (b *jsonBool) UnmarshalJSON(data []byte) error {
	var s string
	if json.Unmarshal(data, &s) == nil {
		switch s {
		case "true":
			*b = true
			return nil
		case "false":
			*b = false
			return nil
		}
		return fmt.Errorf("want \"true\" or \"false\", got %q", s)
	}
	var v bool
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*b = jsonBool(v)
	return nil
}

func (b jsonBool) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(strconv.FormatBool(bool(b)))), nil
}

// MarshalJSON writes the value as nccl-tests' jsonDouble does: "%lf" (six
// decimals), the string "nan" for NaN.
func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) {
		return []byte(`"nan"`), nil
	}
	if math.IsInf(v, 0) {
		return nil, fmt.Errorf("nccl-tests JSON: %v is not a number nccl-tests writes", v)
	}
	return strconv.AppendFloat(nil, v, 'f', 6, 64), nil
}

// jsonDoc is the document nccl-tests -J writes (writeDeviceReport,
// writeResultHeader, writeBenchmarkLine*, writePerIterReport,
// writeResultFooter, writeErrors).
type jsonDoc struct {
	Version    int       `json:"version"`
	StartTime  string    `json:"start_time,omitempty"`
	Args       []string  `json:"args"`
	Env        []string  `json:"env,omitempty"`
	NCCL       int       `json:"nccl_version,omitempty"`
	Config     *jsonConf `json:"config"`
	Results    []jsonRow `json:"results"`
	OutOfBound *struct {
		Count int      `json:"count"`
		Okay  jsonBool `json:"okay"`
	} `json:"out_of_bounds,omitempty"`
	AvgBusBW *struct {
		Bandwidth jsonFloat `json:"bandwidth"`
		Okay      any       `json:"okay"`
	} `json:"average_bus_bandwidth,omitempty"`
	Errors  []string `json:"errors"`
	EndTime string   `json:"end_time,omitempty"`
	// Comments are Write's comments (what ran, how it was timed): a key
	// nccl-tests does not write and readers of its JSON pass over.
	Comments []string `json:"tpscope_comments,omitempty"`
}

type jsonConf struct {
	NThreads      int          `json:"nthreads"`
	NGpus         int          `json:"ngpus"`
	MinBytes      int64        `json:"minimum_bytes"`
	MaxBytes      int64        `json:"maximum_bytes"`
	StepFactor    int64        `json:"step_factor,omitempty"`
	StepBytes     int64        `json:"step_bytes,omitempty"`
	Warmup        int          `json:"warmup_iters"`
	Iters         int          `json:"iterations"`
	AggIters      int          `json:"aggregated_iterations"`
	Validation    int          `json:"validation"`
	Graph         int          `json:"graph"`
	Blocking      jsonBool     `json:"blocking_collectives"`
	PerIterTiming jsonBool     `json:"per_iter_timing"`
	PerIterSkip   int          `json:"per_iter_skip"`
	ParallelInit  jsonBool     `json:"parallel_init"`
	Devices       []jsonDevice `json:"devices"`
}

type jsonDevice struct {
	Rank       int    `json:"rank"`
	Group      int    `json:"group"`
	Pid        int    `json:"pid"`
	Hostname   string `json:"hostname"`
	Device     int    `json:"device"`
	DeviceHex  string `json:"device_hex"`
	DeviceInfo string `json:"device_info"`
}

type jsonRow struct {
	Size    int64        `json:"size"`
	Count   int64        `json:"count"`
	Type    string       `json:"type"`
	RedOp   string       `json:"redop"`
	Root    string       `json:"root"`
	Out     *jsonPlace   `json:"out_of_place"`
	OutIter *jsonPerIter `json:"out_of_place_per_iter,omitempty"`
	In      *jsonPlace   `json:"in_place"`
	InIter  *jsonPerIter `json:"in_place_per_iter,omitempty"`
	Actual  int          `json:"actual_iterations"`
	Name    string       `json:"experiment_name"`
}

type jsonPlace struct {
	Time    *jsonFloat `json:"time,omitempty"`
	CPUTime *jsonFloat `json:"cpu_time,omitempty"`
	AlgBW   jsonFloat  `json:"alg_bw"`
	BusBW   jsonFloat  `json:"bus_bw"`
	NWrong  *jsonFloat `json:"nwrong"`
}

type jsonPerIter struct {
	Skipped   int           `json:"skipped_iterations"`
	MinUs     jsonFloat     `json:"min_us"`
	MaxUs     jsonFloat     `json:"max_us"`
	AvgUs     jsonFloat     `json:"avg_us"`
	P50Us     jsonFloat     `json:"p50_us"`
	P95Us     jsonFloat     `json:"p95_us"`
	P99Us     jsonFloat     `json:"p99_us"`
	StdevUs   jsonFloat     `json:"stdev_us"`
	CVPct     jsonFloat     `json:"cv_pct"`
	TimesUs   []jsonFloat   `json:"times_us"`
	PerProcUs [][]jsonFloat `json:"per_process_max_times_us,omitempty"`
}

// parseJSON reads an nccl-tests -J document into lg: the collective from
// the program in args[0] (else the file name), ranks from the
// configuration (threads x GPUs per process x processes, each process
// listing one device), a row per result with its per-iteration timing,
// and through sr the NCCL settings its "env" list and tpscope's comments
// record and whether its devices are CPU ranks. A document that ends before its closing brace (a run killed mid-way) is
// ErrPartial; a version other than JSONVersion, no results, or a value out
// of range is a *ParseError naming the field.
func parseJSON(r io.Reader, lg *Log, sr *settingsReader) (*Log, error) {
	name := lg.Name
	data, err := io.ReadAll(io.LimitReader(r, maxJSONBytes+1))
	if err != nil {
		return nil, &ParseError{name, 1, err}
	}
	if len(data) > maxJSONBytes {
		return nil, &ParseError{name, 1, fmt.Errorf("JSON log larger than %d bytes", maxJSONBytes)}
	}
	var doc jsonDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		line := 1 + bytes.Count(data, []byte("\n"))
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line = 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
			if strings.Contains(err.Error(), "unexpected end of JSON input") {
				return nil, &ParseError{name, line, fmt.Errorf("%w: the JSON document ends at byte %d before its closing brace (nccl-tests writes it when the run ends): the run was cut", ErrPartial, len(data))}
			}
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			// The decoder knows the offset of its own type errors, not of
			// a field's decoder (jsonFloat): no line rather than the last.
			line = 1
			if te.Offset > 0 {
				line = 1 + bytes.Count(data[:min(int(te.Offset), len(data))], []byte("\n"))
			}
			want := jsonerr.Kind(te.Type)
			if te.Type == reflect.TypeFor[jsonFloat]() {
				want = `a number or "nan"`
			}
			return nil, &ParseError{name, line, fmt.Errorf("field %q: want %s, got %s", te.Field, want, te.Value)}
		}
		return nil, &ParseError{name, line, fmt.Errorf("not nccl-tests JSON (want the document nccl-tests -J writes)")}
	}
	if doc.Version != JSONVersion {
		return nil, &ParseError{name, 1, fmt.Errorf("field \"version\": %d, want %d (nccl-tests 2.19's JSON)", doc.Version, JSONVersion)}
	}
	lg.JSONVersion = doc.Version
	if len(doc.Args) > 0 {
		if m := reTest.FindStringSubmatch(filepath.Base(doc.Args[0])); m != nil {
			lg.Op = opByBinary[m[1]]
		}
	}
	if c := doc.Config; c != nil {
		if c.NThreads < 0 || c.NGpus < 0 || c.NThreads > 1<<10 || c.NGpus > 1<<10 {
			return nil, &ParseError{name, 1, fmt.Errorf("field \"config.nthreads\"/\"ngpus\": %d x %d: want 1 to 1024 each", c.NThreads, c.NGpus)}
		}
		procs := max(1, len(c.Devices))
		lg.Ranks = max(1, c.NThreads) * max(1, c.NGpus) * procs
		lg.Iters, lg.Warmup = c.Iters, c.Warmup
		for _, d := range c.Devices {
			lg.Devices = append(lg.Devices, strings.TrimSpace(d.DeviceInfo))
		}
	}
	sr.devices(lg.Devices)
	for _, c := range doc.Comments {
		if err := sr.comment(c, 0); err != nil {
			return nil, err
		}
	}
	for _, e := range doc.Env {
		if m := reEnvPair.FindStringSubmatch(strings.TrimSpace(e)); m != nil {
			if err := sr.record(m[1], m[2], 0); err != nil {
				return nil, err
			}
		}
	}
	if err := placementsEverywhere(name, doc.Results); err != nil {
		return nil, err
	}
	wrong, firstWrong := 0, 0
	for i, jr := range doc.Results {
		where := fmt.Sprintf("results[%d]", i)
		row := Row{Line: i + 1, Bytes: jr.Size, Count: jr.Count, Type: jr.Type, RedOp: jr.RedOp, Root: -1}
		if jr.Size < 0 || jr.Count < 0 {
			return nil, &ParseError{name, 1, fmt.Errorf("field %q: size %d, count %d: want >= 0", where, jr.Size, jr.Count)}
		}
		if rs := strings.TrimSpace(jr.Root); rs != "" {
			if row.Root, err = strconv.Atoi(rs); err != nil {
				return nil, &ParseError{name, 1, fmt.Errorf("field %q: %q: want an integer", where+".root", jr.Root)}
			}
		}
		nw := 0.0
		for _, pl := range []struct {
			key                string
			p                  *jsonPlace
			it                 *jsonPerIter
			time, algbw, busbw *float64
			iter               **PerIter
		}{
			{"out_of_place", jr.Out, jr.OutIter, &row.OutTimeUs, &row.OutAlgBWGBps, &row.OutBusBWGBps, &row.OutIter},
			{"in_place", jr.In, jr.InIter, &row.InTimeUs, &row.InAlgBWGBps, &row.InBusBWGBps, &row.InIter},
		} {
			if pl.p != nil {
				t := pl.p.Time
				if t == nil {
					t = pl.p.CPUTime
				}
				if t != nil {
					*pl.time = float64(*t)
				}
				*pl.algbw, *pl.busbw = float64(pl.p.AlgBW), float64(pl.p.BusBW)
				for _, v := range []float64{*pl.time, *pl.algbw, *pl.busbw} {
					if v < 0 || math.IsInf(v, 0) {
						return nil, &ParseError{name, 1, fmt.Errorf("field %q: %v: want a finite number >= 0", where+"."+pl.key, v)}
					}
				}
				if math.IsNaN(*pl.time) {
					*pl.time = 0 // not measured
				}
				if pl.p.NWrong != nil && float64(*pl.p.NWrong) > 0 {
					nw = math.Max(nw, float64(*pl.p.NWrong))
				}
			}
			if it := pl.it; it != nil {
				pi := &PerIter{MinUs: float64(it.MinUs), MaxUs: float64(it.MaxUs), P99Us: float64(it.P99Us), CVPct: float64(it.CVPct),
					AvgUs: float64(it.AvgUs), P50Us: float64(it.P50Us), P95Us: float64(it.P95Us), StdevUs: float64(it.StdevUs), Skipped: it.Skipped}
				for _, t := range it.TimesUs {
					pi.TimesUs = append(pi.TimesUs, float64(t))
				}
				if it.Skipped < 0 || it.Skipped > len(it.TimesUs) {
					return nil, &ParseError{name, 1, fmt.Errorf("field %q: %d skipped of %d iterations", where+"."+pl.key+"_per_iter.skipped_iterations", it.Skipped, len(it.TimesUs))}
				}
				*pl.iter = pi
			}
		}
		if nw > 0 {
			wrong++
			if firstWrong == 0 {
				firstWrong = i + 1
			}
		}
		if row.OutTimeUs <= 0 && row.InTimeUs <= 0 {
			lg.Skipped++
			if lg.FirstSkipped == 0 {
				lg.FirstSkipped = i + 1
			}
			continue
		}
		lg.Rows = append(lg.Rows, row)
	}
	if wrong > 0 {
		lg.Warnings = append(lg.Warnings, fmt.Sprintf("%d of %d results report nwrong > 0 (first results[%d]): the collective returned wrong data there; its times are used but the run is suspect",
			wrong, len(lg.Rows), firstWrong-1))
	}
	if len(lg.Rows) == 0 {
		return nil, &ParseError{name, 1, fmt.Errorf("%w (the JSON document's results list has no timed size)", ErrNoData)}
	}
	return lg, nil
}

// placementsEverywhere refuses results of which some hold a placement
// (out_of_place, in_place) that another lacks: nccl-tests times the same
// placements at every size, so a result without one the others have is
// a file edited or cut, and read as that placement not run it would be
// a size fitted on half its samples without a word.
func placementsEverywhere(name string, rs []jsonRow) error {
	for _, pl := range []struct {
		key string
		of  func(*jsonRow) *jsonPlace
	}{
		{"out_of_place", func(r *jsonRow) *jsonPlace { return r.Out }},
		{"in_place", func(r *jsonRow) *jsonPlace { return r.In }},
	} {
		has, lacks := -1, -1
		for i := range rs {
			if pl.of(&rs[i]) != nil {
				has = max(has, i)
			} else if lacks < 0 {
				lacks = i
			}
		}
		if has >= 0 && lacks >= 0 {
			return &ParseError{name, 1, fmt.Errorf("field \"results[%d].%s\": missing, and results[%d] has it: want the same placements at every size (nccl-tests times each at every size; the file was edited or cut)", lacks, pl.key, has)}
		}
	}
	return nil
}

// IterStats summarizes per-iteration times (us) as nccl-tests does
// (computeIterStats, src/util.cu): over the times after the first skip,
// min, max, mean, the element at n/2 (p50), p95 and p99 at the
// nearest-rank index min(n-1, ceil(n p / 100) - 1), the population
// standard deviation and the coefficient of variation in %. times is
// kept whole in TimesUs. skip must leave at least one time.
func IterStats(times []float64, skip int) (*PerIter, error) {
	if skip < 0 || skip >= len(times) {
		return nil, fmt.Errorf("nccl-tests per-iteration stats: %d times, skip %d: want skip in [0, %d)", len(times), skip, len(times))
	}
	s := slices.Clone(times[skip:])
	slices.Sort(s)
	n := len(s)
	idx := func(p int) int { return min(n-1, (n*p+99)/100-1) }
	sum := 0.0
	for _, v := range s {
		sum += v
	}
	avg := sum / float64(n)
	va := 0.0
	for _, v := range s {
		va += (v - avg) * (v - avg)
	}
	sd := math.Sqrt(va / float64(n))
	cv := 0.0
	if avg > 0 {
		cv = sd / avg * 100
	}
	return &PerIter{MinUs: s[0], MaxUs: s[n-1], AvgUs: avg, P50Us: s[n/2], P95Us: s[idx(95)], P99Us: s[idx(99)], StdevUs: sd, CVPct: cv,
		TimesUs: slices.Clone(times), Skipped: skip}, nil
}
