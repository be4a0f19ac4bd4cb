package compare_test

import (
	"bytes"
	"encoding/csv"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/traces"
)

// TestCSVRowsNameTheirScenario: the CSV of a comparison of two scenarios
// (batch 8 and batch 16 of one model and box) names each row's scenario,
// not only its number, which nothing in the CSV resolves.
func TestCSVRowsNameTheirScenario(t *testing.T) {
	other := tinySpec
	other.Workload = "decode b16 ctx512"
	path := writeSpans(t, filepath.Join(t.TempDir(), "two.json"), []spec{tinySpec, other, tinySpec}, nil)
	rep, err := compare.Compare([]*traces.Result{readSource(t, path)}, compare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Scenarios) != 2 {
		t.Fatalf("%d scenarios, want 2", len(rep.Scenarios))
	}
	var b bytes.Buffer
	if err := rep.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 3 || rows[0][0] != "scenario" || rows[0][1] != "scenario_name" {
		t.Fatalf("header %v, want scenario, scenario_name first", rows[0])
	}
	// The batch each scenario measured, from the specs written.
	batch := map[string]string{"1": "decode b8 ctx512", "2": "decode b16 ctx512"}
	seen := map[string]bool{}
	for _, r := range rows[1:] {
		want, ok := batch[r[0]]
		if !ok {
			t.Fatalf("row of scenario %q", r[0])
		}
		if !strings.Contains(r[1], "tiny-mla-moe tp8 "+want) {
			t.Errorf("scenario %s row named %q, want the scenario of %s", r[0], r[1], want)
		}
		seen[r[0]] = true
	}
	if !seen["1"] || !seen["2"] {
		t.Errorf("rows of scenarios %v, want both", seen)
	}
}
