package calibrate

import (
	"math"
	"testing"

	"github.com/tpscope/tpscope/calibrate/nccltests"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// TestCalibrateHoldOut fits on the even-indexed sizes of a hand-made
// 8-GPU PCIe all_reduce_perf log (testdata/nccltests: a flat floor of
// about 34 us for small messages, busbw near 21 GB/s for large ones, +-2.5 %
// noise) and predicts the odd-indexed sizes within 10 %.
func TestCalibrateHoldOut(t *testing.T) {
	lg, err := nccltests.ParseFile("testdata/nccltests/all_reduce_perf_8x_pcie.txt")
	if err != nil {
		t.Fatal(err)
	}
	if lg.Ranks != 8 || lg.Op != "allreduce" {
		t.Fatalf("log: %d ranks, op %q; want 8, allreduce", lg.Ranks, lg.Op)
	}
	tp := collTopo(t, "rtxpro6000-2s", 0)
	var fitOn []CollectiveSample
	for i, r := range lg.Rows {
		if i%2 == 0 {
			for _, tm := range r.Times() {
				fitOn = append(fitOn, CollectiveSample{Bytes: r.Bytes, TimeUs: tm})
			}
		}
	}
	fit, err := Collective(tp, fitOn, CollectiveOptions{Op: model.AllReduce, Ranks: lg.Ranks, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if !(fit.RMSErrFrac < fit.PriorRMSErrFrac) {
		t.Errorf("fit RMS rel err %.3f not below the prior's %.3f", fit.RMSErrFrac, fit.PriorRMSErrFrac)
	}
	m, err := sim.NewCollectiveModel(fit.Topology, ncclenv.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range lg.Rows {
		if i%2 == 0 {
			continue
		}
		ts := r.Times()
		meas := (ts[0] + ts[len(ts)-1]) / 2
		got := m.Cost(model.AllReduce, nil, r.Bytes)
		if !got.Calibrated {
			t.Errorf("%d B: %s/%s not calibrated", r.Bytes, got.Algo, got.Proto)
		}
		if rel := math.Abs(got.TimeUs/meas - 1); rel > 0.10 {
			t.Errorf("%d B: predicted %.2f us (%s/%s), measured %.2f: %.1f %% off", r.Bytes, got.TimeUs, got.Algo, got.Proto, meas, 100*rel)
		}
	}
	// A second calibration under another P2P level keeps the first.
	fit2, err := Collective(fit.Topology, fitOn, CollectiveOptions{Op: model.AllReduce, Ranks: 8, NCCL: ncclenv.Settings{P2PLevel: "SYS"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(fit2.Topology.Calibration.Collectives), len(fit.Params)+len(fit2.Params); got != want {
		t.Errorf("merged calibration has %d entries, want %d", got, want)
	}
}

// TestCalibrateRecoversConstants: samples generated from known parameters
// (Ring LL forced, 8 ranks: time = 10 + 14 x 2 + b / (1000 x 12 x 8/14))
// come back. baseLat and hwLat are not separately identifiable from one
// rank count, so the test checks their sum at 8 ranks and the bandwidth.
func TestCalibrateRecoversConstants(t *testing.T) {
	tp := collTopo(t, "rtxpro6000-2s", 0)
	var ss []CollectiveSample
	for b := int64(1024); b <= 64<<20; b *= 2 {
		ss = append(ss, CollectiveSample{Bytes: b, TimeUs: 38 + float64(b)/(1000*12*8.0/14)})
	}
	fit, err := Collective(tp, ss, CollectiveOptions{NCCL: ncclenv.Settings{Proto: "LL", Algo: "Ring"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(fit.Params) != 1 {
		t.Fatalf("%d fitted pairs, want 1 (Ring/LL forced)", len(fit.Params))
	}
	p := fit.Params[0]
	if lat := p.BaseLatUs + 14*p.HwLatUs; math.Abs(lat/38-1) > 0.01 {
		t.Errorf("fitted latency %.3f us, want 38", lat)
	}
	if math.Abs(p.BusBWGBps/12-1) > 0.01 {
		t.Errorf("fitted busbw %.3f GB/s, want 12", p.BusBWGBps)
	}
	if p.P2PLevel != "PXB" || p.Ranks != 8 {
		t.Errorf("provenance: p2p level %q ranks %d, want PXB 8", p.P2PLevel, p.Ranks)
	}
}

// TestCalibrateRecordsChannels: a measurement run with
// NCCL_MIN_NCHANNELS=8 (Ring LL forced, P2P SYS, 8 ranks of the
// dual-socket box: time = 38 + b / (1000 x 20 x 8/14)) records the 8
// channels its ring ran, so the fitted 20 GB/s prices 8 channels as
// measured and NCCL's own 2 by the model's ratio: min(45, 2 x 11.1) /
// min(45, 8 x 11.1) = 22.2 / 45, 9.87 GB/s. A fit without the settings
// records none (0: NCCL's own count).
func TestCalibrateRecordsChannels(t *testing.T) {
	tp := collTopo(t, "rtxpro6000-2s", 0)
	var ss []CollectiveSample
	for b := int64(1024); b <= 64<<20; b *= 2 {
		ss = append(ss, CollectiveSample{Bytes: b, TimeUs: 38 + float64(b)/(1000*20*8.0/14)})
	}
	o := ncclenv.Settings{Proto: "LL", Algo: "Ring", P2PLevel: "SYS", MinChannels: 8}
	fit, err := Collective(tp, ss, CollectiveOptions{NCCL: o})
	if err != nil {
		t.Fatal(err)
	}
	if len(fit.Params) != 1 || fit.Params[0].Channels != 8 {
		t.Fatalf("fitted %+v, want one entry recording 8 channels", fit.Params)
	}
	const b = 64 << 20
	for _, c := range []struct {
		channels int
		busGBps  float64
	}{{8, 20}, {0, 20 * 22.2 / 45}} {
		po := o
		po.MinChannels = c.channels
		m, err := sim.NewCollectiveModel(fit.Topology, po)
		if err != nil {
			t.Fatal(err)
		}
		got := m.Cost(model.AllReduce, nil, b)
		want := 38 + b/(1000*c.busGBps*8/14)
		if !got.Calibrated || math.Abs(got.TimeUs/want-1) > 0.01 {
			t.Errorf("priced at min channels %d: %.1f us (calibrated %v), want %.1f (busbw %.2f GB/s)", c.channels, got.TimeUs, got.Calibrated, want, c.busGBps)
		}
	}
	o.MinChannels = 0
	if fit, err := Collective(tp, ss, CollectiveOptions{NCCL: o}); err != nil || fit.Params[0].Channels != 0 {
		t.Errorf("fit at NCCL's own channels: %v, channels %d; want 0", err, fit.Params[0].Channels)
	}
}

func TestCalibrateErrors(t *testing.T) {
	tp := collTopo(t, "rtxpro6000-2s", 4)
	cases := []struct {
		name string
		ss   []CollectiveSample
		o    CollectiveOptions
	}{
		{"no samples", nil, CollectiveOptions{}},
		{"only bad samples", []CollectiveSample{{0, 10}, {100, -1}}, CollectiveOptions{}},
		{"more ranks than GPUs", []CollectiveSample{{1024, 10}}, CollectiveOptions{Ranks: 8}},
		{"alltoall", []CollectiveSample{{1024, 10}}, CollectiveOptions{Op: model.AllToAll}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Collective(tp, c.ss, c.o); err == nil {
				t.Error("no error")
			}
		})
	}
}

// TestCalibrateHoldOutDetail logs the held-out errors (go test -v).
func TestCalibrateHoldOutDetail(t *testing.T) {
	lg, err := nccltests.ParseFile("testdata/nccltests/all_reduce_perf_8x_pcie.txt")
	if err != nil {
		t.Fatal(err)
	}
	var fitOn []CollectiveSample
	for i, r := range lg.Rows {
		if i%2 == 0 {
			for _, tm := range r.Times() {
				fitOn = append(fitOn, CollectiveSample{Bytes: r.Bytes, TimeUs: tm})
			}
		}
	}
	fit, err := Collective(collTopo(t, "rtxpro6000-2s", 0), fitOn, CollectiveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	m, _ := sim.NewCollectiveModel(fit.Topology, ncclenv.Settings{})
	for i, r := range lg.Rows {
		if i%2 == 1 {
			ts := r.Times()
			worst = math.Max(worst, math.Abs(m.Cost(model.AllReduce, nil, r.Bytes).TimeUs/((ts[0]+ts[1])/2)-1))
		}
	}
	t.Logf("params %+v; fit RMS %.4f (prior %.4f); worst held-out error %.2f %%", fit.Params, fit.RMSErrFrac, fit.PriorRMSErrFrac, 100*worst)
}

// TestCalibratePriorIsTheModel: samples priced by the uncalibrated model
// itself fit back to the model's own parameters, because the prior is
// the model (precompute's latency per step, hop latencies included): on
// rtxpro6000-switch the 8-GPU ring has a P2P hop slower than the one
// NCCL's hwLat prices, so a prior without it would pull the fit away.
func TestCalibratePriorIsTheModel(t *testing.T) {
	tp := collTopo(t, "rtxpro6000-switch", 0)
	o := ncclenv.Settings{Proto: "LL", Algo: "Ring"}
	m, err := sim.NewCollectiveModel(tp, o)
	if err != nil {
		t.Fatal(err)
	}
	prior, ok := m.Prior(model.AllReduce, nil, ncclenv.Ring, ncclenv.LL)
	if !ok {
		t.Fatal("no Ring/LL prior for all-reduce")
	}
	// The ring's latency per step beyond NCCL's hwLat (NCCL's own
	// estimate, NCCLLatencyUs = baseLat + steps x hwLat) and the
	// host-memory hops' share of the SHM latency is its slowest P2P hop's
	// extra latency.
	c := m.Cost(model.AllReduce, nil, 1024)
	hwLatUs := (c.NCCLLatencyUs - prior.BaseLatUs) / prior.Steps
	hopExtraUs := prior.StepLatUs - hwLatUs - float64(c.SHMHops)/8*tp.Host.SHMLatUs
	if hopExtraUs <= 1e-9 {
		t.Fatalf("ring hop latency beyond NCCL's hwLat %.3f us: want > 0 for this test", hopExtraUs)
	}
	var ss []CollectiveSample
	for b := int64(1 << 10); b <= 1<<20; b *= 2 {
		ss = append(ss, CollectiveSample{Bytes: b, TimeUs: m.Cost(model.AllReduce, nil, b).TimeUs})
	}
	fit, err := Collective(tp, ss, CollectiveOptions{NCCL: o})
	if err != nil {
		t.Fatal(err)
	}
	if len(fit.Params) != 1 || fit.Params[0].Algo != "Ring" || fit.Params[0].Proto != "LL" {
		t.Fatalf("params %+v: want one Ring/LL entry", fit.Params)
	}
	p := fit.Params[0]
	// The prior fits the samples exactly, so the fit stays on it: the
	// fitted values are the model's, to the 4 significant digits Collective
	// keeps (round4).
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"base latency", p.BaseLatUs, prior.BaseLatUs},
		{"latency per step", p.HwLatUs, prior.StepLatUs},
		{"bus bandwidth", p.BusBWGBps, prior.BusBWGBps},
	} {
		if c.got != round4(c.want) {
			t.Errorf("%s %v, model %v", c.name, c.got, round4(c.want))
		}
	}
}

func collTopo(t testing.TB, name string, gpus int) *topology.Topology {
	t.Helper()
	tp, err := topology.Resolve(name, gpus)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// TestCalibrateOneSizeIsSaid: a pair whose samples are all of one message
// size (NCCL_PROTO=Simple NCCL_ALGO=Ring forcing one pair; two runs of 16
// MiB) has one time to fit three parameters, so the fit lists it in
// OneSize for the report to say; the same pair over two sizes is not
// listed. A fit of LL128 on the 16 MiB rows of an H200 log alone had been
// printed with its base latency, hop latency and bus bandwidth as if
// measured ("140.30 GB/s, rms_err 0.1 %").
func TestCalibrateOneSizeIsSaid(t *testing.T) {
	tp := collTopo(t, "rtxpro6000-2s", 0)
	o := CollectiveOptions{NCCL: ncclenv.Settings{Proto: "Simple", Algo: "Ring", P2PLevel: "SYS"}}
	const b = 16 << 20
	fit, err := Collective(tp, []CollectiveSample{{Bytes: b, TimeUs: 1400}, {Bytes: b, TimeUs: 1410}}, o)
	if err != nil {
		t.Fatal(err)
	}
	want := OneSizeFit{Algo: "Ring", Proto: "Simple", Bytes: b, Samples: 2}
	if len(fit.Params) != 1 || len(fit.OneSize) != 1 || fit.OneSize[0] != want {
		t.Errorf("one size: params %+v, one-size %+v; want one entry listed as %+v", fit.Params, fit.OneSize, want)
	}
	fit, err = Collective(tp, []CollectiveSample{{Bytes: b, TimeUs: 1400}, {Bytes: b / 4, TimeUs: 380}}, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(fit.Params) != 1 || len(fit.OneSize) != 0 {
		t.Errorf("two sizes: params %+v, one-size %+v; want one entry, none listed", fit.Params, fit.OneSize)
	}
}

// TestCollectiveProvenanceOnce: calibrate --trace fits each collective of
// one trace in turn with one provenance (which holds "; " itself); the box
// names that trace once, not once per collective, keeps an earlier
// measurement's provenance before it, and keeps it when a fit gives none.
func TestCollectiveProvenanceOnce(t *testing.T) {
	tp := collTopo(t, "rtxpro6000-2s", 0)
	var ss []CollectiveSample
	for _, b := range []int64{1 << 10, 64 << 10, 1 << 20, 16 << 20} {
		ss = append(ss, CollectiveSample{Bytes: b, TimeUs: 20 + float64(b)/20e3})
	}
	const earlier, prov = "nccl-tests ar.log", "trace run.otlp.jsonl (tiny-mla-moe tp2), 2026-12-07T14:32:13Z; fit on 2 even steps"
	fit, err := Collective(tp, ss, CollectiveOptions{Op: model.AllReduce, Ranks: 8, Source: earlier})
	if err != nil {
		t.Fatal(err)
	}
	box := fit.Topology
	for _, op := range []model.Collective{model.AllReduce, model.AllGather} {
		f, err := Collective(box, ss, CollectiveOptions{Op: op, Ranks: 8, NCCL: ncclenv.Settings{P2PLevel: "SYS"}, Source: prov})
		if err != nil {
			t.Fatal(err)
		}
		box = f.Topology
	}
	if got, want := box.Calibration.Source, earlier+"; "+prov; got != want {
		t.Errorf("source %q, want %q", got, want)
	}
	f, err := Collective(box, ss, CollectiveOptions{Op: model.AllReduce, Ranks: 8, NCCL: ncclenv.Settings{P2PLevel: "PIX"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.Topology.Calibration.Source, earlier+"; "+prov; got != want {
		t.Errorf("a fit without a source: source %q, want the earlier %q", got, want)
	}
}
