package perfdb

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/tpscope/tpscope/engine"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// SourceConfig chooses what a Source serves. The zero value of a field
// is its documented default.
type SourceConfig struct {
	// System is the system's name (its YAML's base name, e.g.
	// rtx_pro_6000_server). "": the system whose tables were measured on
	// Device.
	System string
	// Device is the GPU name to find the system by when System is ""
	// (topology.Device.Name, e.g. "NVIDIA RTX PRO 6000 Blackwell Server
	// Edition").
	Device string
	// Profile is the engine profile whose kernels the tables should be
	// of (the scenario's --engine; the zero Ref is the default engine):
	// it names the engine's directory and version (engine.Profile.PerfDB)
	// when Engine and Version are "", and which kernel_source rows price
	// an op where a table holds several kernels' rows (the profile's
	// attention backend, MoE and GEMM kernels).
	Profile engine.Ref
	// Engine is the serving engine's directory name; "" = the profile's.
	Engine string
	// Version of the engine; "" = the profile's, or the newest one with
	// tables.
	Version string
	// AttentionBackend and MoEKernel are the scenario's choices among the
	// profile's kernels (sim.Options); "" = the profile's own choice.
	AttentionBackend, MoEKernel string
	// ModelType is the priced model's config model_type, which an engine
	// may pick its attention backend by (engine.AttentionRule.ModelTypes);
	// "" = a rule for any model.
	ModelType string
	// NCCLVersion picks comm/nccl/<version>; "" = the YAML's
	// misc.nccl_version when that directory exists, else the newest.
	NCCLVersion string
}

// DefaultRouting is the MoE routing a schedule priced from a perf DB
// assumes when its user names none: the tables' balanced distribution.
// aiconfigurator's own estimates read its power_law_1.01 rows for the
// DeepSeek family instead (aic-core sdk/config.py workload_distribution
// "power_law", models/deepseek.py and deepseek_v32.py _power_law_alpha
// 1.01, since 2025-08). Balanced stays tpscope's default because the two
// public serving measurements that tell them apart disagree: the decode
// step of DeepSeek-R1 NVFP4 under SGLang on 8 x B200 (the InferenceX
// levels' median ITL) is met by the balanced rows within 1 % at 64-128
// clients and by the power-law ones 11-15 % fast, while Kimi-K2.5 INT4
// under vLLM on 8 x H200 (the silicon corpus) takes 31.1 ms a token at 64
// clients, prefill stalls included, where the balanced rows' decode step
// alone is 37.1 ms and the power-law one 28.7 (README "not accurate").
var DefaultRouting = model.BalancedRouting

// Source serves one system's tables (one engine version, one NCCL
// version) to sim as a sim.CostSource and sim.CollectiveSource. Tables
// are read on first use; a Source is safe for concurrent use.
//
// How a schedule's ops map to tables:
//   - an MLA block (the schedule's model.ModAttention module from
//     fused_qkv_a_proj through o_proj, with the input quantizations of FP8
//     block-scaled projections, decode or prefill, without DCP or DSA ops,
//     one query token per sequence) whose dims are a table model's: the
//     MLA module table, shared over
//     the block's ops by sim (the module time in proportion to each op's
//     prior time). Decode step = cached tokens + 1 (the new token is
//     attended too, collect_mla_module.py); prefill isl = context.
//   - the routed experts of a MoE layer (its model.ModRoutedExperts
//     module: experts_gate_up, experts_act, experts_down, with the ops'
//     model.MoEShape): the MoE table keyed by
//     dtype, hidden, per-rank intermediate size, top-k, experts and EP =
//     experts / local experts, at RoutedTokens tokens, under the shape's
//     Routing (its distribution column: balanced, power_law_ALPHA; a
//     uniform-routing shape has no rows and keeps the prior, see
//     CheckRouting); shared over the three ops likewise.
//   - absorbed-MLA batched GEMMs (w_uk, w_uv) not covered by a module:
//     the MLA BMM table when the dims are DeepSeek-V3's.
//   - other GEMMs (batch 1): the GEMM table of their weight dtype.
//   - collectives: the NCCL table (or the engine's all-reduce table for
//     its custom all-reduce), when sim finds the measurement's conditions
//     hold (sim.Predictor.collectiveMeasured) and the group has the
//     table's GPU count and this system's fabric class.
//
// Norms, elementwise ops, embeddings, top-k and attention kernels
// outside a module have no table and keep sim's prior.
type Source struct {
	sys                   *System
	engine, version, nccl string
	name                  string
	// The engine profile whose kernels' rows price ops, and the user's
	// choices among them (engine.go).
	prof                      *engine.Profile
	attnOverride, moeOverride string
	modelType                 string

	mu    sync.Mutex
	errs  []error
	notes []string
	seen  map[string]bool

	legacyOnce sync.Once
	legacy     bool // the MLA module tables predate fused norms (eagerNormUs)
}

