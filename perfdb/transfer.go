package perfdb

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// Transfer prices a GPU the database has no tables of (the target) from
// other systems' tables (the donors), the way aiconfigurator's
// perf_data_reuse_manifest.yaml reuses one system's rows for another:
// for each op, the first donor with rows of the kernel the target's
// engine runs there (its profile's choice for the target's family),
// else the first donor with any rows for it, and the measurement moved
// to the target by the datasheets, each part by what sets it:
//
//	rest = max(0, us_donor - n x small_donor)
//	bw   = min(rest, SOL_donor / eff_donor)
//	us_target = n x small_target + bw x SOL_target / SOL_donor + (rest - bw) x small_target / small_donor
//
// n is the number of kernels the measurement covers (its ops), small the
// device's graph-launched small-kernel cost (elementwise floor + graph
// node gap), whose launch-bound time does not scale with bandwidth or
// FLOPs, SOL the covered ops' speed-of-light time on each device (max of
// FLOPs at the dtype's dense peak and bytes at the datasheet bandwidth,
// per op, summed), and eff the donor's attainable fraction of its
// datasheet bandwidth (the catalog's MemEfficiency, 0.8: aiconfigurator's
// mem_bw_empirical_scaling_factor too). A kernel moves at most its bytes
// at the attainable bandwidth; what it takes beyond that (a one-token
// kernel's dependent loads, syncs and tails) is latency, which moves
// with the device's small-kernel cost, not with its bandwidth. Scaling
// the whole rest by the SOL ratio, as before 2026-12-06, put the H100
// SXM 16 % over its own tables at one request from the H200's (x1.43)
// and the L40S 46 % over from the RTX PRO 6000's (x2.1); split, 4 and 11
// % (sim TestUnseenGPUTables, TestLeaveOneSystemOut). Collectives do not
// transfer (another box's fabric): they keep the priors. Safe for
// concurrent use as its donors are.
type Transfer struct {
	donors []transferDonor
	name   string
}

type transferDonor struct {
	src *Source
	dev *topology.Device
}

// NewTransfer prepares a Transfer from db's systems donors (in order of
// preference, nearest first), each read with cfg (its Profile is the
// target's engine; System and Device are set per donor). A donor whose
// GPU the catalog does not know is an error.
func NewTransfer(db *DB, donors []string, cfg SourceConfig) (*Transfer, error) {
	if len(donors) == 0 {
		return nil, errorf("transfer: no donor system")
	}
	t := &Transfer{name: "transfer from " + strings.Join(donors, ", ")}
	for _, name := range donors {
		c := cfg
		c.System, c.Device = name, ""
		src, err := NewSource(db, c)
		if err != nil {
			return nil, err
		}
		devName, err := src.sys.device()
		if err != nil {
			return nil, err
		}
		g, ok := topology.MatchNVMLName(devName)
		if !ok {
			return nil, errorf("transfer: system %s's GPU %q is not in tpscope's catalog", name, devName)
		}
		d := g.Device
		t.donors = append(t.donors, transferDonor{src: src, dev: &d})
	}
	return t, nil
}

// Name implements sim.CostSource.
func (t *Transfer) Name() string { return t.name }

// Donors lists db's systems with tables whose GPU tpscope's catalog
// knows, leaving out exclude, nearest first to a GPU of datasheet memory
// bandwidth bwGBps (by |log| of the ratio of their systems' bandwidths,
// then by name): the donor order of a Transfer to that GPU. A system
// whose spec or tables cannot be read is left out; none left is an
// error.
func Donors(db *DB, bwGBps float64, exclude ...string) ([]string, error) {
	if !(bwGBps > 0) {
		return nil, errorf("transfer: the target GPU's memory bandwidth is %g GB/s; want a datasheet figure", bwGBps)
	}
	names, err := db.Systems()
	if err != nil {
		return nil, err
	}
	type donor struct {
		name string
		dist float64
	}
	var ds []donor
	for _, n := range names {
		if slices.Contains(exclude, n) {
			continue
		}
		sys, err := db.System(n)
		if err != nil || !(sys.Spec.MemBWGBps > 0) {
			continue
		}
		dev, err := sys.device()
		if err != nil {
			continue
		}
		if _, ok := topology.MatchNVMLName(dev); !ok {
			continue
		}
		ds = append(ds, donor{n, math.Abs(math.Log(sys.Spec.MemBWGBps / bwGBps))})
	}
	if len(ds) == 0 {
		return nil, errorf("transfer: no system of %s has tables of a GPU tpscope's catalog knows", db.root)
	}
	sort.SliceStable(ds, func(i, j int) bool {
		if ds[i].dist != ds[j].dist {
			return ds[i].dist < ds[j].dist
		}
		return ds[i].name < ds[j].name
	})
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.name
	}
	return out, nil
}

