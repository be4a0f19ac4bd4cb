package perfdb

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// ErrNoTable is wrapped by the error of a lookup for a table the
// database does not have (no such family, engine, version or file).
var ErrNoTable = errors.New("no such table")

// DB is an aiconfigurator systems/ root: one YAML per system and, under
// each system's data_dir, the tables
// <family>/<engine>/<version>/<table>.parquet. Opening it reads only the
// directory listing; a system's YAML is parsed on first use and each
// table is read on first use, once. A DB is safe for concurrent use.
type DB struct {
	root string
	// layout says where root was found under the directory the DB was
	// opened at ("" when that directory is the systems root itself).
	layout string

	mu      sync.Mutex
	systems map[string]*sysEntry
}

type sysEntry struct {
	once sync.Once
	sys  *System
	err  error
}

// layouts are where the systems/ root sits in the trees a user may name
// instead of it, tried in this order when the named directory holds no
// system YAML: aiconfigurator's checkouts before and after its July 2026
// split into a core package (#1322: src/aiconfigurator/systems, then
// aic-core/src/aiconfigurator_core/systems), AISimulate's checkout (the
// same core package under python/aisimulate-core, aisimulate #2), and the
// installed packages (site-packages/<package>/systems).
var layouts = []struct{ Rel, What string }{
	{"systems", "a package directory"},
	{"aiconfigurator_core/systems", "installed aiconfigurator-core or aisimulate-core packages"},
	{"aisimulate_core/systems", "installed aisimulate-core packages"},
	{"aiconfigurator/systems", "an installed aiconfigurator package (0.11 and before)"},
	{"python/aisimulate-core/src/aiconfigurator_core/systems", "an AISimulate checkout"},
	{"aic-core/src/aiconfigurator_core/systems", "an aiconfigurator checkout (from July 2026)"},
	{"src/aiconfigurator/systems", "an aiconfigurator checkout (before July 2026)"},
}

// Open opens the systems root at dir (the directory holding the system
// YAMLs), or, when dir holds none, the one systems root of the layouts
// under it (DB.Layout says which). It fails when dir is not a readable
// directory, when no layout under it holds a system YAML, and when
// several do (naming them).
func Open(dir string) (*DB, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, errorf("%w", err)
	}
	if !st.IsDir() {
		return nil, errorf("%s: not a directory (want an aiconfigurator systems/ root)", dir)
	}
	db := &DB{root: dir, systems: map[string]*sysEntry{}}
	names, err := db.yamlNames()
	if err != nil {
		return nil, err
	}
	if len(names) > 0 {
		return db, nil
	}
	var found []string
	for _, l := range layouts {
		sub := &DB{root: filepath.Join(dir, filepath.FromSlash(l.Rel)), layout: l.What + " (" + l.Rel + ")"}
		if n, err := sub.yamlNames(); err == nil && len(n) > 0 {
			if db.layout == "" {
				db.root, db.layout = sub.root, sub.layout
			}
			found = append(found, l.Rel)
		}
	}
	switch {
	case len(found) > 1:
		return nil, errorf("%s: several systems/ roots under it (%s): name one", dir, strings.Join(found, ", "))
	case len(found) == 0:
		rels := make([]string, len(layouts))
		for i, l := range layouts {
			rels[i] = l.Rel
		}
		return nil, errorf("%s: no system YAML (want an aiconfigurator systems/ root with <system>.yaml files, or a tree holding one at %s)", dir, strings.Join(rels, ", "))
	}
	return db, nil
}

// Root is the systems root the DB reads.
func (db *DB) Root() string { return db.root }

func (db *DB) yamlNames() ([]string, error) {
	ents, err := os.ReadDir(db.root)
	if err != nil {
		return nil, errorf("%w", err)
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".yaml") {
			out = append(out, strings.TrimSuffix(n, ".yaml"))
		}
	}
	sort.Strings(out)
	return out, nil
}

// Systems lists the systems whose YAML parses and whose data directory
// exists, sorted. Files that are not system specs (aiconfigurator's
// perf_data_reuse_manifest.yaml has no data_dir) are skipped.
func (db *DB) Systems() ([]string, error) {
	names, err := db.yamlNames()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range names {
		s, err := db.System(n)
		if err != nil {
			continue
		}
		if st, err := os.Stat(s.dir); err == nil && st.IsDir() {
			out = append(out, n)
		}
	}
	return out, nil
}

