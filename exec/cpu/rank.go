package cpu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/traces/schema"
)

// rank is one goroutine rank: its buffers and one bound kernel per op.
type rank struct {
	ss   *session
	rank int
	ops  []model.Op
	rng  *rand.Rand
	step int

	hidden int
	h      []float32 // hidden states [tokens, hidden]
	act    []float32 // op inputs (scratch)
	out    []float32 // op outputs (scratch)
	aux    []float32 // second scratch (gathered rows, attention scores)

	kern   []func(ctx context.Context) error
	annot  [][]attribute.KeyValue
	checks []check
}

type check struct {
	c         *collective
	member    int
	positions []int
}

// routing is one router op's output, read by the MoE GEMMs after it.
type routing struct {
	tokens, experts, topk int
	route                 []int32
	weight                []float32
}

// sizes accumulates buffer needs in elements.
type sizes struct{ h, act, out, aux int }

func (z *sizes) need(h, act, out, aux int) {
	z.h, z.act, z.out, z.aux = max(z.h, h), max(z.act, act), max(z.out, out), max(z.aux, aux)
}

func batchOf(op *model.Op) int { return max(1, int(math.Ceil(op.Batch-1e-9))) }

// elemsOf converts an op's bytes to elements of its activation dtype.
func elemsOf(bytes float64, dt model.Dtype) int {
	bpv := dt.BytesPerValue()
	if bpv == 0 {
		bpv = 2
	}
	return int(math.Ceil(bytes / bpv))
}

// sequences returns (sequences, tokens per sequence) of attention op op
// of m query tokens: the sequences whose cache it reads, each with
// m / sequences tokens (1 + SpecTokens in decode, one per sequence in a
// later MTP pass, the prompt in prefill). An MLA decode op says it (its
// KVBytes are sequences x N cached tokens x K latent values); another
// serves the group's real sequences (Deploy.SeqsPerGroup: a CUDA graph's
// padding tokens attend to nothing). An engine iteration mixes decode
// and prefill queries, which its requests do not split evenly: each token
// is then its own sequence.
func (r *rank) sequences(op *model.Op, m int) (int, int) {
	seqs := r.ss.s.Deploy.SeqsPerGroup
	if op.Role == model.RoleMLADecode && op.KVBytes > 0 && op.N > 0 && op.K > 0 {
		if bpv := op.KVDtype.BytesPerValue(); bpv > 0 {
			seqs = int(math.Round(op.KVBytes / (float64(op.N) * float64(op.K) * bpv)))
		}
	}
	if seqs > 0 && m%seqs == 0 {
		return seqs, m / seqs
	}
	return max(m, 1), 1
}

func newRank(ss *session, rk int) (*rank, error) {
	r := &rank{ss: ss, rank: rk, ops: ss.s.Ranks[rk], rng: rand.New(rand.NewPCG(uint64(ss.b.seed), uint64(rk)+1))}
	r.kern = make([]func(context.Context) error, len(r.ops))
	r.annot = make([][]attribute.KeyValue, len(r.ops))

	// Hidden size: the embedding's N, else the widest norm.
	for i := range r.ops {
		op := &r.ops[i]
		if op.Kind == model.KindEmbedding {
			r.hidden = int(op.N)
			break
		}
		if op.Kind == model.KindNorm {
			r.hidden = max(r.hidden, int(op.N))
		}
	}
	// Pass 1: buffer sizes; caches and routing tables per layer.
	var z sizes
	latent := map[int][]float32{}  // layer -> latent cache (mla)
	indexer := map[int][]float32{} // layer -> indexer key cache (DSA)
	var lastRouter *routing
	routers := make([]*routing, len(r.ops))
	for i := range r.ops {
		op := &r.ops[i]
		m, n, k, b := int(op.M), int(op.N), int(op.K), batchOf(op)
		switch op.Kind {
		case model.KindEmbedding:
			z.need(m*n, 0, 0, 0)
		case model.KindGEMM:
			z.need(0, m*k*b, m*n*b, 0)
		case model.KindNorm:
			if n == r.hidden {
				z.need(m*n, 0, 0, 0)
			} else {
				z.need(0, m*n, 0, 0)
			}
		case model.KindRouter:
			z.need(0, 0, m*n, 0)
			topk := max(1, min(k, n))
			rt := &routing{tokens: m, experts: n, topk: topk, route: make([]int32, m*topk), weight: make([]float32, m*topk)}
			routers[i], lastRouter = rt, rt
		case model.KindMoEGEMM:
			if lastRouter == nil {
				return nil, fmt.Errorf("op %s: moe_gemm without a router op before it", op.ID)
			}
			if op.MoE == nil {
				return nil, fmt.Errorf("op %s: moe_gemm without its routing shape (a schedule from another build)", op.ID)
			}
			routers[i] = lastRouter
			a := 0
			for _, rows := range op.MoE.Executed() {
				a += rows
			}
			z.need(0, max(a, lastRouter.tokens)*k, a*n, a*k)
		case model.KindAttention:
			switch op.Role {
			case model.RoleMLAPrefill:
				v := prefillV(op)
				z.need(0, m*b*(2*k+v), m*b*v, n*n)
			default:
				seqs, tps := r.sequences(op, m)
				rows := tps * b
				z.need(0, m*b*k, max(m*b*k, m*n), rows*n)
				cache := latent
				if op.Role != model.RoleMLADecode {
					cache = indexer
				}
				if cache[op.Layer] == nil {
					c := make([]float32, seqs*n*k)
					fill(r.rng, c, 1)
					cache[op.Layer] = c
				}
			}
		case model.KindElementwise:
			e := elemsOf(max(op.BytesRead, op.BytesWritten), op.ActDtype)
			if op.Role.SiLUMul() {
				z.need(0, m*2*n, m*n, 0)
			} else {
				z.need(0, e, e, 0)
			}
		}
	}
	r.h = make([]float32, z.h)
	r.act = make([]float32, z.act)
	r.out = make([]float32, z.out)
	r.aux = make([]float32, z.aux)
	fill(r.rng, r.h, 1)
	fill(r.rng, r.act, 1)

	// Pass 2: weights and kernels.
	for i := range r.ops {
		op := &r.ops[i]
		var err error
		r.kern[i], err = r.bind(op, routers[i], latent, indexer)
		if err != nil {
			return nil, fmt.Errorf("op %s: %w", op.ID, err)
		}
		r.annot[i] = r.annotation(op)
	}
	return r, nil
}

