package compare

import (
	"bytes"
	"strings"
	"testing"
)

// TestIssueExamplesReadable: a profiler kernel's name is a C++ signature
// of thousands of characters. The "left out or approximated" table had
// printed five copies of one such name as an issue's examples, padding
// every row of the table to over 5,000 columns (compare of the H100
// PyTorch stack trace). An example is listed once, and the table cuts a
// long one to 60 characters and "..."; the JSON keeps it whole.
func TestIssueExamplesReadable(t *testing.T) {
	long := "void at::native::elementwise_kernel<128, 4, " + strings.Repeat("at::native::gpu_kernel_impl_nocast<...>", 30) + ">(int)"
	var is issues
	for range 5 {
		is.add(IssueNoOpID, 1, long)
	}
	is.add(IssueNoOpID, 1, "embed.lookup")
	if got := is.list[0]; got.Count != 6 || len(got.Examples) != 2 || got.Examples[0] != long || got.Examples[1] != "embed.lookup" {
		t.Fatalf("issue of %d spans, %d examples: want 6, the long name once (whole) and embed.lookup", got.Count, len(got.Examples))
	}
	var b bytes.Buffer
	if err := (&Report{Issues: is.list}).WriteTable(&b, 20); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if len(line) > 200 {
			t.Errorf("a line of %d characters:\n%.300s...", len(line), line)
		}
	}
	if !strings.Contains(b.String(), long[:57]+"...; embed.lookup") {
		t.Errorf("table lacks the cut name beside the other example:\n%s", b.String())
	}
}
