// Package cpu is tpscope's CPU backend: it runs a model.Schedule on
// goroutine ranks that share one machine, doing the schedule's arithmetic at
// its shapes so the whole predict -> run -> compare loop works without a GPU.
//
// What each op kind runs (float32 throughout; shapes from the op):
//
//   - gemm: C[M,N] = A[M,K] x W[K,N], Batch independent problems (absorbed
//     MLA's per-head W_UK / W_UV), through gonum's BLAS (blas32.Gemm);
//     2*M*N*K*Batch FLOPs.
//   - attention "mla_decode": absorbed multi-head latent attention over a
//     real latent cache of Context tokens per sequence (scores against the
//     compressed KV + shared RoPE key, softmax, weighted sum in the latent
//     space); "mla_prefill": causal attention per prompt; other attention
//     ops (DSA indexer scoring): per-head dot products, ReLU, sum over heads.
//   - router: top-k over the logits the previous op wrote (moe.topk routes
//     the layer's tokens to experts; the input hidden states change every
//     step because the embedding draws seeded token IDs).
//   - moe_gemm: grouped GEMMs over the experts the router picked, gathering
//     each expert's tokens.
//   - norm: RMSNorm; elementwise: RoPE, SiLU-and-mul, the KV-cache write,
//     otherwise an add; embedding: a vocab-parallel lookup.
//   - collective: ring all-reduce / all-gather / reduce-scatter and direct
//     all-to-all between the goroutine ranks over shared buffers (fabric.go),
//     with results checked against a serial computation (sampled, after
//     every step, outside the timed ops). A member that waits for a peer
//     longer than the watchdog (exec.WithWatchdog, else DefaultWatchdog)
//     gives up with an error naming the ranks that never arrived.
//
// Ops read and write per-rank working buffers sized for the largest op, not
// a chained forward pass: values between ops are not the model's, the work
// and the bytes touched are. Each op has its own weights (no cache shared
// between layers), allocated with all other buffers in Session.OpenRank and
// reused every step.
//
// Data are float32 where the schedule says bf16: GEMM and norm weights and
// activations touch twice the schedule's bytes. The CPU topology written by
// Calibrate states bandwidth in schedule bytes for that reason (see
// calibrate.go). Collectives move exactly CommBytes.
//
// Timing is the host clock around each op (synchronous Exec), so ranks do
// not implement exec.DeviceTimer. With more ranks than cores (GOMAXPROCS),
// ranks take turns on the cores: an op runs at full single-core speed once
// started, and the waiting shows up in the collectives.
package cpu

import (
	"context"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/model"
)

func init() {
	exec.RegisterBackend("cpu", func(cfg exec.BackendConfig) (exec.Backend, error) {
		return New(WithSeed(cfg.Seed)), nil
	})
}

// DefaultWatchdog is how long a rank waits inside a collective for a peer
// before it gives up with an error naming the missing ranks, when the run
// sets no exec.WithWatchdog. It is generous because with more ranks than
// cores a peer may legitimately be descheduled for a long op.
const DefaultWatchdog = 5 * time.Minute

// Backend is the CPU backend. It is safe to Open several sessions from one
// Backend, one after another or at once.
type Backend struct {
	seed   int64
	verify bool
}

// Option configures New.
type Option func(*Backend)

// WithSeed seeds weights, inputs, token IDs (and so the MoE routing).
// Default 1.
func WithSeed(seed int64) Option { return func(b *Backend) { b.seed = seed } }

// WithVerify turns the after-step check of collective results on or off.
// Default on.
func WithVerify(on bool) Option { return func(b *Backend) { b.verify = on } }

// New returns a CPU backend. Defaults: seed 1, collective checks on.
func New(opts ...Option) *Backend {
	b := &Backend{seed: 1, verify: true}
	for _, o := range opts {
		o(b)
	}
	return b
}

// Name implements exec.Backend.
func (b *Backend) Name() string { return "cpu" }

// ReadsCollectiveSettings implements exec.CollectiveSettingsReader: the
// ranks' collectives are this package's shared-memory rings, which no
// NCCL setting reaches.
func (b *Backend) ReadsCollectiveSettings() bool { return false }

// SupportsGraphs implements exec.GraphSupporter: ranks run every step
// eagerly.
func (b *Backend) SupportsGraphs() bool { return false }

