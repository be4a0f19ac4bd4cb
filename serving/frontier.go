package serving

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
)

// The chart capacity is decided with: output tokens per second per GPU
// (what the box earns) against tokens per second per user (what each
// user sees while tokens stream, 1000 / median TPOT, InferenceX's
// "interactivity"), one point per load, at fixed prompt and output
// lengths. The front is the points no other beats on both axes; a TPOT
// objective is a floor on the per-user axis.

// A point's verdict against the objective (FrontierPoint.SLO).
const (
	SLOMet      = "met"
	SLOMissed   = "missed"
	SLOTooShort = "too short"
)

// FrontierPoint is one run on that plane.
type FrontierPoint struct {
	// Run indexes the runs the frontier was built from; Load is its label.
	Run  int    `json:"run"`
	Load string `json:"load"`
	// TokensPerSPerGPU is output tokens per second per GPU over the run;
	// TokensPerSPerUser is 1000 / median TPOT. TPOTTimed: some request
	// had more than one output token (Result.TPOTTimed); without, the
	// two TPOT figures are 0 here and null in JSON, empty in CSV.
	TokensPerSPerGPU  float64 `json:"tokens_per_s_per_gpu"`
	TokensPerSPerUser float64 `json:"tokens_per_s_per_user"`
	MedianTPOTMs      float64 `json:"median_tpot_ms"`
	MedianTTFTMs      float64 `json:"median_ttft_ms"`
	TPOTTimed         bool    `json:"-"`
	// SLO is "met", "missed" or "too short" (a run that never reached
	// steady state: no verdict, as the runs' table says) against the
	// run's objective, "" without one.
	SLO        string `json:"slo,omitempty"`
	Overloaded bool   `json:"overloaded,omitempty"`
	OnFront    bool   `json:"on_front"`
}

// MarshalJSON writes the point with its TPOT figures null when no
// request was timed for them (TPOTTimed).
func (p FrontierPoint) MarshalJSON() ([]byte, error) {
	type plain FrontierPoint
	out := struct {
		plain
		TokensPerSPerUser *float64 `json:"tokens_per_s_per_user"`
		MedianTPOTMs      *float64 `json:"median_tpot_ms"`
	}{plain: plain(p)}
	if p.TPOTTimed {
		out.TokensPerSPerUser, out.MedianTPOTMs = &p.TokensPerSPerUser, &p.MedianTPOTMs
	}
	return json.Marshal(out)
}

// Frontier is the runs of one load shape on the plane (runs of other
// lengths are another plane: their per-user speed is not comparable).
type Frontier struct {
	// Group names the load shape ("ISL 1024 / OSL 256").
	Group  string          `json:"group"`
	SLO    SLO             `json:"slo,omitzero"`
	Points []FrontierPoint `json:"points"`
	// Front indexes Points on the front, by tokens/s per user
	// descending: not overloaded, meeting the SLO where there is one (as
	// plan's front is of the points within its SLO), no other such point
	// higher on both axes.
	Front []int `json:"front"`
	// Chosen indexes Points: the run picked (a sweep's best, or the most
	// tokens/s per GPU within the SLO); -1 none.
	Chosen int `json:"chosen"`
}

// UserFloor is the tokens/s per user a TPOT objective requires (1000 /
// its limit), 0 without one.
func (f *Frontier) UserFloor() float64 {
	if f.SLO.TPOTMs > 0 {
		return 1000 / f.SLO.TPOTMs
	}
	return 0
}

// NewFrontier places runs on the plane. chosen indexes runs (-1 none).
// Overloaded runs are placed (marked) but are never on the front: their
// latencies describe a growing queue; nor, under an objective, are the
// runs that do not meet it: a front is what the deployment can offer,
// and a run outside the SLO (or too short to be judged) is not on offer.
func NewFrontier(runs []*Result, slo SLO, group string, chosen int) *Frontier {
	all := make([]int, len(runs))
	for i := range all {
		all[i] = i
	}
	return NewFrontierOf(runs, all, slo, group, chosen)
}

