// Package jsonerr words encoding/json decoding errors for people: where in
// the document (line, field path) and which JSON kind was wanted, never a Go
// type name ("cannot unmarshal array into Go value of type
// topology.Topology") or a bare "EOF".
//
// The messages read:
//
//	empty: want a JSON object
//	line 3: field "gpus": want a JSON array, got an object
//	line 1: want a JSON object, got an array
//	line 7: not JSON: invalid character '}' looking for beginning of object key string
//	truncated: the JSON ends inside a value (want a complete document)
//	unknown field "bogus"
package jsonerr

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Error is a decoding failure reworded; it unwraps to the decoder's error.
type Error struct {
	Line  int    // 1-based line of the failure; 0 when unknown
	Field string // dotted path of the field ("gpus.pcie_gen"); "" for the document or unknown
	Msg   string // what was wrong and what was wanted, without Go type names
	Err   error
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, "field %q: ", e.Field)
	}
	b.WriteString(e.Msg)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// Wrap rewords err, an error of json.Unmarshal or json.Decoder.Decode on
// data (data may be nil: no line numbers then). want says what the whole
// document should be ("a JSON object"), for an empty input; "" means "a
// JSON object". Errors that are not the decoder's own (a field's
// UnmarshalText, a reader's I/O error) are returned with the "json: "
// prefix removed and are otherwise unchanged. Wrap(nil) is nil.
func Wrap(data []byte, err error, want string) error {
	if err == nil {
		return nil
	}
	if want == "" {
		want = "a JSON object"
	}
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF):
		return &Error{Msg: "empty: want " + want, Err: err}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Msg: "truncated: the JSON ends inside a value (want a complete document)", Err: err}
	case errors.As(err, &se):
		return &Error{Line: LineOf(data, se.Offset), Msg: "not JSON: " + strings.TrimPrefix(se.Error(), "json: "), Err: err}
	case errors.As(err, &te):
		msg := "want " + Kind(te.Type)
		if got := gotKind(te.Value); got != "" {
			msg += ", got " + got
		}
		return &Error{Line: LineOf(data, te.Offset), Field: te.Field, Msg: msg, Err: err}
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return &Error{Msg: "unknown field " + f + " (a misspelt or foreign field; want only the documented ones)", Err: err}
	}
	if strings.HasPrefix(msg, "json: ") {
		return &Error{Msg: strings.TrimPrefix(msg, "json: "), Err: err}
	}
	return err
}

// LineOf is the 1-based line of byte offset off in data (0 when data is
// nil).
func LineOf(data []byte, off int64) int {
	if data == nil {
		return 0
	}
	off = max(0, min(off, int64(len(data))))
	return 1 + bytes.Count(data[:off], []byte{'\n'})
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// Kind names the JSON a Go type decodes from: "a JSON object", "a JSON
// array", "a string", "an integer", "a number", "true or false".
func Kind(t reflect.Type) string {
	if t == nil {
		return "a JSON value"
	}
	if t.Implements(textUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler) {
		return "a string"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return Kind(t.Elem())
	case reflect.Struct, reflect.Map:
		return "a JSON object"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a base64 string"
		}
		return "a JSON array"
	case reflect.Array:
		return fmt.Sprintf("a JSON array of %d", t.Len())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a JSON value"
}

// gotKind words UnmarshalTypeError.Value ("array", "object", "number",
// "number 1.5", "string", "bool").
func gotKind(v string) string {
	switch {
	case v == "":
		return ""
	case v == "array", v == "object":
		return "an " + v
	case v == "bool":
		return "true or false"
	case v == "string":
		return "a string"
	case strings.HasPrefix(v, "number "):
		n := strings.TrimPrefix(v, "number ")
		if len(n) > 40 {
			n = n[:40] + "..."
		}
		return n
	}
	return "a " + v
}
