#!/usr/bin/env python3
"""Time GEMMs through PyTorch (cuBLAS / cuBLASLt) the way cudacheck gemm does.

Usage: gpu-gemm-torch.py [--json FILE] [--iters N] SHAPE...
SHAPE is MxNxK[xBATCH]:bf16|fp8, Y[M,N] = X[M,K] @ W[N,K]^T (nn.Linear).
bf16 runs torch.nn.functional.linear (batch: torch.bmm); fp8 runs
torch._scaled_mm with unit scales and use_fast_accum=True. Weights rotate
through copies totalling at least 4x L2; torch.cuda._sleep keeps the GPU
busy while all timed calls are enqueued, each between two CUDA events;
the median is reported.
"""
import argparse, json, statistics, sys
import torch

def parse(s):
    shape, dt = s.split(":")
    v = [int(x) for x in shape.split("x")]
    if len(v) == 3:
        v.append(1)
    return v[0], v[1], v[2], v[3], dt

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("shapes", nargs="+")
    a = ap.parse_args()
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(0)
    l2 = getattr(props, "L2_cache_size", 50 << 20)
    print(f"torch {torch.__version__} cuda {torch.version.cuda} {props.name} L2 {l2} B", flush=True)
    out = open(a.json, "w") if a.json else None
    print(f"{'shape':28s} {'median_us':>10s} {'p10_us':>10s} {'p90_us':>10s} {'copies':>7s} {'TFLOP/s':>9s}")
    for s in a.shapes:
        m, n, k, b, dt = parse(s)
        ab = 1 if dt == "fp8" else 2
        wbytes = b * n * k * ab
        copies = max(1, -(-4 * l2 // wbytes))
        copies = min(copies, max(1, (16 << 30) // wbytes))
        try:
            if dt == "bf16":
                ws = [torch.empty((b, n, k) if b > 1 else (n, k), device=dev, dtype=torch.bfloat16).uniform_(-1, 1) for _ in range(copies)]
                x = torch.empty((b, m, k) if b > 1 else (m, k), device=dev, dtype=torch.bfloat16).uniform_(-1, 1)
                if b > 1:
                    call = lambda i: torch.bmm(x, ws[i % copies].transpose(1, 2))
                else:
                    call = lambda i: torch.nn.functional.linear(x, ws[i % copies])
            else:
                if b > 1:
                    raise RuntimeError("torch._scaled_mm has no batched form")
                ws = [torch.empty((n, k), device=dev, dtype=torch.bfloat16).uniform_(-1, 1).to(torch.float8_e4m3fn) for _ in range(copies)]
                x = torch.empty((m, k), device=dev, dtype=torch.bfloat16).uniform_(-1, 1).to(torch.float8_e4m3fn)
                one = torch.ones((), device=dev, dtype=torch.float32)
                call = lambda i: torch._scaled_mm(x, ws[i % copies].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True)
            def timed(iters):
                ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
                torch.cuda._sleep(60_000_000)
                for i in range(iters):
                    ev[i][0].record()
                    call(i)
                    ev[i][1].record()
                torch.cuda.synchronize()
                return [e0.elapsed_time(e1) * 1000 for e0, e1 in ev]
            timed(10)
            ts = sorted(timed(a.iters))
            q = lambda f: ts[round(f * (len(ts) - 1))]
            p10, p50, p90 = q(0.1), q(0.5), q(0.9)
            tf = 2 * m * n * k * b / p50 / 1e6
            print(f"{s:28s} {p50:10.2f} {p10:10.2f} {p90:10.2f} {copies:7d} {tf:9.1f}", flush=True)
            r = dict(shape=s, m=m, n=n, k=k, batch=b, dtype=dt, median_us=p50, p10_us=p10, p90_us=p90, copies=copies, tflops=tf)
        except Exception as e:  # unsupported shape in this PyTorch
            print(f"{s:28s} unsupported: {str(e).splitlines()[0][:100]}", flush=True)
            r = dict(shape=s, error=str(e).splitlines()[0])
        if out:
            out.write(json.dumps(r) + "\n")
        del_vars = [v for v in ("ws", "x") if v in locals()]
        torch.cuda.empty_cache()

if __name__ == "__main__":
    main()
