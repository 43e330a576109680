# Sunset. `make run` starts the server with zero configuration; `make test`
# runs the whole suite.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.revision=$(REVISION)
PKGS     := ./...

.PHONY: all build install release docs generate image run demo test test-short test-plateau fuzz e2e e2e-peers bench lint format update-golden clean

all: build

build: ## Build bin/sunset.
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/sunset ./cmd/sunset

# Where make install puts sunset: $(PREFIX)/bin when PREFIX is set, else
# where go install would, $(GOBIN) or the first $(GOPATH)/bin. DESTDIR
# stages it for a package.
PREFIX ?=
BINDIR ?= $(if $(PREFIX),$(PREFIX)/bin,$(or $(shell $(GO) env GOBIN),$(firstword $(subst :, ,$(shell $(GO) env GOPATH)))/bin))

install: build ## Install bin/sunset into $(GOBIN), else $(GOPATH)/bin; PREFIX=/usr/local puts it in /usr/local/bin.
	install -d "$(DESTDIR)$(BINDIR)"
	install -m 0755 bin/sunset "$(DESTDIR)$(BINDIR)/sunset"
	@echo "installed $(DESTDIR)$(BINDIR)/sunset"

# A release: the binary for each platform (pure Go, so each
# cross-compiles), in sunset_<version>_<os>_<arch>.tar.gz with README.md
# (and LICENSE when there is one), their SHA-256 sums in
# sunset_<version>_checksums.txt, and the krew manifest written from those
# sums. hack/release writes the archives byte for byte the same for the
# same commit: entries sorted, owned by 0:0, dated SOURCE_DATE_EPOCH (the
# commit's time).
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
RELEASE_DIR       ?= bin/release
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

release: ## Build the release archives of VERSION (a tag, vX.Y.Z) for RELEASE_PLATFORMS, their checksums, and deploy/krew/sunset.yaml.
	@case "$(VERSION)" in \
		*-dirty) echo "release: the tree has uncommitted changes ($(VERSION)): commit them, tag the commit, then make release"; exit 1;; \
		v[0-9]*.[0-9]*.[0-9]*) ;; \
		*) echo "release: VERSION=$(VERSION) is not vX.Y.Z: tag the commit (git tag v1.2.3) or pass VERSION=v1.2.3"; exit 1;; \
	esac
	rm -rf $(RELEASE_DIR)
	mkdir -p $(RELEASE_DIR)
	@set -e; for p in $(RELEASE_PLATFORMS); do \
		echo "building sunset $(VERSION) for $$p"; \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -trimpath -ldflags "$(LDFLAGS)" \
			-o $(RELEASE_DIR)/$${p%/*}_$${p#*/}/sunset ./cmd/sunset; \
	done
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run ./hack/release -version "$(VERSION)" -dir $(RELEASE_DIR) \
		-krew deploy/krew/sunset.yaml $(foreach f,$(wildcard LICENSE) README.md,-file $(f)) \
		$(foreach p,$(RELEASE_PLATFORMS),$(p)=$(RELEASE_DIR)/$(subst /,_,$(p))/sunset)

docs: ## Write docs/configuration.md from the help of each config key in the code.
	$(GO) run ./hack/configdoc -o docs/configuration.md

generate: ## Write api/generated/openapi/zz_generated.openapi.go, the OpenAPI definitions, from the API's Go types (api/v1) and doc comments.
	$(GO) run ./hack/openapi-gen -output-dir api/generated/openapi

IMAGE ?= ghcr.io/kube-sunset/sunset:$(VERSION)

image: build ## Build the container image as an OCI archive, bin/sunset-image.tar, without a container engine.
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) \
	$(GO) run ./hack/mkimage -binary bin/sunset -output bin/sunset-image.tar -name "$(IMAGE)" \
		-version "$(VERSION)" -revision "$(REVISION)" -arch "$$($(GO) env GOARCH)"

run: build ## Start sunset serve: data in ./sunset-data, HTTP on 127.0.0.1:8080.
	./bin/sunset serve

# The demo's data: audit logs captured from a real kube-apiserver v1.36.3,
# moved to the current hour, in a directory of their own, made afresh.
DEMO_DIR  ?= sunset-demo
DEMO_LOGS := testdata/apiserver-v1.36

demo: build ## Serve the captured audit logs, moved to the current hour, from a fresh ./sunset-demo on :8080.
	rm -rf $(DEMO_DIR)
	./bin/sunset replay --shift-to-now --data-dir $(DEMO_DIR) --node master-0 $(DEMO_LOGS)/webhook-metadata-batch/audit-log-file.jsonl
	./bin/sunset replay --shift-to-now --data-dir $(DEMO_DIR) --node master-1 $(DEMO_LOGS)/request-level-blocking/audit-log-file.jsonl
	./bin/sunset serve --data-dir $(DEMO_DIR)

test: ## Run every test with the race detector.
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

test-short: ## Run the quick tests only.
	$(GO) test -short -count=1 $(PKGS)

