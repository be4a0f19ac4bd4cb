package main

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestREADMESeedTable recomputes the figures of the README's table "What
// the user reported against what tpscope predicts" from the predictions
// its rows name, so the table cannot go stale unseen (it had: 52.0 and
// 57.6 tok/s shown where the binary printed 57.3 and 58.2). The tables'
// column needs the sample perf DB beside the checkout; without it only
// the priors' column is checked.
func TestREADMESeedTable(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	db := samplePerfDB(t, false)
	// predict returns tokens/s and the communication share (%) that the
	// lines "tokens/s" and "communication" print.
	predict := func(args ...string) (tokS, commPct float64) {
		t.Helper()
		code, out, errs := runCLI(t, append([]string{"predict", "--topo", "rtxpro6000-2s", "--tp", "8", "--kv-dtype", "bf16"}, args...)...)
		if code != 0 {
			t.Fatalf("predict %s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
		tok := regexp.MustCompile(`(?m)^tokens/s\s+([0-9.]+) per request`).FindStringSubmatch(out)
		comm := regexp.MustCompile(`(?m)^communication\s+[0-9.]+ us, ([0-9.]+) % of the step`).FindStringSubmatch(out)
		if tok == nil || comm == nil {
			t.Fatalf("predict %s: no tokens/s or communication line in\n%s", strings.Join(args, " "), out)
		}
		tokS, _ = strconv.ParseFloat(tok[1], 64)
		commPct, _ = strconv.ParseFloat(comm[1], 64)
		return tokS, commPct
	}
	stock := []string{"--cuda-graphs=false"}
	tuned := []string{"--nccl-proto", "LL", "--p2p-level", "SYS"}
	columns := []struct {
		name  string
		extra []string
	}{{"priors", nil}}
	if db != "" {
		columns = append(columns, struct {
			name  string
			extra []string
		}{"tables", []string{"--perf-db", db}})
	} else {
		t.Log("sample perf DB absent: the tables' column is not checked")
	}
	for _, c := range columns {
		gs, gsc := predict(append(append([]string{"--model", "glm-5-nvfp4"}, stock...), c.extra...)...)
		gt, gtc := predict(append(append([]string{"--model", "glm-5-nvfp4"}, tuned...), c.extra...)...)
		_, ksc := predict(append(append([]string{"--model", "kimi-k2.5-nvfp4"}, stock...), c.extra...)...)
		kt, ktc := predict(append(append([]string{"--model", "kimi-k2.5-nvfp4"}, tuned...), c.extra...)...)
		for _, cell := range []string{
			fmt.Sprintf("%.1f → %.1f (x%.2f)", gs, gt, gt/gs),
			fmt.Sprintf("GLM-5 %.1f %% → %.1f %%, Kimi %.1f %% → %.1f %%", gsc, gtc, ksc, ktc),
			fmt.Sprintf("| %.1f |", kt),
		} {
			if c.name == "tables" && strings.HasPrefix(cell, "| ") {
				cell = fmt.Sprintf("| **%.1f** (public boxes", kt)
			}
			if !strings.Contains(readme, cell) {
				t.Errorf("%s: the README's seed table lacks %q", c.name, cell)
			}
		}
	}
}

// TestREADMEHBMTable runs each row of the README's "8-GPU HBM boxes"
// table through predict with the flags the row prints (plus the --tp 8
// and --p2p-level SYS every public row runs) and checks the priors' and
// the tables' tokens/s and errors against the measured figure the row
// shows, so the table's flags are the ones that price it. The tables'
// column needs the sample perf DB beside the checkout.
func TestREADMEHBMTable(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	start := strings.Index(readme, "**8-GPU HBM boxes.**")
	if start < 0 {
		t.Fatal("README has no '8-GPU HBM boxes' table")
	}
	section := readme[start:]
	if end := strings.Index(section, "\n\n"+"Both price"); end > 0 {
		section = section[:end]
	}
	row := regexp.MustCompile("(?m)^\\| (HV\\d+)[^|]*\\| `([^`]+)` \\| ([0-9.]+)[^|]*\\| ([^|]+) \\| ([^|]+) \\|")
	db := samplePerfDB(t, false)
	rows := row.FindAllStringSubmatch(section, -1)
	if len(rows) == 0 {
		t.Fatal("no HV row in the README's HBM table")
	}
	tokS := regexp.MustCompile(`(?m)^tokens/s\s+[0-9.]+ per request, ([0-9.]+) aggregate`)
	for _, r := range rows {
		id, flags, cells := r[1], strings.Fields(r[2]), []string{strings.TrimSpace(r[4]), strings.TrimSpace(r[5])}
		measured, _ := strconv.ParseFloat(r[3], 64)
		for i, extra := range [][]string{nil, {"--perf-db", db}} {
			if i == 1 && db == "" {
				t.Logf("%s: sample perf DB absent: the tables' column is not checked", id)
				continue
			}
			args := append(append([]string{"predict", "--tp", "8", "--p2p-level", "SYS"}, flags...), extra...)
			code, out, errs := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("%s: %s: exit %d: %s", id, strings.Join(args, " "), code, errs)
			}
			m := tokS.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("%s: no aggregate tokens/s line in\n%s", id, out)
			}
			got, _ := strconv.ParseFloat(m[1], 64)
			want := fmt.Sprintf("%.1f (%+.1f %%)", got, 100*(got/measured-1))
			if cells[i] != want {
				t.Errorf("%s: column %d reads %q, predict prints %q", id, i+1, cells[i], want)
			}
		}
	}
}