// NewFrontierOf is NewFrontier of the runs that which indexes (the runs
// of one load shape among several), in that order; each point's Run and
// chosen index runs.
func NewFrontierOf(runs []*Result, which []int, slo SLO, group string, chosen int) *Frontier {
	f := &Frontier{Group: group, SLO: slo, Chosen: -1}
	for _, i := range which {
		r := runs[i]
		p := FrontierPoint{Run: i, Load: r.Load, TokensPerSPerGPU: r.OutputTokensPerSPerGPU, MedianTTFTMs: r.TTFTMs.P50, Overloaded: r.Overloaded,
			TPOTTimed: r.TPOTTimed()}
		if p.TPOTTimed && r.TPOTMs.P50 > 0 {
			p.MedianTPOTMs, p.TokensPerSPerUser = r.TPOTMs.P50, 1000/r.TPOTMs.P50
		}
		if slo.set() {
			switch {
			case r.MeetsSLO:
				p.SLO = SLOMet
			case r.TooShort && !r.Overloaded:
				p.SLO = SLOTooShort
			default:
				p.SLO = SLOMissed
			}
		}
		if i == chosen {
			f.Chosen = len(f.Points)
		}
		f.Points = append(f.Points, p)
	}
	var cand []int
	for i, p := range f.Points {
		if !p.Overloaded && p.TokensPerSPerUser > 0 && (p.SLO == "" || p.SLO == SLOMet) {
			cand = append(cand, i)
		}
	}
	sort.SliceStable(cand, func(a, b int) bool {
		pa, pb := f.Points[cand[a]], f.Points[cand[b]]
		if pa.TokensPerSPerUser != pb.TokensPerSPerUser {
			return pa.TokensPerSPerUser > pb.TokensPerSPerUser
		}
		return pa.TokensPerSPerGPU > pb.TokensPerSPerGPU
	})
	best := math.Inf(-1)
	for _, i := range cand {
		if f.Points[i].TokensPerSPerGPU > best {
			f.Front = append(f.Front, i)
			f.Points[i].OnFront = true
			best = f.Points[i].TokensPerSPerGPU
		}
	}
	return f
}

// WriteCSV writes one row per point: group, load, the two axes, median
// TPOT and TTFT, the SLO verdict, overloaded, on the front, chosen.
func (f *Frontier) WriteCSV(w io.Writer) error { return WriteFrontiersCSV(w, []*Frontier{f}) }

