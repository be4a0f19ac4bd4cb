package exec

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/traces"
)

// staticAttrs are the attributes of op's span that do not change between
// steps: the schema's static set, the prediction and the schedule scale.
func (r *runner) staticAttrs(op *model.Op) []attribute.KeyValue {
	kv := traces.OpAttributes(op)
	if us, ok := r.cfg.predictedUs[op.ID]; ok {
		kv = append(kv, traces.AttrPredictedUs.Float64(us))
	}
	if r.cfg.scheduleScale != 1 {
		kv = append(kv, AttrScheduleScale.Float64(r.cfg.scheduleScale))
	}
	return slices.Clip(kv)
}

func (r *runner) timingName() string {
	for _, rs := range r.ranks {
		if rs.timer == nil {
			return traces.TimingHostClock
		}
	}
	return traces.TimingDeviceEvents
}

// emitStep creates the spans of step (an index over warm-up + measured
// steps) from the times the ranks recorded, and records a complete step in
// the Result. interrupted is nil for a complete step; otherwise the step was
// cut short, only finished ops (and a failed one, with status Error) get
// spans, the root span carries the error and the Result is not updated.
// It runs while every rank goroutine waits (barrier action) or after they
// have all returned.
func (r *runner) emitStep(step int, interrupted error) {
	measured := step - r.warmup
	var stepStart, stepEnd int64 = math.MaxInt64, math.MinInt64
	found := false
	for _, rs := range r.ranks {
		n := r.spannedOps(rs, interrupted != nil)
		for i := range n {
			stepStart = min(stepStart, rs.start[i])
			stepEnd = max(stepEnd, rs.end[i])
			found = true
		}
	}
	if !found {
		return
	}
	stepUs := float64(stepEnd-stepStart) / 1e3
	at := func(ns int64) trace.SpanStartEventOption { return trace.WithTimestamp(r.anchor.Add(time.Duration(ns))) }
	timing := r.timingName()

	ctx, root := r.tracer.Start(context.Background(), traces.SpanStep, trace.WithNewRoot(), at(stepStart))
	root.SetAttributes(r.stepAttrs(measured, stepUs)...)

	var rec *stepRecord
	if interrupted == nil {
		rec = r.res.newStep(r.ranks, stepUs)
	}
	for _, rs := range r.ranks {
		n := r.spannedOps(rs, interrupted != nil)
		if n == 0 {
			continue
		}
		rStart, rEnd := int64(math.MaxInt64), int64(math.MinInt64)
		for i := range n {
			rStart = min(rStart, rs.start[i])
			rEnd = max(rEnd, rs.end[i])
		}
		rctx, rspan := r.tracer.Start(ctx, traces.RankSpanName(rs.rank), at(rStart))
		kv := append(r.scratch[:0], traces.AttrRank.Int(rs.rank), AttrStepUs.Float64(float64(rEnd-rStart)/1e3))
		if rs.replayNs > 0 {
			kv = append(kv, AttrReplayUs.Float64(float64(rs.replayNs)/1e3))
		}
		if rs.stepAnn != nil {
			kv = append(kv, rs.stepAnn.StepAttributes(step)...)
		}
		rspan.SetAttributes(kv...)
		recording := rspan.IsRecording()
		for i := range n {
			devUs := float64(rs.end[i]-rs.start[i]) / 1e3
			launchUs := float64(rs.launchEnd[i]-rs.launchStart[i]) / 1e3
			if rec != nil {
				rec.opUs[rs.k][i] = devUs
				rec.launchUs[rs.k][i] = launchUs
			}
			if !recording {
				continue // a no-op provider: skip the attribute work
			}
			_, sp := r.tracer.Start(rctx, rs.ops[i].ID, at(rs.start[i]))
			kv = append(kv[:0], rs.static[i]...)
			kv = append(kv,
				traces.AttrDeviceUs.Float64(devUs),
				traces.AttrHostLaunchUs.Float64(launchUs),
				traces.AttrHostLaunchUnixNano.Int64(r.anchor.Add(time.Duration(rs.launchStart[i])).UnixNano()),
				traces.AttrTiming.String(timing),
			)
			if rs.annot != nil {
				kv = append(kv, rs.annot.OpAttributes(i)...)
			}
			sp.SetAttributes(kv...)
			if i == rs.failed {
				sp.SetStatus(codes.Error, "op failed")
			}
			sp.End(trace.WithTimestamp(r.anchor.Add(time.Duration(rs.end[i]))))
		}
		r.scratch = kv[:0]
		rspan.End(trace.WithTimestamp(r.anchor.Add(time.Duration(rEnd))))
	}
	if interrupted != nil {
		root.SetStatus(codes.Error, interrupted.Error())
	}
	root.End(trace.WithTimestamp(r.anchor.Add(time.Duration(stepEnd))))
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
		slices.Sort(opts)
		r.stepStatic = []attribute.KeyValue{
			traces.AttrModel.String(s.Model),
			traces.AttrTopology.String(r.cfg.topology),
			traces.AttrPlan.String(PlanString(s.Plan)),
			traces.AttrWorkload.String(WorkloadString(s.Workload)),
			traces.AttrOptions.StringSlice(opts),
			traces.AttrRanks.Int(len(s.Ranks)),
			traces.AttrBackend.String(r.backend.Name()),
			AttrWarmup.Int(r.warmup),
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
	return append(kv, traces.AttrStep.Int(measured), AttrStepUs.Float64(stepUs))
}

// PlanString formats a plan as "tp=4" with ",ep", ",dp=2", ",dcp=2" when
// set, unless model.Plan has its own String method.
func PlanString(p model.Plan) string {
	if s, ok := any(p).(fmt.Stringer); ok {
		return s.String()
	}
	s := fmt.Sprintf("tp=%d", max(p.TP, 1))
	if p.EP {
		s += ",ep"
	}
	if p.DP > 1 {
		s += fmt.Sprintf(",dp=%d", p.DP)
	}
	if p.DCP > 1 {
		s += fmt.Sprintf(",dcp=%d", p.DCP)
	}
	return s
}

// WorkloadString formats a workload as "decode batch=32 ctx=4096" (+
// " spec=N", " kv=fp8" when set), unless model.Workload has a String method.
func WorkloadString(w model.Workload) string {
	if s, ok := any(w).(fmt.Stringer); ok {
		return s.String()
	}
	s := fmt.Sprintf("%s batch=%d ctx=%d", w.Phase, w.Batch, w.Context)
	if w.SpecTokens > 0 {
		s += fmt.Sprintf(" spec=%d", w.SpecTokens)
	}
	if w.KVDtype != "" {
		s += " kv=" + string(w.KVDtype)
	}
	return s
}
