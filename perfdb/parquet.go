package perfdb

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/parquet-go/parquet-go"
)

// colKind is the Go type a column is read into.
type colKind uint8

const (
	colInt    colKind = iota // INT32 / INT64
	colFloat                 // DOUBLE / FLOAT (INT64 / INT32 accepted)
	colString                // BYTE_ARRAY
)

func (k colKind) want() string {
	switch k {
	case colInt:
		return "an integer column (INT32 or INT64)"
	case colFloat:
		return "a numeric column (DOUBLE, FLOAT or integer)"
	}
	return "a string column (BYTE_ARRAY)"
}

// column names one column to read and where its values go; exactly one
// destination matches kind. An optional column that is absent leaves its
// destination nil.
type column struct {
	name     string
	kind     colKind
	optional bool
	ints     *[]int64
	floats   *[]float64
	strs     *[]string
	// key: an integer key column whose every value must be >= min
	// (commonCols.read checks it).
	key bool
	min int64
}

func intCol(name string, dst *[]int64) column { return column{name: name, kind: colInt, ints: dst} }

// keyCol is an integer key column of values >= min.
func keyCol(name string, dst *[]int64, min int64) column {
	return column{name: name, kind: colInt, ints: dst, key: true, min: min}
}
func floatCol(name string, dst *[]float64) column {
	return column{name: name, kind: colFloat, floats: dst}
}
func strCol(name string, dst *[]string) column { return column{name: name, kind: colString, strs: dst} }

// readColumns reads the named columns of a Parquet file, whole, into
// their destinations and returns the row count. Only those columns are
// decoded. Errors are *FileError naming the file (label), the column and,
// for a null value, the row.
//
// Strings are interned per file: tables repeat a few values (dtypes, op
// names) over many rows.
func readColumns(path, label string, cols []column) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, &FileError{Path: label, Row: -1, Err: err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, &FileError{Path: label, Row: -1, Err: err}
	}
	if err := checkMagic(f, st.Size()); err != nil {
		return 0, &FileError{Path: label, Row: -1, Err: err}
	}
	pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return 0, &FileError{Path: label, Row: -1, Err: fmt.Errorf("not a readable Parquet file: %w", err)}
	}
	nrows := pf.NumRows()
	if nrows < 0 || nrows > math.MaxInt32 {
		return 0, &FileError{Path: label, Row: -1, Err: fmt.Errorf("%d rows: want 0..%d", nrows, math.MaxInt32)}
	}
	n := int(nrows)
	schema := pf.Schema()
	intern := map[string]string{}
	for _, c := range cols {
		leaf, ok := schema.Lookup(c.name)
		if !ok {
			if c.optional {
				continue
			}
			return 0, &FileError{Path: label, Field: "column " + c.name, Row: -1, Err: fmt.Errorf("missing: want %s", c.kind.want())}
		}
		if leaf.MaxRepetitionLevel > 0 {
			return 0, &FileError{Path: label, Field: "column " + c.name, Row: -1, Err: errors.New("repeated: want one value per row")}
		}
		kind := leaf.Node.Type().Kind()
		if !kindFits(c.kind, kind) {
			return 0, &FileError{Path: label, Field: "column " + c.name, Row: -1, Err: fmt.Errorf("%s: want %s", kind, c.kind.want())}
		}
		switch c.kind {
		case colInt:
			*c.ints = make([]int64, 0, n)
		case colFloat:
			*c.floats = make([]float64, 0, n)
		case colString:
			*c.strs = make([]string, 0, n)
		}
		if err := readLeaf(pf, leaf.ColumnIndex, c, kind, intern); err != nil {
			return 0, &FileError{Path: label, Field: "column " + c.name, Row: rowOf(err), Err: err}
		}
		if got := c.len(); got != n {
			return 0, &FileError{Path: label, Field: "column " + c.name, Row: -1, Err: fmt.Errorf("%d values for %d rows", got, n)}
		}
	}
	return n, nil
}

