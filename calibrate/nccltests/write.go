package nccltests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// BusFactor is nccl-tests' ratio busbw / algbw for op on ranks ranks
// (nccl-tests doc/PERFORMANCE.md): 2(n-1)/n for all-reduce, (n-1)/n for
// all-gather, reduce-scatter and all-to-all, 1 for broadcast, reduce and
// send/recv.
func BusFactor(op string, ranks int) (float64, error) {
	if ranks < 1 {
		return 0, fmt.Errorf("nccl-tests bus factor: %d ranks: want >= 1", ranks)
	}
	n := float64(ranks)
	switch op {
	case "allreduce":
		return 2 * (n - 1) / n, nil
	case "allgather", "reducescatter", "alltoall":
		return (n - 1) / n, nil
	case "broadcast", "reduce", "sendrecv":
		return 1, nil
	}
	return 0, fmt.Errorf("nccl-tests bus factor: collective %q: want allreduce, allgather, reducescatter, alltoall, broadcast, reduce or sendrecv", op)
}

// Binary is the nccl-tests program that measures op ("allreduce" ->
// "all_reduce_perf"); "" for a collective nccl-tests has no program for.
func Binary(op string) string {
	for bin, o := range opByBinary {
		if o == op {
			return bin + "_perf"
		}
	}
	return ""
}

// DefaultElemBytes is the element size of nccl-tests' default datatype,
// float (its -d flag's default).
const DefaultElemBytes = 4

// SizeAsRun is the size column nccl-tests prints for a requested size
// (its -b/-e/-f values) of op on ranks ranks with elements of elemBytes
// bytes, as its setupArgs and each test's GetCollByteCount size the
// buffers (src/common.cu, src/all_gather.cu, src/reduce_scatter.cu,
// src/alltoall.cu): count = bytes / elemBytes, whole elements; all-reduce,
// broadcast, reduce and send/recv run that count; all-gather,
// reduce-scatter and all-to-all run count / ranks elements a rank,
// rounded down to a multiple of 16 bytes, so ranks times that (the size
// column is the larger of the send and receive buffers). 0 when the size
// holds less than that.
func SizeAsRun(op string, ranks int, bytes int64, elemBytes int) (int64, error) {
	if ranks < 1 || elemBytes < 1 || elemBytes > 16 || 16%elemBytes != 0 || bytes < 0 {
		return 0, fmt.Errorf("nccl-tests size: %d B of %d-byte elements on %d ranks: want bytes >= 0, element bytes dividing 16, ranks >= 1", bytes, elemBytes, ranks)
	}
	e := int64(elemBytes)
	count := bytes / e
	switch op {
	case "allreduce", "broadcast", "reduce", "sendrecv":
		return count * e, nil
	case "allgather", "reducescatter", "alltoall":
		base := count / int64(ranks) &^ (16/e - 1)
		return base * int64(ranks) * e, nil
	}
	return 0, fmt.Errorf("nccl-tests size: collective %q: want allreduce, allgather, reducescatter, alltoall, broadcast, reduce or sendrecv", op)
}

// NewRow is one result row in nccl-tests' conventions: bytes is the size
// column (all-reduce: the buffer; all-gather: the gathered output;
// reduce-scatter: the input; all-to-all: one rank's send buffer), count
// its elements of elemBytes bytes each, the reduction "sum" for the
// reducing collectives and "none" otherwise, root -1; algbw = bytes / time
// (GB/s with time in microseconds: bytes / 1e3 / us) and busbw = algbw x
// BusFactor. A time of 0 means not measured (its bandwidths are 0 too).
func NewRow(op string, ranks int, bytes int64, elemBytes int, typ string, outUs, inUs float64) (Row, error) {
	f, err := BusFactor(op, ranks)
	if err != nil {
		return Row{}, err
	}
	if bytes < 0 || elemBytes < 1 || outUs < 0 || inUs < 0 || (outUs == 0 && inUs == 0) {
		return Row{}, fmt.Errorf("nccl-tests row: bytes %d, element bytes %d, times %g/%g us: want bytes >= 0, element bytes >= 1, times >= 0 and one > 0", bytes, elemBytes, outUs, inUs)
	}
	r := Row{Bytes: bytes, Count: bytes / int64(elemBytes), Type: typ, RedOp: "none", Root: -1, OutTimeUs: outUs, InTimeUs: inUs}
	if op == "allreduce" || op == "reducescatter" || op == "reduce" {
		r.RedOp = "sum"
	}
	bw := func(us float64) float64 {
		if us <= 0 {
			return 0
		}
		return float64(bytes) / 1e3 / us
	}
	r.OutAlgBWGBps, r.InAlgBWGBps = bw(outUs), bw(inUs)
	r.OutBusBWGBps, r.InBusBWGBps = r.OutAlgBWGBps*f, r.InAlgBWGBps*f
	return r, nil
}

