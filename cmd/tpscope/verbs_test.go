package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/tpscope/tpscope/compare"
	"github.com/tpscope/tpscope/sim"
)

// TestVerbsAreOneOrderedList: the verbs are one list, in the order 'tpscope
// help' prints them (by name), each name once; every verb has a usage line
// that starts with its name, a one-line summary and an example of itself;
// the verb tpscope starts itself is there and hidden.
func TestVerbsAreOneOrderedList(t *testing.T) {
	if len(verbs) < 20 {
		t.Fatalf("%d verbs, want the 20 people use and the hidden one", len(verbs))
	}
	var names []string
	for _, v := range verbs {
		name := v.Name()
		names = append(names, name)
		t.Run(name, func(t *testing.T) {
			if name == "" || v.UsageLine == "" || v.Short == "" || v.Example == "" || v.New == nil {
				t.Fatalf("name %q, usage %q, short %q, example %q, options %v: want all", name, v.UsageLine, v.Short, v.Example, v.New != nil)
			}
			if strings.Contains(v.Short, "\n") {
				t.Errorf("Short %q: want one line", v.Short)
			}
			if !strings.HasPrefix(v.Example, "tpscope "+name) {
				t.Errorf("example %q: want it to start with tpscope %s", v.Example, name)
			}
			for _, ex := range strings.Split(v.Example, "\n") {
				if !strings.Contains(ex, "tpscope ") {
					t.Errorf("example line %q: want a tpscope command", ex)
				}
			}
			if w, _ := findVerb(strings.Fields(name)); w != v {
				t.Errorf("findVerb(%q) finds another verb", name)
			}
		})
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	if !slices.Equal(names, sorted) || len(slices.Compact(sorted)) != len(names) {
		t.Errorf("verbs %q: want each once, in order", names)
	}
	for _, want := range []struct {
		name   string
		hidden bool
	}{{"internal-run", true}, {"completion", false}, {"predict", false}, {"model show", false}} {
		v, _ := findVerb(strings.Fields(want.name))
		if v == nil || v.Hidden != want.hidden {
			t.Errorf("verb %q: %+v, want it listed with hidden %v", want.name, v, want.hidden)
		}
	}
}

// TestVerbRunWithOptionsBuiltInCode: a verb runs from options built in
// code, with no flag parsed, and prints what the same command line prints:
// predict of tiny-mla-moe at TP 2, batch 4, context 512; compare of a run
// whose measured ops took exactly their predicted time (two steps of the
// tiny model at TP 8, batch 8, context 512 on rtxpro6000-2s: error 0).
func TestVerbRunWithOptionsBuiltInCode(t *testing.T) {
	ctx := context.Background()
	t.Run("predict", func(t *testing.T) {
		o := newPredictOptions()
		o.sc.model, o.sc.tp, o.sc.batch, o.sc.context = "tiny-mla-moe", 2, 4, 512
		o.output = formatJSON
		var out, errb bytes.Buffer
		if err := o.Run(ctx, nil, IO{Stdout: &out, Stderr: &errb}); err != nil {
			t.Fatalf("Run: %v (%s)", err, errb.String())
		}
		var pr sim.Prediction
		if err := json.Unmarshal(out.Bytes(), &pr); err != nil {
			t.Fatal(err)
		}
		if pr.Model != "tiny-mla-moe" || pr.Plan.TP != 2 || pr.Sequences != 4 || pr.Workload.Context != 512 || pr.Topology != "rtxpro6000-2s" {
			t.Errorf("predicted %s %v, %d sequences of %d tokens on %s: want tiny-mla-moe at TP 2, 4 of 512 on the default box",
				pr.Model, pr.Plan, pr.Sequences, pr.Workload.Context, pr.Topology)
		}
		code, stdout, stderr := runCLI(t, "predict", "--model", "tiny-mla-moe", "--tp", "2", "--batch", "4", "--context", "512", "--output", "json")
		if code != 0 || stdout != out.String() {
			t.Errorf("the command line (exit %d, %s) prints another prediction than the options built in code", code, stderr)
		}
		o.top = -1
		var ue *usageError
		if err := o.Run(ctx, nil, IO{Stdout: &out, Stderr: &errb}); !errors.As(err, &ue) || ue.Flag != "--top" || ue.Value != "-1" {
			t.Errorf("top -1: %v, want the usage error of --top -1", err)
		}
	})
	t.Run("compare", func(t *testing.T) {
		trace := filepath.Join(t.TempDir(), "run.json")
		writeExactRun(t, trace, 2)
		o := newCompareOptions()
		o.traces, o.output = []string{trace}, formatJSON
		var out, errb bytes.Buffer
		if err := o.Run(ctx, nil, IO{Stdout: &out, Stderr: &errb}); err != nil {
			t.Fatalf("Run: %v (%s)", err, errb.String())
		}
		var rep compare.Report
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			t.Fatal(err)
		}
		if len(rep.Scenarios) != 1 {
			t.Fatalf("%d scenarios, want the trace's one", len(rep.Scenarios))
		}
		s := rep.Scenarios[0]
		if s.Steps != 2 || s.Scenario.Plan.TP != 8 || s.Scenario.Workload.Batch != 8 || s.Scenario.Workload.Context != 512 || len(s.Ops) == 0 {
			t.Fatalf("%d steps of %v batch %d context %d, %d ops: want 2 steps of tp8 batch 8 context 512, and ops",
				s.Steps, s.Scenario.Plan, s.Scenario.Workload.Batch, s.Scenario.Workload.Context, len(s.Ops))
		}
		// Ops come largest error first; the trace's times are the
		// predictions, to the nanosecond its spans keep.
		if e := s.Ops[0].ErrPct; math.Abs(e) > 0.01 {
			t.Errorf("largest op error %g %% (%s), want 0", e, s.Ops[0].Key)
		}
		code, stdout, stderr := runCLI(t, "compare", "--trace", trace, "--output", "json")
		if code != 0 || stdout != out.String() {
			t.Errorf("the command line (exit %d, %s) prints another report than the options built in code", code, stderr)
		}
	})
}

