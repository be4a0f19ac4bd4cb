package nccltests

import (
	"bytes"
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/ncclenv"
)

// withLines is allGather2 with lines inserted after its rank lines (line 5).
func withLines(lines ...string) string {
	ls := strings.Split(allGather2, "\n")
	out := append([]string{}, ls[:5]...)
	out = append(out, lines...)
	return strings.Join(append(out, ls[5:]...), "\n")
}

// TestParseSettings: the NCCL settings a log records are read, each with
// the line that records it: NCCL's "set by environment" lines under
// NCCL_DEBUG=INFO (as in exec/cuda/testdata/h100/verdict-nccl-0536-
// nccl-env.log, one per process: repeats agree), tpscope's "# NCCL
// settings:" comment (which records all four variables, the unnamed ones
// at NCCL's default), and nccl-tests JSON's "env" list. A variable the
// model does not read (NCCL_SOCKET_IFNAME) is passed over; one a log does
// not name is not recorded.
func TestParseSettings(t *testing.T) {
	all := func(line int) map[string]int {
		return map[string]int{ncclenv.EnvProto: line, ncclenv.EnvAlgo: line, ncclenv.EnvP2PLevel: line, ncclenv.EnvP2PDisable: line,
			ncclenv.EnvMinChannels: line, ncclenv.EnvMaxChannels: line}
	}
	for _, tc := range []struct {
		name     string
		text     string
		want     ncclenv.Settings
		recorded map[string]int
	}{
		{"NCCL INFO lines", withLines(
			"vm:710:733 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eno1",
			"vm:710:733 [0] NCCL INFO NCCL_PROTO set by environment to LL",
			"vm:711:728 [1] NCCL INFO NCCL_PROTO set by environment to LL",
			"vm:710:733 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to SYS"),
			ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"}, map[string]int{ncclenv.EnvProto: 7, ncclenv.EnvP2PLevel: 9}},
		{"P2P disabled", withLines("vm:710:733 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1"),
			ncclenv.Settings{P2PDisable: true}, map[string]int{ncclenv.EnvP2PDisable: 6}},
		{"tpscope's comment", "# NCCL settings: NCCL_P2P_LEVEL=SYS\n" + allGather2,
			ncclenv.Settings{P2PLevel: "SYS"}, all(1)},
		// NCCL's integer parameters: "%s set by environment to %lld."
		// (src/misc/param.cc ncclLoadParam), a period after the number.
		{"channel counts", withLines(
			"vm:710:733 [0] NCCL INFO NCCL_MIN_NCHANNELS set by environment to 8.",
			"vm:711:728 [1] NCCL INFO NCCL_MIN_NCHANNELS set by environment to 8.",
			"vm:710:733 [0] NCCL INFO NCCL_MAX_NCHANNELS set by environment to 16."),
			ncclenv.Settings{MinChannels: 8, MaxChannels: 16}, map[string]int{ncclenv.EnvMinChannels: 6, ncclenv.EnvMaxChannels: 8}},
		{"tpscope's comment, channels", "# NCCL settings: NCCL_MIN_NCHANNELS=8 NCCL_P2P_LEVEL=SYS\n" + allGather2,
			ncclenv.Settings{P2PLevel: "SYS", MinChannels: 8}, all(1)},
		{"tpscope's comment, defaults", "# NCCL settings: NCCL's defaults\n" + allGather2,
			ncclenv.Settings{}, all(1)},
		{"nothing recorded", allGather2, ncclenv.Settings{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lg, err := Parse(strings.NewReader(tc.text), "log.txt")
			if err != nil {
				t.Fatal(err)
			}
			if lg.NCCL != tc.want || !maps.Equal(lg.NCCLRecorded, tc.recorded) || lg.CPURanks {
				t.Errorf("settings %+v recorded %v CPU ranks %v; want %+v, %v, false", lg.NCCL, lg.NCCLRecorded, lg.CPURanks, tc.want, tc.recorded)
			}
		})
	}
}

// TestParseSettingsRefused: one run has one setting, so a log recording
// two values of one variable is ErrMixed naming both lines; a value NCCL
// does not take is an error naming its line.
func TestParseSettingsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, text, want string
		mixed            bool
	}{
		{"two protocols", withLines(
			"vm:710:733 [0] NCCL INFO NCCL_PROTO set by environment to LL",
			"vm:752:755 [0] NCCL INFO NCCL_PROTO set by environment to Simple"),
			"log.txt:7: more than one nccl-tests run: NCCL_PROTO is Simple here and LL at line 6", true},
		{"comment against INFO", "# NCCL settings: NCCL's defaults\n" + withLines("vm:1:1 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to SYS"),
			"log.txt:7: more than one nccl-tests run: NCCL_P2P_LEVEL is SYS here and unset (NCCL's default) at line 1", true},
		{"bad level", withLines("vm:1:1 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to FAR"),
			"log.txt:6: NCCL_P2P_LEVEL=FAR: nccl.p2p_level: NCCL_P2P_LEVEL \"FAR\"", false},
		{"bad disable", withLines("vm:1:1 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to yes"),
			"log.txt:6: NCCL_P2P_DISABLE=yes: want an integer", false},
		{"no channels", withLines("vm:1:1 [0] NCCL INFO NCCL_MAX_NCHANNELS set by environment to 0."),
			"log.txt:6: NCCL_MAX_NCHANNELS=0: want 1 to 64 channels", false},
		{"two minimums", withLines(
			"vm:1:1 [0] NCCL INFO NCCL_MIN_NCHANNELS set by environment to 8.",
			"vm:2:2 [0] NCCL INFO NCCL_MIN_NCHANNELS set by environment to 16."),
			"log.txt:7: more than one nccl-tests run: NCCL_MIN_NCHANNELS is 16 here and 8 at line 6", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.text), "log.txt")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || errors.Is(err, ErrMixed) != tc.mixed {
				t.Errorf("error %v; want one starting %q (ErrMixed %v)", err, tc.want, tc.mixed)
			}
		})
	}
}

