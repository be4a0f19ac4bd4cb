#!/usr/bin/env python3
"""Time NCCL collectives through PyTorch by size and write nccl-tests output.

The reference harness for tpscope's executor (exec/collbench, `tpscope
collective --measure`): the same collectives, sizes, dtype and timing
structure, through torch.distributed's NCCL backend instead of tpscope's
own NCCL calls.

Usage:
  gpu-collectives-torch.py --nprocs N --op OP --sizes 512:512M --out FILE
                           [--graphs] [--steps 10] [--warmup 2] [--iters 5]
  gpu-collectives-torch.py --selftest-format FILE --op OP --nprocs N --sizes 512:4K

One process per GPU (torch.multiprocessing.spawn over the first N GPUs),
bf16 buffers, sizes in nccl-tests' convention (all-reduce: the buffer;
all-gather: the gathered output; reduce-scatter: the input; all-to-all: one
rank's send buffer), rounded down to 4 bytes per rank as tpscope does. Per
size: --warmup rounds, then --steps rounds, each after a barrier, of
--iters back-to-back collectives:
  eager:   each collective between two CUDA events on the current stream;
           a sample is one event interval;
  graphs:  the --iters collectives captured in one CUDA graph, each round a
           replay between two events; a sample is the interval / --iters
           (nccl-tests -G).
A size's time is the mean of its samples, averaged over ranks (nccl-tests
-a 1). torch's all_reduce works in place, so its times go in the in-place
columns; the other collectives are out of place.

--selftest-format writes a log of made-up times (10 us + 1 us per kB) with
no torch and no GPU, labelled as such, to check the format against
tpscope's parser (cmd/tpscope scripts_test.go).
"""
import argparse
import os
import socket
import sys
import time

OPS = {  # op -> (nccl-tests program, reduction, bus factor(n))
    "allreduce": ("all_reduce_perf", "sum", lambda n: 2 * (n - 1) / n),
    "allgather": ("all_gather_perf", "none", lambda n: (n - 1) / n),
    "reducescatter": ("reduce_scatter_perf", "sum", lambda n: (n - 1) / n),
    "alltoall": ("alltoall_perf", "none", lambda n: (n - 1) / n),
}


