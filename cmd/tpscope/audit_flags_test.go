package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// predictLines runs predict and returns its key lines by key (the first
// of each), failing the test on an error.
func predictLines(t *testing.T, args ...string) map[string]string {
	t.Helper()
	code, out, stderr := runCLI(t, append([]string{"predict", "--top", "1"}, args...)...)
	if code != 0 {
		t.Fatalf("predict %v: exit %d: %s", args, code, stderr)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(l, "  ")
		if !ok || k == "" {
			continue
		}
		if _, seen := lines[k]; !seen {
			lines[k] = strings.TrimSpace(v)
		}
	}
	return lines
}

// predictJSONObject runs predict --output json and returns its top-level
// object.
func predictJSONObject(t *testing.T, args ...string) map[string]any {
	t.Helper()
	code, out, stderr := runCLI(t, append([]string{"predict", "--output", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("predict %v: exit %d: %s", args, code, stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPredictDenseDSAFlag: --dense-dsa is recorded as chosen and shown in
// the options line and the JSON; the engine line names what was priced.
// On SM120 vLLM runs GLM-5 dense (no sparse kernels there), so
// --dense-dsa=false is a choice against the engine; on H200 it runs it
// sparse, so --dense-dsa is.
func TestPredictDenseDSAFlag(t *testing.T) {
	cases := []struct {
		args         []string
		option       string // a word of the options line, "" = none about dsa
		engineSuffix string
		dense, chose bool
	}{
		{[]string{"--model", "glm-5-nvfp4"}, "", ", DSA run dense", true, false},
		{[]string{"--model", "glm-5-nvfp4", "--dense-dsa=false"}, "dense-dsa=false", ", DSA sparse (--dense-dsa=false; the engine runs it dense here)", false, true},
		{[]string{"--model", "glm-5-nvfp4", "--topo", "h200-nvswitch", "--dense-dsa"}, "dense-dsa", ", DSA run dense (--dense-dsa; the engine runs it sparse here)", true, true},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			l := predictLines(t, tc.args...)
			var dsaWords []string
			for _, w := range strings.Fields(l["options"]) {
				if strings.HasPrefix(w, "dense-dsa") {
					dsaWords = append(dsaWords, w)
				}
			}
			if got := strings.Join(dsaWords, " "); got != tc.option {
				t.Errorf("options %q: dsa words %q, want %q", l["options"], got, tc.option)
			}
			if !strings.HasSuffix(l["engine"], tc.engineSuffix) {
				t.Errorf("engine %q: want it to end %q", l["engine"], tc.engineSuffix)
			}
			dsa, _ := predictJSONObject(t, tc.args...)["dsa"].(map[string]any)
			if dsa["dense"] != tc.dense || dsa["chosen"] != tc.chose {
				t.Errorf("JSON dsa %v: want dense %v chosen %v", dsa, tc.dense, tc.chose)
			}
		})
	}
	checkUsageErrors(t, []usageCase{
		{"kimi has no DSA", []string{"predict", "--model", "kimi-k2.5", "--dense-dsa"}, "--dense-dsa: kimi-k2.5 has no DSA sparse attention"},
		{"kimi has no DSA (=false)", []string{"schedule", "--model", "kimi-k2.5", "--dense-dsa=false"}, "--dense-dsa: kimi-k2.5 has no DSA sparse attention"},
		{"plan on kimi", []string{"plan", "--model", "kimi-k2.5", "--dense-dsa", "--plan", "tp8"}, "--dense-dsa: kimi-k2.5 has no DSA sparse attention"},
	})
}
