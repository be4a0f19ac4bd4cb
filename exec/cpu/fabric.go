package cpu

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tpscope/tpscope/model"
)

// fabric is the shared-memory "interconnect" of a Session: one collective
// object per collective op ID and group, holding every member's send and receive
// buffers. Buffers are float32 and carry the op's CommBytes (4 bytes per
// element): the bytes moved are the schedule's, the element count is half
// that of a bf16 payload.
//
// Algorithms (n members, chunk = elements/n):
//
//	allreduce      ring: copy, n-1 reduce-scatter steps, n-1 all-gather steps;
//	               each rank reads its left neighbour's buffer; 2n-2 barriers
//	allgather      ring: n-1 copy steps from the left neighbour; n-1 barriers
//	reducescatter  ring: n-1 reduce steps; n-1 barriers
//	alltoall       direct: each rank writes its chunk for j into j's buffer; 1 barrier
//
// The ring mirrors NCCL's ring algorithm step for step (a step waits for the
// left neighbour's previous step), so sim's ring model applies to it.
type fabric struct {
	colls map[string]*collective // by collKey; the map is read-only after Open
}

type collective struct {
	id    string
	kind  model.Collective
	group []int
	elems int // total elements of the nccl-tests-convention buffer
	chunk int // elements per member (elems = chunk * len(group))
	local bool
	bar   groupBarrier

	mu         sync.Mutex
	send, recv [][]float32 // by member index; set by each member's OpenRank
	work       [][]float32 // reducescatter: per-member working copy
}

func newCollective(op *model.Op, allLocal bool, watchdog time.Duration) *collective {
	n := len(op.Group)
	elems := int((op.CommBytes + 3) / 4)
	chunk := max(1, (elems+n-1)/n)
	c := &collective{
		id: op.ID, kind: op.Collective, group: op.Group,
		chunk: chunk, elems: chunk * n, local: allLocal,
		send: make([][]float32, n), recv: make([][]float32, n), work: make([][]float32, n),
	}
	c.bar.init(n, watchdog, fmt.Sprintf("%s %s over ranks %v", op.Collective, op.ID, op.Group), op.Group)
	return c
}

// sendLen and recvLen are the buffer sizes of one member, in elements.
func (c *collective) sendLen() int {
	if c.kind == model.AllGather {
		return c.chunk
	}
	return c.elems
}

func (c *collective) recvLen() int {
	if c.kind == model.ReduceScatter {
		return c.chunk
	}
	return c.elems
}

func (c *collective) member(rank int) int {
	for i, r := range c.group {
		if r == rank {
			return i
		}
	}
	return -1
}

// register allocates member i's buffers and fills its send buffer.
func (c *collective) register(i int, fill func([]float32)) {
	send := make([]float32, c.sendLen())
	fill(send)
	recv := make([]float32, c.recvLen())
	var work []float32
	if c.kind == model.ReduceScatter {
		work = make([]float32, c.elems)
	}
	c.mu.Lock()
	c.send[i], c.recv[i], c.work[i] = send, recv, work
	c.mu.Unlock()
}

// run executes member i's part. Every member of the group must call it
// for the collective to complete; it returns early with ctx's error.
func (c *collective) run(ctx context.Context, i int) error {
	n, ch := len(c.group), c.chunk
	left := (i + n - 1) % n
	mod := func(x int) int { return ((x % n) + n) % n }
	span := func(b []float32, k int) []float32 { return b[k*ch : (k+1)*ch] }
	switch c.kind {
	case model.AllReduce:
		me, lt := c.recv[i], c.recv[left]
		copy(me, c.send[i])
		if err := c.bar.wait(ctx, i); err != nil {
			return err
		}
		for s := range n - 1 { // reduce-scatter
			k := mod(i - s - 1)
			dst, src := span(me, k), span(lt, k)
			for j := range dst {
				dst[j] += src[j]
			}
			if err := c.bar.wait(ctx, i); err != nil {
				return err
			}
		}
		for s := range n - 1 { // all-gather
			k := mod(i - s)
			copy(span(me, k), span(lt, k))
			if s < n-2 {
				if err := c.bar.wait(ctx, i); err != nil {
					return err
				}
			}
		}
	case model.AllGather:
		me, lt := c.recv[i], c.recv[left]
		copy(span(me, i), c.send[i])
		if err := c.bar.wait(ctx, i); err != nil {
			return err
		}
		for s := range n - 1 {
			k := mod(i - s - 1)
			copy(span(me, k), span(lt, k))
			if s < n-2 {
				if err := c.bar.wait(ctx, i); err != nil {
					return err
				}
			}
		}
	case model.ReduceScatter:
		me, lt := c.work[i], c.work[left]
		copy(me, c.send[i])
		if err := c.bar.wait(ctx, i); err != nil {
			return err
		}
		for s := range n - 1 {
			k := mod(i - s - 2)
			dst, src := span(me, k), span(lt, k)
			for j := range dst {
				dst[j] += src[j]
			}
			if s < n-2 {
				if err := c.bar.wait(ctx, i); err != nil {
					return err
				}
			}
		}
		copy(c.recv[i], span(me, i))
	case model.AllToAll:
		for j := range n {
			copy(span(c.recv[j], i), span(c.send[i], j))
		}
		if err := c.bar.wait(ctx, i); err != nil {
			return err
		}
	default:
		return fmt.Errorf("collective %s: unknown kind %q", c.id, c.kind)
	}
	return nil
}

