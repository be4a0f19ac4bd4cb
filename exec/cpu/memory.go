package cpu

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/model"
)

// EstimateMemory says how much RAM running the schedule's local ranks
// allocates and how much the machine has available. The backend keeps
// every weight and cache value as a float32 (4 bytes) whatever its dtype:
// per op, the weight values (WeightBytes / the weight dtype's bytes per
// value) and the cache values (KVBytes / the KV dtype's), and per
// collective op the rank's own send, receive and working buffers (fabric.go),
// over the local ranks. Activation buffers come on top and are left out, so
// the figure is a lower bound. Free memory is /proc/meminfo's MemAvailable.
func (b *Backend) EstimateMemory(s *model.Schedule, localRanks []int) (exec.MemoryEstimate, error) {
	est := exec.MemoryEstimate{Where: "RAM"}
	if len(localRanks) == 0 {
		localRanks = make([]int, len(s.Ranks))
		for i := range localRanks {
			localRanks[i] = i
		}
	}
	const f32 = 4
	var values float64
	for _, r := range localRanks {
		if r < 0 || r >= len(s.Ranks) {
			return est, fmt.Errorf("local rank %d: the schedule has ranks 0..%d", r, len(s.Ranks)-1)
		}
		for i := range s.Ranks[r] {
			op := &s.Ranks[r][i]
			if bpv := op.WeightDtype.BytesPerValue(); bpv > 0 {
				values += op.WeightBytes / bpv
			}
			if bpv := op.KVDtype.BytesPerValue(); bpv > 0 && op.Kind == model.KindAttention {
				values += op.KVBytes / bpv
			}
			if op.IsCollective() && len(op.Group) > 0 && op.CommBytes > 0 {
				values += float64(collectiveValues(op))
			}
		}
	}
	est.NeedBytes = int64(values * f32)
	free, err := memAvailable()
	if err != nil {
		return est, err
	}
	est.FreeBytes = free
	return est, nil
}

// memAvailable reads MemAvailable from /proc/meminfo, in bytes.
func memAvailable() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("free memory: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "MemAvailable" {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 2 && fields[1] == "kB" {
			n, err := strconv.ParseInt(fields[0], 10, 64)
			if err == nil {
				return n << 10, nil
			}
		}
		return 0, fmt.Errorf("free memory: /proc/meminfo MemAvailable %q: want \"N kB\"", strings.TrimSpace(v))
	}
	return 0, fmt.Errorf("free memory: /proc/meminfo has no MemAvailable line")
}

// collectiveValues is the float32 values one member of op's group
// allocates for it (collective.register): send and receive buffers, and
// reduce-scatter's working copy.
func collectiveValues(op *model.Op) int64 {
	n := int64(len(op.Group))
	elems := (op.CommBytes + 3) / 4
	chunk := max(1, (elems+n-1)/n)
	elems = chunk * n
	switch op.Collective {
	case model.AllGather:
		return chunk + elems
	case model.ReduceScatter:
		return elems + chunk + elems
	}
	return 2 * elems
}
