package main

import (
	"strings"
	"testing"
)

// oneLineUsage runs args, wants exit 2 and a one-line error holding
// every one of wants, and returns the line.
func oneLineUsage(t *testing.T, args []string, wants ...string) string {
	t.Helper()
	code, out, stderr := runCLI(t, args...)
	line := strings.TrimRight(stderr, "\n")
	if code != 2 || strings.Contains(line, "\n") || out != "" {
		t.Fatalf("%v: exit %d, stdout %q, stderr %q: want exit 2 and one line", args, code, out, stderr)
	}
	for _, w := range wants {
		if !strings.Contains(line, w) {
			t.Errorf("%v: %q does not say %q", args, line, w)
		}
	}
	return line
}

// TestOverlapRefusedWhereNothingOverlaps: --overlap puts collectives on
// a second stream so they overlap compute the schedule marks independent
// of them, but every op of the schedules tpscope builds waits for the op
// before it on its rank: the flag priced nothing (the step's time did
// not move; only its idle line dropped to 0 us) while the options line
// said "overlap". Each verb that prices a step refuses it in one line.
func TestOverlapRefusedWhereNothingOverlaps(t *testing.T) {
	for _, args := range [][]string{
		{"predict", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--overlap"},
		{"predict", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--tp", "4", "--dp", "2", "--ep", "--overlap"},
		{"simulate", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--qps", "1", "--requests", "20", "--overlap"},
		{"plan", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--gpus", "8", "--plan", "tp8,tp4-dp2-ep", "--context", "1024", "--overlap"},
	} {
		oneLineUsage(t, args, "--overlap", "overlap nothing")
	}
}

// TestNoPrefixCachingNeedsReusablePrompts: --no-enable-prefix-caching
// turns off the reuse of prompt blocks named by hash IDs or sessions,
// which only a request trace carries. On drawn lengths, a measured
// benchmark's levels or a trace without them it changed nothing (the
// same table, nothing said); it is refused there in one line, and still
// taken (and moves the prefix-cache line) on Mooncake's trace, whose
// requests name their blocks.
func TestNoPrefixCachingNeedsReusablePrompts(t *testing.T) {
	base := []string{"simulate", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--timeline", "0", "--no-enable-prefix-caching"}
	oneLineUsage(t, append(base, "--qps", "1", "--requests", "20"), "--no-enable-prefix-caching", "hash IDs or sessions")
	oneLineUsage(t, append(base, "--requests-file", "../../serving/testdata/traces/azure-llm-inference-2023/AzureLLMInferenceTrace_conv.first3000.csv", "--requests", "20"),
		"--no-enable-prefix-caching", "hash IDs or sessions")
	mooncake := []string{"--requests-file", "../../serving/testdata/traces/mooncake-fast25/conversation_trace.first1000.jsonl", "--requests", "40", "--replay-qps", "0.5"}
	code, out, stderr := runCLI(t, append(base, mooncake...)...)
	if code != 0 || strings.Contains(out, "prefix cache:") {
		t.Errorf("mooncake without prefix caching: exit %d, stderr %q; a prefix-cache line in %q", code, stderr, out)
	}
	code, out, stderr = runCLI(t, append(base[:len(base)-1], mooncake...)...)
	if code != 0 || !strings.Contains(out, "prefix cache:") {
		t.Errorf("mooncake with prefix caching: exit %d, stderr %q; no prefix-cache line in %q", code, stderr, out)
	}
}

// TestCollectiveCustomARTakesNoNCCLSettings: --custom-ar prices vLLM's
// custom all-reduce over P2P (or torch's multimem one), which runs no
// NCCL, so --nccl-proto, --nccl-algo and the channel counts priced
// nothing beside it while the title line printed them as the conditions
// of the table (NCCL_PROTO="LL" ... custom=oneshot). Each is refused in
// one line; alone, or with the box's --p2p-level (the README's idiom of
// one command with and without --custom-ar), --custom-ar still prices.
func TestCollectiveCustomARTakesNoNCCLSettings(t *testing.T) {
	for _, c := range []struct{ flag, value string }{
		{"--nccl-proto", "LL"}, {"--nccl-algo", "Tree"}, {"--nccl-min-channels", "8"}, {"--nccl-max-channels", "2"},
	} {
		oneLineUsage(t, []string{"collective", "--topo", "h200-nvswitch", "--sizes", "1K", "--custom-ar", "oneshot", c.flag, c.value},
			c.flag+" "+c.value, "--custom-ar oneshot", "runs no NCCL")
	}
	oneLineUsage(t, []string{"collective", "--topo", "h200-nvswitch", "--sizes", "1K", "--custom-ar", "multimem", "--nccl-min-channels", "4"},
		"--nccl-min-channels 4", "--custom-ar multimem")
	for _, extra := range [][]string{nil, {"--p2p-level", "SYS"}} {
		args := append([]string{"collective", "--topo", "h200-nvswitch", "--sizes", "1K", "--custom-ar", "oneshot"}, extra...)
		if code, out, stderr := runCLI(t, args...); code != 0 || !strings.Contains(out, "OneShot") {
			t.Errorf("%v: exit %d, %q %q", args, code, out, stderr)
		}
	}
}

// TestSimulateDCPNamesTheFlag: the serving simulation prices no decode
// context parallelism (a served request needs prefill steps, which DCP
// does not model), and its refusal read `plan: field "dcp" = 2: want
// 1: ...`, naming a field of a structure rather than the flag typed. It
// names --dcp 2 as the other plan refusals name --tp or --dp.
func TestSimulateDCPNamesTheFlag(t *testing.T) {
	line := oneLineUsage(t, []string{"simulate", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--dcp", "2", "--qps", "1", "--requests", "20"},
		"--dcp 2: want 1", "prefill")
	if strings.Contains(line, `field "dcp"`) {
		t.Errorf("%q names the plan's field, not the flag", line)
	}
}

// TestForQPSZeroRefused: --for-qps 0 read as "not given": the sweep ran
// and no capacity line came, while --for-qps -3 was refused as "want a
// rate above 0". A rate of 0 given on the command line is refused the
// same way, before the sweep.
func TestForQPSZeroRefused(t *testing.T) {
	oneLineUsage(t, []string{"simulate", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--sweep-qps", "--slo-tpot-ms", "50", "--for-qps", "0"},
		"--for-qps 0", "want a rate above 0")
}

// TestEngineLineNamesTheSchedulerSettings: the runs' table headed by the
// engine line showed only max_num_seqs, the step budget and the block
// size; --watermark, --long-prefill-token-threshold, chunked prefill off,
// admission on the first chunk, prefix caching off and SGLang's receive
// and stream intervals were applied (JSON's engine object holds them)
// but no line of the table said so. The engine line names each one set.
func TestEngineLineNamesTheSchedulerSettings(t *testing.T) {
	base := []string{"simulate", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--qps", "1", "--requests", "20", "--timeline", "0"}
	line := func(args ...string) string {
		t.Helper()
		code, out, stderr := runCLI(t, append(append([]string{}, base...), args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "engine: ") {
				return l
			}
		}
		t.Fatalf("%v: no engine line in %q", args, out)
		return ""
	}
	got := line("--watermark", "0.05", "--long-prefill-token-threshold", "512", "--no-enable-chunked-prefill", "--no-scheduler-reserve-full-isl", "--stream-interval", "4")
	for _, w := range []string{"watermark 0.05", "long_prefill_token_threshold 512", "chunked prefill off", "admission on the first chunk's blocks", "stream_interval 4"} {
		if !strings.Contains(got, w) {
			t.Errorf("engine line %q lacks %q", got, w)
		}
	}
	if got := line("--engine", "sglang", "--scheduler-recv-interval", "30"); !strings.Contains(got, "scheduler_recv_interval 30") {
		t.Errorf("engine line %q lacks scheduler_recv_interval 30", got)
	}
	if got := line(); strings.Contains(got, "watermark") || strings.Contains(got, "chunked prefill") {
		t.Errorf("engine line %q names settings not set", got)
	}
}

// TestCollectiveOneRankRefused: a collective of one rank moves no bytes
// between GPUs; collective printed a row per size of 0.00 us, 0.00 GB/s
// and no algorithm, as if a prediction, for --ranks 1 and for a box of
// one GPU. Both are refused in one line before any work.
func TestCollectiveOneRankRefused(t *testing.T) {
	oneLineUsage(t, []string{"collective", "--ranks", "1", "--sizes", "1K"}, "--ranks 1", "want 2 or more")
	oneLineUsage(t, []string{"collective", "--topo", "pcie-1s:1xl40s", "--sizes", "1K"}, "--ranks", "one GPU")
}

// TestCollectiveAllToAllTakesNoAlgorithm: NCCL runs an all-to-all as
// grouped point-to-point sends and receives, which NCCL_ALGO does not
// choose among (it picks Ring, Tree, NVLS... for collectives): --op
// alltoall --nccl-algo Tree priced the same P2P rows as without it while
// the title printed NCCL_ALGO="Tree". It is refused in one line.
func TestCollectiveAllToAllTakesNoAlgorithm(t *testing.T) {
	oneLineUsage(t, []string{"collective", "--op", "alltoall", "--sizes", "1K", "--nccl-algo", "Tree"}, "--nccl-algo Tree", "alltoall", "point-to-point")
	if code, out, stderr := runCLI(t, "collective", "--op", "alltoall", "--sizes", "1K", "--nccl-proto", "Simple"); code != 0 || !strings.Contains(out, "Simple") {
		t.Errorf("alltoall --nccl-proto Simple: exit %d, %q %q", code, out, stderr)
	}
}

// TestEngineRefusalsNameTheFlag: a block size the engine would replace
// with its KV page, and more KV blocks than the GPU holds, are refused in
// one line naming the flag that gave them (--block-size,
// --num-gpu-blocks-override), not the engine option's field
// ("engine: block_size = 16").
func TestEngineRefusalsNameTheFlag(t *testing.T) {
	oneLineUsage(t, []string{"simulate", "--model", "deepseek-v3", "--topo", "nvswitch:8xb200", "--tp", "8", "--qps", "1", "--requests", "10", "--block-size", "16"},
		"usage: --block-size 16: want 64")
	oneLineUsage(t, []string{"simulate", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--tp", "8", "--qps", "1", "--requests", "10", "--num-gpu-blocks-override", "2000000"},
		"usage: --num-gpu-blocks-override 2000000: want at most")
}

// TestVLLMBudgetRefusalNamesTheFlag: a vLLM step budget below
// max_num_seqs, which vLLM refuses at start-up, is refused in one line
// naming the flag that set it.
func TestVLLMBudgetRefusalNamesTheFlag(t *testing.T) {
	oneLineUsage(t, []string{"simulate", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--qps", "1", "--requests", "10", "--max-num-batched-tokens", "512", "--max-num-seqs", "1024"},
		"usage: --max-num-batched-tokens 512: want max_num_batched_tokens (512) at least max_num_seqs (1024)")
	oneLineUsage(t, []string{"simulate", "--model", "tiny-mla-moe", "--topo", "pcie-2s:8xl40s", "--qps", "1", "--requests", "10", "--max-num-seqs", "4096"},
		"usage: --max-num-seqs 4096: want max_num_batched_tokens (2048)")
}

// TestNCCLAlgoTreeRefusedWhereAGatherRuns: NCCL has Tree for all-reduce
// only; with NCCL_ALGO=Tree an all-gather or reduce-scatter has no
// algorithm and NCCL fails it ("no algorithm/protocol available for
// function AllGather", ncclInvalidUsage), so a server whose step gathers
// the logits over its TP group does not start. predict had priced those
// gathers as Ring. Each verb refuses it in one line naming the op; Ring
// beside Tree runs, as does a plan whose step gathers nothing (TP 1,
// DP attention with an all-to-all dispatch); the collective verb refuses
// it for an all-gather or reduce-scatter, not for an all-reduce.
func TestNCCLAlgoTreeRefusedWhereAGatherRuns(t *testing.T) {
	for _, verb := range [][]string{{"predict"}, {"advise", "--no-sweep"}, {"plan", "--tp", "8", "--batch", "1", "--context", "4096"}, {"simulate", "--qps", "1", "--requests", "5", "--isl", "128", "--osl", "8"}} {
		oneLineUsage(t, append(append([]string(nil), verb...), "--nccl-algo", "Tree"), "--nccl-algo Tree", "head.logits_allgather", "ncclInvalidUsage")
	}
	dp := []string{"predict", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--tp", "1", "--dp", "8", "--ep", "--batch", "8", "--nccl-algo", "Tree"}
	oneLineUsage(t, dp, "--nccl-algo Tree", "moe.dispatch")
	for _, args := range [][]string{
		{"predict", "--nccl-algo", "Ring,Tree"},
		append(dp, "--moe-dispatch", "alltoall"),
		{"collective", "--op", "allreduce", "--sizes", "1K", "--nccl-algo", "Tree"},
	} {
		if code, _, stderr := runCLI(t, args...); code != 0 {
			t.Errorf("%v: exit %d, %s", args, code, stderr)
		}
	}
	for _, op := range []string{"allgather", "reducescatter"} {
		oneLineUsage(t, []string{"collective", "--op", op, "--sizes", "1K", "--nccl-algo", "Tree"}, "--nccl-algo Tree", "--op "+op)
	}
}

// TestNCCLAlgoFollowsBoxAvailability: whether NCCL_ALGO leaves an
// all-gather an algorithm depends on the box (NCCL's tuning.cc gives
// all-gather Ring, and NVLS where the GPUs have NVLink SHARP): on a PCIe
// box "^Ring" and "Tree,NVLS" leave none, so NCCL fails the logits'
// all-gather and predict refuses them (it had printed a normal step for
// ^Ring); on h200-nvswitch NVLS remains and they run. The collective verb
// follows the same rule.
func TestNCCLAlgoFollowsBoxAvailability(t *testing.T) {
	for _, algo := range []string{"^Ring", "Tree,NVLS"} {
		oneLineUsage(t, []string{"predict", "--topo", "rtxpro6000-2s", "--nccl-algo", algo}, "--nccl-algo "+algo, "no NVLink SHARP", "head.logits_allgather", "ncclInvalidUsage")
		oneLineUsage(t, []string{"collective", "--op", "allgather", "--sizes", "1K", "--nccl-algo", algo}, "--nccl-algo "+algo, "--op allgather")
		for _, args := range [][]string{
			{"predict", "--model", "deepseek-v3", "--topo", "h200-nvswitch", "--nccl-algo", algo},
			{"collective", "--op", "allgather", "--sizes", "1K", "--topo", "h200-nvswitch", "--nccl-algo", algo},
		} {
			if code, _, stderr := runCLI(t, args...); code != 0 {
				t.Errorf("%v: exit %d, %s", args, code, stderr)
			}
		}
	}
	if code, _, stderr := runCLI(t, "predict", "--topo", "rtxpro6000-2s", "--nccl-algo", "^Tree"); code != 0 {
		t.Errorf("^Tree on a PCIe box leaves Ring: exit %d, %s", code, stderr)
	}
}