// MultiProcessRanks implements exec.MultiProcessRanker: the collectives
// share memory, so every rank of a run lives in one process.
func (b *Backend) MultiProcessRanks() bool { return false }

// Open implements exec.Backend: it checks that every op kind is one the
// backend runs and builds the shared-memory fabric for the collectives. A
// collective with a member this process does not run is skipped on every
// member (marked on its spans): that is a one-rank shard run.
func (b *Backend) Open(ctx context.Context, s *model.Schedule, cfg exec.SessionConfig) (exec.Session, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	watchdog := cfg.Watchdog
	if watchdog <= 0 {
		watchdog = DefaultWatchdog
	}
	local := map[int]bool{}
	for _, r := range cfg.LocalRanks {
		local[r] = true
	}
	f := &fabric{colls: map[string]*collective{}}
	for _, r := range cfg.LocalRanks {
		for i := range s.Ranks[r] {
			op := &s.Ranks[r][i]
			switch op.Kind {
			case model.KindGEMM, model.KindMoEGEMM, model.KindAttention, model.KindNorm,
				model.KindElementwise, model.KindRouter, model.KindEmbedding:
			case model.KindCollective:
				switch op.Collective {
				case model.AllReduce, model.AllGather, model.ReduceScatter, model.AllToAll:
				default:
					return nil, fmt.Errorf("cpu backend: op %s: collective %q not supported (want allreduce, allgather, reducescatter, alltoall)", op.ID, op.Collective)
				}
				if op.CommBytes < 0 {
					return nil, fmt.Errorf("cpu backend: op %s: comm bytes %d < 0", op.ID, op.CommBytes)
				}
				if key := collKey(op); f.colls[key] == nil {
					all := true
					for _, m := range op.Group {
						all = all && local[m]
					}
					f.colls[key] = newCollective(op, all, watchdog)
				}
			default:
				return nil, fmt.Errorf("cpu backend: op %s: kind %q not supported", op.ID, op.Kind)
			}
			if err := checkShape(op); err != nil {
				return nil, fmt.Errorf("cpu backend: op %s: %w", op.ID, err)
			}
		}
	}
	return &session{b: b, s: s, fabric: f, rankAttrs: []attribute.KeyValue{exec.AttrNCCLEnv.String(exec.NCCLEnviron())}}, nil
}

// checkShape rejects shapes that would make buffers negative or absurd.
func checkShape(op *model.Op) error {
	const maxElems = 1 << 34 // 64 GiB of float32: more than any CPU run should allocate per buffer
	if op.M < 0 || op.N < 0 || op.K < 0 || op.Batch < 0 || math.IsNaN(op.Batch) || math.IsInf(op.Batch, 0) {
		return fmt.Errorf("shape M=%d N=%d K=%d Batch=%v: want non-negative finite values", op.M, op.N, op.K, op.Batch)
	}
	if float64(op.M)*float64(op.K)*max(op.Batch, 1) > maxElems || float64(op.K)*float64(op.N)*max(op.Batch, 1) > maxElems {
		return fmt.Errorf("shape M=%d N=%d K=%d Batch=%v is too large for the CPU backend; shrink the model (tpscope run --scale)", op.M, op.N, op.K, op.Batch)
	}
	return nil
}

type session struct {
	b      *Backend
	s      *model.Schedule
	fabric *fabric
	// rankAttrs go on every rank span (exec.AttrNCCLEnv); fixed at Open.
	rankAttrs []attribute.KeyValue
}

// OpenRank implements exec.Session: it allocates the rank's weights,
// caches and working buffers and binds a kernel to every op.
func (ss *session) OpenRank(ctx context.Context, rank int) (exec.Rank, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := newRank(ss, rank)
	if err != nil {
		return nil, fmt.Errorf("cpu backend rank %d: %w", rank, err)
	}
	return r, nil
}

// Close implements exec.Session: it stops the collectives' watchdog
// timers; buffers are garbage-collected memory.
func (ss *session) Close() error {
	for _, c := range ss.fabric.colls {
		c.bar.close()
	}
	return nil
}

// collKey names one collective instance: its op ID and group (with DP > 1
// or DCP the same op ID runs in several disjoint groups).
func collKey(op *model.Op) string { return fmt.Sprint(op.ID, op.Group) }