// System returns the system named name (its YAML is <root>/<name>.yaml),
// parsing the YAML on first use.
func (db *DB) System(name string) (*System, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return nil, errorf("system %q: want a system name such as rtx_pro_6000_server", name)
	}
	db.mu.Lock()
	e := db.systems[name]
	if e == nil {
		e = &sysEntry{}
		db.systems[name] = e
	}
	db.mu.Unlock()
	e.once.Do(func() { e.sys, e.err = db.loadSystem(name) })
	return e.sys, e.err
}

func (db *DB) loadSystem(name string) (*System, error) {
	file := filepath.Join(db.root, name+".yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// The systems (Systems), not every YAML of the root: the
			// reuse manifest is none, and one without its data
			// directory prices nothing.
			known, _ := db.Systems()
			return nil, errorf("system %q: no %s (systems here: %s)", name, file, strings.Join(known, ", "))
		}
		return nil, errorf("%w", err)
	}
	spec, err := ParseSpec(file, data)
	if err != nil {
		return nil, err
	}
	return &System{Name: name, Spec: *spec, dir: filepath.Join(db.root, filepath.FromSlash(spec.DataDir)),
		tables: map[string]*tableEntry{}}, nil
}

// System is one system of the database: its spec and its tables, read
// on first use.
type System struct {
	Name string
	Spec Spec
	dir  string

	mu         sync.Mutex
	tables     map[string]*tableEntry
	deviceName string // the tables' device column, read once (device)
}

type tableEntry struct {
	once sync.Once
	t    any
	err  error
	// reused says which version's table a reuse.yaml put in its place
	// ("" for a table of its own version); written under System.mu.
	reused string
}

// Dir is the system's table directory.
func (s *System) Dir() string { return s.dir }

// Families of tables, as directory names under a system's data_dir.
const (
	FamilyGEMM      = "gemm"
	FamilyMoE       = "moe"
	FamilyMLA       = "mla"
	FamilyMLABMM    = "mla_bmm"
	FamilyAttention = "attention"
	FamilyComm      = "comm"
)

// Versions lists the versions of engine a family was measured with,
// sorted by version number (oldest first); nil when none.
func (s *System) Versions(family, engine string) []string {
	ents, err := os.ReadDir(filepath.Join(s.dir, family, engine))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	sort.Slice(out, func(i, j int) bool { return versionLess(out[i], out[j]) })
	return out
}

// versionLess orders dotted version strings numerically where they are
// numbers ("0.9.1" < "0.24.0").
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) && i < len(bs); i++ {
		var x, y int
		_, ex := fmt.Sscanf(as[i], "%d", &x)
		_, ey := fmt.Sscanf(bs[i], "%d", &y)
		if ex == nil && ey == nil && x != y {
			return x < y
		}
		if as[i] != bs[i] && (ex != nil || ey != nil) {
			return as[i] < bs[i]
		}
	}
	return len(as) < len(bs)
}

// table reads rel (slash-separated, under the data dir) once with load.
func (s *System) table(rel string, load func(path string) (any, error)) (any, error) {
	s.mu.Lock()
	e := s.tables[rel]
	if e == nil {
		e = &tableEntry{}
		s.tables[rel] = e
	}
	s.mu.Unlock()
	e.once.Do(func() {
		p := filepath.Join(s.dir, filepath.FromSlash(rel))
		if _, err := os.Stat(p); err != nil {
			alt, why, rerr := s.reused(rel)
			if rerr != nil {
				e.err = rerr
				return
			}
			if alt == "" {
				e.err = fmt.Errorf("perfdb: %s: %s: %w", s.Name, rel, ErrNoTable)
				return
			}
			p = filepath.Join(s.dir, filepath.FromSlash(alt))
			s.mu.Lock()
			e.reused = why
			s.mu.Unlock()
		}
		e.t, e.err = load(p)
	})
	return e.t, e.err
}

