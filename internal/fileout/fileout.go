// Package fileout writes an output file whole or not at all: a report, a
// chart or a result that fails part-way (a full disk, an encoder error,
// an interrupt) leaves no half-written file behind and an earlier file of
// that name as it was.
package fileout

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// newFileMode is a new file's permissions: what os.Create gives under
// the usual umask (022). A file written over keeps its own.
const newFileMode fs.FileMode = 0o644

// Write writes what write produces to path. It writes a temporary file in
// path's directory and renames it over path only once write and the
// close have succeeded, so path holds either its old content or all of
// the new. A path that is there and not a regular file (/dev/stdout, a
// named pipe) is written directly: it cannot be replaced. Errors name
// path.
func Write(path string, write func(io.Writer) error) (err error) {
	mode := newFileMode
	if st, serr := os.Stat(path); serr == nil {
		if !st.Mode().IsRegular() {
			return writeDirect(path, write)
		}
		mode = st.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("%s: %w", path, errors.Unwrap(err))
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := write(tmp); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// writeDirect writes to a path that is not a regular file.
func writeDirect(path string, write func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}