// NewSource prepares a Source over db. It reads the system's YAML and
// lists directories; no table is read until used (see Load).
func NewSource(db *DB, cfg SourceConfig) (*Source, error) {
	if db == nil {
		return nil, errorf("nil database")
	}
	name := cfg.System
	if name == "" {
		if cfg.Device == "" {
			return nil, errorf("source: want a system name or a device to find it by")
		}
		var err error
		if name, err = db.SystemFor(cfg.Device); err != nil {
			return nil, err
		}
	}
	sys, err := db.System(name)
	if err != nil {
		return nil, err
	}
	prof, err := engine.Lookup(cfg.Profile)
	if err != nil {
		return nil, errorf("%w", err)
	}
	s := &Source{sys: sys, engine: cfg.Engine, version: cfg.Version, seen: map[string]bool{},
		prof: prof, attnOverride: cfg.AttentionBackend, moeOverride: cfg.MoEKernel, modelType: cfg.ModelType}
	// Whose tables price the engine's ops when they are not its own:
	// said once as a note, as a table row of another kernel is.
	otherTables := ""
	if s.engine == "" {
		s.engine = prof.PerfDB.Framework
		if s.version == "" {
			s.version = prof.PerfDB.Version
		}
		switch {
		case s.engine == "":
			s.engine, otherTables = "vllm", "its profile names no tables of its own"
		case s.engine != "vllm" && !sys.hasVersion(s.engine, s.version):
			// The engine's own tables are not in this database: vLLM's
			// stand in for them, as they do for an engine whose profile
			// names none, rather than pricing nothing from the tables.
			otherTables = fmt.Sprintf("system %s has no %s %s tables", name, s.engine, s.version)
			s.engine, s.version = "vllm", ""
		case s.engine != prof.Engine || !sameRelease(s.version, prof.Version):
			// The executor's, or another release of the engine
			// (vllm@0.16-nightly's profile names 0.24.0's tables).
			otherTables = "its profile names them"
		}
	}
	if err := checkPart("engine", s.engine); err != nil {
		return nil, err
	}
	if s.version == "" {
		var all []string
		for _, f := range []string{FamilyGEMM, FamilyMoE, FamilyMLA, FamilyMLABMM, FamilyAttention, FamilyComm} {
			all = append(all, sys.Versions(f, s.engine)...)
		}
		if len(all) == 0 {
			return nil, errorf("system %s has no tables of engine %q under %s", name, s.engine, sys.dir)
		}
		sort.Slice(all, func(i, j int) bool { return versionLess(all[i], all[j]) })
		s.version = all[len(all)-1]
	} else if err := checkPart("version", s.version); err != nil {
		return nil, err
	} else if !sys.hasVersion(s.engine, s.version) {
		return nil, errorf("system %s has no %s %s tables (engine %s's) under %s", name, s.engine, s.version, prof.Name(), sys.dir)
	}
	s.nccl = cfg.NCCLVersion
	if s.nccl == "" {
		vs := sys.Versions(FamilyComm, "nccl")
		for _, v := range vs {
			if v == sys.Spec.NCCLVersion {
				s.nccl = v
			}
		}
		if s.nccl == "" && len(vs) > 0 {
			s.nccl = vs[len(vs)-1]
		}
	}
	s.name = "perfdb " + name + "/" + s.engine + "/" + s.version
	if otherTables != "" {
		s.note(fmt.Sprintf("%s: %s %s's tables stand in for %s's kernels (%s): the ops they price are priced as %s %s's kernels ran them",
			s.name, s.engine, s.version, prof.Name(), otherTables, s.engine, s.version))
	}
	return s, nil
}

// sameRelease reports whether tables of version table are of the
// profile's release prof ("0.24.0" of "0.24"; not "0.24.0" of "0.2").
func sameRelease(table, prof string) bool {
	return table == prof || strings.HasPrefix(table, prof+".")
}

