package cuda

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestLaunchEnvFrom(t *testing.T) {
	cases := []struct {
		name    string
		vars    map[string]string
		ok      bool
		want    LaunchEnv
		errPart string
	}{
		{name: "single process", vars: map[string]string{}, ok: false},
		{name: "torchrun", ok: true,
			vars: map[string]string{"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "3", "MASTER_ADDR": "node0", "MASTER_PORT": "29400"},
			want: LaunchEnv{Rank: 3, World: 8, LocalRank: 3, MasterAddr: "node0", RendezvousPort: 29401, Source: "torchrun"}},
		{name: "slurm default port", ok: true,
			vars: map[string]string{"SLURM_PROCID": "9", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1", "MASTER_ADDR": "gpu17"},
			want: LaunchEnv{Rank: 9, World: 16, LocalRank: 1, MasterAddr: "gpu17", RendezvousPort: 29501, Source: "slurm"}},
		{name: "explicit rendezvous port", ok: true,
			vars: map[string]string{"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "TPSCOPE_RDZV_PORT": "4000"},
			want: LaunchEnv{Rank: 0, World: 2, MasterAddr: "h", RendezvousPort: 4000, Source: "torchrun"}},
		{name: "rank out of range", ok: true, vars: map[string]string{"RANK": "8", "WORLD_SIZE": "8", "MASTER_ADDR": "h"}, errPart: "0 <= rank < world"},
		{name: "bad number", ok: true, vars: map[string]string{"RANK": "x", "WORLD_SIZE": "8"}, errPart: `RANK="x"`},
		{name: "no master", ok: true, vars: map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "2"}, errPart: "MASTER_ADDR is not set"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok, err := LaunchEnvFrom(func(k string) string { return c.vars[k] })
			if ok != c.ok {
				t.Fatalf("ok = %v, want %v", ok, c.ok)
			}
			if c.errPart != "" {
				if err == nil || !strings.Contains(err.Error(), c.errPart) {
					t.Fatalf("error %v, want it to contain %q", err, c.errPart)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// Rank 0 serves the id; three peers fetch it, one of them before the
// server is up (it retries).
func TestRendezvous(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := bytes.Repeat([]byte{0xab, 0x01}, 64)
	addr, done, err := serveID(ctx, "127.0.0.1:0", id, 3)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 3)
	for range 3 {
		go func() {
			b, err := fetchID(ctx, addr, len(id))
			if err != nil {
				t.Error(err)
			}
			got <- b
		}()
	}
	for range 3 {
		if b := <-got; !bytes.Equal(b, id) {
			t.Fatalf("peer got %x", b)
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("server: %v", err)
	}
}

func TestRendezvousCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	_, done, err := serveID(ctx, "127.0.0.1:0", make([]byte, 128), 2)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "0 of 2 peers") {
		t.Fatalf("server after cancel: %v", err)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if _, err := fetchID(ctx2, "127.0.0.1:1", 128); err == nil {
		t.Fatal("fetch from nowhere succeeded")
	}
}
