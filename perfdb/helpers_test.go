package perfdb

import (
	"os"
	"path/filepath"
	"testing"
)

// sampleRel is the sample database relative to the workspace root
// (../shared/reference/perfdb/systems from the repository root: a subset
// of aiconfigurator's public database, see its README). Tests look for it
// in the ancestors of the package directory, so they run from the main
// checkout and from worktrees alike, and skip when it is absent.
const sampleRel = "shared/reference/perfdb/systems"

func sampleDir(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		p := filepath.Join(dir, sampleRel)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p
		}
		dir = filepath.Dir(dir)
	}
	t.Skipf("sample perf database %s not found above the package directory: skipping", sampleRel)
	return ""
}

func sampleDB(t testing.TB) *DB {
	t.Helper()
	db, err := Open(sampleDir(t))
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func sampleSystem(t testing.TB, name string) *System {
	t.Helper()
	s, err := sampleDB(t).System(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