// fill sets x to uniform values in [-a, a).
func fill(rng *rand.Rand, x []float32, a float32) {
	for i := range x {
		x[i] = (2*rng.Float32() - 1) * a
	}
}

// weights allocates n weights with the scale 1/sqrt(fanIn) that keeps
// activations bounded.
func (r *rank) weights(n, fanIn int) []float32 {
	w := make([]float32, n)
	fill(r.rng, w, float32(1/math.Sqrt(float64(max(fanIn, 1)))))
	return w
}

func (r *rank) annotation(op *model.Op) []attribute.KeyValue {
	if op.IsCollective() {
		c := r.ss.fabric.colls[collKey(op)]
		if !c.local {
			return []attribute.KeyValue{schema.AttrSkipped.Bool(true),
				schema.AttrSkipReason.String("group has ranks this process does not run (one-rank shard run)")}
		}
		return []attribute.KeyValue{schema.AttrKernel.String("cpu ring " + string(op.Collective))}
	}
	var kv []attribute.KeyValue
	if op.Kind == model.KindMoEGEMM && op.MoE != nil {
		rows := 0
		rowsPer := op.MoE.Executed()
		for _, c := range rowsPer {
			rows += c
		}
		kv = append(kv, schema.AttrMoERows.Int(rows), schema.AttrMoEExperts.Int(len(rowsPer)))
	}
	dt := op.WeightDtype
	if dt == "" {
		dt = op.ActDtype
	}
	if dt == "" || dt == model.FP32 {
		return kv
	}
	return append(kv, schema.AttrSubstituted.Bool(true),
		schema.AttrSubstitution.String("float32 arithmetic and storage for "+string(dt)))
}

