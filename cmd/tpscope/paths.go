package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tpscope/tpscope/traces"
)

// The files a verb reads and writes are checked before any work: an input
// a flag names must be there and readable, an output's directory must be
// there and writable. Either fault is the command line's (a usage error
// naming the flag, exit 2), found in a moment rather than after a long
// run; what a file holds is read later, and a damaged one is a failure
// (exit 1) naming the file.

// pathReason is why the system refused a path, without the operation and
// path a *fs.PathError repeats ("no such file or directory").
func pathReason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// checkInputFile refuses a file flag names that is not there, cannot be
// opened or is a directory. what names the file the flag wants ("an
// nccl-tests log"). "" (not given) passes.
func checkInputFile(flag, path, what string) error {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return flagError(flag, path, "%s, want %s", pathReason(err), what)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return flagError(flag, path, "a directory, want %s", what)
	}
	return nil
}

// checkInputPath refuses a file or directory flag names that is not there
// or cannot be opened; what it holds is the reader's to judge.
func checkInputPath(flag, path, what string) error {
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return flagError(flag, path, "%s, want %s", pathReason(err), what)
	}
	return f.Close()
}

// checkTraceSources refuses, before any is read, a trace source that is
// not one: a local file or directory that is not there or cannot be read,
// a directory without trace files, a malformed Jaeger URL. flag names
// where the sources came from ("--trace", or "" for arguments).
func checkTraceSources(flag string, srcs []string, opts ...traces.ReadOption) error {
	for _, src := range srcs {
		if !strings.Contains(src, "://") {
			if err := checkInputPath(flag, strings.TrimPrefix(src, "file:"), "a trace file or a directory of them"); err != nil {
				return err
			}
		}
		// Open checks the source's syntax and that its files are there;
		// it reads nothing.
		if _, err := traces.Open(src, opts...); err != nil {
			return causeError(flag, nil, err)
		}
	}
	return nil
}

// checkOutputFile refuses a file flag would write whose directory is not
// there or not writable, or that is a directory. "" (not given) passes.
// Nothing is created: the directory is probed with a file removed at once.
func checkOutputFile(flag, path string) error {
	if path == "" {
		return nil
	}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return flagError(flag, path, "a directory, want a file to write")
	}
	return checkWritableDir(flag, path, filepath.Dir(path))
}

// input is a file (or trace source) an input flag names.
type input struct{ flag, path string }

// checkNotInput refuses an output flag's file (out) that is one the
// command reads its measurements from: writing it would put the result
// over what it was made of (calibrate --trace t.jsonl -o t.jsonl wrote
// the box over the trace). The same file is the same path, or, where
// both are there, the same file under two names (a link, ./t). "" (not
// given) passes; a trace source that is a URL is no file.
func checkNotInput(outFlag, out string, inputs ...input) error {
	if in, ok := sameFileAs(out, inputs); ok {
		return flagError(outFlag, out, "the file %s reads (%s): writing it would replace what was measured; write elsewhere", in.flag, in.path)
	}
	return nil
}

// checkNotScenarioInput refuses an output flag's file (out) that is one
// the scenario is read from (scenarioFlags.inputFiles: a --topo, --model
// or --draft-model file, --spec-accept-file): run --trace file:cpu.json
// --topo cpu.json wrote the trace over the calibrated box it ran on.
func checkNotScenarioInput(outFlag, out string, inputs ...input) error {
	if in, ok := sameFileAs(out, inputs); ok {
		return flagError(outFlag, out, "the file %s reads (%s): writing it would replace that input; write elsewhere", in.flag, in.path)
	}
	return nil
}

// sameFileAs is the first of inputs that is out: the same path, or, where
// both are there, the same file under two names (a link, ./t). "" (not
// given) is none; a trace source that is a URL is no file.
func sameFileAs(out string, inputs []input) (input, bool) {
	if out == "" {
		return input{}, false
	}
	outAbs, _ := filepath.Abs(out)
	outSt, outErr := os.Stat(out)
	for _, in := range inputs {
		p := strings.TrimPrefix(in.path, "file:")
		if p == "" || strings.Contains(p, "://") {
			continue
		}
		abs, _ := filepath.Abs(p)
		same := abs == outAbs
		if st, err := os.Stat(p); !same && err == nil && outErr == nil {
			same = os.SameFile(st, outSt)
		}
		if same {
			return in, true
		}
	}
	return input{}, false
}

// checkOutputDir refuses a directory flag would write into (creating it
// when it is not there, but not its parents) whose parent is not there
// or not writable, or that is there but is not a writable directory.
func checkOutputDir(flag, path string) error {
	if path == "" {
		return nil
	}
	st, err := os.Stat(path)
	switch {
	case err == nil && !st.IsDir():
		return flagError(flag, path, "not a directory, want a directory to write into")
	case err == nil:
		return checkWritableDir(flag, path, path)
	}
	return checkWritableDir(flag, path, filepath.Dir(path))
}

// checkWritableDir refuses path (flag's value) when dir, where it goes, is
// not a directory this process can create files in.
func checkWritableDir(flag, path, dir string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return flagError(flag, path, "directory %s does not exist", dir)
	case err != nil:
		return flagError(flag, path, "directory %s: %s", dir, pathReason(err))
	case !st.IsDir():
		return flagError(flag, path, "%s is not a directory", dir)
	}
	probe, err := os.CreateTemp(dir, ".tpscope-probe-*")
	if err != nil {
		return flagError(flag, path, "directory %s is not writable: %s", dir, pathReason(err))
	}
	name := probe.Name()
	probe.Close()
	return os.Remove(name)
}

// mkdirOutput creates the directory checkOutputDir passed, without its
// parents (the parent was there when the flags were checked).
func mkdirOutput(flag, path string) error {
	if err := os.Mkdir(path, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s %s: %s", flag, path, pathReason(err))
	}
	return nil
}
