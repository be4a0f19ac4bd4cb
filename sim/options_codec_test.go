package sim

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/ncclenv"
)

func TestOptionNames(t *testing.T) {
	cases := []struct {
		in      []string
		want    Options
		unknown []string
		err     string
	}{
		{nil, Options{}, nil, ""},
		{[]string{"cuda-graphs", "nccl-proto=LL"}, Options{CUDAGraphs: true, NCCL: ncclenv.Settings{Proto: "LL"}}, nil, ""},
		{[]string{"p2p-level=SYS", "ar-norm-fusion", "fp8-kv"}, Options{ARNormFusion: ToggleOn, NCCL: ncclenv.Settings{P2PLevel: "SYS"}}, []string{"fp8-kv"}, ""},
		{[]string{"eager", "NCCL_PROTO=LL128", "NCCL_P2P_DISABLE=1"}, Options{NCCL: ncclenv.Settings{Proto: "LL128", P2PDisable: true}}, nil, ""},
		{[]string{"cuda_graphs=false", "graph-sizes=1+2+4", "mtp_accept_rate=0.7"}, Options{GraphSizes: []int{1, 2, 4}, MTPAcceptFrac: 0.7}, nil, ""},
		{[]string{"mtp-accept=2"}, Options{}, nil, "mtp_accept_rate"},
		// Separators alone name no size: they had read as the engine's
		// default list.
		{[]string{"graph-sizes=+"}, Options{}, nil, `"+": only separators, naming no size`},
		{[]string{"graph-sizes=,+"}, Options{}, nil, `",+": only separators, naming no size`},
		{[]string{"custom-ar=threeshot"}, Options{}, nil, "custom-ar"},
		// multimem is collective's kernel, the engine's path under auto:
		// the refusal says so rather than "unknown".
		{[]string{"custom-ar=multimem"}, Options{}, nil, "is the engine's own choice, not one to force: auto runs torch's symmetric-memory multimem all-reduce"},
		{[]string{"nccl-algo=NVLS"}, Options{}, nil, "NVLS is not modelled (tpscope prices NCCL's Ring and Tree)"},
		{[]string{"nccl-proto=LLX"}, Options{}, nil, "nccl.proto"},
		{[]string{"nccl-algo=Rign"}, Options{}, nil, "nccl.algo"},
		{[]string{"p2p-level=FOO"}, Options{}, nil, "nccl.p2p_level"},
		{[]string{"overlap=maybe"}, Options{}, nil, "overlap"},
		// The channel counts, in tpscope's and NCCL's spelling (a span's
		// tpscope.options, a recorded environment).
		{[]string{"nccl-min-channels=8", "NCCL_MAX_NCHANNELS=16"}, Options{NCCL: ncclenv.Settings{MinChannels: 8, MaxChannels: 16}}, nil, ""},
		{[]string{"nccl-min-channels=0"}, Options{}, nil, "NCCL_MIN_NCHANNELS=0: want 1 to 64"},
		{[]string{"nccl-max-channels=65"}, Options{}, nil, "nccl.max_channels: NCCL_MAX_NCHANNELS=65: want 1 to 64"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.in, ","), func(t *testing.T) {
			got, unk, err := ParseNames(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) || !reflect.DeepEqual(unk, tc.unknown) {
				t.Errorf("ParseNames(%q) = %+v, %v; want %+v, %v", tc.in, got, unk, tc.want, tc.unknown)
			}
			back, _, err := ParseNames(got.Names())
			if err != nil || !reflect.DeepEqual(back, got) {
				t.Errorf("Names round trip %q: %+v, %v", got.Names(), back, err)
			}
		})
	}
}

// TestOptionFieldsCoverOptions: every field of Options has exactly one
// entry in the text codec (a field added without one would be dropped from
// spans and flags), checked by setting each exported field through
// reflection and reading it back through Names.
func TestOptionFieldsCoverOptions(t *testing.T) {
	typ := reflect.TypeOf(Options{})
	seen := 0
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		var o Options
		v := reflect.ValueOf(&o).Elem().Field(i)
		switch f.Name {
		case "NCCL":
			for j := 0; j < v.NumField(); j++ {
				if v.Type().Field(j).Name == "IgnoreCalibration" {
					continue // tpscope's own switch, not a run-time option
				}
				var n Options
				setSome(reflect.ValueOf(&n.NCCL).Elem().Field(j))
				if len(n.Names()) != 1 {
					t.Errorf("NCCL.%s set: names %q, want one", v.Type().Field(j).Name, n.Names())
				}
				seen++
			}
			continue
		}
		setSome(v)
		if len(o.Names()) != 1 {
			t.Errorf("%s set: names %q, want one", f.Name, o.Names())
		}
		seen++
	}
	entries := 0
	for _, f := range optionFields {
		if !f.ReadOnly {
			entries++
		}
	}
	if seen != entries {
		t.Errorf("%d settable fields, %d codec entries", seen, entries)
	}
}