// WriteOptions are the facts of a run that Write puts in the header.
type WriteOptions struct {
	// Comments are written first, one "# " line each (what ran, where,
	// how it was timed).
	Comments []string
	// Host and Pid go on the rank lines ("-" and 0 when unknown).
	Host string
	Pid  int
	// Warmup and Iters are the header's "warmup iters" and "iters";
	// Graph its "graph" flag (CUDA-graph launches).
	Warmup, Iters int
	Graph         bool
}

// perIterRows reports whether any row carries per-iteration timing: Write
// then writes nccl-tests' -I layout.
func perIterRows(lg *Log) bool {
	for _, r := range lg.Rows {
		if r.OutIter != nil || r.InIter != nil {
			return true
		}
	}
	return false
}

// floatStr writes v in width columns as nccl-tests' getFloatStr does: two
// decimals, else one, else none, else exponent notation.
func floatStr(v float64, width int) string {
	for _, prec := range []int{2, 1, 0} {
		if s := fmt.Sprintf("%*.*f", width, prec, v); len(s) <= width {
			return s
		}
	}
	if width >= 7 {
		return fmt.Sprintf("%*.1e", width, v)
	}
	return fmt.Sprintf("%*.0e", width, v)
}

// writable is the nccl-tests program that measures lg's collective, or
// the reason lg cannot be written as its output.
func writable(lg *Log) (string, error) {
	bin := Binary(lg.Op)
	if bin == "" {
		return "", fmt.Errorf("nccl-tests write %s: collective %q: no nccl-tests program measures it", lg.Name, lg.Op)
	}
	if lg.Ranks < 1 || len(lg.Rows) == 0 {
		return "", fmt.Errorf("nccl-tests write %s: %d ranks, %d rows: want at least one of each", lg.Name, lg.Ranks, len(lg.Rows))
	}
	return bin, nil
}

