package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var updateREADME = flag.Bool("update-readme", false, "rewrite the README's unabridged command outputs from the binary's (abridged ones, with \"...\" lines, are left as they are)")

// TestREADMEOutputs runs every README code block that starts with
// "$ tpscope ..." in the repository root and checks that its text is what
// the command prints: line by line, trailing spaces ignored, a line "..."
// standing for any number of lines (abridged output is marked so). With
// -update-readme the blocks without "..." are rewritten from the output;
// abridged ones are never rewritten, only checked (review the diff before
// committing).
func TestREADMEOutputs(t *testing.T) {
	t.Chdir("../..")
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	// Files a command writes under /tmp go to the test's own directory, and
	// its output names them as the README does.
	tmp := t.TempDir()
	run := func(args []string) (string, int, string) {
		args = slices.Clone(args)
		for i, a := range args {
			if strings.HasPrefix(a, "/tmp/") || strings.Contains(a, "=/tmp/") {
				args[i] = strings.Replace(a, "/tmp/", tmp+"/", 1)
			}
		}
		var stdout, stderr bytes.Buffer
		code := dispatch(args, &stdout, &stderr)
		return strings.ReplaceAll(stdout.String(), tmp+"/", "/tmp/"), code, strings.ReplaceAll(stderr.String(), tmp+"/", "/tmp/")
	}
	out, problems, skipped, checked := checkREADME(strings.Split(string(raw), "\n"), run, *updateREADME)
	for _, p := range problems {
		t.Error(p)
	}
	for _, s := range skipped {
		t.Logf("not checked: %s", s)
	}
	if checked == 0 {
		t.Fatal("no '$ tpscope' block in README.md")
	}
	if *updateREADME {
		if err := os.WriteFile(filepath.Clean("README.md"), []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d README commands checked", checked)
}

// checkREADME checks each "$ tpscope" block of the README's lines against
// what run prints for its command, and returns the lines with, when
// update is set, every unabridged block's output replaced by run's (an
// abridged block, with "..." lines, is kept as written: its cuts and the
// text after them were chosen by hand), the problems found (a block that
// does not match, a command that fails), and how many blocks it checked.
func checkREADME(lines []string, run func(args []string) (stdout string, code int, stderr string), update bool) (out, problems, skipped []string, checked int) {
	for i := 0; i < len(lines); i++ {
		out = append(out, lines[i])
		if !strings.HasPrefix(lines[i], "```") {
			continue
		}
		// A block may open with "# " comment lines before its command
		// (where its input lives, say); they are kept as written.
		c := i + 1
		for c < len(lines) && strings.HasPrefix(lines[c], "# ") {
			c++
		}
		if c >= len(lines) || !strings.HasPrefix(lines[c], "$ tpscope ") {
			continue
		}
		out = append(out, lines[i+1:c]...)
		i = c - 1
		cmdLine := lines[i+1]
		j := i + 2
		for j < len(lines) && !strings.HasPrefix(lines[j], "```") {
			j++
		}
		want := lines[i+2 : j]
		if len(want) > 0 && strings.HasPrefix(want[0], "$ ") {
			continue // a list of commands, not one command and its output (TestREADMECommandsParse checks them)
		}
		if writesFiles(cmdLine) {
			continue // shown for its output, but it would write into the repository
		}
		args, err := shellWords(strings.TrimPrefix(cmdLine, "$ tpscope "))
		if err != nil {
			problems = append(problems, fmt.Sprintf("README line %d: %v", i+2, err))
			continue
		}
		if p := absentOutside(args); p != "" {
			skipped = append(skipped, fmt.Sprintf("README line %d: %s is not here", i+2, p))
			continue
		}
		stdout, code, stderr := run(args)
		if code != 0 {
			problems = append(problems, fmt.Sprintf("README line %d: %s: exit %d: %s", i+2, cmdLine, code, stderr))
		}
		got := strings.Split(strings.Trim(stdout, "\n"), "\n")
		checked++
		abridged := false
		for _, w := range want {
			if strings.TrimSpace(w) == "..." {
				abridged = true
			}
		}
		if update && !abridged {
			out = append(out, cmdLine)
			out = append(out, got...)
			i = j - 1
			continue
		}
		if msg := matchLines(want, got); msg != "" {
			problems = append(problems, fmt.Sprintf("README line %d: %s: %s (go test ./cmd/tpscope -run TestREADMEOutputs -update-readme rewrites unabridged blocks; abridged ones are edited by hand)", i+2, cmdLine, msg))
		}
	}
	return out, problems, skipped, checked
}

// absentOutside returns the first argument naming a path outside the
// repository ("../...", alone or as a flag's "=" value) that does not
// exist: the README's perf-DB examples read the tables beside a checkout,
// which a clean clone does not have. "" when there is none.
func absentOutside(args []string) string {
	for _, a := range args {
		if _, v, ok := strings.Cut(a, "="); ok && strings.HasPrefix(a, "-") {
			a = v
		}
		if strings.HasPrefix(a, "../") {
			if _, err := os.Stat(a); err != nil {
				return a
			}
		}
	}
	return ""
}

// TestREADMEUpdateKeepsAbridged: -update-readme rewrites a block shown in
// full from the command's output, and leaves an abridged block (its lines
// after "..." included) and the text around both as they were.
func TestREADMEUpdateKeepsAbridged(t *testing.T) {
	readme := []string{
		"intro",
		"```",
		"$ tpscope model list",
		"stale line",
		"```",
		"between",
		"```",
		"$ tpscope topo gpus",
		"first",
		"...",
		"a line chosen by hand, after the cut",
		"```",
		"end",
	}
	outputs := map[string]string{
		"model list": "row 1\nrow 2\n",
		"topo gpus":  "first\nsecond\nthird\n",
	}
	run := func(args []string) (string, int, string) { return outputs[strings.Join(args, " ")], 0, "" }
	got, problems, _, checked := checkREADME(readme, run, true)
	want := append(append(slices.Clone(readme[:3]), "row 1", "row 2"), readme[4:]...)
	if !slices.Equal(got, want) {
		t.Errorf("rewritten README:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The abridged block's last line is not what the command prints:
	// reported, not rewritten.
	if checked != 2 || len(problems) != 1 || !strings.Contains(problems[0], "tpscope topo gpus") {
		t.Errorf("checked %d, problems %q: want 2 checked and one problem, the abridged block's", checked, problems)
	}
}

// TestREADMECommentedBlocks: a block whose command follows "# " comment
// lines is checked too (the perf-DB examples were not, and went stale),
// and one whose input lies outside the repository and is absent here is
// reported as not checked rather than failed or passed.
func TestREADMECommentedBlocks(t *testing.T) {
	readme := []string{
		"```",
		"# where the input lives",
		"$ tpscope model list",
		"stale line",
		"```",
		"```",
		"# the tables live outside this repository",
		"$ tpscope predict --perf-db ../no-such-dir/systems",
		"whatever",
		"```",
	}
	var ran []string
	run := func(args []string) (string, int, string) {
		ran = append(ran, strings.Join(args, " "))
		return "row 1\n", 0, ""
	}
	got, problems, skipped, checked := checkREADME(readme, run, false)
	if checked != 1 || len(problems) != 1 || !strings.Contains(problems[0], "README has\n  stale line") {
		t.Errorf("checked %d, problems %q: want the commented block checked and found stale", checked, problems)
	}
	if len(skipped) != 1 || !strings.Contains(skipped[0], "../no-such-dir/systems is not here") || slices.Contains(ran, "predict --perf-db ../no-such-dir/systems") {
		t.Errorf("skipped %q, ran %q: want the block with an absent input reported and not run", skipped, ran)
	}
	got, _, _, _ = checkREADME(readme, run, true)
	want := append(append(slices.Clone(readme[:3]), "row 1"), readme[4:]...)
	if !slices.Equal(got, want) {
		t.Errorf("rewritten README:\n%s\nwant the comment kept and the output replaced:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// matchLines matches want (with "..." lines skipping any output lines)
// against got; "" when they match, else where they part.
func matchLines(want, got []string) string {
	trim := func(s string) string { return strings.TrimRight(s, " \t") }
	var match func(w, g int) bool
	match = func(w, g int) bool {
		for w < len(want) {
			if strings.TrimSpace(want[w]) == "..." {
				for k := g; k <= len(got); k++ {
					if match(w+1, k) {
						return true
					}
				}
				return false
			}
			if g >= len(got) || trim(want[w]) != trim(got[g]) {
				return false
			}
			w, g = w+1, g+1
		}
		return g == len(got)
	}
	if match(0, 0) {
		return ""
	}
	for k := 0; k < len(want) && k < len(got); k++ {
		if strings.TrimSpace(want[k]) == "..." {
			return "differs after an abridged part"
		}
		if trim(want[k]) != trim(got[k]) {
			return "line " + itoa(k+1) + ": README has\n  " + want[k] + "\nthe binary prints\n  " + got[k]
		}
	}
	return "README shows " + itoa(len(want)) + " lines, the binary prints " + itoa(len(got))
}

func itoa(n int) string { return strconv.Itoa(n) }

// shellWords splits a command line as a shell would for the README's
// examples: spaces separate words; single and double quotes group.
func shellWords(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, os.ErrInvalid
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

// TestREADMECommandsParse: every "$ tpscope ..." line of the README names
// a verb and flags that parse, so an example cannot keep a flag the CLI
// dropped (shell operators and comments end the command).
func TestREADMECommandsParse(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, line := range strings.Split(string(raw), "\n") {
		rest, ok := strings.CutPrefix(line, "$ tpscope ")
		if !ok {
			continue
		}
		words, err := shellWords(rest)
		if err != nil {
			t.Fatalf("README line %d: %v", i+1, err)
		}
		for k, w := range words {
			if w == "|" || w == ">" || w == "&&" || strings.HasPrefix(w, "#") {
				words = words[:k]
				break
			}
		}
		v, args := findVerb(words)
		if v == nil {
			t.Errorf("README line %d: no verb in %q", i+1, line)
			continue
		}
		if err := bindFlags(v).Parse(args); err != nil {
			t.Errorf("README line %d: %s: %v", i+1, line, err)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no '$ tpscope' line in README.md")
	}
}

// writesFiles reports whether a command line writes a file into the
// repository (-o, --out, a file: trace destination, a --plot, a
// redirection): a path under /tmp does not count, the test redirects it
// to its own directory.
func writesFiles(cmd string) bool {
	ws := strings.Fields(cmd)
	for i, w := range ws {
		switch {
		case w == ">" || strings.HasPrefix(w, "file:"):
			return true
		case w == "-o" || w == "--out" || w == "--plot":
			if i+1 == len(ws) || !strings.HasPrefix(ws[i+1], "/tmp/") {
				return true
			}
		case strings.HasPrefix(w, "--out="):
			if !strings.HasPrefix(strings.TrimPrefix(w, "--out="), "/tmp/") {
				return true
			}
		}
	}
	return false
}
