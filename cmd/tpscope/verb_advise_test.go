package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tpscope/tpscope/advise"
	"github.com/tpscope/tpscope/internal/chart"
	"github.com/tpscope/tpscope/topology"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/recorder"
)

// With the seed user's settings (seed-scenario.md: bf16 KV, NCCL_PROTO=LL,
// NCCL_P2P_LEVEL=SYS; CUDA graphs are the default) advise names its
// baseline for Kimi-K2.5-NVFP4 on rtxpro6000-2s at TP 8, batch 1, context
// 4096, and the stock configuration (eager, NCCL's defaults).
func TestAdviseSeed(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch([]string{"advise", "--kv-dtype", "bf16", "--nccl-proto", "LL", "--p2p-level", "SYS", "--sweep-batch", "1,32", "--sweep-context", "4096,131072"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	s := out.String()
	for _, want := range []string{
		"advise: kimi-k2.5-nvfp4 on rtxpro6000-2s, tp8, decode b1 ctx4096 kv=bf16",
		"baseline (cuda-graphs nccl-proto=LL p2p-level=SYS)",
		"stock (eager",
		"fp8-kv", "oneshot-ar", "ar-norm-fusion", "expert-parallel", "dp-attn-ep", "mtp", "box-h200-nvswitch",
		"nccl-proto-ll", "nccl-p2p-sys", "nccl-p2p-disable", "nccl-min-channels-8", "cuda-graphs",
		"where it pays",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestAdviseJSONAndPlot(t *testing.T) {
	dir := t.TempDir()
	for _, format := range []string{"json", "markdown"} {
		t.Run(format, func(t *testing.T) {
			plot := filepath.Join(dir, "advise-"+format+".svg")
			var out, errb bytes.Buffer
			args := []string{"advise", "--no-sweep", "--output", format, "--plot", plot, "--entries", "fp8-kv,oneshot-ar,mtp"}
			if code := dispatch(args, &out, &errb); code != 0 {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			if st, err := os.Stat(plot); err != nil || st.Size() == 0 {
				t.Errorf("plot not written: %v", err)
			}
			if format == "markdown" {
				if !strings.Contains(out.String(), "| fp8-kv |") {
					t.Errorf("markdown lacks the fp8-kv row:\n%s", out.String())
				}
				return
			}
			var adv struct {
				Baseline struct {
					StepUs float64 `json:"step_us"`
				} `json:"baseline"`
				Rows []struct {
					Entry string `json:"entry"`
					Gain  struct {
						TokensPerSPct float64 `json:"tokens_per_s_gain_pct"`
					} `json:"gain"`
					Error  string `json:"error"`
					Change struct {
						KVCapacityFrac float64 `json:"kv_capacity_frac"`
					} `json:"change"`
				} `json:"rows"`
			}
			if err := json.Unmarshal(out.Bytes(), &adv); err != nil {
				t.Fatal(err)
			}
			if len(adv.Rows) != 3 || adv.Baseline.StepUs <= 0 {
				t.Fatalf("rows %d, baseline step %v", len(adv.Rows), adv.Baseline.StepUs)
			}
			for _, r := range adv.Rows {
				switch r.Entry {
				case "fp8-kv":
					// 70,272 / 35,136 B per token (serving-facts.md).
					if r.Change.KVCapacityFrac < 1.999 || r.Change.KVCapacityFrac > 2.001 {
						t.Errorf("fp8-kv capacity ratio %v, want 2", r.Change.KVCapacityFrac)
					}
				case "mtp":
					if r.Error == "" {
						t.Error("mtp on Kimi-K2.5 (no MTP layer) predicted without error")
					}
				}
			}
		})
	}
}

func TestAdviseBadFlags(t *testing.T) {
	checkUsageErrors(t, []usageCase{
		{"tp does not divide heads", []string{"advise", "--tp", "3"}, "tp"},
		{"batch 0", []string{"advise", "--batch", "0"}, "batch"},
		{"threshold", []string{"advise", "--threshold", "2"}, "--threshold"},
		{"batches", []string{"advise", "--sweep-batch", "1,x"}, "--sweep-batch"},
		{"entries", []string{"advise", "--entries", "warp-drive"}, `unknown entry "warp-drive"`},
		{"output", []string{"advise", "--output", "xml"}, "--output"},
		{"plot", []string{"advise", "--no-sweep", "--plot", "a.gif"}, "--plot"},
		{"too many gpus", []string{"advise", "--gpus", "4"}, "needs 8 GPUs"},
	})
}

// TestAdviseUnusedFlags: a flag that would price nothing in this advise is
// refused in one line before any work: the sweep's lists beside
// --no-sweep, and the MTP row's --mtp-tokens and --mtp-accept where that
// row is not priced (Kimi-K2.5 has no MTP layer; --entries leaves it out)
// and the baseline drafts nothing. On 601a891 each ran as if not given.
// Where the MTP row or an MTP baseline reads them, they run.
func TestAdviseUnusedFlags(t *testing.T) {
	checkUsageErrors(t, []usageCase{
		{"sweep-batch", []string{"advise", "--no-sweep", "--sweep-batch", "1,2"}, "want no sweep grid beside --no-sweep"},
		{"sweep-context", []string{"advise", "--sweep-context", "4096", "--no-sweep"}, "want no sweep grid beside --no-sweep"},
		{"mtp-tokens, no MTP layer", []string{"advise", "--no-sweep", "--mtp-tokens", "2"},
			"--mtp-tokens 2: prices only the mtp row, and kimi-k2.5-nvfp4 has no MTP layer"},
		{"mtp-accept, no MTP layer", []string{"advise", "--no-sweep", "--mtp-accept", "0.9"},
			"--mtp-accept 0.9: want no MTP acceptance: kimi-k2.5-nvfp4 has no MTP layer"},
		{"mtp-tokens, row left out", []string{"advise", "--model", "deepseek-v3", "--no-sweep", "--entries", "fp8-kv", "--mtp-tokens", "2"},
			"--mtp-tokens 2: prices only the mtp row, and --entries leaves out the mtp row"},
	})
	for _, args := range [][]string{
		{"advise", "--model", "deepseek-v3", "--no-sweep", "--entries", "mtp", "--mtp-tokens", "2", "--mtp-accept", "0.9", "--transfer", ""},
		{"advise", "--model", "deepseek-v3", "--mtp", "1", "--mtp-accept", "0.9", "--no-sweep", "--entries", "fp8-kv", "--transfer", ""},
	} {
		if code, _, errs := runCLI(t, args...); code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, errs)
		}
	}
}

// TestAdviseCompareTopos: a box --compare-topos cannot resolve is the
// flag's fault, one line before any work (it had become a "box-nope: no,
// unknown preset" row among the priced ones); an empty list tries no box
// (it had tried the default two).
func TestAdviseCompareTopos(t *testing.T) {
	checkUsageErrors(t, []usageCase{
		{"misspelt box", []string{"advise", "--no-sweep", "--compare-topos", "h200-nvswtich"}, `--compare-topos h200-nvswtich: topology "h200-nvswtich": not a preset`},
	})
	code, out, stderr := runCLI(t, "advise", "--no-sweep", "--compare-topos", "", "--output", "csv")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(out, "box-") {
		t.Errorf("--compare-topos '' priced a box entry:\n%s", out)
	}
	code, out, stderr = runCLI(t, "advise", "--no-sweep", "--compare-topos", "h200-nvswitch-gen4", "--output", "csv")
	if code != 0 || !strings.Contains(out, "box-h200-nvswitch-gen4") || strings.Contains(out, "box-rtxpro6000-switch") {
		t.Errorf("--compare-topos h200-nvswitch-gen4: exit %d (%s), want its row and no other box's:\n%s", code, stderr, out)
	}
}

// TestAdviseCompareToposFile: --compare-topos reads each box as --topo
// does, so a topology JSON (here an H100 box calibrated on a trace of a
// run) is a box the "move to" entries try, priced on that box; it had been
// refused as 'unknown preset' whatever the file held. A box named twice,
// however spelled, is refused; the file that is the baseline's own box is
// the baseline's row, not a move.
func TestAdviseCompareToposFile(t *testing.T) {
	const file = "../../exec/cuda/testdata/h100/spec-1645-1207/h100-cal-b1.json"
	box, err := topology.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	var adv advise.Advice
	runJSONInto(t, &adv, "advise", "--output", "json", "--model", "tiny-mla-moe", "--tp", "2", "--no-sweep", "--transfer", "",
		"--compare-topos", file+",h200-nvswitch")
	var moved, preset *advise.Row
	for i := range adv.Rows {
		switch adv.Rows[i].Entry {
		case "box-" + file:
			moved = &adv.Rows[i]
		case "box-h200-nvswitch":
			preset = &adv.Rows[i]
		}
	}
	if moved == nil || preset == nil {
		t.Fatalf("rows box-%s and box-h200-nvswitch: got %v, %v", file, moved, preset)
	}
	if moved.Error != "" || moved.With == nil || moved.Applicability.Status != advise.Conditional ||
		!strings.Contains(moved.Applicability.Reason, fmt.Sprintf("%d x %s", box.NumGPUs(), box.DeviceOf(0).Name)) {
		t.Errorf("box-%s: %s %q, error %q, with %v; want the file's box priced as another box", file, moved.Applicability.Status, moved.Applicability.Reason, moved.Error, moved.With)
	}
	if moved.With != nil && moved.With.Topology == preset.With.Topology {
		t.Errorf("box-%s priced on %s, the preset's box", file, moved.With.Topology)
	}
	if want := "predict --model=tiny-mla-moe --tp=2 --topo " + file; moved.How.Exec != want {
		t.Errorf("box-%s: how %q, want %s", file, moved.How.Exec, want)
	}
	checkUsageErrors(t, []usageCase{
		{"one box twice", []string{"advise", "--no-sweep", "--compare-topos", "h200-nvswitch,nvswitch:8xh200-sxm"},
			"--compare-topos \"h200-nvswitch,nvswitch:8xh200-sxm\": h200-nvswitch and nvswitch:8xh200-sxm are the same box"},
		{"one name twice", []string{"advise", "--no-sweep", "--compare-topos", file + "," + file}, file + " is named twice: name each box once"},
		{"no such file", []string{"advise", "--no-sweep", "--compare-topos", "./nope/box.json"}, `--compare-topos ./nope/box.json: topology "./nope/box.json"`},
	})
	runJSONInto(t, &adv, "advise", "--output", "json", "--model", "tiny-mla-moe", "--tp", "2", "--no-sweep", "--transfer", "",
		"--topo", file, "--compare-topos", file, "--entries", "box-"+file)
	if len(adv.Rows) != 1 || !adv.Rows[0].InBaseline || !strings.Contains(adv.Rows[0].Applicability.Reason, "the baseline's own box") {
		t.Errorf("--topo %s --compare-topos %s: rows %+v; want the baseline's own box", file, file, adv.Rows)
	}
}

// TestAdviseSweepContexts: the sweep's contexts stay within the model's
// max_model_len, past which no engine serves a step: a cell there had
// read as not fitting ("never reaches the threshold in the sweep").
// --sweep-context above it is refused; the defaults above it are left
// out, and stderr says which (Moonlight-16B-A3B: 8192 tokens, so 1024
// and 4096 of the defaults stay). A sweep flag beside --no-sweep is
// refused, as it changes nothing.
func TestAdviseSweepContexts(t *testing.T) {
	checkUsageErrors(t, []usageCase{
		{"context above max_model_len", []string{"advise", "--sweep-context", "1M"},
			"--sweep-context 1048576: want contexts of at most 262144 tokens, the max_model_len kimi-k2.5-nvfp4 is served at"},
		{"sweep batch without a sweep", []string{"advise", "--no-sweep", "--sweep-batch", "1,2"}, "--sweep-batch 1,2: want no sweep grid beside --no-sweep"},
		{"sweep context without a sweep", []string{"advise", "--no-sweep", "--sweep-context", "4K"}, "--sweep-context 4096: want no sweep grid beside --no-sweep"},
	})
	code, out, stderr := runCLI(t, "advise", "--model", "moonlight-16b-a3b", "--sweep-batch", "1", "--entries", "fp8-kv")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "leaves out the default contexts 16384, 32768, 65536, 131072, above the max_model_len moonlight-16b-a3b is served at (8192 tokens)") {
		t.Errorf("stderr %q: want the default contexts above 8192 named", stderr)
	}
	if !strings.Contains(out, "(sweep: batch 1 x context 1024,4096;") {
		t.Errorf("want a sweep of contexts 1024 and 4096:\n%s", out)
	}
}

func FuzzIntList(f *testing.F) {
	for _, s := range []string{"1,2,4", "4K,128k", "", ",", "-1", "1M", "99999999999999999999", "K"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l := &intList{min: 1}
		if err := l.Set(s); err != nil {
			return
		}
		for _, n := range l.v {
			if n < 1 {
				t.Fatalf("Set(%q) gave %d", s, n)
			}
		}
	})
}

// The progress bar stays silent for work under a second and when stderr is
// not a terminal, and draws once the work has run longer.
func TestLazyBar(t *testing.T) {
	cases := []struct {
		name     string
		age      time.Duration
		terminal bool
		visible  bool
	}{
		// "short": a start an hour ahead keeps the work under a second
		// old however late this goroutine runs on a loaded machine.
		{"short", -time.Hour, true, false},
		{"long", 2 * time.Second, true, true},
		{"long, not a terminal", 2 * time.Second, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := newLazyBar(&buf, "sweep")
			l.off = !c.terminal // a buffer is never a terminal
			l.start = l.start.Add(-c.age)
			l.update(1, 10)
			l.finish()
			if got := buf.Len() > 0; got != c.visible {
				t.Errorf("bar visible %v, want %v (%q)", got, c.visible, buf.String())
			}
		})
	}
}

