package model

import (
	"os"
	"strings"
	"testing"
)

func TestParsePlanWorkload(t *testing.T) {
	plans := []struct {
		in   string
		want Plan
		err  bool
	}{
		{"tp8", Plan{TP: 8}, false},
		{"tp1-dp8-ep", Plan{TP: 1, DP: 8, EP: true}, false},
		{"tp8-dcp2", Plan{TP: 8, DCP: 2}, false},
		{"tp=2,ep", Plan{TP: 2, EP: true}, false}, // the key=value form people type
		{"", Plan{}, true},
		{"tp0", Plan{}, true},
		{"pp2", Plan{}, true},
	}
	for _, tc := range plans {
		t.Run("plan/"+tc.in, func(t *testing.T) {
			got, err := ParsePlan(tc.in)
			if (err != nil) != tc.err || (!tc.err && got != tc.want) {
				t.Errorf("ParsePlan(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.err)
			}
			if tc.err {
				return
			}
			var back Plan
			text, _ := got.MarshalText()
			if err := back.UnmarshalText(text); err != nil || back != got.Normalized() && back != got {
				t.Errorf("text round trip %q -> %q -> %+v, %v", tc.in, text, back, err)
			}
		})
	}
	wls := []struct {
		in   string
		want Workload
		err  bool
	}{
		{"decode b1 ctx8192 spec2 kv=fp8", Workload{Phase: Decode, Batch: 1, Context: 8192, SpecTokens: 2, KVDtype: FP8}, false},
		{"decode b1 ctx8192 mtp2 kv=fp8", Workload{Phase: Decode, Batch: 1, Context: 8192, SpecTokens: 2, KVDtype: FP8}, false},
		{"prefill b1 ctx2048", Workload{Phase: Prefill, Batch: 1, Context: 2048}, false},
		{"decode batch=32 ctx=4096", Workload{Phase: Decode, Batch: 32, Context: 4096}, false},
		{"decode", Workload{}, true},
		{"decode b1 ctx0", Workload{}, true},
		{"decode b1 ctx10 warp=9", Workload{}, true},
	}
	for _, tc := range wls {
		t.Run("workload/"+tc.in, func(t *testing.T) {
			got, err := ParseWorkload(tc.in)
			if (err != nil) != tc.err || (!tc.err && got != tc.want) {
				t.Errorf("ParseWorkload(%q) = %+v, %v; want %+v, error %v", tc.in, got, err, tc.want, tc.err)
			}
			if tc.err {
				return
			}
			var back Workload
			text, _ := got.MarshalText()
			if err := back.UnmarshalText(text); err != nil || back != got {
				t.Errorf("text round trip %q -> %q -> %+v, %v", tc.in, text, back, err)
			}
		})
	}
}

// TestParseWorkloadKV: the workload text's kv field goes through the one
// KV dtype codec (ParseKVDtype, as --kv-dtype): any case is read, and a
// weight format or an unknown name is one line naming the workload and the
// kv field with the KV dtypes' list, not the list of every dtype.
func TestParseWorkloadKV(t *testing.T) {
	for _, in := range []string{"decode b1 ctx8192 kv=FP8", "decode b1 ctx8192 kv=Fp8_E4M3"} {
		if w, err := ParseWorkload(in); err != nil || w.KVDtype != FP8 {
			t.Errorf("ParseWorkload(%q) = %+v, %v; want kv fp8", in, w, err)
		}
	}
	for _, val := range []string{"nvfp4", "int4", "fp8-block128", "bogus"} {
		in := "decode b1 ctx8192 kv=" + val
		_, err := ParseWorkload(in)
		if err == nil {
			t.Errorf("ParseWorkload(%q) accepted", in)
			continue
		}
		msg := err.Error()
		want := `workload "` + in + `": kv "` + val + `": want ` + KVDtypesAccepted
		if msg != want || strings.Contains(msg, "\n") {
			t.Errorf("ParseWorkload(%q) error %q; want %q", in, msg, want)
		}
	}
}

// FuzzParsePlanWorkload: any text gives a plan or workload or an error,
// never a panic, and what parses writes back to text that parses to the
// same value.
func FuzzParsePlanWorkload(f *testing.F) {
	f.Add("tp8", "decode b1 ctx4096")
	f.Add("tp1-dp8-ep", "prefill b2 ctx100 mtp1 kv=fp8")
	f.Add("tp=-1,,ep", "decode b=1")
	f.Add("dcp", "kv= ctx")
	f.Fuzz(func(t *testing.T, plan, workload string) {
		if p, err := ParsePlan(plan); err == nil {
			if back, err := ParsePlan(p.String()); err != nil || back.Normalized() != p.Normalized() {
				t.Errorf("plan %q -> %q -> %+v, %v", plan, p, back, err)
			}
		}
		if w, err := ParseWorkload(workload); err == nil {
			if back, err := ParseWorkload(w.String()); err != nil || back != w {
				t.Errorf("workload %q -> %q -> %+v, %v", workload, w, back, err)
			}
		}
	})
}

// TestRefResolve: a preset resolves by name, a config file by path with
// its hash checked (an edited file is refused, naming both hashes), and a
// scaled architecture keeps its scale.
func TestRefResolve(t *testing.T) {
	a, err := Preset("tiny-mla-moe")
	if err != nil {
		t.Fatal(err)
	}
	if a.Ref != (Ref{Name: "tiny-mla-moe"}) {
		t.Fatalf("preset ref %+v", a.Ref)
	}
	s, err := ScaleArch(a, 4)
	if err != nil {
		t.Fatal(err)
	}
	back, err := s.Ref.Resolve()
	if err != nil || back.Hidden != s.Hidden || back.Hidden != 64 {
		t.Fatalf("scaled ref %+v resolved to hidden %v (%v), want 64 = 256 / 4", s.Ref, back, err)
	}
	dir := t.TempDir()
	cfg := dir + "/config.json"
	data, err := presetFS.ReadFile("presets/tiny-mla-moe.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if f.Ref.Path != cfg || len(f.Ref.SHA256) != 64 {
		t.Fatalf("file ref %+v", f.Ref)
	}
	if _, err := f.Ref.Resolve(); err != nil {
		t.Fatal(err)
	}
	// The reference carries what was read: an edited or deleted file
	// still resolves to the architecture that was recorded.
	if f.Ref.Config != string(data) {
		t.Fatalf("file ref holds %d config bytes, want the %d read", len(f.Ref.Config), len(data))
	}
	if err := os.WriteFile(cfg, append(data, ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(cfg); err != nil {
		t.Fatal(err)
	}
	back, err = f.Ref.Resolve()
	if err != nil || back.Hidden != 256 || back.Ref.Path != cfg {
		t.Fatalf("recorded content with the file gone: %v (hidden %d), want the preset's 256 at %s", err, back.Hidden, cfg)
	}
	// A record whose content does not hash to its SHA256 was damaged.
	bad := f.Ref
	bad.Config += " "
	if _, err := bad.Resolve(); err == nil || !strings.Contains(err.Error(), "edited or damaged") {
		t.Fatalf("damaged record: error %v, want it refused", err)
	}
	// A reference recorded before content travelled checks the file.
	old := Ref{Path: cfg, SHA256: f.Ref.SHA256}
	if err := os.WriteFile(cfg, append(data, ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Resolve(); err == nil || !strings.Contains(err.Error(), "changed since it was recorded") {
		t.Fatalf("edited config of a path-only ref: error %v, want it refused", err)
	}
}
