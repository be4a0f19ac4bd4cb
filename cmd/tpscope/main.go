// Command tpscope predicts, runs and explains the performance of large
// Mixture-of-Experts LLM inference on multi-GPU boxes.
//
// Usage: tpscope <verb> [flags]. Each verb is a value in the verbs list
// below, its options and Run in its own file (verb_*.go); main only
// dispatches.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode"

	"github.com/spf13/pflag"
)

// Verb is one CLI verb (as cmd/go's base.Command): its usage, help and
// example, and the options it runs with.
type Verb struct {
	// UsageLine is the verb's words and what follows them: "predict
	// [flags]", "model load DIR_OR_FILE [flags]". Its leading words of
	// lower-case letters and dashes, each starting with a letter, are the
	// verb's name (Name).
	UsageLine string
	Short     string // one line for the verb list
	Long      string // paragraph(s) for --help
	Example   string // at least one runnable example for --help
	// Hidden keeps the verb out of the verb list ('tpscope help'): a verb
	// tpscope starts itself, not one for people.
	Hidden bool
	// New returns the verb's options at their defaults. dispatch binds
	// them to a fresh flag set, parses the command line into them and
	// calls Run; a test may build them in code and call Run directly.
	New func() Options
}

// Options are one verb's options, each flag a field, and the verb's work.
type Options interface {
	// Bind registers the verb's flags on fs, each bound to its field
	// with the field's present value as the default (so the defaults are
	// the ones New set).
	Bind(fs *pflag.FlagSet)
	// Run does the verb's work with args, the words left after the
	// flags. ctx ends on Ctrl-C or SIGTERM; results go to std.Stdout,
	// progress and notes to std.Stderr. A bad command line is a
	// *usageError (exit 2), found before any work.
	Run(ctx context.Context, args []string, std IO) error
}

// interruptible is implemented by the options of a verb that has work to
// save or a run to end cleanly when it is interrupted (run exports the
// steps it finished, verdict writes the entries it finished, internal-run
// its result, collective --measure stops its ranks): their Run watches ctx
// and returns soon after it ends, saying what it finished. Any other verb
// ends at the signal itself (endOnInterrupt), exit code 130, as it would
// without a handler: its work has nothing to save.
type interruptible interface{ interruptible() }

// IO is where a verb writes.
type IO struct {
	Stdout io.Writer // results, in the --output format
	Stderr io.Writer // progress, warnings and notes
}

// verbs is every verb, in the order 'tpscope help' lists them.
var verbs = []*Verb{
	adviseVerb,
	calibrateVerb,
	collectiveVerb,
	compareVerb,
	completionVerb,
	internalRunVerb,
	modelListVerb,
	modelLoadVerb,
	modelShowVerb,
	planVerb,
	predictVerb,
	reportVerb,
	runVerb,
	scheduleVerb,
	simulateVerb,
	topoDiscoverVerb,
	topoGPUsVerb,
	topoShowVerb,
	traceReadVerb,
	verdictVerb,
	versionVerb,
}

// Name is the verb's words: "predict", "model show".
func (v *Verb) Name() string {
	var words []string
	for _, w := range strings.Fields(v.UsageLine) {
		if w[0] < 'a' || w[0] > 'z' || strings.Trim(w, "abcdefghijklmnopqrstuvwxyz-") != "" {
			break
		}
		words = append(words, w)
	}
	return strings.Join(words, " ")
}

// errInterrupted marks a verb stopped by Ctrl-C or SIGTERM after it said
// what it finished (exit code 130, as a shell reports SIGINT).
var errInterrupted = errors.New("interrupted")

// Exit codes.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitInterrupted = 130
)

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// interruptSignals end a verb's context: Ctrl-C and SIGTERM (what a
// terminal, a service manager or a parent process sends), the same for
// every verb.
var interruptSignals = []os.Signal{os.Interrupt, syscall.SIGTERM}

// signalContext returns a context that ends when one of interruptSignals
// arrives, its cause errInterrupted (saying SIGTERM for that one). notify subscribes a
// channel to signals (signal.Notify; a test passes its own, so that it can
// deliver a signal without sending one to the process). stop unsubscribes
// and ends the context: after it, a signal does what it does by default.
func signalContext(parent context.Context, notify func(chan<- os.Signal, ...os.Signal)) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	notify(ch, interruptSignals...)
	go func() {
		select {
		case s := <-ch:
			cause := errInterrupted // Ctrl-C: the user knows
			if s == syscall.SIGTERM {
				cause = fmt.Errorf("%w by SIGTERM", errInterrupted)
			}
			cancel(cause)
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(context.Canceled)
	}
}

