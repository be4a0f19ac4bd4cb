package report

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"fmt"
	"html"
	"io"

	"github.com/tpscope/tpscope/internal/fileout"
)

// The page's script and styles, written for this report (no library).
var (
	//go:embed assets/report.js
	script string
	//go:embed assets/report.css
	styles string
)

// DataElementID is the id of the <script type="application/json"> element
// that holds the report's data.
const DataElementID = "tpscope-data"

// Write validates r and writes the HTML page: the data as JSON in a
// script element of type application/json (json.Marshal escapes <, > and &,
// so no "</script>" can end it early), the script and styles inline, and
// no reference to anything outside the file.
func Write(w io.Writer, r *Report) error {
	if err := r.Validate(); err != nil {
		return err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("report: encode data: %w", err)
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	title := html.EscapeString(r.Title)
	fmt.Fprintf(bw, `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>%s</title>
<link rel="icon" href="data:,">
<style>
%s</style>
</head>
<body>
<header><h1>%s</h1><p class="sub">%s</p></header>
<main id="app"><noscript>This report draws its timeline and charts with JavaScript.</noscript></main>
<script type="application/json" id="%s">`, title, styles, title, html.EscapeString(r.Subtitle), DataElementID)
	bw.Write(data)
	fmt.Fprintf(bw, "</script>\n<script>\n%s</script>\n</body>\n</html>\n", script)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("report: write: %w", err)
	}
	return nil
}

// WriteFile validates r, then writes the page to path whole or not at
// all (fileout.Write): an invalid report or a failed write leaves no file
// and an earlier one of that name as it was.
func WriteFile(path string, r *Report) error {
	if err := r.Validate(); err != nil {
		return fmt.Errorf("report %s: %w", path, err)
	}
	if err := fileout.Write(path, func(w io.Writer) error { return Write(w, r) }); err != nil {
		return fmt.Errorf("report %w", err)
	}
	return nil
}