// TestSignalContext: the one context dispatch runs every verb under ends
// on Ctrl-C and on SIGTERM, with the cause "interrupted" that exits 130;
// until then it is live. The signals are delivered through the channel
// the context subscribed, not sent to the process.
func TestSignalContext(t *testing.T) {
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			var sub chan<- os.Signal
			var subscribed []os.Signal
			notify := func(c chan<- os.Signal, sigs ...os.Signal) { sub, subscribed = c, sigs }
			ctx, stop := signalContext(context.Background(), notify)
			defer stop()
			if !slices.Equal(subscribed, []os.Signal{os.Interrupt, syscall.SIGTERM}) {
				t.Fatalf("subscribed to %v, want SIGINT and SIGTERM", subscribed)
			}
			if ctx.Err() != nil {
				t.Fatal("context ended before any signal")
			}
			sub <- sig
			<-ctx.Done()
			cause := context.Cause(ctx)
			if code, msg := exitCode(cause); code != exitInterrupted || !strings.Contains(msg, "interrupted") {
				t.Errorf("cause %v: exit %d %q, want 130 and interrupted", cause, code, msg)
			}
			// A verb that returns the context's own error exits 130 too.
			if code, msg := exitCode(ctx.Err()); code != exitInterrupted || msg != "interrupted" {
				t.Errorf("ctx.Err(): exit %d %q, want 130 and interrupted", code, msg)
			}
			// A verb with nothing to save ends at the signal.
			var errb bytes.Buffer
			exited := -1
			endOnInterrupt(ctx, "plan", &errb, func(code int) { exited = code })
			if exited != exitInterrupted || !strings.HasPrefix(errb.String(), "tpscope plan: interrupted") {
				t.Errorf("exit %d, stderr %q: want 130 and the verb interrupted", exited, errb.String())
			}
		})
	}
	// stop ends the context without a signal: not an interruption, and
	// the verb's exit code is its own.
	ctx, stop := signalContext(context.Background(), func(chan<- os.Signal, ...os.Signal) {})
	stop()
	<-ctx.Done()
	if errors.Is(context.Cause(ctx), errInterrupted) {
		t.Error("stop's end reads as an interruption")
	}
	endOnInterrupt(ctx, "plan", io.Discard, func(code int) { t.Errorf("exit %d after stop, want none", code) })
	// The verbs with work to save watch the context instead.
	for _, name := range []string{"run", "verdict", "internal-run", "collective"} {
		v, _ := findVerb(strings.Fields(name))
		if _, ok := v.New().(interruptible); !ok {
			t.Errorf("%s: not interruptible, so Ctrl-C would lose what it finished", name)
		}
	}
}

// TestCmdSourceConventions reads the CLI's source (not its tests): JSON is
// encoded in one place (writeJSON); no error text is cut with
// strings.TrimPrefix(err.Error(), ...) (a package's typed error names the
// part the CLI shows); no verb registers itself in an init function; no
// verb subscribes to signals (dispatch's one context does).
func TestCmdSourceConventions(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		n++
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if fn.Name.Name == "init" && fn.Recv == nil {
				t.Errorf("%s: func init: the verbs list in main.go is the one registry", fset.Position(fn.Pos()))
			}
			ast.Inspect(fn, func(node ast.Node) bool {
				call, ok := node.(*ast.CallExpr)
				if !ok {
					return true
				}
				pkg, fun := calledName(call)
				at := fset.Position(call.Pos())
				switch {
				case pkg == "json" && (fun == "NewEncoder" || fun == "MarshalIndent") && fn.Name.Name != "writeJSON":
					t.Errorf("%s: json.%s in %s: encode through writeJSON", at, fun, fn.Name.Name)
				case pkg == "strings" && fun == "TrimPrefix" && len(call.Args) > 0 && isErrorCall(call.Args[0]):
					t.Errorf("%s: strings.TrimPrefix of an error's text: map the package's typed error instead", at)
				case pkg == "signal" && (fun == "Notify" || fun == "NotifyContext") && fn.Name.Name != "dispatch":
					t.Errorf("%s: signal.%s in %s: verbs run under dispatch's context", at, fun, fn.Name.Name)
				}
				return true
			})
		}
	}
	if n < 20 {
		t.Fatalf("read %d files of the CLI", n)
	}
}

// calledName is the package (or receiver) and function name of a call
// pkg.Fun(...), "" when the call is not of that form.
func calledName(call *ast.CallExpr) (pkg, fun string) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", ""
	}
	if id, ok := sel.X.(*ast.Ident); ok {
		return id.Name, sel.Sel.Name
	}
	return "", sel.Sel.Name
}

// isErrorCall reports an expression x.Error().
func isErrorCall(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) != 0 {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == "Error"
}
