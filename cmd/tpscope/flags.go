package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// boundFlags remembers the flag set a verb's options were bound to, to
// tell which flags the command line set: a flag the user passes may mean
// more than its value (a scenario flag overrides what a trace recorded;
// --dense-dsa chosen rather than implied by the box). Options built in
// code are bound to none: no flag counts as set, and every field is taken
// as it is.
type boundFlags struct{ fs *pflag.FlagSet }

// changed reports whether the command line set the flag.
func (b *boundFlags) changed(name string) bool { return b.fs != nil && b.fs.Changed(name) }

// given reports whether a flag was set: by the command line, or, for
// options built in code, by a value other than its default (nonDefault).
func (b *boundFlags) given(name string, nonDefault bool) bool {
	if b.fs != nil {
		return b.fs.Changed(name)
	}
	return nonDefault
}

// anyChanged reports whether the command line set one of the flags.
func (b *boundFlags) anyChanged(names ...string) bool {
	for _, n := range names {
		if b.changed(n) {
			return true
		}
	}
	return false
}

// visitChanged calls fn for each flag the command line set, in
// lexicographical order.
func (b *boundFlags) visitChanged(fn func(*pflag.Flag)) {
	if b.fs != nil {
		b.fs.Visit(fn)
	}
}

// intList is a list flag of integers: comma-separated, repeatable, with
// K and M suffixes (1024 multiples); min is the smallest value accepted.
// The first value given replaces the default list.
type intList struct {
	v   []int
	set bool
	min int
}

func (l *intList) String() string {
	s := make([]string, len(l.v))
	for i, x := range l.v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func (l *intList) Type() string { return "ints" }

func (l *intList) Set(s string) error {
	if !l.set {
		l.v, l.set = nil, true
	}
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		mult := 1
		switch {
		case strings.HasSuffix(p, "K") || strings.HasSuffix(p, "k"):
			mult, p = 1024, p[:len(p)-1]
		case strings.HasSuffix(p, "M") || strings.HasSuffix(p, "m"):
			mult, p = 1024*1024, p[:len(p)-1]
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < l.min || n > 1<<26 {
			return fmt.Errorf("%q: want integers from %d (K and M suffixes allowed)", p, l.min)
		}
		l.v = append(l.v, n*mult)
	}
	return nil
}

// splitList splits a comma list, dropping empty items and spaces.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// noArgs refuses arguments of a verb that takes none.
func noArgs(args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected arguments %q", args)
	}
	return nil
}