// endOnInterrupt waits for ctx to end and, when a signal ended it, says
// so and exits with code 130 (exit is os.Exit, a parameter for tests). A
// verb that is not interruptible runs under it: Ctrl-C stops it at once,
// as the signal's default action would.
func endOnInterrupt(ctx context.Context, name string, stderr io.Writer, exit func(int)) {
	<-ctx.Done()
	if cause := context.Cause(ctx); errors.Is(cause, errInterrupted) {
		fmt.Fprintf(stderr, "tpscope %s: %v\n", name, cause)
		exit(exitInterrupted)
	}
}

// dispatch finds the verb (one or two words), parses its flags and runs it.
// It returns the process exit code: 0 ok, 1 failure, 2 usage error, 130
// interrupted.
func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-V") {
		args = append([]string{"version"}, args[1:]...)
	}
	if len(args) > 1 && args[0] == "help" {
		// "tpscope help VERB" is "tpscope VERB --help".
		args = append(append([]string(nil), args[1:]...), "--help")
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printVerbs(stdout, "")
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	v, rest := findVerb(args)
	if v == nil {
		if group := verbGroup(args[0]); group != "" {
			// "tpscope model" alone, or with --help: the group's verbs.
			printVerbs(stdout, group)
			if len(args) > 1 && (args[1] == "-h" || args[1] == "--help") {
				return exitOK
			}
			if len(args) > 1 {
				fmt.Fprintf(stderr, "tpscope %s: unknown verb %q; the %s verbs are listed above\n", group, args[1], group)
			}
			return exitUsage
		}
		fmt.Fprintf(stderr, "tpscope: unknown verb %q; run 'tpscope help' for the list\n", strings.Join(args[:min(2, len(args))], " "))
		return exitUsage
	}
	name := v.Name()
	fs := pflag.NewFlagSet("tpscope "+name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	opts := v.New()
	opts.Bind(fs)
	refuseRepeated(fs)
	refuseNonFinite(fs)
	refuseEmpty(fs, name)
	refuseSeparatorsOnly(fs)
	joined, strays := joinOptionalValues(fs, rest)
	if err := fs.Parse(joined); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			printHelp(stdout, v, fs)
			return exitOK
		}
		fmt.Fprintf(stderr, "tpscope %s: %s (see 'tpscope %s --help')\n", name, oneLine(err.Error()), name)
		return exitUsage
	}
	ctx, stop := signalContext(context.Background(), signal.Notify)
	defer stop()
	if _, ok := opts.(interruptible); !ok {
		go endOnInterrupt(ctx, name, stderr, os.Exit)
	}
	err := opts.Run(ctx, fs.Args(), IO{Stdout: stdout, Stderr: stderr})
	if err == nil {
		return exitOK
	}
	if errors.Is(err, errUnexpectedArgs) {
		// The verb takes no argument: a word left after an optional-value
		// flag was meant as its value ("plan --ep maybe").
		if fl := strays[fs.Args()[0]]; fl != nil {
			err = optionalValueError(fl, fs.Args()[0])
		}
	}
	code, msg := exitCode(err)
	fmt.Fprintf(stderr, "tpscope %s: %s\n", name, oneLine(msg))
	return code
}