// Write writes lg in nccl-tests' text format, so that Parse (and people
// used to nccl-tests) read it back: the comments, the nThread/nGpus header
// of one process driving lg.Ranks devices, a rank line per device
// (lg.Devices, "-" where none is named), the column headings and one row
// per lg.Rows entry, then the average bus bandwidth. The #wrong columns
// are N/A (the header says validation 0): Write does not know whether
// results were checked. lg.Op must be a collective nccl-tests has a
// program for.
func Write(w io.Writer, lg *Log, o WriteOptions) error {
	bin, err := writable(lg)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	for _, c := range o.Comments {
		fmt.Fprintf(bw, "# %s\n", strings.ReplaceAll(c, "\n", " "))
	}
	minB, maxB := lg.Rows[0].Bytes, lg.Rows[0].Bytes
	for _, r := range lg.Rows {
		minB, maxB = min(minB, r.Bytes), max(maxB, r.Bytes)
	}
	graph := 0
	if o.Graph {
		graph = 1
	}
	perIter := perIterRows(lg)
	fmt.Fprintf(bw, "# Collective test starting: %s\n", bin)
	fmt.Fprintf(bw, "# nThread 1 nGpus %d minBytes %d maxBytes %d warmup iters: %d iters: %d agg iters: 1 validation: 0 graph: %d\n",
		lg.Ranks, minB, maxB, o.Warmup, o.Iters, graph)
	if perIter {
		fmt.Fprintf(bw, "# Per-Iteration Report: CUDA event timing; i_* uses max over process rows \n")
	}
	fmt.Fprintf(bw, "#\n# Using devices\n")
	host := o.Host
	if host == "" {
		host = "-"
	}
	for k := range lg.Ranks {
		name := "-"
		if k < len(lg.Devices) && lg.Devices[k] != "" {
			name = lg.Devices[k]
		}
		fmt.Fprintf(bw, "#  Rank %2d Group  0 Pid %6d on %10s device %2d [-] %s\n", k, o.Pid, host, k, name)
	}
	if perIter {
		// writeResultHeader's -I heading (src/util.cu).
		fmt.Fprintf(bw, "#\n# %10s  %12s  %8s  %6s  %6s              out-of-place (+ per-iteration)                                in-place (+ per-iteration)\n", "", "", "", "", "")
		fmt.Fprintf(bw, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s\n",
			"size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%",
			"time", "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%")
		fmt.Fprintf(bw, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s\n",
			"(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)")
	} else {
		fmt.Fprintf(bw, "#\n#%118s\n", "out-of-place                       in-place          ")
		fmt.Fprintf(bw, "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong")
		fmt.Fprintf(bw, "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")
	}
	sum := 0.0
	for _, r := range lg.Rows {
		redop, typ := r.printedOp()
		if perIter {
			iter := func(p *PerIter) string {
				if p == nil {
					p = &PerIter{}
				}
				return fmt.Sprintf("%s  %s  %s  %s", floatStr(p.MinUs, 7), floatStr(p.MaxUs, 7), floatStr(p.P99Us, 7), floatStr(p.CVPct, 7))
			}
			fmt.Fprintf(bw, "%12d  %12d  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %6s  %s  %7s  %6.2f  %6.2f  %6s  %s\n",
				r.Bytes, r.Count, typ, redop, r.Root, fmtTime(r.OutTimeUs), r.OutAlgBWGBps, r.OutBusBWGBps, "N/A", iter(r.OutIter),
				fmtTime(r.InTimeUs), r.InAlgBWGBps, r.InBusBWGBps, "N/A", iter(r.InIter))
		} else {
			fmt.Fprintf(bw, "%12d  %12d  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %6s  %7s  %6.2f  %6.2f  %6s\n",
				r.Bytes, r.Count, typ, redop, r.Root, fmtTime(r.OutTimeUs), r.OutAlgBWGBps, r.OutBusBWGBps, "N/A", fmtTime(r.InTimeUs), r.InAlgBWGBps, r.InBusBWGBps, "N/A")
		}
		sum += r.OutBusBWGBps
	}
	fmt.Fprintf(bw, "# Out of bounds values : N/A (not validated)\n# Avg bus bandwidth    : %.5g \n#\n", sum/float64(len(lg.Rows)))
	return bw.Flush()
}

// fmtTime writes a time as nccl-tests does, with two decimals (three
// significant digits more than its 0.01 us resolution needs below 1 us).
func fmtTime(us float64) string {
	return strconv.FormatFloat(us, 'f', timeDecimals(us), 64)
}

// timeDecimals is how many decimals fmtTime writes for a time of us
// microseconds: none from 10000 us (nccl-tests' %7.0f there keeps the
// column's width), four below 1 us, else two.
func timeDecimals(us float64) int {
	switch {
	case us >= 10000:
		return 0
	case us > 0 && us < 1:
		return 4
	}
	return 2
}

// TimeUnitUs is the unit of the last digit Write prints for a time of us
// microseconds: 1 from 10000 us, 0.0001 below 1 us, else 0.01. Write
// rounds to nearest, so a time Parse reads back differs from the one
// written by at most half of it (plus the float error of the decimal).
func TimeUnitUs(us float64) float64 {
	return math.Pow10(-timeDecimals(us))
}

// ReadBackTolUs bounds how far a time Parse reads from Write's output lies
// from the time us written: half the unit of its last printed digit
// (TimeUnitUs), plus two float64 ulps for the decimal's own rounding and
// the difference (46.805 written "46.80" reads back 0.005000000000002
// away in float64).
func ReadBackTolUs(us float64) float64 {
	unit := TimeUnitUs(us)
	a := math.Max(math.Abs(us), unit)
	return unit/2 + 2*(math.Nextafter(a, math.Inf(1))-a)
}

