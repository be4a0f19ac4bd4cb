package perfdb

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// numRows reads a Parquet file's row count from its footer (the file's
// own metadata, independent of readColumns).
func numRows(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	return int(pf.NumRows())
}

// Known rows of the sample, read with an independent Parquet dump of the
// files (and quoted in the issue: NVFP4 MoE at 1 token 0.089 ms; the MLA
// module at batch 1, context 131072 0.294 ms; 8-GPU all-reduce of 16 MB
// 1,248 us and of 128 MB 9,757 us).
func TestSampleKnownRows(t *testing.T) {
	s := sampleSystem(t, "rtx_pro_6000_server")
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*b }
	moe, err := s.MoE("vllm", "0.24.0")
	if err != nil {
		t.Fatal(err)
	}
	gemm, err := s.GEMM("vllm", "0.24.0")
	if err != nil {
		t.Fatal(err)
	}
	mla, err := s.MLAModule("vllm", "0.24.0", Generation)
	if err != nil {
		t.Fatal(err)
	}
	nccl, err := s.NCCL("2.29.2")
	if err != nil {
		t.Fatal(err)
	}
	type lookupFn func() (Result, bool)
	cases := []struct {
		name string
		look lookupFn
		us   float64
	}{
		{"moe nvfp4 kimi tp8 1 token", func() (Result, bool) {
			return moe.Lookup(MoEKey{"nvfp4", 7168, 256, 8, 384, 1, "balanced", ""}, 1)
		}, 88.70933453241985},
		{"gemm nvfp4 1x512x7168", func() (Result, bool) { return gemm.Lookup("nvfp4", 1, 512, 7168) }, 31.33866687615713},
		{"mla module b1 s131072 h8", func() (Result, bool) {
			return mla.Lookup(MLAKey{"deepseek-ai/DeepSeek-V3", "bfloat16", "bfloat16", "bfloat16", ""}, 8, 1, 131072)
		}, 293.7},
		{"all-reduce 16 MB", func() (Result, bool) { return nccl.Lookup(OpAllReduce, 8, 16<<20) }, 1247.96},
		{"all-reduce 128 MB", func() (Result, bool) { return nccl.Lookup(OpAllReduce, 8, 128<<20) }, 9757.43},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := tc.look()
			if !ok || r.How != Exact || !near(r.Us, tc.us) {
				t.Errorf("got %v us (%v, %v), want exact %v", r.Us, r.How, ok, tc.us)
			}
		})
	}
}

// sampleTables loads every table family of the systems with data and
// returns a named list of their grids.
type namedGrid struct {
	system, family, key string
	g                   *grid
}

