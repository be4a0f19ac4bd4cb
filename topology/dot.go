package topology

import (
	"fmt"
	"strings"
)

// DOT renders the link graph in Graphviz DOT: GPUs as boxes, other
// elements as ellipses, links labelled with type, width/count and
// bandwidth per direction (GB/s).
func (t *Topology) DOT() string {
	var b strings.Builder
	fmt.Fprintf(&b, "graph %q {\n  rankdir=BT;\n", t.Name)
	for i, g := range t.GPUs {
		fmt.Fprintf(&b, "  %q [shape=box, label=%q];\n", g.ID, fmt.Sprintf("%s\\n%s", g.ID, t.DeviceOf(i).Name))
	}
	for _, n := range t.Nodes {
		fmt.Fprintf(&b, "  %q [label=%q];\n", n.ID, fmt.Sprintf("%s\\n%s", n.ID, n.Kind))
	}
	for _, l := range t.Links {
		label := string(l.Type)
		switch l.Type {
		case LinkPCIe:
			label = fmt.Sprintf("Gen%d x%d", l.Gen, l.Width)
		case LinkNVLink:
			label = fmt.Sprintf("NV%d", l.Count)
		}
		fmt.Fprintf(&b, "  %q -- %q [label=%q];\n", l.A, l.B, fmt.Sprintf("%s %.0f GB/s", label, l.BWGBps))
	}
	b.WriteString("}\n")
	return b.String()
}
