# The whole test suite, as the README and .ci/run run it.
# The toolchain (README.md, "Two commands on a fresh machine").
export GOTOOLCHAIN := go1.27.3

.PHONY: test build bench

test:
	go test -race -timeout 15m -p 4 ./cmd/hivelet ./host/agent ./examples/fleet ./host/fleet ./policies ./plugins/docker ./plugins/exec ./...

build:
	go build -o bin/hivelet ./cmd/hivelet

bench:
	go test -run '^$$' -bench . -benchmem ./...
