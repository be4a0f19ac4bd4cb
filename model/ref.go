package model

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
)

// Ref says how to find an architecture again, in another process or on
// another day: a preset by name, or a checkpoint's config by absolute path,
// the SHA-256 of what was read (config.json, then hf_quant_config.json
// when present) and that content itself, optionally with its widths scaled
// down (ScaleArch). It is what a scenario records instead of the
// architecture's numbers; the content makes a recorded scenario resolve on
// a machine without the file.
type Ref struct {
	Name   string  `json:"name,omitempty"`   // preset name
	Path   string  `json:"path,omitempty"`   // absolute path of a config.json or checkpoint directory
	SHA256 string  `json:"sha256,omitempty"` // hex SHA-256 of the config file(s) at Path
	Scale  float64 `json:"scale,omitempty"`  // widths divided by Scale (ScaleArch); 0 or 1 = none
	// Config and QuantConfig are the bytes of config.json and
	// hf_quant_config.json as read ("" when absent); references recorded
	// before they travelled have neither and resolve Path.
	Config      string `json:"config,omitempty"`
	QuantConfig string `json:"quant_config,omitempty"`
}

// String is the preset name or path, with "@scale=F" when scaled.
func (r Ref) String() string {
	s := r.Name
	if s == "" {
		s = r.Path
	}
	if r.Scale > 1 {
		s += "@scale=" + strconv.FormatFloat(r.Scale, 'g', -1, 64)
	}
	return s
}

// SameModel reports whether r and o name the same architecture: the same
// preset, or config files of the same content (SHA256) wherever they lie,
// at the same scale. A checkpoint's config moved or copied to another
// directory is the same model; the path is where it was found, not what
// it is.
func (r Ref) SameModel(o Ref) bool {
	scale := func(f float64) float64 { return math.Max(f, 1) }
	if scale(r.Scale) != scale(o.Scale) {
		return false
	}
	if r.Name != "" || o.Name != "" {
		return r.Name == o.Name && r.Path == "" && o.Path == ""
	}
	if r.SHA256 != "" && o.SHA256 != "" {
		return r.SHA256 == o.SHA256
	}
	return r.Path != "" && r.Path == o.Path
}

// Resolve loads the architecture the reference names: the preset; the
// recorded config content (checked against SHA256), wherever Path is; or,
// for a reference without content, the config at Path after checking that
// it still has SHA256; then ScaleArch when Scale > 1. A changed file or
// content is an error naming both hashes.
func (r Ref) Resolve() (*Arch, error) {
	var (
		a   *Arch
		err error
	)
	switch {
	case r.Name != "" && r.Path != "":
		return nil, fmt.Errorf("model reference names both preset %q and file %s: want one", r.Name, r.Path)
	case r.Name != "":
		a, err = Preset(r.Name)
	case r.Config != "":
		if got := contentHash([]byte(r.Config), []byte(r.QuantConfig)); r.SHA256 != "" && got != r.SHA256 {
			return nil, fmt.Errorf("model config %s: recorded sha256 %s, its recorded content hashes to %s: the record was edited or damaged", r.Path, r.SHA256, got)
		}
		var quant []byte
		if r.QuantConfig != "" {
			quant = []byte(r.QuantConfig)
		}
		if a, err = parse(r.Path+" (recorded config.json)", []byte(r.Config), "hf_quant_config.json (recorded)", quant); err != nil {
			return nil, err
		}
		a.Name, a.Source = r.Path, r.Path
		a.Ref = Ref{Path: r.Path, SHA256: r.SHA256, Config: r.Config, QuantConfig: r.QuantConfig}
	case r.Path != "":
		if r.SHA256 != "" {
			got, herr := configHash(r.Path)
			if herr != nil {
				return nil, herr
			}
			if got != r.SHA256 {
				return nil, fmt.Errorf("model config %s changed since it was recorded: sha256 %s, recorded %s", r.Path, got, r.SHA256)
			}
		}
		a, err = Load(r.Path)
	default:
		return nil, errors.New("model reference is empty: want a preset name or a config path")
	}
	if err != nil {
		return nil, err
	}
	if r.Scale > 1 {
		return ScaleArch(a, r.Scale)
	}
	return a, nil
}