// Name implements sim.CostSource.
func (s *Source) Name() string { return s.name }

// System is the system the source serves.
func (s *Source) System() *System { return s.sys }

// Load reads every table the source serves now (GEMM, MoE, MLA modules,
// MLA BMM, NCCL, the engine's all-reduce), so that a bad file fails
// before any prediction; tables the system does not have are fine.
func (s *Source) Load() error {
	var errs []error
	keep := func(err error) {
		if err != nil && !errors.Is(err, ErrNoTable) {
			errs = append(errs, err)
		}
	}
	_, err := s.sys.GEMM(s.engine, s.version)
	keep(err)
	_, err = s.sys.MoE(s.engine, s.version)
	keep(err)
	_, err = s.sys.MLAModule(s.engine, s.version, Generation)
	keep(err)
	_, err = s.sys.MLAModule(s.engine, s.version, Context)
	keep(err)
	_, err = s.sys.MLABMM(s.engine, s.version)
	keep(err)
	if s.nccl != "" {
		_, err = s.sys.NCCL(s.nccl)
		keep(err)
	}
	_, err = s.sys.CustomAllReduce(s.engine, s.version)
	keep(err)
	return errors.Join(errs...)
}

// Routings lists the MoE routings the source's MoE table measured (its
// distribution column), sorted by name; nil when the system has no MoE
// table for the engine version.
func (s *Source) Routings() ([]model.Routing, error) {
	t, err := s.sys.MoE(s.engine, s.version)
	if errors.Is(err, ErrNoTable) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return t.Routings(), nil
}

// CheckRouting refuses a routing the source's MoE table did not measure:
// a schedule built under it would be priced from the tables' routing, two
// facts about one layer. Fine when the system has no MoE table.
func (s *Source) CheckRouting(r model.Routing) error {
	rs, err := s.Routings()
	if err != nil || len(rs) == 0 {
		return err
	}
	names := make([]string, len(rs))
	for i, x := range rs {
		if x == r {
			return nil
		}
		names[i] = x.String()
	}
	return errorf("%s measured MoE layers under %s routing, not %s", s.name, strings.Join(names, ", "), r)
}

// Err reports the tables that failed to load while pricing (each once);
// ops they would have priced kept sim's prior. nil when none failed.
func (s *Source) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}

func (s *Source) fail(err error) {
	if err == nil || errors.Is(err, ErrNoTable) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if k := err.Error(); !s.seen[k] {
		s.seen[k] = true
		s.errs = append(s.errs, err)
	}
}

// Check implements sim.SourceChecker: the tables must have been measured
// on dev (the device column of the system's smallest table is dev.Name).
func (s *Source) Check(dev *topology.Device) error {
	got, err := s.sys.device()
	if err != nil {
		return err
	}
	if got != dev.Name {
		return errorf("system %s was measured on %q; the topology's GPU is %q", s.sys.Name, got, dev.Name)
	}
	return nil
}

// SystemFor returns the name of the system whose tables were measured on
// the GPU named device (the tables' device column), reading one small
// table per system. When none was, the error also names the first system
// that could not be read (a cut or damaged YAML or table): it may be the
// one sought.
func (db *DB) SystemFor(device string) (string, error) {
	names, err := db.yamlNames()
	if err != nil {
		return "", err
	}
	var seen []string
	var broken []error
	for _, n := range names {
		s, err := db.System(n)
		if err != nil {
			if !errors.Is(err, errNoDataDir) { // not a system spec: nothing lost
				broken = append(broken, err)
			}
			continue
		}
		if st, err := os.Stat(s.dir); err != nil || !st.IsDir() {
			continue // a system the database has no tables of
		}
		d, err := s.device()
		if err != nil {
			broken = append(broken, err)
			continue
		}
		if d == device {
			return n, nil
		}
		seen = append(seen, fmt.Sprintf("%s (%s)", n, d))
	}
	msg := fmt.Sprintf("no system in %s was measured on %q (systems: %s)", db.root, device, strings.Join(seen, ", "))
	if len(broken) > 0 {
		msg += fmt.Sprintf("; %d could not be read, the first: %s", len(broken), strings.TrimPrefix(broken[0].Error(), "perfdb: "))
	}
	return "", &Error{Msg: msg}
}

