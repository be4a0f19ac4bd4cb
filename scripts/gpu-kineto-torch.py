#!/usr/bin/env python3
"""Record PyTorch-profiler (Kineto) traces of a naive PyTorch MLA + MoE decode step.

Usage: gpu-kineto-torch.py [--layers L] [--batch B ...] [--context C] [--steps N]
                           [--mode eager|graph ...] [--out DIR]

The step is one rank's shard of Kimi-K2.5 (DeepSeek-V3 architecture) at TP 8, written the
way a plain PyTorch port writes it, with no serving engine and no custom kernels:
embedding, L decoder layers (the first with the dense MLP, the rest MoE), the final norm
and the LM head. Per layer: RMSNorm; absorbed MLA decode over a latent KV cache of C
tokens (q_a, q_b, kv_a projections, RoPE, the per-head w_uk / w_uv bmm's, softmax
attention over the cache); o_proj; residual; RMSNorm; the router (sigmoid scores with a
bias, top-8 of 384), the routed experts through torch._grouped_mm (tokens sorted by
expert), the shared expert; residual. Weights are random bf16; the all-reduces of TP 8
are left out (one rank's shard), as in tpscope run --local-ranks 0. The dims match
testdata's kimi-k2.5-stack config.json (the same layers) so that tpscope can price the
same step: tpscope compare --trace FILE --model that config --batch B --context C
--tp 8 --engine vllm --topo (this GPU's box) (the trace names no engine: --engine says
whose kernels price it).

Eager mode runs the step op by op; graph mode captures one step in a CUDA graph after
warm-up and replays it. The profiler's schedule (wait 1, warm-up 1, active N) marks every
step with a ProfilerStep#k range; each step is also timed with CUDA events, printed as
JSON lines ({"mode","batch","step","ms"}) so the trace's steps can be checked against an
independent clock. Writes DIR/kimi-stack-{mode}-b{B}.pt.trace.json.gz.
"""
import argparse, gzip, json, math, os, shutil, sys
import torch
import torch.nn.functional as F

# Kimi-K2.5 (moonshotai/Kimi-K2.5 config.json text_config) and its TP-8 shard.
TP = 8
HIDDEN = 7168
HEADS = 64 // TP
Q_LORA, KV_LORA = 1536, 512
NOPE, ROPE, V_DIM = 128, 64, 128
EXPERTS, TOPK = 384, 8
MOE_INTER = 2048 // TP
DENSE_INTER = 18432 // TP
VOCAB = 163840 // TP
EPS = 1e-6


def rand(*shape, scale=0.02):
    return (torch.randn(*shape, device="cuda", dtype=torch.float32) * scale).to(torch.bfloat16)


def rms(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, EPS)


def rope(x, cos, sin):
    # Rotate pairs (GPT-J layout).
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1).flatten(-2)


