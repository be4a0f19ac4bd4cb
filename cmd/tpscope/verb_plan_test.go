package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
)

func TestPlanJSON(t *testing.T) {
	dir := t.TempDir()
	plot := filepath.Join(dir, "front.png")
	var out, errb bytes.Buffer
	args := []string{"plan", "--topo", "rtxpro6000-2s,h200-nvswitch", "--gpu-counts", "4,8", "--plans", "tp8,tp4,tp2-dp4-ep",
		"--batches", "1,64", "--contexts", "4K", "--output", "json", "--plot", plot, "--slo-ms", "100"}
	if code := dispatch(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res struct {
		Points []struct {
			Topology    string  `json:"topology"`
			Plan        string  `json:"plan"`
			Fits        bool    `json:"fits"`
			ShortfallGB float64 `json:"shortfall_gb"`
			Context     int     `json:"context"`
			AtCapacity  bool    `json:"at_capacity"`
		} `json:"points"`
		Pareto []int `json:"pareto"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	// tp8 on two 8-GPU boxes, tp4 on two 4-GPU subsets, tp2-dp4-ep on the
	// 8-GPU boxes: 3 x 2 boxes x 2 batches x 1 context x 2 KV dtypes.
	swept := 0
	for _, p := range res.Points {
		if !p.AtCapacity {
			swept++
		}
	}
	if swept != 24 {
		t.Fatalf("%d swept points, want 24", swept)
	}
	short := 0
	for _, p := range res.Points {
		if p.Context != 4096 {
			t.Errorf("context %d, want 4K = 4096", p.Context)
		}
		if !p.Fits {
			short++
			if p.ShortfallGB <= 0 {
				t.Errorf("%s %s does not fit but has no shortfall", p.Topology, p.Plan)
			}
		}
	}
	// Kimi-K2.5-NVFP4 on 4 RTX PRO 6000 (96 GB) does not fit.
	if short == 0 {
		t.Error("no non-fitting point reported")
	}
	if len(res.Pareto) == 0 {
		t.Error("empty front")
	}
	if st, err := os.Stat(plot); err != nil || st.Size() == 0 {
		t.Errorf("plot not written: %v", err)
	}
}

func TestPlanTable(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch([]string{"plan", "--gpu-counts", "8", "--plans", "tp8", "--batches", "1", "--contexts", "4096", "--workers", "2"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"Pareto front", "capacity", "max concurrency"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestPlanBadFlags(t *testing.T) {
	checkUsageErrors(t, []usageCase{
		{"plan syntax", []string{"plan", "--plans", "tq8"}, "--plans"},
		{"plan invalid", []string{"plan", "--plans", "tp3"}, "tp"},
		{"kv", []string{"plan", "--kv-dtypes", "int4"}, "--kv-dtypes"},
		{"batch 0", []string{"plan", "--batches", "0"}, "--batches"},
		{"slo", []string{"plan", "--slo-ms", "-1"}, "--slo-ms"},
		{"workers", []string{"plan", "--workers", "0"}, "--workers"},
		{"topology", []string{"plan", "--topo", "nope"}, "--topo nope"},
		{"gpu counts", []string{"plan", "--gpu-counts", "16"}, "GPU count"},
	})
}

func TestParsePlan(t *testing.T) {
	cases := []struct {
		in   string
		want model.Plan
		ok   bool
	}{
		{"tp8", model.Plan{TP: 8}, true},
		{"tp8-ep", model.Plan{TP: 8, EP: true}, true},
		{"tp4-dp2-ep", model.Plan{TP: 4, DP: 2, EP: true}, true},
		{"tp8-dcp4", model.Plan{TP: 8, DCP: 4}, true},
		{"TP2-DP4-EP", model.Plan{TP: 2, DP: 4, EP: true}, true},
		{"dp8-ep", model.Plan{}, false},
		{"tp0", model.Plan{}, false},
		{"tp8-xx", model.Plan{}, false},
		{"", model.Plan{}, false},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			got, err := parsePlan(c.in)
			if (err == nil) != c.ok || (c.ok && got != c.want) {
				t.Errorf("parsePlan(%q) = %+v, %v; want %+v ok=%v", c.in, got, err, c.want, c.ok)
			}
		})
	}
}

// FuzzParsePlan: any accepted string renders back through Plan.String to
// a string that parses to the same plan.
func FuzzParsePlan(f *testing.F) {
	for _, s := range []string{"tp8", "tp8-ep", "tp4-dp2-ep", "tp8-dcp4", "tp-", "-", "tp8--ep", "dcp2-tp8"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parsePlan(s)
		if err != nil {
			return
		}
		q, err := parsePlan(p.String())
		if err != nil || q.Normalized() != p.Normalized() {
			t.Fatalf("parsePlan(%q) = %+v renders %q, which parses to %+v (%v)", s, p, p.String(), q, err)
		}
	})
}

// TestPlotPathCheckedFirst: a --plot name that is neither .png nor .svg is
// refused with the flag checks, in one line, before any topology is
// resolved or any prediction runs (the bad --topo after it is never
// reached).
func TestPlotPathCheckedFirst(t *testing.T) {
	for _, args := range [][]string{
		{"plan", "--plot", "x.txt", "--topo", "nope"},
		{"predict", "--plot", "x.txt", "--topo", "nope"},
		{"advise", "--plot", "x.txt", "--topo", "nope"},
		{"compare", "--plot", "x.txt", "--trace", filepath.Join(t.TempDir(), "missing.json")},
	} {
		t.Run(args[0], func(t *testing.T) {
			code, stdout, stderr := runCLI(t, args...)
			want := "tpscope " + args[0] + ": usage: --plot x.txt: want a .png or .svg file\n"
			if code != 2 || stderr != want || stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 and stderr %q", code, stdout, stderr, want)
			}
		})
	}
}
