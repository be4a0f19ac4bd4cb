package sim

import (
	"math"
	"testing"

	engprof "github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
)

func relNear(got, want, rel float64) bool { return math.Abs(got-want) <= rel*math.Abs(want) }

// Expected values are worked out by hand from the catalog's datasheet
// figures for the preset GPUs (rtx-pro-6000-server: hardware.md) and the
// fill model's documented shapes:
//
//	bf16 peak at the sustained clock = 468 TF x 1650/2430 = 317.78 TF
//	fp4 peak = 1870 x 1650/2430 = 1269.75 TF; fp32 = 116.93 x 1650/2430 = 79.39 TF
//	streaming bandwidth = 1597 GB/s x 0.80 = 1277.6 GB/s; dense GEMMs
//	(the arch's mem/gemm: a GEMV's measured stream on GDDR7) 1597 x 0.86 =
//	1373.42 GB/s
//	one SM in flight: 32 KiB / 0.6 us = 54.61 GB/s
//	kernel floors (catalog.json, arch blackwell-sm120: ramp 600 + drain 200
//	cycles at 1,650 MHz, DRAM round trip 0.55 us): norm (800 + 300) / 1650
//	+ 2 x 0.55 = 1.77 us; gemm (800 + 700) / 1650 + 2 x 0.55 = 2.01 us;
//	attention (800 + 1000) / 1650 + 3 x 0.55 = 2.74 us
//
// H200 (h200-sxm): bf16 989 TF quoted at 1,830 MHz = the sustained clock,
// no fp4; floors (arch hopper: round trip 0.5 us) gemm 1500 / 1830 + 2 x
// 0.5 = 1.82 us, attention (800 + 1000) / 1830 + 3 x 0.5 = 2.48 us.
//
// Each catalog floor is also its kind's ramp, so a kernel costs
// floor + max(compute, memory) (the floor alone only when it moves no
// bytes and does no math).
func TestComputeCost(t *testing.T) {
	rtx, h200 := catalogDevice(t, "rtx-pro-6000-server"), catalogDevice(t, "h200-sxm")
	cases := []struct {
		name       string
		dev        topology.Device
		op         model.Op
		wantUs     float64
		wantBound  Bound
		wantCTAs   float64
		wantGBps   float64 // 0: not checked
		wantPeak   float64
		wantDtype  string
		wantDequan float64
	}{
		{
			// Decode o_proj-like GEMV: 1 x 1024 x 7168 bf16 weights,
			// 14,680,064 B. Tiles 56 (< 188 SMs), split-K min(ceil(188/56)=4,
			// ceil(1024/512)=2) = 2 -> 112 CTAs, 112 x 54.61 GB/s > 1373.42,
			// so 1373.42 GB/s: 14,680,064 / 1373.42e3 = 10.689 us (compute
			// 0.11 us), after the 2.01 us gemm floor: 12.699 us.
			name: "decode gemv memory bound", dev: rtx,
			op:     model.Op{Kind: model.KindGEMM, M: 1, N: 7168, K: 1024, Batch: 1, WeightDtype: model.BF16, FLOPs: 2 * 7168 * 1024, BytesRead: 7168 * 1024 * 2},
			wantUs: 12.6987, wantBound: BoundMemory, wantCTAs: 112, wantGBps: 1373.42, wantPeak: 317.78, wantDtype: "bf16",
		},
		{
			// 4096^3 bf16 GEMM: 1024 tiles -> 6 waves of 188, fill
			// 1024/1128 = 0.9078; 2 x 4096^3 = 1.3744e11 FLOP /
			// (317.78e6 x 0.70 x 0.9078) = 680.6 us; memory 3 x 4096^2 x 2 B
			// / 1373.42e3 = 73.3 us; plus the 2.01 us floor: 682.6 us.
			name: "large gemm compute bound", dev: rtx,
			op:     model.Op{Kind: model.KindGEMM, M: 4096, N: 4096, K: 4096, Batch: 1, WeightDtype: model.BF16, FLOPs: 2 * 4096 * 4096 * 4096, BytesRead: 2 * 4096 * 4096 * 2, BytesWritten: 4096 * 4096 * 2},
			wantUs: 682.61, wantBound: BoundCompute, wantCTAs: 1024, wantPeak: 317.78, wantDtype: "bf16",
		},
		{
			// Same GEMM in NVFP4 on SM120: vLLM's FP4 linear runs 128 x
			// 128 tiles (the profile's padded tiles, full here: 32 x 32 =
			// 1024 CTAs, no split-K) at the SM's full FP4 rate:
			// 1.3744e11 / (1269.75e6 x 0.9078) = 119.23 us, + 2.01 us
			// floor = 121.24 us; vLLM's NVFP4 linear quantizes its input
			// in a kernel of its own first (the vllm@0.24 profile's
			// scaled_fp4_quant, not fused here: the op is no down
			// projection after SiLU): + one 2.01 us floor = 123.25 us.
			name: "nvfp4 gemm on fp4 tensor cores", dev: rtx,
			op:     model.Op{Kind: model.KindGEMM, M: 4096, N: 4096, K: 4096, Batch: 1, WeightDtype: model.NVFP4, FLOPs: 2 * 4096 * 4096 * 4096, BytesRead: 1},
			wantUs: 123.25, wantBound: BoundCompute, wantCTAs: 1024, wantPeak: 1269.75, wantDtype: "fp4",
		},
		{
			// H200 has no FP4: falls back to the bf16 peak 989 TF, gemm
			// prior 0.75 (no gemm/nvfp4 key); 132 SMs -> 8 waves, fill
			// 1024/1056 = 0.9697: 1.3744e11 / (989e6 x 0.75 x 0.9697) =
			// 191.08 us, + the 1.82 us Hopper gemm floor = 192.90 us.
			name: "nvfp4 on hopper falls back to bf16", dev: h200,
			op:     model.Op{Kind: model.KindGEMM, M: 4096, N: 4096, K: 4096, Batch: 1, WeightDtype: model.NVFP4, FLOPs: 2 * 4096 * 4096 * 4096, BytesRead: 1},
			wantUs: 192.90, wantBound: BoundCompute, wantCTAs: 1024, wantPeak: 989, wantDtype: "bf16",
		},
		{
			// A 7168-wide RMSNorm of one token: 43,008 B moved by one CTA
			// at 54.61 GB/s = 0.7875 us, after the 1.77 us norm floor:
			// 2.5575 us.
			name: "tiny norm floor plus its stream", dev: rtx,
			op:     model.Op{Kind: model.KindNorm, M: 1, N: 7168, FLOPs: 4 * 7168, BytesRead: 2 * 7168 * 2, BytesWritten: 7168 * 2},
			wantUs: 2.5575, wantBound: BoundMemory, wantCTAs: 1, wantPeak: 317.78, wantDtype: "bf16",
		},
		{
			// Triton MLA decode, 1 token, 8 local heads, 4096 cached tokens
			// (4097 with the new one) of 576 bf16 values (4,718,592 B).
			// Splits: next power of two of 4097 // 512 = 8 -> 8; grid 1 x
			// cdiv(8,16) x 8 = 8 CTAs. Memory: a CTA keeps 2 stages x 32
			// tokens x 576 x 2 B = 73,728 B in flight, / 0.6 us = 122.88
			// GB/s, x 8 = 983.04 GB/s (< 1277.6) -> 4.8 us. Compute: FLOPs
			// 8 x 4096 x 2 x 1088 = 71.3 M at 317.78e6 x 0.35 x 8/188 =
			// 15.07 us. Loop: ceil(4097/8) = 513 tokens per split = 17
			// iterations of max(2 x 0.6, 16 x 32 x 2176 FLOP / (317.78/188
			// TF x 0.35) = 1.883) us = 32.01 us, one wave. Plus 4 companion
			// kernels at the 2.74 us attention floor = 10.96 (their launch
			// gaps are the Predictor's, with the op's own); the merge
			// companion walks the 8 splits, all non-empty (4097 / 513 ->
			// 8), its 8 x 8 x 577 x 4 B of partials in L2: 8 x 447 cycles
			// at 1,650 MHz = 2.17 us. 32.01 + 10.96 + 2.17 = 45.14 us, bound
			// by the loop (floor + compute = 2.74 + 15.07 = 17.81 us is
			// below it).
			name: "triton mla decode batch 1", dev: rtx,
			op: model.Op{Kind: model.KindAttention, Role: model.RoleMLADecode, M: 1, N: 4096, K: 576, Batch: 8, ActDtype: model.BF16, KVDtype: model.BF16,
				FLOPs: 8 * 4096 * 2 * 1088, BytesRead: 4096 * 576 * 2, KVBytes: 4096 * 576 * 2},
			wantUs: 45.14, wantBound: BoundLoop, wantCTAs: 8, wantGBps: 983.04, wantPeak: 317.78, wantDtype: "bf16",
		},
		{
			// Same with an FP8 cache: half the bytes in flight per CTA
			// (61.44 GB/s, x 8 = 491.52); dequantization 2,359,296 values x 2
			// ops / (79.39e6 x 0.35 x 8/188) = 3.99 us on top of the 15.07
			// of compute; the loop (32.01) still binds, and the merge is
			// the same (its partials are fp32 whatever the cache): 32.01 +
			// 10.96 + 2.17 = 45.14 us.
			name: "triton mla decode fp8 kv dequant", dev: rtx,
			op: model.Op{Kind: model.KindAttention, Role: model.RoleMLADecode, M: 1, N: 4096, K: 576, Batch: 8, ActDtype: model.BF16, KVDtype: model.FP8,
				FLOPs: 8 * 4096 * 2 * 1088, BytesRead: 4096 * 576, KVBytes: 4096 * 576},
			wantUs: 45.14, wantBound: BoundLoop, wantCTAs: 8, wantGBps: 491.52, wantPeak: 317.78, wantDtype: "bf16", wantDequan: 3.99,
		},
		{
			// FlashMLA on Hopper fills all 132 SMs.
			name: "flashmla fills the gpu", dev: h200,
			op: model.Op{Kind: model.KindAttention, Role: model.RoleMLADecode, M: 1, N: 4096, K: 576, Batch: 8, ActDtype: model.BF16, KVDtype: model.BF16,
				FLOPs: 8 * 4096 * 2 * 1088, BytesRead: 4096 * 576 * 2, KVBytes: 4096 * 576 * 2},
			// memory 4,718,592 / (4800 x 0.8 = 3840 GB/s) = 1.229 us;
			// compute 71.3e6 / (989e6 x 0.55 x 1) = 0.131 us; attention
			// floor 2.48 us before the memory term: 3.709 us; plus the
			// query concat and the split combine at the floor, 2 x 2.48
			// us: 8.669 us.
			wantUs: 8.6688, wantBound: BoundMemory, wantCTAs: 132, wantGBps: 3840, wantPeak: 989, wantDtype: "bf16",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cm := newComputeModel(&tc.dev, engprof.MustDefault(), &Options{})
			c := cm.cost(&tc.op)
			if !relNear(c.Us, tc.wantUs, 2e-3) {
				t.Errorf("Us = %.4f, want %.4f (cost %+v)", c.Us, tc.wantUs, c)
			}
			if c.Bound != tc.wantBound {
				t.Errorf("bound %s, want %s", c.Bound, tc.wantBound)
			}
			if c.CTAs != tc.wantCTAs {
				t.Errorf("CTAs %v, want %v", c.CTAs, tc.wantCTAs)
			}
			if tc.wantGBps > 0 && !relNear(c.MemGBps, tc.wantGBps, 1e-3) {
				t.Errorf("MemGBps %.2f, want %.2f", c.MemGBps, tc.wantGBps)
			}
			if !relNear(c.PeakTFLOPS, tc.wantPeak, 1e-3) || c.ComputeDtype != tc.wantDtype {
				t.Errorf("peak %s %.2f, want %s %.2f", c.ComputeDtype, c.PeakTFLOPS, tc.wantDtype, tc.wantPeak)
			}
			if !relNear(c.DequantUs, tc.wantDequan, 2e-3) {
				t.Errorf("DequantUs %.3f, want %.3f", c.DequantUs, tc.wantDequan)
			}
		})
	}
}