# Fuzz targets, as package:Target. `make test` runs their seeds (the real
# captures in testdata/) like any test; `make fuzz` mutates them for
# FUZZTIME each. Minimizing a new input is capped at FUZZMINIMIZE runs:
# with the default (60s) a single new input of a few KiB stalls the run.
FUZZ_TARGETS := ./ingest/webhook:FuzzWebhookBody ./ingest/kafka:FuzzDecodeMessage \
	./ingest/kafka:FuzzUnquote ./ingest/kafka:FuzzBoundedCodecs \
	./ingest/auditjson:FuzzDecodeBody ./ingest/auditjson:FuzzDecodeStream \
	./ingest/auditjson:FuzzPrefilter ./ingest/auditjson:FuzzScanner \
	./ingest/auditjson:FuzzDecodeWire ./ingest/auditjson:FuzzSkipper \
	./ingest/fleet:FuzzReadRecord ./ingest/file:FuzzReadLines \
	./ingest/file:FuzzChunksReadLikeReadLines \
	./ingest/file:FuzzReplayChunksAgreeWithTheFullDecode ./ingest/gke:FuzzPrefilter \
	./cmd/sunset:FuzzConfigFile ./api:FuzzQueryParameters
FUZZTIME     ?= 30s
FUZZMINIMIZE ?= 200x
FUZZFLAGS    ?=

