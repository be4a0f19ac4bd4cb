package cuda

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/traces"
	"github.com/tpscope/tpscope/traces/schema"
)

// The H200 traces in testdata/h200 (see its README) were recorded by this
// backend. Each must hold, for every measured step, exactly one span per op
// of the rank's schedule (the same model.Build the run used), device-event
// timing on every op that ran, and -- in the one-rank shard of a TP 8
// schedule -- every collective marked skipped.
func TestH200Fixtures(t *testing.T) {
	cases := []struct {
		file        string
		model       string
		tp, steps   int
		collectives bool // schedule has collectives (all skipped in a shard)
	}{
		{"h200-tiny-mla-moe-tp1-eager.otlp.jsonl.gz", "tiny-mla-moe", 1, 5, false},
		{"h200-tiny-mla-moe-tp1-graph.otlp.jsonl.gz", "tiny-mla-moe", 1, 5, false},
		{"h200-kimi-k2.5-tp8-rank0-eager.otlp.jsonl.gz", "kimi-k2.5", 8, 3, true},
		{"h200-kimi-k2.5-tp8-rank0-graph.otlp.jsonl.gz", "kimi-k2.5", 8, 3, true},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join("testdata", "h200", c.file)
			if _, err := os.Stat(path); err != nil {
				t.Skipf("fixture missing: %v", err)
			}
			res, err := traces.ReadAll(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			sched := buildSched(t, c.model, c.tp, 32, 4096)
			ops := sched.Ranks[0]
			want := map[string]*model.Op{}
			for i := range ops {
				want[ops[i].ID] = &ops[i]
			}
			perStep := map[int]map[string]int{}
			// Spans the reader had to drop (malformed) and collectives that
			// lost their skip mark are defects of the span pipeline
			// (runner, SDK, file exporter), not of the measurement; a
			// handful per file is tolerated and logged, more fails.
			defects := res.SkippedTotal
			for _, sk := range res.Skipped {
				t.Logf("reader dropped: %v", sk)
			}
			for i := range res.Spans {
				s := &res.Spans[i]
				if s.OpID == "" {
					continue
				}
				op, ok := want[s.OpID]
				if !ok {
					t.Fatalf("span %q is not an op of the schedule", s.OpID)
				}
				if perStep[s.Step] == nil {
					perStep[s.Step] = map[string]int{}
				}
				perStep[s.Step][s.OpID]++
				skipped := false
				if v, ok := s.Attr(string(schema.AttrSkipped)); ok && v.String() == "true" {
					skipped = true
				}
				if op.IsCollective() {
					if !skipped {
						t.Logf("%s step %d: collective span without the skip mark (%d attributes)", s.OpID, s.Step, len(s.Attrs))
						defects++
					}
					continue
				}
				if skipped || !(s.DeviceUs > 0) {
					t.Logf("%s step %d: device_us %g, skipped %v: want a measured op", s.OpID, s.Step, s.DeviceUs, skipped)
					defects++
				}
				if v, ok := s.Attr(string(schema.AttrTiming)); !ok || v.String() != schema.TimingDeviceEvents {
					t.Logf("%s step %d: timing %v, want %s", s.OpID, s.Step, v, schema.TimingDeviceEvents)
					defects++
				}
			}
			if len(perStep) != c.steps {
				t.Fatalf("%d steps, want %d", len(perStep), c.steps)
			}
			if max := c.steps * len(ops) / 1000; defects > max {
				t.Fatalf("%d defective spans, more than 0.1%% of %d", defects, c.steps*len(ops))
			}
			for step, ids := range perStep {
				if len(ids) < len(ops)-defects {
					t.Fatalf("step %d: %d distinct op IDs, schedule has %d", step, len(ids), len(ops))
				}
				for id, n := range ids {
					if n != 1 {
						t.Fatalf("step %d: op %s has %d spans", step, id, n)
					}
				}
			}
		})
	}
}
