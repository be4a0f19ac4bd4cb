package nccltests

import (
	"errors"
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
	for _, text := range []string{"", "# only comments\n#\n", "garbage\nmore garbage\n", "8 2 float sum -1 x y z 0 a b c 0\n"} {
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
	}
	f.Add("#  Rank 99999999999 Group 0 device 0 [0x1] X\n8 2 float sum -1 1 1 1 0 1 1 1 0\n")
	f.Add("8 2 float sum -1 NaN 1 1 0 Inf 1 1 0\n")
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
