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
		fmt.Fprintf(&b, "  %s [shape=box, label=%s];\n", dotID(g.ID), dotLabel(g.ID, t.DeviceOf(i).Name))
	}
	for _, n := range t.Nodes {
		fmt.Fprintf(&b, "  %s [label=%s];\n", dotID(n.ID), dotLabel(n.ID, string(n.Kind)))
	}
	for _, l := range t.Links {
		label := string(l.Type)
		switch l.Type {
		case LinkPCIe:
			label = fmt.Sprintf("Gen%d x%d", l.Gen, l.Width)
		case LinkNVLink:
			label = fmt.Sprintf("NV%d", l.Count)
		}
		fmt.Fprintf(&b, "  %s -- %s [label=%s];\n", dotID(l.A), dotID(l.B), dotLabel(fmt.Sprintf("%s %.0f GB/s", label, l.BWGBps)))
	}
	b.WriteString("}\n")
	return b.String()
}

// dotID quotes a node ID as a DOT string (quotes and backslashes escaped).
func dotID(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// dotLabel joins lines into one DOT label: each line escaped as in dotID,
// lines separated by DOT's \n (centred line break), which Graphviz renders
// as a new line (Go's %q would write \\n, a literal backslash and n).
func dotLabel(lines ...string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", " ")
	for i := range lines {
		lines[i] = r.Replace(lines[i])
	}
	return `"` + strings.Join(lines, `\n`) + `"`
}
