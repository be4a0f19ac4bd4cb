package sim

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
)

// tritonMLADir holds vLLM's TRITON_MLA kernels measured on one H100
// (exec/cuda/testdata/h100/README.md, "tritonmla-1055-1207").
const tritonMLADir = "../exec/cuda/testdata/h100/tritonmla-1055-1207/"

type mergeRow struct {
	Batch, Heads, Ctx, Splits int
	Stage2Us                  float64 `json:"stage2_us"`
}

func readMergeRows(t *testing.T, file string) []mergeRow {
	t.Helper()
	f, err := os.Open(tritonMLADir + file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []mergeRow
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r mergeRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Splits == 0 { // the header line
			continue
		}
		if r.Batch == 0 {
			r.Batch = 1 // kernels.jsonl: batch 1 throughout
		}
		if r.Ctx == 0 {
			r.Ctx = 65536 // stage2.jsonl: 65,536 tokens at batch 1, 8,192 above
			if r.Batch > 1 {
				r.Ctx = 8192
			}
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestSerialMergeH100: the walk of vLLM's TRITON_MLA merge over its
// splits as priced (serialMergeUs) against the one measured on an H100 at
// 1,980 MHz, for every batch, head count, context and split count
// measured: the measured merge less its one-split time (the launch and
// the output store, 1.4-1.5 us, which the companion's attention floor
// prices) is the walk. The per-split constants come from the batch-1 rows;
// what the rest checks is the rule around them: the splits a sequence
// fills (at 512 tokens 264 splits fill 257, 128 fill 103, 64 fill 57), a
// flat cost above them whatever the context, and the device-memory reads
// once the partials outgrow L2.
func TestSerialMergeH100(t *testing.T) {
	dev := catalogDevice(t, "h100-sxm")
	dev.SMClockMHz = 1980 // the clock sampled during the measurement
	cm := newComputeModel(&dev, engprof.MustDefault(), &Options{AttentionBackend: AttnTritonMLA})
	rows := append(readMergeRows(t, "kernels.jsonl"), readMergeRows(t, "stage2.jsonl")...)
	if len(rows) < 150 {
		t.Fatalf("%d measured merges, want the 140 + 34 of the two files", len(rows))
	}
	var one []float64
	for _, r := range rows {
		if r.Splits == 1 {
			one = append(one, r.Stage2Us)
		}
	}
	base := 0.0
	for _, v := range one {
		base += v / float64(len(one))
	}
	if len(one) == 0 || base < 1 || base > 2 {
		t.Fatalf("one-split merges %v: want the launch's 1-2 us", one)
	}
	worst, checked := 0.0, 0
	for _, r := range rows {
		cm.tritonFixedSplits = r.Splits
		op := model.Op{Kind: model.KindAttention, Role: model.RoleMLADecode, M: int64(r.Batch), N: int64(r.Ctx), K: 576, Batch: float64(r.Heads), KVDtype: model.BF16}
		if b := cm.attention(&op); b == nil || !b.Grid.SerialMerge {
			t.Fatalf("backend %v: want vLLM's TRITON_MLA, whose merge walks its splits", b)
		}
		walk := r.Stage2Us - base
		if walk < 2 { // a few splits: within the launch's own spread
			continue
		}
		got := cm.cost(&op).MergeUs
		e := got/walk - 1
		// Between 30 and 50 MB of partials the measured read sits between
		// L2's and device memory's: not claimed.
		if partials := float64(r.Batch*r.Heads*r.Splits) * 577 * 4; partials > 30e6 && partials < 50e6 {
			t.Logf("b%d h%d ctx %d splits %d: walk %.1f us priced, %.1f measured (%+.1f %%; %.0f MB of partials, between L2 and DRAM)", r.Batch, r.Heads, r.Ctx, r.Splits, got, walk, 100*e, partials/1e6)
			continue
		}
		checked++
		worst = math.Max(worst, math.Abs(e))
		if math.Abs(e) > 0.15 {
			t.Errorf("b%d h%d ctx %d splits %d: walk %.1f us priced, %.1f measured (%.1f less the one-split %.2f; %+.1f %%)", r.Batch, r.Heads, r.Ctx, r.Splits, got, walk, r.Stage2Us, base, 100*e)
		}
	}
	if checked < 100 {
		t.Errorf("%d merges checked, want most of the 174", checked)
	}
	t.Logf("%d measured merges checked (one-split time %.2f us), worst %.1f %%", checked, base, 100*worst)
}
