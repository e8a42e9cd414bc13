# tollgate: the two commands are `make run` and `make test`.
SHELL := /bin/bash
GO ?= go
SQLC := $(GO) tool -modfile=tools/sqlc/go.mod sqlc
OAPI := $(GO) tool oapi-codegen
OPENAPI_SPEC ?= openapi/openapi.yaml
GOTESTFLAGS ?= -race -count=1 -timeout 30m -tags dev

.PHONY: all build generate check-generated check-tidy test run bench chaos hostile vet weed

all: build

## build: the production binary (serve, migrate, admin, connect, prices, sim). The development
## commands (dev, bench, relay, chaos, hostile) are in the build with -tags dev, bin/tollgate-dev,
## which make run, bench, chaos and hostile build.
build:
	$(GO) build -o bin/tollgate ./cmd/tollgate

DEVBUILD := $(GO) build -tags dev -o bin/tollgate-dev ./cmd/tollgate

## generate: regenerate gen/api (oapi-codegen) and gen/db (sqlc) from the contract and the queries.
generate:
	$(OAPI) -config openapi/api.cfg.yaml $(OPENAPI_SPEC)
	$(OAPI) -config openapi/spec.cfg.yaml $(OPENAPI_SPEC)
	$(SQLC) generate

## check-generated: fail when the committed generated code differs from a fresh generation.
check-generated:
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	for cfg in api spec; do \
	  sed "s#^output: .*#output: $$tmp/$$cfg.gen.go#" openapi/$$cfg.cfg.yaml > "$$tmp/$$cfg.cfg.yaml"; \
	  $(OAPI) -config "$$tmp/$$cfg.cfg.yaml" $(OPENAPI_SPEC) || exit 1; \
	done; \
	for f in api.gen.go spec.gen.go; do \
	  if ! diff -u "gen/api/$$f" "$$tmp/$$f" > "$$tmp/diff"; then \
	    head -n 40 "$$tmp/diff"; echo "gen/api/$$f is stale: run 'make generate' and commit the result"; exit 1; fi; \
	done; \
	if ! $(SQLC) diff; then echo "gen/db is stale: run 'make generate' and commit the result"; exit 1; fi; \
	echo "generated code is up to date"

vet:
	$(GO) vet ./...
	$(GO) vet -tags dev ./...

## check-tidy: fail when go.mod or go.sum differ from what `go mod tidy` makes of them (a module
## imported directly but marked indirect, one no longer used, a missing checksum).
check-tidy:
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit the result"; exit 1; }

## test: the whole suite. PostgreSQL: TEST_DATABASE_URL, else a throwaway cluster from the
## installed binaries. Redis: REDIS_URL, else a throwaway redis-server when installed. PgBouncer
## (impl/store's tests through a pooler): a throwaway pgbouncer when installed. The real
## clients impl/realclients drives (Claude Code, Codex, the MCP SDK and Inspector, pinned in
## $(REALCLIENTS_NPM)/package-lock.json) are installed with npm ci when that lock changed; without
## npm their tests skip, and under CI=true they fail.
REALCLIENTS_NPM := impl/realclients/npm
test: check-generated check-tidy vet weed
	@lock=$(REALCLIENTS_NPM)/package-lock.json; stamp=$(REALCLIENTS_NPM)/node_modules/.tollgate-installed-lock; \
	if ! cmp -s "$$lock" "$$stamp"; then \
	  if command -v npm >/dev/null 2>&1; then \
	    echo "installing the pinned real clients: npm ci --prefix $(REALCLIENTS_NPM)"; \
	    npm ci --prefix $(REALCLIENTS_NPM) --ignore-scripts --no-audit --no-fund --loglevel=error && cp "$$lock" "$$stamp" || exit 1; \
	  elif [ "$$CI" = true ]; then echo "npm is missing: the real-client tests (impl/realclients) need it under CI=true"; exit 1; \
	  else echo "npm is missing: the real-client tests (impl/realclients) will skip"; fi; \
	fi
	$(GO) test $(GOTESTFLAGS) ./...

## weed: build the SeaweedFS server pinned in tools/weed/go.mod that the object-store tests start
## (impl/devkit/s3test), once: it is cached in the Go build cache's directory and reused.
weed:
	$(GO) test -count=1 -timeout 60m -run '^TestWeedBinary$$' ./impl/devkit/s3test/

## run: start the gateway on the embedded defaults (local PostgreSQL, demo account, simulator).
run:
	$(DEVBUILD)
	./bin/tollgate-dev dev $(ARGS)

## bench: drive the simulator directly and through the gateway; prints and writes bench-results.json.
bench:
	$(DEVBUILD)
	./bin/tollgate-dev bench -out bench-results.json

## chaos: replicas on their own PostgreSQL and Redis under steady traffic while the database, Redis
## and a replica fail; prints the faults, the outcomes and the books (impl/devkit/chaos).
chaos:
	$(DEVBUILD)
	./bin/tollgate-dev chaos $(ARGS)

## hostile: 1,000 bad requests (huge bodies and heads, deep nesting, invalid UTF-8, cut and slow
## bodies) beside normal traffic against one gateway; its latency and memory against the bounds.
hostile:
	$(DEVBUILD)
	./bin/tollgate-dev hostile $(ARGS)
