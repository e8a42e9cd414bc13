# tollgate: the two commands are `make run` and `make test`.
SHELL := /bin/bash
GO ?= go
SQLC := $(GO) tool -modfile=tools/sqlc/go.mod sqlc
OAPI := $(GO) tool oapi-codegen
OPENAPI_SPEC ?= openapi/openapi.yaml
GOTESTFLAGS ?= -race -count=1 -timeout 30m

.PHONY: all build generate check-generated test run bench vet

all: build

build:
	$(GO) build -o bin/tollgate ./cmd/tollgate

## generate: regenerate gen/api (oapi-codegen) and gen/db (sqlc) from the contract and the queries.
generate:
	$(OAPI) -config openapi/api.cfg.yaml $(OPENAPI_SPEC)
	$(SQLC) generate

## check-generated: fail when the committed generated code differs from a fresh generation.
check-generated:
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	$(OAPI) -config openapi/api.cfg.yaml -o "$$tmp/api.gen.go" $(OPENAPI_SPEC) && \
	if ! diff -u gen/api/api.gen.go "$$tmp/api.gen.go" > "$$tmp/api.diff"; then \
	  head -n 40 "$$tmp/api.diff"; echo "gen/api is stale: run 'make generate' and commit the result"; exit 1; fi; \
	if ! $(SQLC) diff; then echo "gen/db is stale: run 'make generate' and commit the result"; exit 1; fi; \
	echo "generated code is up to date"

vet:
	$(GO) vet ./...

## test: the whole suite. PostgreSQL: TEST_DATABASE_URL, else a throwaway cluster from the
## installed binaries. Redis: REDIS_URL, else a throwaway redis-server when installed.
test: check-generated vet
	$(GO) test $(GOTESTFLAGS) ./...

## run: start the gateway on the embedded defaults (local PostgreSQL, demo account, simulator).
run:
	$(GO) run ./cmd/tollgate dev

bench:
	$(GO) run ./cmd/tollgate bench
