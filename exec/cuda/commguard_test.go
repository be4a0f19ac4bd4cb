package cuda

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tpscope/tpscope/exec/cuda/internal/cu"
	"github.com/tpscope/tpscope/exec/cuda/internal/nccl"
)

// fakeAbort records ncclCommAbort calls instead of making them; hold
// delays each, as a slow teardown would.
type fakeAbort struct {
	calls atomic.Int32
	comm  atomic.Uintptr
	hold  time.Duration
	// release, when set, holds the abort until it is closed (a stuck
	// ncclCommAbort), and done is closed when the abort returns.
	release, done chan struct{}
}

func (f *fakeAbort) abort(c nccl.Comm, _ cu.Context) {
	f.calls.Add(1)
	f.comm.Store(uintptr(c))
	if f.release != nil {
		<-f.release
		close(f.done)
		return
	}
	time.Sleep(f.hold)
}

func guardWith(f *fakeAbort, wait time.Duration) *commGuard {
	g := newCommGuard(nccl.Comm(0xbeef), 0)
	g.abortFn, g.wait = f.abort, wait
	return g
}

// TestCommGuardWatchdogAborts: an armed step that is never disarmed has its
// communicator aborted once, after the timeout, and the run is told (onFire,
// the run's SessionConfig.Fail); later calls get the watchdog's error
// instead of reaching NCCL, and take finds nothing to destroy.
func TestCommGuardWatchdogAborts(t *testing.T) {
	f := &fakeAbort{}
	g := guardWith(f, time.Second)
	told := make(chan error, 2)
	g.onFire = func(err error) { told <- err }
	g.arm(20*time.Millisecond, "step")
	var fired error
	select {
	case fired = <-told:
	case <-time.After(5 * time.Second):
		t.Fatal("the watchdog did not report its abort")
	}
	if f.calls.Load() != 1 || f.comm.Load() != 0xbeef {
		t.Fatalf("abort calls %d on comm %#x, want 1 on 0xbeef", f.calls.Load(), f.comm.Load())
	}
	if fired == nil || !strings.Contains(fired.Error(), "NCCL communicator aborted: the step did not finish within 20ms (watchdog)") {
		t.Errorf("onFire got %v", fired)
	}
	reached := false
	err := g.call(func(nccl.Comm) error { reached = true; return nil })
	if reached || err == nil || !strings.Contains(err.Error(), "NCCL communicator aborted: the step did not finish within 20ms (watchdog)") {
		t.Errorf("call after the watchdog: reached NCCL %v, err %v", reached, err)
	}
	if live, err := g.state(); live || err == nil {
		t.Errorf("state after the watchdog: live %v, err %v", live, err)
	}
	g.abort("again") // once only
	if c, stuck := g.take(); c != 0 || stuck || f.calls.Load() != 1 {
		t.Errorf("take: comm %#x stuck %v, abort calls %d; want 0, false, 1", c, stuck, f.calls.Load())
	}
}

// TestCommGuardDisarmed: a step that ends in time keeps its communicator;
// take hands it over for ncclCommDestroy.
func TestCommGuardDisarmed(t *testing.T) {
	f := &fakeAbort{}
	g := guardWith(f, time.Second)
	var told atomic.Int32
	g.onFire = func(error) { told.Add(1) }
	// A timeout no host stall reaches (the test asserts what disarm does
	// to the timer, not how fast a loaded machine gets there).
	g.arm(time.Minute, "step")
	if err := g.call(func(c nccl.Comm) error {
		if c != 0xbeef {
			return errors.New("wrong comm")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	w := g.watch
	g.disarm()
	if g.watch != nil || w == nil || w.Stop() {
		t.Fatalf("disarm left the watchdog's timer running (timer %v, now %v)", w, g.watch)
	}
	if f.calls.Load() != 0 || told.Load() != 0 {
		t.Fatalf("disarmed watchdog aborted (%d calls) or reported (%d)", f.calls.Load(), told.Load())
	}
	if c, stuck := g.take(); c != 0xbeef || stuck {
		t.Errorf("take = %#x, %v; want 0xbeef, false", c, stuck)
	}
	if err := g.call(func(nccl.Comm) error { return nil }); err == nil || !strings.Contains(err.Error(), "destroyed") {
		t.Errorf("call after take: %v, want the destroyed error", err)
	}
}

// TestCommGuardNoOverlap: the watchdog's abort waits for an NCCL call in
// flight on the rank's thread (NCCL forbids concurrent calls on one
// communicator) and never runs during it.
func TestCommGuardNoOverlap(t *testing.T) {
	var inCall atomic.Bool
	var overlapped atomic.Bool
	f := &fakeAbort{}
	g := guardWith(f, time.Second)
	g.abortFn = func(c nccl.Comm, x cu.Context) {
		if inCall.Load() {
			overlapped.Store(true)
		}
		f.abort(c, x)
	}
	g.arm(10*time.Millisecond, "step")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = g.call(func(nccl.Comm) error {
			inCall.Store(true)
			time.Sleep(80 * time.Millisecond) // the timer fires meanwhile
			inCall.Store(false)
			return nil
		})
	}()
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for f.calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if f.calls.Load() != 1 || overlapped.Load() {
		t.Errorf("abort calls %d, overlapped the NCCL call: %v; want 1, false", f.calls.Load(), overlapped.Load())
	}
}

// TestCommGuardStuckAbort: an abort that has not returned after the wait is
// left running; the guard says so, and take reports it so that Close
// leaves the device alone.
func TestCommGuardStuckAbort(t *testing.T) {
	// The fake abort never returns until the test releases it, so a guard
	// that waited for it would never return: no wall-clock bound to meet.
	f := &fakeAbort{release: make(chan struct{}), done: make(chan struct{})}
	g := guardWith(f, 20*time.Millisecond)
	returned := make(chan struct{})
	go func() {
		g.abort("the run failed")
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(time.Minute):
		t.Fatal("abort waited for a stuck ncclCommAbort, want it to return after its 20ms bound")
	}
	_, err := g.state()
	if err == nil || !strings.Contains(err.Error(), "abort requested (ncclCommAbort had not returned after 20ms; left running): the run failed") {
		t.Errorf("state error %v", err)
	}
	if _, stuck := g.take(); !stuck {
		t.Error("take does not report the stuck abort")
	}
	close(f.release) // let the fake abort return before the test ends
	<-f.done
}