// device reads the device column of the system's smallest table.
func (s *System) device() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.deviceName != "" {
		return s.deviceName, nil
	}
	best, bestSize := "", int64(-1)
	err := filepath.WalkDir(s.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".parquet") {
			return nil
		}
		if fi, err := d.Info(); err == nil && (bestSize < 0 || fi.Size() < bestSize) {
			best, bestSize = p, fi.Size()
		}
		return nil
	})
	if err != nil || best == "" {
		return "", errorf("system %s: no table under %s", s.Name, s.dir)
	}
	var dev []string
	n, err := readColumns(best, best, []column{strCol("device", &dev)})
	if err != nil {
		return "", err
	}
	if n == 0 {
		return "", &FileError{Path: best, Field: "column device", Row: -1, Err: errors.New("no rows")}
	}
	s.deviceName = dev[0]
	return s.deviceName, nil
}

// gemmDtype is the gemm_dtype / gemm_type name of a weight dtype; "" when
// the tables have none.
func gemmDtype(d model.Dtype) string {
	switch d {
	case model.BF16:
		return "bfloat16"
	case model.FP8:
		return "fp8"
	case model.FP8Block128:
		return "fp8_block"
	case model.NVFP4:
		return "nvfp4"
	}
	return ""
}

// moeDtype is the moe_dtype name of an expert weight dtype: as GEMMs,
// plus INT4 W4A16 (compressed-tensors WNA16 through Marlin: int4_wo).
func moeDtype(d model.Dtype) string {
	if d == model.INT4G32 {
		return "int4_wo"
	}
	return gemmDtype(d)
}

func kvDtype(d model.Dtype) string {
	switch d {
	case model.BF16, model.FP16:
		return "bfloat16"
	case model.FP8, model.FP8Block128:
		return "fp8"
	}
	return ""
}

// OpCost implements sim.CostSource.
func (s *Source) OpCost(ops []model.Op, mods model.Modules, i int, dev *topology.Device) (sim.Measured, bool) {
	m, _, ok := s.price(ops, mods, i, dev)
	return m, ok
}

// price is OpCost with the table lookup's Result.
func (s *Source) price(ops []model.Op, mods model.Modules, i int, dev *topology.Device) (sim.Measured, Result, bool) {
	return s.priceAs(ops, mods, i, archOf(dev), dev)
}

// priceAs is price choosing the engine's kernels for family a, which is
// another GPU's when a Transfer borrows these tables; a measurement below
// the DRAM floor of what it covers is raised to it (dramFloor).
func (s *Source) priceAs(ops []model.Op, mods model.Modules, i int, a engine.Arch, dev *topology.Device) (sim.Measured, Result, bool) {
	m, r, ok := s.priceRaw(ops, mods, i, a, dev)
	if ok {
		m, _ = dramFloor(m, ops, dev)
	}
	return m, r, ok
}

// priceRaw is priceAs without the DRAM floor.
func (s *Source) priceRaw(ops []model.Op, mods model.Modules, i int, a engine.Arch, dev *topology.Device) (sim.Measured, Result, bool) {
	op := &ops[i]
	if m, r, ok := s.mlaModule(ops, mods, i, a, dev); ok {
		return m, r, true
	}
	switch {
	case op.Role.Module() == model.ModRoutedExperts && op.MoE != nil, op.Role == model.RoleMoETopK:
		return s.moe(ops, mods, i, a)
	case op.Kind == model.KindGEMM:
		if op.Role == model.RoleWUK || op.Role == model.RoleWUV {
			return s.bmm(op, i)
		}
		return s.gemm(op, i, a)
	}
	return sim.Measured{}, Result{}, false
}

func (s *Source) where(table, key string, r *Result) string {
	var b strings.Builder
	b.WriteString(s.name)
	b.WriteByte(' ')
	b.WriteString(table)
	if key != "" {
		b.WriteString(" [")
		b.WriteString(key)
		b.WriteByte(']')
	}
	b.WriteString(": ")
	b.WriteString(r.How.String())
	b.WriteByte(' ')
	b.WriteString(r.Describe())
	if r.Row >= 0 {
		b.WriteString(", row ")
		b.WriteString(strconv.Itoa(r.Row))
	}
	return b.String()
}

