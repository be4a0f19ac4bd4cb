package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportsPointDown: no package imports one above it (README
// "Layout"). Each rule names a package (with its subpackages) and the
// packages of tpscope it must not import; test files are left out (a
// test may drive a package from above), and so are commands (package
// main, e.g. exec/cuda's cudacheck: a command is at the top wherever its
// directory is).
func TestImportsPointDown(t *testing.T) {
	const mod = "github.com/tpscope/tpscope/"
	above := []string{"cmd", "report", "compare", "pipeline", "serving", "advise", "plan", "calibrate", "perfdb"}
	rules := []struct {
		pkg       string
		forbidden []string
	}{
		// The ground floor: nothing of tpscope's but internal helpers
		// (ncclenv reads topology's P2P levels).
		{"model", append([]string{"sim", "exec", "traces", "topology", "engine", "ncclenv"}, above...)},
		{"topology", append([]string{"sim", "exec", "traces", "model", "engine", "ncclenv"}, above...)},
		{"engine", append([]string{"sim", "exec", "traces", "model", "topology", "ncclenv"}, above...)},
		{"ncclenv", append([]string{"sim", "exec", "traces", "model", "engine"}, above...)},
		// The core prices; it neither runs, nor reads traces, nor knows
		// what uses its prices.
		{"sim", append([]string{"exec", "traces"}, above...)},
		// Above the core, below the comparison and the CLI.
		{"advise", []string{"cmd", "report", "compare", "pipeline", "serving", "plan", "calibrate", "exec", "traces"}},
		{"plan", []string{"cmd", "report", "compare", "pipeline", "serving", "calibrate", "exec", "traces"}},
		{"calibrate", []string{"cmd", "report", "compare", "pipeline", "serving", "advise", "plan", "exec", "traces"}},
		// The runner decides nothing about what to run.
		{"exec", append([]string{"sim"}, above...)},
	}
	root := filepath.Join("..", "..")
	checked := 0
	for _, r := range rules {
		err := filepath.WalkDir(filepath.Join(root, r.pkg), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			if f.Name.Name == "main" {
				return nil
			}
			checked++
			for _, im := range f.Imports {
				p, _ := strconv.Unquote(im.Path.Value)
				rel, ours := strings.CutPrefix(p, mod)
				if !ours {
					continue
				}
				for _, bad := range r.forbidden {
					if rel == bad || strings.HasPrefix(rel, bad+"/") {
						t.Errorf("%s imports %s: %s sits below %s", path, p, r.pkg, bad)
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 50 {
		t.Fatalf("%d files checked: the walk missed the packages", checked)
	}
}
