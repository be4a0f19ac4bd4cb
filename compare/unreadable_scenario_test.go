package compare_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/traces"
	"github.com/tpscope/tpscope/traces/schema"
)

// TestUnreadableRecordedScenarioNamesItsSource: a trace whose step span
// records a scenario that does not read (its tpscope.scenario cut short,
// as an edited or half-written file has it) is named in the error that no
// scenario could be compared or fitted: the file, the trace and the
// attribute, where the line gave the reason alone and, among several
// sources, no way to tell which one to mend.
func TestUnreadableRecordedScenarioNamesItsSource(t *testing.T) {
	path := writeSpans(t, filepath.Join(t.TempDir(), "cut-scenario.json"), []spec{tinySpec, tinySpec}, nil,
		schema.AttrScenario.String(`{"model":{"name":"tiny-mla-moe"},"plan":"tp8","work`))
	res := readSource(t, path)
	if len(res.Scenarios) != 1 || len(res.Scenarios[0].Traces) != 2 {
		t.Fatalf("the fixture records %d scenarios, want one of 2 traces", len(res.Scenarios))
	}
	trace0 := res.Scenarios[0].Traces[0].String()
	for _, w := range []string{"tpscope.scenario", "truncated", path + " trace "} {
		_, err := compare.Compare([]*traces.Result{res}, compare.Options{})
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("compare: error %v, want it to name %q", err, w)
		}
		_, err = compare.Calibrate([]*traces.Result{res}, compare.CalibrateOptions{})
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("calibrate: error %v, want it to name %q", err, w)
		}
	}
	// The trace named is one of the file's (each of its traces records
	// the same cut value; the first in reading order is named).
	_, err := compare.Compare([]*traces.Result{res}, compare.Options{})
	if err == nil || !strings.Contains(err.Error(), res.Scenarios[0].Traces[0].String()) && !strings.Contains(err.Error(), res.Scenarios[0].Traces[1].String()) {
		t.Errorf("compare: error %v, want it to name one of the file's traces (%s ...)", err, trace0)
	}
}
