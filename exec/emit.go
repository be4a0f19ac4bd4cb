package exec

import (
	"context"
	"math"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/traces/schema"
)

// staticAttrs are the attributes of op's span that do not change between
// steps: the schema's static set, the prediction and the schedule scale.
func (r *runner) staticAttrs(op *model.Op) []attribute.KeyValue {
	kv := schema.OpAttributes(op)
	if us, ok := r.cfg.predictedUs[op.ID]; ok {
		kv = append(kv, schema.AttrPredictedUs.Float64(us))
	}
	if r.cfg.scheduleScale != 1 {
		kv = append(kv, AttrScheduleScale.Float64(r.cfg.scheduleScale))
	}
	return slices.Clip(kv)
}

// timingName is the AttrTiming value: device events only when every rank
// times on the device.
func (r *runner) timingName() string {
	for _, rs := range r.ranks {
		if rs.timer == nil {
			return schema.TimingHostClock
		}
	}
	return schema.TimingDeviceEvents
}

// Span emission. Each rank creates its own rank span and op spans on its
// own goroutine right after its EndStep (so OpAnnotator and StepAnnotator
// are called where the contract says, before the Rank is closed), under
// the step's root span, which the first rank to emit starts with the time
// the step was released. The root is ended, with the step's attributes and
// the latest op end, between steps while every rank waits (stepDone), or
// by Run after an interruption.

// rootFor returns the context of step's root span, starting it if this is
// the first rank to emit for the step.
func (r *runner) rootFor(step int) (context.Context, trace.Span) {
	r.stepMu.Lock()
	defer r.stepMu.Unlock()
	if r.rootStep != step {
		r.rootCtx, r.root = r.tracer.Start(context.Background(), schema.SpanStep, trace.WithNewRoot(),
			trace.WithTimestamp(r.at(r.stepRelease)))
		r.rootStep = step
	}
	return r.rootCtx, r.root
}

// emitRank records rs's op times of step and creates its spans: all ops of
// a complete step; of an interrupted one the finished ops and the failed op
// (status Error). It runs on rs's goroutine.
func (r *runner) emitRank(rs *rankState, step int, interrupted bool) {
	n := r.spannedOps(rs, interrupted)
	rs.spanned = n > 0
	if n == 0 {
		return
	}
	rs.spanStart, rs.spanEnd = int64(math.MaxInt64), int64(math.MinInt64)
	for i := range n {
		rs.spanStart = min(rs.spanStart, rs.start[i])
		rs.spanEnd = max(rs.spanEnd, rs.end[i])
		rs.opUs[i] = float64(rs.end[i]-rs.start[i]) / 1e3
		rs.launchUs[i] = float64(rs.launchEnd[i]-rs.launchStart[i]) / 1e3
		if rs.timer == nil && rs.annot != nil && markedSkipped(rs.annot.OpAttributes(i)) {
			// The host clock timed the call that skipped it, not the
			// op: not run, as a DeviceTimer's zero OpTime says.
			rs.opUs[i] = 0
		}
	}
	ctx, root := r.rootFor(step)
	if !root.IsRecording() {
		return // a no-op provider: skip the span work
	}
	timing := schema.AttrTiming.String(r.timing)
	rctx, rspan := r.tracer.Start(ctx, schema.RankSpanName(rs.rank), trace.WithTimestamp(r.at(rs.spanStart)))
	kv := append(rs.scratch[:0], schema.AttrRank.Int(rs.rank), AttrStepUs.Float64(float64(rs.spanEnd-rs.spanStart)/1e3))
	if rs.replayNs > 0 {
		kv = append(kv, AttrReplayUs.Float64(float64(rs.replayNs)/1e3))
	}
	if rs.stepAnn != nil {
		kv = append(kv, rs.stepAnn.StepAttributes(step)...)
	}
	rspan.SetAttributes(kv...)
	rs.scratch = kv[:0]
	if r.cfg.spanExporter != nil && r.bulkOpSpans(rs, rspan, n, timing) {
		n = 0 // built and queued for the exporter
	}
	for i := range n {
		_, sp := r.tracer.Start(rctx, rs.ops[i].ID, trace.WithTimestamp(r.at(rs.start[i])))
		kv = r.appendOpAttrs(kv[:0], rs, i, timing)
		if rs.annot != nil {
			kv = append(kv, rs.annot.OpAttributes(i)...)
		}
		sp.SetAttributes(kv...)
		if i == rs.failed {
			sp.SetStatus(codes.Error, "op failed")
		}
		sp.End(trace.WithTimestamp(r.at(rs.end[i])))
		rs.scratch = kv[:0]
	}
	if interrupted {
		rspan.SetStatus(codes.Error, "step interrupted")
	}
	rspan.End(trace.WithTimestamp(r.at(rs.spanEnd)))
}

