package cuda

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/tpscope/tpscope/exec/cuda/internal/cu"
	"github.com/tpscope/tpscope/exec/cuda/internal/nccl"
)

// abortWait bounds the wait for ncclCommAbort, which can itself block
// while it tears down its proxy threads (NVIDIA/nccl issues 992 and 1777);
// PyTorch's ProcessGroupNCCL bounds it the same way.
const abortWait = 10 * time.Second

// commGuard is a rank's NCCL communicator, shared by the rank's thread and
// its step watchdog's timer. NCCL forbids concurrent calls on one
// communicator (an abort from the timer's thread while the rank's was
// inside ncclAllReduce crashed NCCL on the H200), so every call holds mu.
// The watchdog must still run on a thread of its own: the rank's thread
// can be blocked outside NCCL behind the stuck collective (on the H200,
// in the cuBLAS GEMM enqueued after it), where only an abort, which ends
// NCCL's kernels, can release it. A call holding mu does not wait on peers:
// they connect at init (runtimeConnectEnv).
type commGuard struct {
	mu    sync.Mutex
	c     nccl.Comm  // 0 once aborted or destroyed
	cctx  cu.Context // the rank's context, current on the aborting thread
	why   string     // what aborted it ("" while live)
	stuck bool       // ncclCommAbort had not returned after wait
	watch *time.Timer

	abortFn func(nccl.Comm, cu.Context) // abortComm; tests substitute it
	wait    time.Duration               // abortWait; tests shorten it
	onFire  func(error)                 // told the watchdog's error after its abort (the run's SessionConfig.Fail)
}

func newCommGuard(c nccl.Comm, cctx cu.Context) *commGuard {
	return &commGuard{c: c, cctx: cctx, abortFn: abortComm, wait: abortWait}
}

// abortComm calls ncclCommAbort on a thread of its own with the rank's
// context current.
func abortComm(c nccl.Comm, cctx cu.Context) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cu.SetCurrent(cctx) == nil {
		_ = nccl.Abort(c)
	}
}

// call runs f with the live communicator under mu, or returns the error
// of its abort.
func (g *commGuard) call(f func(c nccl.Comm) error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.c == 0 {
		return g.abortedErr()
	}
	return f(g.c)
}

// abortedErr says why the communicator is gone; mu held.
func (g *commGuard) abortedErr() error {
	state := "aborted"
	if g.stuck {
		state = fmt.Sprintf("abort requested (ncclCommAbort had not returned after %v; left running)", g.wait)
	}
	if g.why == "" {
		return fmt.Errorf("NCCL communicator destroyed")
	}
	return fmt.Errorf("NCCL communicator %s: %s", state, g.why)
}

// abort aborts the communicator (once; why says what for), waiting at most
// g.wait. An abort that does not return in time is left running (its
// thread ends with the process) and the guard is marked stuck: Close then
// leaves the device alone, since freeing memory or synchronising could
// wait on NCCL's kernels or threads.
func (g *commGuard) abort(why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.c == 0 {
		return
	}
	c := g.c
	g.c, g.why = 0, why
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.abortFn(c, g.cctx)
	}()
	select {
	case <-done:
	case <-time.After(g.wait):
		g.stuck = true
	}
}

// arm starts the watchdog of one step or graph capture: unless disarm
// comes first, the communicator is aborted after d and onFire is told, so
// the run ends even while the rank's thread stays blocked.
func (g *commGuard) arm(d time.Duration, what string) {
	g.disarm()
	g.watch = time.AfterFunc(d, func() {
		g.abort(fmt.Sprintf("the %s did not finish within %v (watchdog)", what, d))
		if g.onFire != nil {
			_, err := g.state()
			g.onFire(err)
		}
	})
}

// disarm stops the watchdog (an abort it already began completes).
func (g *commGuard) disarm() {
	if g.watch != nil {
		g.watch.Stop()
		g.watch = nil
	}
}

// state reports, under mu, whether the communicator is live and the error
// of its abort if not.
func (g *commGuard) state() (live bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.c != 0 {
		return true, nil
	}
	return false, g.abortedErr()
}

// take hands the live communicator over for destruction (0 if it is
// gone) and reports whether an abort was left running.
func (g *commGuard) take() (c nccl.Comm, stuck bool) {
	g.disarm()
	g.mu.Lock()
	defer g.mu.Unlock()
	c, g.c = g.c, 0
	return c, g.stuck
}
