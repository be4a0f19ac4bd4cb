package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/tpscope/tpscope/pipeline"
)

// The verb tpscope starts itself to run a run's ranks in a fresh process
// (pipeline.Runner): it is not listed in 'tpscope help'.
func init() {
	register(&Verb{
		Name:   pipeline.ChildVerb,
		Hidden: true,
		Short:  "run one process of a run in fresh processes (started by tpscope itself)",
		Long: `Started by tpscope (verdict, run) when a run must not share a process with
an earlier one: NCCL keeps its protocol, algorithm and P2P settings for
the life of a process. Reads the run spec --spec that the parent wrote,
runs its ranks and writes the result (op and step times, span counts, the
error) to --result, also after a failure or Ctrl-C. Not for people.`,
		Example: "tpscope " + pipeline.ChildVerb + " --spec run-spec.json --result run-result.json",
		Flags: func(fs *pflag.FlagSet) func(args []string, stdout, stderr io.Writer) error {
			spec := fs.String("spec", "", "the run spec the parent wrote")
			result := fs.String("result", "", "where to write the result")
			return func(args []string, stdout, stderr io.Writer) error {
				if len(args) > 0 {
					return usageErrorf("unexpected arguments %q", args)
				}
				if *spec == "" || *result == "" {
					return usageErrorf("--spec and --result: want both files")
				}
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				if err := pipeline.RunChild(ctx, *spec, *result); err != nil {
					if ctx.Err() != nil {
						return fmt.Errorf("%w: %v", errInterrupted, err)
					}
					return err
				}
				return nil
			}
		},
	})
}
