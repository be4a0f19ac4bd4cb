package main

import (
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/pflag"
)

func init() {
	register(&Verb{
		Name:    "version",
		Short:   "print tpscope's version and Go runtime",
		Example: "tpscope version",
		Flags: func(fs *pflag.FlagSet) func([]string, io.Writer, io.Writer) error {
			return func(args []string, stdout, _ io.Writer) error {
				if len(args) > 0 {
					return usageErrorf("version takes no arguments, got %q", args)
				}
				fmt.Fprintf(stdout, "tpscope 0.1.0 (%s %s/%s)\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
				return nil
			}
		},
	})
}
