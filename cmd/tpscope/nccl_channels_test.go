package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestNCCLChannelFlags: --nccl-min-channels and --nccl-max-channels
// (NCCL_MIN_NCHANNELS / NCCL_MAX_NCHANNELS) are one definition, sim's
// option codec, on every verb that has --nccl-proto; predict prints them
// on its options line and records them in its JSON; a count NCCL does
// not run is one line naming the flag, before any work.
func TestNCCLChannelFlags(t *testing.T) {
	for _, verb := range []string{"predict", "plan", "advise", "simulate", "schedule", "run", "verdict", "compare", "report", "calibrate", "collective"} {
		code, out, errs := runCLI(t, verb, "--help")
		if code != 0 {
			t.Fatalf("%s --help: exit %d: %s", verb, code, errs)
		}
		for _, f := range []string{"--nccl-proto", "--nccl-min-channels int", "--nccl-max-channels int"} {
			if !strings.Contains(out, f) {
				t.Errorf("%s --help lacks %s", verb, f)
			}
		}
	}
	if l := predictLines(t, "--nccl-min-channels", "8", "--nccl-max-channels", "16"); !strings.Contains(l["options"], "nccl-max-channels=16 nccl-min-channels=8") {
		t.Errorf("options %q: want nccl-max-channels=16 nccl-min-channels=8", l["options"])
	}
	opts, _ := predictJSONObject(t, "--nccl-min-channels", "8")["options"].(map[string]any)
	if nccl, _ := opts["nccl"].(map[string]any); nccl["min_channels"] != 8.0 {
		t.Errorf("JSON options %v: want nccl.min_channels 8", opts)
	}
	const want = "want 1 to 64 channels (NCCL's MAXCHANNELS), or unset for NCCL's own count"
	for _, c := range []struct{ args []string }{
		{[]string{"predict", "--nccl-min-channels", "0"}},
		{[]string{"predict", "--nccl-max-channels", "65"}},
		{[]string{"collective", "--nccl-max-channels", "eight"}},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(stderr, "--"+strings.TrimPrefix(c.args[1], "--")) || !strings.Contains(stderr, want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q; want one usage line naming the flag and %q", c.args, code, stderr, want)
		}
	}
}

// TestCollectiveChannels: collective prices the ring at the channels the
// flags set and says how many ran. The dual-socket box at 32 MiB, P2P
// SYS, NCCL's Simple ring: 8 channels of 11.1 GB/s are above the socket
// link's 45 GB/s, so busBw 45; latency 8.4 + 14 x (5.7 + 0.4) = 93.8 us;
// time = 93.8 + 32 MiB / (1000 x 45 x 8/14) us, busbw = 32 MiB / time x
// 14/8 = 41.98 GB/s.
func TestCollectiveChannels(t *testing.T) {
	code, out, errs := runCLI(t, "collective", "--topo", "rtxpro6000-2s", "--sizes", "32M", "--p2p-level", "SYS", "--nccl-min-channels", "8", "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var got struct {
		Options struct {
			MinChannels int `json:"min_channels"`
		} `json:"options"`
		Rows []struct {
			TimeUs   float64 `json:"time_us"`
			Busbw    float64 `json:"busbw_GBps"`
			Proto    string  `json:"proto"`
			Channels int     `json:"channels"`
		} `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	const b = 32 << 20
	wantUs := 93.8 + b/(1000*45*8.0/14)
	if got.Options.MinChannels != 8 || len(got.Rows) != 1 || got.Rows[0].Channels != 8 || got.Rows[0].Proto != "Simple" ||
		math.Abs(got.Rows[0].TimeUs/wantUs-1) > 1e-6 || math.Abs(got.Rows[0].Busbw/(b/(1000*wantUs)*14/8)-1) > 1e-6 {
		t.Errorf("got %+v; want 8 channels, Simple, %.2f us", got, wantUs)
	}
	code, out, _ = runCLI(t, "collective", "--topo", "rtxpro6000-2s", "--sizes", "32M", "--p2p-level", "SYS", "--nccl-min-channels", "8")
	if code != 0 || !strings.Contains(out, "NCCL_P2P_LEVEL=SYS NCCL_MIN_NCHANNELS=8)") {
		t.Errorf("title of\n%s\nwant it to name NCCL_MIN_NCHANNELS=8", out)
	}
}