func checkPart(what, v string) error {
	if v == "" || strings.ContainsAny(v, `/\`) || v == "." || v == ".." {
		return errorf("%s %q: want a directory name", what, v)
	}
	return nil
}

func (s *System) rel(family, engine, version, file string) (string, error) {
	if err := checkPart("engine", engine); err != nil {
		return "", err
	}
	if err := checkPart("version", version); err != nil {
		return "", err
	}
	return path.Join(family, engine, version, file), nil
}

// GEMM returns the GEMM table of engine at version.
func (s *System) GEMM(engine, version string) (*GEMMTable, error) {
	rel, err := s.rel(FamilyGEMM, engine, version, "gemm_perf.parquet")
	if err != nil {
		return nil, err
	}
	t, err := s.table(rel, func(p string) (any, error) { return loadGEMM(p, &s.Spec) })
	if err != nil {
		return nil, err
	}
	return t.(*GEMMTable), nil
}

// MoE returns the MoE table of engine at version.
func (s *System) MoE(engine, version string) (*MoETable, error) {
	rel, err := s.rel(FamilyMoE, engine, version, "moe_perf.parquet")
	if err != nil {
		return nil, err
	}
	t, err := s.table(rel, func(p string) (any, error) { return loadMoE(p, &s.Spec) })
	if err != nil {
		return nil, err
	}
	return t.(*MoETable), nil
}

// MLAModule returns the MLA module table of one phase.
func (s *System) MLAModule(engine, version string, phase Phase) (*MLAModuleTable, error) {
	if phase != Generation && phase != Context {
		return nil, fmt.Errorf("perfdb: phase %q: want generation or context", phase)
	}
	rel, err := s.rel(FamilyMLA, engine, version, "mla_"+string(phase)+"_module_perf.parquet")
	if err != nil {
		return nil, err
	}
	t, err := s.table(rel, func(p string) (any, error) { return loadMLAModule(p, phase, &s.Spec) })
	if err != nil {
		return nil, err
	}
	return t.(*MLAModuleTable), nil
}

// MLABMM returns the absorbed-MLA batched-GEMM table.
func (s *System) MLABMM(engine, version string) (*MLABMMTable, error) {
	rel, err := s.rel(FamilyMLABMM, engine, version, "mla_bmm_perf.parquet")
	if err != nil {
		return nil, err
	}
	t, err := s.table(rel, func(p string) (any, error) { return loadMLABMM(p, &s.Spec) })
	if err != nil {
		return nil, err
	}
	return t.(*MLABMMTable), nil
}

// Attention returns the (non-MLA) attention table of one phase.
func (s *System) Attention(engine, version string, phase Phase) (*AttentionTable, error) {
	if phase != Generation && phase != Context {
		return nil, fmt.Errorf("perfdb: phase %q: want generation or context", phase)
	}
	rel, err := s.rel(FamilyAttention, engine, version, string(phase)+"_attention_perf.parquet")
	if err != nil {
		return nil, err
	}
	t, err := s.table(rel, func(p string) (any, error) { return loadAttention(p, phase, &s.Spec) })
	if err != nil {
		return nil, err
	}
	return t.(*AttentionTable), nil
}

// NCCL returns the nccl-tests table of NCCL version (comm/nccl/<version>).
func (s *System) NCCL(version string) (*NCCLTable, error) {
	rel, err := s.rel(FamilyComm, "nccl", version, "nccl_perf.parquet")
	if err != nil {
		return nil, err
	}
	t, err := s.table(rel, func(p string) (any, error) { return loadNCCL(p, &s.Spec) })
	if err != nil {
		return nil, err
	}
	return t.(*NCCLTable), nil
}

// CustomAllReduce returns the engine's all-reduce table
// (comm/<engine>/<version>/custom_allreduce_perf.parquet).
func (s *System) CustomAllReduce(engine, version string) (*CustomARTable, error) {
	rel, err := s.rel(FamilyComm, engine, version, "custom_allreduce_perf.parquet")
	if err != nil {
		return nil, err
	}
	t, err := s.table(rel, func(p string) (any, error) { return loadCustomAR(p, &s.Spec) })
	if err != nil {
		return nil, err
	}
	return t.(*CustomARTable), nil
}
