# Per-node cost of CUDA-graph kernel nodes, with and without event nodes,
# and eager launches, on the local GPU (PyTorch). Prints JSON lines.
import json, os, sys, torch
dev = torch.device("cuda")
torch.backends.cuda.matmul.allow_tf32 = False
out = open(os.path.join(os.environ.get("OUT", "."), "graphgap.jsonl"), "w")
def emit(**kw):
    kw["gpu"] = torch.cuda.get_device_name(0)
    s = json.dumps(kw); print(s); out.write(s + "\n"); out.flush()

def time_graph(fn, iters=30):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(iters):
        st.record(); g.replay(); en.record(); en.synchronize()
        ts.append(st.elapsed_time(en) * 1000.0)
    ts.sort()
    del g
    return ts[len(ts) // 2]

def time_eager(fn, iters=30):
    fn(); torch.cuda.synchronize()
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(iters):
        st.record(); fn(); en.record(); en.synchronize()
        ts.append(st.elapsed_time(en) * 1000.0)
    ts.sort()
    return ts[len(ts) // 2]

def slope(name, mk, ns=(500, 2000), eager=False, **extra):
    t = {}
    for n in ns:
        fn = mk(n)
        t[n] = time_eager(fn) if eager else time_graph(fn)
    per = (t[ns[1]] - t[ns[0]]) / (ns[1] - ns[0])
    emit(case=name, mode="eager" if eager else "graph", per_op_us=round(per, 4), totals_us={str(k): round(v, 2) for k, v in t.items()}, **extra)

x = torch.zeros(1, device=dev)
def ew(n):
    def f():
        for _ in range(n):
            x.add_(1.0)
    return f
slope("elementwise 1 value (add_)", ew)
slope("elementwise 1 value (add_)", ew, eager=True)

# Event record nodes between kernels (what tpscope's executor does: a start
# and an end event around every op).
try:
    evs = [torch.cuda.Event(external=True) for _ in range(4000)]
    def ewev(n):
        def f():
            for i in range(n):
                evs[2 * i].record(); x.add_(1.0); evs[2 * i + 1].record()
        return f
    slope("elementwise bracketed by two external event records", ewev, ns=(200, 800))
    tevs = [torch.cuda.Event(enable_timing=True, external=True) for _ in range(2000)]
    def ewtev(n):
        def f():
            for i in range(n):
                tevs[2 * i].record(); x.add_(1.0); tevs[2 * i + 1].record()
        return f
    slope("elementwise bracketed by two external timing events (tpscope's executor)", ewtev, ns=(200, 800))
    def tevonly(n):
        def f():
            for i in range(n):
                tevs[2 * i].record(); tevs[2 * i + 1].record()
        return f
    slope("two external timing events, no kernel", tevonly, ns=(200, 800))
    def evonly(n):
        def f():
            for i in range(n):
                evs[2 * i].record(); evs[2 * i + 1].record()
        return f
    slope("two external event records, no kernel", evonly, ns=(200, 800))
except Exception as e:
    emit(case="event nodes", error=str(e))

# A row kernel (one row of the hidden size: a norm's shape).
h = torch.randn(1, 7168, device=dev, dtype=torch.bfloat16)
lw = torch.ones(7168, device=dev, dtype=torch.bfloat16)
ho = torch.empty_like(h)
def ln(n):
    def f():
        for _ in range(n):
            ho.copy_(torch.nn.functional.layer_norm(h, (7168,), lw))
    return f
slope("layer_norm 1 x 7168 bf16 + copy (2 kernels)", ln)

# The MLA absorbed projections' batched GEMM at one token, 8 local heads
# (torch.bmm, as vLLM applies W_UV): (8, 1, 512) x (8, 512, 128).
qa = torch.randn(8, 1, 512, device=dev, dtype=torch.bfloat16)
wv = torch.randn(8, 512, 128, device=dev, dtype=torch.bfloat16)
bo = torch.empty(8, 1, 128, device=dev, dtype=torch.bfloat16)
def bm(n):
    def f():
        for _ in range(n):
            torch.bmm(qa, wv, out=bo)
    return f
slope("bmm (8, 1, 512) x (8, 512, 128) bf16", bm, ns=(200, 1000))

# Tiny cuBLAS GEMMs (aiconfigurator's smallest linear rows).
for (k, nn) in [(32, 32), (128, 128), (1024, 1024)]:
    a = torch.randn(1, k, device=dev, dtype=torch.bfloat16)
    w = torch.randn(nn, k, device=dev, dtype=torch.bfloat16)
    o = torch.empty(1, nn, device=dev, dtype=torch.bfloat16)
    def gm(n, a=a, w=w, o=o):
        def f():
            for _ in range(n):
                torch.nn.functional.linear(a, w, out=o) if False else torch.mm(a, w.t(), out=o)
        return f
    slope(f"bf16 linear m=1 n={nn} k={k}", gm, ns=(200, 1000), n=nn, k=k)

# M=1 GEMMs streaming distinct weights from DRAM (rotating copies well
# beyond the L2): bytes -> time, for the ramp and the achieved bandwidth.
l2 = torch.cuda.get_device_properties(0).L2_cache_size
for (k, nn) in [(1024, 1024), (1024, 7168), (7168, 2112), (7168, 4096)]:
    wb = k * nn * 2
    copies = max(4, int(4 * l2 // wb) + 1)
    ws = [torch.randn(nn, k, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
    a = torch.randn(1, k, device=dev, dtype=torch.bfloat16)
    o = torch.empty(1, nn, device=dev, dtype=torch.bfloat16)
    def gmd(n, ws=ws, a=a, o=o):
        def f():
            for i in range(n):
                torch.mm(a, ws[i % len(ws)].t(), out=o)
        return f
    slope(f"bf16 linear m=1 n={nn} k={k} from DRAM", gmd, ns=(2 * copies, 8 * copies), n=nn, k=k, weight_bytes=wb, copies=copies)
    del ws
    torch.cuda.empty_cache()
emit(case="device", l2_bytes=l2, sms=torch.cuda.get_device_properties(0).multi_processor_count, torch=torch.__version__, cuda=torch.version.cuda)
