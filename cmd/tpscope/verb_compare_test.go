package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/traces"
	"github.com/tpscope/tpscope/traces/schema"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// writeExactRun writes steps of tiny-mla-moe TP 8 decode whose every op
// takes exactly its predicted time: compare must report 0 % error.
func writeExactRun(t *testing.T, path string, steps int) {
	t.Helper()
	writeScaledRun(t, path, steps, nil)
}

// writeScaledRun is writeExactRun with each op's time taken by us(op)
// (nil: its predicted time).
func writeScaledRun(t *testing.T, path string, steps int, us func(*sim.OpResult) float64) {
	t.Helper()
	if us == nil {
		us = func(op *sim.OpResult) float64 { return op.Us }
	}
	a, err := model.Preset("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	box, err := topology.Resolve("rtxpro6000-2s", 0)
	if err != nil {
		t.Fatal(err)
	}
	sc := sim.Scenario{Arch: a, Plan: model.Plan{TP: 8}, Workload: model.Workload{Batch: 8, Context: 512}, Topo: box}
	pr, sched, err := sim.Predict(sc)
	if err != nil {
		t.Fatal(err)
	}
	js, err := sc.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	exp, err := traces.NewFileExporter(path)
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr := tp.Tracer(schema.ScopeName)
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for step := 0; step < steps; step++ {
		ctx, root := tr.Start(context.Background(), schema.SpanStep, trace.WithTimestamp(at), trace.WithAttributes(
			schema.AttrModel.String(a.Name), schema.AttrTopology.String(box.Name), schema.AttrPlan.String(sc.Plan.String()),
			schema.AttrWorkload.String(sc.Workload.String()), schema.AttrOptions.StringSlice(nil), schema.AttrScenario.String(string(js)), schema.AttrStep.Int(step)))
		end := at
		for r := range sched.Ranks {
			rctx, rsp := tr.Start(ctx, schema.RankSpanName(r), trace.WithTimestamp(at))
			cur := at
			for i := range sched.Ranks[r] {
				op := &sched.Ranks[r][i]
				d := us(&pr.Ops[i])
				attrs := append(schema.OpAttributes(op), schema.AttrDeviceUs.Float64(d))
				_, sp := tr.Start(rctx, op.ID, trace.WithTimestamp(cur), trace.WithAttributes(attrs...))
				cur = cur.Add(time.Duration(d * 1e3))
				sp.End(trace.WithTimestamp(cur))
			}
			rsp.End(trace.WithTimestamp(cur))
			end = cur
		}
		root.End(trace.WithTimestamp(end))
		at = end.Add(time.Millisecond)
	}
	if err := tp.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestCompareAndCalibrateTraceVerbs(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "run.json")
	writeExactRun(t, run, 4)
	box := filepath.Join(dir, "box.json")
	tests := []struct {
		name     string
		args     []string
		code     int
		contains string
	}{
		{"table", []string{"compare", "--trace", run}, 0, "+0.0 %"},
		{"markdown", []string{"compare", "--trace", run, "--output", "markdown", "--plot", filepath.Join(dir, "c.svg")}, 0, "| step |"},
		{"json", []string{"compare", "--trace", run, "--output", "json"}, 0, `"err_pct"`},
		{"no trace", []string{"compare"}, 2, ""},
		{"bad output", []string{"compare", "--trace", run, "--output", "xml"}, 2, ""},
		{"csv", []string{"compare", "--trace", run, "--output", "csv"}, 0, "scenario,scenario_name,key,kind"},
		{"bad plot", []string{"compare", "--trace", run, "--plot", "x.gif"}, 2, ""},
		{"missing file", []string{"compare", "--trace", filepath.Join(dir, "nope.json")}, 2, ""},
		{"calibrate", []string{"calibrate", "--trace", run, "-o", box}, 0, "held-out odd steps (2)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := dispatch(tc.args, &out, &errb); code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, errb.String())
			}
			if tc.contains != "" && !strings.Contains(out.String(), tc.contains) {
				t.Errorf("output lacks %q:\n%s", tc.contains, out.String())
			}
		})
	}
	// The calibrated box loads and says where it came from; an exact run
	// leaves the efficiencies at their priors.
	cal, err := topology.Load(box)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(cal)
	if !strings.Contains(string(b), "calibrated: trace "+run) {
		t.Errorf("calibrated topology lacks provenance")
	}
	prior, _ := topology.Preset("rtxpro6000-2s")
	for k, v := range cal.DeviceOf(0).Efficiency {
		if p := prior.DeviceOf(0).Efficiency[k]; p != 0 && (v/p-1 > 0.01 || v/p-1 < -0.01) {
			t.Errorf("efficiency %s: %v, prior %v: an exact run should not move it", k, v, p)
		}
	}
}

