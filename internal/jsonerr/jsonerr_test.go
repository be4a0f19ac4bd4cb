package jsonerr

import (
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

type box struct {
	Name  string            `json:"name"`
	GPUs  []struct{ N int } `json:"gpus"`
	Count uint              `json:"count"`
	Pair  [2]string         `json:"pair"`
	On    bool              `json:"on"`
	Frac  float64           `json:"frac"`
	Tags  map[string]string `json:"tags"`
}

// TestWrap: each decoder failure is worded with its line, field and the
// JSON kind wanted, never a Go type, and unwraps to the decoder's error.
func TestWrap(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"empty", "", "empty: want a JSON object"},
		{"truncated", `{"name":`, "truncated: the JSON ends inside a value (want a complete document)"},
		{"syntax", "{\n\"name\": x}", "line 2: not JSON: invalid character 'x' looking for beginning of value"},
		{"document kind", `[1]`, "line 1: want a JSON object, got an array"},
		{"string", `{"name": 3}`, `line 1: field "name": want a string, got a number`},
		{"nested int", "{\"gpus\": [{\"N\": 1.5}]}", `line 1: field "gpus.N": want an integer, got 1.5`},
		{"uint", `{"count": -1}`, `field "count": want a non-negative integer, got -1`},
		{"array of 2", `{"pair": "ab"}`, `field "pair": want a JSON array of 2, got a string`},
		{"bool", `{"on": "yes"}`, `field "on": want true or false, got a string`},
		{"number", `{"frac": {}}`, `field "frac": want a number, got an object`},
		{"map", `{"tags": []}`, `field "tags": want a JSON object, got an array`},
		{"unknown field", `{"nme": "x"}`, `unknown field "nme"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dec := json.NewDecoder(strings.NewReader(c.in))
			dec.DisallowUnknownFields()
			var b box
			derr := dec.Decode(&b)
			err := Wrap([]byte(c.in), derr, "")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Wrap = %v, want it to contain %q", err, c.want)
			}
			if !errors.Is(err, derr) {
				t.Errorf("%v does not unwrap to %v", err, derr)
			}
			if strings.Contains(err.Error(), "Go") || strings.Contains(err.Error(), "jsonerr.") || strings.Contains(err.Error(), "EOF") {
				t.Errorf("%q shows Go internals", err)
			}
		})
	}
	if Wrap(nil, nil, "") != nil {
		t.Error("Wrap(nil) is not nil")
	}
	if err := Wrap(nil, io.EOF, "a JSON array"); err.Error() != "empty: want a JSON array" {
		t.Errorf("want: %v", err)
	}
	other := errors.New("disk on fire")
	if Wrap(nil, other, "") != other {
		t.Error("a foreign error is not passed through")
	}
}