func (s *Source) gemm(op *model.Op, i int, a engine.Arch) (sim.Measured, Result, bool) {
	dt := gemmDtype(op.WeightDtype)
	if dt == "" || op.Batch > 1 || op.M < 1 || op.N < 1 || op.K < 1 {
		return sim.Measured{}, Result{}, false
	}
	t, err := s.sys.GEMM(s.engine, s.version)
	if err != nil {
		s.fail(err)
		return sim.Measured{}, Result{}, false
	}
	kern, ok := s.gemmKernel(t, dt, op.WeightDtype, a)
	if !ok {
		return sim.Measured{}, Result{}, false
	}
	if floor, bad := t.Floor(dt, kern); bad {
		s.note(fmt.Sprintf("%s: %s GEMM rows (%s) floor at %.0f us at every decode shape, far above their speed of light: the collector's overhead, not the kernel's; those GEMMs keep the priors", s.name, dt, kern, floor))
		return sim.Measured{}, Result{}, false
	}
	r, ok := t.LookupKernel(dt, kern, float64(op.M), float64(op.N), float64(op.K))
	if !ok {
		return sim.Measured{}, Result{}, false
	}
	return sim.Measured{Us: r.Us, First: i, Last: i, GapsIncluded: true, Where: s.where("gemm_perf", dt+" "+kern, &r)}, r, true
}

// bmm prices the absorbed W_UK (mla_gen_pre) and W_UV (mla_gen_post)
// batched GEMMs, whose table has DeepSeek-V3's per-head shapes.
func (s *Source) bmm(op *model.Op, i int) (sim.Measured, Result, bool) {
	name := "mla_gen_pre"
	in, out := int64(bmmNope), int64(bmmLatent)
	if op.Role == model.RoleWUV {
		name, in, out = "mla_gen_post", bmmLatent, bmmV
	}
	dt := gemmDtype(op.WeightDtype)
	if op.K != in || op.N != out || dt == "" || op.Batch < 1 || op.M < 1 {
		return sim.Measured{}, Result{}, false
	}
	t, err := s.sys.MLABMM(s.engine, s.version)
	if err != nil {
		s.fail(err)
		return sim.Measured{}, Result{}, false
	}
	r, ok := t.Lookup(name, dt, op.Batch, float64(op.M))
	if !ok {
		return sim.Measured{}, Result{}, false
	}
	return sim.Measured{Us: r.Us, First: i, Last: i, GapsIncluded: true, Where: s.where("mla_bmm_perf", name+" "+dt, &r)}, r, true
}

// moe prices the routed experts (experts_gate_up, experts_act,
// experts_down: the model.ModRoutedExperts module) of the MoE layer op i
// belongs to, from the ops' routing shape, and the top-k selection right
// before them (moe.topk), which the table's FusedMoE call runs too
// (MoETable).
func (s *Source) moe(ops []model.Op, mods model.Modules, i int, a engine.Arch) (sim.Measured, Result, bool) {
	if ops[i].Role == model.RoleMoETopK {
		if i+1 >= len(ops) || ops[i+1].Role != model.RoleExpertsGateUp || ops[i+1].Layer != ops[i].Layer {
			return sim.Measured{}, Result{}, false
		}
		m, r, ok := s.moe(ops, mods, i+1, a)
		if !ok || m.First != i {
			return sim.Measured{}, Result{}, false
		}
		return m, r, true
	}
	mod, ok := mods.At(i, model.ModRoutedExperts)
	if !ok || mod.End > len(ops) {
		return sim.Measured{}, Result{}, false
	}
	first, last := mod.First, mod.End-1
	up, down := &ops[first], &ops[last]
	if up.Role != model.RoleExpertsGateUp || down.Role != model.RoleExpertsDown {
		return sim.Measured{}, Result{}, false
	}
	sh := up.MoE
	for j := first; j <= last; j++ {
		if ops[j].MoE != sh {
			return sim.Measured{}, Result{}, false
		}
	}
	if sh == nil {
		return sim.Measured{}, Result{}, false
	}
	dt := moeDtype(up.WeightDtype)
	if dt == "" || down.WeightDtype != up.WeightDtype || sh.LocalExperts < 1 || sh.Experts%sh.LocalExperts != 0 || up.N != 2*down.K {
		return sim.Measured{}, Result{}, false
	}
	t, err := s.sys.MoE(s.engine, s.version)
	if err != nil {
		s.fail(err)
		return sim.Measured{}, Result{}, false
	}
	dist, ok := t.DistributionOf(sh.Routing)
	if !ok {
		return sim.Measured{}, Result{}, false
	}
	k := MoEKey{Dtype: dt, Hidden: up.K, InterLocal: down.K, TopK: int64(sh.TopK), Experts: int64(sh.Experts),
		EP: int64(sh.Experts / sh.LocalExperts), Distribution: dist}
	if sh.RoutedTokens < 1 {
		return sim.Measured{}, Result{}, false
	}
	var asked string
	k.Kernel, asked, ok = s.moeKernel(t, k, up.WeightDtype, a)
	if !ok {
		return sim.Measured{}, Result{}, false
	}
	r, ok := t.Lookup(k, float64(sh.RoutedTokens))
	if !ok {
		return sim.Measured{}, Result{}, false
	}
	stand := s.standIn(asked)
	if asked != "" {
		s.noteStandIn("MoE, "+string(dt), k.Kernel, asked)
	}
	// The top-k selection right before the experts is in the measured
	// call (MoETable).
	if first > 0 && ops[first-1].Role == model.RoleMoETopK && ops[first-1].Layer == up.Layer {
		first--
	}
	return sim.Measured{Us: r.Us, First: first, Last: last, GapsIncluded: true, Where: s.where("moe_perf", k.String(), &r) + stand}, r, true
}

