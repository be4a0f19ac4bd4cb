package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// siliconCSV is the MLA + MoE cut of aiconfigurator's silicon corpus of
// end-to-end serving measurements (serving/testdata/bench/
// aiconfigurator-silicon/SOURCE.md).
const siliconCSV = "../../serving/testdata/bench/aiconfigurator-silicon/silicon-mla-moe-agg.csv"

// siliconRow is one measured configuration of the corpus: closed loop at
// a concurrency (batch_size), fixed prompt and output lengths.
type siliconRow struct {
	backend, version, model, system, precision string
	isl, osl, conc, tp, dp, moeTP, moeEP       int
	ttftMs, tpotMs                             float64
}

// readSilicon reads the corpus's rows, failing on a row it cannot read.
func readSilicon(t *testing.T) []siliconRow {
	t.Helper()
	f, err := os.Open(siliconCSV)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	var rows []siliconRow
	for n, r := range recs[1:] {
		atoi := func(name string) int {
			v, err := strconv.Atoi(r[col[name]])
			if err != nil {
				t.Fatalf("%s row %d %s: %v", siliconCSV, n+1, name, err)
			}
			return v
		}
		atof := func(name string) float64 {
			v, err := strconv.ParseFloat(r[col[name]], 64)
			if err != nil {
				t.Fatalf("%s row %d %s: %v", siliconCSV, n+1, name, err)
			}
			return v
		}
		rows = append(rows, siliconRow{backend: r[col["backend"]], version: r[col["backend_version"]], model: r[col["model_path"]],
			system: r[col["system"]], precision: r[col["precision"]], isl: atoi("isl"), osl: atoi("osl"), conc: atoi("batch_size"),
			tp: atoi("tp_size"), dp: atoi("attention_dp_size"), moeTP: atoi("moe_tp_size"), moeEP: atoi("moe_ep_size"),
			ttftMs: atof("silicon_ttft_ms"), tpotMs: atof("silicon_tpot_ms")})
	}
	return rows
}

// siliconLevel is one measured concurrency of a deployment beside its
// simulation.
type siliconLevel struct {
	conc                           int
	ttftMs, tpotMs                 []float64 // measured (a key may hold two runs)
	predictedTTFTMs, predictedTPOT float64
}

