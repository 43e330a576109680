# Sunset. `make run` starts the server with zero configuration; `make test`
# runs the whole suite.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.revision=$(REVISION)
PKGS     := ./...

.PHONY: all build run test test-short bench lint format update-golden clean

all: build

build: ## Build bin/sunset.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/sunset ./cmd/sunset

run: build ## Start sunset serve: data in ./sunset-data, HTTP on :8080.
	./bin/sunset serve

test: ## Run every test with the race detector.
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

test-short: ## Run the quick tests only.
	$(GO) test -short -count=1 $(PKGS)

bench: ## Run benchmarks, each beside its baseline.
	$(GO) test -run '^$$' -bench . -benchmem -count 3 -timeout 30m ./benchmarks/ ./store/ ./ingest/...

lint: ## Vet and check formatting.
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

format: ## Format the code.
	gofmt -w $$(git ls-files '*.go')

update-golden: ## Rewrite golden files after an intended change; review the diff.
	$(GO) test ./app/ -run 'TestReplay' -update

clean:
	rm -rf bin
