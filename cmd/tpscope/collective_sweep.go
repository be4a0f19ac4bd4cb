package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
)

// parseCollective accepts the names model.Collective uses and the
// nccl-tests / NCCL spellings: "allreduce", "all_reduce", "all-reduce",
// "AllReduce", "ar"; the same for allgather (ag), reducescatter (rs) and
// alltoall (a2a).
func parseCollective(s string) (model.Collective, error) {
	k := strings.ToLower(strings.NewReplacer("_", "", "-", "", " ", "").Replace(s))
	switch k {
	case "allreduce", "ar":
		return model.AllReduce, nil
	case "allgather", "ag":
		return model.AllGather, nil
	case "reducescatter", "rs":
		return model.ReduceScatter, nil
	case "alltoall", "a2a":
		return model.AllToAll, nil
	}
	return "", fmt.Errorf("collective %q: want allreduce, allgather, reducescatter or alltoall", s)
}

// parseBytes parses a size like "512", "64K", "1M", "2G", "8KiB", "1MB":
// K/M/G are binary (1024) multiples, as nccl-tests' -b/-e flags use them.
func parseBytes(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if t != "" {
		switch t[len(t)-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:len(t)-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) || v*float64(mult) > 1<<50 {
		return 0, fmt.Errorf("size %q: want a byte count like 512, 64K, 1M, 2G", s)
	}
	return int64(v * float64(mult)), nil
}

// parseSizeRange parses "MIN:MAX" (doubling from MIN up to MAX, like
// nccl-tests -b MIN -e MAX -f 2) or a single size.
func parseSizeRange(s string) ([]int64, error) {
	lo, hi, isRange := strings.Cut(s, ":")
	a, err := parseBytes(lo)
	if err != nil {
		return nil, err
	}
	if !isRange {
		if a == 0 {
			return nil, fmt.Errorf("size %q: must be > 0", s)
		}
		return []int64{a}, nil
	}
	b, err := parseBytes(hi)
	if err != nil {
		return nil, err
	}
	if a <= 0 || b < a {
		return nil, fmt.Errorf("sizes %q: want MIN:MAX with 0 < MIN <= MAX", s)
	}
	var out []int64
	for v := a; v <= b; v *= 2 {
		out = append(out, v)
	}
	return out, nil
}

// collectiveRow is one size of a collective sweep (nccl-tests columns;
// the JSON of tpscope collective's rows).
type collectiveRow struct {
	Bytes      int64   `json:"bytes"`
	TimeUs     float64 `json:"time_us"`
	AlgBWGBps  float64 `json:"algbw_GBps"`
	BusBWGBps  float64 `json:"busbw_GBps"`
	Algo       string  `json:"algo"`
	Proto      string  `json:"proto"`
	LatencyUs  float64 `json:"latency_us"`
	NCCLTimeUs float64 `json:"nccl_time_us,omitempty"`
	SHMHops    int     `json:"shm_hops"`
	Calibrated bool    `json:"calibrated"`
	Bottleneck string  `json:"bottleneck,omitempty"`
	// Channels is how many channels NCCL's ring runs (NCCL's own count,
	// or the one --nccl-min-channels / --nccl-max-channels set); absent
	// for a custom all-reduce.
	Channels int `json:"channels,omitempty"`
}

// sweepCollective predicts op over group with m for every size, as
// nccl-tests reports a size range. custom selects a custom all-reduce
// ("oneshot", "twoshot"; "" = NCCL); it returns an error when the custom
// all-reduce is not available on the group.
func sweepCollective(m *sim.CollectiveModel, op model.Collective, group []int, sizes []int64, custom string) ([]collectiveRow, error) {
	if err := m.ValidateGroup(group); err != nil {
		return nil, err
	}
	if custom != "" && op != model.AllReduce {
		return nil, fmt.Errorf("custom %s all-reduce: the collective is %s", custom, op)
	}
	rows := make([]collectiveRow, 0, len(sizes))
	for _, b := range sizes {
		var c sim.CollectiveCost
		switch custom {
		case "":
			c = m.Cost(op, group, b)
		case "oneshot", "twoshot":
			var ok bool
			if c, ok = m.CustomAllReduce(group, b, custom == "twoshot"); !ok {
				return nil, fmt.Errorf("custom %s all-reduce needs P2P between every pair of the group (driver P2P, NCCL_P2P_DISABLE unset)", custom)
			}
		case "multimem":
			var ok bool
			if c, ok = m.MultimemAllReduce(group, b); !ok {
				return nil, fmt.Errorf("the multimem all-reduce needs GPUs that share an NVSwitch (multicast memory)")
			}
		default:
			return nil, fmt.Errorf("custom all-reduce %q: want oneshot, twoshot or multimem", custom)
		}
		r := collectiveRow{Bytes: b, TimeUs: c.TimeUs, AlgBWGBps: c.AlgBWGBps, BusBWGBps: c.BusBWGBps, Algo: c.Algo, Proto: c.Proto,
			LatencyUs: c.LatencyUs, SHMHops: c.SHMHops, Calibrated: c.Calibrated, Bottleneck: c.Bottleneck}
		if custom == "" {
			r.Channels = c.Channels
		}
		if !math.IsNaN(c.NCCLTimeUs) {
			r.NCCLTimeUs = c.NCCLTimeUs
		}
		rows = append(rows, r)
	}
	return rows, nil
}
