// Package policywire owns the byte layout of the policy module ABI
// (docs/policy-abi.md): the encoding primitives, the four messages (the
// canary and completion inputs and answers) and the constants both ends
// share (ABI versions, kind bits, node field bits). The guest side, the
// author's SDK (sdk/policy), and the host side, the engine (policies), both
// use it, so the layout is written once.
//
// It must never import anything but the standard library: sdk/policy
// promises authors it depends on nothing of the daemon, and this package is
// compiled into every policy module (sdk/driver's
// TestTheSDKsImportNothingOfTheDaemon checks it, with the SDKs' other leaves).
// It knows nothing of the SDK's types either: decoders build the caller's
// node type through a bind function and encoders read nodes through the
// Nodes interface, so neither side converts its values to reach the bytes.
//
// Every decoder is strict: a truncated message, an unknown flag, status or
// decision, an out-of-range integer or trailing bytes fail with an error
// matching ErrMalformed. On the decoding side of inputs nothing is copied:
// every string of a decoded input aliases the buffer, which the caller must
// not modify afterwards.
package policywire
