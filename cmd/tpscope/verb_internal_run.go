package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/pipeline"
)

// internalRunVerb is the verb tpscope starts itself to run a run's ranks
// in a fresh process (pipeline.Runner): it is not listed in 'tpscope
// help'.
var internalRunVerb = &Verb{
	UsageLine: pipeline.ChildVerb + " --spec FILE --result FILE",
	Hidden:    true,
	Short:     "run one process of a run in fresh processes (started by tpscope itself)",
	Long: `Started by tpscope (verdict, run) when a run must not share a process with
an earlier one: NCCL keeps its protocol, algorithm and P2P settings for
the life of a process. Reads the run spec --spec that the parent wrote,
runs its ranks and writes the result (op and step times, span counts, the
error) to --result, also after a failure or Ctrl-C. Not for people.`,
	Example: "tpscope " + pipeline.ChildVerb + " --spec run-spec.json --result run-result.json",
	New:     func() Options { return &internalRunOptions{} },
}

// internalRunOptions are the files the parent process names.
type internalRunOptions struct {
	spec   string // the run spec the parent wrote
	result string // where to write the result
}

func (o *internalRunOptions) Bind(fs *pflag.FlagSet) {
	fs.StringVar(&o.spec, "spec", o.spec, "the run spec the parent wrote")
	fs.StringVar(&o.result, "result", o.result, "where to write the result")
}

// interruptible: Run saves what it finished when ctx ends.
func (o *internalRunOptions) interruptible() {}

func (o *internalRunOptions) Run(ctx context.Context, args []string, std IO) error {
	if err := noArgs(args); err != nil {
		return err
	}
	if o.spec == "" || o.result == "" {
		return flagError("--spec and --result", nil, "want both files")
	}
	if err := pipeline.RunChild(ctx, o.spec, o.result); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %v", errInterrupted, err)
		}
		return err
	}
	return nil
}
