package main

import (
	"encoding/json"
	"testing"

	"github.com/tpscope/tpscope/internal/topofiletest"
	"github.com/tpscope/tpscope/sim"
	"github.com/tpscope/tpscope/topology"
)

// boxWithMem writes the box desc as a topology file whose GPU has memBytes
// of memory: the box predict prices where model show is asked for
// --gpu-mem-gb.
func boxWithMem(t *testing.T, desc string, memBytes int64) string {
	t.Helper()
	top, err := topology.Resolve(desc, 0)
	if err != nil {
		t.Fatal(err)
	}
	src := topofiletest.Write(t, top, "box.json")
	return topofiletest.EditDevice(t, src, "box-mem.json", func(dev map[string]any) { dev["mem_bytes"] = memBytes })
}

// TestModelShowLimitsAtGivenMemory: vLLM's default step budget and
// running limit follow the GPU's memory (EngineArgs.get_batch_defaults:
// 8,192 tokens and 1,024 sequences on a GPU of 70 GiB or more not named
// A100, else 2,048 and 256), and vLLM refuses a budget below the running
// limit at start-up. model show sized its pool at --gpu-mem-gb but
// checked --max-num-seqs against the box's GPU's defaults:
//
//   - 8 x H200 (140 GiB) with --gpu-mem-gb 60 (55.9 GiB) and
//     --max-num-seqs 4096 printed a pool whose profiling step was 2,048
//     tokens and 4,096 sequences, a server vLLM refuses; it is refused,
//     naming the 2,048-token default, as predict refuses it on a box of
//     that GPU.
//   - 8 x L40S (44.4 GiB) with --gpu-mem-gb 96 (89.4 GiB) and
//     --max-num-seqs 4096 was refused against the L40S's 2,048-token
//     default, where vLLM on a 96 GB GPU takes 8,192 tokens and starts; it
//     runs, with the pool predict gives on a box of that GPU.
func TestModelShowLimitsAtGivenMemory(t *testing.T) {
	const mem60, mem96 = int64(60e9), int64(96e9)
	oneLineUsage(t, []string{"model", "show", "tiny-mla-moe", "--topo", "h200-nvswitch", "--tp", "8", "--gpu-mem-gb", "60", "--max-num-seqs", "4096"},
		"--max-num-seqs 4096", "max_num_batched_tokens (2048,", "refuses")
	oneLineUsage(t, []string{"predict", "--model", "tiny-mla-moe", "--topo", boxWithMem(t, "nvswitch:8xh200-sxm", mem60), "--tp", "8", "--max-num-seqs", "4096"},
		"--max-num-seqs 4096", "max_num_batched_tokens (2048,")

	args := []string{"--model", "tiny-mla-moe", "--tp", "8", "--max-num-seqs", "4096", "--output", "json"}
	code, out, errs := runCLI(t, append([]string{"model", "show", "--topo", "pcie-2s:8xl40s", "--gpu-mem-gb", "96"}, args...)...)
	if code != 0 {
		t.Fatalf("model show on L40S at --gpu-mem-gb 96: exit %d: %s", code, errs)
	}
	var sh struct {
		Tokens int64        `json:"kv_capacity_tokens"`
		Budget sim.KVBudget `json:"kv_budget"`
	}
	if err := json.Unmarshal([]byte(out), &sh); err != nil {
		t.Fatal(err)
	}
	if sh.Budget.ProfileTokens != 8192 || sh.Budget.ProfileSeqs != 4096 {
		t.Errorf("model show at 96 GB: profiling step %d tokens, %d sequences; want 8192 (vLLM's default at 70 GiB or more) and 4096", sh.Budget.ProfileTokens, sh.Budget.ProfileSeqs)
	}
	code, out, errs = runCLI(t, append([]string{"predict", "--topo", boxWithMem(t, "pcie-2s:8xl40s", mem96)}, args...)...)
	if code != 0 {
		t.Fatalf("predict on an L40S box of 96 GB: exit %d: %s", code, errs)
	}
	var pr struct {
		Memory struct {
			Tokens int64        `json:"kv_capacity_tokens"`
			Budget sim.KVBudget `json:"kv_budget"`
		} `json:"memory"`
	}
	if err := json.Unmarshal([]byte(out), &pr); err != nil {
		t.Fatal(err)
	}
	if pr.Memory.Budget.ProfileTokens != sh.Budget.ProfileTokens || pr.Memory.Budget.ProfileSeqs != sh.Budget.ProfileSeqs || pr.Memory.Tokens != sh.Tokens {
		t.Errorf("model show at --gpu-mem-gb 96: %d tokens, step %d x %d; predict on a 96 GB GPU: %d tokens, step %d x %d",
			sh.Tokens, sh.Budget.ProfileTokens, sh.Budget.ProfileSeqs, pr.Memory.Tokens, pr.Memory.Budget.ProfileTokens, pr.Memory.Budget.ProfileSeqs)
	}
}
