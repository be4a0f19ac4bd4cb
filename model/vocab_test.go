package model_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
)

// roleLiteralAllowed are string literals outside model that equal an op
// role's name (its part after the block) and mean something else, by
// file (slash path from the module root) and value.
var roleLiteralAllowed = map[[2]string]string{
	// aiconfigurator's MoE table has a column of that name.
	{"perfdb/tables.go", "topk"}: "a column of the measured MoE table",
	// The Kineto reader's kernel rules are named by kernel family and
	// match substrings of kernel names; a family that implements one op
	// shares its word (the placer maps families to roles by model's
	// constants).
	{"traces/kineto_kernels.go", "act"}:            "a kernel rule's name",
	{"traces/kineto_kernels.go", "rope"}:           "a kernel rule's name and a kernel-name substring",
	{"traces/kineto_kernels.go", "kv_cache_write"}: "a kernel rule's name",
	{"traces/kineto_kernels.go", "topk"}:           "a kernel-name substring",
}

// TestNoRoleLiterals: model owns the op vocabulary. Outside model, no
// non-test Go file of the module spells an op role as a string literal:
// neither its value ("attn.mla_decode") nor its name ("mla_decode"), so
// renaming a role is a compile error where it is used, not an op silently
// left unpriced, unplaced or unexecuted. Names that are also a
// collective's kind ("allreduce", "allgather": model.Collective, the words
// of nccl-tests and NCCL) are not the role's; the few other words another
// vocabulary shares are listed in roleLiteralAllowed with the reason.
func TestNoRoleLiterals(t *testing.T) {
	values, names := map[string]model.Role{}, map[string]model.Role{}
	for _, r := range model.Roles() {
		values[string(r)] = r
		names[r.Name()] = r
	}
	for _, c := range []model.Collective{model.AllReduce, model.AllGather, model.ReduceScatter, model.AllToAll} {
		delete(names, string(c))
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	files, found := 0, 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, root+string(filepath.Separator)))
		if d.IsDir() {
			if path == root {
				return nil
			}
			// model itself, data, and other modules (their own go.mod).
			if rel == "model" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			pos := fset.Position(lit.Pos())
			if r, ok := values[v]; ok {
				found++
				t.Errorf("%s:%d: %q is an op role: name it by model's constant (%s)", rel, pos.Line, v, r)
			} else if r, ok := names[v]; ok {
				if _, ok := roleLiteralAllowed[[2]string{rel, v}]; !ok {
					found++
					t.Errorf("%s:%d: %q is the name of op role %s: tell ops apart by Op.Role", rel, pos.Line, v, r)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("scanned %d Go files under %s: want the whole module", files, root)
	}
	t.Logf("%d Go files outside model scanned, %d op-role literals", files, found)
}
