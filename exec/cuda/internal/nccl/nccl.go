// Package nccl binds NCCL (libnccl.so.2) through purego: communicator
// set-up from a unique id (one communicator per rank, any number of
// processes), the collectives tpscope's schedules use (all-reduce,
// all-gather, reduce-scatter, all-to-all as grouped send/recv), and the
// asynchronous-error query and abort a watchdog needs. Errors carry the call
// name, ncclGetErrorString's text and the communicator's last error.
package nccl

import (
	"fmt"
	"sync"

	"github.com/tpscope/tpscope/exec/cuda/internal/cu"
	"github.com/tpscope/tpscope/exec/cuda/internal/dl"
)

// Result is an ncclResult_t.
type Result int32

// Results.
const (
	Success    Result = 0
	InProgress Result = 7
)

// Data types and reduction ops (nccl.h).
const (
	Bfloat16 = 9
	Float32  = 7
	Uint8    = 1
	Sum      = 0
)

// UniqueID is ncclUniqueId (NCCL_UNIQUE_ID_BYTES = 128), passed by value.
type UniqueID struct{ Internal [128]byte }

// Comm is an ncclComm_t.
type Comm uintptr

// Error is a failed NCCL call.
type Error struct {
	Call string
	Code Result
	Msg  string
	Last string // ncclGetLastError, when NCCL said more
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s (%d)", e.Call, e.Msg, int(e.Code))
	if e.Last != "" {
		s += ": " + e.Last
	}
	return s
}

var (
	loadOnce sync.Once
	loadErr  error

	ncclGetVersion        func(v *int32) Result
	ncclGetUniqueId       func(id *UniqueID) Result
	ncclCommInitRank      func(c *Comm, nranks int32, id UniqueID, rank int32) Result
	ncclCommDestroy       func(c Comm) Result
	ncclCommAbort         func(c Comm) Result
	ncclCommGetAsyncError func(c Comm, r *Result) Result
	ncclGetErrorString    func(r Result) string
	ncclGetLastError      func(c Comm) string
	ncclAllReduce         func(send, recv cu.DevPtr, count uint64, dt int32, op int32, c Comm, s cu.Stream) Result
	ncclAllGather         func(send, recv cu.DevPtr, count uint64, dt int32, c Comm, s cu.Stream) Result
	ncclReduceScatter     func(send, recv cu.DevPtr, count uint64, dt int32, op int32, c Comm, s cu.Stream) Result
	ncclSend              func(buf cu.DevPtr, count uint64, dt int32, peer int32, c Comm, s cu.Stream) Result
	ncclRecv              func(buf cu.DevPtr, count uint64, dt int32, peer int32, c Comm, s cu.Stream) Result
	ncclGroupStart        func() Result
	ncclGroupEnd          func() Result
)

// Load opens libnccl.so.2 and binds the functions.
func Load() error {
	loadOnce.Do(func() {
		l, err := dl.Open("libnccl.so.2", "libnccl.so")
		if err != nil {
			loadErr = err
			return
		}
		b := &dl.Binder{Lib: l}
		b.Bind(&ncclGetVersion, "ncclGetVersion")
		b.Bind(&ncclGetUniqueId, "ncclGetUniqueId")
		b.Bind(&ncclCommInitRank, "ncclCommInitRank")
		b.Bind(&ncclCommDestroy, "ncclCommDestroy")
		b.Bind(&ncclCommAbort, "ncclCommAbort")
		b.Bind(&ncclCommGetAsyncError, "ncclCommGetAsyncError")
		b.Bind(&ncclGetErrorString, "ncclGetErrorString")
		b.Bind(&ncclAllReduce, "ncclAllReduce")
		b.Bind(&ncclAllGather, "ncclAllGather")
		b.Bind(&ncclReduceScatter, "ncclReduceScatter")
		b.Bind(&ncclSend, "ncclSend")
		b.Bind(&ncclRecv, "ncclRecv")
		b.Bind(&ncclGroupStart, "ncclGroupStart")
		b.Bind(&ncclGroupEnd, "ncclGroupEnd")
		b.Optional(&ncclGetLastError, "ncclGetLastError")
		loadErr = b.Err
	})
	return loadErr
}

