package model

import "fmt"

// ConfigError is a parse or validation failure of a model config file. It
// names the file, the field (dotted JSON path, e.g.
// "text_config.num_attention_heads") and what was expected, and unwraps to
// the underlying cause when there is one (a JSON syntax error, a bad regexp).
//
// Its message reads: config.json: field "num_attention_heads": missing, want a positive integer
type ConfigError struct {
	File  string // base name or path of the file ("config.json", "hf_quant_config.json", a preset name)
	Field string // dotted JSON path; "" for a whole-file error
	Got   string // what was found ("missing", "-3", "string \"x\"", ...)
	Want  string // what was expected
	Err   error  // cause, may be nil
}

func (e *ConfigError) Error() string {
	msg := e.File + ": "
	if e.Field != "" {
		msg += fmt.Sprintf("field %q: ", e.Field)
	}
	switch {
	case e.Got != "" && e.Want != "":
		msg += e.Got + ", want " + e.Want
	case e.Want != "":
		msg += "want " + e.Want
	case e.Got != "":
		msg += e.Got
	}
	if e.Err != nil {
		if e.Got != "" || e.Want != "" {
			msg += ": "
		}
		msg += e.Err.Error()
	}
	return msg
}

func (e *ConfigError) Unwrap() error { return e.Err }

// PlanError is an invalid parallel plan or workload for an architecture. It
// names the field ("tp", "ep", "dp", "dcp", "batch", "context", ...), the
// value and the expectation.
//
// Its message reads: plan: field "tp" = 3: want a divisor of num_attention_heads (64)
type PlanError struct {
	What  string // "plan" or "workload"
	Field string
	Value string
	Want  string
}

func (e *PlanError) Error() string {
	return fmt.Sprintf("%s: field %q = %s: want %s", e.What, e.Field, e.Value, e.Want)
}
