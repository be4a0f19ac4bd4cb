package perfdb

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// ncclRow is one nccl_perf row as aiconfigurator writes it.
type ncclRow struct {
	Framework    string  `parquet:"framework"`
	Version      string  `parquet:"version"`
	Device       string  `parquet:"device"`
	OpName       string  `parquet:"op_name"`
	KernelSource string  `parquet:"kernel_source"`
	NCCLDtype    string  `parquet:"nccl_dtype"`
	NumGPUs      int64   `parquet:"num_gpus"`
	MessageSize  int64   `parquet:"message_size"`
	Latency      float64 `parquet:"latency"`
}

func goodNCCLRows() []ncclRow {
	r := ncclRow{"TRTLLM", "2.29.2", "GPU X", "all_reduce", "NCCL", "half", 8, 256, 0.025}
	r2 := r
	r2.MessageSize, r2.Latency = 512, 0.026
	return []ncclRow{r, r2}
}

// Variants with one column wrong.
type ncclNoLatency struct {
	Framework    string `parquet:"framework"`
	Version      string `parquet:"version"`
	Device       string `parquet:"device"`
	OpName       string `parquet:"op_name"`
	KernelSource string `parquet:"kernel_source"`
	NCCLDtype    string `parquet:"nccl_dtype"`
	NumGPUs      int64  `parquet:"num_gpus"`
	MessageSize  int64  `parquet:"message_size"`
}

type ncclStringGPUs struct {
	Framework    string  `parquet:"framework"`
	Version      string  `parquet:"version"`
	Device       string  `parquet:"device"`
	OpName       string  `parquet:"op_name"`
	KernelSource string  `parquet:"kernel_source"`
	NCCLDtype    string  `parquet:"nccl_dtype"`
	NumGPUs      string  `parquet:"num_gpus"`
	MessageSize  int64   `parquet:"message_size"`
	Latency      float64 `parquet:"latency"`
}

type ncclNullable struct {
	Framework    string   `parquet:"framework"`
	Version      string   `parquet:"version"`
	Device       string   `parquet:"device"`
	OpName       string   `parquet:"op_name"`
	KernelSource string   `parquet:"kernel_source"`
	NCCLDtype    string   `parquet:"nccl_dtype"`
	NumGPUs      int64    `parquet:"num_gpus"`
	MessageSize  int64    `parquet:"message_size"`
	Latency      *float64 `parquet:"latency,optional"`
}

// cutFile truncates path to to(its size) bytes.
func cutFile(t *testing.T, path string, to func(int64) int64) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, to(st.Size())); err != nil {
		t.Fatal(err)
	}
}

func writeParquet[T any](t *testing.T, path string, rows []T) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := parquet.WriteFile(path, rows); err != nil {
		t.Fatal(err)
	}
}

