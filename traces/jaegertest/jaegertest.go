// Package jaegertest starts a real Jaeger (v2, all-in-one, in-memory
// storage) for tests: every endpoint on 127.0.0.1 at free ports, ready
// before Start returns, stopped by PID through t.Cleanup however the test
// ends.
//
// The binary is the repository's bin/jaeger, built from the tools module
// tools/jaeger (`make jaeger` or `make test` build it; about 7 minutes on
// two cores the first time). $TPSCOPE_JAEGER names another binary. When
// the binary is missing Start builds it; when that fails the test fails
// (it does not skip), except under `go test -short`, which skips.
package jaegertest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Jaeger is a running Jaeger process.
type Jaeger struct {
	OTLPGRPC  string // host:port of the OTLP/gRPC receiver
	OTLPHTTP  string // host:port of the OTLP/HTTP receiver
	QueryHTTP string // http://host:port of the query API (v1 /api/..., v3 /api/v3/...)
	QueryGRPC string // host:port of the query gRPC API
	Health    string // http://host:port/status
	PID       int
	LogPath   string

	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	stop    sync.Once
}

// Start starts Jaeger and registers its stop with t.Cleanup.
func Start(t testing.TB) *Jaeger {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real Jaeger; skipped with -short")
	}
	bin, err := Binary()
	if err != nil {
		t.Fatalf("jaegertest: %v", err)
	}
	dir := t.TempDir()
	var j *Jaeger
	for attempt := 0; attempt < 3; attempt++ { // a picked port may be taken meanwhile
		j, err = start(bin, dir, attempt)
		if err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("jaegertest: %v", err)
	}
	t.Cleanup(func() {
		if err := j.Stop(); err != nil {
			t.Errorf("jaegertest: stop pid %d: %v", j.PID, err)
		}
	})
	return j
}

// config is Jaeger v2's all-in-one configuration with every endpoint on
// loopback, in-memory storage, no self-tracing and no metrics endpoint.
const config = `service:
  extensions: [jaeger_storage, jaeger_query, healthcheckv2]
  pipelines:
    traces:
      receivers: [otlp]
      processors: []
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  healthcheckv2:
    use_v2: true
    http:
      endpoint: %s
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: %s
    grpc:
      endpoint: %s
    enable_tracing: false
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`

// Config returns the Jaeger configuration for the given loopback ports
// (health, query HTTP, query gRPC, OTLP gRPC, OTLP HTTP). The Makefile's
// `jaeger` target writes the same file with the standard ports.
func Config(health, queryHTTP, queryGRPC, otlpGRPC, otlpHTTP int) string {
	a := func(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }
	return fmt.Sprintf(config, a(health), a(queryHTTP), a(queryGRPC), a(otlpGRPC), a(otlpHTTP))
}

func start(bin, dir string, attempt int) (*Jaeger, error) {
	ports, err := freePorts(5)
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, fmt.Sprintf("jaeger-%d.yaml", attempt))
	if err := os.WriteFile(cfg, []byte(Config(ports[0], ports[1], ports[2], ports[3], ports[4])), 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, fmt.Sprintf("jaeger-%d.log", attempt))
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--config=file:"+cfg)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "JAEGER_LISTEN_HOST=127.0.0.1")
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	a := func(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }
	j := &Jaeger{
		Health: "http://" + a(ports[0]) + "/status", QueryHTTP: "http://" + a(ports[1]), QueryGRPC: a(ports[2]),
		OTLPGRPC: a(ports[3]), OTLPHTTP: a(ports[4]), PID: cmd.Process.Pid, LogPath: logPath,
		cmd: cmd, done: make(chan struct{}),
	}
	go func() { j.waitErr = cmd.Wait(); close(j.done) }()
	// Ready in ~0.2 s on an idle machine (go-stack.md); allow for a busy one.
	deadline := time.Now().Add(30 * time.Second)
	client := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-j.done:
			return nil, fmt.Errorf("jaeger exited before it was ready (%v); log %s:\n%s", j.waitErr, logPath, tail(logPath))
		default:
		}
		if ready(client, j.Health) && ready(client, j.QueryHTTP+"/api/services") {
			return j, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	j.Stop()
	return nil, fmt.Errorf("jaeger not ready after 30 s; log %s:\n%s", logPath, tail(logPath))
}

func ready(c *http.Client, url string) bool {
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Stop sends SIGTERM, waits up to 10 s, then SIGKILL. Safe to call twice.
func (j *Jaeger) Stop() error {
	var err error
	j.stop.Do(func() {
		_ = j.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-j.done:
		case <-time.After(10 * time.Second):
			_ = j.cmd.Process.Kill()
			<-j.done
			err = fmt.Errorf("did not stop within 10 s of SIGTERM; killed")
		}
	})
	return err
}

// Kill ends Jaeger at once with SIGKILL, as a crash would, and waits for
// it to be gone.
func (j *Jaeger) Kill() {
	j.stop.Do(func() {
		_ = j.cmd.Process.Kill()
		<-j.done
	})
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// RepoRoot finds the directory holding the module's go.mod with
// tools/jaeger, walking up from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "tools", "jaeger", "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no tools/jaeger/go.mod above the working directory")
		}
		dir = parent
	}
}

var buildMu sync.Mutex

// Binary returns the Jaeger binary: $TPSCOPE_JAEGER, else <repo>/bin/jaeger,
// building the latter when missing (`go -C tools/jaeger build`, minutes).
func Binary() (string, error) {
	if p := os.Getenv("TPSCOPE_JAEGER"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("$TPSCOPE_JAEGER: %w", err)
		}
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, "bin", "jaeger")
	buildMu.Lock()
	defer buildMu.Unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	gobin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	cmd := exec.Command(gobin, "-C", filepath.Join(root, "tools", "jaeger"), "build", "-o", bin, "github.com/jaegertracing/jaeger/cmd/jaeger")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s is missing and building it failed (%v); run `make jaeger` (needs the Go module proxy): %s", bin, err, out.String())
	}
	return bin, nil
}