// markedSkipped reports whether an op's annotations mark it skipped
// (schema.AttrSkipped true).
func markedSkipped(kv []attribute.KeyValue) bool {
	for _, a := range kv {
		if a.Key == schema.AttrSkipped && a.Value.Type() == attribute.BOOL && a.Value.AsBool() {
			return true
		}
	}
	return false
}

// at converts a recorded time (ns since r.anchor) to wall-clock time.
func (r *runner) at(ns int64) time.Time { return r.anchor.Add(time.Duration(ns)) }

// appendOpAttrs appends op i's span attributes before the backend's
// annotations, the same on both span paths: the static set, the measured
// times of the step and timing (the AttrTiming attribute).
func (r *runner) appendOpAttrs(kv []attribute.KeyValue, rs *rankState, i int, timing attribute.KeyValue) []attribute.KeyValue {
	kv = append(kv, rs.static[i]...)
	return append(kv,
		schema.AttrDeviceUs.Float64(rs.opUs[i]),
		schema.AttrHostLaunchUs.Float64(rs.launchUs[i]),
		schema.AttrHostLaunchUnixNano.Int64(r.at(rs.launchStart[i]).UnixNano()),
		timing,
	)
}

// endStep ends step's root span and, for a complete step (interrupted ==
// nil), records it in the Result. It runs while no rank goroutine emits:
// under the step barrier, or after every rank goroutine has returned.
func (r *runner) endStep(step int, interrupted error) {
	r.stepMu.Lock()
	root, started := r.root, r.rootStep == step
	r.root, r.rootCtx, r.rootStep = nil, nil, -1
	r.stepMu.Unlock()
	if !started {
		return
	}
	stepStart, stepEnd := int64(math.MaxInt64), int64(math.MinInt64)
	for _, rs := range r.ranks {
		if rs.spanned {
			stepStart, stepEnd = min(stepStart, rs.spanStart), max(stepEnd, rs.spanEnd)
		}
	}
	stepUs := float64(stepEnd-stepStart) / 1e3
	if interrupted == nil {
		r.res.addStep(r.ranks, stepUs)
	}
	root.SetAttributes(r.stepAttrs(step-r.warmup, stepUs)...)
	if interrupted != nil {
		root.SetStatus(codes.Error, interrupted.Error())
	}
	root.End(trace.WithTimestamp(r.at(stepEnd)))
}

// spannedOps is the number of leading ops of rs that get spans: all of a
// complete step; the finished ones (plus the failed one) of an interrupted step.
func (r *runner) spannedOps(rs *rankState, interrupted bool) int {
	if !rs.opened {
		return 0
	}
	if !interrupted {
		return len(rs.ops)
	}
	if rs.timer == nil {
		// Host clock: runStep copies the launch times only at the end of
		// a complete step; the finished ops of this one have theirs here.
		copy(rs.start[:rs.done], rs.launchStart[:rs.done])
		copy(rs.end[:rs.done], rs.launchEnd[:rs.done])
	}
	if rs.failed >= 0 {
		// The failed op has no device time; its span is its host launch.
		rs.start[rs.failed], rs.end[rs.failed] = rs.launchStart[rs.failed], rs.launchEnd[rs.failed]
		return rs.failed + 1
	}
	return rs.done
}

func (r *runner) stepAttrs(measured int, stepUs float64) []attribute.KeyValue {
	if r.stepStatic == nil {
		s := r.sched
		opts := slices.Clone(r.cfg.optimizations)
		if r.cfg.graphs && !r.graphs {
			// Graphs were asked for and the backend ran eagerly: the names
			// say what was measured.
			opts = slices.DeleteFunc(opts, func(n string) bool { return n == schema.OptionCUDAGraphs })
		}
		slices.Sort(opts)
		r.stepStatic = []attribute.KeyValue{
			schema.AttrModel.String(s.Model),
			schema.AttrTopology.String(r.cfg.topology),
			schema.AttrPlan.String(s.Plan.String()),
			schema.AttrWorkload.String(s.Workload.String()),
			schema.AttrOptions.StringSlice(opts),
			schema.AttrRanks.Int(len(s.Ranks)),
			schema.AttrBackend.String(r.backend.Name()),
			AttrWarmup.Int(r.warmup),
		}
		if r.cfg.scenarioJSON != "" {
			r.stepStatic = append(r.stepStatic, schema.AttrScenario.String(r.cfg.scenarioJSON))
		}
		if r.cfg.graphs {
			r.stepStatic = append(r.stepStatic, AttrGraphs.Bool(r.graphs))
		}
		if r.cfg.scheduleScale != 1 {
			r.stepStatic = append(r.stepStatic, AttrScheduleScale.Float64(r.cfg.scheduleScale))
		}
		r.stepStatic = append(r.stepStatic, r.cfg.stepAttrs...)
	}
	kv := append(r.scratch[:0], r.stepStatic...)
	return append(kv, schema.AttrStep.Int(measured), AttrStepUs.Float64(stepUs))
}