// testSystem writes a systems root with one system "x" whose NCCL table
// is written by write, and returns the system.
func testSystem(t *testing.T, write func(path string)) *System {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "x.yaml"), []byte(strings.Replace(goodYAML, "data/rtx_pro_6000_server", "data/x", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(root, "data", "x", "comm", "nccl", "2.29.2", "nccl_perf.parquet"))
	db, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	s, err := db.System("x")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Bad tables fail with one line naming the file and the column (and the
// row where one row is at fault).
func TestBadTables(t *testing.T) {
	half := 0.02
	cases := []struct {
		name   string
		write  func(t *testing.T, p string)
		column string
		row    int
		msg    string
	}{
		{"missing column", func(t *testing.T, p string) {
			writeParquet(t, p, []ncclNoLatency{{"a", "b", "c", "all_reduce", "NCCL", "half", 8, 256}})
		}, "column latency", -1, "missing"},
		{"wrong type", func(t *testing.T, p string) {
			writeParquet(t, p, []ncclStringGPUs{{"a", "b", "c", "all_reduce", "NCCL", "half", "8", 256, 0.1}})
		}, "column num_gpus", -1, "want an integer column"},
		{"null latency", func(t *testing.T, p string) {
			writeParquet(t, p, []ncclNullable{{"a", "b", "c", "all_reduce", "NCCL", "half", 8, 256, &half}, {"a", "b", "c", "all_reduce", "NCCL", "half", 8, 512, nil}})
		}, "column latency", 1, "null"},
		{"negative latency", func(t *testing.T, p string) {
			r := goodNCCLRows()
			r[1].Latency = -1
			writeParquet(t, p, r)
		}, "column latency", 1, "want a finite time > 0"},
		{"two devices", func(t *testing.T, p string) {
			r := goodNCCLRows()
			r[1].Device = "GPU Y"
			writeParquet(t, p, r)
		}, "column device", 1, "one GPU per table"},
		{"one GPU", func(t *testing.T, p string) {
			r := goodNCCLRows()
			r[0].NumGPUs = 1
			writeParquet(t, p, r)
		}, "column num_gpus", 0, "want >= 2"},
		{"unknown op", func(t *testing.T, p string) {
			r := goodNCCLRows()
			r[1].OpName = "broadcast"
			writeParquet(t, p, r)
		}, "column op_name", 1, "want all_reduce"},
		{"not parquet", func(t *testing.T, p string) {
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, []byte("latency,num_gpus\n1,2\n"), 0o644)
		}, "", -1, "not a readable Parquet file"},
		{"empty", func(t *testing.T, p string) {
			writeParquet(t, p, []ncclRow{})
		}, "", -1, "no rows"},
		// A table cut short: half its bytes, all but its closing magic,
		// only its opening magic.
		{"cut at half", func(t *testing.T, p string) {
			writeParquet(t, p, goodNCCLRows())
			cutFile(t, p, func(n int64) int64 { return n / 2 })
		}, "", -1, "the file was cut: it ends at byte"},
		{"cut before the closing magic", func(t *testing.T, p string) {
			writeParquet(t, p, goodNCCLRows())
			cutFile(t, p, func(n int64) int64 { return n - 4 })
		}, "", -1, `without Parquet's closing magic "PAR1"`},
		{"opening magic only", func(t *testing.T, p string) {
			writeParquet(t, p, goodNCCLRows())
			cutFile(t, p, func(int64) int64 { return 4 })
		}, "", -1, "the file was cut: it ends at byte 4, before Parquet's footer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testSystem(t, func(p string) { tc.write(t, p) })
			_, err := s.NCCL("2.29.2")
			if err == nil {
				t.Fatal("accepted")
			}
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Fatalf("%v: not a FileError", err)
			}
			msg := err.Error()
			if fe.Field != tc.column || fe.Row != tc.row || !strings.Contains(msg, tc.msg) || !strings.Contains(msg, "nccl_perf.parquet") || strings.Contains(msg, "\n") {
				t.Errorf("error %q (field %q row %d): want one line naming nccl_perf.parquet, %q, row %d, saying %q", msg, fe.Field, fe.Row, tc.column, tc.row, tc.msg)
			}
		})
	}
	t.Run("good", func(t *testing.T) {
		s := testSystem(t, func(p string) { writeParquet(t, p, goodNCCLRows()) })
		tab, err := s.NCCL("2.29.2")
		if err != nil {
			t.Fatal(err)
		}
		// 256 half elements = 512 B: the first row, 0.025 ms.
		r, ok := tab.Lookup(OpAllReduce, 8, 512)
		if !ok || r.How != Exact || r.Row != 0 || r.Us != 25 {
			t.Errorf("lookup 512 B: %+v %v, want row 0 exact 25 us", r, ok)
		}
		if _, err := s.GEMM("vllm", "0.24.0"); !errors.Is(err, ErrNoTable) {
			t.Errorf("missing GEMM table: %v, want ErrNoTable", err)
		}
		if _, err := s.GEMM("vllm", "../x"); err == nil {
			t.Error("a path accepted as a version")
		}
	})
}

// TestSystemForDamaged: looking up the system of a GPU names a system
// file or table that could not be read, instead of only saying that no
// system was measured on it: the cut file may be the one sought.
func TestSystemForDamaged(t *testing.T) {
	cases := []struct {
		name string
		cut  func(t *testing.T, root string)
		want string
	}{
		{"yaml cut before misc", func(t *testing.T, root string) {
			y := strings.Replace(goodYAML, "data/rtx_pro_6000_server", "data/x", 1)
			os.WriteFile(filepath.Join(root, "x.yaml"), []byte(y[:strings.Index(y, "misc:")]), 0o644)
		}, "x.yaml: misc.nccl_version: missing: aiconfigurator writes it last in every system file, so this file was cut short"},
		{"table cut", func(t *testing.T, root string) {
			cutFile(t, filepath.Join(root, "data", "x", "comm", "nccl", "2.29.2", "nccl_perf.parquet"), func(n int64) int64 { return n / 2 })
		}, "nccl_perf.parquet: the file was cut"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testSystem(t, func(p string) { writeParquet(t, p, goodNCCLRows()) })
			root := strings.TrimSuffix(s.dir, filepath.Join("data", "x"))
			tc.cut(t, root)
			db, err := Open(root)
			if err != nil {
				t.Fatal(err)
			}
			_, err = db.SystemFor("GPU X")
			if err == nil || !strings.Contains(err.Error(), "1 could not be read") || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v: want one line naming the unreadable file and saying %q", err, tc.want)
			}
		})
	}
}