// A calibrated memory efficiency for a kernel family ("mem/<kind>/<dtype>")
// replaces the device-wide prior for that family only.
func TestComputeMemEfficiencyOverride(t *testing.T) {
	dev := catalogDevice(t, "rtx-pro-6000-server")
	dev.Efficiency["mem/moe_gemm/nvfp4"] = 0.4
	cm := newComputeModel(&dev, engprof.MustDefault(), &Options{})
	// A down projection's shape (K = 256): its padded FP4 tiles, 8 x 56
	// of 128 x 128 over K = 256, take 3.7 us, below the memory term.
	op := model.Op{Kind: model.KindMoEGEMM, M: 1, N: 7168, K: 256, Batch: 8, WeightDtype: model.NVFP4, FLOPs: 1, BytesRead: 1e7}
	// 1e7 B / (1597 x 0.4 = 638.8 GB/s) = 15.654 us, after the moe_gemm
	// floor (800 + 700) / 1650 + 3 x 0.55 = 2.56 us: 18.214 us.
	if c := cm.cost(&op); !relNear(c.Us, 18.214, 1e-3) {
		t.Errorf("moe nvfp4 Us %.3f, want 18.214", c.Us)
	}
	op.WeightDtype = model.BF16
	// Other dtypes keep 0.80: 1e7 / 1277.6e3 = 7.827 us, + 2.56 = 10.387 us.
	if c := cm.cost(&op); !relNear(c.Us, 10.387, 1e-3) {
		t.Errorf("moe bf16 Us %.3f, want 10.387", c.Us)
	}
}

