package engine

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Arch is a GPU architecture family as engines gate their kernels: by
// compute capability (vLLM platforms/cuda.py is_device_capability_family,
// SGLang server_args is_sm100_supported / is_hopper_with_cuda_12_3).
type Arch uint8

const (
	ArchUnknown Arch = iota
	SM80             // Ampere: compute capability 8.0-8.7
	SM89             // Ada: 8.9 (first with FP8)
	SM90             // Hopper: 9.x
	SM100            // datacenter Blackwell: 10.x
	SM120            // RTX / GeForce Blackwell: 12.x
)

var archNames = [...]string{"unknown", "sm80", "sm89", "sm90", "sm100", "sm120"}

// AllArchs lists the known families in order.
func AllArchs() []Arch { return []Arch{SM80, SM89, SM90, SM100, SM120} }

// anyArch is what "any" in a profile means: every family, and a device
// no family covers (a CPU stand-in, a GPU tpscope does not know), as an
// engine's code path for "every other architecture" does.
func anyArch() ArchSet { return append(AllArchs(), ArchUnknown) }

func (a Arch) String() string {
	if int(a) < len(archNames) {
		return archNames[a]
	}
	return "arch(" + strconv.Itoa(int(a)) + ")"
}

// MarshalText writes the family's name (sm120).
func (a Arch) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText reads sm80, sm89, sm90, sm100, sm120.
func (a *Arch) UnmarshalText(b []byte) error {
	v, err := ParseArch(string(b))
	*a = v
	return err
}

// ParseArch reads a family name: sm80, sm89, sm90, sm100, sm120 (case
// ignored).
func ParseArch(s string) (Arch, error) {
	k := strings.ToLower(strings.TrimSpace(s))
	for i, n := range archNames {
		if i > 0 && n == k {
			return Arch(i), nil
		}
	}
	return ArchUnknown, fmt.Errorf("architecture %q: want one of %s", s, strings.Join(archNames[1:], ", "))
}

// ArchCCs says which compute capabilities ArchOf maps to a family.
const ArchCCs = "8.x (sm80, sm89 for 8.9), 9.x (sm90), 10.x (sm100) or 12.x (sm120)"

// ArchOf maps a compute capability "major.minor" (topology.Device's
// ComputeCapability, e.g. "12.0") to its family; ok false for one no
// family covers (before 8.0, or 11.x).
func ArchOf(cc string) (Arch, bool) {
	maj, min, ok := strings.Cut(strings.TrimSpace(cc), ".")
	major, err := strconv.Atoi(maj)
	if err != nil {
		return ArchUnknown, false
	}
	minor := 0
	if ok {
		if minor, err = strconv.Atoi(min); err != nil {
			return ArchUnknown, false
		}
	}
	switch {
	case major == 8 && minor == 9:
		return SM89, true
	case major == 8:
		return SM80, true
	case major == 9:
		return SM90, true
	case major == 10:
		return SM100, true
	case major == 12:
		return SM120, true
	}
	return ArchUnknown, false
}

// ArchSet is a set of families; in YAML a list of names, or "any".
type ArchSet []Arch

// Has reports whether a is in the set.
func (s ArchSet) Has(a Arch) bool { return slices.Contains(s, a) }

// UnmarshalYAML-free: a YAML sequence of names decodes element by element
// through Arch's text codec; the scalar "any" is handled here.
func (s *ArchSet) UnmarshalText(b []byte) error {
	if strings.EqualFold(strings.TrimSpace(string(b)), "any") {
		*s = anyArch()
		return nil
	}
	return fmt.Errorf("architectures %q: want a list of families or \"any\"", b)
}

// WeightFormat is how a layer's weights are stored, which decides the
// kernel an engine runs it with. Names are model.Dtype's spellings.
type WeightFormat uint8

const (
	FormatUnknown WeightFormat = iota
	BF16                       // 16-bit (bf16 or fp16) weights
	FP8                        // e4m3, per-tensor or per-channel scale
	FP8Block                   // e4m3, one scale per 128x128 block (DeepSeek FP8)
	NVFP4                      // e2m1, FP8 scale per 16 values (ModelOpt NVFP4, W4A4)
	INT4                       // W4A16, group-32 scales (compressed-tensors pack-quantized)
)

var formatNames = [...]string{"unknown", "bf16", "fp8", "fp8-block128", "nvfp4", "int4-g32"}

func (f WeightFormat) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return "format(" + strconv.Itoa(int(f)) + ")"
}

// MarshalText writes the format's name.
func (f WeightFormat) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText reads a format name (ParseWeightFormat).
func (f *WeightFormat) UnmarshalText(b []byte) error {
	v, err := ParseWeightFormat(string(b))
	*f = v
	return err
}

