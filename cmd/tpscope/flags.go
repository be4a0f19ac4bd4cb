package main

import (
	"errors"
	"fmt"
	"math"
	"slices"
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

// countSuffixHelp is what the help of every flag that parseCount reads
// says of its suffixes, once, the same words on every verb.
const countSuffixHelp = " (K and M suffixes: 4K = 4096)"

// maxCount bounds what parseCount returns, so that a suffix cannot
// overflow an int (2^40: the most tokens of KV cache a workload may hold,
// model.Validate's batch x context bound).
const maxCount = 1 << 40

// parseCount parses one count of tokens, sequences or requests: an
// integer with an optional K or M suffix (1024 multiples: 4K = 4096,
// 1M = 1048576), as every verb's token-count and size flags take it
// (--context 32K on predict as on plan). Range checks are the caller's;
// the error says only what the text should look like.
func parseCount(s string) (int, error) {
	t := strings.TrimSpace(s)
	mult := 1
	switch {
	case strings.HasSuffix(t, "K") || strings.HasSuffix(t, "k"):
		mult, t = 1<<10, t[:len(t)-1]
	case strings.HasSuffix(t, "M") || strings.HasSuffix(t, "m"):
		mult, t = 1<<20, t[:len(t)-1]
	}
	n, err := strconv.Atoi(t)
	if err != nil || n > maxCount/mult || n < -maxCount/mult {
		return 0, fmt.Errorf("want an integer%s", countSuffixHelp)
	}
	return n * mult, nil
}

// finiteFloat is a float64 flag that refuses NaN and infinities, which
// strconv.ParseFloat (pflag's parser) accepts: no quantity a flag gives
// (a fraction, a size, a rate, a time) is meaningful as either, and a
// NaN passes every range check written as "x < lo || x > hi", so that
// --threshold NaN or --gpu-mem-gb Inf ran and printed NaN and overflowed
// numbers.
type finiteFloat struct{ pflag.Value }

func (f finiteFloat) Set(s string) error {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if errors.Is(err, strconv.ErrRange) && math.Abs(v) > 1 || err == nil && (math.IsNaN(v) || math.IsInf(v, 0)) {
		return errors.New("want a finite number")
	}
	return f.Value.Set(s)
}

// refuseNonFinite makes every float64 flag of fs a finiteFloat, so that
// each verb's floats, bound with pflag's Float64Var, refuse NaN and
// infinities at parse time, naming the flag.
func refuseNonFinite(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Value.Type() == "float64" {
			f.Value = finiteFloat{f.Value}
		}
	})
}

// onceValue is a flag of one value that refuses a second: pflag keeps the
// last of 'predict --tp 8 --tp 4' and drops the first without a word.
type onceValue struct {
	pflag.Value
	set bool
}

func (o *onceValue) Set(s string) error {
	if o.set {
		first := o.Value.String()
		if first == "" {
			first = `""` // '--compare-topos= --compare-topos X'
		}
		return fmt.Errorf("given twice (first %s): give it once", first)
	}
	o.set = true
	return o.Value.Set(s)
}

// refuseRepeated makes every flag of fs that takes one value a onceValue.
// List flags (pflag's slices and arrays, intList) take a value per use:
// 'compare --trace a --trace b'.
func refuseRepeated(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if _, ok := f.Value.(pflag.SliceValue); ok {
			return
		}
		if _, ok := f.Value.(*intList); ok {
			return
		}
		f.Value = &onceValue{Value: f.Value}
	})
}

// emptyAllowed lists the flags, as "VERB --FLAG", whose empty value is
// documented as a choice of its own; every other flag refuses an explicit
// empty value (refuseEmpty).
var emptyAllowed = map[string]bool{
	// advise's help: "boxes the 'move to' entries try, ... (comma list;
	// '' for none)"; the tests run advise --compare-topos= to price no box
	// entry.
	"advise --compare-topos": true,
	// advise's help: "other models on which to compare the baseline's
	// settings with stock (comma list; '' for none)"; the tests run
	// advise --transfer '' to skip the transfer rows.
	"advise --transfer": true,
	// run's help: "span destination: ... (empty: OTEL_EXPORTER_OTLP_*
	// variables)": the empty destination is the OpenTelemetry exporter's
	// environment.
	"run --trace": true,
}

// emptyWantAnnotation holds, on a flag whose help is too long to quote in
// one line, what the flag takes, in the words of the code that binds it
// (wantWhenEmpty), for the refusal of its empty value (refuseEmpty).
const emptyWantAnnotation = "tpscope-empty-want"

// wantWhenEmpty states what the flag name of fs takes, which the refusal
// of its empty value says in place of its help.
func wantWhenEmpty(fs *pflag.FlagSet, name, want string) {
	_ = fs.SetAnnotation(name, emptyWantAnnotation, []string{want})
}