class Layer:
    def __init__(self, moe, batch, context):
        self.moe = moe
        self.in_norm, self.post_norm = rand(HIDDEN, scale=1.0), rand(HIDDEN, scale=1.0)
        self.q_a = rand(Q_LORA, HIDDEN)
        self.q_norm = rand(Q_LORA, scale=1.0)
        self.q_b = rand(HEADS * (NOPE + ROPE), Q_LORA)
        self.kv_a = rand(KV_LORA + ROPE, HIDDEN)
        self.kv_norm = rand(KV_LORA, scale=1.0)
        self.w_uk = rand(HEADS, NOPE, KV_LORA)
        self.w_uv = rand(HEADS, KV_LORA, V_DIM)
        self.o_proj = rand(HIDDEN, HEADS * V_DIM)
        # The latent cache: C tokens per sequence; the new token writes the last slot.
        self.cache = rand(batch, context, KV_LORA + ROPE, scale=1.0)
        if moe:
            self.gate = rand(EXPERTS, HIDDEN)
            self.bias = rand(EXPERTS, scale=0.01).float()
            # Stored as nn.Linear weights (out, in); _grouped_mm takes
            # them transposed, K contiguous, as its sm90 kernel wants.
            self.w13 = rand(EXPERTS, 2 * MOE_INTER, HIDDEN)
            self.w2 = rand(EXPERTS, HIDDEN, MOE_INTER)
            self.sh13 = rand(2 * MOE_INTER, HIDDEN)
            self.sh2 = rand(HIDDEN, MOE_INTER)
        else:
            self.d13 = rand(2 * DENSE_INTER, HIDDEN)
            self.d2 = rand(HIDDEN, DENSE_INTER)

    def attn(self, x, cos, sin, pos):
        b = x.shape[0]
        q = F.linear(rms(F.linear(x, self.q_a), self.q_norm), self.q_b).view(b, HEADS, NOPE + ROPE)
        q_nope, q_pe = q.split([NOPE, ROPE], dim=-1)
        kv = F.linear(x, self.kv_a)
        c = rms(kv[:, :KV_LORA], self.kv_norm)
        k_pe = rope(kv[:, KV_LORA:], cos, sin)
        self.cache.index_copy_(1, pos, torch.cat([c, k_pe], dim=-1).unsqueeze(1))
        q_lat = torch.bmm(q_nope.transpose(0, 1), self.w_uk).transpose(0, 1)  # [B, H, KV_LORA]
        q_full = torch.cat([q_lat, rope(q_pe, cos, sin)], dim=-1)  # [B, H, 576]
        scores = torch.matmul(q_full, self.cache.transpose(1, 2)) * (1.0 / math.sqrt(NOPE + ROPE))
        p = torch.softmax(scores.float(), dim=-1).to(torch.bfloat16)
        o_lat = torch.matmul(p, self.cache[..., :KV_LORA])  # [B, H, KV_LORA]
        o = torch.bmm(o_lat.transpose(0, 1), self.w_uv).transpose(0, 1).reshape(b, HEADS * V_DIM)
        return F.linear(o, self.o_proj)

    def mlp(self, x):
        if not self.moe:
            g, u = F.linear(x, self.d13).chunk(2, dim=-1)
            return F.linear(F.silu(g) * u, self.d2)
        b = x.shape[0]
        scores = torch.sigmoid(F.linear(x, self.gate).float())
        _, ids = torch.topk(scores + self.bias, TOPK, dim=-1)
        w = scores.gather(1, ids)
        w = (w / w.sum(-1, keepdim=True)).to(torch.bfloat16)
        flat = ids.flatten()
        order = torch.argsort(flat)
        counts = torch.zeros(EXPERTS, device="cuda", dtype=torch.int32).scatter_add_(0, flat.int(), torch.ones_like(flat, dtype=torch.int32))
        offs = torch.cumsum(counts, 0, dtype=torch.int32)
        tok = order // TOPK
        h = torch._grouped_mm(x[tok], self.w13.transpose(-2, -1), offs=offs)
        g, u = h.chunk(2, dim=-1)
        y = torch._grouped_mm((F.silu(g) * u).contiguous(), self.w2.transpose(-2, -1), offs=offs)
        y = y * w.flatten()[order].unsqueeze(-1)
        out = torch.zeros_like(x).index_add_(0, tok, y)
        sg, su = F.linear(x, self.sh13).chunk(2, dim=-1)
        return out + F.linear(F.silu(sg) * su, self.sh2)

    def __call__(self, x, cos, sin, pos):
        x = x + self.attn(rms(x, self.in_norm), cos, sin, pos)
        return x + self.mlp(rms(x, self.post_norm))


class Model:
    def __init__(self, layers, batch, context):
        self.embed = rand(VOCAB, HIDDEN)
        self.layers = [Layer(i > 0, batch, context) for i in range(layers)]
        self.norm = rand(HIDDEN, scale=1.0)
        self.lm_head = rand(VOCAB, HIDDEN)
        inv = 1.0 / (10000 ** (torch.arange(0, ROPE, 2, device="cuda").float() / ROPE))
        ang = (context - 1) * inv
        self.cos, self.sin = ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)
        self.pos = torch.tensor([context - 1], device="cuda")
        # Token ids inside this rank's vocabulary shard.
        self.ids = torch.randint(0, VOCAB, (batch,), device="cuda")

    def step(self):
        x = F.embedding(self.ids, self.embed)
        for l in self.layers:
            x = l(x, self.cos, self.sin, self.pos)
        logits = F.linear(rms(x, self.norm), self.lm_head)
        self.ids.copy_(torch.argmax(logits, dim=-1))
        return logits


def record(mode, batch, a):
    torch.manual_seed(1)
    m = Model(a.layers, batch, a.context)
    run = m.step
    if mode == "graph":
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(2):
                m.step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            m.step()
        run = g.replay
    for _ in range(2):
        run()
    torch.cuda.synchronize()
    name = f"kimi-stack-{mode}-b{batch}.pt.trace.json"
    path = os.path.join(a.out, name)
    ev = []
    sched = torch.profiler.schedule(wait=1, warmup=1, active=a.steps)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
                                schedule=sched, on_trace_ready=lambda p: p.export_chrome_trace(path)) as prof:
        for i in range(2 + a.steps):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            run()
            e1.record()
            ev.append((e0, e1))
            prof.step()
    torch.cuda.synchronize()
    for i, (e0, e1) in enumerate(ev[2:]):
        print(json.dumps({"mode": mode, "batch": batch, "step": i, "ms": round(e0.elapsed_time(e1), 4)}), flush=True)
    with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as g:
        shutil.copyfileobj(f, g)
    os.remove(path)
    del m
    torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--mode", nargs="+", default=["eager", "graph"], choices=["eager", "graph"])
    ap.add_argument("--out", default=".")
    a = ap.parse_args()
    if not hasattr(torch, "_grouped_mm"):
        sys.exit("torch._grouped_mm is missing: this script needs PyTorch 2.8 or later")
    os.makedirs(a.out, exist_ok=True)
    p = torch.cuda.get_device_properties(0)
    print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": p.name, "layers": a.layers, "context": a.context}), flush=True)
    for mode in a.mode:
        for b in a.batch:
            record(mode, b, a)


if __name__ == "__main__":
    main()