func setSome(v reflect.Value) {
	if v.Type() == reflect.TypeOf(engprof.Ref{}) {
		v.Set(reflect.ValueOf(engprof.ExecutorRef))
		return
	}
	if v.Type() == reflect.TypeOf(ToggleDefault) {
		v.Set(reflect.ValueOf(ToggleOff)) // off: the one a bare name cannot say
		return
	}
	if v.Type() == reflect.TypeOf(CUDAGraphMem{}) {
		v.Set(reflect.ValueOf(CUDAGraphMem{GiB: 0.5, Given: true}))
		return
	}
	if v.Type() == reflect.TypeOf(SpecAccept{}) {
		v.Set(reflect.ValueOf(SpecAccept{PerToken: 0.5}))
		return
	}
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.String:
		v.SetString("LL")
	case reflect.Float64:
		v.SetFloat(0.5)
	case reflect.Int:
		v.SetInt(2)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Float64 {
			v.Set(reflect.ValueOf([]float64{0.5, 0.25}))
			return
		}
		v.Set(reflect.ValueOf([]int{1, 2}))
	}
}

// FuzzParseNames: any option text gives options or an error, never a
// panic; what parses renders to names that parse to the same options.
func FuzzParseNames(f *testing.F) {
	f.Add("cuda-graphs,nccl-proto=LL")
	f.Add(`overlap,mtp-accept=0.7,graph-sizes=1+8`)
	f.Add("custom-ar=,p2p-level=,NCCL_ALGO=^Tree")
	f.Fuzz(func(t *testing.T, text string) {
		o, _, err := ParseNames(strings.Split(text, ","))
		if err != nil {
			return
		}
		back, _, err := ParseNames(o.Names())
		if err != nil || !reflect.DeepEqual(back, o) {
			t.Errorf("%q -> %q -> %+v, %v", text, o.Names(), back, err)
		}
	})
}

// TestARNormFusionThreeStates: --ar-norm-fusion is the engine's default
// unless set: on is the bare name and JSON true, off is
// "ar-norm-fusion=false" and JSON false (an engine that fuses by default
// turns it off by its switch), the default neither; each reads back as
// it was written, and a JSON value other than a bool or null is an error.
func TestARNormFusionThreeStates(t *testing.T) {
	for _, c := range []struct {
		t     Toggle
		names []string
		json  string
	}{
		{ToggleDefault, nil, `{"nccl":{}}`},
		{ToggleOn, []string{"ar-norm-fusion"}, `{"nccl":{},"ar_norm_fusion":true}`},
		{ToggleOff, []string{"ar-norm-fusion=false"}, `{"nccl":{},"ar_norm_fusion":false}`},
	} {
		o := Options{ARNormFusion: c.t}
		if got := o.Names(); !slices.Equal(got, c.names) {
			t.Errorf("%v: names %q, want %q", c.t, got, c.names)
		}
		back, unknown, err := ParseNames(c.names)
		if err != nil || len(unknown) > 0 || back.ARNormFusion != c.t {
			t.Errorf("%q: read back %v (unknown %q, %v), want %v", c.names, back.ARNormFusion, unknown, err, c.t)
		}
		b, err := json.Marshal(o)
		if err != nil || string(b) != c.json {
			t.Errorf("%v: JSON %s (%v), want %s", c.t, b, err, c.json)
		}
		var r Options
		if err := json.Unmarshal([]byte(c.json), &r); err != nil || r.ARNormFusion != c.t {
			t.Errorf("%s: read %v (%v), want %v", c.json, r.ARNormFusion, err, c.t)
		}
	}
	var r Options
	if err := json.Unmarshal([]byte(`{"ar_norm_fusion":"yes"}`), &r); err == nil || !strings.Contains(err.Error(), "want true, false or null") {
		t.Errorf("a string: error %v, want one naming true, false or null", err)
	}
}
