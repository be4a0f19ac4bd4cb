package cuda

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// LaunchEnv is a multi-process launch as a launcher describes it in the
// environment: one process per GPU, each running one rank.
//
//	torchrun: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
//	Slurm:    SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (MASTER_ADDR must be
//	          exported by the job script; MASTER_PORT defaults to 29500)
//
// The NCCL unique id travels over a small TCP rendezvous that rank 0 serves
// on MASTER_ADDR:RendezvousPort (TPSCOPE_RDZV_PORT, else MASTER_PORT+1,
// because torchrun's own store already listens on MASTER_PORT).
type LaunchEnv struct {
	Rank, World, LocalRank int
	MasterAddr             string
	RendezvousPort         int
	Source                 string // "torchrun" or "slurm"
}

// LaunchEnvFrom reads a launch from getenv (os.Getenv in production). ok
// is false when no launcher variables are set (a single-process run); err
// names the variable that is malformed.
func LaunchEnvFrom(getenv func(string) string) (env LaunchEnv, ok bool, err error) {
	num := func(name string) (int, error) {
		v, err := strconv.Atoi(getenv(name))
		if err != nil || v < 0 {
			return 0, fmt.Errorf("%s=%q: want a non-negative integer", name, getenv(name))
		}
		return v, nil
	}
	var rankVar, worldVar, localVar string
	switch {
	case getenv("RANK") != "" && getenv("WORLD_SIZE") != "":
		rankVar, worldVar, localVar, env.Source = "RANK", "WORLD_SIZE", "LOCAL_RANK", "torchrun"
	case getenv("SLURM_PROCID") != "" && getenv("SLURM_NTASKS") != "":
		rankVar, worldVar, localVar, env.Source = "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "slurm"
	default:
		return LaunchEnv{}, false, nil
	}
	if env.Rank, err = num(rankVar); err != nil {
		return env, true, err
	}
	if env.World, err = num(worldVar); err != nil {
		return env, true, err
	}
	if env.World < 1 || env.Rank >= env.World {
		return env, true, fmt.Errorf("%s=%d, %s=%d: want 0 <= rank < world", rankVar, env.Rank, worldVar, env.World)
	}
	if getenv(localVar) != "" {
		if env.LocalRank, err = num(localVar); err != nil {
			return env, true, err
		}
	}
	env.MasterAddr = getenv("MASTER_ADDR")
	if env.MasterAddr == "" {
		if env.World > 1 {
			return env, true, fmt.Errorf("MASTER_ADDR is not set: want the host name of rank 0 (Slurm: export MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n1))")
		}
		env.MasterAddr = "127.0.0.1"
	}
	port := 29500
	if getenv("MASTER_PORT") != "" {
		if port, err = num("MASTER_PORT"); err != nil {
			return env, true, err
		}
	}
	env.RendezvousPort = port + 1
	if getenv("TPSCOPE_RDZV_PORT") != "" {
		if env.RendezvousPort, err = num("TPSCOPE_RDZV_PORT"); err != nil {
			return env, true, err
		}
	}
	if env.RendezvousPort < 1 || env.RendezvousPort > 65535 {
		return env, true, fmt.Errorf("rendezvous port %d: want 1..65535", env.RendezvousPort)
	}
	return env, true, nil
}

// rdzvMagic starts every rendezvous request, so a stray connection is not
// served an id.
const rdzvMagic = "tpscope-nccl-id/1"

// serveID listens on addr and hands id to peers connections until every one
// of peers has been served or ctx is done. It returns once the listener
// is up; the returned channel gets the serving loop's result.
func serveID(ctx context.Context, addr string, id []byte, peers int) (string, <-chan error, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("rendezvous: listen on %s: %w", addr, err)
	}
	done := make(chan error, 1)
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	go func() {
		defer stop()
		defer ln.Close()
		served := 0
		for served < peers {
			c, err := ln.Accept()
			if err != nil {
				if ctx.Err() != nil {
					done <- fmt.Errorf("rendezvous: %d of %d peers fetched the NCCL id: %w", served, peers, ctx.Err())
				} else {
					done <- fmt.Errorf("rendezvous: accept: %w", err)
				}
				return
			}
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			buf := make([]byte, len(rdzvMagic))
			if _, err := io.ReadFull(c, buf); err == nil && string(buf) == rdzvMagic {
				if _, err := c.Write(id); err == nil {
					served++
				}
			}
			c.Close()
		}
		done <- nil
	}()
	return ln.Addr().String(), done, nil
}

// fetchID connects to addr (retrying while rank 0 is not up yet) and reads
// an n-byte id, until ctx is done.
func fetchID(ctx context.Context, addr string, n int) ([]byte, error) {
	var last error
	for {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			id := make([]byte, n)
			_, err = c.Write([]byte(rdzvMagic))
			if err == nil {
				_, err = io.ReadFull(c, id)
			}
			c.Close()
			if err == nil {
				return id, nil
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("rendezvous: fetch NCCL id from %s: %w (last error: %v)", addr, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
