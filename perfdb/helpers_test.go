package perfdb

import (
	"testing"

	"github.com/tpscope/tpscope/internal/testfix"
)

// sampleDir is the sample database (testfix.SamplePerfDB: a subset of
// aiconfigurator's public database, see its README); tests that need it
// skip when it is absent.
func sampleDir(t testing.TB) string {
	t.Helper()
	p := testfix.SamplePerfDB(t)
	if p == "" {
		t.Skipf("sample perf database %s not found above the package directory: skipping", testfix.SamplePerfDBRel)
	}
	return p
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
