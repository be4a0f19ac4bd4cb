package main

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// The output formats of verbs that print rows: a table for people, JSON
// (the whole result, snake_case keys with units), CSV (the verb's main
// table, one header line) and markdown (every table of the table format as
// a markdown table under a heading).
const (
	formatTable    = "table"
	formatJSON     = "json"
	formatCSV      = "csv"
	formatMarkdown = "markdown"
)

// allFormats is what a verb that prints rows writes.
var allFormats = []string{formatTable, formatJSON, formatCSV, formatMarkdown}

// addOutputFlag registers --output; its help names exactly the formats
// the verb writes, and what csv holds when it is one of them.
func addOutputFlag(fs *pflag.FlagSet, csvHolds string, formats ...string) *string {
	help := "output format: " + strings.Join(formats, ", ")
	if csvHolds != "" {
		help += " (csv: " + csvHolds + ")"
	}
	return fs.String("output", formatTable, help)
}

// writeJSON writes v indented.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(v)
}

// writeCSV writes a header and rows as CSV.
func writeCSV(w io.Writer, header []string, rows [][]string) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(header); err != nil {
		return err
	}
	if err := cw.WriteAll(rows); err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}

// writeKV writes key/value lines: aligned "key  value" for a table, a
// two-column markdown table for markdown.
func writeKV(w io.Writer, md bool, kv [][2]string) error {
	rows := make([][]string, len(kv))
	for i, p := range kv {
		rows[i] = []string{p[0], p[1]}
	}
	if md {
		return writeRows(w, []string{"", ""}, rows, true)
	}
	width := 0
	for _, p := range kv {
		width = max(width, len(p[0]))
	}
	for _, p := range kv {
		if _, err := fmt.Fprintf(w, "%-*s  %s\n", width, p[0], p[1]); err != nil {
			return err
		}
	}
	return nil
}

// mdCell escapes a markdown table cell.
func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
