package perfdb

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestParseReuse: aiconfigurator's real reuse.yaml files parse to their
// lines (counted in testdata/reuse/SOURCE.md); a malformed one is one line
// naming the file and the field.
func TestParseReuse(t *testing.T) {
	for file, want := range map[string][]Reuse{
		"h200_sxm-mla-vllm-0.22.0.yaml": {
			{Table: "context_mla_perf", FromVersion: "0.14.0"},
			{Table: "generation_mla_perf", FromVersion: "0.14.0"},
			{Table: "mla_context_module_perf", FromVersion: "0.24.0"},
			{Table: "mla_generation_module_perf", FromVersion: "0.24.0"},
		},
		"rtx_pro_6000_server-attention-sglang-0.5.12.yaml": {
			{Table: "context_attention_perf", FromVersion: "0.5.14"},
			{Table: "generation_attention_perf", FromVersion: "0.5.14"},
		},
	} {
		data, err := os.ReadFile(filepath.Join("testdata", "reuse", file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseReuse(file, data)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d lines, want %d", file, len(got), len(want))
		}
		for i := range want {
			if got[i].Table != want[i].Table || got[i].FromVersion != want[i].FromVersion || !strings.Contains(got[i].Reason, "SHARED_LAYER_REUSE.txt") {
				t.Errorf("%s line %d: %+v, want %+v with its reason", file, i, got[i], want[i])
			}
		}
	}
	for _, c := range []struct{ yaml, field string }{
		{"reuse: []\n", "schema_version: missing"},
		{"schema_version: 2\nreuse: []\n", "schema_version: 2: want 1"},
		{"schema_version: 1\nreuse:\n- from_version: 0.24.0\n", "reuse[0].table"},
		{"schema_version: 1\nreuse:\n- table: moe_perf.parquet\n  from_version: 0.24.0\n", "reuse[0].table"},
		{"schema_version: 1\nreuse:\n- table: moe_perf\n", "reuse[0].from_version"},
		{"schema_version: 1\nreuse:\n- table: moe_perf\n  from_version: ../x\n", "reuse[0].from_version"},
		{"schema_version: 1\nreuse:\n- table: moe_perf\n  from_version: 0.24.0\n- table: moe_perf\n  from_version: 0.19.0\n", "reuse[1].table: \"moe_perf\" listed twice"},
		{"schema_version: [1]\n", "reuse.yaml"},
	} {
		_, err := ParseReuse("reuse.yaml", []byte(c.yaml))
		var fe *FileError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), c.field) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want one line naming %q", c.yaml, err, c.field)
		}
	}
}

