package main

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
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

// bindOutputFlag registers --output on *v; its help names exactly the
// formats the verb writes, and what csv holds when it is one of them.
func bindOutputFlag(fs *pflag.FlagSet, v *string, csvHolds string, formats ...string) {
	help := "output format: " + strings.Join(formats, ", ")
	if csvHolds != "" {
		help += " (csv: " + csvHolds + ")"
	}
	fs.StringVar(v, "output", *v, help)
}

// checkOutput validates an --output value against the formats a verb has.
func checkOutput(got string, allowed ...string) error {
	for _, a := range allowed {
		if got == a {
			return nil
		}
	}
	return flagError("--output", quote(got), "want one of %s", strings.Join(allowed, ", "))
}

// view is a verb's result in each output format it has: the value JSON
// encodes, the CSV table, and the text, as a table for people or as
// markdown. A verb without a format leaves its field nil (its --output
// refuses the format before any work).
type view struct {
	JSON any
	CSV  func(w io.Writer) error
	Text func(w io.Writer, md bool) error
}

// render writes v in format: every verb's output goes through here.
func render(w io.Writer, format string, v view) error {
	switch format {
	case formatJSON:
		return writeJSON(w, v.JSON)
	case formatCSV:
		return v.CSV(w)
	}
	return v.Text(w, format == formatMarkdown)
}

// renderThen writes v in format, then each side file a verb was asked
// for (a --plot chart, a --frontier CSV, a --report page), in order. The
// result goes out first: a side file that cannot be written (a chart with
// nothing to draw) is an error after it, never in place of it, and does
// not keep the side files after it from being written. The errors, one
// line each, are joined.
func renderThen(w io.Writer, format string, v view, files ...func() error) error {
	if err := render(w, format, v); err != nil {
		return err
	}
	var errs []error
	for _, write := range files {
		if err := write(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// writeJSON writes v as JSON, indented one space per level: the one
// encoder of the CLI, for --output json and the JSON files verbs write.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(v)
}

// writeJSONFile writes v to path as writeJSON does; errors name flag.
func writeJSONFile(flag, path string, v any) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("%s %s: %s", flag, path, pathReason(err))
	}
	if err := writeJSON(f, v); err != nil {
		f.Close()
		return fmt.Errorf("%s %s: %w", flag, path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%s %s: %w", flag, path, err)
	}
	return nil
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

// csvNum is a number as a CSV cell: the value to 8 significant digits,
// as the verbs' CSV tables write them, not a table's rounding.
func csvNum(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }

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

// checkTopRows refuses --top N (given, N > 0) with an output that carries
// every row whatever it says (JSON, CSV): the flag limits the rows of the
// table and markdown output only, and was accepted there and ignored.
// rows names what the output lists.
func checkTopRows(given bool, top int, output, rows string) error {
	if given && top > 0 && (output == formatJSON || output == formatCSV) {
		return flagError("--top", top, "--output %s carries every %s; the flag limits the table and markdown rows: leave it out", output, rows)
	}
	return nil
}
