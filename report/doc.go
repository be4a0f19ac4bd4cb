// Package report writes the self-contained HTML report: one file that opens
// from disk with no network, holding its data as embedded JSON and its
// script and styles inline (plain Canvas, SVG and vanilla JavaScript, no
// library).
//
// The report computes nothing it shows. Its input is plain data (Report):
// sections of summary lines, timelines, bar charts and tables, each number
// already derived and each label already formatted by an adapter
// (report/build turns predictions, comparisons and advice into a Report).
// The page only lays the data out:
//
//   - Timeline: one lane per rank and source (predicted above measured),
//     every op a box at its start with its duration, coloured by kind;
//     collectives linked across the lanes of their group; boxes on the
//     critical path marked; hover shows the op's fields. Lanes are drawn on
//     a Canvas so that 10,000+ boxes pan and zoom smoothly.
//   - Bars: rows of one value per series (predicted, measured) with an
//     optional spread (p10-p90), as SVG.
//   - Table: sortable rows of preformatted cells.
//
// Units: times in the timeline are microseconds from the step's start (Us
// suffix); bar values carry the unit their chart names.
package report
