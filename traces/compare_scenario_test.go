package traces_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/traces"
)

func TestParsePlanWorkloadOptions(t *testing.T) {
	plans := []struct {
		in   string
		want model.Plan
		err  bool
	}{
		{"tp8", model.Plan{TP: 8}, false},
		{"tp1-dp8-ep", model.Plan{TP: 1, DP: 8, EP: true}, false},
		{"tp8-dcp2", model.Plan{TP: 8, DCP: 2}, false},
		{"tp=2,ep", model.Plan{TP: 2, EP: true}, false}, // exec's older key=value form
		{"", model.Plan{}, true},
		{"tp0", model.Plan{}, true},
		{"pp2", model.Plan{}, true},
	}
	for _, tc := range plans {
		t.Run("plan/"+tc.in, func(t *testing.T) {
			got, err := traces.ParsePlan(tc.in)
			if (err != nil) != tc.err || (!tc.err && got != tc.want) {
				t.Errorf("ParsePlan(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.err)
			}
			if !tc.err && got.String() != tc.want.String() {
				t.Errorf("round trip %q -> %q", tc.in, got.String())
			}
		})
	}
	wls := []struct {
		in   string
		want model.Workload
		err  bool
	}{
		{"decode b1 ctx8192 mtp2 kv=fp8", model.Workload{Phase: model.Decode, Batch: 1, Context: 8192, SpecTokens: 2, KVDtype: model.FP8}, false},
		{"prefill b1 ctx2048", model.Workload{Phase: model.Prefill, Batch: 1, Context: 2048}, false},
		{"decode batch=32 ctx=4096", model.Workload{Phase: model.Decode, Batch: 32, Context: 4096}, false},
		{"decode", model.Workload{}, true},
		{"decode b1 ctx0", model.Workload{}, true},
		{"decode b1 ctx10 warp=9", model.Workload{}, true},
	}
	for _, tc := range wls {
		t.Run("workload/"+tc.in, func(t *testing.T) {
			got, err := traces.ParseWorkload(tc.in)
			if (err != nil) != tc.err || (!tc.err && got != tc.want) {
				t.Errorf("ParseWorkload(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
	opts := []struct {
		in      string
		want    sim.Options
		unknown []string
		err     bool
	}{
		{"", sim.Options{}, nil, false},
		{`["cuda-graphs","nccl-proto=LL"]`, sim.Options{CUDAGraphs: true, NCCLProto: "LL"}, nil, false},
		{"p2p-level=SYS,ar-norm-fusion,fp8-kv", sim.Options{P2PLevel: "SYS", ARNormFusion: true}, []string{"fp8-kv"}, false},
		{"eager NCCL_PROTO=LL128", sim.Options{NCCLProto: "LL128"}, nil, false},
		{"mtp-accept=2", sim.Options{}, nil, true},
		{"custom-ar=threeshot", sim.Options{}, nil, true},
	}
	for _, tc := range opts {
		t.Run("options/"+tc.in, func(t *testing.T) {
			got, unk, err := traces.ParseOptions(tc.in)
			if (err != nil) != tc.err {
				t.Fatalf("error %v, want error %v", err, tc.err)
			}
			if tc.err {
				return
			}
			if !reflect.DeepEqual(got, tc.want) || !reflect.DeepEqual(unk, tc.unknown) {
				t.Errorf("ParseOptions(%q) = %+v, %v; want %+v, %v", tc.in, got, unk, tc.want, tc.unknown)
			}
			back, _, err := traces.ParseOptions(strings.Join(traces.OptionsNames(got), ","))
			if err != nil || !reflect.DeepEqual(back, got) {
				t.Errorf("OptionsNames round trip: %+v, %v", back, err)
			}
		})
	}
}

// FuzzScenarioSpec: any text in a step span's scenario attributes gives a
// scenario or an error, never a panic.
func FuzzScenarioSpec(f *testing.F) {
	f.Add("tp8", "decode b1 ctx4096", "cuda-graphs,nccl-proto=LL")
	f.Add("tp1-dp8-ep", "prefill b2 ctx100 mtp1 kv=fp8", `["overlap","mtp-accept=0.7"]`)
	f.Add("tp=-1,,ep", "decode b=1", "[")
	f.Add("dcp", "kv= ctx", "custom-ar=,p2p-level=")
	f.Fuzz(func(t *testing.T, plan, workload, options string) {
		_, _ = traces.ParsePlan(plan)
		_, _ = traces.ParseWorkload(workload)
		_, _, _ = traces.ParseOptions(options)
		_ = traces.OptionNames(options)
		_, _ = traces.ScenarioSpec{Model: "tiny-mla-moe", Plan: plan, Workload: workload, Options: options}.Resolve()
	})
}
