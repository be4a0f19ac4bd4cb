// Package nvml reads a few NVML counters (libnvidia-ml.so.1) through
// purego, without cgo: SM and memory clocks (MHz), power draw (W) and GPU
// temperature (C), sampled by the CUDA backend after each measured step.
// Devices are found by PCI bus id so CUDA_VISIBLE_DEVICES cannot mismatch
// them.
package nvml

import (
	"fmt"
	"sync"

	"github.com/tpscope/tpscope/exec/cuda/internal/dl"
)

var (
	loadOnce sync.Once
	loadErr  error

	nvmlInit             func() int32
	nvmlSystemGetDriver  func(buf *byte, n uint32) int32
	nvmlByPciBusID       func(bus string, dev *uintptr) int32
	nvmlDeviceClockInfo  func(dev uintptr, typ int32, mhz *uint32) int32
	nvmlDevicePowerUsage func(dev uintptr, mw *uint32) int32
	nvmlDeviceTemp       func(dev uintptr, sensor int32, c *uint32) int32
)

// Load opens NVML and initialises it.
func Load() error {
	loadOnce.Do(func() {
		l, err := dl.Open("libnvidia-ml.so.1", "libnvidia-ml.so")
		if err != nil {
			loadErr = err
			return
		}
		b := &dl.Binder{Lib: l}
		b.Bind(&nvmlInit, "nvmlInit_v2")
		b.Bind(&nvmlSystemGetDriver, "nvmlSystemGetDriverVersion")
		b.Bind(&nvmlByPciBusID, "nvmlDeviceGetHandleByPciBusId_v2")
		b.Bind(&nvmlDeviceClockInfo, "nvmlDeviceGetClockInfo")
		b.Bind(&nvmlDevicePowerUsage, "nvmlDeviceGetPowerUsage")
		b.Bind(&nvmlDeviceTemp, "nvmlDeviceGetTemperature")
		if b.Err != nil {
			loadErr = b.Err
			return
		}
		if r := nvmlInit(); r != 0 {
			loadErr = fmt.Errorf("nvmlInit_v2: NVML error %d", r)
		}
	})
	return loadErr
}

// DriverVersion returns the NVIDIA driver version, e.g. "580.159.04".
func DriverVersion() string {
	var buf [96]byte
	if nvmlSystemGetDriver(&buf[0], uint32(len(buf))) != 0 {
		return ""
	}
	n := 0
	for n < len(buf) && buf[n] != 0 {
		n++
	}
	return string(buf[:n])
}

// Device is an NVML device handle.
type Device uintptr

// ByPCIBusID finds the device at bus id ("0000:18:00.0").
func ByPCIBusID(bus string) (Device, error) {
	var d uintptr
	if r := nvmlByPciBusID(bus, &d); r != 0 {
		return 0, fmt.Errorf("nvmlDeviceGetHandleByPciBusId_v2(%s): NVML error %d", bus, r)
	}
	return Device(d), nil
}

// Sample is one reading; a field NVML refused is -1.
type Sample struct {
	SMClockMHz, MemClockMHz, PowerW, TempC float64
}

// Read samples d (NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_TEMPERATURE_GPU = 0).
func (d Device) Read() Sample {
	s := Sample{-1, -1, -1, -1}
	var v uint32
	if nvmlDeviceClockInfo(uintptr(d), 1, &v) == 0 {
		s.SMClockMHz = float64(v)
	}
	if nvmlDeviceClockInfo(uintptr(d), 2, &v) == 0 {
		s.MemClockMHz = float64(v)
	}
	if nvmlDevicePowerUsage(uintptr(d), &v) == 0 {
		s.PowerW = float64(v) / 1000
	}
	if nvmlDeviceTemp(uintptr(d), 0, &v) == 0 {
		s.TempC = float64(v)
	}
	return s
}
