package sim

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
)

func TestBoundWaitTextRoundTrip(t *testing.T) {
	for b := BoundNone; b <= BoundLink; b++ {
		t.Run("bound="+b.String(), func(t *testing.T) {
			text, err := b.MarshalText()
			if err != nil {
				t.Fatal(err)
			}
			var got Bound
			if err := got.UnmarshalText(text); err != nil || got != b {
				t.Fatalf("UnmarshalText(%q) = %v, %v; want %v", text, got, err, b)
			}
		})
	}
	for w := Wait(0); int(w) < len(waitNames); w++ {
		t.Run("wait="+w.String(), func(t *testing.T) {
			text, err := w.MarshalText()
			if err != nil {
				t.Fatal(err)
			}
			var got Wait
			if err := got.UnmarshalText(text); err != nil || got != w {
				t.Fatalf("UnmarshalText(%q) = %v, %v; want %v", text, got, err, w)
			}
		})
	}
}

func TestBoundWaitTextErrors(t *testing.T) {
	cases := []struct {
		name, text, want string
		wait             bool
	}{
		// "unknown" is what String writes for an out-of-range value: not a
		// name MarshalText of a valid value writes.
		{"bound unknown", "unknown", `bound "unknown": want one of`, false},
		{"bound upper case", "Memory", `bound "Memory"`, false},
		{"bound empty", "", `bound ""`, false},
		{"wait unknown", "unknown", `wait "unknown": want one of`, true},
		{"wait number", "2", `wait "2"`, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if c.wait {
				var w Wait
				err = w.UnmarshalText([]byte(c.text))
			} else {
				var b Bound
				err = b.UnmarshalText([]byte(c.text))
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// A prediction written as 'tpscope predict --output json' writes it reads
// back to the same value.
func TestPredictionJSONRoundTrip(t *testing.T) {
	cases := []struct {
		name  string
		model string
		plan  model.Plan
		work  model.Workload
		opts  Options
	}{
		{"kimi tp8 graphs", "kimi-k2.5-nvfp4", model.Plan{TP: 8}, model.Workload{Phase: model.Decode, Batch: 4, Context: 2048}, DefaultOptions()},
		{"kimi tp8 eager LL SYS", "kimi-k2.5-nvfp4", model.Plan{TP: 8}, model.Workload{Phase: model.Decode, Batch: 1, Context: 4096},
			Options{NCCL: ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"}}},
		{"tiny prefill tp4", "tiny-mla-moe", model.Plan{TP: 4}, model.Workload{Phase: model.Prefill, Batch: 2, Context: 512}, DefaultOptions()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, err := model.Preset(c.model)
			if err != nil {
				t.Fatal(err)
			}
			pr, _, err := Predict(Scenario{Arch: a, Plan: c.plan, Workload: c.work, Options: c.opts, Topo: mustTopo(t, "rtxpro6000-2s")})
			if err != nil {
				t.Fatal(err)
			}
			data, err := json.Marshal(pr)
			if err != nil {
				t.Fatal(err)
			}
			var got Prediction
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatalf("decode: %v", err)
			}
			// The plan's text form is its normalized form (DP and DCP 1 where
			// unset): compare the plans as such.
			if got.Plan.Normalized() != pr.Plan.Normalized() {
				t.Fatalf("plan %+v read back as %+v", pr.Plan, got.Plan)
			}
			got.Plan = pr.Plan
			if !reflect.DeepEqual(&got, pr) {
				gv, wv := reflect.ValueOf(got), reflect.ValueOf(*pr)
				for i := 0; i < gv.NumField(); i++ {
					if g, w := gv.Field(i).Interface(), wv.Field(i).Interface(); !reflect.DeepEqual(g, w) {
						t.Errorf("field %s changed through JSON:\n got %+v\nwant %+v", gv.Type().Field(i).Name, g, w)
					}
				}
				t.FailNow()
			}
			// The decoders are exercised: some op is not memory-bound or
			// was released by something other than its launch.
			bounds, waits := map[Bound]bool{}, map[Wait]bool{}
			for _, op := range got.Ops {
				bounds[op.Bound], waits[op.WaitedOn] = true, true
			}
			if len(bounds) < 2 || len(waits) < 2 {
				t.Errorf("ops of %d bounds and %d wait reasons: want several of each", len(bounds), len(waits))
			}
		})
	}
}
