package dl

import (
	"errors"
	"os"
	"path/filepath"
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