// simulateSilicon simulates every concurrency of the rows keep selects
// (closed loop, the rows' fixed lengths, one run a concurrency) with the
// simulate flags given, and returns the levels in order. Rows of one
// concurrency filed twice with the same figures (to 0.1 %) count once.
func simulateSilicon(t *testing.T, keep func(siliconRow) bool, flags ...string) []siliconLevel {
	t.Helper()
	byConc := map[int]*siliconLevel{}
	isl, osl := 0, 0
	for _, r := range readSilicon(t) {
		if !keep(r) {
			continue
		}
		if isl == 0 {
			isl, osl = r.isl, r.osl
		} else if r.isl != isl || r.osl != osl {
			t.Fatalf("rows of %d/%d and %d/%d tokens selected: want one length", isl, osl, r.isl, r.osl)
		}
		l := byConc[r.conc]
		if l == nil {
			l = &siliconLevel{conc: r.conc}
			byConc[r.conc] = l
		}
		dup := false
		for i := range l.ttftMs {
			dup = dup || (math.Abs(l.ttftMs[i]/r.ttftMs-1) < 1e-3 && math.Abs(l.tpotMs[i]/r.tpotMs-1) < 1e-3)
		}
		if !dup {
			l.ttftMs, l.tpotMs = append(l.ttftMs, r.ttftMs), append(l.tpotMs, r.tpotMs)
		}
	}
	var levels []siliconLevel
	var concs []string
	for _, l := range byConc {
		levels = append(levels, *l)
	}
	sort.Slice(levels, func(i, j int) bool { return levels[i].conc < levels[j].conc })
	for _, l := range levels {
		concs = append(concs, strconv.Itoa(l.conc))
	}
	if len(levels) == 0 {
		t.Fatal("no row selected")
	}
	args := append([]string{"simulate", "--output", "json", "--isl", strconv.Itoa(isl), "--osl", strconv.Itoa(osl),
		"--concurrency", strings.Join(concs, ","), "--requests", "400"}, flags...)
	var out, errb bytes.Buffer
	if code := dispatch(args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var res struct {
		Runs []struct {
			TTFT struct{ P50 float64 } `json:"ttft_ms"`
			TPOT struct{ P50 float64 } `json:"tpot_ms"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != len(levels) {
		t.Fatalf("%d runs, want %d", len(res.Runs), len(levels))
	}
	for i := range levels {
		l := &levels[i]
		l.predictedTTFTMs, l.predictedTPOT = res.Runs[i].TTFT.P50, res.Runs[i].TPOT.P50
		for j := range l.ttftMs {
			t.Logf("%3d clients: TTFT %.1f / %.1f ms (%+.1f %%), TPOT %.2f / %.2f ms (%+.1f %%)", l.conc, l.predictedTTFTMs, l.ttftMs[j],
				100*(l.predictedTTFTMs/l.ttftMs[j]-1), l.predictedTPOT, l.tpotMs[j], 100*(l.predictedTPOT/l.tpotMs[j]-1))
		}
	}
	return levels
}

// TestSiliconSGLangDSR1: SGLang 0.5.9 serving DeepSeek-R1 NVFP4 on 8 x
// B200 at TP 8 with EP 8, 1,024-token prompts and outputs, 4 to 64
// clients, as the corpus measured it, simulated with SGLang's profile and
// the sample database's B200 tables (closed loop, fixed lengths, the
// engine's defaults: the corpus records no other flag):
//   - 4 clients is the row the profile's eager prefill host time was
//     derived from (sglang-0.5.yaml eager-prefill-host): its TTFT within
//     2 %, or the derivation is stale;
//   - 8 and 16 clients are held out: TTFT within 10 % (2026-12-08: -7.2 /
//     -6.4 %; -24 / -6 % with the decode forward's 47 us a kernel before);
//   - the median TPOT within 5 % at 4 to 16 clients (+2.2 / -0.2 / +0.9 %).
//
// Logged, not asserted: at 32 and 64 clients the simulated clients stay in
// step (fixed lengths, all sent at once), so their prompts fill two or
// more 16,384-token chunks and the median TTFT falls on one chunk's edge
// or the next (299 or 449 ms at 32 clients as the request count moves;
// 481 measured), and the TPOT runs 12-17 % over the measured (2026-12-08;
// 21-23 % before the fused all-reduce kernel's one-shot rule was priced;
// the README's "not accurate" list).
func TestSiliconSGLangDSR1(t *testing.T) {
	db := samplePerfDB(t, true)
	levels := simulateSilicon(t, func(r siliconRow) bool {
		return r.backend == "sglang" && r.version == "0.5.9" && r.system == "b200_sxm" && r.precision == "fp4" &&
			strings.HasSuffix(r.model, "DeepSeek-R1") && r.tp == 8 && r.dp == 1 && r.moeEP == 8 && r.isl == 1024 && r.osl == 1024
	}, "--perf-db", db, "--model", "../../serving/testdata/models/deepseek-r1-0528-fp4", "--topo", "nvswitch:8xb200", "--tp", "8", "--ep", "--engine", "sglang")
	if len(levels) != 5 || levels[0].conc != 4 || levels[4].conc != 64 {
		t.Fatalf("%d levels from %d clients: want 4, 8, 16, 32, 64", len(levels), levels[0].conc)
	}
	for _, l := range levels {
		if len(l.ttftMs) != 1 {
			t.Fatalf("%d clients: %d measurements, want one", l.conc, len(l.ttftMs))
		}
		ttft, tpot := l.predictedTTFTMs/l.ttftMs[0]-1, l.predictedTPOT/l.tpotMs[0]-1
		switch {
		case l.conc == 4 && math.Abs(ttft) > 0.02:
			t.Errorf("4 clients, the derivation's row: TTFT %+.1f %% off: re-derive cuda_graphs.eager_prefill_layer_host_us", 100*ttft)
		case l.conc > 4 && l.conc <= 16 && math.Abs(ttft) > 0.10:
			t.Errorf("%d clients: TTFT %+.1f %% off, want within 10 %%", l.conc, 100*ttft)
		}
		if l.conc <= 16 && math.Abs(tpot) > 0.05 {
			t.Errorf("%d clients: TPOT %+.1f %% off, want within 5 %%", l.conc, 100*tpot)
		}
	}
}

// TestSiliconVLLMKimi: vLLM 0.16.0 serving Kimi-K2.5 (INT4 experts) on
// 8 x H200 at TP 8, 1,024-token prompts and outputs, 4 to 64 clients (two
// runs of each), held out, simulated with vLLM's profile (0.24, the
// nearest) and the sample database's H200 tables: the median TPOT within
// 5 % of every run at 4 and 8 clients (2026-12-08: +1.1 / 0.0 %, +3.8 /
// +2.7 %).
//
// Logged, not asserted: TPOT +10 % at 16 clients, +19 % at 32, +27 % at 64
// (the decode step of 32-64 sequences priced too slow); TTFT +75 to
// +165 % at 4-16 clients and within 8 % at 64: the tables' Marlin MoE
// rows price a 4,096-token prefill step 2.7 ms a layer, where the priors,
// 0.8 ms, give the 4-client TTFT within 17 % (README "not accurate").
func TestSiliconVLLMKimi(t *testing.T) {
	db := samplePerfDB(t, true)
	levels := simulateSilicon(t, func(r siliconRow) bool {
		return r.backend == "vllm" && r.version == "0.16.0" && r.system == "h200_sxm" && r.precision == "int4" &&
			strings.HasSuffix(r.model, "Kimi-K2.5") && r.tp == 8 && r.dp == 1 && r.moeTP == 8 && r.isl == 1024 && r.osl == 1024
	}, "--perf-db", db, "--model", "kimi-k2.5", "--topo", "nvswitch:8xh200-sxm", "--tp", "8", "--engine", "vllm")
	checked := 0
	for _, l := range levels {
		if l.conc > 8 {
			continue
		}
		for _, m := range l.tpotMs {
			checked++
			if e := l.predictedTPOT/m - 1; math.Abs(e) > 0.05 {
				t.Errorf("%d clients: TPOT %.2f ms, measured %.2f: %+.1f %% off, want within 5 %%", l.conc, l.predictedTPOT, m, 100*e)
			}
		}
	}
	if checked != 4 {
		t.Errorf("%d runs at 4-8 clients checked, want the corpus's 4", checked)
	}
}

// TestSiliconSGLangGLM5: a nightly SGLang (lmsysorg/sglang:nightly-dev-cu13,
// 2026-03-29) serving GLM-5 NVFP4 on 8 x B200 at TP 8, held out: at 1,024
// prompt tokens, where a prefill step of up to 16 prompts is bound by the
// host's eager iteration, the TTFT at 4, 8 and 16 clients is within 15 %
// (2026-12-08: +10.3 / +6.2 / -1.5 % with the B200's tables): the
// profile's eager prefill host time, measured per decoder layer on
// DeepSeek-R1's 61, carries to GLM-5's 78.
//
// Logged, not asserted: at 8,192 prompt tokens the step is the GPU's (the
// DSA indexer scoring every earlier token, the sparse attention), and the
// 4-client TTFT is -31.3 % (+9.6 % while the indexer's RoPE was priced as
// one CTA's stream, 2.5 ms a layer at 16K tokens: right for a wrong
// reason); the median TPOT -13 to -33 % at 1,024 tokens and -27 to -49 %
// at 8,192 (the decode step of GLM-5 under SGLang priced too fast); TTFT
// from 32 clients (the simulated clients in step, their prompts several
// chunks a prefill: README "not accurate").
func TestSiliconSGLangGLM5(t *testing.T) {
	db := samplePerfDB(t, true)
	for _, isl := range []int{1024, 8192} {
		levels := simulateSilicon(t, func(r siliconRow) bool {
			return r.backend == "sglang" && r.version == "nightly-dev" && r.system == "b200_sxm" && r.precision == "fp4" &&
				strings.HasSuffix(r.model, "GLM-5") && r.tp == 8 && r.dp == 1 && r.moeTP == 8 && r.isl == isl && r.osl == 1024
		}, "--perf-db", db, "--model", "glm-5-nvfp4", "--topo", "nvswitch:8xb200", "--tp", "8", "--engine", "sglang")
		if len(levels) < 3 || levels[0].conc != 4 || levels[2].conc != 16 {
			t.Fatalf("ISL %d: %d levels, want 4, 8, 16 clients first", isl, len(levels))
		}
		if isl != 1024 {
			continue
		}
		for _, l := range levels[:3] {
			if len(l.ttftMs) != 1 {
				t.Fatalf("%d clients: %d measurements, want one", l.conc, len(l.ttftMs))
			}
			if e := l.predictedTTFTMs/l.ttftMs[0] - 1; math.Abs(e) > 0.15 {
				t.Errorf("ISL %d, %d clients: TTFT %.1f ms, measured %.1f: %+.1f %% off, want within 15 %%", isl, l.conc, l.predictedTTFTMs, l.ttftMs[0], 100*e)
			}
		}
	}
}
