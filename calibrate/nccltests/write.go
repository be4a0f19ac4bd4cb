package nccltests

import (
	"bufio"
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

// Write writes lg in nccl-tests' text format, so that Parse (and people
// used to nccl-tests) read it back: the comments, the nThread/nGpus header
// of one process driving lg.Ranks devices, a rank line per device
// (lg.Devices, "-" where none is named), the column headings and one row
// per lg.Rows entry, then the average bus bandwidth. The #wrong columns
// are N/A (the header says validation 0): Write does not know whether
// results were checked. lg.Op must be a collective nccl-tests has a
// program for.
func Write(w io.Writer, lg *Log, o WriteOptions) error {
	bin := Binary(lg.Op)
	if bin == "" {
		return fmt.Errorf("nccl-tests write %s: collective %q: no nccl-tests program measures it", lg.Name, lg.Op)
	}
	if lg.Ranks < 1 || len(lg.Rows) == 0 {
		return fmt.Errorf("nccl-tests write %s: %d ranks, %d rows: want at least one of each", lg.Name, lg.Ranks, len(lg.Rows))
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
	fmt.Fprintf(bw, "# Collective test starting: %s\n", bin)
	fmt.Fprintf(bw, "# nThread 1 nGpus %d minBytes %d maxBytes %d warmup iters: %d iters: %d agg iters: 1 validation: 0 graph: %d\n#\n# Using devices\n",
		lg.Ranks, minB, maxB, o.Warmup, o.Iters, graph)
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
	fmt.Fprintf(bw, "#\n#%118s\n", "out-of-place                       in-place          ")
	fmt.Fprintf(bw, "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong")
	fmt.Fprintf(bw, "#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "")
	sum := 0.0
	for _, r := range lg.Rows {
		redop, typ := r.RedOp, r.Type
		if redop == "" {
			redop = "none"
		}
		if typ == "" {
			typ = "-"
		}
		fmt.Fprintf(bw, "%12d  %12d  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %6s  %7s  %6.2f  %6.2f  %6s\n",
			r.Bytes, r.Count, typ, redop, r.Root, fmtTime(r.OutTimeUs), r.OutAlgBWGBps, r.OutBusBWGBps, "N/A", fmtTime(r.InTimeUs), r.InAlgBWGBps, r.InBusBWGBps, "N/A")
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
