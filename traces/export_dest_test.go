package traces_test

import (
	"context"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/traces"
)

// TestExportStatsNameTheDestination: the export line names where spans
// went for an empty destination too: nowhere when no OTEL_EXPORTER_OTLP_*
// endpoint is set, else that endpoint. It had read "0 spans exported to "
// (run without --trace), naming nothing.
func TestExportStatsNameTheDestination(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		t.Setenv(k, "")
	}
	ctx := context.Background()
	exp, err := traces.Setup(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := exp.Stats().String(); got != "0 spans exported: no destination (none given and no OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT set)" {
		t.Errorf("no destination: %q", got)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	exp, err = traces.Setup(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Shutdown(ctx)
	if got := exp.Stats().String(); !strings.HasPrefix(got, "0 spans exported to http://127.0.0.1:4318 (OTEL_EXPORTER_OTLP_ENDPOINT)") {
		t.Errorf("the environment's endpoint: %q", got)
	}
}
