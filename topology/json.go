package topology

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tpscope/tpscope/internal/jsonerr"
)

// Parse decodes a topology from JSON and validates it. Unknown fields are
// errors (a typo in a hand-written file must not pass silently). name is
// used in error messages (a file path).
func Parse(data []byte, name string) (*Topology, error) {
	if what := foreignDocument(data); what != "" {
		return nil, fmt.Errorf("%s: %s, not a topology: want a topology JSON (a preset's, tpscope topo discover's or calibrate's output)", name, what)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var t Topology
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("%s: %w", name, jsonErr(data, err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: trailing data after the topology object", name)
	}
	if err := calibrationKeys(data); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := deviceKeys(data, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &t, nil
}

// calibrationFields are the fields every fitted collective has, written
// even when 0: a latency of 0 is a fit's answer, and one missing from the
// file is a damaged file, which would price that term at 0.
var calibrationFields = []string{"algo", "proto", "ranks", "base_lat_us", "hw_lat_us", "bus_bw_gbps"}

// calibrationKeys refuses a calibration that lost a field: "collectives",
// or one of calibrationFields of an entry (op and p2p_level may be left
// out: every op, any P2P setting). Decoded into Go values, a missing
// number reads as 0.
func calibrationKeys(data []byte) error {
	var top struct {
		Calibration *struct {
			Collectives *[]map[string]json.RawMessage `json:"collectives"`
		} `json:"calibration"`
	}
	if json.Unmarshal(data, &top) != nil || top.Calibration == nil {
		return nil // the typed decode has said what is wrong, or there is none
	}
	if top.Calibration.Collectives == nil {
		return fmt.Errorf(`calibration: field "collectives" missing: want the fitted collectives (calibrate writes them)`)
	}
	for k, c := range *top.Calibration.Collectives {
		for _, f := range calibrationFields {
			if _, ok := c[f]; !ok {
				return fmt.Errorf(`calibration.collectives[%d]: field %q missing: want each of %s (calibrate writes them, 0 included)`, k, f, strings.Join(calibrationFields, ", "))
			}
		}
	}
	return nil
}

// StatesCalibration reports whether the topology states calibrated facts:
// fitted collectives, a device whose figures were fitted on an engine's
// kernels (calibrated_engine), or a figure whose source says it was
// calibrated or measured by 'tpscope calibrate' (files written before
// calibrated_engine was).
func (t *Topology) StatesCalibration() bool {
	if t.Calibration != nil {
		return true
	}
	calibrated := func(src string) bool {
		return strings.HasPrefix(src, "calibrated:") || strings.Contains(src, "tpscope calibrate")
	}
	for _, src := range t.Sources {
		if calibrated(src) {
			return true
		}
	}
	for _, d := range t.Devices {
		if d.CalibratedEngine != "" {
			return true
		}
		for _, src := range d.Sources {
			if calibrated(src) {
				return true
			}
		}
	}
	return false
}

// Sniff is the box's name when data is a topology's JSON (a preset's,
// topo discover's or calibrate's output: an object with "gpus" and
// "links"), "" otherwise: for a verb that reads other documents to say
// that a file it was given is a topology and where it goes.
func Sniff(data []byte) string {
	var top struct {
		Name  string           `json:"name"`
		GPUs  *json.RawMessage `json:"gpus"`
		Links *json.RawMessage `json:"links"`
	}
	if json.Unmarshal(data, &top) != nil || top.GPUs == nil || top.Links == nil {
		return ""
	}
	if top.Name == "" {
		return "unnamed"
	}
	return top.Name
}

// foreignDocument names the kind of JSON document data is when it is one
// a user may pass for a topology by mistake (a model's config.json, an
// OTLP trace), so the refusal says so instead of naming its first field
// as misspelt; "" otherwise.
func foreignDocument(data []byte) string {
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return ""
	}
	switch {
	case top["model_type"] != nil || top["architectures"] != nil:
		return "a model's config.json (it has model_type or architectures)"
	case top["resourceSpans"] != nil:
		return "an OTLP trace (it has resourceSpans)"
	}
	return ""
}

// jsonErr words a decoding error with its line and field and the JSON
// kind wanted, without Go type names.
func jsonErr(data []byte, err error) error {
	return jsonerr.Wrap(data, err, "a JSON object")
}

// Load reads and validates a topology JSON file.
func Load(path string) (*Topology, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load topology: %w", err)
	}
	return Parse(data, path)
}

// Marshal encodes the topology as indented JSON.
func (t *Topology) Marshal() ([]byte, error) {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Save writes the topology as indented JSON to path.
func (t *Topology) Save(path string) error {
	b, err := t.Marshal()
	if err != nil {
		return fmt.Errorf("save topology %s: %w", path, err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("save topology: %w", err)
	}
	return nil
}

// Clone returns a deep copy (validated again, so its path table is its own).
func (t *Topology) Clone() *Topology {
	c := t.copyData()
	if t.paths != nil {
		if err := c.Validate(); err != nil {
			panic(fmt.Sprintf("topology: clone: %v", err))
		}
	}
	return c
}

// copyData returns a deep copy of t's data without a path table, for
// callers that change the copy and validate it themselves (Subset).
func (t *Topology) copyData() *Topology {
	b, err := json.Marshal(t)
	if err != nil {
		panic(fmt.Sprintf("topology: clone: %v", err)) // a validated topology always marshals
	}
	var c Topology
	if err := json.Unmarshal(b, &c); err != nil {
		panic(fmt.Sprintf("topology: clone: %v", err))
	}
	return &c
}

// SameBox reports whether t and u are one box under two names: every
// field but Name equal, as their JSON says (a preset and its description,
// "rtxpro6000-2s" and "pcie-2s:8xrtx-pro-6000-server", are; a subset or
// another PCIe generation is not).
func (t *Topology) SameBox(u *Topology) bool {
	if t == nil || u == nil {
		return t == u
	}
	a, b := *t, *u
	a.Name, b.Name = "", ""
	// The box a subset was cut from prices nothing of it, and results
	// saved before subsets kept it lack the field.
	a.WholeGPUs, b.WholeGPUs = 0, 0
	ja, errA := json.Marshal(&a)
	jb, errB := json.Marshal(&b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