// A per-kind floor (Device.MinKernelUsByKind) applies to its kind only:
// a tiny norm sits at 5 us (above its catalog ramp 1.77 us + its 1 KB at
// one SM's 54.61 GB/s, 0.018 us), a tiny elementwise op of the same bytes
// at the device-wide MinKernelUs, which the catalog sets to its smallest
// floor (elementwise: (600 + 200) cycles / 1650 MHz + 0.55 us = 1.03 us),
// plus its stream after its ramp (the same 1.03 us): 1.03 + 0.0183 =
// 1.0483 us.
func TestComputePerKindFloor(t *testing.T) {
	dev := catalogDevice(t, "rtx-pro-6000-server")
	dev.MinKernelUsByKind = map[string]float64{"norm": 5}
	cm := newComputeModel(&dev, engprof.MustDefault(), &Options{})
	norm := model.Op{Kind: model.KindNorm, M: 1, FLOPs: 1e3, BytesRead: 1e3}
	if c := cm.cost(&norm); c.Us != 5 || c.MinKernelUs != 5 || c.Bound != BoundLatency {
		t.Errorf("norm: %.3f us (floor %.3f, %s), want 5 at the floor", c.Us, c.MinKernelUs, c.Bound)
	}
	elem := norm
	elem.Kind = model.KindElementwise
	if c := cm.cost(&elem); !relNear(c.Us, 1.0483, 1e-3) || c.MinKernelUs != 1.03 {
		t.Errorf("elementwise: %.4f us (floor %.3f), want the device-wide 1.03 + 1e3 B / 54.61 GB/s = 1.0483", c.Us, c.MinKernelUs)
	}
}

// catalogDevice is the catalog's spec of a GPU (the preset boxes' devices).
func catalogDevice(t testing.TB, key string) topology.Device {
	t.Helper()
	g, err := topology.LookupGPU(key)
	if err != nil {
		t.Fatal(err)
	}
	return g.Device
}