// The MLA module tables time one layer's attention from fused_qkv_a_proj
// to o_proj (aiconfigurator's MLA module: the projections, the latent
// norms, RoPE, the cache write, the attention kernel and the absorbed
// GEMMs in decode or kv_b_proj in prefill), with the input quantizations
// of FP8 block-scaled projections. mlaForms are the roles of the plain
// block in each phase, from the attention table (no DCP, no DSA
// indexer, no cached-prefix pass); a block holding any other op is not
// the measured module.
var mlaForms = [2]map[model.Role]bool{
	mlaForm(model.CondDecode), mlaForm(model.CondPrefill),
}

// mlaForm is the set of roles of the attention table from
// fused_qkv_a_proj's quantization to o_proj in the phase cond selects.
func mlaForm(phase model.Cond) map[model.Role]bool {
	form := map[model.Role]bool{}
	in := false
	for _, sl := range model.ModAttention.Select(model.CondTP | model.CondActQuant | phase) {
		if sl.Role == model.RoleFusedQKVAProj.ActQuant() {
			in = true
		}
		if in {
			form[sl.Role] = true
		}
		if sl.Role == model.RoleOProj {
			break
		}
	}
	return form
}

// mlaBlock finds the measured span of the MLA block op i belongs to:
// [first, last] from fused_qkv_a_proj (or its input quantization) to
// o_proj inside the schedule's model.ModAttention module, and whether it
// is the prefill form; ok false when op i is no member or the block is
// not one a module table measured (DCP collectives, DSA indexer ops,
// a chunk's cached-prefix pass, decode and prefill together).
func mlaBlock(ops []model.Op, mods model.Modules, i int) (first, last int, prefill, ok bool) {
	if ops[i].Kind == model.KindCollective {
		return 0, 0, false, false
	}
	mod, found := mods.At(i, model.ModAttention)
	if !found || mod.End > len(ops) {
		return 0, 0, false, false
	}
	first, last = -1, -1
	for j := mod.First; j < mod.End; j++ {
		switch ops[j].Role {
		case model.RoleFusedQKVAProjQuant, model.RoleFusedQKVAProj:
			if first < 0 {
				first = j
			}
		case model.RoleOProj:
			last = j
		case model.RoleMLAPrefill:
			prefill = true
		}
	}
	if first < 0 || last < first || i < first || i > last {
		return 0, 0, false, false
	}
	form := mlaForms[0]
	if prefill {
		form = mlaForms[1]
	}
	for j := first; j <= last; j++ {
		if !form[ops[j].Role] {
			return 0, 0, false, false
		}
	}
	return first, last, prefill, true
}

