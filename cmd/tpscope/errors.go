package main

import (
	"fmt"
	"strings"
)

// usageError is a command line a verb refuses before any work (exit 2): a
// flag's value it does not take (a number out of range, a file that is not
// there), an argument, or flags that do not go together. dispatch prints
// it once, as "usage: FLAG VALUE: WANT".
type usageError struct {
	// Of names what the value was judged against, when the value is fine
	// elsewhere (a model's name: "--tp 3" is wrong for this model); it
	// comes first.
	Of string
	// Flag is the flag as typed ("--tp", "-o"), or the flags that clash
	// ("--qps and --concurrency"); "" when the fault is an argument or
	// the command line as a whole.
	Flag string
	// Value is the value as the message shows it ("0", `"xml"`); "" for
	// none.
	Value string
	// Want says what the verb takes instead, or what is wrong with the
	// value, in one clause ("want an integer from 1").
	Want string
	// Err is the cause a package reported, when there is one (for
	// errors.As); Want holds its text.
	Err error
}

func (e *usageError) Error() string {
	msg := e.Want
	if head := strings.TrimSpace(e.Flag + " " + e.Value); head != "" {
		msg = head + ": " + msg
	}
	if e.Of != "" {
		msg = e.Of + ": " + msg
	}
	return msg
}

func (e *usageError) Unwrap() error { return e.Err }

// flagError is the usage error of flag's value (nil: no value shown, as
// for a flag that needs another), printed with %v; want is a format.
func flagError(flag string, value any, want string, a ...any) error {
	e := &usageError{Flag: flag, Want: fmt.Sprintf(want, a...)}
	if value != nil {
		e.Value = fmt.Sprint(value)
	}
	return e
}

// causeError is the usage error of flag's value whose reason is a
// package's error, kept as the cause.
func causeError(flag string, value any, err error) error {
	e := flagError(flag, value, "%s", err.Error()).(*usageError)
	e.Err = err
	return e
}

// usageErrorf is a usage error that no one flag is at fault for: the
// arguments, or a command line without what the verb needs.
func usageErrorf(format string, a ...any) error {
	return &usageError{Want: fmt.Sprintf(format, a...)}
}

// quote shows a value in quotes, as a message does for a word the flag
// does not know.
func quote(s string) string { return fmt.Sprintf("%q", s) }