func sampleGrids(t *testing.T) []namedGrid {
	t.Helper()
	db := sampleDB(t)
	var out []namedGrid
	for _, name := range []string{"rtx_pro_6000_server", "h200_sxm", "b200_sxm", "l40s"} {
		s, err := db.System(name)
		if err != nil {
			t.Fatal(err)
		}
		add := func(family string, tab any, err error) {
			if errors.Is(err, ErrNoTable) {
				return
			}
			if err != nil {
				t.Fatalf("%s %s: %v", name, family, err)
			}
			switch tt := tab.(type) {
			case *GEMMTable:
				for k, g := range tt.grids {
					out = append(out, namedGrid{name, family, k.dtype + " " + k.kernel, g})
				}
			case *MoETable:
				for k, g := range tt.grids {
					out = append(out, namedGrid{name, family, k.String(), g})
				}
			case *MLAModuleTable:
				for k, g := range tt.grids {
					out = append(out, namedGrid{name, family, fmt.Sprint(k), g})
				}
			case *MLABMMTable:
				for k, g := range tt.grids {
					out = append(out, namedGrid{name, family, fmt.Sprint(k), g})
				}
			case *AttentionTable:
				for k, g := range tt.grids {
					out = append(out, namedGrid{name, family, fmt.Sprint(k), g})
				}
			case *NCCLTable:
				for k, g := range tt.grids {
					out = append(out, namedGrid{name, family, fmt.Sprint(k), g})
				}
			case *CustomARTable:
				for k, g := range tt.grids {
					out = append(out, namedGrid{name, family, fmt.Sprint(k), g})
				}
			}
		}
		g, err := s.GEMM("vllm", "0.24.0")
		add("gemm", g, err)
		m, err := s.MoE("vllm", "0.24.0")
		add("moe", m, err)
		ml, err := s.MLAModule("vllm", "0.24.0", Generation)
		add("mla_generation_module", ml, err)
		mc, err := s.MLAModule("vllm", "0.24.0", Context)
		add("mla_context_module", mc, err)
		b, err := s.MLABMM("vllm", "0.24.0")
		add("mla_bmm", b, err)
		a, err := s.Attention("vllm", "0.24.0", Generation)
		add("generation_attention", a, err)
		ac, err := s.Attention("vllm", "0.24.0", Context)
		add("context_attention", ac, err)
		n, err := s.NCCL("2.29.2")
		add("nccl", n, err)
		c, err := s.CustomAllReduce("vllm", "0.24.0")
		add("custom_allreduce", c, err)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.system != b.system {
			return a.system < b.system
		}
		if a.family != b.family {
			return a.family < b.family
		}
		return a.key < b.key
	})
	return out
}

// TestSampleLoad: every family loads with as many rows as the file's
// footer says, and every measured row is returned verbatim by a lookup
// at its own coordinates (duplicates: the first row of the coordinates).
func TestSampleLoad(t *testing.T) {
	s := sampleSystem(t, "rtx_pro_6000_server")
	gemm, err := s.GEMM("vllm", "0.24.0")
	if err != nil {
		t.Fatal(err)
	}
	if n := numRows(t, gemm.Path); len(gemm.Us) != n || n == 0 {
		t.Errorf("gemm: %d rows, footer says %d", len(gemm.Us), n)
	}
	if gemm.Device != "NVIDIA RTX PRO 6000 Blackwell Server Edition" || gemm.Version != "0.24.0" {
		t.Errorf("gemm header %+v", gemm.header)
	}
	for i := range gemm.Us {
		r, ok := gemm.Lookup(gemm.Dtype[i], float64(gemm.M[i]), float64(gemm.N[i]), float64(gemm.K[i]))
		if !ok || r.How != Exact || r.Us != gemm.Us[r.Row] || r.Row > i {
			t.Fatalf("gemm row %d: %+v %v", i, r, ok)
		}
	}
	moe, err := s.MoE("vllm", "0.24.0")
	if err != nil {
		t.Fatal(err)
	}
	if n := numRows(t, moe.Path); len(moe.Us) != n {
		t.Errorf("moe: %d rows, footer says %d", len(moe.Us), n)
	}
	for i := range moe.Us {
		k := MoEKey{moe.Dtype[i], moe.Hidden[i], moe.Inter[i] / moe.TPSize[i], moe.TopK[i], moe.Experts[i], moe.EPSize[i], moe.Distribution[i], moe.Kernel[i]}
		r, ok := moe.Lookup(k, float64(moe.Tokens[i]))
		if !ok || r.How != Exact || r.Us != moe.Us[r.Row] {
			t.Fatalf("moe row %d: %+v %v", i, r, ok)
		}
	}
	mla, err := s.MLAModule("vllm", "0.24.0", Generation)
	if err != nil {
		t.Fatal(err)
	}
	if n := numRows(t, mla.Path); len(mla.Us) != n {
		t.Errorf("mla: %d rows, footer says %d", len(mla.Us), n)
	}
	for i := range mla.Us {
		k := MLAKey{mla.Model[i], mla.MLADtype[i], mla.KVDtype[i], mla.GEMMType[i], mla.Kernel[i]}
		r, ok := mla.Lookup(k, float64(mla.Heads[i]), float64(mla.Batch[i]), float64(mla.Step[i]))
		if !ok || r.How != Exact || r.Us != mla.Us[r.Row] {
			t.Fatalf("mla row %d: %+v %v", i, r, ok)
		}
	}
	nccl, err := s.NCCL("2.29.2")
	if err != nil {
		t.Fatal(err)
	}
	for i := range nccl.Us {
		if nccl.Dtype[i] != "half" {
			continue
		}
		r, ok := nccl.Lookup(CollectiveOp(nccl.Op[i]), int(nccl.GPUs[i]), float64(nccl.MessageElems[i]*2))
		if !ok || r.How != Exact || r.Us != nccl.Us[r.Row] {
			t.Fatalf("nccl row %d: %+v %v", i, r, ok)
		}
	}
	// Laziness: only what was asked for is loaded.
	s.mu.Lock()
	loaded := len(s.tables)
	s.mu.Unlock()
	if loaded != 4 {
		t.Errorf("%d tables loaded, want the 4 asked for", loaded)
	}
}

