package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/pflag"
)

var versionVerb = &Verb{
	UsageLine: "version",
	Short:     "print tpscope's version, commit and Go runtime (also --version, -V)",
	Example:   "tpscope version\ntpscope --version",
	New:       func() Options { return versionOptions{} },
}

// versionOptions: version has no flags.
type versionOptions struct{}

func (versionOptions) Bind(*pflag.FlagSet) {}

func (versionOptions) Run(ctx context.Context, args []string, std IO) error {
	if len(args) > 0 {
		return usageErrorf("version takes no arguments, got %q", args)
	}
	fmt.Fprintf(std.Stdout, "tpscope 0.1.0 (%s%s %s/%s)\n", buildCommit(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}

// commit is the commit the binary was built from, set by make build
// (-ldflags -X main.commit=...) where go build's own VCS stamp is off.
var commit string

// buildCommit is "commit ABCDEF123456, " (with "+dirty" for a build of a
// changed tree) from make build's stamp or the VCS stamp go build records,
// or "" without either (go run, -buildvcs=false).
func buildCommit() string {
	if commit != "" {
		return "commit " + commit + ", "
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if rev == "" {
		return ""
	}
	return "commit " + rev[:min(12, len(rev))] + dirty + ", "
}
