package topology

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Ref says how to find a topology again, in another process or on another
// day: a preset (or any name Resolve accepts) by name, or a topology JSON by
// absolute path and the SHA-256 of its content; GPUs is the subset of the
// first n GPUs (0 = all). It is what a scenario records instead of the box.
type Ref struct {
	Name   string `json:"name,omitempty"`
	Path   string `json:"path,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	GPUs   int    `json:"gpus,omitempty"`
}

// NewRef returns the reference of what Resolve(nameOrFile, gpus) would
// load: a file (absolute path and content hash) when nameOrFile is an
// existing file and no preset has that name, else the name. It does not
// load the topology; Resolve checks it.
func NewRef(nameOrFile string, gpus int) (Ref, error) {
	if nameOrFile == "" {
		nameOrFile = DefaultPreset
	}
	if gpus < 0 {
		return Ref{}, fmt.Errorf("topology %q: gpus %d: want 0 (all) or more", nameOrFile, gpus)
	}
	if st, err := os.Stat(nameOrFile); err == nil && !st.IsDir() {
		if _, perr := Preset(nameOrFile); perr != nil {
			abs, err := filepath.Abs(nameOrFile)
			if err != nil {
				return Ref{}, fmt.Errorf("topology %q: %w", nameOrFile, err)
			}
			sum, err := fileHash(abs)
			if err != nil {
				return Ref{}, err
			}
			return Ref{Path: abs, SHA256: sum, GPUs: gpus}, nil
		}
	}
	return Ref{Name: nameOrFile, GPUs: gpus}, nil
}

// String is the name or path, with "@N gpus" for a subset.
func (r Ref) String() string {
	s := r.Name
	if s == "" {
		s = r.Path
	}
	if r.GPUs > 0 {
		s += "@" + strconv.Itoa(r.GPUs) + "gpus"
	}
	return s
}

// Key is what makes two references the same box: a preset's name, or a
// file's content hash (its path differs between machines), with the GPUs
// used. Equal keys name the same box.
func (r Ref) Key() string {
	if r.SHA256 != "" {
		r.Name, r.Path = "", ""
	}
	return fmt.Sprintf("%s|%s|%d", r.Name, r.SHA256, r.GPUs)
}

// IsZero reports whether the reference names nothing.
func (r Ref) IsZero() bool { return r.Name == "" && r.Path == "" }

// Resolve loads the topology: Resolve(Name, GPUs), or the file at Path after
// checking that its content still has SHA256 (a changed file is an error
// naming both hashes).
func (r Ref) Resolve() (*Topology, error) {
	switch {
	case r.Name != "" && r.Path != "":
		return nil, fmt.Errorf("topology reference names both %q and file %s: want one", r.Name, r.Path)
	case r.Name != "":
		return Resolve(r.Name, r.GPUs)
	case r.Path != "":
		if r.SHA256 != "" {
			got, err := fileHash(r.Path)
			if err != nil {
				return nil, err
			}
			if got != r.SHA256 {
				return nil, fmt.Errorf("topology file %s changed since it was recorded: sha256 %s, recorded %s", r.Path, got, r.SHA256)
			}
		}
		return Resolve(r.Path, r.GPUs)
	}
	return nil, errors.New("topology reference is empty: want a preset name or a topology JSON path")
}

func fileHash(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("topology %s: %w", path, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}
