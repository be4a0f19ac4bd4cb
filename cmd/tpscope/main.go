// Command tpscope predicts, runs and explains the performance of large
// Mixture-of-Experts LLM inference on multi-GPU boxes.
//
// Usage: tpscope <verb> [flags]. Each verb lives in its own file
// (verb_*.go) and registers itself in the verb list; main only dispatches.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// Verb is one CLI verb. Run receives the arguments after the verb name.
type Verb struct {
	Name    string // e.g. "predict", or "model show" for a two-word verb
	Short   string // one line for the verb list
	Long    string // paragraph(s) for --help
	Example string // at least one runnable example for --help
	// Hidden keeps the verb out of the verb list ('tpscope help'): a verb
	// tpscope starts itself, not one for people.
	Hidden bool
	// Flags builds the verb's flag set, bound to an options value that Run
	// reads. It is called once per invocation.
	Flags func(fs *pflag.FlagSet) func(args []string, stdout, stderr io.Writer) error
}

var verbs []*Verb

// register adds a verb to the list; called from init in each verb file.
func register(v *Verb) { verbs = append(verbs, v) }

// errUsage marks an error whose message is a usage error (exit code 2).
var errUsage = errors.New("usage")

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

// dispatch finds the verb (one or two words), parses its flags and runs it.
// It returns the process exit code: 0 ok, 1 failure, 2 usage error, 130
// interrupted.
func dispatch(args []string, stdout, stderr io.Writer) int {
	sort.Slice(verbs, func(i, j int) bool { return verbs[i].Name < verbs[j].Name })
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
	fs := pflag.NewFlagSet("tpscope "+v.Name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	run := v.Flags(fs)
	fs.Usage = func() {}
	if err := fs.Parse(joinOptionalValues(fs, rest)); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			printHelp(stdout, v, fs)
			return 0
		}
		fmt.Fprintf(stderr, "tpscope %s: %v (see 'tpscope %s --help')\n", v.Name, err, v.Name)
		return exitUsage
	}
	if err := run(fs.Args(), stdout, stderr); err != nil {
		msg := err.Error()
		if errors.Is(err, context.Canceled) && !errors.Is(err, errInterrupted) {
			// Go's "context canceled" says nothing to a user.
			msg = strings.ReplaceAll(msg, context.Canceled.Error(), "interrupted")
		}
		fmt.Fprintf(stderr, "tpscope %s: %s\n", v.Name, msg)
		switch {
		case errors.Is(err, errUsage):
			return exitUsage
		case errors.Is(err, errInterrupted), errors.Is(err, context.Canceled):
			return exitInterrupted
		}
		return exitFailed
	}
	return exitOK
}

// verbGroup returns word when it is the first word of two-word verbs
// (model, topo, trace), else "".
func verbGroup(word string) string {
	for _, v := range verbs {
		if g, _, ok := strings.Cut(v.Name, " "); ok && g == word {
			return g
		}
	}
	return ""
}

// findVerb matches the longest registered verb name against the first one
// or two arguments.
func findVerb(args []string) (*Verb, []string) {
	if len(args) >= 2 {
		two := args[0] + " " + args[1]
		for _, v := range verbs {
			if v.Name == two {
				return v, args[2:]
			}
		}
	}
	for _, v := range verbs {
		if v.Name == args[0] {
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
		if v.Hidden || group != "" && !strings.HasPrefix(v.Name, group+" ") {
			continue
		}
		fmt.Fprintf(w, "  %-18s %s\n", v.Name, v.Short)
	}
	fmt.Fprintln(w, "\nRun 'tpscope <verb> --help' for the verb's flags and an example.")
}

func printHelp(w io.Writer, v *Verb, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "Usage: tpscope %s [flags]\n\n%s\n", v.Name, v.Short)
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
// otherwise. pflag alone reads "--ep both" as --ep and a stray argument
// "both"; a word the flag does not take stays an argument ("model load
// --dense-dsa DIR").
func joinOptionalValues(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		out = append(out, a)
		if !strings.HasPrefix(a, "--") || strings.Contains(a, "=") || i+1 == len(args) {
			continue
		}
		fl := fs.Lookup(strings.TrimPrefix(a, "--"))
		if fl == nil || fl.NoOptDefVal == "" {
			continue
		}
		next := args[i+1]
		takes := false
		if fl.Value.Type() == "bool" {
			_, err := strconv.ParseBool(next)
			takes = err == nil
		} else {
			takes = slices.Contains(fl.Annotations[valuesAnnotation], next)
		}
		if takes {
			out[len(out)-1] = a + "=" + next
			i++
		}
	}
	return out
}

// usageErrorf returns an error that dispatch reports with exit code 2.
func usageErrorf(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}
