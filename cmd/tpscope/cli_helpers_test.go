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
