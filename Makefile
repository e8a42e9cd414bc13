# tollgate: the two commands are `make run` and `make test`.
SHELL := /bin/bash
GO ?= go
SQLC := $(GO) tool -modfile=tools/sqlc/go.mod sqlc
OAPI := $(GO) tool oapi-codegen
OPENAPI_SPEC ?= openapi/openapi.yaml
GOTESTFLAGS ?= -race -count=1 -timeout 30m

.PHONY: all build generate check-generated test run bench chaos vet

all: build

build:
	$(GO) build -o bin/tollgate ./cmd/tollgate

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

## test: the whole suite. PostgreSQL: TEST_DATABASE_URL, else a throwaway cluster from the
## installed binaries. Redis: REDIS_URL, else a throwaway redis-server when installed. The real
## clients impl/realclients drives (Claude Code, Codex, the MCP SDK and Inspector, pinned in
## $(REALCLIENTS_NPM)/package-lock.json) are installed with npm ci when that lock changed; without
## npm their tests skip, and under CI=true they fail.
REALCLIENTS_NPM := impl/realclients/npm
test: check-generated vet
	@lock=$(REALCLIENTS_NPM)/package-lock.json; stamp=$(REALCLIENTS_NPM)/node_modules/.tollgate-installed-lock; \
	if ! cmp -s "$$lock" "$$stamp"; then \
	  if command -v npm >/dev/null 2>&1; then \
	    echo "installing the pinned real clients: npm ci --prefix $(REALCLIENTS_NPM)"; \
	    npm ci --prefix $(REALCLIENTS_NPM) --ignore-scripts --no-audit --no-fund --loglevel=error && cp "$$lock" "$$stamp" || exit 1; \
	  elif [ "$$CI" = true ]; then echo "npm is missing: the real-client tests (impl/realclients) need it under CI=true"; exit 1; \
	  else echo "npm is missing: the real-client tests (impl/realclients) will skip"; fi; \
	fi
	$(GO) test $(GOTESTFLAGS) ./...

## run: start the gateway on the embedded defaults (local PostgreSQL, demo account, simulator).
run:
	$(GO) build -o bin/tollgate ./cmd/tollgate
	./bin/tollgate dev $(ARGS)

## bench: drive the simulator directly and through the gateway; prints and writes bench-results.json.
bench:
	$(GO) build -o bin/tollgate ./cmd/tollgate
	./bin/tollgate bench -out bench-results.json

## chaos: replicas on their own PostgreSQL and Redis under steady traffic while the database, Redis
## and a replica fail; prints the faults, the outcomes and the books (impl/chaos).
chaos:
	$(GO) build -o bin/tollgate ./cmd/tollgate
	./bin/tollgate chaos $(ARGS)
