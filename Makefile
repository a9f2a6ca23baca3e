# Usual targets. The test suite is scripts/test (what CI runs).
GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/airlock-dev/airlock/app/cli.Version=$(VERSION)

.PHONY: build airlock guest test test-short vet darwincheck demo clean bench bench-push bench-collect macos-app icon

build: airlock guest

airlock:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/airlock ./app

# Static guest agents for both guest architectures, beside the airlock binary
# where it looks for them first.
guest:
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 $(GO) build -trimpath -buildvcs=false -ldflags "-s -w" -o bin/airlock-guest-linux-amd64 ./guest/cmd/airlock-guest
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -trimpath -buildvcs=false -ldflags "-s -w" -o bin/airlock-guest-linux-arm64 ./guest/cmd/airlock-guest

test:
	scripts/test

test-short:
	$(GO) test -short ./...

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l .)" || (gofmt -l . && false)

demo:
	scripts/demo

darwincheck:
	$(GO) run ./internal/darwincheck -goarch arm64,amd64 -test ./...

# Airlock.app and its DMG, on a Mac (see docs/macos.md); on Linux, a dry run
# with packaging/build-macos.sh --dry-run.
macos-app:
	VERSION=$(VERSION) packaging/build-macos.sh

# Redraw assets/Airlock.png and assets/Airlock.icns.
icon:
	$(GO) run ./packaging/cmd/airlock-bundle icon

# Benchmarks print our figure beside a baseline measured in the same run.
bench:
	scripts/bench-boot

bench-push:
	scripts/bench-push

bench-collect:
	scripts/bench-collect

clean:
	rm -rf bin .cache