// bind returns op's kernel, allocating its weights.
func (r *rank) bind(op *model.Op, rt *routing, latent, indexer map[int][]float32) (func(context.Context) error, error) {
	m, n, k, b := int(op.M), int(op.N), int(op.K), batchOf(op)
	switch op.Kind {
	case model.KindGEMM:
		w := r.weights(b*k*n, k)
		a := r.act
		if b == 1 && k == r.hidden && m*k <= len(r.h) {
			a = r.h
		}
		out := r.out
		return func(context.Context) error {
			for j := range b {
				gemm(m, n, k, a[j*m*k:(j+1)*m*k], w[j*k*n:(j+1)*k*n], out[j*m*n:(j+1)*m*n])
			}
			return nil
		}, nil

	case model.KindMoEGEMM:
		// The experts run the schedule's routing shape, not the router's
		// draw: op.MoE.Executed() experts of this rank with their rows
		// (the expectation sim priced, rounded). The router op still runs
		// its top-k for its cost; under DP + EP the pool holds every
		// rank's tokens, whose activations the dispatch would bring; the
		// rank's own token rows stand in for them (same shapes, same cost).
		rowsPer := op.MoE.Executed()
		w := r.weights(max(1, len(rowsPer))*k*n, k)
		gather := k == r.hidden && rt.tokens*k <= len(r.h)
		x := r.act
		if gather {
			x = r.h
		}
		tokens := rt.tokens
		return func(context.Context) error {
			scheduledGroupedGEMM(rowsPer, tokens, x, gather, w, k, n, r.out, r.aux)
			return nil
		}, nil

	case model.KindRouter:
		return func(context.Context) error {
			topK(r.out, rt.tokens, rt.experts, rt.topk, rt.route, rt.weight)
			return nil
		}, nil

	case model.KindNorm:
		// Unit weights: norms that run in place on buffers no op refreshes
		// (q_a_norm on the input scratch) then keep their values step after
		// step; other weights would scale them towards denormals, which
		// are slow on x86 and would distort the timing.
		w := make([]float32, n)
		for j := range w {
			w[j] = 1
		}
		x := r.act
		if n == r.hidden && m*n <= len(r.h) {
			x = r.h
		}
		return func(context.Context) error { rmsNorm(x, w, m, n); return nil }, nil

	case model.KindEmbedding:
		// Vocab-parallel: this rank holds rows [rank*vl, (rank+1)*vl) of a
		// vocab of vl*TP. A real lookup writes zero rows for tokens outside
		// the shard and the all-reduce after it fills them; here the
		// all-reduce works on its own buffers, so the lookup fills every
		// row from the local table (row id mod vl) to leave the hidden
		// states as the all-reduce would: non-zero. (Zero rows would also
		// flatter the GEMMs: gonum's kernels skip zero multipliers.)
		vl := r.localVocab()
		tp := max(1, r.ss.s.Plan.TP)
		table := r.weights(vl*n, 1)
		h := r.h
		seed := uint64(r.ss.b.seed)
		return func(context.Context) error {
			for t := range m {
				id := int(splitmix(seed+uint64(r.step)<<32+uint64(t)) % uint64(vl*tp))
				copy(h[t*n:(t+1)*n], table[(id%vl)*n:(id%vl+1)*n])
			}
			return nil
		}, nil

	case model.KindAttention:
		return r.bindAttention(op, latent, indexer)

	case model.KindElementwise:
		return r.bindElementwise(op, latent, indexer)

	case model.KindCollective:
		c := r.ss.fabric.colls[collKey(op)]
		if !c.local {
			return func(context.Context) error { return nil }, nil
		}
		i := c.member(r.rank)
		rng := r.rng
		c.register(i, func(x []float32) { fill(rng, x, 1) })
		rl := c.recvLen()
		r.checks = append(r.checks, check{c: c, member: i, positions: []int{0, rl / 3, (2 * rl) / 3, rl - 1}})
		return func(ctx context.Context) error { return c.run(ctx, i) }, nil
	}
	return nil, fmt.Errorf("kind %q not supported", op.Kind)
}

// localVocab is the vocab rows per rank: the lm_head's N (it is split the
// same way), else the embedding's tokens.
func (r *rank) localVocab() int {
	for i := range r.ops {
		if op := &r.ops[i]; op.Role == model.RoleLMHead && op.N > 0 {
			return int(op.N)
		}
	}
	return 1024
}

func (r *rank) bindAttention(op *model.Op, latent, indexer map[int][]float32) (func(context.Context) error, error) {
	m, n, k, heads := int(op.M), int(op.N), int(op.K), batchOf(op)
	q, out, aux := r.act, r.out, r.aux
	switch op.Role {
	case model.RoleMLAPrefill:
		seqs, v := max(1, m/max(n, 1)), prefillV(op)
		scale := float32(1 / math.Sqrt(float64(k)))
		return func(context.Context) error {
			for s := range seqs {
				for h := range heads {
					base := (s*heads + h) * n
					qs := q[base*k : (base+n)*k]
					ks := q[m*heads*k+base*k : m*heads*k+(base+n)*k]
					vs := q[2*m*heads*k+base*v : 2*m*heads*k+(base+n)*v]
					causalAttention(qs, ks, vs, out[base*v:(base+n)*v], aux, n, k, v, scale)
				}
			}
			return nil
		}, nil
	case model.RoleMLADecode:
		seqs, tps := r.sequences(op, m)
		rows := tps * heads
		// FLOPs = tokens*heads*ctx*2*(lat+kvLora): recover kvLora (the
		// value width of the latent) from the op.
		kvl := int(math.Round(op.FLOPs/(2*float64(m)*float64(heads)*float64(max(n, 1))))) - k
		if kvl <= 0 || kvl > k {
			kvl = k
		}
		cache := latent[op.Layer]
		scale := float32(1 / math.Sqrt(float64(k)))
		return func(context.Context) error {
			for s := range seqs {
				mlaDecode(q[s*rows*k:(s+1)*rows*k], cache[s*n*k:(s+1)*n*k], out[s*rows*kvl:(s+1)*rows*kvl], aux, rows, n, k, kvl, scale)
			}
			return nil
		}, nil
	default:
		// Indexer scoring (DSA): per token, heads dot products with every
		// cached key, ReLU, summed over heads into [tokens, ctx] scores.
		seqs, tps := r.sequences(op, m)
		rows := tps * heads
		cache := indexer[op.Layer]
		return func(context.Context) error {
			for s := range seqs {
				sc := aux[:rows*n]
				gemmNT(rows, n, k, q[s*rows*k:(s+1)*rows*k], cache[s*n*k:(s+1)*n*k], sc) // sc[rows, ctx] = q x cache^T
				o := out[s*tps*n : (s+1)*tps*n]
				clear(o)
				for t := range tps {
					for h := range heads {
						row := sc[(t*heads+h)*n : (t*heads+h+1)*n]
						dst := o[t*n : (t+1)*n]
						for j, x := range row {
							if x > 0 {
								dst[j] += x
							}
						}
					}
				}
			}
			return nil
		}, nil
	}
}

