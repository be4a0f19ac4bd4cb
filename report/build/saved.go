package build

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/traces"
)

// Saved is a result a verb wrote with --output json: exactly one of its
// fields is set.
type Saved struct {
	Advice     *sim.Advice    // tpscope advise --output json
	Comparison *traces.Report // tpscope compare --output json
}

// maxSavedBytes bounds a saved result read into memory (a compare JSON of
// a large run is a few MB).
const maxSavedBytes = 256 << 20

// ReadSaved reads the JSON of `tpscope advise --output json` or `tpscope
// compare --output json` from r; name (the file) is used in errors. The
// kind is told by the top-level keys: advice has "baseline" and "rows", a
// comparison "sources" and "scenarios". Anything else is an error that says
// what was found and what is expected.
func ReadSaved(r io.Reader, name string) (*Saved, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxSavedBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(data) > maxSavedBytes {
		return nil, fmt.Errorf("%s: larger than %d MB: not a saved advise or compare result", name, maxSavedBytes>>20)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object (want the output of 'tpscope advise --output json' or 'tpscope compare --output json'): %w", name, err)
	}
	has := func(keys ...string) bool {
		for _, k := range keys {
			if _, ok := top[k]; !ok {
				return false
			}
		}
		return true
	}
	decode := func(v any) error {
		dec := json.NewDecoder(bytes.NewReader(data))
		if err := dec.Decode(v); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	switch {
	case has("baseline", "rows"):
		var a sim.Advice
		if err := decode(&a); err != nil {
			return nil, fmt.Errorf("advise result %w", err)
		}
		if a.Baseline == nil {
			return nil, fmt.Errorf("%s: advise result without a baseline (field \"baseline\" is null)", name)
		}
		return &Saved{Advice: &a}, nil
	case has("sources", "scenarios"):
		var c traces.Report
		if err := decode(&c); err != nil {
			return nil, fmt.Errorf("compare result %w", err)
		}
		return &Saved{Comparison: &c}, nil
	case has("ops", "step_us"):
		return nil, fmt.Errorf("%s: this is a prediction ('tpscope predict --output json'), which cannot be read back; pass its scenario flags to 'tpscope report' instead", name)
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > 8 {
		keys = append(keys[:8], "...")
	}
	return nil, fmt.Errorf("%s: a JSON object with keys %s; want the output of 'tpscope advise --output json' (keys baseline, rows) or 'tpscope compare --output json' (keys sources, scenarios)", name, strings.Join(keys, ", "))
}

// ReadSavedFile is ReadSaved of a file.
func ReadSavedFile(path string) (*Saved, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadSaved(f, path)
}
