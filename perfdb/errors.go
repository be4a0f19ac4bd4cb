package perfdb

import (
	"errors"
	"fmt"
)

// Error is a database, system or engine perfdb cannot serve as asked: a
// root that is not a systems/ directory, a system that is not there or was
// measured on another GPU, tables of another MoE routing. Msg says what
// without the package's name, for a caller that puts its own context (a
// flag, a file) in front; Error prefixes "perfdb: ". A file that cannot be
// read is a *FileError.
type Error struct {
	Msg string
	Err error // the cause, when there is one
}

func (e *Error) Error() string { return "perfdb: " + e.Msg }

func (e *Error) Unwrap() error { return e.Err }

// errorf returns an *Error; format may wrap a cause with %w.
func errorf(format string, a ...any) error {
	err := fmt.Errorf(format, a...)
	return &Error{Msg: err.Error(), Err: errors.Unwrap(err)}
}
