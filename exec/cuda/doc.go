// Package cuda is tpscope's executor on NVIDIA GPUs (exec backend "cuda").
//
// It drives the CUDA driver API, cuBLAS/cuBLASLt, NCCL and NVRTC through
// purego (no cgo, no CUDA toolkit at build time); the libraries are found
// at run time (internal/dl: the loader's search, TPSCOPE_CUDA_LIBS,
// /usr/local/cuda/lib64, system folders, pip nvidia/*/lib wheels). A
// missing one is a one-line error: "libnccl.so.2 not found; set
// TPSCOPE_CUDA_LIBS".
//
// # What runs for each op kind
//
//   - gemm, moe_gemm: Y[M,N] = X[M,K]·W[N,K]^T (nn.Linear layout). BF16
//     weights through cublasGemmEx / cublasGemmStridedBatchedEx (FP32
//     accumulation); FP8 (and FP8 block-128, with a per-tensor scale) through
//     cublasLtMatmul e4m3 on sm_89+. NVFP4 before sm_100 and INT4 W4A16
//     have no kernel here: they run as FP8 GEMMs whose N is scaled so the
//     weight bytes streamed are the same, and the span records the
//     substitution. A MoE grouped GEMM is one batched GEMM over the experts a
//     seeded router touches on this rank (tokens x top-k of E, drawn per
//     layer), op.M rows each.
//   - attention (mla_decode): absorbed MLA decode over a latent cache of the
//     schedule's context. For the 576-wide latent on sm_80+, kernels.cu's
//     tensor-core kernels (the query rows as the MMA's N; the cache
//     streamed through shared-memory stages, each row read once per 8 or
//     16 query rows; split over the context so the grid fills the device
//     once, the splits merged inside the kernel: on sm_90, where all of a
//     launch's clusters fit at once, the splits of a sequence are one
//     thread-block cluster and merge from each other's shared memory,
//     else through L2): mla_tc_* for a bf16 cache
//     (cp.async stages), mla_ds_* for e4m3 (a tile per bulk copy on sm_90,
//     widened in registers, once per value, with its scale folded into the
//     softmax and the output), the family per cache
//     dtype being the first that agrees with the CUDA-core kernel at
//     start-up; otherwise
//     mla_decode_* (CUDA cores) and mla_combine. Under decode context
//     parallelism the rank's rows are then rescaled by the all-gathered
//     log-sum-exps (mla_dcp_correct). Other attention ops (prefill, the DSA
//     indexer) run the same kernels with the op's KV bytes and a head count
//     matching its FLOPs, marked substituted.
//   - norm: RMSNorm (with vLLM's fused residual add where the schedule
//     counts two streams; with exec.BackendConfig.ARNormFusion the norm after
//     an all-reduce works on the all-reduce's output, the fused kernel's
//     local part); router: warp-per-token top-k; embedding: vocab-parallel
//     gather; elementwise: SiLU-and-mul by rows (silu_mul) for the *act ops,
//     the other elementwise ops as a pass over their bytes.
//   - collective: NCCL all-reduce, all-gather, reduce-scatter, all-to-all
//     (grouped send/recv) when every member rank is running; in a one-rank
//     shard run (fewer local ranks than the schedule has, no launcher) they
//     are skipped and the span says so.
//
// Every op's private bytes (weights, KV cache) get their own region of one
// device arena, so each layer streams from HBM as in a real forward pass;
// when a rank's bytes exceed free memory the regions rotate through a pool
// (far larger than the 60 MB L2) and spans carry tpscope.cuda.weights_rotated.
// All buffers are filled with seeded random values (never zeros).
//
// # Timing
//
// Each op is bracketed by two CUDA events on the rank's stream; an anchor
// event recorded at BeginStep (on an idle stream) maps device times onto the
// wall clock. In graph mode the step is captured once (cuStreamBeginCapture,
// thread-local) with the events as external event-record nodes, and replayed.
// NCCL_* settings from the optimization catalog (exec.BackendConfig.NCCL) are
// exported before any communicator exists, and NCCL_RUNTIME_CONNECT=0
// unless set: peers connect at init, under the init timeout, so that no
// collective's host call waits on a peer. A step with NCCL work is polled;
// on cancellation or an NCCL asynchronous error the communicator is
// aborted (ncclCommAbort) instead of hanging, and a step or graph capture
// that outlives the watchdog (DefaultWatchdog) has it aborted by a timer,
// which can also release a rank thread blocked behind the stuck collective
// outside NCCL, and ends the run (exec.SessionConfig.Fail) even if that
// thread stays blocked; NCCL calls on one communicator never overlap
// (commGuard).
// After a failed run every rank's communicator is aborted rather than
// destroyed (exec.Aborter): ncclCommDestroy may wait on peers that are
// gone. An abort is waited for at most 10 s, since ncclCommAbort can
// itself block; a rank whose abort did not return leaves the device to the
// process's exit. A captured graph is destroyed before its communicator,
// which waits for it.
//
// # Ranks and launch
//
// One process drives all local GPUs, one OS-thread-locked goroutine and
// primary context per GPU, communicators from one ncclUniqueId
// (ncclCommInitRank on each rank's thread). Several processes (nodes) run
// one rank each under torchrun or Slurm; rank 0 hands the NCCL id to the
// others over TCP on MASTER_ADDR:(MASTER_PORT+1) (or TPSCOPE_RDZV_PORT):
//
//	torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend static \
//	    --master-addr node0 --master-port 29500 --node-rank $NODE \
//	    --no-python tpscope run --backend cuda --model kimi-k2.5 --tp 16 --local-ranks $RANK
//
//	srun -N2 --ntasks-per-node 8 --gpus-per-task 1 bash -c \
//	    'MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n1) \
//	     tpscope run --backend cuda --model kimi-k2.5 --tp 16 --local-ranks $SLURM_PROCID'
//
// (the CLI passes the process's rank as its only local rank; see
// LaunchEnvFrom for the variables read).
package cuda