// expect returns what member i's receive buffer must hold at position p,
// computed serially from the members' send buffers, and a tolerance for
// the different summation order.
func (c *collective) expect(i, p int) (want, tol float32) {
	n, ch := len(c.group), c.chunk
	sum := func(pos int) (float32, float32) {
		var s, abs float32
		for m := range n {
			v := c.send[m][pos]
			s += v
			abs += float32(math.Abs(float64(v)))
		}
		return s, 1e-5 * (1 + abs)
	}
	switch c.kind {
	case model.AllReduce:
		return sum(p)
	case model.ReduceScatter:
		return sum(i*ch + p)
	case model.AllGather:
		return c.send[p/ch][p%ch], 0
	case model.AllToAll:
		return c.send[p/ch][i*ch+p%ch], 0
	}
	return 0, 0
}

// verify checks member i's receive buffer at the given positions.
func (c *collective) verify(i int, positions []int) error {
	recv := c.recv[i]
	for _, p := range positions {
		if p >= len(recv) {
			continue
		}
		want, tol := c.expect(i, p)
		if got := recv[p]; math.Abs(float64(got-want)) > float64(tol) || math.IsNaN(float64(got)) {
			return fmt.Errorf("%s %s check failed on rank %d: element %d = %g, want %g (serial result over %d ranks)",
				c.kind, c.id, c.group[i], p, got, want, len(c.group))
		}
	}
	return nil
}

// groupBarrier releases the members of one collective together. Each
// member blocks on its own preallocated channel, so a wait allocates
// nothing; a member whose ctx is done leaves with ctx's error.
//
// The watchdog: a member that waits longer than watchdog leaves with an
// error naming the members that have not arrived (the run is over then and
// the barrier is not used again). Arming a timer per wait would cost a
// timer-heap insert and removal on every barrier of every ring step, so
// each member has one lazy timer instead: a wait notes when it began and
// arms the timer only when it is not armed already; when the timer fires
// it re-arms itself for what is left of a wait still in progress, or
// aborts a wait that has lasted the whole watchdog. In steady state that is
// one timer event per member and watchdog period, and a clock read per
// wait.
type groupBarrier struct {
	mu       sync.Mutex
	n        int
	count    int
	arrived  []bool        // by member, in the current round
	since    []time.Time   // by member: when its wait began; zero when not waiting
	armed    []bool        // by member: its timer is pending
	aborted  []atomic.Bool // by member: the watchdog's verdict, delivered with a wake
	wake     []chan struct{}
	dog      []*time.Timer
	watchdog time.Duration
	desc     string // "allreduce L03.attn.allreduce over ranks [0 1 2 3]", for errors
	group    []int
}

func (b *groupBarrier) init(n int, watchdog time.Duration, desc string, group []int) {
	b.n, b.watchdog, b.desc, b.group = n, watchdog, desc, group
	b.arrived, b.armed = make([]bool, n), make([]bool, n)
	b.since = make([]time.Time, n)
	b.aborted = make([]atomic.Bool, n)
	b.wake = make([]chan struct{}, n)
	b.dog = make([]*time.Timer, n)
	for i := range n {
		b.wake[i] = make(chan struct{}, 1)
		b.dog[i] = time.AfterFunc(time.Hour, func() { b.fire(i) })
		b.dog[i].Stop()
	}
}

// close stops the watchdog timers (Session.Close).
func (b *groupBarrier) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, t := range b.dog {
		t.Stop()
		b.armed[i] = false
	}
}

func (b *groupBarrier) wait(ctx context.Context, i int) error {
	b.mu.Lock()
	b.count++
	b.arrived[i] = true
	if b.count == b.n {
		b.count = 0
		clear(b.arrived)
		clear(b.since)
		for j, ch := range b.wake {
			if j != i {
				select {
				case ch <- struct{}{}:
				default:
				}
			}
		}
		b.mu.Unlock()
		return nil
	}
	b.since[i] = time.Now()
	if !b.armed[i] {
		b.armed[i] = true
		b.dog[i].Reset(b.watchdog)
	}
	b.mu.Unlock()
	select {
	case <-b.wake[i]:
		if b.aborted[i].Load() {
			return b.timeout(i)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for peers: %w", ctx.Err())
	}
}

// fire is member i's timer: abort a wait that has lasted the watchdog,
// re-arm for the rest of a shorter one, else stay disarmed.
func (b *groupBarrier) fire(i int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.armed[i] {
		return // stopped by close
	}
	if b.since[i].IsZero() {
		b.armed[i] = false
		return
	}
	if left := b.watchdog - time.Since(b.since[i]); left > 0 {
		b.dog[i].Reset(left)
		return
	}
	b.armed[i] = false
	b.aborted[i].Store(true)
	select {
	case b.wake[i] <- struct{}{}:
	default:
	}
}

// timeout is the watchdog's error for member i, unless the round completed
// just as the verdict came (the release cleared since[i]; its wake token
// went to the verdict's, which i has taken).
func (b *groupBarrier) timeout(i int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.aborted[i].Store(false)
	if b.since[i].IsZero() {
		return nil
	}
	var missing []int
	for j, ok := range b.arrived {
		if !ok {
			missing = append(missing, b.group[j])
		}
	}
	return fmt.Errorf("%s: rank %d waited %v for rank(s) %v, which never arrived (collective watchdog; set with --watchdog)",
		b.desc, b.group[i], b.watchdog, missing)
}
