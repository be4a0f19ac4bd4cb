package engine

import (
	"strings"
	"testing"
)

// TestSGLangChunkTiers: SGLang's chunked_prefill_size by GPU memory
// (server_args.py _handle_gpu_memory_settings, MiB): 2048 on a 24 GiB L4,
// 2048 on a 32 GiB RTX 5090, 4096 on a 45 GiB L40S, 8192 on an 80 GiB
// H100 and a 141 GB H200, 16384 on a 180 GiB B200; vLLM's profile states
// none. A tier that does not rise, or an open tier before the last, is
// refused in one line naming it.
func TestSGLangChunkTiers(t *testing.T) {
	sg, err := Lookup(Ref{Name: "sglang"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		memBytes int64
		want     int
	}{{24 << 30, 2048}, {32 << 30, 2048}, {46068 * MiB, 4096}, {80 << 30, 8192}, {141e9, 8192}, {180 << 30, 16384}} {
		if got := sg.Scheduler.DefaultChunkTokens(c.memBytes); got != c.want {
			t.Errorf("%d MiB: chunk %d, want %d", c.memBytes/MiB, got, c.want)
		}
	}
	vl, _ := Lookup(Ref{Name: "vllm"})
	if got := vl.Scheduler.DefaultChunkTokens(180 << 30); got != 0 {
		t.Errorf("vLLM: chunk %d, want none stated", got)
	}
	base := string(mustRead(t, "profiles/sglang-0.5.yaml"))
	for _, c := range []struct{ edit, with, field string }{
		{"{below_mib: 61440, tokens: 4096}", "{below_mib: 20000, tokens: 4096}", "scheduler.chunk_tokens[2]"},
		{"{below_mib: 35840, tokens: 2048}", "{tokens: 2048}", "scheduler.chunk_tokens[1]"},
		{"{tokens: 16384}", "{below_mib: 300000, tokens: 16384}", "scheduler.chunk_tokens[4]"},
	} {
		data := strings.Replace(base, c.edit, c.with, 1)
		if data == base {
			t.Fatalf("edit %q not found", c.edit)
		}
		if _, err := Parse([]byte(data), "edited.yaml"); err == nil || !strings.Contains(err.Error(), c.field) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line naming %s", c.with, err, c.field)
		}
	}
}
