# Which bf16 GEMMs of decode size cuBLAS runs with a separate split-K
# reduction kernel on the local GPU (PyTorch's torch.mm, the cuBLAS of its
# CUDA): every (M, K, N) of the sweep is profiled once after a warm-up and
# the kernels it launched are written with their CUPTI durations, JSON
# lines to $OUT/splitk.jsonl.
import json, os, torch
from torch.profiler import profile, ProfilerActivity
dev = torch.device("cuda")
out = open(os.path.join(os.environ.get("OUT", "."), "splitk.jsonl"), "w")
gpu = torch.cuda.get_device_name(0)
Ms = (1, 8, 32, 128)
Ks = (256, 512, 1024, 1536, 2048, 3072, 4096, 7168)
Ns = (128, 384, 512, 576, 1024, 1536, 2112, 3072, 4096, 7168)
for k in Ks:
    for n in Ns:
        w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
        for m in Ms:
            a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            o = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
            for _ in range(3):
                torch.mm(a, w.t(), out=o)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(3):
                    torch.mm(a, w.t(), out=o)
                torch.cuda.synchronize()
            ks = [(e.name, e.time_range.elapsed_us()) for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
            names = [x[0] for x in ks[: len(ks) // 3]] if len(ks) >= 3 else [x[0] for x in ks]
            per_call = sum(x[1] for x in ks) / 3.0
            rec = {"gpu": gpu, "m": m, "k": k, "n": n, "kernels": names,
                   "reduce": any("splitKreduce" in x for x in names), "us_per_call": round(per_call, 3)}
            out.write(json.dumps(rec) + "\n")
        del w
out.close()
print("done", gpu)
