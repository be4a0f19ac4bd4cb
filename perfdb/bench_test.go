package perfdb

import (
	"testing"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/ncclenv"
	"github.com/tpscope/tpscope/sim"
)

func bench(b *testing.B, name string, f func(b *testing.B)) {
	b.Run(name, func(b *testing.B) {
		b.ReportAllocs()
		f(b)
	})
}

// BenchmarkLoad reads one table cold (a fresh DB each time: YAML parse,
// Parquet decode of the key columns, grid build).
func BenchmarkLoad(b *testing.B) {
	dir := sampleDir(b)
	load := func(get func(s *System) error) func(b *testing.B) {
		return func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				db, err := Open(dir)
				if err != nil {
					b.Fatal(err)
				}
				s, err := db.System("rtx_pro_6000_server")
				if err != nil {
					b.Fatal(err)
				}
				if err := get(s); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	bench(b, "table=gemm", load(func(s *System) error { _, err := s.GEMM("vllm", "0.24.0"); return err }))
	bench(b, "table=moe", load(func(s *System) error { _, err := s.MoE("vllm", "0.24.0"); return err }))
	bench(b, "table=mla_generation_module", load(func(s *System) error {
		_, err := s.MLAModule("vllm", "0.24.0", Generation)
		return err
	}))
	bench(b, "table=nccl", load(func(s *System) error { _, err := s.NCCL("2.29.2"); return err }))
	bench(b, "table=source_all", load(func(s *System) error {
		src := &Source{sys: s, engine: "vllm", version: "0.24.0", nccl: "2.29.2", seen: map[string]bool{}}
		return src.Load()
	}))
}

// BenchmarkLookup: one lookup in a loaded table.
func BenchmarkLookup(b *testing.B) {
	s := sampleSystem(b, "rtx_pro_6000_server")
	g, _ := s.GEMM("vllm", "0.24.0")
	m, _ := s.MoE("vllm", "0.24.0")
	ml, _ := s.MLAModule("vllm", "0.24.0", Generation)
	n, _ := s.NCCL("2.29.2")
	mk := MoEKey{"nvfp4", 7168, 256, 8, 384, 1, "balanced", ""}
	lk := MLAKey{"deepseek-ai/DeepSeek-V3", "bfloat16", "bfloat16", "bfloat16", ""}
	bench(b, "table=gemm,how=interpolated", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			g.Lookup("bfloat16", 1, 2112, 7168)
		}
	})
	bench(b, "table=moe,how=exact", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			m.Lookup(mk, 1)
		}
	})
	bench(b, "table=mla_generation_module,how=interpolated", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			ml.Lookup(lk, 8, 3, 4097)
		}
	})
	bench(b, "table=nccl,how=interpolated", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			n.Lookup(OpAllReduce, 8, 14336)
		}
	})
}

// BenchmarkPredict: the seed scenario predicted with and without the
// tables (tables loaded; the source's lookups run once per distinct op
// shape of a step).
func BenchmarkPredict(b *testing.B) {
	db := sampleDB(b)
	a, err := model.Preset("kimi-k2.5-nvfp4")
	if err != nil {
		b.Fatal(err)
	}
	sc := sim.Scenario{Arch: a, Plan: model.Plan{TP: 8}, Workload: model.Workload{Phase: model.Decode, Batch: 1, Context: 4096, KVDtype: model.BF16}}
	opts := sim.Options{CUDAGraphs: true, NCCL: ncclenv.Settings{Proto: "LL", P2PLevel: "SYS"}}
	for _, withSource := range []bool{false, true} {
		p, src := newPredictor(b, db, sampleBoxes[0], opts)
		name := "source=tables"
		if !withSource {
			p.UseCostSource(nil)
			name = "source=prior"
		} else if err := src.Load(); err != nil {
			b.Fatal(err)
		}
		bench(b, name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := p.Evaluate(sc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