// TestSettingsRoundTrip: what tpscope writes of a run (SettingsComment,
// CPURankDevice on the rank lines, CPURanksComment) reads back as the
// same settings and as CPU ranks, in text and in -J JSON; nccl-tests
// JSON's own "env" list is read too.
func TestSettingsRoundTrip(t *testing.T) {
	s := ncclenv.Settings{Proto: "LL", Algo: "Ring", P2PLevel: "SYS", P2PDisable: true, MinChannels: 8, MaxChannels: 16}
	row, err := NewRow("allreduce", 2, 1024, 4, "float", 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name  string
		write func(*bytes.Buffer, *Log, WriteOptions) error
	}{
		{"text", func(b *bytes.Buffer, lg *Log, o WriteOptions) error { return Write(b, lg, o) }},
		{"json", func(b *bytes.Buffer, lg *Log, o WriteOptions) error { return WriteJSON(b, lg, o) }},
	} {
		for _, cpu := range []bool{false, true} {
			lg := &Log{Name: "all_reduce_perf", Op: "allreduce", Ranks: 2, Rows: []Row{row}, Devices: []string{"NVIDIA H200", "NVIDIA H200"}}
			if cpu {
				lg.Devices = []string{CPURankDevice, CPURankDevice}
			}
			var b bytes.Buffer
			if err := w.write(&b, lg, WriteOptions{Comments: []string{SettingsComment(s)}}); err != nil {
				t.Fatal(err)
			}
			back, err := Parse(&b, "all_reduce_perf."+w.name)
			if err != nil {
				t.Fatal(err)
			}
			if back.NCCL != s || len(back.NCCLRecorded) != len(ncclenv.Vars) || back.CPURanks != cpu {
				t.Errorf("%s, CPU ranks %v: read back %+v (recorded %v), CPU ranks %v", w.name, cpu, back.NCCL, back.NCCLRecorded, back.CPURanks)
			}
		}
	}
	// The CPU-ranks comment alone marks the log too.
	lg, err := Parse(strings.NewReader("# "+CPURanksComment+" 4 goroutines sharing 2 cores\n"+allGather2), "log.txt")
	if err != nil || !lg.CPURanks {
		t.Errorf("CPU-ranks comment: %v, CPU ranks %v", err, lg != nil && lg.CPURanks)
	}
	// nccl-tests -J's env list.
	j := `{"version":3,"args":["./all_reduce_perf"],"env":["NCCL_DEBUG=INFO","NCCL_PROTO=Simple"],"config":{"nthreads":1,"ngpus":2,"devices":[{"device_info":"NVIDIA H200"}]},` +
		`"results":[{"size":1024,"count":256,"type":"float","redop":"sum","root":"-1","out_of_place":{"time":10,"alg_bw":0.1,"bus_bw":0.1}}],"errors":[]}`
	lg, err = Parse(strings.NewReader(j), "all_reduce_perf.json")
	if err != nil {
		t.Fatal(err)
	}
	if lg.NCCL != (ncclenv.Settings{Proto: "Simple"}) || !maps.Equal(lg.NCCLRecorded, map[string]int{ncclenv.EnvProto: 0}) {
		t.Errorf("JSON env: %+v recorded %v", lg.NCCL, lg.NCCLRecorded)
	}
}
