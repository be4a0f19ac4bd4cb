package nccltests

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
)

// TestBusFactor: nccl-tests' factors (doc/PERFORMANCE.md), by hand for 8
// ranks: all-reduce 2 x 7/8 = 1.75, the gathers and all-to-all 7/8.
func TestBusFactor(t *testing.T) {
	for _, tc := range []struct {
		op    string
		ranks int
		want  float64
	}{
		{"allreduce", 8, 1.75}, {"allreduce", 2, 1}, {"allgather", 8, 0.875}, {"reducescatter", 4, 0.75},
		{"alltoall", 8, 0.875}, {"broadcast", 8, 1}, {"allreduce", 1, 0},
	} {
		t.Run(fmt.Sprintf("op=%s/ranks=%d", tc.op, tc.ranks), func(t *testing.T) {
			got, err := BusFactor(tc.op, tc.ranks)
			if err != nil || math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("BusFactor(%s, %d) = %v, %v; want %v", tc.op, tc.ranks, got, err, tc.want)
			}
		})
	}
	for _, bad := range []struct {
		op    string
		ranks int
	}{{"allreduce", 0}, {"bcast", 4}} {
		if _, err := BusFactor(bad.op, bad.ranks); err == nil {
			t.Errorf("BusFactor(%q, %d) accepted", bad.op, bad.ranks)
		}
	}
}

// TestWriteParseRoundTrip: what Write writes, Parse reads back: the
// collective (from the text, the file name saying nothing), the ranks and
// their device names, and every row to the precision of the format (two
// decimals). Row values by hand: 1 MiB all-reduce over 8 ranks in 100 us
// is 1048576 / 1e3 / 100 = 10.48576 GB/s algbw, x 1.75 = 18.35 busbw;
// 524288 elements of 2 bytes.
func TestWriteParseRoundTrip(t *testing.T) {
	devs := []string{"cpu goroutine rank (exec/cpu)", "", "x", "y", "z", "w", "v", "u"}
	for _, tc := range []struct {
		op    string
		ranks int
	}{{"allreduce", 8}, {"allgather", 8}, {"reducescatter", 2}, {"alltoall", 4}} {
		t.Run(tc.op, func(t *testing.T) {
			var rows []Row
			for _, b := range []int64{512, 1 << 20, 64 << 20} {
				r, err := NewRow(tc.op, tc.ranks, b, 2, "bfloat16", 100*float64(b>>10+1)/1024, 0)
				if err != nil {
					t.Fatal(err)
				}
				rows = append(rows, r)
			}
			lg := &Log{Name: "x.txt", Op: tc.op, Ranks: tc.ranks, Devices: devs[:tc.ranks], Rows: rows}
			var buf bytes.Buffer
			if err := Write(&buf, lg, WriteOptions{Comments: []string{"measured by a test", "two\nlines"}, Host: "box", Pid: 42, Warmup: 2, Iters: 5}); err != nil {
				t.Fatal(err)
			}
			back, err := Parse(bytes.NewReader(buf.Bytes()), "log.txt")
			if err != nil {
				t.Fatalf("%v\n%s", err, buf.String())
			}
			if back.Op != tc.op || back.Ranks != tc.ranks || back.Skipped != 0 || len(back.Warnings) != 0 || len(back.Rows) != len(rows) {
				t.Fatalf("read back op %q ranks %d skipped %d warnings %v rows %d\n%s", back.Op, back.Ranks, back.Skipped, back.Warnings, len(back.Rows), buf.String())
			}
			wantDevs := append([]string(nil), devs[:tc.ranks]...)
			for k, d := range wantDevs {
				if d == "" {
					wantDevs[k] = "-" // an unnamed device
				}
			}
			if strings.Join(back.Devices, "|") != strings.Join(wantDevs, "|") {
				t.Errorf("devices %q, want %q", back.Devices, wantDevs)
			}
			for i, r := range back.Rows {
				w := rows[i]
				if r.Bytes != w.Bytes || r.Count != w.Count || r.Type != w.Type || r.RedOp != w.RedOp || r.Root != -1 {
					t.Errorf("row %d: %+v, want %+v", i, r, w)
				}
				// Times to half their printed unit, bandwidths (%6.2f) to
				// half of 0.01, each plus the decimal's float error.
				for _, p := range [][3]float64{{r.OutTimeUs, w.OutTimeUs, ReadBackTolUs(w.OutTimeUs)}, {r.InTimeUs, 0, ReadBackTolUs(0)},
					{r.OutAlgBWGBps, w.OutAlgBWGBps, 0.005 + 1e-12}, {r.OutBusBWGBps, w.OutBusBWGBps, 0.005 + 1e-12}} {
					if math.Abs(p[0]-p[1]) > p[2] {
						t.Errorf("row %d: %v read back as %v (within %v)", i, p[1], p[0], p[2])
					}
				}
			}
		})
	}
	r, err := NewRow("allreduce", 8, 1<<20, 2, "bfloat16", 100, 0)
	if err != nil || r.Count != 524288 || math.Abs(r.OutAlgBWGBps-10.48576) > 1e-9 || math.Abs(r.OutBusBWGBps-18.35008) > 1e-9 || r.RedOp != "sum" || r.InBusBWGBps != 0 {
		t.Errorf("NewRow = %+v, %v", r, err)
	}
}

