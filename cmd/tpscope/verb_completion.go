package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/pflag"
)

var completionVerb = &Verb{
	UsageLine: "completion bash|zsh|fish",
	Short:     "print a shell completion script (bash, zsh or fish)",
	Long: `Prints a script that completes tpscope's verbs and each verb's flags (files
elsewhere). Load it in the current shell or install it:

  bash   source <(tpscope completion bash)      # or into /etc/bash_completion.d/tpscope
  zsh    source <(tpscope completion zsh)       # bash-style completion through bashcompinit
  fish   tpscope completion fish > ~/.config/fish/completions/tpscope.fish`,
	Example: "tpscope completion bash > /etc/bash_completion.d/tpscope\nsource <(tpscope completion zsh)",
	New:     func() Options { return completionOptions{} },
}

// completionOptions: completion has no flags; the shell is its argument.
type completionOptions struct{}

func (completionOptions) Bind(*pflag.FlagSet) {}

func (completionOptions) Run(ctx context.Context, args []string, std IO) error {
	if len(args) != 1 {
		return usageErrorf("completion takes one shell: bash, zsh or fish (got %q)", args)
	}
	specs := completionSpecs()
	switch args[0] {
	case "bash":
		writeBashCompletion(std.Stdout, specs, false)
	case "zsh":
		writeBashCompletion(std.Stdout, specs, true)
	case "fish":
		writeFishCompletion(std.Stdout, specs)
	default:
		return flagError("completion", quote(args[0]), "want bash, zsh or fish")
	}
	return nil
}

// completionSpec is one verb's words and flags for a completion script.
type completionSpec struct {
	words []string // "model", "show"
	short string
	flags []completionFlag
}

type completionFlag struct {
	name, usage string
	takesValue  bool
}

// completionSpecs builds every verb's flag set, as dispatch does, and lists
// the flags people type (hidden ones left out).
func completionSpecs() []completionSpec {
	var out []completionSpec
	for _, v := range verbs {
		fs := pflag.NewFlagSet(v.Name(), pflag.ContinueOnError)
		v.New().Bind(fs)
		sp := completionSpec{words: strings.Fields(v.Name()), short: v.Short}
		fs.VisitAll(func(f *pflag.Flag) {
			if f.Hidden {
				return
			}
			sp.flags = append(sp.flags, completionFlag{name: f.Name, usage: f.Usage, takesValue: f.Value.Type() != "bool"})
		})
		sp.flags = append(sp.flags, completionFlag{name: "help", usage: "show the verb's flags and an example"})
		sort.Slice(sp.flags, func(i, j int) bool { return sp.flags[i].name < sp.flags[j].name })
		out = append(out, sp)
	}
	return out
}

func writeBashCompletion(w io.Writer, specs []completionSpec, zsh bool) {
	if zsh {
		fmt.Fprintln(w, "# tpscope completion for zsh (through bashcompinit)\nautoload -U +X bashcompinit && bashcompinit")
	} else {
		fmt.Fprintln(w, "# tpscope completion for bash")
	}
	var first []string
	groups := map[string][]string{}
	for _, sp := range specs {
		if !contains(first, sp.words[0]) {
			first = append(first, sp.words[0])
		}
		if len(sp.words) == 2 {
			groups[sp.words[0]] = append(groups[sp.words[0]], sp.words[1])
		}
	}
	fmt.Fprintln(w, "_tpscope() {")
	fmt.Fprintln(w, `  local cur="${COMP_WORDS[COMP_CWORD]}" verb="${COMP_WORDS[1]}" flags=""`)
	fmt.Fprintf(w, "  if [ \"$COMP_CWORD\" -eq 1 ]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); return; fi\n", strings.Join(append(first, "help", "--version"), " "))
	fmt.Fprintln(w, `  if [ "$COMP_CWORD" -eq 2 ]; then`)
	fmt.Fprintln(w, `    case "$verb" in`)
	for _, g := range sortedKeys(groups) {
		fmt.Fprintf(w, "      %s) COMPREPLY=($(compgen -W %q -- \"$cur\")); return;;\n", g, strings.Join(groups[g], " "))
	}
	fmt.Fprintln(w, `    esac`)
	fmt.Fprintln(w, `  fi`)
	fmt.Fprintln(w, `  case "$verb ${COMP_WORDS[2]}" in`)
	// Two-word verbs first: "model show" before a one-word "model "*.
	for _, two := range []bool{true, false} {
		for _, sp := range specs {
			if (len(sp.words) == 2) != two {
				continue
			}
			var names []string
			for _, f := range sp.flags {
				names = append(names, "--"+f.name)
			}
			pat := fmt.Sprintf("%q*", sp.words[0]+" ")
			if two {
				pat = fmt.Sprintf("%q", sp.words[0]+" "+sp.words[1])
			}
			fmt.Fprintf(w, "    %s) flags=%q;;\n", pat, strings.Join(names, " "))
		}
	}
	fmt.Fprintln(w, `  esac`)
	fmt.Fprintln(w, `  if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "$flags" -- "$cur")); else COMPREPLY=($(compgen -f -- "$cur")); fi`)
	fmt.Fprintln(w, "}")
	fmt.Fprintln(w, "complete -o filenames -F _tpscope tpscope")
}

func writeFishCompletion(w io.Writer, specs []completionSpec) {
	fmt.Fprintln(w, "# tpscope completion for fish")
	var first []string
	for _, sp := range specs {
		if len(sp.words) == 1 {
			fmt.Fprintf(w, "complete -c tpscope -n __fish_use_subcommand -f -a %s -d %s\n", sp.words[0], fishQuote(sp.short))
		} else if !contains(first, sp.words[0]) {
			first = append(first, sp.words[0])
			fmt.Fprintf(w, "complete -c tpscope -n __fish_use_subcommand -f -a %s\n", sp.words[0])
		}
	}
	for _, sp := range specs {
		cond := "__fish_seen_subcommand_from " + sp.words[0]
		if len(sp.words) == 2 {
			fmt.Fprintf(w, "complete -c tpscope -n %s -f -a %s -d %s\n", fishQuote(cond+"; and not __fish_seen_subcommand_from "+sp.words[1]), sp.words[1], fishQuote(sp.short))
			cond += "; and __fish_seen_subcommand_from " + sp.words[1]
		}
		for _, f := range sp.flags {
			req := ""
			if f.takesValue {
				req = " -r"
			}
			fmt.Fprintf(w, "complete -c tpscope -n %s -l %s%s -d %s\n", fishQuote(cond), f.name, req, fishQuote(firstSentence(f.usage)))
		}
	}
}

// fishQuote quotes s for fish (single quotes; \ and ' escaped).
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// firstSentence shortens a flag's usage to its first clause for a menu.
func firstSentence(s string) string {
	if i := strings.IndexAny(s, ";("); i > 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
