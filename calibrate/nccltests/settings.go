package nccltests

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/topology"
)

// What a log records beside its rows: the NCCL settings the run had and
// whether its ranks were tpscope's CPU goroutines. A fit needs both: a
// calibration applies only under the settings it was measured with, and
// CPU ranks' times are no GPU box's.

// CPURankDevice is the device name tpscope's collective --measure writes
// on the rank lines of a log measured on its CPU backend (goroutine ranks
// sharing host memory, not GPUs).
const CPURankDevice = "CPU goroutine rank (tpscope exec/cpu)"

// CPURanksComment starts the header comment tpscope's collective
// --measure writes on a log of its CPU backend ("CPU ranks: 4 goroutines
// sharing 2 cores ...").
const CPURanksComment = "CPU ranks:"

// settingsComment starts the header comment that records the NCCL
// settings of a log tpscope wrote (SettingsComment).
const settingsComment = "NCCL settings:"

// defaultsText is SettingsComment's spelling of NCCL's defaults.
const defaultsText = "NCCL's defaults"

// SettingsComment is the header comment that records the NCCL settings
// a run had, as the reader takes it back: "NCCL settings: NCCL's
// defaults" or "NCCL settings: NCCL_P2P_LEVEL=SYS NCCL_PROTO=LL" (the
// variables in NCCL's spelling, sorted).
func SettingsComment(s ncclenv.Settings) string {
	env := s.Env()
	if len(env) == 0 {
		return settingsComment + " " + defaultsText
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		kv = append(kv, k+"="+env[k])
	}
	return settingsComment + " " + strings.Join(kv, " ")
}

// SettingVars are the NCCL variables a log's settings are read for: those
// ncclenv.Settings models (ncclenv.Vars). Other NCCL variables a log names
// (the socket interface, the IB HCAs) do not enter the collective model.
var SettingVars = ncclenv.Vars

var (
	// reEnvInfo is NCCL's line for a variable read from the environment
	// under NCCL_DEBUG=INFO ("host:pid:tid [0] NCCL INFO NCCL_PROTO set by
	// environment to Simple").
	reEnvInfo = regexp.MustCompile(`NCCL INFO (NCCL_[A-Z0-9_]+) set by environment to (.*)$`)
	// reEnvPair is one NAME=VALUE of SettingsComment or of nccl-tests
	// JSON's "env" list.
	reEnvPair = regexp.MustCompile(`^(NCCL_[A-Z0-9_]+)=(.*)$`)
)

// settingsReader collects the settings a log records into its Log.
type settingsReader struct {
	lg     *Log
	values map[string]string // as first recorded, by variable
}

// record notes that the log says variable env had value v ("" for NCCL's
// default) at line; a variable the collective model does not read is
// passed over. Two different values of one variable are an error: a log
// of one run has one setting, and fitting both as one would label half
// the times with the wrong one.
func (r *settingsReader) record(env, v string, line int) error {
	if !slices.Contains(SettingVars, env) {
		return nil
	}
	v = strings.TrimSpace(v)
	if r.values == nil {
		r.values = map[string]string{}
		r.lg.NCCLRecorded = map[string]int{}
	}
	if was, ok := r.values[env]; ok {
		if !SameSetting(env, was, v) {
			return &ParseError{r.lg.Name, max(line, 1), fmt.Errorf("%w: %s is %s here and %s at line %d: a log of one run has one NCCL setting (split the file or rerun)",
				ErrMixed, env, settingText(v), settingText(was), r.lg.NCCLRecorded[env])}
		}
		return nil
	}
	if err := setSetting(&r.lg.NCCL, env, v); err != nil {
		return &ParseError{r.lg.Name, max(line, 1), err}
	}
	r.values[env] = v
	r.lg.NCCLRecorded[env] = line
	return nil
}

// comment reads a header comment (without its '#'): SettingsComment's
// line records every variable of SettingVars; CPURanksComment marks CPU
// ranks.
func (r *settingsReader) comment(text string, line int) error {
	text = strings.TrimSpace(text)
	if strings.HasPrefix(text, CPURanksComment) {
		r.lg.CPURanks = true
	}
	rest, ok := strings.CutPrefix(text, settingsComment)
	if !ok {
		return nil
	}
	rest = strings.TrimSpace(rest)
	given := map[string]string{}
	if rest != defaultsText {
		for _, f := range strings.Fields(rest) {
			m := reEnvPair.FindStringSubmatch(f)
			if m == nil {
				return &ParseError{r.lg.Name, max(line, 1), fmt.Errorf("%q: want %q or NCCL_NAME=VALUE pairs", text, settingsComment+" "+defaultsText)}
			}
			given[m[1]] = m[2]
		}
	}
	// The line names every variable that was set: the others had NCCL's
	// default.
	for _, env := range SettingVars {
		if err := r.record(env, given[env], line); err != nil {
			return err
		}
	}
	return nil
}

// info reads a line that is not a comment for NCCL's "set by
// environment" message.
func (r *settingsReader) info(text string, line int) error {
	if m := reEnvInfo.FindStringSubmatch(text); m != nil {
		v := m[2]
		if paramVar(m[1]) {
			// NCCL's integer parameters end the line with a period
			// (src/misc/param.cc ncclLoadParam: "%s set by environment
			// to %lld.").
			v = strings.TrimSuffix(strings.TrimSpace(v), ".")
		}
		return r.record(m[1], v, line)
	}
	return nil
}

// paramVar reports whether NCCL reads env as an NCCL_PARAM integer.
func paramVar(env string) bool {
	return env == ncclenv.EnvMinChannels || env == ncclenv.EnvMaxChannels
}

// devices marks CPU ranks by the device names of the rank lines.
func (r *settingsReader) devices(names []string) {
	if slices.Contains(names, CPURankDevice) {
		r.lg.CPURanks = true
	}
}

// setSetting sets variable env of s to v as NCCL reads it
// (ncclenv.Settings.SetEnv), or says why v is not a value NCCL takes.
func setSetting(s *ncclenv.Settings, env, v string) error {
	if err := s.SetEnv(env, v); err != nil {
		return err
	}
	if err := s.Validate(); err != nil {
		return fmt.Errorf("%s=%s: %w", env, v, err)
	}
	return nil
}

// SameSetting reports whether two values of NCCL variable env ask NCCL
// for the same thing ("" is NCCL's default): a P2P level by the level it
// names ("" is PXB, "4" SYS), NCCL_P2P_DISABLE by on or off, the channel
// counts by the integer NCCL reads, the
// protocol and algorithm lists without regard to case or spaces.
func SameSetting(env, a, b string) bool {
	switch env {
	case ncclenv.EnvP2PLevel:
		la, ea := topology.ParseP2PLevel(a)
		lb, eb := topology.ParseP2PLevel(b)
		if ea == nil && eb == nil {
			return la == lb
		}
	case ncclenv.EnvP2PDisable, ncclenv.EnvMinChannels, ncclenv.EnvMaxChannels:
		// Integers: by the value NCCL reads ("8" and "0x8" alike).
		var sa, sb ncclenv.Settings
		ea, eb := sa.SetEnv(env, a), sb.SetEnv(env, b)
		if ea == nil && eb == nil {
			return sa == sb
		}
	}
	norm := func(s string) string { return strings.ToUpper(strings.ReplaceAll(s, " ", "")) }
	return norm(a) == norm(b)
}

// settingText is a recorded value as a message says it.
func settingText(v string) string {
	if v == "" {
		return "unset (NCCL's default)"
	}
	return v
}