// emptyWantOf is what fl takes, said in the refusal of its empty value:
// its wantWhenEmpty words, or its help up to its first top-level ';' or
// "(default", cut at a word near 100 characters (the refusal's line ends
// with where the whole help is: 'see tpscope VERB --help').
func emptyWantOf(fl *pflag.Flag) string {
	if w := fl.Annotations[emptyWantAnnotation]; len(w) == 1 {
		return w[0]
	}
	u, depth := fl.Usage, 0
	for i, r := range u {
		switch {
		case r == '(' && depth == 0 && strings.HasPrefix(u[i:], "(default"):
			u = u[:i]
		case r == '(':
			depth++
			continue
		case r == ')':
			depth--
			continue
		case r == ';' && depth == 0:
			u = u[:i]
		default:
			continue
		}
		break
	}
	u = strings.TrimSpace(u)
	if len(u) > 100 {
		if cut := strings.LastIndexByte(u[:100], ' '); cut > 0 {
			// Close what the cut left open: "(vllm bench serve, ...)".
			u = u[:cut] + " ..." + strings.Repeat(")", max(0, strings.Count(u[:cut], "(")-strings.Count(u[:cut], ")")))
		}
	}
	return "a value (" + u + ")"
}

// nonEmpty is a flag that refuses an explicit empty or blank value: each
// flag's unset value is "" (or an empty list), so pflag took '--model ""'
// as the flag left out and ran the default model, and '--engine ""' the
// default engine, a value that named nothing read as a choice.
type nonEmpty struct {
	pflag.Value
	want string
}

func (v nonEmpty) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return fmt.Errorf("empty: want %s", v.want)
	}
	return v.Value.Set(s)
}

// refuseEmpty makes every flag of verb's flag set fs that takes a value a
// nonEmpty, but those of emptyAllowed. A flag left out keeps its default;
// only an empty value given is refused, at parse time, naming the flag.
// Booleans refuse an empty value already (pflag's ParseBool).
func refuseEmpty(fs *pflag.FlagSet, verb string) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Value.Type() == "bool" || emptyAllowed[verb+" --"+f.Name] {
			return
		}
		if f.DefValue == "[]" {
			// pflag's help prints "(default [])" for a list it does not
			// know as its own type; the list's default is none, as before.
			f.DefValue = ""
		}
		f.Value = nonEmpty{Value: f.Value, want: emptyWantOf(f)}
	})
}

// namesSomething is a flag that refuses a value of only commas and
// blanks (",", ",,", " , "): every comma list dropped its empty items
// (splitList, pflag's slices, the options' lists), so that such a value
// named no item and became the empty list, which each flag read as
// something of its own: '--compare-topos ,' tried no box, '--graph-sizes ,'
// captured the engine's default sizes, '--transfer ,' priced no other
// model. No flag takes a value of separators alone, list or not.
type namesSomething struct {
	pflag.Value
	want string
}

func (v namesSomething) Set(s string) error {
	if strings.ContainsRune(s, ',') && strings.Trim(s, ", \t") == "" {
		return fmt.Errorf("only separators, naming nothing: want %s", v.want)
	}
	return v.Value.Set(s)
}

// refuseSeparatorsOnly makes every flag of fs that takes a value a
// namesSomething, those whose empty value is a choice (emptyAllowed)
// included: their choice is the empty value, not a comma.
func refuseSeparatorsOnly(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Value.Type() == "bool" {
			return
		}
		f.Value = namesSomething{Value: f.Value, want: emptyWantOf(f)}
	})
}

// countValue is a flag of one count (parseCount): --context 32K.
type countValue int

func (c *countValue) String() string { return strconv.Itoa(int(*c)) }

func (c *countValue) Type() string { return "int" }

func (c *countValue) Set(s string) error {
	n, err := parseCount(s)
	if err != nil {
		return err
	}
	*c = countValue(n)
	return nil
}

// countVar registers a flag of one count at p, its help saying that it
// takes the suffixes.
func countVar(fs *pflag.FlagSet, p *int, name, usage string) {
	fs.Var((*countValue)(p), name, usage+countSuffixHelp)
}

// intList is a list flag of counts (parseCount): comma-separated,
// repeatable, with K and M suffixes; min is the smallest value accepted,
// and a value given twice is refused. The first value given replaces the
// default list.
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
		n, err := parseCount(p)
		if err != nil || n < l.min {
			return fmt.Errorf("%q: want integers from %d%s", strings.TrimSpace(p), l.min, countSuffixHelp)
		}
		// A value given twice would be swept, run or fitted twice, every
		// count and row that holds it doubled.
		if slices.Contains(l.v, n) {
			return fmt.Errorf("%d is given twice: name each value once", n)
		}
		l.v = append(l.v, n)
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
		return &usageError{Want: fmt.Sprintf("unexpected arguments %q", args), Err: errUnexpectedArgs}
	}
	return nil
}

// errUnexpectedArgs is the cause of noArgs's refusal, which dispatch
// turns into the refusal of the flag a stray word was meant for.
var errUnexpectedArgs = errors.New("unexpected arguments")
