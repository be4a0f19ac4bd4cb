package perfdb

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A version directory of aiconfigurator 0.12+ and of AISimulate may hold,
// in place of some of its tables, a reuse.yaml naming the engine version
// whose table stands for it (aiconfigurator's migration of
// SHARED_LAYER_REUSE.txt: 245 such files in aiconfigurator 095f58a, e.g.
// h200_sxm/mla/vllm/0.22.0 taking its MLA modules from 0.24.0):
//
//	schema_version: 1
//	reuse:
//	- table: mla_generation_module_perf
//	  from_version: 0.24.0
//	  reason: migrated from SHARED_LAYER_REUSE.txt (...)
//	  approved_by: ...
//
// The database follows such a line when the table itself is absent, and
// says so (System.Reuses), since the rows then measured another version.
const reuseFile = "reuse.yaml"

// maxReuseHops bounds a chain of reuse lines (0.5.12 -> 0.5.14 -> ...).
const maxReuseHops = 8

// Reuse is one line of a reuse.yaml: Table (a table's base name without
// .parquet) of this version is FromVersion's.
type Reuse struct {
	Table, FromVersion, Reason string
}

type reuseYAML struct {
	SchemaVersion *int `yaml:"schema_version"`
	Reuse         []struct {
		Table       string `yaml:"table"`
		FromVersion string `yaml:"from_version"`
		Reason      string `yaml:"reason"`
		ApprovedBy  string `yaml:"approved_by"`
	} `yaml:"reuse"`
}

// ParseReuse reads a reuse.yaml (name is for errors). It fails, naming the
// file and the field, on a schema other than 1, a line without a table
// or a version, a table or version that is not a plain name, or a table
// listed twice.
func ParseReuse(name string, data []byte) ([]Reuse, error) {
	var y reuseYAML
	if err := yaml.Unmarshal(data, &y); err != nil {
		return nil, &FileError{Path: name, Row: -1, Err: oneLine(err)}
	}
	fe := func(field, format string, a ...any) error {
		return &FileError{Path: name, Field: field, Row: -1, Err: fmt.Errorf(format, a...)}
	}
	if y.SchemaVersion == nil {
		return nil, fe("schema_version", "missing: want 1")
	}
	if *y.SchemaVersion != 1 {
		return nil, fe("schema_version", "%d: want 1 (the schema this reader knows)", *y.SchemaVersion)
	}
	out := make([]Reuse, 0, len(y.Reuse))
	for i, r := range y.Reuse {
		f := fmt.Sprintf("reuse[%d]", i)
		t, v := strings.TrimSpace(r.Table), strings.TrimSpace(r.FromVersion)
		if t == "" || strings.ContainsAny(t, `/\`) || strings.HasSuffix(t, ".parquet") {
			return nil, fe(f+".table", "%q: want a table's base name such as moe_perf", r.Table)
		}
		if v == "" || strings.ContainsAny(v, `/\`) || v == "." || v == ".." {
			return nil, fe(f+".from_version", "%q: want a version directory name such as 0.24.0", r.FromVersion)
		}
		if slices.ContainsFunc(out, func(o Reuse) bool { return o.Table == t }) {
			return nil, fe(f+".table", "%q listed twice", t)
		}
		out = append(out, Reuse{Table: t, FromVersion: v, Reason: strings.TrimSpace(r.Reason)})
	}
	return out, nil
}

// reused resolves rel (family/engine/version/file), a table absent from
// its version directory, through the reuse.yaml files: the rel of the
// table that stands for it and a sentence saying so, or "" when no
// reuse.yaml names it. A line that leads nowhere (a version without the
// table and without a line for it, a loop, a line naming its own version)
// is an error naming the reuse.yaml.
func (s *System) reused(rel string) (string, string, error) {
	family, engine, version, file := splitRel(rel)
	table := strings.TrimSuffix(file, ".parquet")
	seen := []string{version}
	var via []string
	for hop := 0; hop < maxReuseHops; hop++ {
		yml := filepath.Join(s.dir, family, engine, version, reuseFile)
		data, err := os.ReadFile(yml)
		if errors.Is(err, fs.ErrNotExist) && hop == 0 {
			return "", "", nil
		}
		if err != nil {
			return "", "", errorf("%w", err)
		}
		lines, err := ParseReuse(yml, data)
		if err != nil {
			return "", "", err
		}
		i := slices.IndexFunc(lines, func(r Reuse) bool { return r.Table == table })
		if i < 0 {
			if hop == 0 {
				return "", "", nil
			}
			return "", "", &FileError{Path: yml, Field: "reuse", Row: -1,
				Err: fmt.Errorf("no line for %s, which %s's reuse.yaml sends here, and no such table: want the table or a line naming its version", table, seen[len(seen)-2])}
		}
		from := lines[i].FromVersion
		if slices.Contains(seen, from) {
			return "", "", &FileError{Path: yml, Field: fmt.Sprintf("reuse[%d].from_version", i), Row: -1,
				Err: fmt.Errorf("%s: a loop (%s -> %s): want a version that holds the table", from, strings.Join(seen, " -> "), from)}
		}
		seen = append(seen, from)
		via = append(via, fmt.Sprintf("%s's reuse.yaml (%s)", version, orNone(lines[i].Reason)))
		next := path.Join(family, engine, from, file)
		if _, err := os.Stat(filepath.Join(s.dir, filepath.FromSlash(next))); err == nil {
			return next, fmt.Sprintf("%s/%s/%s/%s: %s's table, by %s", family, engine, seen[0], table, from, strings.Join(via, ", then ")), nil
		}
		version = from
	}
	return "", "", errorf("%s/%s: reuse.yaml chain of %s longer than %d versions (%s)", family, engine, table, maxReuseHops, strings.Join(seen, " -> "))
}

func orNone(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

// splitRel splits a table's slash-separated rel into its four parts
// (family/engine/version/file, as System.rel builds it).
func splitRel(rel string) (family, engine, version, file string) {
	parts := strings.SplitN(rel, "/", 4)
	for len(parts) < 4 {
		parts = append([]string{""}, parts...)
	}
	return parts[0], parts[1], parts[2], parts[3]
}

// Reuses lists, sorted, every table read so far through a reuse.yaml:
// which version's rows stand for which, and by which line.
func (s *System) Reuses() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.tables {
		if e.reused != "" {
			out = append(out, e.reused)
		}
	}
	slices.Sort(out)
	return out
}