// CheckRouting is Source.CheckRouting for every donor: the schedule's
// routing must be one each donor's MoE tables measured.
func (t *Transfer) CheckRouting(r model.Routing) error {
	for _, d := range t.donors {
		if err := d.src.CheckRouting(r); err != nil {
			return err
		}
	}
	return nil
}

// OpCost implements sim.CostSource: the first donor whose rows are the
// target kernel's, else the first with any, moved to dev. A row the
// source raised to its bytes at the DRAM bandwidth (an L2-warm row,
// dramFloor) measured no kernel time at that size, so it does not count
// as the target kernel's: on the H200's DeepSeek-V3 FP8 experts at one
// token the L40S's raised Triton row moved as pure bandwidth gave 13 us
// against the H200's 59 (the H200's one-request median 18.8 %, 12.2 %
// without such rows; the RTX PRO 6000's worst point then came from the
// H200's Triton row, +47 %, TestLeaveOneSystemOut).
func (t *Transfer) OpCost(ops []model.Op, mods model.Modules, i int, dev *topology.Device) (sim.Measured, bool) {
	a := archOf(dev)
	for pass := 0; pass < 2; pass++ {
		for _, d := range t.donors {
			m, _, ok := d.src.priceRaw(ops, mods, i, a, d.dev)
			if !ok {
				continue
			}
			m, warm := dramFloor(m, ops, d.dev)
			if pass == 0 && (warm || strings.Contains(m.Where, "stand")) {
				continue
			}
			n := 0.0
			solD, solT := 0.0, 0.0
			for j := m.First; j <= m.Last; j++ {
				if ops[j].IsCollective() {
					continue
				}
				n++
				solD += solUs(&ops[j], d.dev)
				solT += solUs(&ops[j], dev)
			}
			if !(solD > 0) || !(solT > 0) {
				continue
			}
			fixedD, fixedT := n*smallKernelUs(d.dev), n*smallKernelUs(dev)
			rest := math.Max(0, m.Us-fixedD)
			eff := d.dev.MemEfficiency
			if !(eff > 0 && eff <= 1) {
				eff = 1
			}
			bw := math.Min(rest, solD/eff)
			us := fixedT + bw*solT/solD + (rest-bw)*smallKernelUs(dev)/smallKernelUs(d.dev)
			m.Where = "transfer " + m.Where + ", moved from " + d.dev.Name + ": " + strconv.FormatFloat(bw, 'f', 1, 64) + " us of bandwidth by x" + strconv.FormatFloat(solT/solD, 'f', 2, 64) +
				", " + strconv.FormatFloat(rest-bw+fixedD, 'f', 1, 64) + " us of launches and latency by x" + strconv.FormatFloat(smallKernelUs(dev)/smallKernelUs(d.dev), 'f', 2, 64)
			m.Us = us
			m, _ = dramFloor(m, ops, dev)
			return m, true
		}
	}
	return sim.Measured{}, false
}

// solUs is an op's speed-of-light time on dev: max(FLOPs at the dense
// peak of its weights' compute dtype, bf16 where the GPU lacks it; bytes
// at the datasheet bandwidth).
func solUs(op *model.Op, dev *topology.Device) float64 {
	cd := string(op.WeightDtype.ComputeDtype())
	if op.WeightDtype == "" {
		cd = "bf16"
	}
	peak, ok := dev.TFLOPS(cd)
	if !ok || peak <= 0 {
		peak, _ = dev.TFLOPS("bf16")
	}
	c := 0.0
	if peak > 0 {
		c = op.FLOPs / (peak * 1e6)
	}
	m := 0.0
	if dev.MemBWGBps > 0 {
		m = (op.BytesRead + op.BytesWritten) / (dev.MemBWGBps * 1e3)
	}
	return math.Max(c, m)
}
