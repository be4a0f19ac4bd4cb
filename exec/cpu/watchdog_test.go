package cpu

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tpscope/tpscope/model"
)

// TestCollectiveWatchdog: in a group of four where rank 2 never arrives,
// each of the other three leaves the collective after the watchdog with an
// error naming the collective, itself, the wait and rank 2 as the missing
// one, no sooner than the watchdog after its wait began (also when its
// timer was armed by an earlier wait); a group that does complete returns
// with no error, round after round (a stale timer must not fire later).
func TestCollectiveWatchdog(t *testing.T) {
	for _, kind := range []model.Collective{model.AllReduce, model.AllGather, model.ReduceScatter, model.AllToAll} {
		t.Run("op="+string(kind), func(t *testing.T) {
			t.Parallel() // mostly waiting on timers
			group := []int{0, 1, 2, 3}
			op := &model.Op{ID: "L03.attn.allreduce", Kind: model.KindCollective, Collective: kind, Group: group, CommBytes: 1024}
			// Long enough that a complete round on a loaded machine (other
			// test binaries on the same cores) never reaches it.
			const watchdog = 500 * time.Millisecond
			c := newCollective(op, true, watchdog)
			for i := range group {
				c.register(i, func([]float32) {})
			}
			// Complete rounds, each well inside the watchdog, then wait
			// past it: timers stopped between waits must not fire.
			for range 3 {
				runMembers(t, c, []int{0, 1, 2, 3}, func(i int, err error) {
					if err != nil {
						t.Fatalf("complete round: member %d: %v", i, err)
					}
				})
			}
			time.Sleep(2 * watchdog)
			runMembers(t, c, []int{0, 1, 2, 3}, func(i int, err error) {
				if err != nil {
					t.Fatalf("round after an idle watchdog period: member %d: %v", i, err)
				}
			})

			// The timers armed by that round's waits are still pending:
			// a wait that begins 0.6 watchdog later must still get its
			// whole watchdog (the timer re-arms for the rest).
			time.Sleep(watchdog * 6 / 10)
			start := time.Now()
			runMembers(t, c, []int{0, 1, 3}, func(i int, err error) {
				if err == nil {
					t.Fatalf("member %d: no error with rank 2 missing", i)
				}
				// Rank 2 is missing; a member slow to arrive under load may
				// be named beside it.
				for _, want := range []string{string(kind) + " L03.attn.allreduce over ranks [0 1 2 3]", "waited 500ms", "2], which never arrived", "watchdog"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("member %d: error %q lacks %q", i, err, want)
					}
				}
			})
			if d := time.Since(start); d < watchdog {
				t.Errorf("members gave up after %v, before the %v watchdog", d, watchdog)
			}
		})
	}
}

// runMembers runs the given members of c at once and checks each result;
// a member still blocked after 10 s fails the test (the watchdog did not
// fire).
func runMembers(t *testing.T, c *collective, members []int, check func(i int, err error)) {
	t.Helper()
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for k, i := range members {
		wg.Add(1)
		go func() { defer wg.Done(); errs[k] = c.run(context.Background(), i) }()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("members still blocked after 10 s")
	}
	for k, i := range members {
		check(i, errs[k])
	}
}

// BenchmarkCollective: one ring all-reduce of 4 KiB among goroutine ranks,
// each barrier wait arming and stopping its member's watchdog timer; the
// members allocate nothing per collective.
func BenchmarkCollective(b *testing.B) {
	for _, n := range []int{2, 4} {
		b.Run(fmt.Sprintf("ranks=%d", n), func(b *testing.B) {
			group := make([]int, n)
			for i := range group {
				group[i] = i
			}
			op := &model.Op{ID: "L00.attn.allreduce", Kind: model.KindCollective, Collective: model.AllReduce, Group: group, CommBytes: 4096}
			c := newCollective(op, true, DefaultWatchdog)
			for i := range n {
				c.register(i, func([]float32) {})
			}
			var wg sync.WaitGroup
			for i := 1; i < n; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range b.N {
						_ = c.run(context.Background(), i)
					}
				}()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := c.run(context.Background(), 0); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			wg.Wait()
		})
	}
}
