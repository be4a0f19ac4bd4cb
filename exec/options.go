package exec

import (
	"errors"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Option configures Run.
type Option func(*config)

// config is Run's validated configuration; see Run for the defaults.
type config struct {
	tp             trace.TracerProvider
	steps          int
	warmup         int
	predictedUs    map[string]float64
	topology       string
	scenarioJSON   string
	optimizations  []string
	stepAttrs      []attribute.KeyValue
	localRanks     []int
	graphs         bool
	cleanupTimeout time.Duration
	scheduleScale  float64
	progress       func(done, total int)
	spanExporter   sdktrace.SpanExporter
	fault          *Fault        // WithFault
	watchdog       time.Duration // WithWatchdog
}

// Defaults of Run's options.
const (
	DefaultSteps          = 10
	DefaultWarmup         = 2
	DefaultCleanupTimeout = 30 * time.Second
)

func newConfig(opts []Option) (*config, error) {
	c := &config{
		steps:          DefaultSteps,
		warmup:         DefaultWarmup,
		cleanupTimeout: DefaultCleanupTimeout,
		scheduleScale:  1,
	}
	for _, o := range opts {
		o(c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	var errs []error
	if c.steps < 1 {
		errs = append(errs, fmt.Errorf("steps = %d: want at least 1", c.steps))
	}
	if c.warmup < 0 {
		errs = append(errs, fmt.Errorf("warmup = %d: want 0 or more", c.warmup))
	}
	if c.cleanupTimeout <= 0 {
		errs = append(errs, fmt.Errorf("cleanup timeout = %v: want > 0", c.cleanupTimeout))
	}
	if c.watchdog < 0 {
		errs = append(errs, fmt.Errorf("watchdog = %v: want > 0, or 0 for the backend's default", c.watchdog))
	}
	if !(c.scheduleScale >= 1) || math.IsInf(c.scheduleScale, 0) {
		errs = append(errs, fmt.Errorf("schedule scale = %v: want a finite factor >= 1", c.scheduleScale))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("exec options: %w", errors.Join(errs...))
	}
	return c, nil
}

// WithTracerProvider sets where spans go. Default: otel.GetTracerProvider().
// If tp has a method ForceFlush(context.Context) error (the SDK's
// *trace.TracerProvider does), Run calls it after every measured step and
// ends the run with its error, so an exporter failure stops the run. See
// WithSpanExporter for the cheaper path for op spans.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithSteps sets the number of measured steps (default DefaultSteps, >= 1).
func WithSteps(n int) Option { return func(c *config) { c.steps = n } }

// WithWarmup sets the number of unmeasured warm-up steps run first (default
// DefaultWarmup, >= 0). Warm-up steps emit no spans.
func WithWarmup(n int) Option { return func(c *config) { c.warmup = n } }

// WithPredictedUs gives sim's predicted duration per op ID in microseconds;
// each op span of a listed ID gets schema.AttrPredictedUs. The map is read,
// never written, and must not change during Run. Default: none.
func WithPredictedUs(byOpID map[string]float64) Option {
	return func(c *config) { c.predictedUs = byOpID }
}

// WithScenario records the scenario the schedule was built for on every
// step span: scenarioJSON, the machine-readable value from the caller's
// codec (sim.Scenario's JSON), as schema.AttrScenario, so a comparison
// re-predicts exactly what ran; and its short forms for people reading
// spans in Jaeger: the topology's name (schema.AttrTopology) and the
// option names (schema.AttrOptions, sorted). When graphs were requested
// and the backend ran eagerly, schema.OptionCUDAGraphs is dropped from the
// names (the JSON is left as given; schema.AttrGraphs says what ran).
// Default: none.
func WithScenario(scenarioJSON, topology string, options []string) Option {
	return func(c *config) {
		c.scenarioJSON, c.topology, c.optimizations = scenarioJSON, topology, append([]string(nil), options...)
	}
}

// WithStepAttributes adds attributes to every step span. Default: none.
func WithStepAttributes(kv ...attribute.KeyValue) Option {
	return func(c *config) { c.stepAttrs = append(c.stepAttrs, kv...) }
}

// WithLocalRanks restricts the run to these ranks of the schedule (one
// process of a multi-process launch). Default: every rank of the schedule.
func WithLocalRanks(ranks ...int) Option {
	return func(c *config) { c.localRanks = append([]int(nil), ranks...) }
}

// WithGraphs asks for CUDA-graph mode: capture one step after warm-up and
// replay it for the measured steps (see GraphCapturer). Backends without
// the capability run eagerly and the step span says so. Default: false.
func WithGraphs(on bool) Option { return func(c *config) { c.graphs = on } }

// WithCleanupTimeout bounds the wait for ranks to drain and close after a
// cancellation or failure. Default DefaultCleanupTimeout.
func WithCleanupTimeout(d time.Duration) Option {
	return func(c *config) { c.cleanupTimeout = d }
}

// WithScheduleScale records that the schedule being run was shrunk by this
// factor from the real model (see exec/model.ScaleArch); it goes on every
// step and op span as AttrScheduleScale. The measured times are not
// multiplied by it: the prediction must be made for the same scaled
// schedule. Default 1 (not written).
func WithScheduleScale(f float64) Option { return func(c *config) { c.scheduleScale = f } }

// WithProgress calls fn(done, total) after each step (warm-up included),
// for a progress bar. It runs between steps while every rank waits, on one
// of the rank goroutines, so it must return quickly. Default: none.
func WithProgress(fn func(done, total int)) Option { return func(c *config) { c.progress = fn } }

// WithSpanExporter makes the runner build the op spans itself and hand each
// measured step's op spans to exp in one ExportSpans call between steps (and
// after an interruption, before the flush), instead of creating them through
// the tracer provider's SDK tracer, which costs several microseconds per span
// (BenchmarkRunnerOverhead). exp must be the exporter chain behind the
// provider given to WithTracerProvider (e.g. traces.Exporter.SpanExporter):
// the op spans take the provider's resource and instrumentation scope from
// the rank span, which with the step span still goes through the provider.
// An ExportSpans error ends the run like a flush error. Run does not shut exp
// down. Used only when the provider is the OpenTelemetry SDK's (its rank span
// is an sdktrace.ReadOnlySpan); otherwise, and by default (nil), every span
// goes through the provider.
func WithSpanExporter(exp sdktrace.SpanExporter) Option {
	return func(c *config) { c.spanExporter = exp }
}