// mlaModule prices the MLA block op i belongs to from the module table:
// the rows of the attention backend the engine runs (mlaKernel), within
// the head counts the table measured, less the eager norm and rotary
// kernels of a module collected before aiconfigurator ran them fused
// (eagerNormUs).
func (s *Source) mlaModule(ops []model.Op, mods model.Modules, i int, a engine.Arch, dev *topology.Device) (sim.Measured, Result, bool) {
	first, last, prefill, ok := mlaBlock(ops, mods, i)
	if !ok {
		return sim.Measured{}, Result{}, false
	}
	// at is the block's op of role r (each is in the block once).
	at := func(r model.Role) *model.Op {
		for j := first; j <= last; j++ {
			if ops[j].Role == r {
				return &ops[j]
			}
		}
		return nil
	}
	fqa, qb, o := at(model.RoleFusedQKVAProj), at(model.RoleQBProj), at(model.RoleOProj)
	if fqa == nil || qb == nil {
		return sim.Measured{}, Result{}, false
	}
	var d MLADims
	var heads, batch, step float64
	var kvd model.Dtype
	if prefill {
		kvb, attn := at(model.RoleKVBProj), at(model.RoleMLAPrefill)
		if kvb == nil {
			return sim.Measured{}, Result{}, false
		}
		heads = attn.Batch
		if heads < 1 || attn.N < 1 || attn.M%attn.N != 0 {
			return sim.Measured{}, Result{}, false
		}
		h := int64(heads)
		d.Hidden, d.QLoraRank, d.KVLoraRank = fqa.K, qb.K, kvb.K
		d.QKRope = fqa.N - d.QLoraRank - d.KVLoraRank
		d.QKNope = attn.K - d.QKRope
		d.VHead = kvb.N/h - d.QKNope
		batch, step, kvd = float64(attn.M/attn.N), float64(attn.N), attn.KVDtype
		if kvb.N%h != 0 {
			return sim.Measured{}, Result{}, false
		}
	} else {
		uk, uv, attn := at(model.RoleWUK), at(model.RoleWUV), at(model.RoleMLADecode)
		if uk == nil || uv == nil || attn == nil {
			return sim.Measured{}, Result{}, false
		}
		heads = uk.Batch
		if heads < 1 || uv.Batch != heads || attn.Batch != heads {
			return sim.Measured{}, Result{}, false // DCP gathers heads: not the measured module
		}
		d.Hidden, d.QLoraRank, d.KVLoraRank, d.QKNope, d.VHead = fqa.K, qb.K, uk.N, uk.K, uv.N
		d.QKRope = attn.K - d.KVLoraRank
		// One query token per sequence: the sequences whose cache is read
		// (KV bytes / (cached tokens x latent x bytes per value)) equal
		// the tokens.
		kvd = attn.KVDtype
		per := float64(attn.N) * float64(attn.K) * kvd.BytesPerValue()
		if attn.N < 1 || per <= 0 || attn.M < 1 {
			return sim.Measured{}, Result{}, false
		}
		if seqs := attn.KVBytes / per; seqs < float64(attn.M)-0.5 || seqs > float64(attn.M)+0.5 {
			return sim.Measured{}, Result{}, false // speculative tokens: several queries per sequence
		}
		batch, step = float64(attn.M), float64(attn.N)+1
	}
	h := int64(heads)
	if float64(h) != heads || qb.N != h*(d.QKNope+d.QKRope) || o.K != h*d.VHead || o.N != d.Hidden ||
		fqa.N != d.QLoraRank+d.KVLoraRank+d.QKRope {
		return sim.Measured{}, Result{}, false
	}
	gt := gemmDtype(fqa.WeightDtype)
	if gt == "" || qb.WeightDtype != fqa.WeightDtype || o.WeightDtype != fqa.WeightDtype || kvDtype(kvd) == "" {
		return sim.Measured{}, Result{}, false
	}
	phase := Generation
	if prefill {
		phase = Context
	}
	t, err := s.sys.MLAModule(s.engine, s.version, phase)
	if err != nil {
		s.fail(err)
		return sim.Measured{}, Result{}, false
	}
	var cands []MLAKey
	for _, k := range t.Keys() {
		if k.MLADtype != "bfloat16" || k.KVDtype != kvDtype(kvd) || k.GEMMType != gt {
			continue
		}
		if dims, ok := DimsOf(k.Model); !ok || dims != d {
			continue
		}
		cands = append(cands, k)
	}
	k, asked, ok := s.mlaKernel(cands, kvd, int(d.QKNope), a)
	if !ok {
		return sim.Measured{}, Result{}, false
	}
	stand := s.standIn(asked)
	if lo, hi := t.HeadsRange(k); heads < lo || heads > hi {
		// Known bias: with an FP8 cache the rtx_pro_6000_server module
		// table has rows at 1 head only; holding their utilization out
		// to 8 or 16 heads prices projections and attention of another
		// shape. The same backend's BF16-cache rows stand in when they
		// cover the heads (the FP8 cache reads half the bytes: at 4K
		// tokens 2.4 MB a layer less, about 1.5 us on this GPU, so they
		// are slightly pessimistic at long context); else the module
		// keeps the priors.
		alt := k
		alt.KVDtype = "bfloat16"
		if lo2, hi2 := t.HeadsRange(alt); k.KVDtype != alt.KVDtype && heads >= lo2 && heads <= hi2 {
			s.note(fmt.Sprintf("%s: the %s MLA module rows (%s, kv %s) measure %g-%g local heads only; the kv bfloat16 rows stand in at %g heads", s.name, phase, k.Kernel, k.KVDtype, lo, hi, heads))
			k, stand = alt, stand+", kv bfloat16 rows standing in (kv "+k.KVDtype+" rows: "+fmt.Sprint(lo)+" head only)"
		} else {
			s.note(fmt.Sprintf("%s: the %s MLA module rows (%s, kv %s) measure %g-%g local heads only; %g-head modules keep the priors", s.name, phase, k.Kernel, k.KVDtype, lo, hi, heads))
			return sim.Measured{}, Result{}, false
		}
	}
	r, ok := t.Lookup(k, heads, batch, step)
	if !ok {
		return sim.Measured{}, Result{}, false
	}
	if asked != "" {
		s.noteStandIn(fmt.Sprintf("%s MLA module, kv %s", phase, kvDtype(kvd)), k.Kernel, asked)
	}
	key := k.Model + " kv " + k.KVDtype + " gemm " + k.GEMMType + " " + k.Kernel + stand
	us := r.Us
	if phase == Generation {
		if c := s.eagerNormUs(dev, batch, heads); c > 0 && c < us {
			us -= c
			key += fmt.Sprintf(", less %.1f us of eager norm and rotary kernels", c)
		}
	}
	return sim.Measured{Us: us, First: first, Last: last, GapsIncluded: true,
		Where: s.where("mla_"+string(phase)+"_module_perf", key, &r)}, r, true
}