func (r *rank) bindElementwise(op *model.Op, latent, indexer map[int][]float32) (func(context.Context) error, error) {
	m, n := int(op.M), int(op.N)
	e := elemsOf(max(op.BytesRead, op.BytesWritten), op.ActDtype)
	act, out := r.act, r.out
	switch {
	case op.Role.SiLUMul():
		return func(context.Context) error { siluMul(act, out, m, n); return nil }, nil
	case op.Role.RoPE():
		pairs := e / 2
		cos, sin := make([]float32, pairs), make([]float32, pairs)
		for i := range pairs {
			th := float64(i) * 0.01
			cos[i], sin[i] = float32(math.Cos(th)), float32(math.Sin(th))
		}
		return func(context.Context) error { rope(act[:2*pairs], cos, sin); return nil }, nil
	case op.Role.CacheWrite():
		cache := latent[op.Layer]
		if op.Role.Module() == model.ModIndexer {
			cache = indexer[op.Layer]
		}
		if cache == nil {
			break
		}
		// The new tokens' entries overwrite the tail of the cache, so the
		// context length stays that of the schedule step after step.
		e := min(elemsOf(op.BytesWritten, op.KVDtype), len(cache), len(act))
		return func(context.Context) error { copy(cache[len(cache)-e:], act[:e]); return nil }, nil
	}
	return func(context.Context) error {
		a, o := act[:e], out[:e]
		for i := range o {
			o[i] += a[i]
		}
		return nil
	}, nil
}

// prefillV recovers the value head width of a causal-attention op from
// its FLOPs = seqs*heads*pairs*2*(k+v), pairs = n(n+1)/2 for prompts of n
// tokens; it falls back to k when the FLOPs do not fit that form (e.g. a
// DSA cap on the keys).
func prefillV(op *model.Op) int {
	m, n, k, heads := int(op.M), int(op.N), int(op.K), batchOf(op)
	seqs := max(1, m/max(n, 1))
	pairs := float64(n) * float64(n+1) / 2
	v := int(math.Round(op.FLOPs/(float64(seqs)*float64(heads)*pairs*2))) - k
	if v <= 0 || v > 4*k {
		v = k
	}
	return v
}

// splitmix is SplitMix64's finaliser: a cheap, stateless hash for token IDs
// that every rank of a TP group computes identically.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// BeginStep implements exec.Rank.
func (r *rank) BeginStep(ctx context.Context, step int) error {
	r.step = step
	return nil
}

// Exec implements exec.Rank: it runs op i to completion.
func (r *rank) Exec(ctx context.Context, i int) error { return r.kern[i](ctx) }

// EndStep implements exec.Rank: ops are synchronous, so it only checks the
// collective results of the step (when verification is on).
func (r *rank) EndStep(ctx context.Context) error {
	if !r.ss.b.verify {
		return nil
	}
	for _, c := range r.checks {
		if err := c.c.verify(c.member, c.positions); err != nil {
			return err
		}
	}
	return nil
}

// OpAttributes implements exec.OpAnnotator.
func (r *rank) OpAttributes(i int) []attribute.KeyValue { return r.annot[i] }

// StepAttributes implements exec.StepAnnotator: the session's facts for
// the rank span (exec.AttrNCCLEnv).
func (r *rank) StepAttributes(int) []attribute.KeyValue { return r.ss.rankAttrs }

// Close implements exec.Rank; the buffers are garbage-collected.
func (r *rank) Close() error {
	r.h, r.act, r.out, r.aux, r.kern = nil, nil, nil, nil, nil
	return nil
}
