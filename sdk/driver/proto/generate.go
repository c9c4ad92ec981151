// Package driverpb is the generated Go code of driver.proto, the wire form
// of the hivelet driver plugin protocol. Driver authors use package
// sdk/driver instead; only that package converts to and from these messages.
//
// Regenerate with `go generate ./sdk/driver/proto/` using protoc 3.21.12
// (Debian protobuf-compiler 3.21.12-3+deb12u1), protoc-gen-go v1.36.12 and
// protoc-gen-go-grpc v1.5.1 (both `go install`ed from the Go module proxy).
//
// The protocol, its versions and how a v2 would be negotiated are specified
// in docs/drivers.md ("The contract", "Protocol versions").
package driverpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative driver.proto