// TestWriteRefuses: a log Write cannot express is an error naming it.
func TestWriteRefuses(t *testing.T) {
	row, _ := NewRow("allreduce", 2, 512, 2, "bfloat16", 10, 0)
	for _, lg := range []*Log{
		{Name: "a", Op: "hypercube2", Ranks: 2, Rows: []Row{row}},
		{Name: "b", Op: "allreduce", Ranks: 0, Rows: []Row{row}},
		{Name: "c", Op: "allreduce", Ranks: 2},
	} {
		if err := Write(&bytes.Buffer{}, lg, WriteOptions{}); err == nil || !strings.Contains(err.Error(), lg.Name) {
			t.Errorf("%s: err = %v", lg.Name, err)
		}
	}
	if _, err := NewRow("allreduce", 2, 512, 2, "bfloat16", 0, 0); err == nil {
		t.Error("NewRow without a time accepted")
	}
}

// TestTimeUnit: the unit of a time's last printed digit follows Write's
// format (nccl-tests' time column: %.0f from 10000 us, %.4f below 1 us,
// %.2f otherwise), ReadBackTolUs is half of it within float slack, and
// every time read back from Write's output lies within that; among them
// 46.805 us, which Write prints as 46.80 and a fixed 0.005 bound
// rejected.
func TestTimeUnit(t *testing.T) {
	for _, tc := range []struct {
		us, unit float64
		printed  string
	}{
		{46.805, 0.01, "46.80"},
		{1, 0.01, "1.00"},
		{9999.994, 0.01, "9999.99"},
		{10000, 1, "10000"},
		{12345.5, 1, "12346"},
		{0.99996, 0.0001, "1.0000"},
		{0.12345, 0.0001, "0.1235"},
	} {
		if got := TimeUnitUs(tc.us); got != tc.unit {
			t.Errorf("TimeUnitUs(%v) = %v, want %v", tc.us, got, tc.unit)
		}
		if tol := ReadBackTolUs(tc.us); tol < tc.unit/2 || tol > tc.unit/2*(1+1e-9) {
			t.Errorf("ReadBackTolUs(%v) = %v, want %v plus float slack", tc.us, tol, tc.unit/2)
		}
		r, err := NewRow("allgather", 4, 4096, 4, "float", tc.us, 0)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := Write(&buf, &Log{Op: "allgather", Ranks: 4, Rows: []Row{r}}, WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), " "+tc.printed+" ") {
			t.Errorf("%v us: %q not printed:\n%s", tc.us, tc.printed, buf.String())
		}
		back, err := Parse(bytes.NewReader(buf.Bytes()), "all_gather_perf.txt")
		if err != nil || len(back.Rows) != 1 {
			t.Fatalf("%v us: parse: %v", tc.us, err)
		}
		if d := math.Abs(back.Rows[0].OutTimeUs - tc.us); d > ReadBackTolUs(tc.us) {
			t.Errorf("%v us read back as %v: %v away, over %v", tc.us, back.Rows[0].OutTimeUs, d, ReadBackTolUs(tc.us))
		}
	}
}

// TestSizeAsRun: a requested size becomes what nccl-tests runs and
// prints: whole float elements (4 bytes) for all-reduce; for all-gather,
// reduce-scatter and all-to-all a multiple of 16 bytes a rank, times the
// ranks. Worked by hand from nccl-tests' setupArgs (count = size / 4) and
// AllGatherGetCollByteCount (base = (count / ranks) rounded down to a
// multiple of 4 elements).
func TestSizeAsRun(t *testing.T) {
	for _, c := range []struct {
		op          string
		ranks       int
		bytes, want int64
		elem        int
	}{
		{"allreduce", 8, 1001, 1000, 4},     // 250 floats
		{"allreduce", 8, 1000, 1000, 4},     // already whole
		{"allreduce", 8, 1001, 1000, 2},     // 500 bf16 values
		{"allgather", 8, 1001, 896, 4},      // 250 floats, 31 a rank, 28 (112 B) a rank x 8
		{"reducescatter", 8, 1024, 1024, 4}, // 32 a rank
		{"alltoall", 4, 100, 64, 4},         // 25 floats, 6 a rank, 4 (16 B) a rank x 4
		{"allgather", 8, 100, 0, 4},         // 3 floats a rank: none of 16 B
		{"broadcast", 2, 7, 4, 4},
	} {
		got, err := SizeAsRun(c.op, c.ranks, c.bytes, c.elem)
		if err != nil || got != c.want {
			t.Errorf("%s on %d ranks, %d B of %d-byte elements: %d B, %v; want %d B", c.op, c.ranks, c.bytes, c.elem, got, err, c.want)
		}
	}
	if _, err := SizeAsRun("allreduce", 8, 1001, 3); err == nil {
		t.Error("3-byte elements taken, want an error")
	}
}
