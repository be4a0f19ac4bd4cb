# tpscope — two commands on a fresh machine with Go: `make run`, `make test`.
GO        ?= go
BIN       := bin/tpscope
# go-nvml needs cgo; its headers trigger deprecation warnings in gcc.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

JAEGER    := bin/jaeger
JAEGER_RUN := .jaeger

.PHONY: build run test bench lint fmt clean jaeger jaeger-stop chromium

# The commit in `tpscope --version`, with +dirty for a changed tree.
REV    := $(shell git rev-parse --short=12 HEAD 2>/dev/null)
COMMIT := $(if $(REV),$(REV)$(shell git diff --quiet HEAD -- 2>/dev/null || echo +dirty))

build:
	$(GO) build -ldflags "-X main.commit=$(COMMIT)" -o $(BIN) ./cmd/tpscope

# The main job on the built-in default scenario.
run: build
	./$(BIN) advise --kv-dtype bf16 --nccl-proto LL --p2p-level SYS

# The traces tests run a real Jaeger (traces/jaegertest), so CI builds it
# first; the report's tests drive headless Chromium (report/reporttest).
test: $(JAEGER) chromium
	$(GO) test -count=1 -timeout 15m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

# Jaeger v2 all-in-one, from its own module (tools/jaeger/go.mod: its
# dependencies conflict with the main module's otel). The first build takes
# about 7 minutes on two cores and 2 GB of memory; later ones are cached.
$(JAEGER): tools/jaeger/go.mod tools/jaeger/go.sum
	$(GO) -C tools/jaeger build -o ../../$(JAEGER) github.com/jaegertracing/jaeger/cmd/jaeger

# Start Jaeger on loopback with in-memory storage (tools/jaeger/local.yaml):
# OTLP 4317 (gRPC) and 4318 (HTTP), query API and UI 16686. Then e.g.
#   tpscope run --trace otlp://127.0.0.1:4317 ...
#   tpscope trace read 'jaeger://127.0.0.1:16686?service=tpscope'
jaeger: $(JAEGER)
	@mkdir -p $(JAEGER_RUN)
	@if [ -f $(JAEGER_RUN)/jaeger.pid ] && kill -0 $$(cat $(JAEGER_RUN)/jaeger.pid) 2>/dev/null; then \
		echo "jaeger already running (pid $$(cat $(JAEGER_RUN)/jaeger.pid))"; exit 0; fi; \
	JAEGER_LISTEN_HOST=127.0.0.1 nohup ./$(JAEGER) --config=file:tools/jaeger/local.yaml >$(JAEGER_RUN)/jaeger.log 2>&1 & \
	echo $$! >$(JAEGER_RUN)/jaeger.pid; \
	for i in $$(seq 1 100); do \
		if ! kill -0 $$(cat $(JAEGER_RUN)/jaeger.pid) 2>/dev/null; then echo "jaeger exited; see $(JAEGER_RUN)/jaeger.log:"; tail -20 $(JAEGER_RUN)/jaeger.log; rm -f $(JAEGER_RUN)/jaeger.pid; exit 1; fi; \
		if bash -c 'exec 3<>/dev/tcp/127.0.0.1/13133' 2>/dev/null; then break; fi; sleep 0.1; done; \
	echo "jaeger running (pid $$(cat $(JAEGER_RUN)/jaeger.pid)): OTLP 127.0.0.1:4317 (gRPC), 127.0.0.1:4318 (HTTP); query http://127.0.0.1:16686; log $(JAEGER_RUN)/jaeger.log"

# Stop the Jaeger `make jaeger` started, by its PID.
jaeger-stop:
	@if [ ! -f $(JAEGER_RUN)/jaeger.pid ]; then echo "no $(JAEGER_RUN)/jaeger.pid: jaeger not started by make jaeger"; exit 0; fi; \
	pid=$$(cat $(JAEGER_RUN)/jaeger.pid); \
	if kill $$pid 2>/dev/null; then \
		for i in $$(seq 1 100); do kill -0 $$pid 2>/dev/null || break; sleep 0.1; done; \
		if kill -0 $$pid 2>/dev/null; then kill -9 $$pid; fi; echo "jaeger (pid $$pid) stopped"; \
	else echo "jaeger (pid $$pid) was not running"; fi; \
	rm -f $(JAEGER_RUN)/jaeger.pid

# Headless Chromium for the report's browser tests: Debian's package,
# installed with apt-get where no browser is found (as root, or through
# passwordless sudo). Where it cannot be installed the tests skip and say why.
chromium:
	@if [ -n "$$TPSCOPE_CHROMIUM" ] || command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || command -v google-chrome >/dev/null 2>&1; then exit 0; fi; \
	if ! command -v apt-get >/dev/null 2>&1; then echo "chromium: not installed and no apt-get here: the report's browser tests will skip"; exit 0; fi; \
	sudo=""; if [ "$$(id -u)" != 0 ]; then \
		if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo="sudo -n"; \
		else echo "chromium: not installed, and installing it needs root: the report's browser tests will skip"; exit 0; fi; fi; \
	echo "installing chromium (apt-get) for the report's browser tests"; \
	if $$sudo apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium >/dev/null; then \
		echo "chromium: $$(chromium --version 2>/dev/null)"; \
	else echo "chromium: apt-get install failed: the report's browser tests will skip"; fi

clean:
	rm -rf bin
