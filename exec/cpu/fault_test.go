package cpu_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/exec/cpu"
	"github.com/tpscope/tpscope/model"
)

// TestFaultWatchdogEndsEveryRank: tiny-mla-moe at TP 4 on goroutine ranks,
// rank 2 never entering L01.attn.allreduce of the second step. The other
// three wait inside that all-reduce until the CPU backend's watchdog (300
// ms here) ends their wait; the run must then end on every rank with the
// watchdog's error naming the collective and rank 2, well before the
// fault's 60 s hold (which would say that no watchdog fired), with every
// goroutine gone. The first step, before the fault, completes.
func TestFaultWatchdogEndsEveryRank(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := tinySchedule(t, model.Plan{TP: 4}, model.Workload{Phase: model.Decode, Batch: 8, Context: 512})
	const watchdog = 300 * time.Millisecond
	start := time.Now()
	res, err := exec.Run(context.Background(), s, cpu.New(), exec.WithSteps(3), exec.WithWarmup(0), exec.WithWatchdog(watchdog),
		exec.WithFault(exec.Fault{Rank: 2, OpID: "L01.attn.allreduce", Step: 1, Hold: time.Minute}))
	took := time.Since(start)
	if err == nil {
		t.Fatal("run with a stalled rank succeeded")
	}
	for _, want := range []string{"allreduce L01.attn.allreduce over ranks [0 1 2 3]", "waited 300ms for rank(s) [2], which never arrived", "collective watchdog"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "no watchdog ended the run") {
		t.Errorf("the fault's hold ended the run, not the watchdog: %v", err)
	}
	if took < watchdog || took > 30*time.Second {
		t.Errorf("run ended after %v: want after the %v watchdog and long before the 1 min hold", took, watchdog)
	}
	if res == nil || res.Steps != 1 {
		t.Errorf("result %+v: want the one step before the fault", res)
	}
	t.Logf("ended after %v: %v", took, err)
}