fuzz: ## Fuzz every target for FUZZTIME (default 30s) each; findings go to <package>/testdata/fuzz.
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; target=$${t#*:}; \
		echo "fuzzing $$target in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$target\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $(FUZZFLAGS) $$pkg; \
	done

test-plateau: ## Show disk usage levelling off over 72 simulated hours of steady load (about 2 minutes).
	SUNSET_PLATEAU_HOURS=72 $(GO) test -count=1 -v -run TestDiskUsagePlateausAtSteadyLoad ./store/

# The real peers of the end-to-end test, built from the Go module proxy at
# the versions test/e2e/tools/go.mod pins, and cached: a cold build takes
# 8 to 15 minutes on 2 cores, a warm one seconds.
E2E_TOOLS    := test/e2e/tools
E2E_BIN      := test/e2e/.cache/bin
KUBE_VERSION := $(shell sed -n 's,^[[:space:]]*k8s.io/kubernetes \(v[0-9.]*\)$$,\1,p' $(E2E_TOOLS)/go.mod)
KUBE_LDFLAGS := -s -w -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=$(word 1,$(subst ., ,$(KUBE_VERSION:v%=%))) \
	-X k8s.io/component-base/version.gitMinor=$(word 2,$(subst ., ,$(KUBE_VERSION:v%=%)))

$(E2E_BIN)/kube-apiserver: $(E2E_TOOLS)/go.mod $(E2E_TOOLS)/go.sum
	@echo "building kube-apiserver $(KUBE_VERSION) (8 to 15 minutes on 2 cores when cold)"
	cd $(E2E_TOOLS) && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(KUBE_LDFLAGS)" \
		-o $(CURDIR)/$@ k8s.io/kubernetes/cmd/kube-apiserver

# kube-controller-manager runs only the storage version migrator (and the
# garbage collector it reads) for fix crd's StorageVersionMigration path;
# it shares most packages with kube-apiserver, so it builds in a few
# minutes after it.
$(E2E_BIN)/kube-controller-manager: $(E2E_TOOLS)/go.mod $(E2E_TOOLS)/go.sum
	@echo "building kube-controller-manager $(KUBE_VERSION) (a few minutes after kube-apiserver)"
	cd $(E2E_TOOLS) && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(KUBE_LDFLAGS)" \
		-o $(CURDIR)/$@ k8s.io/kubernetes/cmd/kube-controller-manager

$(E2E_BIN)/etcd: $(E2E_TOOLS)/go.mod $(E2E_TOOLS)/go.sum $(E2E_TOOLS)/etcd/main.go
	cd $(E2E_TOOLS) && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(CURDIR)/$@ ./etcd

e2e-peers: $(E2E_BIN)/kube-apiserver $(E2E_BIN)/kube-controller-manager $(E2E_BIN)/etcd ## Build (or reuse) kube-apiserver, kube-controller-manager and etcd for make e2e.

e2e: build e2e-peers ## A real kube-apiserver sends its audit webhook to bin/sunset; counts must equal its audit log.
	$(E2E_BIN)/kube-apiserver --version
	cd test/e2e && E2E_SUNSET_BIN=$(CURDIR)/bin/sunset E2E_KUBE_APISERVER_BIN=$(CURDIR)/$(E2E_BIN)/kube-apiserver \
		E2E_KUBE_CONTROLLER_MANAGER_BIN=$(CURDIR)/$(E2E_BIN)/kube-controller-manager \
		E2E_ETCD_BIN=$(CURDIR)/$(E2E_BIN)/etcd $(GO) test -count=1 -timeout 20m -v ./...

# The query benchmarks in ./api/ fill a store with the 30-day corpus of
# issue 12 once per run (a minute or two); SUNSET_BENCH_DAYS=2 (and
# _USERS, _NODES, _APIS) make it smaller.
bench: ## Run benchmarks, each beside its baseline.
	$(GO) test -run '^$$' -bench . -benchmem -count 3 -timeout 120m ./benchmarks/ ./store/ ./aggregate/ ./ingest/... ./api/

# golangci-lint at the version pinned here, built from the Go module proxy
# into bin/ on first use (a few minutes on 2 cores) and reused after.
GOLANGCI_LINT_VERSION := v2.6.2
# Commit subjects after this commit are held to 72 characters
# (CONTRIBUTING.md, "Commits").
SUBJECTS_SINCE        := 12049f9
GOLANGCI_LINT         := bin/golangci-lint-$(GOLANGCI_LINT_VERSION)

$(GOLANGCI_LINT):
	@echo "building golangci-lint $(GOLANGCI_LINT_VERSION) (a few minutes when cold)"
	GOBIN=$(CURDIR)/bin/.golangci $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv bin/.golangci/golangci-lint $@

lint: $(GOLANGCI_LINT) ## Vet, check formatting, and run golangci-lint (.golangci.yml: import rules, errors, metric names, comments).
	$(GO) vet $(PKGS)
	cd test/e2e && $(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GOLANGCI_LINT) run ./...
	@git log --format=%s $(SUBJECTS_SINCE)..HEAD 2>/dev/null | awk 'length > 72 { print "commit subject over 72 characters: " $$0; bad = 1 } END { exit bad }'

format: ## Format the code.
	gofmt -w $$(git ls-files '*.go')

# The files tests compare with or generate, rewritten from what the tests
# produce (the one -update flag, internal/testutil/golden); review the diff:
#   app/testdata/*.golden.json  the JSON API (TestReplayCapturedBodies,
#     TestDuplicateDeliveryCountsOnceAcrossRestart, TestWebhookCountsThroughTheServer);
#   cmd/sunset/testdata/*  report, check and replay output (TestReportFormatsGolden,
#     TestCheckExitCodes, TestReportWebhooksGolden, TestReplayThirdPartySamplesAndHugeLines,
#     TestReplayThroughServerAndDryRuns); cmd/sunset/testdata/scanfix/*  scan --fix's output
#     (TestScanFix);
#   fix/manifest/testdata/golden/**  the fixture tree as scan --fix rewrites it, and its
#     diff (TestFixGoldens);
#   ingest/gke/testdata/entries/*.event.json  the audit event of each hand-written GKE
#     LogEntry (TestEntriesMapToTheirEvents);
#   deploy/kubernetes/base/prometheusrule.yaml  from deploy/prometheus/sunset-rules.yaml
#     (test: TestPrometheusRuleMatchesRulesFile), and the Helm chart's copy,
#     deploy/helm/sunset/files/sunset-rules.yaml (TestHelmChartRulesAreTheShippedRules);
#   scan/testdata/golden/repo.*  every `sunset scan -o` format (scan: TestOutputGoldens);
#   docs/page-*.png  the screenshots of the page in README.md and docs/ (web: TestPageInBrowser;
#     needs chromium, skipped without it).
# Only these packages define -update, so they are named, not ./... .
update-golden: ## Rewrite the golden files, the generated PrometheusRule and the page's screenshots after an intended change; review the diff.
	$(GO) test -count=1 ./app/ ./cmd/sunset/ ./fix/manifest/ ./ingest/gke/ ./scan/ ./test/ ./web/ -update -run \
		'^(TestEntriesMapToTheirEvents|TestFixGoldens|TestScanFix|TestReplayCapturedBodies|TestDuplicateDeliveryCountsOnceAcrossRestart|TestWebhookCountsThroughTheServer|TestReportFormatsGolden|TestCheckExitCodes|TestReportWebhooksGolden|TestReplayThirdPartySamplesAndHugeLines|TestReplayThroughServerAndDryRuns|TestPrometheusRuleMatchesRulesFile|TestHelmChartRulesAreTheShippedRules|TestOutputGoldens|TestPageInBrowser)$$'

clean:
	rm -rf bin

# Upstream modules whose lifecycle tags make catalog/builtin.yaml, oldest first.
CATALOG_MODULES := k8s.io/api@v0.20.15 k8s.io/api@v0.21.14 k8s.io/api@v0.24.17 k8s.io/api@v0.25.16 \
	k8s.io/api@v0.28.15 k8s.io/api@v0.31.14 k8s.io/api@v0.36.3 k8s.io/api@v0.37.2 \
	k8s.io/apiextensions-apiserver@v0.21.14 k8s.io/apiextensions-apiserver@v0.37.2 \
	k8s.io/kube-aggregator@v0.21.14 k8s.io/kube-aggregator@v0.37.2

.PHONY: catalog
catalog: ## Regenerate catalog/builtin.yaml from upstream lifecycle tags.
	$(GO) run ./hack/lifecyclegen -o catalog/builtin.yaml \
		$$(for m in $(CATALOG_MODULES); do $(GO) mod download -json $$m | sed -n 's/.*"Dir": "\(.*\)",/\1/p'; done)
