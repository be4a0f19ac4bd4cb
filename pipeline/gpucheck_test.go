package pipeline

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/tpscope/tpscope/exec"
	"github.com/tpscope/tpscope/model"
	"github.com/tpscope/tpscope/topology"
	"github.com/tpscope/tpscope/traces/schema"
)

// gpuBackend names a GPU as the CUDA backend does (its resource
// attributes) and runs nothing.
type gpuBackend struct{ model string }

func (gpuBackend) Name() string { return "gpu-stub" }
func (gpuBackend) Open(context.Context, *model.Schedule, exec.SessionConfig) (exec.Session, error) {
	return nil, errors.New("not run")
}
func (g gpuBackend) ResourceAttributes(...int) []attribute.KeyValue {
	if g.model == "" {
		return nil
	}
	return []attribute.KeyValue{schema.ResGPUModel.String(g.model)}
}

// TestCheckDeviceGPU: a box of another GPU than the device is refused by
// the catalog entry each name stands for; the same GPU under its driver's
// name passes, and a backend that names no GPU, or one the catalog does
// not know, is not judged.
func TestCheckDeviceGPU(t *testing.T) {
	box := func(name string) *topology.Topology {
		tp, err := topology.Resolve(name, 0)
		if err != nil {
			t.Fatal(err)
		}
		return tp
	}
	for _, c := range []struct {
		device, box string
		refused     bool
	}{
		{"NVIDIA H100 80GB HBM3", "nvswitch:8xh100-sxm", false},
		{"NVIDIA H100 80GB HBM3", "nvswitch:8xh200-sxm", true},
		{"NVIDIA H200", "h200-nvswitch", false},
		{"NVIDIA H200", "rtxpro6000-2s", true},
		{"NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtxpro6000-2s", false},
		{"", "nvswitch:8xh200-sxm", false},
		{"Some Future GPU", "nvswitch:8xh200-sxm", false},
	} {
		err := checkDeviceGPU(gpuBackend{c.device}, box(c.box))
		var ge *GPUMismatchError
		if got := errors.As(err, &ge); got != c.refused || (err != nil && !got) {
			t.Errorf("device %q, box %s: %v, want refused %v", c.device, c.box, err, c.refused)
			continue
		}
		if ge != nil && (ge.RunGPU != c.device || ge.Topology == "") {
			t.Errorf("device %q, box %s: error %+v does not name the run's GPU and the box", c.device, c.box, ge)
		}
	}
}
