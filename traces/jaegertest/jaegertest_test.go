package jaegertest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigMatchesMakefile keeps the test configuration and the one
// `make jaeger` uses (tools/jaeger/local.yaml) in step: same settings, the
// standard ports (OTLP 4317/4318, query 16686/16685, health 13133).
func TestConfigMatchesMakefile(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Skip(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "tools", "jaeger", "local.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			lines = append(lines, l)
		}
	}
	if got, want := strings.Join(lines, "\n"), Config(13133, 16686, 16685, 4317, 4318); got != want {
		t.Errorf("tools/jaeger/local.yaml differs from Config:\n%s\nwant\n%s", got, want)
	}
}
