package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPredictBadFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"tp does not divide heads", []string{"predict", "--tp", "3"}, 2, "tp"},
		{"batch 0", []string{"predict", "--batch", "0"}, 2, "--batch 0: want an integer from 1"},
		{"bad nccl proto", []string{"predict", "--nccl-proto", "LLX"}, 2, "--nccl-proto LLX"},
		{"bad nccl algo", []string{"predict", "--nccl-algo", "Rign"}, 2, "--nccl-algo Rign"},
		{"unknown model", []string{"predict", "--model", "nope"}, 2, `unknown model "nope"`},
		{"unknown topology", []string{"predict", "--topo", "nope"}, 2, "--topo nope"},
		{"bad p2p level", []string{"predict", "--p2p-level", "FOO"}, 2, "--p2p-level"},
		{"bad custom ar", []string{"predict", "--custom-ar", "threeshot"}, 2, "--custom-ar"},
		{"bad output", []string{"predict", "--output", "xml"}, 2, "--output"},
		{"more gpus than the box", []string{"predict", "--tp", "8", "--gpus", "4"}, 2, "needs 8 GPUs"},
		// glm-5 (BF16) needs ~190 GB of weights per GPU at TP 8.
		{"does not fit", []string{"predict", "--model", "glm-5"}, 1, "does not fit in GPU memory: short by"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := dispatch(tc.args, &out, &errb)
			if code != tc.code || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d (want %d), stderr %q (want %q)", code, tc.code, errb.String(), tc.want)
			}
			if strings.Count(strings.TrimSpace(errb.String()), "\n") != 0 {
				t.Errorf("error is not one line: %q", errb.String())
			}
		})
	}
}

// The JSON holds the summary and one row per op whose times add up: the
// collective rows' us sum to comm_share x step_us.
func TestPredictJSON(t *testing.T) {
	var out, errb bytes.Buffer
	dir := t.TempDir()
	plot := filepath.Join(dir, "b.svg")
	code := dispatch([]string{"predict", "--kv-dtype", "bf16", "--cuda-graphs", "--nccl-proto", "LL", "--p2p-level", "SYS", "--output", "json", "--plot", plot}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got struct {
		StepUs     float64 `json:"step_us"`
		TokensPerS float64 `json:"tokens_per_s"`
		CommShare  float64 `json:"comm_share"`
		Ops        []struct {
			ID        string  `json:"id"`
			Kind      string  `json:"kind"`
			Bound     string  `json:"bound"`
			Us        float64 `json:"us"`
			FLOPs     float64 `json:"flops"`
			Bytes     float64 `json:"bytes"`
			CommBytes int64   `json:"comm_bytes"`
		} `json:"ops"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.StepUs <= 0 || got.TokensPerS <= 0 || len(got.Ops) == 0 {
		t.Fatalf("empty prediction: %+v", got)
	}
	comm := 0.0
	for _, o := range got.Ops {
		if o.ID == "" || o.Kind == "" || o.Bound == "" {
			t.Fatalf("op row without id/kind/bound: %+v", o)
		}
		if o.Kind == "collective" {
			comm += o.Us
		}
	}
	if d := comm/got.StepUs - got.CommShare; d > 1e-9 || d < -1e-9 {
		t.Errorf("collective rows sum to %.1f us = %.4f of the step, comm_share %.4f", comm, comm/got.StepUs, got.CommShare)
	}
	if fi, err := os.Stat(plot); err != nil || fi.Size() == 0 {
		t.Errorf("plot not written: %v", err)
	}
}
