package cuda

import (
	"os"
	"testing"
)

// ncclTestKeys are the variables the cases below set or expect.
var ncclTestKeys = []string{"NCCL_PROTO", "NCCL_ALGO", "NCCL_P2P_LEVEL", "NCCL_P2P_DISABLE", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", runtimeConnectEnv, "NCCL_SOCKET_IFNAME"}

// unset marks a variable that is not in the environment.
const unset = "\x00unset"

// setEnvState makes the environment hold exactly state for ncclTestKeys
// (unset for keys it lacks) and puts the test process's own values back at
// the end.
func setEnvState(t *testing.T, state map[string]string) {
	t.Helper()
	for _, k := range ncclTestKeys {
		old, had := os.LookupEnv(k)
		t.Cleanup(func() {
			if had {
				os.Setenv(k, old)
			} else {
				os.Unsetenv(k)
			}
		})
		if v, ok := state[k]; ok && v != unset {
			os.Setenv(k, v)
		} else {
			os.Unsetenv(k)
		}
	}
}

func envState() map[string]string {
	m := map[string]string{}
	for _, k := range ncclTestKeys {
		if v, ok := os.LookupEnv(k); ok {
			m[k] = v
		} else {
			m[k] = unset
		}
	}
	return m
}

// TestApplyEnvRestores: a session's NCCL settings hold from Open to Close
// and no longer; what the process had before comes back (unset where it
// was unset), NCCL_RUNTIME_CONNECT's default included; and a second
// session opened after the first sees none of the first's settings.
func TestApplyEnvRestores(t *testing.T) {
	cases := []struct {
		name   string
		before map[string]string
		env    map[string]string
		during map[string]string // keys not listed: as before
	}{
		{name: "clean process, LL",
			env:    map[string]string{"NCCL_PROTO": "LL"},
			during: map[string]string{"NCCL_PROTO": "LL", runtimeConnectEnv: "0"}},
		{name: "user values are overridden, then put back",
			before: map[string]string{"NCCL_PROTO": "Simple", "NCCL_SOCKET_IFNAME": "lo"},
			env:    map[string]string{"NCCL_PROTO": "LL128", "NCCL_P2P_LEVEL": "SYS"},
			during: map[string]string{"NCCL_PROTO": "LL128", "NCCL_P2P_LEVEL": "SYS", runtimeConnectEnv: "0"}},
		{name: "runtime connect set by the user is kept",
			before: map[string]string{runtimeConnectEnv: "1"},
			env:    map[string]string{"NCCL_P2P_DISABLE": "1"},
			during: map[string]string{"NCCL_P2P_DISABLE": "1"}},
		{name: "runtime connect from the settings",
			env:    map[string]string{runtimeConnectEnv: "1", "NCCL_ALGO": "Ring"},
			during: map[string]string{runtimeConnectEnv: "1", "NCCL_ALGO": "Ring"}},
		{name: "channel counts",
			before: map[string]string{"NCCL_MAX_NCHANNELS": "4"},
			env:    map[string]string{"NCCL_MIN_NCHANNELS": "8", "NCCL_MAX_NCHANNELS": "16"},
			during: map[string]string{"NCCL_MIN_NCHANNELS": "8", "NCCL_MAX_NCHANNELS": "16", runtimeConnectEnv: "0"}},
		{name: "keys outside NCCL_ are ignored",
			env:    map[string]string{"CUDA_VISIBLE_DEVICES": "3"},
			during: map[string]string{runtimeConnectEnv: "0"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			setEnvState(t, tc.before)
			before := envState()
			cvd, cvdSet := os.LookupEnv("CUDA_VISIBLE_DEVICES")
			restore := applyEnv(tc.env)
			if v, ok := os.LookupEnv("CUDA_VISIBLE_DEVICES"); v != cvd || ok != cvdSet {
				t.Errorf("CUDA_VISIBLE_DEVICES = %q during the session, want it untouched (%q)", v, cvd)
			}
			got := envState()
			for _, k := range ncclTestKeys {
				want := before[k]
				if v, ok := tc.during[k]; ok {
					want = v
				}
				if got[k] != want {
					t.Errorf("during the session %s = %q, want %q", k, got[k], want)
				}
			}
			restore()
			after := envState()
			for _, k := range ncclTestKeys {
				if after[k] != before[k] {
					t.Errorf("after the session %s = %q, want %q as before", k, after[k], before[k])
				}
			}
		})
	}
	t.Run("sequence", func(t *testing.T) {
		setEnvState(t, nil)
		first := applyEnv(map[string]string{"NCCL_PROTO": "LL", "NCCL_P2P_LEVEL": "SYS"})
		first()
		second := applyEnv(map[string]string{"NCCL_ALGO": "Tree"})
		defer second()
		for k, want := range map[string]string{"NCCL_PROTO": unset, "NCCL_P2P_LEVEL": unset, "NCCL_ALGO": "Tree"} {
			if got := envState()[k]; got != want {
				t.Errorf("second session %s = %q, want %q", k, got, want)
			}
		}
	})
}