// ParseWeightFormat reads bf16 (fp16, bfloat16), fp8, fp8-block128,
// nvfp4, int4-g32 (int4, w4a16).
func ParseWeightFormat(s string) (WeightFormat, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "bf16", "fp16", "bfloat16", "float16":
		return BF16, nil
	case "fp8":
		return FP8, nil
	case "fp8-block128", "fp8_block", "fp8-block":
		return FP8Block, nil
	case "nvfp4":
		return NVFP4, nil
	case "int4-g32", "int4", "w4a16":
		return INT4, nil
	}
	return FormatUnknown, fmt.Errorf("weight format %q: want one of %s", s, strings.Join(formatNames[1:], ", "))
}

// KVDtype is the KV cache's storage dtype as attention backends gate it.
type KVDtype uint8

const (
	KVUnknown KVDtype = iota
	KV16              // bf16 or fp16 ("auto" for a 16-bit checkpoint)
	KVFP8             // fp8 e4m3, dequantized on load
)

var kvNames = [...]string{"unknown", "bf16", "fp8"}

func (k KVDtype) String() string {
	if int(k) < len(kvNames) {
		return kvNames[k]
	}
	return "kv(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText writes bf16 or fp8.
func (k KVDtype) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a KV dtype (ParseKVDtype).
func (k *KVDtype) UnmarshalText(b []byte) error {
	v, err := ParseKVDtype(string(b))
	*k = v
	return err
}

// ParseKVDtype reads bf16 (fp16, auto) or fp8 (fp8_e4m3).
func ParseKVDtype(s string) (KVDtype, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "bf16", "fp16", "bfloat16", "auto":
		return KV16, nil
	case "fp8", "fp8_e4m3", "fp8-e4m3", "fp8-block128":
		return KVFP8, nil
	}
	return KVUnknown, fmt.Errorf("KV dtype %q: want bf16 or fp8", s)
}

// Phase is the step's phase.
type Phase uint8

const (
	PhaseUnknown Phase = iota
	Decode
	Prefill
)

var phaseNames = [...]string{"unknown", "decode", "prefill"}

func (p Phase) String() string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "phase(" + strconv.Itoa(int(p)) + ")"
}

// MarshalText writes decode or prefill.
func (p Phase) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads decode or prefill.
func (p *Phase) UnmarshalText(b []byte) error {
	switch strings.ToLower(strings.TrimSpace(string(b))) {
	case "decode":
		*p = Decode
	case "prefill":
		*p = Prefill
	default:
		return fmt.Errorf("phase %q: want decode or prefill", b)
	}
	return nil
}

// Dispatch is how, under DP attention with expert parallelism, the
// tokens of each DP group reach the routed experts held by other ranks
// and their outputs come back. Names are model.BuildOptions.MoEDispatch's
// spellings.
type Dispatch uint8

const (
	DispatchUnknown Dispatch = iota
	// DispatchAllToAll sends each token only to the ranks holding its
	// experts and combines the outputs back the same way (DeepEP-style
	// dispatch and combine).
	DispatchAllToAll
	// DispatchAllGather gathers every rank's tokens on every rank, which
	// runs its experts on all of them, and reduce-scatters the outputs
	// back to their ranks.
	DispatchAllGather
)

var dispatchNames = [...]string{"unknown", "alltoall", "allgather_reducescatter"}

// dispatchWords are the kinds for people.
var dispatchWords = [...]string{"unknown", "all-to-all", "all-gather + reduce-scatter"}

func (d Dispatch) String() string {
	if int(d) < len(dispatchNames) {
		return dispatchNames[d]
	}
	return "dispatch(" + strconv.Itoa(int(d)) + ")"
}

// Words is the kind for people: all-to-all, all-gather + reduce-scatter.
func (d Dispatch) Words() string {
	if int(d) < len(dispatchWords) {
		return dispatchWords[d]
	}
	return d.String()
}

// MarshalText writes alltoall or allgather_reducescatter.
func (d Dispatch) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads a dispatch kind (ParseDispatch).
func (d *Dispatch) UnmarshalText(b []byte) error {
	v, err := ParseDispatch(string(b))
	*d = v
	return err
}

// ParseDispatch reads alltoall or allgather_reducescatter (case ignored).
func ParseDispatch(s string) (Dispatch, error) {
	k := strings.ToLower(strings.TrimSpace(s))
	for i, n := range dispatchNames {
		if i > 0 && n == k {
			return Dispatch(i), nil
		}
	}
	return DispatchUnknown, fmt.Errorf("MoE dispatch %q: want %s or %s", s, dispatchNames[1], dispatchNames[2])
}
