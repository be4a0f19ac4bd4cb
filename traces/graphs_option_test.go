package traces

import (
	"strings"
	"testing"
)

// The runner writes tpscope.graphs on a step root whenever graphs were
// requested: what it says about the measured steps overrides the options
// list, in both directions; without it the options stand.
func TestWithGraphsOption(t *testing.T) {
	root := func(attrs ...Attr) *Span { return &Span{Attrs: attrs} }
	graphs := func(b bool) Attr { return Attr{Key: string(AttrGraphs), Value: BoolValue(b)} }
	cases := []struct {
		name    string
		root    *Span
		options string
		want    string
	}{
		{"no attribute keeps options", root(), "cuda-graphs,p2p-level=SYS", "cuda-graphs,p2p-level=SYS"},
		{"replayed, options silent: added", root(graphs(true)), `["p2p-level=SYS"]`, "p2p-level=SYS,cuda-graphs"},
		{"replayed, options say so: unchanged", root(graphs(true)), "cuda-graphs", "cuda-graphs"},
		{"fell back to eager: removed", root(graphs(false)), `["cuda-graphs","nccl-proto=LL"]`, "nccl-proto=LL"},
		{"eager, options silent: unchanged", root(graphs(false)), "nccl-proto=LL", "nccl-proto=LL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := withGraphsOption(tc.root, tc.options); got != tc.want {
				t.Errorf("withGraphsOption(%q) = %q, want %q", tc.options, got, tc.want)
			}
		})
	}
}

// GraphsOptions leaves a list that already says what was measured as it
// is and does not change its argument otherwise.
func TestGraphsOptions(t *testing.T) {
	cases := []struct {
		names  []string
		graphs bool
		want   []string
	}{
		{nil, true, []string{"cuda-graphs"}},
		{nil, false, nil},
		{[]string{"cuda-graphs", "overlap"}, true, []string{"cuda-graphs", "overlap"}},
		{[]string{"cuda-graphs", "overlap"}, false, []string{"overlap"}},
		{[]string{"overlap"}, true, []string{"overlap", "cuda-graphs"}},
	}
	for _, tc := range cases {
		in := append([]string(nil), tc.names...)
		got := GraphsOptions(in, tc.graphs)
		if strings.Join(got, ",") != strings.Join(tc.want, ",") || strings.Join(in, ",") != strings.Join(tc.names, ",") {
			t.Errorf("GraphsOptions(%q, %v) = %q (argument now %q), want %q", tc.names, tc.graphs, got, in, tc.want)
		}
	}
}