// CollectiveCost implements sim.CollectiveSource: the NCCL table, or the
// engine's all-reduce table for its custom all-reduce, when the group's
// link class is this system's and its size was measured.
func (s *Source) CollectiveCost(q sim.CollectiveQuery) (sim.Measured, bool) {
	m, _, ok := s.collective(q)
	return m, ok
}

func (s *Source) collective(q sim.CollectiveQuery) (sim.Measured, Result, bool) {
	if string(q.Fabric) != string(s.sys.Spec.Fabric()) || q.Bytes <= 0 || q.Ranks < 2 {
		return sim.Measured{}, Result{}, false
	}
	if q.Custom {
		if q.Op != model.AllReduce {
			return sim.Measured{}, Result{}, false
		}
		t, err := s.sys.CustomAllReduce(s.engine, s.version)
		if err != nil {
			s.fail(err)
			return sim.Measured{}, Result{}, false
		}
		r, ok := t.Lookup(q.Ranks, float64(q.Bytes), q.Graphed)
		if !ok {
			return sim.Measured{}, Result{}, false
		}
		mode := "eager"
		if q.Graphed {
			mode = "graph"
		}
		return sim.Measured{Us: r.Us, GapsIncluded: true,
			Where: s.where("custom_allreduce_perf", fmt.Sprintf("%d GPUs %s", q.Ranks, mode), &r)}, r, true
	}
	if s.nccl == "" {
		return sim.Measured{}, Result{}, false
	}
	var op CollectiveOp
	switch q.Op {
	case model.AllReduce:
		op = OpAllReduce
	case model.AllGather:
		op = OpAllGather
	case model.ReduceScatter:
		op = OpReduceScatter
	case model.AllToAll:
		op = OpAllToAll
	default:
		return sim.Measured{}, Result{}, false
	}
	t, err := s.sys.NCCL(s.nccl)
	if err != nil {
		s.fail(err)
		return sim.Measured{}, Result{}, false
	}
	r, ok := t.Lookup(op, q.Ranks, float64(q.Bytes))
	if !ok {
		return sim.Measured{}, Result{}, false
	}
	where := s.where("nccl_perf", fmt.Sprintf("NCCL %s %s %d GPUs", s.nccl, op, q.Ranks), &r)
	where = strings.Replace(where, s.name, "perfdb "+s.sys.Name+"/nccl/"+s.nccl, 1)
	return sim.Measured{Us: r.Us, GapsIncluded: true, Where: where}, r, true
}
