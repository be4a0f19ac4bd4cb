package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"
)

// checkPlotPath refuses a --plot file that is neither .png nor .svg (any
// case) or cannot be written, so a verb fails before its work rather than
// after; "" (no plot) passes.
func checkPlotPath(path string) error {
	if path == "" {
		return nil
	}
	if ext := strings.ToLower(filepath.Ext(path)); ext != ".png" && ext != ".svg" {
		return flagError("--plot", path, "want a .png or .svg file")
	}
	return checkOutputFile("--plot", path)
}

// writeTable writes a table as a markdown section "### heading" with note
// as its first paragraph (md), or as tab-aligned text under one line, the
// note or, without one, the heading; the text and markdown outputs of a verb
// thus list the same cells.
func writeTable(w io.Writer, heading, note string, header []string, rows [][]string, md bool) error {
	fmt.Fprintln(w) // apart from what the verb printed before it
	return writeFirstTable(w, heading, note, header, rows, md)
}

// writeFirstTable is writeTable for the first thing a verb prints
// (collective, schedule): no blank line before it.
func writeFirstTable(w io.Writer, heading, note string, header []string, rows [][]string, md bool) error {
	if md {
		fmt.Fprintf(w, "### %s\n\n", heading)
		if note != "" {
			fmt.Fprintf(w, "%s\n\n", note)
		}
	} else {
		if note == "" {
			note = heading
		}
		fmt.Fprintf(w, "%s\n", note)
	}
	return writeRows(w, header, rows, md)
}

// writeRows writes the header and rows, without a title, as a markdown
// table (md) or as tab-aligned text. Cells are written as given: markdown
// callers escape any '|' they hold.
func writeRows(w io.Writer, header []string, rows [][]string, md bool) error {
	if md {
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
		for _, r := range rows {
			fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// fitCell is the "fits" column: yes, or by how much memory a GPU falls short.
func fitCell(fits bool, shortfallGB float64) string {
	if fits {
		return "yes"
	}
	return fmt.Sprintf("no: -%.1f GB", shortfallGB)
}
