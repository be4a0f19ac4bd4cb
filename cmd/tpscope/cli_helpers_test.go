package main

import (
	"bytes"
	"strings"
	"testing"
)

// runCLI runs one command line through the verb registry, as main does, and
// returns the exit code and what the verb wrote.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = dispatch(args, &out, &errb)
	return code, out.String(), errb.String()
}

// usageCase is a command line that must be refused as a usage error (exit
// 2) with want in the message on stderr.
type usageCase struct {
	name string
	args []string
	want string
}

// checkUsageErrors runs each case as a named subtest.
func checkUsageErrors(t *testing.T, cases []usageCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Fatalf("exit %d (want 2), stderr %q (want %q)", code, stderr, tc.want)
			}
		})
	}
}

// withFlags returns args with over's flags set: a flag args already gives
// (--name VALUE, --name=VALUE or a bare --name) is taken out of args, as
// the CLI refuses a flag of one value given twice, and over is appended.
// A list flag given in over is kept as many times as over gives it.
func withFlags(args []string, over ...string) []string {
	drop := map[string]bool{}
	for _, o := range over {
		if name, ok := strings.CutPrefix(o, "--"); ok {
			name, _, _ = strings.Cut(name, "=")
			drop[name] = true
		}
	}
	out := make([]string, 0, len(args)+len(over))
	for i := 0; i < len(args); i++ {
		name, ok := strings.CutPrefix(args[i], "--")
		if !ok {
			out = append(out, args[i])
			continue
		}
		name, _, inline := strings.Cut(name, "=")
		if !drop[name] {
			out = append(out, args[i])
			continue
		}
		if !inline && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			i++ // its value
		}
	}
	return append(out, over...)
}

// withoutFlag is args without the flag name and its value ("--name v" or
// "--name=v"): the flag left to its default.
func withoutFlag(args []string, name string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--"+name:
			i++ // its value
		case strings.HasPrefix(args[i], "--"+name+"="):
		default:
			out = append(out, args[i])
		}
	}
	return out
}