def parse_bytes(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip()
    if s and s[-1].upper() in mult:
        return int(s[:-1]) * mult[s[-1].upper()]
    return int(s)


def sizes_of(spec, nranks):
    """MIN:MAX doubling, or one size; rounded down to 4 bytes per rank."""
    lo, sep, hi = spec.partition(":")
    a = parse_bytes(lo)
    b = parse_bytes(hi) if sep else a
    if a <= 0 or b < a:
        raise SystemExit(f"--sizes {spec!r}: want MIN:MAX with 0 < MIN <= MAX")
    unit = 4 * nranks
    out, x = [], a
    while x <= b:
        if x < unit:
            raise SystemExit(f"--sizes {spec!r}: {x} B is below 4 bytes per rank ({unit} B)")
        r = x // unit * unit
        if not out or out[-1] != r:
            out.append(r)
        x *= 2
    return out


def fmt_time(us):
    if us >= 10000:
        return f"{us:.0f}"
    if 0 < us < 1:
        return f"{us:.4f}"
    return f"{us:.2f}"


def write_log(path, op, nranks, devices, rows, comments, warmup, iters, graph, host="-", pid=0):
    """rows: (bytes, out_of_place_us, in_place_us), 0 = not measured."""
    prog, redop, factor = OPS[op]
    f = factor(nranks)
    with open(path, "w") as w:
        for c in comments:
            w.write("# " + c.replace("\n", " ") + "\n")
        w.write(f"# Collective test starting: {prog}\n")
        w.write(f"# nThread 1 nGpus {nranks} minBytes {rows[0][0]} maxBytes {rows[-1][0]} "
                f"warmup iters: {warmup} iters: {iters} agg iters: 1 validation: 0 graph: {1 if graph else 0}\n#\n# Using devices\n")
        for k in range(nranks):
            name = devices[k] if k < len(devices) and devices[k] else "-"
            w.write(f"#  Rank {k:2d} Group  0 Pid {pid:6d} on {host:>10s} device {k:2d} [-] {name}\n")
        w.write("#\n#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n" % (
            "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong"))
        w.write("#%11s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n" % (
            "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", ""))
        bus_sum = 0.0
        for nbytes, out_us, in_us in rows:
            def bw(us):
                return (nbytes / 1e3 / us, nbytes / 1e3 / us * f) if us > 0 else (0.0, 0.0)
            oa, ob = bw(out_us)
            ia, ib = bw(in_us)
            bus_sum += ob if out_us > 0 else ib
            w.write("%12d  %12d  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %6s  %7s  %6.2f  %6.2f  %6s\n" % (
                nbytes, nbytes // 2, "bfloat16", redop, -1, fmt_time(out_us), oa, ob, "N/A", fmt_time(in_us), ia, ib, "N/A"))
        w.write("# Out of bounds values : N/A (not validated)\n")
        w.write(f"# Avg bus bandwidth    : {bus_sum / len(rows):.5g} \n#\n")


def worker(rank, a, sizes, port, result_path):
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dev = torch.device("cuda", rank)
    dist.init_process_group("nccl", rank=rank, world_size=a.nprocs)
    n = a.nprocs
    means = []
    for nbytes in sizes:
        elems = nbytes // 2
        bf = torch.bfloat16
        if a.op == "allreduce":
            buf = torch.randn(elems, dtype=bf, device=dev)
            def coll():
                dist.all_reduce(buf)
        elif a.op == "allgather":
            inp = torch.randn(elems // n, dtype=bf, device=dev)
            out = torch.empty(elems, dtype=bf, device=dev)
            def coll():
                dist.all_gather_into_tensor(out, inp)
        elif a.op == "reducescatter":
            inp = torch.randn(elems, dtype=bf, device=dev)
            out = torch.empty(elems // n, dtype=bf, device=dev)
            def coll():
                dist.reduce_scatter_tensor(out, inp)
        else:
            inp = torch.randn(elems, dtype=bf, device=dev)
            out = torch.empty(elems, dtype=bf, device=dev)
            def coll():
                dist.all_to_all_single(out, inp)
        graph = None
        if a.graphs:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):  # NCCL and the allocator warm up outside capture
                    coll()
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(a.iters):
                    coll()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(a.iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(a.iters)]
        samples = []
        for step in range(a.warmup + a.steps):
            dist.barrier(device_ids=[rank])
            torch.cuda.synchronize()
            if graph is not None:
                starts[0].record()
                graph.replay()
                ends[0].record()
                torch.cuda.synchronize()
                if step >= a.warmup:
                    samples.append(starts[0].elapsed_time(ends[0]) * 1000 / a.iters)
                continue
            for k in range(a.iters):
                starts[k].record()
                coll()
                ends[k].record()
            torch.cuda.synchronize()
            if step >= a.warmup:
                samples += [s.elapsed_time(e) * 1000 for s, e in zip(starts, ends)]
        means.append(sum(samples) / len(samples))
        del graph
        torch.cuda.empty_cache()
    t = torch.tensor(means, dtype=torch.float64, device=dev)
    dist.all_reduce(t)
    t /= n
    if rank == 0:
        with open(result_path, "w") as f:
            f.write(" ".join(repr(x) for x in t.tolist()))
    dist.barrier(device_ids=[rank])
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nprocs", type=int, required=True, help="ranks: the first N GPUs")
    ap.add_argument("--op", choices=sorted(OPS), required=True)
    ap.add_argument("--sizes", default="512:512M")
    ap.add_argument("--graphs", action="store_true")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--out")
    ap.add_argument("--selftest-format", metavar="FILE")
    a = ap.parse_args()
    if a.nprocs < 2 or a.steps < 1 or a.warmup < 0 or a.iters < 1:
        raise SystemExit(f"--nprocs {a.nprocs} --steps {a.steps} --warmup {a.warmup} --iters {a.iters}: want nprocs >= 2, steps >= 1, warmup >= 0, iters >= 1")
    sizes = sizes_of(a.sizes, a.nprocs)
    if a.selftest_format:
        rows = []
        for b in sizes:
            us = 10 + b / 1000
            rows.append((b, 0.0, us) if a.op == "allreduce" else (b, us, 0.0))
        write_log(a.selftest_format, a.op, a.nprocs, ["format self-test"] * a.nprocs, rows,
                  ["gpu-collectives-torch.py --selftest-format: made-up times (10 us + 1 us per kB), not a measurement"], 0, 1, False)
        return
    if not a.out:
        raise SystemExit("--out FILE is required")
    try:
        import torch
        import torch.multiprocessing as mp
    except ImportError as e:
        raise SystemExit(f"torch is not importable ({e}): run this where PyTorch with CUDA is installed")
    if torch.cuda.device_count() < a.nprocs:
        raise SystemExit(f"--nprocs {a.nprocs}: only {torch.cuda.device_count()} CUDA devices visible")
    result = a.out + ".means"
    t0 = time.time()
    mp.spawn(worker, args=(a, sizes, free_port(), result), nprocs=a.nprocs, join=True)
    with open(result) as f:
        means = [float(x) for x in f.read().split()]
    os.remove(result)
    rows = [(b, 0.0, us) if a.op == "allreduce" else (b, us, 0.0) for b, us in zip(sizes, means)]
    nccl = ".".join(str(x) for x in torch.cuda.nccl.version()) if hasattr(torch.cuda, "nccl") else "?"
    env = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")) or "NCCL's defaults"
    comments = [
        f"gpu-collectives-torch.py: {a.op} over {a.nprocs} ranks through torch.distributed (NCCL), "
        + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t0)),
        f"time: CUDA events, mean over {a.steps} measured rounds x {a.iters} back-to-back ops per size x {a.nprocs} ranks "
        f"(nccl-tests -a 1), after {a.warmup} warm-up rounds; "
        + ("CUDA graph of the ops per size, replay interval / iters" if a.graphs else "eager, one event pair per op")
        + ("; all_reduce in place (in-place columns)" if a.op == "allreduce" else "; in-place not run (zeros)"),
        f"torch {torch.__version__}, CUDA {torch.version.cuda}, NCCL {nccl}; environment: {env}",
    ]
    devices = [torch.cuda.get_device_name(k) for k in range(a.nprocs)]
    write_log(a.out, a.op, a.nprocs, devices, rows, comments, a.warmup, a.iters, a.graphs,
              host=socket.gethostname(), pid=os.getpid())


if __name__ == "__main__":
    sys.exit(main())