// parquetMagic opens and closes every Parquet file; the footer (the
// schema and where each column's pages are) sits just before the closing
// one, so a file cut short has lost its footer, and with it every column.
const parquetMagic = "PAR1"

// checkMagic tells a file cut short (it starts as Parquet but does not end
// as Parquet) from one that is not Parquet at all, which parquet-go
// reports alike ("invalid magic footer").
func checkMagic(f io.ReaderAt, size int64) error {
	var head, tail [4]byte
	if _, err := f.ReadAt(head[:], 0); err != nil || string(head[:]) != parquetMagic {
		return fmt.Errorf("not a readable Parquet file: it does not start with Parquet's magic %q", parquetMagic)
	}
	if size < 12 { // head magic, footer length, tail magic
		return fmt.Errorf("the file was cut: it ends at byte %d, before Parquet's footer and closing magic %q", size, parquetMagic)
	}
	if _, err := f.ReadAt(tail[:], size-4); err != nil || string(tail[:]) != parquetMagic {
		return fmt.Errorf("the file was cut: it ends at byte %d without Parquet's closing magic %q (the footer that locates every column is lost)", size, parquetMagic)
	}
	return nil
}

func (c *column) len() int {
	switch c.kind {
	case colInt:
		return len(*c.ints)
	case colFloat:
		return len(*c.floats)
	}
	return len(*c.strs)
}

func kindFits(want colKind, k parquet.Kind) bool {
	switch want {
	case colInt:
		return k == parquet.Int32 || k == parquet.Int64
	case colFloat:
		return k == parquet.Double || k == parquet.Float || k == parquet.Int32 || k == parquet.Int64
	}
	return k == parquet.ByteArray
}

// nullError is a null in a column that needs a value in every row.
type nullError struct{ row int }

func (e *nullError) Error() string { return "null value: want a value in every row" }

func rowOf(err error) int {
	var ne *nullError
	if errors.As(err, &ne) {
		return ne.row
	}
	return -1
}

// readLeaf appends every value of one leaf column, row group by row
// group, page by page.
func readLeaf(pf *parquet.File, idx int, c column, kind parquet.Kind, intern map[string]string) error {
	buf := make([]parquet.Value, 1024)
	row := 0
	for _, rg := range pf.RowGroups() {
		chunks := rg.ColumnChunks()
		if idx >= len(chunks) {
			return fmt.Errorf("row group has %d columns, want column %d", len(chunks), idx)
		}
		pages := chunks[idx].Pages()
		err := func() error {
			defer pages.Close()
			for {
				page, err := pages.ReadPage()
				if err == io.EOF {
					return nil
				}
				if err != nil {
					return err
				}
				vr := page.Values()
				for {
					k, err := vr.ReadValues(buf)
					for _, v := range buf[:k] {
						if v.IsNull() {
							parquet.Release(page)
							return &nullError{row: row}
						}
						switch c.kind {
						case colInt:
							if kind == parquet.Int32 {
								*c.ints = append(*c.ints, int64(v.Int32()))
							} else {
								*c.ints = append(*c.ints, v.Int64())
							}
						case colFloat:
							switch kind {
							case parquet.Double:
								*c.floats = append(*c.floats, v.Double())
							case parquet.Float:
								*c.floats = append(*c.floats, float64(v.Float()))
							case parquet.Int32:
								*c.floats = append(*c.floats, float64(v.Int32()))
							default:
								*c.floats = append(*c.floats, float64(v.Int64()))
							}
						case colString:
							b := v.ByteArray()
							s, ok := intern[string(b)]
							if !ok {
								s = string(b)
								intern[s] = s
							}
							*c.strs = append(*c.strs, s)
						}
						row++
					}
					if err == io.EOF {
						break
					}
					if err != nil {
						parquet.Release(page)
						return err
					}
				}
				parquet.Release(page)
			}
		}()
		if err != nil {
			return err
		}
	}
	return nil
}
