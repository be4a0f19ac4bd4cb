package dl

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSearchDirsOrder(t *testing.T) {
	home := t.TempDir()
	wheel := filepath.Join(home, ".local/lib/python3.12/site-packages/nvidia/nccl/lib")
	if err := os.MkdirAll(wheel, 0o755); err != nil {
		t.Fatal(err)
	}
	d := SearchDirs("/opt/a::/opt/b", home)
	if len(d) < 4 || d[0] != "/opt/a" || d[1] != "/opt/b" || d[2] != "/usr/local/cuda/lib64" {
		t.Fatalf("dirs %v: want TPSCOPE_CUDA_LIBS entries first, then /usr/local/cuda/lib64", d)
	}
	if d[len(d)-1] != wheel {
		t.Fatalf("last dir %q, want the user's wheel folder %q", d[len(d)-1], wheel)
	}
}

func TestOpenMissing(t *testing.T) {
	t.Setenv(EnvLibs, t.TempDir())
	_, err := Open("libtpscope-missing.so.2", "libtpscope-missing.so")
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("error %v: want *NotFoundError", err)
	}
	if want := "libtpscope-missing.so.2 not found; set TPSCOPE_CUDA_LIBS"; err.Error() != want {
		t.Fatalf("message %q, want %q", err.Error(), want)
	}
}

// Require records a missing symbol as Bind does and then stops looking up.
func TestRequire(t *testing.T) {
	l, err := Open("libc.so.6")
	if err != nil {
		t.Skipf("no libc.so.6: %v", err)
	}
	b := &Binder{Lib: l}
	if b.Require("strlen") == 0 || b.Err != nil {
		t.Fatalf("strlen: err %v", b.Err)
	}
	if p := b.Require("tpscope_missing_symbol"); p != 0 || b.Err == nil || !strings.Contains(b.Err.Error(), "symbol tpscope_missing_symbol missing") {
		t.Fatalf("missing symbol: address %#x, err %v", p, b.Err)
	}
	if p := b.Require("strlen"); p != 0 {
		t.Fatalf("after an error: address %#x, want 0", p)
	}
}