// WriteFrontiersCSV writes the points of several frontiers (one per load
// shape) as one CSV, each row naming its group, as WriteCSV does.
func WriteFrontiersCSV(w io.Writer, fs []*Frontier) error {
	cw := csv.NewWriter(w)
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }
	if err := cw.Write([]string{"group", "load", "tokens_per_s_per_gpu", "tokens_per_s_per_user", "median_tpot_ms", "median_ttft_ms", "slo", "overloaded", "on_front", "chosen"}); err != nil {
		return err
	}
	for _, f := range fs {
		for i, p := range f.Points {
			user, tpot := "", "" // nothing timed: no figure
			if p.TPOTTimed {
				user, tpot = num(p.TokensPerSPerUser), num(p.MedianTPOTMs)
			}
			if err := cw.Write([]string{f.Group, p.Load, num(p.TokensPerSPerGPU), user, tpot, num(p.MedianTTFTMs),
				p.SLO, strconv.FormatBool(p.Overloaded), strconv.FormatBool(p.OnFront), strconv.FormatBool(i == f.Chosen)}); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// Capacity answers "how many GPUs (boxes) carry this many requests per
// second within the SLO": the deployment's largest rate within the SLO
// (a QPS sweep), the copies of it the target needs, and a run of one copy
// at its share of the target checking the answer.
type Capacity struct {
	TargetQPS float64 `json:"target_qps"`
	// PerCopyQPS is the largest rate one copy of the deployment (its
	// instances and GPUs) carries within the SLO.
	PerCopyQPS  float64 `json:"per_copy_qps"`
	Copies      int     `json:"copies"`
	GPUsPerCopy int     `json:"gpus_per_copy"`
	GPUs        int     `json:"gpus"`
	// BoxGPUs is the GPUs of the box the deployment is on, the whole
	// box's where the deployment uses its first GPUs (--gpus: a box is
	// bought whole; topology.Topology.BoxGPUs); Boxes how many such boxes
	// hold the copies' instances. An instance (InstanceGPUs,
	// the plan's) runs within one box, its collectives on the box's
	// fabric, so a box holds InstancesPerBox of them, whole, and GPUs
	// left over when InstanceGPUs does not divide BoxGPUs stay idle.
	BoxGPUs         int `json:"box_gpus"`
	InstanceGPUs    int `json:"instance_gpus"`
	InstancesPerBox int `json:"instances_per_box"`
	Boxes           int `json:"boxes"`
	// Check is the run of one copy at TargetQPS / Copies (it meets the
	// SLO, or Copies grew until one did).
	Check *Result `json:"check"`
}

// maxCapacityCopies bounds the copies CapacityFor tries; maxCapacityTries
// the check runs it makes, one copy more each.
const (
	maxCapacityCopies = 1 << 20
	maxCapacityTries  = 9
)

// CapacityFor sizes the deployment for qps requests per second within
// slo from a QPS sweep of t (SweepQPS): copies = ceil(qps / the sweep's
// largest rate), each copy an independent deployment taking an equal
// share of the load; the share is simulated and, should it miss the SLO
// (the verdict can dip below the sweep's bracket), one copy more is tried,
// up to 8 times. Errors: no rate met the SLO, the answer needs more
// copies than maxCapacityCopies, or no check run met the SLO.
func (s *Simulator) CapacityFor(t Traffic, slo SLO, sw *Sweep, qps float64) (*Capacity, error) {
	if !(qps > 0) || math.IsInf(qps, 0) {
		return nil, fmt.Errorf("serving: capacity for %v req/s: want a positive rate", qps)
	}
	if sw == nil || sw.Best < 0 || !(sw.MaxQPS > 0) {
		return nil, fmt.Errorf("serving: capacity for %v req/s: no rate tried meets the SLO, so no number of copies does", qps)
	}
	c := &Capacity{TargetQPS: qps, PerCopyQPS: sw.MaxQPS, GPUsPerCopy: s.GPUs(), BoxGPUs: s.d.Scenario.Topo.BoxGPUs()}
	copies := math.Ceil(qps / sw.MaxQPS)
	if copies > maxCapacityCopies {
		return nil, fmt.Errorf("serving: capacity for %v req/s: %.0f copies at %.4g req/s each: want at most %d", qps, copies, sw.MaxQPS, maxCapacityCopies)
	}
	c.Copies = int(copies)
	for try := 0; ; try++ {
		t.QPS = qps / float64(c.Copies)
		res, _, err := s.steadyRun(t, RunOptions{SLO: slo, TimelineWindows: -1})
		if err != nil {
			return nil, err
		}
		c.Check = res
		if res.MeetsSLO {
			break
		}
		if try == maxCapacityTries-1 {
			// No answer checked: the copies counted so far are a guess
			// the runs did not bear out.
			return nil, fmt.Errorf("serving: capacity for %v req/s: one copy's share missed the SLO at %d to %d copies (%.4g req/s each at the last), below the sweep's largest rate %.4g req/s: the sweep's answer does not hold at lower rates; a longer load judges both more steadily",
				qps, int(copies), c.Copies, t.QPS, sw.MaxQPS)
		}
		c.Copies++
	}
	c.GPUs = c.Copies * c.GPUsPerCopy
	// Instances are packed whole: GPUs / BoxGPUs would split one
	// across boxes (four 6-GPU copies on 8-GPU boxes need four boxes,
	// not the three that hold their 24 GPUs). New has checked that the
	// instances fit the box.
	c.InstanceGPUs = s.d.Scenario.Plan.World()
	c.InstancesPerBox = c.BoxGPUs / c.InstanceGPUs
	instances := c.Copies * s.inst
	c.Boxes = (instances + c.InstancesPerBox - 1) / c.InstancesPerBox
	return c, nil
}