// oneLine keeps an error message on its one line: a value the user gave
// is echoed in it, and a flag value or file name with a newline or
// another control character in it ('--topo $'0\n\n:”) printed an error
// of several lines. Each such character is shown as Go escapes it.
func oneLine(msg string) string {
	if !strings.ContainsFunc(msg, unicode.IsControl) {
		return msg
	}
	var b strings.Builder
	for _, r := range msg {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// exitCode is an error's exit code and the line that reports it: a usage
// error (2) says so once; an interruption (130) says "interrupted" where
// Go would say "context canceled"; anything else is a failure (1).
func exitCode(err error) (int, string) {
	var ue *usageError
	msg := err.Error()
	switch {
	case errors.As(err, &ue):
		return exitUsage, "usage: " + msg
	case errors.Is(err, errInterrupted):
		return exitInterrupted, msg
	case errors.Is(err, context.Canceled):
		// Go's "context canceled" says nothing to a user.
		return exitInterrupted, strings.ReplaceAll(msg, context.Canceled.Error(), "interrupted")
	}
	return exitFailed, msg
}

// verbGroup returns word when it is the first word of two-word verbs
// (model, topo, trace), else "".
func verbGroup(word string) string {
	for _, v := range verbs {
		if g, _, ok := strings.Cut(v.Name(), " "); ok && g == word {
			return g
		}
	}
	return ""
}

// findVerb matches the longest verb name against the first one or two
// arguments.
func findVerb(args []string) (*Verb, []string) {
	if len(args) >= 2 {
		two := args[0] + " " + args[1]
		for _, v := range verbs {
			if v.Name() == two {
				return v, args[2:]
			}
		}
	}
	for _, v := range verbs {
		if v.Name() == args[0] {
			return v, args[1:]
		}
	}
	return nil, nil
}

// printVerbs lists the verbs, or only a group's ("model") when group is
// set.
func printVerbs(w io.Writer, group string) {
	if group == "" {
		fmt.Fprintln(w, "tpscope — predict, run and explain MoE LLM inference on multi-GPU boxes")
		fmt.Fprintln(w, "\nUsage: tpscope <verb> [flags]\n\nVerbs:")
	} else {
		fmt.Fprintf(w, "Usage: tpscope %s <verb> [flags]\n\nVerbs:\n", group)
	}
	for _, v := range verbs {
		if v.Hidden || group != "" && !strings.HasPrefix(v.Name(), group+" ") {
			continue
		}
		fmt.Fprintf(w, "  %-18s %s\n", v.Name(), v.Short)
	}
	fmt.Fprintln(w, "\nRun 'tpscope <verb> --help' for the verb's flags and an example.")
}

func printHelp(w io.Writer, v *Verb, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "Usage: tpscope %s\n\n%s\n", v.UsageLine, v.Short)
	if v.Long != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(v.Long))
	}
	fmt.Fprintf(w, "\nFlags:\n%s", fs.FlagUsages())
	fmt.Fprintf(w, "\nExample:\n  %s\n", strings.ReplaceAll(strings.TrimSpace(v.Example), "\n", "\n  "))
}

// valuesAnnotation lists, on a flag whose value is optional (pflag's
// NoOptDefVal), the values it takes besides its bare form, so that
// "--ep both" reads as "--ep=both" (joinOptionalValues).
const valuesAnnotation = "tpscope-values"

// joinOptionalValues rewrites "--flag VALUE" as "--flag=VALUE" for flags
// whose value is optional (a bare --flag means NoOptDefVal), where VALUE is
// one the flag takes: a boolean for a bool flag, one of valuesAnnotation's
// otherwise, or a comma list of such values ("--ep true,false"), which
// the flag then refuses naming itself rather than the verb finding a stray
// argument. pflag alone reads "--ep both" as --ep and a stray argument
// "both"; a word the flag does not take stays an argument ("model load
// --dense-dsa DIR"), and strays maps it to the flag before it, so that a
// verb that takes no argument can name that flag ("plan --ep maybe").
func joinOptionalValues(fs *pflag.FlagSet, args []string) (joined []string, strays map[string]*pflag.Flag) {
	out := make([]string, 0, len(args))
	strays = map[string]*pflag.Flag{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...), strays
		}
		out = append(out, a)
		if !strings.HasPrefix(a, "--") || strings.Contains(a, "=") || i+1 == len(args) {
			continue
		}
		fl := fs.Lookup(a[len("--"):])
		if fl == nil || fl.NoOptDefVal == "" {
			continue
		}
		next := args[i+1]
		takes := next != ""
		for _, v := range strings.Split(next, ",") {
			if fl.Value.Type() == "bool" {
				_, err := strconv.ParseBool(v)
				takes = takes && err == nil
			} else {
				takes = takes && slices.Contains(fl.Annotations[valuesAnnotation], v)
			}
		}
		if takes {
			out[len(out)-1] = a + "=" + next
			i++
		} else if _, seen := strays[next]; !seen && !strings.HasPrefix(next, "-") {
			strays[next] = fl
		}
	}
	return out, strays
}

// optionalValueError is the usage error of word given after a flag whose
// value is optional, to a verb that takes no argument: the word was meant
// as the flag's value, so the message names the flag and what it takes.
func optionalValueError(fl *pflag.Flag, word string) error {
	values := fl.Annotations[valuesAnnotation]
	if fl.Value.Type() == "bool" {
		values = []string{"true", "false"}
	}
	want := "want " + values[len(values)-1]
	switch n := len(values); {
	case n == 2:
		want = fmt.Sprintf("want %s or %s", values[0], values[1])
	case n > 2:
		want = fmt.Sprintf("want one of %s or %s", strings.Join(values[:n-1], ", "), values[n-1])
	}
	return flagError("--"+fl.Name, quote(word), "%s (a bare --%s means %s)", want, fl.Name, fl.NoOptDefVal)
}