// TestAdviseAnswersFirst: above the tables, advise answers the seed's three
// questions, each line carrying the figure the JSON of the same run holds
// (the transfer speedups, FP8 KV's tokens/s change and capacity ratio and
// where it pays, the best software entry's gain).
func TestAdviseAnswersFirst(t *testing.T) {
	args := []string{"advise", "--kv-dtype", "bf16", "--nccl-proto", "LL", "--p2p-level", "SYS", "--sweep-batch", "1,32", "--sweep-context", "4096"}
	code, table, errs := runCLI(t, args...)
	if code != 0 {
		t.Fatal(errs)
	}
	code, js, errs := runCLI(t, append(args, "--output", "json")...)
	if code != 0 {
		t.Fatal(errs)
	}
	var adv advise.Advice
	if err := json.Unmarshal([]byte(js), &adv); err != nil {
		t.Fatal(err)
	}
	head := strings.SplitN(table, "\nbaseline (", 2)[0]
	want := []string{fmt.Sprintf("x%.2f on %s", adv.Transfer[0].Gain.Speedup(), adv.Transfer[0].Model),
		fmt.Sprintf("x%.2f on %s", adv.Transfer[1].Gain.Speedup(), adv.Transfer[1].Model)}
	for _, r := range adv.Rows {
		switch {
		case r.Entry == "fp8-kv":
			want = append(want, fmt.Sprintf("FP8 KV cache: %+.1f %% tokens/s", r.Gain.TokensPerSPct), fmt.Sprintf("x%.2f KV capacity", r.Change.KVCapacityFrac))
			if r.Sweep != nil && r.Sweep.PaysFrom != nil {
				want = append(want, fmt.Sprintf("pays from batch %d x context %d", r.Sweep.PaysFrom.Batch, r.Sweep.PaysFrom.Context))
			}
		}
	}
	for _, p := range append(adv.WorthBuilding, adv.UpperBounds...) {
		want = append(want, fmt.Sprintf("%s %+.1f %% tokens/s", p.Entry, p.TokensPerSPct))
	}
	for _, w := range want {
		if !strings.Contains(head, w) {
			t.Errorf("answers lack %q:\n%s", w, head)
		}
	}
}

