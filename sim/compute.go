package sim

import (
	"math"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

// Bound says which resource set an op's duration.
type Bound uint8

const (
	// BoundNone marks an op that costs nothing (fused into another op).
	BoundNone Bound = iota
	// BoundCompute: FLOPs / (peak x efficiency x fill) was the largest term.
	BoundCompute
	// BoundMemory: bytes / (achieved device-memory bandwidth) was the largest term.
	BoundMemory
	// BoundLatency: a fixed time (minimum kernel time, collective latency) dominated.
	BoundLatency
	// BoundLink: the bandwidth term of a collective (bytes over the links) dominated.
	BoundLink
	// BoundLoop: a split-KV kernel's serial loop per CTA (OpCost.LoopUs)
	// dominated: too few CTAs, each walking a long stretch of the cache.
	BoundLoop
)

var boundNames = [...]string{"none", "compute", "memory", "latency", "link", "loop"}

func (b Bound) String() string {
	if int(b) < len(boundNames) {
		return boundNames[b]
	}
	return "unknown"
}

// MarshalText writes the bound's name (JSON uses it).
func (b Bound) MarshalText() ([]byte, error) { return []byte(b.String()), nil }

// Kernel-shape assumptions of the fill model. They are the shapes common
// GPU libraries use, not measurements; calibration absorbs the rest into
// the efficiencies.
const (
	// gemmTileM, gemmTileN: output tile of one CTA of a tensor-core GEMM
	// (assumption: CUTLASS / cuBLAS default 128x128 CTA tile).
	gemmTileM = 128
	gemmTileN = 128
	// gemmSplitKMinK: split-K never cuts K below this many values per
	// split (assumption: 4 k-tiles of 128). Decode-size GEMM heuristics
	// (cuBLAS, CUTLASS, Marlin) split K until the SMs are filled.
	gemmSplitKMinK = 512
	// The attention backends' grids (heads per CTA, KV splits, tokens
	// per iteration, pipeline stages) and the kernels each engine launches
	// beside the schedule's ops are facts of the engine profile (package
	// engine, profiles/*.yaml), each citing its source.
	// dequantOpsPerKVValue: CUDA-core operations to turn one FP8 KV value
	// into BF16 on load (convert + multiply by the scale). Assumption from
	// the kernel's arithmetic, not measured.
	dequantOpsPerKVValue = 2
)

// Per-SM memory-parallelism model (Little's law: achieved bandwidth =
// bytes in flight / latency). A kernel with few CTAs keeps few SMs
// issuing loads and cannot reach the device's bandwidth, whatever its
// size. Both numbers are assumptions, stated as such:
const (
	// perSMInflightBytes: bytes one SM keeps in flight in a streaming
	// kernel (assumption: 256 threads x 8 outstanding 16-byte loads =
	// 32 KiB).
	perSMInflightBytes = 32 << 10
	// dramLatencyUs: loaded device-memory latency (assumption: 0.6 us,
	// the order of published GDDR6X/HBM3 microbenchmarks, 500-800 ns).
	dramLatencyUs = 0.6
)

// perSMMemGBps is the bandwidth one busy SM can pull: 32 KiB / 0.6 us
// = 54.6 GB/s.
const perSMMemGBps = perSMInflightBytes / (dramLatencyUs * 1e3)

// attnInflightBytes is what one CTA of an MLA decode kernel keeps in
// flight when the kernel's own pipeline is known (a split_kv grid such
// as TRITON_MLA's: stages x BLOCK_N tokens x the latent's values x the KV
// dtype's bytes), else perSMInflightBytes. A long cache read by few CTAs
// (TRITON_MLA's 4 splits at batch 1) streams at CTAs x this / DRAM
// latency: 73.7 KB / 0.6 us = 123 GB/s per CTA in bf16, where the generic
// 32 KiB gave 55.
func (cm *computeModel) attnInflightBytes(op *model.Op, b *engprof.AttentionBackend) float64 {
	if b != nil && b.Grid.Kind == engprof.GridSplitKV && op.Role == model.RoleMLADecode && op.K > 0 {
		if v := op.KVDtype.BytesPerValue(); v > 0 {
			return float64(b.Grid.Stages*b.Grid.BlockN) * float64(op.K) * v
		}
	}
	return perSMInflightBytes
}

// AttentionBackend names one of the engine's MLA attention backends (its
// name or an alias, engprof.AttentionBackend.Matches); "" is the engine's
// own choice.
type AttentionBackend string

const (
	// AttnAuto takes the engine profile's choice for the GPU family and KV
	// dtype (vLLM: TRITON_MLA on SM 12.x, FLASH_ATTN_MLA / FLASHMLA on
	// SM 9.x, FLASHINFER_MLA on SM 10.x).
	AttnAuto AttentionBackend = ""
	// AttnTritonMLA is vLLM's TRITON_MLA by its alias.
	AttnTritonMLA AttentionBackend = "triton_mla"
	// AttnFlashMLA is vLLM's FLASHMLA by its alias (SM 9.x and 10.x).
	AttnFlashMLA AttentionBackend = "flashmla"
)

// splits is the KV-split count a split_kv backend launches for a longest
// sequence of seqLen tokens: the Predictor's override
// (SetTritonMLASplits), the profile's fixed count, or the length rule:
// the power of two at or above seqLen / MinWorkPerSplit, at most
// SplitOccupancy x the SM count (vLLM 0.24 TRITON_MLA
// _compute_num_kv_splits).
func (cm *computeModel) splits(b *engprof.AttentionBackend, seqLen float64) float64 {
	switch {
	case cm.tritonFixedSplits > 0:
		return float64(cm.tritonFixedSplits)
	case b.Grid.FixedSplits > 0:
		return float64(b.Grid.FixedSplits)
	}
	ideal := math.Max(1, math.Floor(seqLen/float64(b.Grid.MinWorkPerSplit)))
	return math.Min(math.Exp2(math.Ceil(math.Log2(ideal))), float64(b.Grid.SplitOccupancy)*cm.sms)
}

// kindIndex maps an OpKind to a dense index for the precomputed tables.
func kindIndex(k model.OpKind) int {
	switch k {
	case model.KindGEMM:
		return 0
	case model.KindMoEGEMM:
		return 1
	case model.KindAttention:
		return 2
	case model.KindNorm:
		return 3
	case model.KindElementwise:
		return 4
	case model.KindRouter:
		return 5
	case model.KindEmbedding:
		return 6
	case model.KindCollective:
		return 7
	}
	return 8
}

const numKinds = 9

var kindNames = [numKinds]model.OpKind{model.KindGEMM, model.KindMoEGEMM, model.KindAttention,
	model.KindNorm, model.KindElementwise, model.KindRouter, model.KindEmbedding, model.KindCollective, "other"}

// dtypeIndex maps a Dtype to a dense index for the precomputed tables.
func dtypeIndex(d model.Dtype) int {
	switch d {
	case "":
		return 0
	case model.BF16:
		return 1
	case model.FP16:
		return 2
	case model.FP8:
		return 3
	case model.FP8Block128:
		return 4
	case model.NVFP4:
		return 5
	case model.INT4G32:
		return 6
	case model.FP32:
		return 7
	}
	return 8
}

const numDtypes = 9

var dtypeNames = [numDtypes]model.Dtype{"", model.BF16, model.FP16, model.FP8, model.FP8Block128,
	model.NVFP4, model.INT4G32, model.FP32, "other"}

// computeParams are the cost parameters of one (kernel family, dtype)
// cell, looked up once per Predictor so the hot loop does no map access.
type computeParams struct {
	computeKey  string  // PeakTFLOPS key of the dtype the tensor cores run, after fallback ("fp4", "fp8", "bf16")
	peakTFLOPS  float64 // dense peak at the sustained clock for that dtype
	efficiency  float64 // achieved fraction of peakTFLOPS (named prior)
	memGBps     float64 // device memory bandwidth x memory efficiency
	memEff      float64 // the memory efficiency used
	minKernelUs float64 // the kind's floor (MinKernelUsByKind, else MinKernelUs)
	rampUs      float64 // the family's fixed ramp (RampUs), 0 when none
	// streamBound: the engine's fused-MoE kernel's SM stream rate, below
	// the DRAM's, set memEff (engprof.SMStream).
	streamBound bool
}

// computeModel holds the per-(kind, dtype) parameters of a device and
// the engine profile's kernels (engineKernels, engine_profile.go).
type computeModel struct {
	sms float64
	// smClockMHz is the SM clock the floors are priced at: a serial
	// companion's cycles run at it (engprof.SerialWalk).
	smClockMHz float64
	// tritonFixedSplits > 0 prices a split_kv attention backend with that
	// fixed KV-split count whatever the profile says
	// (SetTritonMLASplits); 0 follows the profile.
	tritonFixedSplits int
	fp32TFLOPS        float64 // CUDA-core peak for dequantization work (0: not modeled)
	// l2Bytes is the device's L2: a serial split merge reads its partials
	// from there when they fit (serialMergeUs).
	l2Bytes float64
	engineKernels
	cells [numKinds][numDtypes]computeParams
}

// newComputeModel precomputes every (kind, dtype) cell for dev.
//
// Compute dtype: an op runs at the peak of its weight dtype's
// ComputeDtype (NVFP4 -> fp4, FP8 -> fp8, INT4 W4A16 -> bf16). Ops without
// weights (attention, norms) run at the bf16 peak. When the chip lacks the
// dtype (no FP4 on Hopper, no FP8 before Ada) the bf16 peak is used: the
// serving engine then runs a weight-only kernel that dequantizes to 16
// bits (vLLM's Marlin FP4/FP8 path), so the tensor cores run bf16.
//
// Efficiency: Device.EfficiencyFor(kind, dtype) — the named prior of the
// preset or a calibrated value. Memory efficiency: Efficiency
// ["mem/<kind>/<dtype>"], else ["mem/<kind>"], else Device.MemEfficiency
// (documented extension of the topology key space: a kernel family such as
// small-batch FP4 MoE on SM120 may stream weights below the device's
// STREAM figure).
func newComputeModel(dev *topology.Device, prof *engprof.Profile, opts *Options) *computeModel {
	cm := &computeModel{sms: float64(dev.SMs), smClockMHz: dev.SMClockMHz, l2Bytes: float64(dev.L2Bytes)}
	if cm.sms < 1 {
		cm.sms = 1
	}
	cm.engineKernels.init(dev, prof, opts)
	if v, ok := dev.TFLOPS("fp32"); ok {
		cm.fp32TFLOPS = v
	}
	bf16, ok := dev.TFLOPS("bf16")
	if !ok {
		bf16, _ = dev.TFLOPS("fp16")
	}
	baseMemEff := dev.MemEfficiency
	if baseMemEff <= 0 {
		baseMemEff = 1
	}
	for ki := 0; ki < numKinds; ki++ {
		for di := 0; di < numDtypes; di++ {
			kind, dt := string(kindNames[ki]), dtypeNames[di]
			cd := dt.ComputeDtype()
			if dt == "" || dt == "other" {
				cd = model.BF16
			}
			peak, ok := dev.TFLOPS(string(cd))
			if !ok || peak <= 0 {
				cd, peak = model.BF16, bf16
			}
			eff := dev.EfficiencyFor(kind, string(dt))
			memEff := baseMemEff
			if v, ok := dev.Efficiency["mem/"+kind+"/"+string(dt)]; ok && dt != "" {
				memEff = v
			} else if v, ok := dev.Efficiency["mem/"+kind]; ok {
				memEff = v
			}
			streamBound := false
			if kind == string(model.KindMoEGEMM) && dev.MemBWGBps > 0 && !ownMemEff(dev, kind, dt) {
				// The engine's fused-MoE kernel streams these weights no
				// faster than its SMs dequantize them (Marlin:
				// engprof.SMStream): where that is below the DRAM's rate it
				// is the family's memory efficiency. A device's own
				// efficiency for the family (calibrated or stated) wins.
				if g := cm.moeStreamGBps(dt); g > 0 && g < dev.MemBWGBps*memEff {
					memEff, streamBound = g/dev.MemBWGBps, true
				}
			}
			floor := dev.MinKernelUs
			if v, ok := dev.MinKernelUsByKind[kind]; ok {
				floor = v
			}
			ramp := dev.RampUs[kind]
			if v, ok := dev.RampUs[kind+"/"+string(dt)]; ok && dt != "" {
				ramp = v
			}
			cm.cells[ki][di] = computeParams{computeKey: topology.ComputeKey(string(cd)), peakTFLOPS: peak, efficiency: eff,
				memGBps: dev.MemBWGBps * memEff, memEff: memEff, minKernelUs: floor, rampUs: ramp, streamBound: streamBound}
		}
	}
	return cm
}

// OpCost is the predicted device time of one op and every parameter that
// produced it, so a number can be traced back to its inputs.
type OpCost struct {
	// Strings first: a copy of an OpCost then touches one short pointer
	// prefix (cheaper for the garbage collector's write barriers).
	ComputeDtype string `json:"compute_dtype,omitempty"` // the peak used: "fp4", "fp8", "bf16"
	Algo         string `json:"algo,omitempty"`          // NCCL algorithm or custom all-reduce variant
	Proto        string `json:"proto,omitempty"`         // NCCL protocol
	// Source says where Us came from: SourcePrior ("prior": tpscope's
	// models), or a cost source's measurement: its table and the exact row
	// or the interpolation / hold, and for a module measurement the op's
	// share of it (costsource.go).
	Source string `json:"source"`

	Us    float64 `json:"us"` // device time of the op (without host launch), us
	Bound Bound   `json:"bound"`
	Fused bool    `json:"fused,omitempty"` // op folded into its neighbour (all-reduce + RMSNorm fusion)
	// PriorUs is the prior's time of an op priced from a measurement (0
	// otherwise): the measurement replaced it.
	PriorUs float64 `json:"prior_us,omitempty"`

	// Roofline terms (compute ops).
	ComputeUs   float64 `json:"compute_us,omitempty"`    // FLOPs / (PeakTFLOPS x Efficiency x Fill)
	MemoryUs    float64 `json:"memory_us,omitempty"`     // bytes / MemGBps_achieved
	DequantUs   float64 `json:"dequant_us,omitempty"`    // FP8 KV dequantization on CUDA cores (attention), part of ComputeUs
	PeakTFLOPS  float64 `json:"peak_tflops,omitempty"`   // dense peak at the sustained clock
	Efficiency  float64 `json:"efficiency,omitempty"`    // achieved fraction of the peak (prior or calibrated)
	CTAs        float64 `json:"ctas,omitempty"`          // estimated thread blocks of the kernel
	Fill        float64 `json:"fill,omitempty"`          // wave efficiency: CTAs / (waves x SMs)
	MemGBps     float64 `json:"mem_gbps,omitempty"`      // achieved bandwidth: min(BW x mem eff, active SMs x per-SM)
	MinKernelUs float64 `json:"min_kernel_us,omitempty"` // floor applied
	RampUs      float64 `json:"ramp_us,omitempty"`       // fixed time added to the roofline term (Device.RampUs: a catalog floor, or calibrated)
	// ExtraKernels: kernels the engine launches with this op that the
	// schedule does not list (TRITON_MLA's stage 2 and its buffers'
	// zero-fills; a fused MoE's sort, permute and finalize).
	// ExtraKernelsUs, their device time at the shortest kernel each, is
	// part of Us; the Predictor adds their launch gaps (and, eager, their
	// host launches) as it does the op's own (OpResult.OverheadUs).
	ExtraKernels   int     `json:"extra_kernels,omitempty"`
	ExtraKernelsUs float64 `json:"extra_kernels_us,omitempty"`
	// SplitKReduce: one of ExtraKernels is the GEMM library's split-K
	// reduction (engprof.SplitKReduce).
	SplitKReduce bool `json:"split_k_reduce,omitempty"`
	// SerialWalkUs is the loop of a companion that one thread runs over
	// every local expert (engprof.SerialWalk), beyond its floor among
	// ExtraKernelsUs.
	SerialWalkUs float64 `json:"serial_walk_us,omitempty"`
	// CallLatencyUs is the fused MoE call's fixed latency where its SM
	// stream rate binds (engprof.SMStream.CallCycles at the SM clock),
	// charged to the call's first GEMM, experts_gate_up.
	CallLatencyUs float64 `json:"call_latency_us,omitempty"`
	// LoopUs: a split-KV attention kernel's serial loop per CTA
	// (splitLoopUs), a third bound beside compute and memory.
	LoopUs float64 `json:"loop_us,omitempty"`
	// PaddedFLOPs: the tensor work of a kernel whose MMAs fill whole
	// tiles (engprof.PaddedTiles), the rows without tokens included, which
	// ComputeUs prices in place of FLOPs.
	PaddedFLOPs float64 `json:"padded_flops,omitempty"`
	// MergeUs: the merge of a split attention launch's partials, part of
	// Us: an sm_fill kernel's in-kernel merge after its last byte (the
	// backend's Grid.MergeUs; mergeUs), or a split_kv backend's serial
	// walk over its splits in the merge companion (Grid.SerialMerge;
	// serialMergeUs).
	MergeUs float64 `json:"merge_us,omitempty"`

	// Collectives.
	LatencyUs float64 `json:"latency_us,omitempty"` // fixed part of the collective time
	LinkUs    float64 `json:"link_us,omitempty"`    // bandwidth part of the collective time
}

// cost predicts the device time of a non-collective op.
//
//	t = max(MinKernelUs, RampUs + max(ComputeUs, MemoryUs) [, LoopUs]) [+ ExtraKernels x MinKernelUs] [+ SerialWalkUs] [+ CallLatencyUs]
//	ComputeUs = FLOPs / (peak x eff x fill)  [+ dequant ops / (fp32 peak x eff)]
//	MemoryUs  = (BytesRead + BytesWritten) / min(BW x memEff, min(CTAs, SMs) x per-CTA in flight / DRAM latency)
func (cm *computeModel) cost(op *model.Op) OpCost {
	p, _ := cm.cell(op)
	c := OpCost{ComputeDtype: p.computeKey, PeakTFLOPS: p.peakTFLOPS,
		Efficiency: p.efficiency, MinKernelUs: p.minKernelUs, Source: SourcePrior}
	if op.Kind == model.KindAttention {
		c.ComputeDtype = "bf16" // TRITON_MLA / FlashMLA compute in 16 bits
		p16 := &cm.cells[kindIndex(op.Kind)][1]
		c.PeakTFLOPS = p16.peakTFLOPS
	}
	pt := cm.paddedTiles(op)
	ctas := cm.ctas(op, pt)
	c.CTAs = ctas
	waves := math.Ceil(ctas / cm.sms)
	c.Fill = ctas / (waves * cm.sms)
	if op.FLOPs > 0 && c.PeakTFLOPS > 0 && c.Efficiency > 0 {
		c.ComputeUs = op.FLOPs / (c.PeakTFLOPS * 1e6 * c.Efficiency * c.Fill)
	}
	if pt != nil && op.FLOPs > 0 && c.PeakTFLOPS > 0 {
		// Every CTA computes its whole tile, however few of its rows hold
		// tokens, walking the whole K: the compute term is the padded
		// tensor work (the catalog's efficiency for these kernels is that
		// of a CTA issuing its MMAs back to back, 1.0 on SM120, where a
		// padded FP4 GEMM's K loop runs at the SM's FP4 peak).
		c.PaddedFLOPs = paddedFLOPs(op, pt)
		if c.Efficiency > 0 {
			c.ComputeUs = c.PaddedFLOPs / (c.PeakTFLOPS * 1e6 * c.Efficiency * c.Fill)
		}
	}
	if op.Kind == model.KindAttention && (op.KVDtype == model.FP8 || op.KVDtype == model.FP8Block128) && cm.fp32TFLOPS > 0 && op.KVBytes > 0 {
		vals := op.KVBytes / op.KVDtype.BytesPerValue()
		c.DequantUs = vals * dequantOpsPerKVValue / (cm.fp32TFLOPS * 1e6 * c.Efficiency * c.Fill)
		c.ComputeUs += c.DequantUs
	}
	active := math.Min(ctas, cm.sms)
	perCTA := perSMMemGBps
	var attn *engprof.AttentionBackend
	if op.Kind == model.KindAttention {
		attn = cm.attention(op)
		perCTA = cm.attnInflightBytes(op, attn) / (dramLatencyUs * 1e3)
	}
	c.MemGBps = math.Min(p.memGBps, active*perCTA)
	if b := op.BytesRead + op.BytesWritten; b > 0 && c.MemGBps > 0 {
		c.MemoryUs = b / (c.MemGBps * 1e3)
	}
	c.RampUs = p.rampUs
	c.Us, c.Bound = c.MinKernelUs, BoundLatency
	if t := c.RampUs + c.ComputeUs; c.ComputeUs > 0 && t > c.Us {
		c.Us, c.Bound = t, BoundCompute
	}
	if t := c.RampUs + c.MemoryUs; c.MemoryUs > 0 && t > c.Us {
		c.Us, c.Bound = t, BoundMemory
	}
	if op.Role == model.RoleExpertsGateUp {
		if k := cm.moeKernel(op.WeightDtype); k != nil {
			c.ExtraKernels = len(k.Companions)
			// One thread walks every local expert: its loop, beyond the
			// floor its kernel is priced at among the companions.
			if w := k.SerialWalk; w != nil && op.MoE != nil && cm.smClockMHz > 0 {
				c.SerialWalkUs = float64(op.MoE.LocalExperts) * w.CyclesPerExpert / cm.smClockMHz
			}
			// The call's fixed latency shows where the kernel's SM
			// stream binds; where the DRAM binds, streaming hides it.
			if st := k.SMStream; st != nil && st.CallCycles > 0 && p.streamBound && cm.smClockMHz > 0 {
				c.CallLatencyUs = st.CallCycles / cm.smClockMHz
			}
		}
	}
	if op.Kind == model.KindGEMM {
		c.ExtraKernels = cm.linearCompanions(op)
		if pt == nil && cm.splitKReduce(op) {
			// The library sums the partial products of the K splits in
			// a kernel of its own, priced as the other companions.
			c.SplitKReduce = true
			c.ExtraKernels++
		}
	}
	if op.Kind == model.KindAttention && op.Role == model.RoleMLADecode && attn != nil {
		c.ExtraKernels = len(attn.Companions)
		if attn.Grid.Kind == engprof.GridSplitKV {
			if c.LoopUs = cm.splitLoopUs(op, &c, attn); c.LoopUs > c.Us {
				c.Us, c.Bound = c.LoopUs, BoundLoop
			}
			c.MergeUs = cm.serialMergeUs(op, attn)
			c.Us += c.MergeUs
		}
	}
	if attn != nil && attn.Grid.Kind == engprof.GridSMFill {
		c.MergeUs = cm.mergeUs(op, attn)
		c.Us += c.MergeUs
	}
	c.ExtraKernelsUs = float64(c.ExtraKernels) * c.MinKernelUs
	c.Us += c.ExtraKernelsUs + c.SerialWalkUs + c.CallLatencyUs
	return c
}

// ownMemEff reports whether dev states a memory efficiency of its own for
// kernel family kind (for dtype dt or the kind as a whole): a calibrated
// or a user's figure.
func ownMemEff(dev *topology.Device, kind string, dt model.Dtype) bool {
	_, k := dev.Efficiency["mem/"+kind]
	_, kd := dev.Efficiency["mem/"+kind+"/"+string(dt)]
	return k || kd && dt != ""
}

// moeStreamGBps is the ceiling the engine's fused-MoE kernel for experts
// stored in d puts on its weight stream: the SMs x its measured bytes per
// SM cycle x the SM clock (engprof.SMStream), 0 where it states none.
func (cm *computeModel) moeStreamGBps(d model.Dtype) float64 {
	mk := cm.moeKernel(d)
	if mk == nil || mk.SMStream == nil {
		return 0
	}
	f, err := engprof.ParseWeightFormat(string(d))
	if err != nil {
		return 0
	}
	return mk.SMStream.GBps(f, cm.sms, cm.smClockMHz)
}

// paddedFLOPs is the tensor work of GEMM op on padded tiles t: each of
// its Batch groups (experts) computes ceil(M / TileM) x TileM rows and
// ceil(N / TileN) x TileN columns over the whole K.
func paddedFLOPs(op *model.Op, t *engprof.PaddedTiles) float64 {
	m, n := max(op.M, 1), max(op.N, 1)
	tm, tn := int64(t.TileM), int64(t.TileN)
	rows, cols := float64((m+tm-1)/tm*tm), float64((n+tn-1)/tn*tn)
	return 2 * rows * cols * float64(op.K) * math.Max(1, op.Batch)
}

// mergeUs is the fixed time an sm_fill backend that merges its KV splits
// in the kernel (Grid.MergeUs > 0: the executor's MLA kernels) spends
// after the last byte, when the launch is split: its blocks, one per
// (sequence, group of RowsPerCTA query rows), fill at most
// SplitBelowSMFrac of the SMs, so the planner cuts the cache into splits
// to fill the rest, and the splits meet at a barrier and merge their
// partials through L2. A launch whose blocks fill more of the device runs
// unsplit and merges nothing.
func (cm *computeModel) mergeUs(op *model.Op, b *engprof.AttentionBackend) float64 {
	g := &b.Grid
	if g.MergeUs <= 0 || op.Role != model.RoleMLADecode || op.M < 1 {
		return 0
	}
	seqs := int64(max(1, cm.seqs))
	tokPerSeq := (op.M + seqs - 1) / seqs
	rows := float64(tokPerSeq) * math.Max(1, op.Batch) // query rows per sequence: tokens x local heads
	blocks := float64(seqs) * math.Ceil(rows/float64(g.RowsPerCTA))
	if blocks > g.SplitBelowSMFrac*cm.sms {
		return 0
	}
	return g.MergeUs
}

// Serial split merge (engprof.Grid.SerialMerge), measured on one H100
// SXM at 1,980 MHz with vLLM's _fwd_kernel_stage2 under CUDA graphs
// (exec/cuda/testdata/h100/tritonmla-1055-1207): 1.3 us plus 0.226 us a
// non-empty split at batch 1 (8 and 16 heads, 16 to 1,024 splits, the
// partials 0.1-17 MB in its 50 MB L2), 0.42-0.51 us a split at batch 8 and
// 32 once the partials outgrow L2 (49 MB and more; 34-35 MB measured in
// between, 0.25-0.32 us).
const (
	// mergeL2CyclesPerSplit: one split's dependent read from L2 and its
	// rescale (exp, multiply-add), in SM cycles: 0.226 us x 1,980 MHz.
	// Other GPUs take the same cycles at their own SM clock (an on-chip
	// round trip; the count is not measured elsewhere).
	mergeL2CyclesPerSplit = 447
	// mergeDRAMUsPerSplit: the same read when the partials do not fit in
	// L2, a device-memory round trip (not scaled by the SM clock).
	mergeDRAMUsPerSplit = 0.47
)

// serialMergeUs is what a split_kv backend's merge companion spends
// walking the splits (Grid.SerialMerge), beyond the launch floor its
// companion is priced at: one dependent read per non-empty split of a
// sequence (a sequence of seq tokens over s splits fills ceil(seq /
// ceil(seq / s)) of them), the programs of all sequences and heads in
// parallel; from L2 when every program's partials fit there, else from
// device memory. A split's partial is its output over the latent (at most
// K values) and its log-sum-exp, fp32.
func (cm *computeModel) serialMergeUs(op *model.Op, b *engprof.AttentionBackend) float64 {
	if b == nil || !b.Grid.SerialMerge || op.M < 1 || op.Batch < 1 || !(cm.smClockMHz > 0) {
		return 0
	}
	seq := float64(op.N) + 1
	s := cm.splits(b, seq)
	active := math.Ceil(seq / math.Ceil(seq/s))
	partials := float64(op.M) * op.Batch * s * float64(op.K+1) * 4
	if cm.l2Bytes > 0 && partials > cm.l2Bytes {
		return active * mergeDRAMUsPerSplit
	}
	return active * mergeL2CyclesPerSplit / cm.smClockMHz
}

// splitLoopUs is the time a split_kv decode (TRITON_MLA's) takes when
// each CTA's loop over its split, not bandwidth or tensor throughput,
// sets it: every CTA walks ceil(tokens per split / BLOCK_N) iterations
// one after the other, and one iteration takes at least the dependent
// load pair that feeds it (the page-table entry, then the cache tile it
// points to: 2 x DRAM latency) or its own tensor work on one SM (BLOCK_H
// x BLOCK_N query rows x keys, at the SM's share of the peak and the
// attention efficiency), whichever is longer; waves of CTAs run one
// after another.
func (cm *computeModel) splitLoopUs(op *model.Op, c *OpCost, b *engprof.AttentionBackend) float64 {
	if op.M < 1 || op.N < 1 || op.Batch < 1 || c.PeakTFLOPS <= 0 || c.Efficiency <= 0 {
		return 0
	}
	seq := float64(op.N) + 1
	perSplit := math.Ceil(seq / cm.splits(b, seq))
	iters := math.Ceil(perSplit / float64(b.Grid.BlockN))
	perPair := op.FLOPs / (float64(op.M) * op.Batch * float64(op.N)) // FLOPs per (query head, cached token)
	iterUs := math.Max(2*dramLatencyUs, float64(b.Grid.BlockH*b.Grid.BlockN)*perPair/(c.PeakTFLOPS/cm.sms*1e6*c.Efficiency))
	return math.Ceil(c.CTAs/cm.sms) * iters * iterUs
}

// cell returns the (kind, dtype) cell an op's cost reads and the dtype it
// is keyed on: attention has no weights, so its efficiency is keyed by the
// KV dtype (an FP8 cache is dequantized on load); other ops by their weight
// dtype, "" (the kind alone) for ops without weights.
func (cm *computeModel) cell(op *model.Op) (*computeParams, model.Dtype) {
	dt := op.WeightDtype
	if op.Kind == model.KindAttention {
		dt = op.KVDtype
	}
	return &cm.cells[kindIndex(op.Kind)][dtypeIndex(dt)], dt
}

// ctas estimates the thread blocks a kernel launches (documented shapes
// above): GEMMs tile the output 128x128 and split K until the SMs are
// filled (a MoE kernel by its profile grid: Marlin one CTA per SM, a
// grouped CUTLASS or Triton GEMM its tiles); a split_kv MLA decode
// (TRITON_MLA) launches tokens x cdiv(heads, BLOCK_H) x splits; an
// sm_fill backend (FlashMLA, FA3, FlashInfer) fills every SM; row kernels (norm, router, elementwise,
// embedding) launch one CTA per token row. A GEMM on padded tiles pt (the
// op's paddedTiles, nil without) launches one CTA per tile, no split-K.
func (cm *computeModel) ctas(op *model.Op, pt *engprof.PaddedTiles) float64 {
	m, n, k := float64(op.M), float64(op.N), float64(op.K)
	batch := op.Batch
	if batch <= 0 {
		batch = 1
	}
	switch op.Kind {
	case model.KindGEMM, model.KindMoEGEMM:
		if m < 1 {
			m = 1
		}
		if n < 1 {
			n = 1
		}
		tileM, tileN, splitK := float64(gemmTileM), float64(gemmTileN), true
		if pt != nil {
			// One CTA per padded tile over the whole K.
			tileM, tileN, splitK = float64(pt.TileM), float64(pt.TileN), false
		} else if op.Kind == model.KindMoEGEMM {
			if mk := cm.moeKernel(op.WeightDtype); mk != nil {
				if mk.Grid == engprof.GridPersistent {
					// One CTA per SM striping the problem (Marlin).
					return cm.sms
				}
				tileM, tileN, splitK = float64(mk.TileM), float64(mk.TileN), mk.SplitK
			}
		}
		tiles := math.Ceil(m/tileM) * math.Ceil(n/tileN) * batch
		if splitK && tiles < cm.sms && k > gemmSplitKMinK {
			split := math.Min(math.Ceil(cm.sms/tiles), math.Ceil(k/gemmSplitKMinK))
			tiles *= split
		}
		return math.Max(1, tiles)
	case model.KindAttention:
		b := cm.attention(op)
		if b == nil || b.Grid.Kind != engprof.GridSplitKV {
			return cm.sms
		}
		// model.Build: attention M = query tokens (vLLM's decode grid
		// runs one program per token), Batch = local heads.
		heads := batch
		if m < 1 {
			m = 1
		}
		return m * math.Ceil(heads/float64(b.Grid.BlockH)) * cm.splits(b, n+1)
	default:
		if m < 1 {
			m = 1
		}
		return m
	}
}