// A trace given twice, or a file and a directory that holds it, would
// count every span twice: compare, calibrate and report refuse it before
// any output, in one line naming both sources (exit 2); the same name
// twice is said so, before anything is read.
func TestTraceVerbsRefuseATraceGivenTwice(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "run.json")
	writeExactRun(t, run, 2)
	for _, tc := range []struct {
		args  []string
		first string // the source the second repeats
	}{
		{[]string{"compare", "--trace", run + "," + run}, run},
		{[]string{"compare", "--trace", dir, "--trace", run}, dir},
		{[]string{"calibrate", "--trace", run + "," + run, "-o", filepath.Join(dir, "box.json")}, run},
		{[]string{"report", "--trace", run + "," + run, "-o", filepath.Join(dir, "r.html")}, run},
	} {
		t.Run(strings.Join(tc.args[:3], " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := dispatch(tc.args, &out, &errb); code != 2 {
				t.Fatalf("exit %d, want 2; stderr: %s", code, errb.String())
			}
			msg := strings.TrimSpace(errb.String())
			want := "repeat spans of " + tc.first + " "
			if tc.first == run {
				want = ": given twice: give each trace once"
			}
			if strings.Contains(msg, "\n") || !strings.Contains(msg, "--trace "+run+": ") || !strings.Contains(msg, want) {
				t.Errorf("stderr %q: want one line naming --trace %s and %s, which it repeats", msg, run, tc.first)
			}
		})
	}
}

// TestTraceFlagNamesOtherDocuments: a topology JSON (calibrate's output)
// or a saved result given where a trace goes is named for what it is,
// with the flag that takes it (--topo FILE, report --from FILE), in one
// line, where the readers said only "unknown trace format".
func TestTraceFlagNamesOtherDocuments(t *testing.T) {
	topo := "testdata/cpu-ranks/cpu-4r.json"
	saved := filepath.Join(t.TempDir(), "predict.json")
	code, js, stderr := runCLI(t, "predict", "--output", "json")
	if code != 0 {
		t.Fatalf("predict: exit %d: %s", code, stderr)
	}
	if err := os.WriteFile(saved, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"compare", "--trace", topo}, []string{"--trace " + topo + ": a topology JSON (box cpu-4r), not a trace: give it with --topo " + topo}},
		{[]string{"trace", "read", topo}, []string{"trace source " + topo + ": a topology JSON (box cpu-4r), not a trace", "--topo " + topo}},
		{[]string{"compare", "--trace", saved}, []string{"--trace " + saved + ": a saved 'tpscope predict --output json' result, not a trace: 'tpscope report --from " + saved + "' reads it"}},
		{[]string{"trace", "read", "--trace", saved}, []string{"--trace " + saved + ": a saved 'tpscope predict --output json' result", "report --from " + saved}},
	} {
		line := oneLineUsage(t, c.args, c.wants...)
		if strings.Contains(line, "unknown trace format") {
			t.Errorf("%v: %q", c.args, line)
		}
	}
}
