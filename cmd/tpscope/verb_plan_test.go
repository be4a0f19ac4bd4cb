package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/tpscope/tpscope/model"
)

func TestPlanJSON(t *testing.T) {
	dir := t.TempDir()
	plot := filepath.Join(dir, "front.png")
	var out, errb bytes.Buffer
	args := []string{"plan", "--topo", "rtxpro6000-2s,h200-nvswitch", "--gpus", "4,8", "--plan", "tp8,tp4,tp2-dp4-ep",
		"--batch", "1,64", "--context", "4K", "--output", "json", "--plot", plot, "--slo-ms", "100"}
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
	if code := dispatch([]string{"plan", "--gpus", "8", "--plan", "tp8", "--batch", "1", "--context", "4096", "--workers", "2"}, &out, &errb); code != 0 {
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
		{"plan syntax", []string{"plan", "--plan", "tq8"}, "--plan"},
		{"plan invalid", []string{"plan", "--plan", "tp3"}, "tp"},
		{"kv", []string{"plan", "--kv-dtype", "int4"}, "--kv-dtype"},
		{"batch 0", []string{"plan", "--batch", "0"}, "--batch"},
		{"slo", []string{"plan", "--slo-ms", "-1"}, "--slo-ms"},
		{"workers", []string{"plan", "--workers", "0"}, "--workers"},
		{"topology", []string{"plan", "--topo", "nope"}, "--topo nope"},
		{"gpu counts", []string{"plan", "--gpus", "16"}, "GPU count"},
	})
}

// TestPlanList: the --tp/--dp/--dcp/--ep lists give their cross product
// less what the model cannot run. For Kimi-K2.5 (64 heads, 384 experts)
// --tp 8 --dp 1,2 with EP both ways: tp8, tp8-ep and tp8-dp2-ep (tp8-dp2
// without EP is refused: DP attention needs EP).
func TestPlanList(t *testing.T) {
	a, err := model.Preset("kimi-k2.5-nvfp4")
	if err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("plan", pflag.ContinueOnError)
	fs.IntSlice("tp", nil, "")
	fs.IntSlice("dp", nil, "")
	if err := fs.Parse([]string{"--tp", "8", "--dp", "1,2"}); err != nil {
		t.Fatal(err)
	}
	got, err := planList(a, []int{8}, []int{1, 2}, nil, "both", fs)
	if err != nil {
		t.Fatal(err)
	}
	want := []model.Plan{{TP: 8, DP: 1, DCP: 1}, {TP: 8, DP: 1, DCP: 1, EP: true}, {TP: 8, DP: 2, DCP: 1, EP: true}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("plans %+v, want %+v", got, want)
	}
	if _, err := planList(a, []int{3}, nil, nil, "false", fs); err == nil || !strings.Contains(err.Error(), "--tp 3") {
		t.Errorf("tp 3: error %v, want one naming --tp 3", err)
	}
}