// TestAdviseHeadlineKeepsQualifiers: the "worth building next" answer
// carries the qualifiers of the row it quotes, in the table and in JSON.
// On the seed's dual-socket box the one-shot all-reduce is only an upper
// bound (a public one-shot kernel measured slower than NCCL on dual-CPU
// boxes), so it is not named worth building: it is quoted "at most" with
// that caution and what it needs. On the one-CPU switch box it is worth
// building, still conditional on its out-of-tree kernel.
func TestAdviseHeadlineKeepsQualifiers(t *testing.T) {
	base := []string{"advise", "--kv-dtype", "bf16", "--nccl-proto", "LL", "--p2p-level", "SYS", "--no-sweep", "--transfer", "", "--entries", "oneshot-ar,fp8-kv"}
	for _, tc := range []struct {
		topo             string
		want, notWant    []string
		sure, upperBound []string
	}{
		{"rtxpro6000-2s",
			[]string{"worth building next, on this box at this load: only upper bounds reach 5 %: oneshot-ar +",
				"% tokens/s at most (conditional: needs an out-of-tree one-shot PCIe kernel; may not pay here: a public one-shot kernel measured slower than NCCL on dual-CPU boxes)."},
			[]string{"% tokens/s (conditional)."}, nil, []string{"oneshot-ar"}},
		{"rtxpro6000-switch",
			[]string{"worth building next, on this box at this load: oneshot-ar +", "% tokens/s (conditional: needs an out-of-tree one-shot PCIe kernel)."},
			[]string{"at most", "may not pay"}, []string{"oneshot-ar"}, nil},
	} {
		t.Run(tc.topo, func(t *testing.T) {
			args := append(slices.Clone(base), "--topo", tc.topo)
			code, table, errs := runCLI(t, args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var head string
			for _, l := range strings.Split(table, "\n") {
				if strings.HasPrefix(l, "worth building next") {
					head = l
				}
			}
			for _, w := range tc.want {
				if !strings.Contains(head, w) {
					t.Errorf("headline lacks %q:\n%s", w, head)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(head, w) {
					t.Errorf("headline has %q:\n%s", w, head)
				}
			}
			code, js, errs := runCLI(t, append(args, "--output", "json")...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var adv struct {
				Sure []struct {
					Entry         string `json:"entry"`
					Applicability struct {
						UpperBound bool   `json:"upper_bound"`
						Needs      string `json:"needs"`
					} `json:"applicability"`
				} `json:"worth_building"`
				Upper []struct {
					Entry         string `json:"entry"`
					Applicability struct {
						UpperBound bool   `json:"upper_bound"`
						Caution    string `json:"caution"`
					} `json:"applicability"`
				} `json:"worth_building_upper_bounds"`
			}
			if err := json.Unmarshal([]byte(js), &adv); err != nil {
				t.Fatal(err)
			}
			var sure, upper []string
			for _, p := range adv.Sure {
				sure = append(sure, p.Entry)
				if p.Applicability.UpperBound || p.Applicability.Needs == "" {
					t.Errorf("JSON worth_building %s: %+v", p.Entry, p.Applicability)
				}
			}
			for _, p := range adv.Upper {
				upper = append(upper, p.Entry)
				if !p.Applicability.UpperBound || p.Applicability.Caution == "" {
					t.Errorf("JSON upper bound %s: %+v", p.Entry, p.Applicability)
				}
			}
			if !slices.Equal(sure, tc.sure) || !slices.Equal(upper, tc.upperBound) {
				t.Errorf("JSON worth building %v, upper bounds %v; want %v and %v", sure, upper, tc.sure, tc.upperBound)
			}
		})
	}
}

// TestAdvisePlotQualifiers: advise's chart qualifies a bar as its table
// row does: a variant that does not fit is labelled "(no fit: -2.0 GB)"
// (the step column's words), an upper bound "(upper bound)" and a
// conditional entry "(conditional)" (the applies column's word; on
// 601a891 it was drawn as a plain gain), each in a colour of its own
// named in the legend; a plain gain keeps the first
// colour and no suffix; a row that was not predicted has no bar.
func TestAdvisePlotQualifiers(t *testing.T) {
	fits := &advise.Variant{Footprint: advise.Footprint{Fits: true}}
	adv := &advise.Advice{Model: "m", Plan: "tp8", Topology: "box", Workload: "decode b1",
		Rows: []advise.Row{
			{Entry: "plain", With: fits, Gain: advise.Gain{TokensPerSPct: 50}},
			{Entry: "bound", With: fits, Gain: advise.Gain{TokensPerSPct: 100}, Applicability: advise.Applicability{Status: advise.Conditional, UpperBound: true}},
			{Entry: "needs", With: fits, Gain: advise.Gain{TokensPerSPct: 20}, Applicability: advise.Applicability{Status: advise.Conditional, Needs: "a newer build"}},
			{Entry: "short", With: &advise.Variant{Footprint: advise.Footprint{ShortfallGB: 2}}, Gain: advise.Gain{TokensPerSPct: -5}},
			{Entry: "refused", Error: "cannot run here"},
		}}
	p, n, err := advisePlot(adv)
	if err != nil || n != 4 {
		t.Fatalf("%d bars, %v; want 4", n, err)
	}
	var rec recorder.Canvas
	chart.Draw(draw.NewCanvas(&rec, 9*vg.Inch, 3*vg.Inch), [][]*plot.Plot{{p}}, draw.Tiles{})
	texts := map[string]bool{}
	fills := map[color.RGBA]bool{}
	var cur color.Color
	for _, a := range rec.Actions {
		switch a := a.(type) {
		case *recorder.FillString:
			texts[a.String] = true
		case *recorder.SetColor:
			cur = a.Color
		case *recorder.Fill:
			if cur != nil {
				r, g, b, al := cur.RGBA()
				fills[color.RGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: uint8(al >> 8)}] = true
			}
		}
	}
	for _, want := range []string{"plain x1.50", "bound x2.00 (upper bound)", "needs x1.20 (conditional)", "short x0.95 (no fit: -2.0 GB)",
		"predicted gain", "upper bound: may not pay here", "conditional: runs given what its row needs", "does not fit in GPU memory"} {
		if !texts[want] {
			t.Errorf("chart lacks the text %q", want)
		}
	}
	for text := range texts {
		if strings.HasPrefix(text, "refused") {
			t.Errorf("a row that was not predicted is drawn: %q", text)
		}
	}
	for _, k := range []adviseBar{barGain, barUpper, barCond, barNoFit} {
		r, g, b, al := k.color.RGBA()
		if c := (color.RGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: uint8(al >> 8)}); !fills[c] {
			t.Errorf("no bar filled in %s's colour %v", k.legend, c)
		}
	}
}

// TestAdviseSpecTokensRows: --spec-tokens is the speculative rows' K, as
// the README says ("K from --spec-tokens, default 3"): with --spec eagle3
// --spec-tokens 5 the n-gram row drafts 5 tokens and its how says so. On
// 601a891 the rows kept K 3 whatever --spec-tokens said, so the n-gram row
// put 3 drafts in place of the baseline's 5.
func TestAdviseSpecTokensRows(t *testing.T) {
	code, out, errs := runCLI(t, "advise", "--spec", "eagle3", "--spec-tokens", "5", "--no-sweep", "--entries", "spec-ngram", "--transfer", "", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var adv struct {
		Rows []struct {
			Entry string `json:"entry"`
			How   struct {
				Exec string `json:"exec"`
			} `json:"how"`
			Spec struct {
				Tokens int `json:"spec_tokens"`
			} `json:"spec"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &adv); err != nil {
		t.Fatal(err)
	}
	if len(adv.Rows) != 1 || adv.Rows[0].Spec.Tokens != 5 || !strings.Contains(adv.Rows[0].How.Exec, "--spec ngram --spec-tokens 5") {
		t.Errorf("rows %+v: want the spec-ngram row at k 5", adv.Rows)
	}
}

// TestAdviseCSVIsData: advise's CSV is one row per catalog entry whose
// columns each hold one quantity in the unit its name says (snake_case,
// numbers bare, empty where a row is not priced), the fit in columns of
// its own. It had been the table's cells: "step ms" of DP attention + EP
// on the seed box read "31.74 (no fit: -2.0 GB)", speedups "x2.346",
// deltas "+0", unpriced rows "-". Each priced row's step_ms is its
// with.step_us / 1000 in the JSON.
func TestAdviseCSVIsData(t *testing.T) {
	// At vLLM's fraction before 0.21 (0.9; 0.24's 0.92 leaves room for
	// it) the seed box's dp-attn-ep does not fit: a row of each kind.
	seed := []string{"advise", "--kv-dtype", "bf16", "--nccl-proto", "LL", "--p2p-level", "SYS", "--no-sweep", "--transfer", "", "--gpu-mem-util", "0.9"}
	code, js, stderr := runCLI(t, append(seed, "--output", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var adv advise.Advice
	if err := json.Unmarshal([]byte(js), &adv); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := runCLI(t, append(seed, "--output", "csv")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1+len(adv.Rows) {
		t.Fatalf("%d records, want a header and %d entries", len(recs), len(adv.Rows))
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		if h != strings.ToLower(h) || strings.ContainsAny(h, " ./") {
			t.Errorf("header %q: want snake_case", h)
		}
		col[h] = i
	}
	for _, name := range []string{"entry", "step_ms", "speedup", "tokens_per_s", "fits", "shortfall_gb", "kv_capacity_frac"} {
		if _, ok := col[name]; !ok {
			t.Fatalf("no column %q in %v", name, recs[0])
		}
	}
	text := map[string]bool{"entry": true, "applies": true, "state": true, "fits": true, "upper_bound": true}
	noFit := 0
	for i, r := range recs[1:] {
		row := &adv.Rows[i]
		if r[col["entry"]] != row.Entry {
			t.Fatalf("row %d is %q, want %q", i+1, r[col["entry"]], row.Entry)
		}
		for name, c := range col {
			if text[name] || r[c] == "" {
				continue
			}
			if _, err := strconv.ParseFloat(r[c], 64); err != nil {
				t.Errorf("%s: %s %q is not a number", row.Entry, name, r[c])
			}
		}
		if row.Error != "" || row.With == nil {
			if r[col["step_ms"]] != "" {
				t.Errorf("%s is not priced (%s), but its step_ms is %q", row.Entry, row.Error, r[col["step_ms"]])
			}
			continue
		}
		ms, _ := strconv.ParseFloat(r[col["step_ms"]], 64)
		if want := row.With.StepUs / 1e3; math.Abs(ms-want) > 1e-6*want {
			t.Errorf("%s: step_ms %v, want %v", row.Entry, ms, want)
		}
		if !row.With.Footprint.Fits {
			noFit++
			gb, _ := strconv.ParseFloat(r[col["shortfall_gb"]], 64)
			if r[col["fits"]] != "false" || gb <= 0 {
				t.Errorf("%s does not fit (short by %.1f GB): fits %q, shortfall_gb %q", row.Entry, row.With.Footprint.ShortfallGB, r[col["fits"]], r[col["shortfall_gb"]])
			}
		}
	}
	if noFit == 0 {
		t.Error("no entry that does not fit: the seed box's dp-attn-ep did not")
	}
}

// TestAdviseFP8KVRatioWithoutCapacity: where the baseline's weights do
// not fit (GLM-5 in BF16 on eight H200s: short by tens of GB a GPU), no
// configuration holds any KV cache, and the FP8 KV line says so instead
// of a capacity ratio over zero ("x0.00 KV capacity" before).
func TestAdviseFP8KVRatioWithoutCapacity(t *testing.T) {
	code, out, stderr := runCLI(t, "advise", "--model", "glm-5", "--topo", "h200-nvswitch", "--no-sweep")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr+out, "does not fit in GPU memory") {
		t.Fatalf("the scenario fits; the test wants a baseline whose weights do not:\n%s", stderr)
	}
	var line string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "FP8 KV cache:") {
			line = l
		}
	}
	if !strings.Contains(line, "no KV capacity either way") || strings.Contains(line, "x0.00") {
		t.Errorf("FP8 KV line %q: want 'no KV capacity either way' and no ratio", line)
	}
}

// TestAdviseAcceptanceIsTheBaselineMethods: with --spec eagle3 the
// acceptance given (--spec-accept 0.9: 1 + 0.9 + 0.81 + 0.729 = 3.439
// tokens per step at k 3) is the EAGLE-3 head's, the method the baseline
// runs; a row of another method keeps its own cited figure, as the MTP
// layers' --mtp-accept is MTP's alone. The suffix row's is vLLM PR
// #24852's 1226 accepted drafts over 16993 tokens at K = 1, a = 1226 /
// 15767, carried on as a chain to 3 drafts: 1 + a + a^2 + a^3. The rows
// had all priced the head's 0.9, the suffix row at 3.44 tokens per step.
// Without a method in the baseline the acceptance is every row's.
func TestAdviseAcceptanceIsTheBaselineMethods(t *testing.T) {
	rows := func(args ...string) map[string]float64 {
		t.Helper()
		code, out, errs := runCLI(t, append([]string{"advise", "--no-sweep", "--transfer", "", "--entries", "spec-eagle3,spec-suffix", "--output", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var adv struct {
			Rows []struct {
				Entry string `json:"entry"`
				Spec  struct {
					TokensPerStep float64 `json:"tokens_per_step"`
				} `json:"spec"`
			} `json:"rows"`
		}
		if err := json.Unmarshal([]byte(out), &adv); err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, r := range adv.Rows {
			got[r.Entry] = r.Spec.TokensPerStep
		}
		return got
	}
	a := 1226.0 / (16993 - 1226)
	suffix := 1 + a + a*a + a*a*a
	got := rows("--spec", "eagle3", "--spec-accept", "0.9")
	if math.Abs(got["spec-eagle3"]-3.439) > 1e-9 || math.Abs(got["spec-suffix"]-suffix) > 1e-9 {
		t.Errorf("--spec eagle3 --spec-accept 0.9: rows %v; want spec-eagle3 3.439 and spec-suffix %.4f (its own figure)", got, suffix)
	}
	got = rows("--spec-accept", "0.9")
	if math.Abs(got["spec-eagle3"]-3.439) > 1e-9 || math.Abs(got["spec-suffix"]-3.439) > 1e-9 {
		t.Errorf("--spec-accept 0.9 alone: rows %v; want both at 3.439", got)
	}
}

// TestAdviseNoDrafterSaysHow: a row whose method has no built-in drafter
// for the model (DeepSeek-V3 has no EAGLE-3 head here) says how to price
// it in words advise takes: a drafter comes with the method it drafts
// for (--spec eagle3 --draft-model HEAD), since advise refuses
// --draft-model alone. The row had said "pass --draft-model with its
// config.json", which advise answers with "want no draft model without
// --spec eagle3 or draft".
func TestAdviseNoDrafterSaysHow(t *testing.T) {
	code, out, errs := runCLI(t, "advise", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--no-sweep", "--transfer", "", "--entries", "spec-eagle3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(out, "no built-in EAGLE-3 head for deepseek-v3") || !strings.Contains(out, "pass --spec eagle3 --draft-model with its config.json") {
		t.Errorf("the spec-eagle3 row does not say how to price it:\n%s", out)
	}
	code, _, errs = runCLI(t, "advise", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--no-sweep", "--draft-model", "kimi-k2.5-eagle3-mla")
	if code != 2 || !strings.Contains(errs, "want no draft model without --spec eagle3 or draft") {
		t.Errorf("--draft-model alone: exit %d, %s; want it refused as the row's words say", code, errs)
	}
}

// TestAdvisePlotBarsKeepWidth: advise's bars keep most of the chart's
// width, its legend (of long entries: "conditional: runs given what its
// row needs") drawn under the axis, inside the canvas. Beside the bars
// (chart.Draw) it left them about a quarter of the 9-inch width of the seed user's
// chart, the labels taking a third. The data area spans the x axis, the
// longest horizontal stroke.
func TestAdvisePlotBarsKeepWidth(t *testing.T) {
	fits := &advise.Variant{Footprint: advise.Footprint{Fits: true}}
	adv := &advise.Advice{Model: "kimi-k2.5-nvfp4", Plan: "tp8", Topology: "rtxpro6000-2s", Workload: "decode b1 ctx4096 kv=bf16",
		Rows: []advise.Row{
			{Entry: "box-h200-nvswitch", With: fits, Gain: advise.Gain{TokensPerSPct: 233}, Applicability: advise.Applicability{Status: advise.Conditional, Needs: "another box"}},
			{Entry: "nccl-p2p-sys", With: fits, Gain: advise.Gain{TokensPerSPct: 134}, InBaseline: true},
			{Entry: "spec-ngram", With: fits, Gain: advise.Gain{TokensPerSPct: 117}, Applicability: advise.Applicability{Status: advise.Conditional, UpperBound: true}},
			{Entry: "box-rtxpro6000-switch", With: fits, Gain: advise.Gain{TokensPerSPct: -1}, Applicability: advise.Applicability{Status: advise.Conditional, Needs: "another box"}},
			{Entry: "dp-attn-ep", With: &advise.Variant{Footprint: advise.Footprint{ShortfallGB: 2}}, Gain: advise.Gain{TokensPerSPct: -45}},
		}}
	p, n, err := advisePlot(adv)
	if err != nil {
		t.Fatal(err)
	}
	w, h := adviseChartSize(p, n)
	var rec recorder.Canvas
	drawAdviseChart(draw.NewCanvas(&rec, w, h), p)
	left, right, axisY := widestHorizontalStroke(&rec)
	if share := (right - left) / w; share < 0.6 {
		t.Errorf("the bars span x %.0f to %.0f pt, %.0f %% of the %.0f pt width; want at least 60 %%", left, right, 100*share, w)
	}
	legend := []string{barCond.legend, barGain.legend, barUpper.legend, barNoFit.legend}
	seen := 0
	for _, a := range rec.Actions {
		s, ok := a.(*recorder.FillString)
		if !ok || !slices.Contains(legend, s.String) {
			continue
		}
		seen++
		face := font.DefaultCache.Lookup(s.Font, s.Size)
		ext := face.Extents()
		if s.Point.Y+ext.Ascent > axisY || s.Point.Y-ext.Descent < 0 || s.Point.X < 0 || s.Point.X+face.Width(s.String) > w {
			t.Errorf("legend entry %q at (%.0f, %.0f): want under the axis (y %.0f) and inside the %.0f x %.0f pt canvas", s.String, s.Point.X, s.Point.Y, axisY, w, h)
		}
	}
	if seen != len(legend) {
		t.Errorf("%d of the %d legend entries drawn", seen, len(legend))
	}
}

// TestAdviseTransferRowIsPredictModel: a --transfer row is the baseline's
// flags on the other model, priced as 'predict --model OTHER' with those
// flags prices it: a KV dtype the user left to the engine is the other
// checkpoint's (DeepSeek-V3's bf16 baseline moved to Kimi-K2.5-NVFP4,
// whose checkpoint stores an FP8 KV cache), the --perf-db routing is the
// one the tables default to for the other model's experts, and a model
// the engine has no kernel for on the box is the row's error, not a
// priced row. The rows had kept the baseline's KV dtype and routing
// (17.42 ms against predict's 16.22 ms on H200; 44.69 against 49.42 ms
// with --perf-db on the RTX PRO 6000 switch box) and priced SGLang's
// NVFP4 experts on Hopper, which predict refuses.
func TestAdviseTransferRowIsPredictModel(t *testing.T) {
	type transfer struct {
		Model  string  `json:"model"`
		Error  string  `json:"error"`
		StepUs float64 `json:"step_us"`
	}
	cases := []struct {
		name  string
		flags []string
		other string
	}{
		{"kv-default", []string{"--model", "deepseek-v3", "--topo", "h200-nvswitch", "--batch", "32"}, "kimi-k2.5-nvfp4"},
		{"engine-refuses", []string{"--model", "deepseek-v3", "--topo", "h200-nvswitch", "--batch", "8", "--engine", "sglang@0.5"}, "kimi-k2.5-nvfp4"},
	}
	if db := samplePerfDB(t, false); db != "" {
		cases = append(cases, struct {
			name  string
			flags []string
			other string
		}{"perf-db-routing", []string{"--model", "deepseek-v3", "--topo", "rtxpro6000-switch", "--batch", "8", "--perf-db", db}, "glm-5-nvfp4"})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var adv struct {
				Transfer []transfer `json:"transfer"`
			}
			runJSONInto(t, &adv, append([]string{"advise", "--output", "json", "--no-sweep", "--compare-topos", "", "--entries", "cuda-graphs",
				"--transfer", tc.other}, tc.flags...)...)
			var row *transfer
			for i := range adv.Transfer {
				if adv.Transfer[i].Model == tc.other {
					row = &adv.Transfer[i]
				}
			}
			if row == nil {
				t.Fatalf("no transfer row of %s in %+v", tc.other, adv.Transfer)
			}
			code, out, errs := runCLI(t, append([]string{"predict", "--output", "json"}, withFlags(tc.flags, "--model", tc.other)...)...)
			if code != 0 {
				if row.Error == "" {
					t.Fatalf("predict --model %s refuses (%s); advise priced its transfer row at %.1f us", tc.other, strings.TrimSpace(errs), row.StepUs)
				}
				return
			}
			var pr struct {
				StepUs float64 `json:"step_us"`
			}
			if err := json.Unmarshal([]byte(out), &pr); err != nil {
				t.Fatal(err)
			}
			if row.Error != "" || math.Abs(row.StepUs-pr.StepUs) > 1e-6*pr.StepUs {
				t.Errorf("transfer row of %s: step %.1f us (error %q); predict --model %s: %.1f us", tc.other, row.StepUs, row.Error, tc.other, pr.StepUs)
			}
		})
	}
}

// TestAdviseP2PDisableRowOptionsArePredicts: the nccl-p2p-disable row on a
// baseline with NCCL_P2P_LEVEL=SYS runs the options 'predict
// --p2p-disable' runs (P2P off at every level: no level beside it, which
// predict refuses); the row had kept p2p_level SYS beside p2p_disable.
func TestAdviseP2PDisableRowOptionsArePredicts(t *testing.T) {
	base := []string{"--kv-dtype", "bf16", "--nccl-proto", "LL"}
	var adv struct {
		Rows []struct {
			Entry string `json:"entry"`
			With  struct {
				StepUs  float64         `json:"step_us"`
				Options json.RawMessage `json:"options"`
			} `json:"with"`
		} `json:"rows"`
	}
	runJSONInto(t, &adv, append([]string{"advise", "--output", "json", "--no-sweep", "--transfer", "", "--compare-topos", "",
		"--entries", "nccl-p2p-disable", "--p2p-level", "SYS"}, base...)...)
	var pr struct {
		StepUs  float64         `json:"step_us"`
		Options json.RawMessage `json:"options"`
	}
	runJSONInto(t, &pr, append([]string{"predict", "--output", "json", "--p2p-disable"}, base...)...)
	if len(adv.Rows) != 1 {
		t.Fatalf("rows %+v: want the nccl-p2p-disable row", adv.Rows)
	}
	w := adv.Rows[0].With
	var got, want bytes.Buffer
	if err := json.Compact(&got, w.Options); err != nil {
		t.Fatal(err)
	}
	if err := json.Compact(&want, pr.Options); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() || w.StepUs != pr.StepUs {
		t.Errorf("advise nccl-p2p-disable: options %s step %.1f us; predict --p2p-disable: options %s step %.1f us", &got, w.StepUs, &want, pr.StepUs)
	}
}

// TestAdviseKVCapacityNamesItsGroups: under DP attention advise's baseline
// line gives the whole deployment's KV capacity (each DP group caches its
// own requests) and predict's memory line one group's pool; the same
// flags printed two numbers under one name. The baseline line now says
// over how many groups, and the group's share is predict's own figure.
func TestAdviseKVCapacityNamesItsGroups(t *testing.T) {
	flags := []string{"--model", "deepseek-v3", "--topo", "h200-nvswitch", "--batch", "8", "--tp", "4", "--dp", "2", "--ep"}
	code, out, errs := runCLI(t, append([]string{"advise", "--no-sweep", "--transfer", "", "--compare-topos", "", "--entries", "cuda-graphs"}, flags...)...)
	if code != 0 {
		t.Fatalf("advise: exit %d: %s", code, errs)
	}
	var pr struct {
		Memory struct {
			KVCapacityTokens int64 `json:"kv_capacity_tokens"`
		} `json:"memory"`
	}
	runJSONInto(t, &pr, append([]string{"predict", "--output", "json"}, flags...)...)
	want := fmt.Sprintf("KV capacity %d tokens over its 2 DP groups (%d each, predict's memory line)", 2*pr.Memory.KVCapacityTokens, pr.Memory.KVCapacityTokens)
	if !strings.Contains(out, want) {
		t.Errorf("advise's baseline line does not say %q:\n%s", want, out)
	}
}

// TestAdviseHowLinesRun: every tpscope command a how line of advise's
// table prints is one tpscope accepts, run back as printed (run's beside
// the baseline's model and box), under every engine profile; a row that cannot
// run (status no) prints no how line, its reason saying why. Under
// trtllm@1.3, which has MTP only, the spec-ngram row (no) had printed
// "tpscope predict --engine trtllm@1.3 --spec ngram --spec-tokens 3",
// which predict refuses, and the spec-eagle3 row had sent the user to
// pass --spec eagle3 --draft-model, a method trtllm@1.3 refuses whatever
// drafts.
func TestAdviseHowLinesRun(t *testing.T) {
	engines := []string{"vllm@0.24", "vllm@0.16-nightly", "sglang@0.5", "trtllm@1.3", "executor"}
	boxes := [][2]string{{"deepseek-v3", "h200-nvswitch"}, {"kimi-k2.5", "h200-nvswitch"}, {"kimi-k2.5-nvfp4", "rtxpro6000-2s"}}
	ran := 0
	for _, eng := range engines {
		for _, mb := range boxes {
			base := []string{"--model", mb[0], "--topo", mb[1]}
			code, out, errs := runCLI(t, append([]string{"advise", "--engine", eng, "--no-sweep", "--transfer", ""}, base...)...)
			if code == 2 {
				continue // the engine refuses this model on this box: no rows
			}
			if code != 0 {
				t.Fatalf("advise --engine %s %v: exit %d: %s", eng, base, code, errs)
			}
			_, why, ok := strings.Cut(out, "\nwhy, and how to run it\n")
			if !ok {
				t.Fatalf("advise --engine %s %v: no why section:\n%s", eng, base, out)
			}
			why, _, _ = strings.Cut(why, "\n\n")
			status := ""
			for line := range strings.SplitSeq(why, "\n") {
				f := strings.Fields(line)
				if len(f) >= 2 && strings.HasSuffix(f[1], ":") && f[1] != "how:" && f[1] != "not" && f[1] != "acceptance:" {
					status = strings.TrimSuffix(f[1], ":")
					continue
				}
				h, isHow := strings.CutPrefix(strings.TrimSpace(line), "how: ")
				if !isHow {
					continue
				}
				if status == "no" {
					t.Errorf("--engine %s %v: a row that cannot run prints a how line: %s", eng, base, line)
				}
				for seg := range strings.SplitSeq(h, "; ") {
					_, cmdline, ok := strings.Cut(seg, "tpscope ")
					if !ok {
						continue
					}
					cmdline, _, _ = strings.Cut(cmdline, " (") // the line's gloss
					args := shellFields(t, cmdline)
					if args[0] == "run" {
						// A predict line repeats the baseline's flags
						// (TestAdviseHowLinesPriceTheirRow); run's
						// executor line names the entry's alone.
						args = append(args, "--topo", mb[1], "--model", mb[0])
					}
					code, _, errs := runCLI(t, args...)
					ran++
					// run reaches the GPU backend (exit 1 without one);
					// a refused line is a usage error (exit 2).
					if code == 2 || (code != 0 && args[0] != "run") {
						t.Errorf("--engine %s %v: how line %q: tpscope %s: exit %d: %s", eng, base, seg, strings.Join(args, " "), code, errs)
					}
				}
			}
		}
	}
	if ran < 20 {
		t.Fatalf("ran %d how commands; want the rows' lines of every engine", ran)
	}
	// The engine's methods come before a drafter to pass.
	code, out, errs := runCLI(t, "advise", "--engine", "trtllm@1.3", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--no-sweep", "--transfer", "", "--entries", "spec-eagle3,spec-draft")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, m := range []string{"eagle3", "draft"} {
		if !strings.Contains(out, "spec-"+m+" ") || strings.Contains(out, "pass --spec "+m) || !strings.Contains(out, "no: --spec "+m+": trtllm@1.3 has no speculative method "+m+" (it has mtp)") {
			t.Errorf("trtllm@1.3's spec-%s row: want the engine's refusal, not a drafter to pass:\n%s", m, out)
		}
	}
}

// shellFields splits a how line's command as a POSIX shell would: words
// by blanks, single quotes kept together.
func shellFields(t *testing.T, line string) []string {
	t.Helper()
	var out []string
	var w strings.Builder
	in, quoted, inWord := false, false, false
	for _, r := range line {
		switch {
		case r == '\'':
			in, quoted, inWord = !in, true, true
		case r == ' ' && !in:
			if inWord {
				out = append(out, w.String())
			}
			w.Reset()
			quoted, inWord = false, false
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if in {
		t.Fatalf("unbalanced quote in %q", line)
	}
	if inWord || quoted {
		out = append(out, w.String())
	}
	return out
}

// TestAdviseHowLinesPriceTheirRow: a row's 'tpscope predict' line, run as
// printed, prices the step the row gives. The lines had carried the
// entry's flags alone: on the README's baseline (--kv-dtype bf16
// --nccl-proto LL --p2p-level SYS) the fp8-kv row gives 17.60 ms and its
// line, 'tpscope predict --kv-dtype fp8', prices the stock NCCL settings
// at 41.1 ms; a box row's 'predict --topo h200-nvswitch' priced the
// default model at batch 1 whatever the baseline's.
func TestAdviseHowLinesPriceTheirRow(t *testing.T) {
	bases := [][]string{
		{"--kv-dtype", "bf16", "--nccl-proto", "LL", "--p2p-level", "SYS"},
		{"--model", "glm-5-nvfp4", "--topo", "nvswitch:8xb200", "--batch", "32", "--engine", "sglang", "--nccl-algo", "allreduce:ring;allgather:ring"},
		{"--model", "kimi-k2.5", "--topo", "h200-nvswitch", "--batch", "8", "--tp", "4", "--dp", "2", "--ep", "--moe-dispatch", "alltoall", "--spec", "eagle3", "--spec-accept", "0.6"},
		{"--model", "deepseek-v3", "--topo", "h200-nvswitch", "--batch", "4", "--gpus", "8", "--mtp-accept", "0.7", "--cuda-graphs=false"},
		// A prefill whose all-reduces are above the custom kernel's
		// buffer: the oneshot-ar row cannot run there (predict refuses
		// its line), and says so.
		{"--phase", "prefill", "--kv-dtype", "bf16"},
	}
	if db := samplePerfDB(t, false); db != "" {
		bases = append(bases, []string{"--model", "deepseek-v3", "--topo", "h200-nvswitch", "--batch", "8", "--perf-db", db},
			// Tables moved to the H100 from the other GPUs': the box
			// row's H200 has its own, which predict prices it with
			// (refusing --perf-db-transfer there).
			[]string{"--model", "kimi-k2.5-nvfp4", "--topo", "nvswitch:8xh100-sxm", "--perf-db", db, "--perf-db-transfer"})
	}
	type variant struct {
		StepUs    float64 `json:"step_us"`
		Footprint struct {
			Fits bool `json:"fits"`
		} `json:"footprint"`
	}
	ran := 0
	for _, base := range bases {
		var adv struct {
			Baseline variant `json:"baseline"`
			Rows     []struct {
				Entry      string   `json:"entry"`
				InBaseline bool     `json:"in_baseline"`
				Error      string   `json:"error"`
				With       *variant `json:"with"`
				How        struct {
					Exec string `json:"exec"`
				} `json:"how"`
			} `json:"rows"`
		}
		runJSONInto(t, &adv, append([]string{"advise", "--output", "json", "--no-sweep", "--transfer", ""}, base...)...)
		for _, r := range adv.Rows {
			line, _, _ := strings.Cut(r.How.Exec, " (") // the line's gloss
			if !strings.HasPrefix(line, "predict") || r.Error != "" || r.With == nil || !r.With.Footprint.Fits {
				continue // predict refuses a step that does not fit
			}
			args := append(shellFields(t, line), "--output", "json")
			code, out, errs := runCLI(t, args...)
			ran++
			if code != 0 {
				t.Errorf("%v: row %s: tpscope %s: exit %d: %s", base, r.Entry, line, code, strings.TrimSpace(errs))
				continue
			}
			var pr variant
			if err := json.Unmarshal([]byte(out), &pr); err != nil {
				t.Fatal(err)
			}
			if math.Abs(pr.StepUs-r.With.StepUs) > 1e-6*r.With.StepUs {
				t.Errorf("%v: row %s gives %.1f us; its line 'tpscope %s' prices %.1f us", base, r.Entry, r.With.StepUs, line, pr.StepUs)
			}
		}
	}
	t.Logf("ran %d", ran)
	if ran < 15 {
		t.Fatalf("ran %d predict lines; want every baseline's rows", ran)
	}
}

// TestAdviseHeadlineLeavesOutWhatDoesNotFit: DeepSeek-V3 on an H200 box
// at 21 sequences of 32768 tokens fits (728,601 bf16 tokens of KV pool);
// with MTP its layer's weights and cache leave it 0.1 GB short, a step
// predict refuses. The headline had named mtp first "worth building next,
// on this box at this load" (+50.6 %); it now says it does not fit at
// this load, and the JSON lists it apart (worth_building_no_fit).
func TestAdviseHeadlineLeavesOutWhatDoesNotFit(t *testing.T) {
	base := []string{"--model", "deepseek-v3", "--topo", "h200-nvswitch", "--batch", "21", "--context", "32768"}
	if code, _, errs := runCLI(t, append([]string{"predict", "--spec", "mtp"}, base...)...); code == 0 || !strings.Contains(errs, "does not fit in GPU memory") {
		t.Fatalf("predict --spec mtp %v: exit %d %s; the case needs a step MTP makes too large", base, code, errs)
	}
	args := append([]string{"advise", "--no-sweep", "--transfer", "", "--compare-topos", "", "--entries", "mtp,fp8-kv"}, base...)
	var adv advise.Advice
	runJSONInto(t, &adv, append(args, "--output", "json")...)
	for _, p := range slices.Concat(adv.WorthBuilding, adv.UpperBounds) {
		if p.Entry == "mtp" {
			t.Errorf("mtp is worth building at a load it does not fit: %+v", adv.WorthBuilding)
		}
	}
	if len(adv.NoFit) != 1 || adv.NoFit[0].Entry != "mtp" || adv.NoFit[0].ShortfallGB <= 0 {
		t.Errorf("worth_building_no_fit %+v: want mtp with its shortfall", adv.NoFit)
	}
	code, out, errs := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	head := strings.SplitN(out, "\nbaseline (", 2)[0]
	if !strings.Contains(head, "worth building next, on this box at this load: fp8-kv ") || !strings.Contains(head, "not at this load, where the step with it does not fit in GPU memory: mtp +") {
		t.Errorf("headline:\n%s", head)
	}
}