func check(call string, c Comm, r Result) error {
	if r == Success {
		return nil
	}
	e := &Error{Call: call, Code: r, Msg: "unknown"}
	if ncclGetErrorString != nil {
		e.Msg = ncclGetErrorString(r)
	}
	if ncclGetLastError != nil {
		e.Last = ncclGetLastError(c)
	}
	return e
}

// Version returns NCCL's version as "major.minor.patch" (NCCL_VERSION_CODE
// = major*10000 + minor*100 + patch since 2.9).
func Version() (string, error) {
	var v int32
	if err := check("ncclGetVersion", 0, ncclGetVersion(&v)); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100), nil
}

// NewUniqueID creates the id rank 0 shares with every rank.
func NewUniqueID() (UniqueID, error) {
	var id UniqueID
	err := check("ncclGetUniqueId", 0, ncclGetUniqueId(&id))
	return id, err
}

// InitRank joins communicator id as rank of nranks on the current
// context's device. It blocks until every rank has joined.
func InitRank(id UniqueID, nranks, rank int) (Comm, error) {
	var c Comm
	err := check("ncclCommInitRank", 0, ncclCommInitRank(&c, int32(nranks), id, int32(rank)))
	return c, err
}

// Destroy frees c after its work finished.
func Destroy(c Comm) error { return check("ncclCommDestroy", c, ncclCommDestroy(c)) }

// Abort frees c at once, cancelling its outstanding work (the watchdog's
// way out of a hung collective).
func Abort(c Comm) error { return check("ncclCommAbort", c, ncclCommAbort(c)) }

// AsyncError returns the communicator's asynchronous error, if any.
func AsyncError(c Comm) error {
	var r Result
	if err := check("ncclCommGetAsyncError", c, ncclCommGetAsyncError(c, &r)); err != nil {
		return err
	}
	if r == Success || r == InProgress {
		return nil
	}
	return check("ncclCommGetAsyncError(async)", c, r)
}

// AllReduce sums count bf16 values of buf in place across the communicator.
func AllReduce(buf cu.DevPtr, count uint64, c Comm, s cu.Stream) error {
	return check("ncclAllReduce", c, ncclAllReduce(buf, buf, count, Bfloat16, Sum, c, s))
}

// AllGather gathers sendCount bf16 values from every rank into recv.
func AllGather(send, recv cu.DevPtr, sendCount uint64, c Comm, s cu.Stream) error {
	return check("ncclAllGather", c, ncclAllGather(send, recv, sendCount, Bfloat16, c, s))
}

// ReduceScatter sums send across ranks and leaves recvCount values on each.
func ReduceScatter(send, recv cu.DevPtr, recvCount uint64, c Comm, s cu.Stream) error {
	return check("ncclReduceScatter", c, ncclReduceScatter(send, recv, recvCount, Bfloat16, Sum, c, s))
}

// AllToAll sends chunk bytes to every rank (including itself) from send
// and receives chunk bytes from each into recv, as one NCCL group of
// send/recv pairs (NCCL has no all-to-all primitive; nccl-tests' alltoall
// does the same).
func AllToAll(send, recv cu.DevPtr, chunkBytes uint64, nranks int, c Comm, s cu.Stream) error {
	if err := check("ncclGroupStart", c, ncclGroupStart()); err != nil {
		return err
	}
	var first error
	for p := 0; p < nranks; p++ {
		off := cu.DevPtr(uint64(p) * chunkBytes)
		if err := check("ncclSend", c, ncclSend(send+off, chunkBytes, Uint8, int32(p), c, s)); err != nil && first == nil {
			first = err
		}
		if err := check("ncclRecv", c, ncclRecv(recv+off, chunkBytes, Uint8, int32(p), c, s)); err != nil && first == nil {
			first = err
		}
	}
	if err := check("ncclGroupEnd", c, ncclGroupEnd()); err != nil && first == nil {
		first = err
	}
	return first
}
