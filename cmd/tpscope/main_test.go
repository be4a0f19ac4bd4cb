package main

import (
	"bytes"
	"strings"
	"testing"
)

// Every registered verb must answer --help with its usage, flags and an
// example, and exit 0.
func TestEveryVerbHasHelpWithExample(t *testing.T) {
	if len(verbs) == 0 {
		t.Fatal("no verbs registered")
	}
	for _, v := range verbs {
		t.Run(v.Name(), func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append(strings.Fields(v.Name()), "--help")
			if code := dispatch(args, &out, &errb); code != 0 {
				t.Fatalf("exit %d, stderr %q", code, errb.String())
			}
			if !strings.Contains(out.String(), "Example:\n  tpscope "+v.Name()) {
				t.Errorf("help lacks an example starting with 'tpscope %s':\n%s", v.Name(), out.String())
			}
			if v.Short == "" {
				t.Error("empty Short")
			}
		})
	}
}

func TestUnknownVerbIsUsageError(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch([]string{"frobnicate"}, &out, &errb); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	if !strings.Contains(errb.String(), `unknown verb "frobnicate"`) {
		t.Errorf("stderr %q", errb.String())
	}
}
