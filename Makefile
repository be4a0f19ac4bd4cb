# tpscope — two commands on a fresh machine with Go: `make run`, `make test`.
GO        ?= go
BIN       := bin/tpscope
# go-nvml needs cgo; its headers trigger deprecation warnings in gcc.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: build run test bench lint fmt clean

build:
	$(GO) build -o $(BIN) ./cmd/tpscope

# The main job on the built-in default scenario.
run: build
	./$(BIN) advise

test:
	$(GO) test -count=1 -timeout 15m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