// WriteJSON writes lg as nccl-tests' -J document (format JSONVersion,
// src/util.cu): args naming the program, the configuration of one
// process driving lg.Ranks devices, a result per row (its times and
// bandwidths, nwrong null as validation did not run, each placement's
// per-iteration timing when the row has it) and the average bus
// bandwidth; the comments go under "tpscope_comments". Parse reads it
// back.
func WriteJSON(w io.Writer, lg *Log, o WriteOptions) error {
	bin, err := writable(lg)
	if err != nil {
		return err
	}
	graph := 0
	if o.Graph {
		graph = 1
	}
	host := o.Host
	if host == "" {
		host = "-"
	}
	minB, maxB := lg.Rows[0].Bytes, lg.Rows[0].Bytes
	for _, r := range lg.Rows {
		minB, maxB = min(minB, r.Bytes), max(maxB, r.Bytes)
	}
	// One process, as Write's header says: nccl-tests then lists its
	// first device only.
	dev := "-"
	if len(lg.Devices) > 0 && lg.Devices[0] != "" {
		dev = lg.Devices[0]
	}
	doc := jsonDoc{Version: JSONVersion, Args: []string{bin}, Comments: o.Comments, Errors: []string{},
		Config: &jsonConf{NThreads: 1, NGpus: lg.Ranks, MinBytes: minB, MaxBytes: maxB, StepFactor: 2, Warmup: o.Warmup, Iters: o.Iters, AggIters: 1,
			Graph: graph, PerIterTiming: jsonBool(perIterRows(lg)), Devices: []jsonDevice{{Pid: o.Pid, Hostname: host, DeviceHex: "-", DeviceInfo: dev}}}}
	sum := 0.0
	for _, r := range lg.Rows {
		redop, typ := r.printedOp()
		place := func(us, alg, bus float64) *jsonPlace {
			t := jsonFloat(us)
			return &jsonPlace{Time: &t, AlgBW: jsonFloat(alg), BusBW: jsonFloat(bus)}
		}
		iter := func(p *PerIter) *jsonPerIter {
			if p == nil {
				return nil
			}
			j := &jsonPerIter{Skipped: p.Skipped, MinUs: jsonFloat(p.MinUs), MaxUs: jsonFloat(p.MaxUs), AvgUs: jsonFloat(p.AvgUs), P50Us: jsonFloat(p.P50Us),
				P95Us: jsonFloat(p.P95Us), P99Us: jsonFloat(p.P99Us), StdevUs: jsonFloat(p.StdevUs), CVPct: jsonFloat(p.CVPct), TimesUs: []jsonFloat{}}
			for _, t := range p.TimesUs {
				j.TimesUs = append(j.TimesUs, jsonFloat(t))
			}
			return j
		}
		doc.Results = append(doc.Results, jsonRow{Size: r.Bytes, Count: r.Count, Type: typ, RedOp: redop, Root: fmt.Sprintf("%6d", r.Root),
			Out: place(r.OutTimeUs, r.OutAlgBWGBps, r.OutBusBWGBps), OutIter: iter(r.OutIter),
			In: place(r.InTimeUs, r.InAlgBWGBps, r.InBusBWGBps), InIter: iter(r.InIter), Actual: o.Iters})
		sum += r.OutBusBWGBps
	}
	doc.OutOfBound = &struct {
		Count int      `json:"count"`
		Okay  jsonBool `json:"okay"`
	}{0, true}
	doc.AvgBusBW = &struct {
		Bandwidth jsonFloat `json:"bandwidth"`
		Okay      any       `json:"okay"`
	}{jsonFloat(sum / float64(len(lg.Rows))), "unchecked"}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(&doc)
}

// printedOp is the row's reduction and type as nccl-tests prints them:
// "none" for a collective without one, "-" for an untyped row.
func (r *Row) printedOp() (redop, typ string) {
	redop, typ = r.RedOp, r.Type
	if redop == "" {
		redop = "none"
	}
	if typ == "" {
		typ = "-"
	}
	return redop, typ
}
