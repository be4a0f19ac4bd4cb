package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/tpscope/tpscope/topology"
)

func TestCalibrateNCCLTests(t *testing.T) {
	out := filepath.Join(t.TempDir(), "box.json")
	code, stdout, errs := runCLI(t, "calibrate", "--nccl-tests", "../../calibrate/testdata/nccltests/all_reduce_perf_8x_pcie.txt", "--topo", "rtxpro6000-2s", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(stdout, "Simple") || !strings.Contains(stdout, "wrote "+out) {
		t.Errorf("report:\n%s", stdout)
	}
	tp, err := topology.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if tp.Calibration == nil || len(tp.Calibration.Collectives) == 0 || !strings.Contains(tp.Calibration.Source, "all_reduce_perf_8x_pcie.txt") {
		t.Errorf("calibration section: %+v", tp.Calibration)
	}
	if code, stdout, _ = runCLI(t, "collective", "--topo", out, "--sizes", "64K", "--output", "json"); code != 0 || !strings.Contains(stdout, `"calibrated": true`) {
		t.Errorf("calibrated topology not used by collective: exit %d\n%s", code, stdout)
	}
}

func TestCalibrateUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no mode", []string{"-o", "x.json"}, 2, "no measurements: pass one of "},
		{"no -o", []string{"--nccl-tests", "f.txt"}, 2, "-o FILE is required"},
		{"missing file", []string{"--nccl-tests", "does-not-exist.txt", "-o", "x.json"}, 2, "--nccl-tests does-not-exist.txt: no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errs := runCLI(t, append([]string{"calibrate"}, c.args...)...)
			if code != c.code || !strings.Contains(errs, c.want) || (c.name == "no mode" && !strings.Contains(errs, "--nccl-tests FILE")) {
				t.Errorf("exit %d, stderr %q; want %d containing %q", code, errs, c.code, c.want)
			}
		})
	}
}