// looErrors holds out every measured point of g in turn, predicts it
// from the rest, and returns the relative errors of the points the
// engine reached by interpolation (interior) and by a utilization hold
// (frontier: the point was the end of an axis, or its branch ragged).
func looErrors(g *grid) (interior, frontier []float64) {
	x := make([]float64, len(g.axes))
	g.each(func(p []float64, us float64, row int32) {
		copy(x, p)
		got, _, lk, ok := g.atExcluding(x, row)
		if !ok || math.IsNaN(got) {
			return
		}
		e := math.Abs(got/us - 1)
		if lk.how == Interpolated {
			interior = append(interior, e)
		} else {
			frontier = append(frontier, e)
		}
	})
	return interior, frontier
}

func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[int(q*float64(len(s)-1)+0.5)]
}

// looBound is the leave-one-out error a family's interior points stay
// within, measured on the sample by TestSampleLeaveOneOut (median, p90
// of |predicted/measured - 1|); tpscope's own lookups are checked against
// it (TestDecodeOpsHeldOut).
type looBound struct{ median, p90 float64 }

// familyLOO measures the interior leave-one-out errors per (system,
// family) over all the family's grids.
func familyLOO(t *testing.T) map[[2]string]looBound {
	t.Helper()
	int := map[[2]string][]float64{}
	for _, ng := range sampleGrids(t) {
		i, _ := looErrors(ng.g)
		k := [2]string{ng.system, ng.family}
		int[k] = append(int[k], i...)
	}
	out := map[[2]string]looBound{}
	for k, v := range int {
		if len(v) > 0 {
			out[k] = looBound{quantile(v, 0.5), quantile(v, 0.9)}
		}
	}
	return out
}

// TestSampleLeaveOneOut measures the tables' own interpolation error:
// every point held out and predicted from the rest. Printed per family;
// the assertion is the claim tpscope makes of its engine: interior median
// within 10 % and p90 within 35 % for every family (aiconfigurator's
// design document reports 4.87 % / 15.6 % for GEMM interiors and 2.19 % /
// 10 % for context MLA on other systems' tables; frontier holds are
// reported, not bounded: below the smallest size they are overhead-bound
// and the ratio overshoots, the same document says).
func TestSampleLeaveOneOut(t *testing.T) {
	type agg struct{ in, fr []float64 }
	fam := map[[2]string]*agg{}
	var keys [][2]string
	for _, ng := range sampleGrids(t) {
		i, f := looErrors(ng.g)
		k := [2]string{ng.system, ng.family}
		if fam[k] == nil {
			fam[k] = &agg{}
			keys = append(keys, k)
		}
		fam[k].in = append(fam[k].in, i...)
		fam[k].fr = append(fam[k].fr, f...)
	}
	for _, k := range keys {
		a := fam[k]
		t.Logf("%-20s %-22s interior n=%6d median %5.2f %% p90 %6.2f %% | frontier n=%5d median %6.2f %% p90 %7.2f %%",
			k[0], k[1], len(a.in), 100*quantile(a.in, 0.5), 100*quantile(a.in, 0.9), len(a.fr), 100*quantile(a.fr, 0.5), 100*quantile(a.fr, 0.9))
		if len(a.in) == 0 {
			continue
		}
		if m, p := quantile(a.in, 0.5), quantile(a.in, 0.9); m > 0.10 || p > 0.35 {
			t.Errorf("%s %s: interior leave-one-out median %.1f %% p90 %.1f %%, want within 10 %% / 35 %%", k[0], k[1], 100*m, 100*p)
		}
	}
}

