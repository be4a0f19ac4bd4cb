package sim

import (
	"unsafe"

	"github.com/tpscope/tpscope/model"
)

// The cost fields of model.Op from M through CommBytes (shape, dtypes,
// FLOPs, bytes, collective kind and size) lie contiguously in the struct.
// rawCostEqual compares them as memory: equal memory implies equal fields
// (string headers equal means same data), so it is a sound fast path; a
// false result only means "compare field by field". The layout is checked
// by TestRawCostLayout.
var (
	rawFrom = unsafe.Offsetof(model.Op{}.M)
	rawTo   = unsafe.Offsetof(model.Op{}.CommBytes) + unsafe.Sizeof(model.Op{}.CommBytes)
)

func rawCostEqual(a, b *model.Op) bool {
	n := int(rawTo - rawFrom)
	pa := unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(a), rawFrom)), n)
	pb := unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(b), rawFrom)), n)
	return pa == pb
}
