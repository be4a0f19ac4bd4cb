package serving

import (
	"math"
	"slices"
)

// Stats summarizes a latency over requests (or tokens): mean and the 50th,
// 90th and 99th percentiles, linearly interpolated between order
// statistics (numpy's default, as vllm bench serve reports them).
type Stats struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
}

// Percentile returns the p-th percentile (0..100) of the statistic: P50,
// P90 or P99 when p is one of them, else the nearest of the three (a run
// keeps only these).
func (s Stats) Percentile(p float64) float64 {
	switch {
	case p <= 70:
		return s.P50
	case p <= 95:
		return s.P90
	}
	return s.P99
}

// percentile of sorted values (numpy linear interpolation).
func percentile(sorted []float64, p float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	k := float64(n-1) * p / 100
	f := int(math.Floor(k))
	c := min(f+1, n-1)
	return sorted[f] + (k-float64(f))*(sorted[c]-sorted[f])
}

func statsOf(v []float64) Stats {
	if len(v) == 0 {
		return Stats{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return Stats{Mean: sum / float64(len(s)), P50: percentile(s, 50), P90: percentile(s, 90), P99: percentile(s, 99)}
}

// logHist counts positive values in bins of 1/128 of an octave (the
// float's exponent and its top 7 mantissa bits), for percentiles of many
// samples (inter-token latencies) in constant memory: a percentile is its
// bin's middle, within 1/256 = 0.39 % of the exact order statistic; the
// mean is exact.
type logHist struct {
	counts []int64
	n      int64
	sum    float64
}

const (
	histMantBits = 7   // 2^7 = 128 bins per octave
	histMinExp   = -30 // values below 2^-30 share the first bin
	histOctaves  = 64
)

func histBin(v float64) int {
	if !(v > 0) {
		return 0
	}
	b := math.Float64bits(v)
	exp := int(b>>52&0x7ff) - 1023
	i := (exp-histMinExp)<<histMantBits | int(b>>(52-histMantBits)&(1<<histMantBits-1))
	return max(0, min(i, histOctaves<<histMantBits-1))
}

func (h *logHist) add(v float64) {
	if h.counts == nil {
		h.counts = make([]int64, histOctaves<<histMantBits)
	}
	h.counts[histBin(v)]++
	h.n++
	h.sum += v
}

// percentile returns the middle of the bin holding the p-th percentile's
// sample (nearest rank).
func (h *logHist) percentile(p float64) float64 {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(p / 100 * float64(h.n)))
	rank = max(1, min(rank, h.n))
	var c int64
	for i, k := range h.counts {
		c += k
		if c >= rank {
			exp := i>>histMantBits + histMinExp
			frac := float64(i&(1<<histMantBits-1)) + 0.5
			return math.Ldexp(1+frac/(1<<histMantBits), exp)
		}
	}
	return 0
}

func (h *logHist) stats() Stats {
	if h.n == 0 {
		return Stats{}
	}
	return Stats{Mean: h.sum / float64(h.n), P50: h.percentile(50), P90: h.percentile(90), P99: h.percentile(99)}
}

// stepRecord is one engine step of one instance, for the timeline.
type stepRecord struct {
	startS, endS     float64
	usedBlocks       int32 // KV blocks held over the instance's schedulers during the step
	running, waiting int32
	preempted        int32
	sampled          int32 // output tokens sampled at its end
	decode, prefill  int32 // decode tokens and prefill tokens in the step (all DP ranks)
}

// Window is one slice of the run's timeline: rates and time-weighted
// means over [StartS, EndS).
type Window struct {
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	// OutputTokensPerS: tokens sampled in the window per second.
	OutputTokensPerS float64 `json:"output_tokens_per_s"`
	// Running and Waiting: mean requests running and queued (over every
	// scheduler), time-weighted over the window.
	Running float64 `json:"running"`
	Waiting float64 `json:"waiting"`
	// KVUseFrac: mean fraction of all KV blocks held; PeakKVUseFrac the
	// largest of any step in the window.
	KVUseFrac     float64 `json:"kv_use_frac"`
	PeakKVUseFrac float64 `json:"peak_kv_use_frac"`
	// Preemptions in the window's steps.
	Preemptions int `json:"preemptions"`
	// BusyFrac: fraction of the window the engines were stepping.
	BusyFrac float64 `json:"busy_frac"`
}

// timeline cuts [0, endS) into n windows and spreads each step's
// figures over the windows it overlaps (rates by overlap, counts by the
// window holding the step's end). blocks is the KV pool of all
// schedulers; instances the number of engines (busy fraction is per
// engine, averaged).
func timeline(steps []stepRecord, endS float64, n, blocks, instances int) []Window {
	if n <= 0 || endS <= 0 {
		return nil
	}
	w := make([]Window, n)
	width := endS / float64(n)
	for i := range w {
		w[i].StartS, w[i].EndS = float64(i)*width, float64(i+1)*width
	}
	win := func(t float64) int { return max(0, min(n-1, int(t/width))) }
	for _, s := range steps {
		if s.endS <= s.startS {
			continue
		}
		frac := float64(s.usedBlocks) / float64(max(1, blocks))
		for i := win(s.startS); i <= win(s.endS) && i < n; i++ {
			lo, hi := math.Max(s.startS, w[i].StartS), math.Min(s.endS, w[i].EndS)
			if hi <= lo {
				continue
			}
			d := hi - lo
			w[i].Running += float64(s.running) * d
			w[i].Waiting += float64(s.waiting) * d
			w[i].KVUseFrac += frac * d
			w[i].BusyFrac += d
			w[i].PeakKVUseFrac = math.Max(w[i].PeakKVUseFrac, frac)
		}
		e := win(math.Nextafter(s.endS, 0))
		w[e].OutputTokensPerS += float64(s.sampled)
		w[e].Preemptions += int(s.preempted)
	}
	for i := range w {
		w[i].Running /= width
		w[i].Waiting /= width
		w[i].KVUseFrac /= width
		w[i].BusyFrac /= width * float64(max(1, instances))
		w[i].OutputTokensPerS /= width
	}
	return w
}