// configHash is the SHA-256 of the config files Load reads for path.
func configHash(path string) (string, error) {
	cfgPath, quantPath, err := configFiles(path)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, p := range []string{cfgPath, quantPath} {
		if p == "" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			if p == quantPath && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return "", &ConfigError{File: p, Want: "a readable file", Err: err}
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// contentHash is the SHA-256 of config.json's bytes followed by
// hf_quant_config.json's (configHash of the files that hold them).
func contentHash(cfg, quant []byte) string {
	h := sha256.New()
	h.Write(cfg)
	h.Write(quant)
	return hex.EncodeToString(h.Sum(nil))
}

// refOfFile is the reference of an architecture loaded from path, with
// the bytes read from its config files.
func refOfFile(path string, cfg, quant []byte) (Ref, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Ref{}, &ConfigError{File: path, Want: "a path that resolves", Err: err}
	}
	return Ref{Path: abs, SHA256: contentHash(cfg, quant), Config: string(cfg), QuantConfig: string(quant)}, nil
}

// ScaleArch returns a copy of a whose widths are divided by f (>= 1), for
// running a model too big for the machine: hidden size, q/kv LoRA ranks,
// head dims, MLP and expert intermediate sizes, vocab and the DSA indexer
// head dim are divided (rounded; multiples of 16 stay multiples of 16, at
// least 16; the RoPE and nope head dims stay even). Layers, heads,
// experts, top-k and the quantization are kept, so the schedule keeps its
// structure, op IDs, collectives and routing statistics; GEMM FLOPs and
// weight bytes shrink by about f^2, KV bytes and collective bytes by about
// f. The copy's Ref records f, so a scenario of a scaled model resolves to
// the same widths.
//
// Scaling the model and rebuilding, rather than shrinking the ops of a
// built schedule, keeps every op consistent with Build's formulas, so a
// prediction of the scaled schedule is exactly comparable with its run.
func ScaleArch(a *Arch, f float64) (*Arch, error) {
	if a == nil {
		return nil, fmt.Errorf("scale: nil architecture")
	}
	if !(f >= 1) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("scale %v: want a finite factor >= 1", f)
	}
	c := *a
	if f == 1 {
		return &c, nil
	}
	// Widths that are multiples of 16 stay multiples of 16 (at least 16)
	// so they still divide by any TP degree up to 16.
	div := func(v int) int {
		switch {
		case v == 0:
			return 0
		case v%16 == 0:
			return max(16, 16*int(math.Round(float64(v)/f/16)))
		}
		return max(1, int(math.Round(float64(v)/f)))
	}
	even := func(v int) int {
		if v == 0 {
			return 0
		}
		return max(2, 2*int(math.Round(float64(v)/f/2)))
	}
	c.Name = fmt.Sprintf("%s@scale=%g", a.Name, f)
	c.Ref.Scale = f
	if a.Ref.Scale > 1 {
		c.Ref.Scale = f * a.Ref.Scale
	}
	c.Hidden = div(a.Hidden)
	c.QLoraRank = div(a.QLoraRank)
	c.KVLoraRank = div(a.KVLoraRank)
	c.QKNopeHeadDim = even(a.QKNopeHeadDim)
	c.QKRopeHeadDim = even(a.QKRopeHeadDim)
	c.VHeadDim = div(a.VHeadDim)
	c.Intermediate = div(a.Intermediate)
	c.MoEIntermediate = div(a.MoEIntermediate)
	c.Vocab = div(a.Vocab)
	c.IndexHeadDim = even(a.IndexHeadDim)
	if a.eagle3 != nil {
		e := *a.eagle3
		e.TargetHidden, e.DraftVocab = div(e.TargetHidden), div(e.DraftVocab)
		c.eagle3 = &e
	}
	return &c, nil
}
