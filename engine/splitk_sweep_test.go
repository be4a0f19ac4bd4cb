package engine

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestSplitKRuleMatchesSweep: the profiles' split_k_reduce rule against
// every shape of the H100 sweep it was read from
// (exec/cuda/testdata/h100/splitk-0012-1208/splitk.jsonl: torch.mm on
// PyTorch's cuBLAS, 1-128 tokens, K 256-7168, N 128-7168): the rule says
// the reduction runs exactly where cuBLAS launched
// cublasLt::splitKreduce_kernel, for each profile that states it.
func TestSplitKRuleMatchesSweep(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "exec", "cuda", "testdata", "h100", "splitk-0012-1208", "splitk.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type row struct {
		M, K, N int64
		Reduce  bool
	}
	var rows []row
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r row
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 320 {
		t.Fatalf("%d shapes, want the sweep's 320", len(rows))
	}
	for _, name := range []string{"executor", "vllm@0.24", "vllm@0.16-nightly", "sglang@0.5"} {
		ref, err := ParseRef(name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Lookup(ref)
		if err != nil {
			t.Fatal(err)
		}
		lk := p.LinearKernel(SM90, BF16)
		if lk == nil || lk.SplitKReduce == nil {
			t.Fatalf("%s: no split-K reduction stated for bf16 on SM90", name)
		}
		wrong := 0
		for _, r := range rows {
			if got := lk.SplitKReduce.Splits(SM90, r.M, r.K, r.N); got != r.Reduce {
				wrong++
				if wrong <= 5 {
					t.Errorf("%s: M %d K %d N %d: the rule says %v, cuBLAS launched the reduction: %v", name, r.M, r.K, r.N, got, r.Reduce)
				}
			}
		}
		if wrong > 0 {
			t.Errorf("%s: %d of %d shapes disagree", name, wrong, len(rows))
		}
	}
}
