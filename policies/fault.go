package policies

import (
	"errors"
	"fmt"
)

// FaultKind says how a policy module misbehaved.
type FaultKind string

// The fault kinds. Each has a hostile module exercising it in faults_test.go.
const (
	// FaultTrap: the module trapped, panicked or exited during a call. The
	// instance is discarded.
	FaultTrap FaultKind = "trap"
	// FaultDeadline: the call ran past its deadline and was stopped.
	FaultDeadline FaultKind = "deadline"
	// FaultMemory: the module trapped with its memory at the cap, or
	// declared more memory than the cap allows.
	FaultMemory FaultKind = "memory"
	// FaultMissingExport: a required export is missing or has the wrong type.
	FaultMissingExport FaultKind = "missing_export"
	// FaultABIVersion: the module declares an ABI version this host does not
	// implement.
	FaultABIVersion FaultKind = "abi_version"
	// FaultInvalidOutput: the answer failed strict validation.
	FaultInvalidOutput FaultKind = "invalid_output"
	// FaultPolicyError: the policy answered with an error of its own.
	FaultPolicyError FaultKind = "policy_error"
	// FaultLoad: the module could not be compiled, instantiated or fetched,
	// or its manifest is invalid.
	FaultLoad FaultKind = "load"
	// FaultNotLoaded: a decision named a policy that is not loaded (or not
	// with the pinned digest, or not of the decision's kind).
	FaultNotLoaded FaultKind = "not_loaded"
	// FaultDigestMismatch: the module's bytes do not match the pinned digest.
	FaultDigestMismatch FaultKind = "digest_mismatch"
)

// Fault is a policy module's misbehaviour, as reported to the log, the
// metrics and the OnFault hook. The decision it concerned fell back to the
// native default. Attach it to the deployment as an event.
type Fault struct {
	Kind FaultKind
	// Decision is "canary", "completion" or "load".
	Decision string
	// Policy is the policy's name as the job gave it; Digest the module's
	// SHA-256 (hex) when known.
	Policy string
	Digest string
	// DeploymentID and JobID identify the decision, when there was one.
	DeploymentID string
	JobID        string
	Reason       string
	// Err is the underlying error, if any.
	Err error
}

func (f *Fault) Error() string {
	s := fmt.Sprintf("policy %q", f.Policy)
	if f.Digest != "" {
		s += fmt.Sprintf(" (sha256:%.12s)", f.Digest)
	}
	s += fmt.Sprintf(": %s fault: %s", f.Kind, f.Reason)
	return s
}

func (f *Fault) Unwrap() error { return f.Err }

// AsFault returns the *Fault in err's chain, if any.
func AsFault(err error) (*Fault, bool) {
	var f *Fault
	ok := errors.As(err, &f)
	return f, ok
}