// reuseRoot is a systems root with the sample's RTX PRO 6000 YAML and its
// vLLM 0.24.0 GEMM table, and version dirs whose reuse.yaml files are
// given (version -> file body).
func reuseRoot(t *testing.T, reuses map[string]string) string {
	t.Helper()
	src := sampleDir(t)
	root := t.TempDir()
	yml, err := os.ReadFile(filepath.Join(src, "rtx_pro_6000_server.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "rtx_pro_6000_server.yaml"), yml, 0o644); err != nil {
		t.Fatal(err)
	}
	s := sampleSystem(t, "rtx_pro_6000_server")
	rel, err := filepath.Rel(src, s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	gemm, err := os.ReadFile(filepath.Join(s.Dir(), FamilyGEMM, "vllm", "0.24.0", "gemm_perf.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	own := filepath.Join(root, rel, FamilyGEMM, "vllm", "0.24.0")
	if err := os.MkdirAll(own, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(own, "gemm_perf.parquet"), gemm, 0o644); err != nil {
		t.Fatal(err)
	}
	for v, body := range reuses {
		d := filepath.Join(root, rel, FamilyGEMM, "vllm", v)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, reuseFile), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func reuseLine(table, from string) string {
	return "schema_version: 1\nreuse:\n- table: " + table + "\n  from_version: " + from + "\n  reason: test line\n"
}

// TestReuseFollowed: a version whose reuse.yaml names another version's
// table reads that table (the same rows as reading it at its own version),
// through a chain of such lines too, and the source's notes say which
// version's rows stood in; a table no line names stays absent; a loop,
// a line naming a version without the table or a line, and a malformed
// reuse.yaml are errors naming the file.
func TestReuseFollowed(t *testing.T) {
	root := reuseRoot(t, map[string]string{
		"0.22.0": reuseLine("gemm_perf", "0.24.0"),
		"0.19.0": reuseLine("gemm_perf", "0.22.0"),
		"0.18.0": reuseLine("moe_perf", "0.24.0"),
	})
	db, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	sys, err := db.System("rtx_pro_6000_server")
	if err != nil {
		t.Fatal(err)
	}
	direct, err := sys.GEMM("vllm", "0.24.0")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"0.22.0", "0.19.0"} {
		g, err := sys.GEMM("vllm", v)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if len(g.Us) != len(direct.Us) || g.Us[0] != direct.Us[0] || g.Version != "0.24.0" {
			t.Errorf("%s: %d rows of version %s, want the 0.24.0 table's %d", v, len(g.Us), g.Version, len(direct.Us))
		}
	}
	if _, err := sys.GEMM("vllm", "0.18.0"); !errors.Is(err, ErrNoTable) {
		t.Errorf("0.18.0 (no line for gemm_perf): %v, want ErrNoTable", err)
	}
	reuses := strings.Join(sys.Reuses(), "\n")
	for _, want := range []string{
		"gemm/vllm/0.22.0/gemm_perf: 0.24.0's table, by 0.22.0's reuse.yaml (test line)",
		"gemm/vllm/0.19.0/gemm_perf: 0.24.0's table, by 0.19.0's reuse.yaml (test line), then 0.22.0's reuse.yaml (test line)",
	} {
		if !strings.Contains(reuses, want) {
			t.Errorf("reuses %q lack %q", reuses, want)
		}
	}
	src, err := NewSource(db, SourceConfig{System: "rtx_pro_6000_server", Version: "0.22.0"})
	if err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(src.Notes(), "\n")
	if !strings.Contains(notes, "perfdb rtx_pro_6000_server/vllm/0.22.0: gemm/vllm/0.22.0/gemm_perf: 0.24.0's table") || strings.Contains(notes, "0.19.0") {
		t.Errorf("0.22.0 source notes %q: want its own reuse only", notes)
	}

	for name, c := range map[string]struct {
		reuses map[string]string
		want   string
	}{
		"loop": {map[string]string{"0.22.0": reuseLine("gemm_perf", "0.21.0"), "0.21.0": reuseLine("gemm_perf", "0.22.0")},
			"reuse[0].from_version: 0.22.0: a loop (0.22.0 -> 0.21.0 -> 0.22.0)"},
		"dead end": {map[string]string{"0.22.0": reuseLine("gemm_perf", "0.21.0"), "0.21.0": reuseLine("moe_perf", "0.24.0")},
			"no line for gemm_perf, which 0.22.0's reuse.yaml sends here"},
		"malformed": {map[string]string{"0.22.0": "schema_version: 3\n"}, "schema_version: 3: want 1"},
	} {
		sys, err := mustOpen(t, reuseRoot(t, c.reuses)).System("rtx_pro_6000_server")
		if err != nil {
			t.Fatal(err)
		}
		_, err = sys.GEMM("vllm", "0.22.0")
		if err == nil || errors.Is(err, ErrNoTable) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "reuse.yaml") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line naming a reuse.yaml and %q", name, err, c.want)
		}
	}
}

func mustOpen(t *testing.T, dir string) *DB {
	t.Helper()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestOpenLayouts: a directory that holds a systems/ root at one of the
// known layouts (an AISimulate or aiconfigurator checkout, installed
// packages) opens at that root and says which; two roots are refused by
// name; none is one line listing the layouts tried.
func TestOpenLayouts(t *testing.T) {
	tree := func(rels ...string) string {
		dir := t.TempDir()
		for _, rel := range rels {
			d := filepath.Join(dir, filepath.FromSlash(rel))
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(d, "x.yaml"), []byte("data_dir: data/x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	for _, c := range []struct{ rel, what string }{
		{"python/aisimulate-core/src/aiconfigurator_core/systems", "an AISimulate checkout"},
		{"aic-core/src/aiconfigurator_core/systems", "an aiconfigurator checkout (from July 2026)"},
		{"src/aiconfigurator/systems", "an aiconfigurator checkout (before July 2026)"},
		{"aiconfigurator_core/systems", "installed aiconfigurator-core or aisimulate-core packages"},
	} {
		dir := tree(c.rel)
		db, err := Open(dir)
		if err != nil {
			t.Fatalf("%s: %v", c.rel, err)
		}
		if db.Root() != filepath.Join(dir, filepath.FromSlash(c.rel)) || db.layout != c.what+" ("+c.rel+")" {
			t.Errorf("%s: root %s, layout %q", c.rel, db.Root(), db.layout)
		}
	}
	db, err := Open(tree(""))
	if err != nil || db.layout != "" {
		t.Errorf("a systems root itself: layout %q, %v; want none", db.layout, err)
	}
	_, err = Open(tree("aiconfigurator_core/systems", "aisimulate_core/systems"))
	if err == nil || !strings.Contains(err.Error(), "several systems/ roots under it (aiconfigurator_core/systems, aisimulate_core/systems)") {
		t.Errorf("two roots: %v", err)
	}
	_, err = Open(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "python/aisimulate-core/src/aiconfigurator_core/systems") || strings.Contains(err.Error(), "\n") {
		t.Errorf("no root: %v", err)
	}
}

// FuzzParseReuse: any input either parses into lines whose tables and
// versions are plain names, each table once, or fails with a one-line
// FileError naming the file. Seeds: aiconfigurator's reuse.yaml files
// (testdata/reuse) and the malformed shapes of TestParseReuse.
func FuzzParseReuse(f *testing.F) {
	ents, _ := os.ReadDir(filepath.Join("testdata", "reuse"))
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".yaml") {
			if b, err := os.ReadFile(filepath.Join("testdata", "reuse", e.Name())); err == nil {
				f.Add(b)
				f.Add(b[:len(b)/2])
			}
		}
	}
	f.Add([]byte("schema_version: 1\nreuse:\n- table: moe_perf\n  from_version: 0.24.0\n- table: moe_perf\n  from_version: 0.19.0\n"))
	f.Add([]byte("schema_version: 1\nreuse: {table: x}\n"))
	f.Add([]byte("schema_version: 1\nreuse:\n- table: a/b\n  from_version: ..\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lines, err := ParseReuse("r.yaml", data)
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) || fe.Path != "r.yaml" || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q is not a one-line FileError naming the file", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, l := range lines {
			if l.Table == "" || l.FromVersion == "" || strings.ContainsAny(l.Table+l.FromVersion, `/\`) || seen[l.Table] {
				t.Fatalf("accepted line %+v", l)
			}
			seen[l.Table] = true
		}
	})
}