// TestTableKeyQueriesFromTheRows: KernelsFor and HeadsRange, asked for
// every configuration a plan sweep prices, answer from what the table
// was loaded with, without walking or allocating per call (a 4-box plan
// sweep under --perf-db spent two thirds of its time in them): the
// kernels measured for a MoE configuration and the range of heads of an
// MLA module configuration, each held against the rows' columns.
func TestTableKeyQueriesFromTheRows(t *testing.T) {
	sys := sampleSystem(t, "rtx_pro_6000_server")
	moe, err := sys.MoE("vllm", "0.24.0")
	if err != nil {
		t.Fatal(err)
	}
	want := map[MoEKey]map[string]bool{}
	for i := range moe.Us {
		k := MoEKey{Dtype: moe.Dtype[i], Hidden: moe.Hidden[i], InterLocal: moe.Inter[i] / moe.TPSize[i], TopK: moe.TopK[i],
			Experts: moe.Experts[i], EP: moe.EPSize[i], Distribution: moe.Distribution[i]}
		if want[k] == nil {
			want[k] = map[string]bool{}
		}
		want[k][moe.Kernel[i]] = true
	}
	for k, kernels := range want {
		k.Kernel = "any kernel: ignored"
		got := moe.KernelsFor(k)
		if len(got) != len(kernels) || !slices.IsSorted(got) {
			t.Errorf("%v: kernels %v, want the %d of the rows sorted", k, got, len(kernels))
		}
		for _, g := range got {
			if !kernels[g] {
				t.Errorf("%v: kernel %q not in the rows", k, g)
			}
		}
		if n := testing.AllocsPerRun(10, func() { moe.KernelsFor(k) }); n != 0 {
			t.Errorf("%v: KernelsFor allocates %.0f times a call", k, n)
		}
	}
	mla, err := sys.MLAModule("vllm", "0.24.0", Generation)
	if err != nil {
		t.Fatal(err)
	}
	type rng struct{ lo, hi float64 }
	heads := map[MLAKey]rng{}
	for i := range mla.Us {
		if mla.TPSize[i] != 1 {
			continue // the table's grids hold the tp_size 1 rows
		}
		k := MLAKey{Model: mla.Model[i], MLADtype: mla.MLADtype[i], KVDtype: mla.KVDtype[i], GEMMType: mla.GEMMType[i], Kernel: mla.Kernel[i]}
		h := float64(mla.Heads[i])
		r, ok := heads[k]
		if !ok {
			r = rng{h, h}
		}
		heads[k] = rng{min(r.lo, h), max(r.hi, h)}
	}
	if len(heads) == 0 {
		t.Fatal("no tp_size 1 rows in the MLA module table")
	}
	for k, r := range heads {
		if lo, hi := mla.HeadsRange(k); lo != r.lo || hi != r.hi {
			t.Errorf("%v: heads %g..%g, the rows %g..%g", k, lo, hi, r.lo, r.hi)
		}
		if n := testing.AllocsPerRun(10, func() { mla.HeadsRange(k) }); n != 0 {
			t.Errorf("%v: HeadsRange allocates %.0f times a call", k, n)
		}
	}
}
