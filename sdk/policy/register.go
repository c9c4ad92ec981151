package policy

import "strings"

// The kinds bits Declared reports (and the module's hivelet_kinds export
// returns).
const (
	KindCanary     = 1
	KindCompletion = 2
)

// Read declares one thing a canary policy reads from nodes, beyond the
// fields every node carries (ID, name, datacenter, node pool, class). The
// agent sends only declared keys: that keeps every call small.
type Read string

// Fields declares that the policy reads the named fixed node fields:
// "name", "datacenter", "node_pool", "class".
func Fields(names ...string) Read { return Read("field " + strings.Join(names, " ")) }

// Attribute declares that the policy reads node attribute key.
func Attribute(key string) Read { return Read("attr " + key) }

// Meta declares that the policy reads node meta key.
func Meta(key string) Read { return Read("meta " + key) }

// AllAttributes declares that the policy reads every node attribute. It
// makes every call larger: prefer Attribute.
func AllAttributes() Read { return "attr *" }

// AllMeta declares that the policy reads every meta key.
func AllMeta() Read { return "meta *" }

// MetaFromParam declares that the policy reads the meta key named by its
// parameter param (def when the job does not set it).
func MetaFromParam(param, def string) Read { return Read("meta $" + param + "=" + def) }

// FieldFromParam declares that the policy reads the node field named by its
// parameter param (def when unset): a reference as Node.Field takes it,
// e.g. "datacenter" or "meta.rack".
func FieldFromParam(param, def string) Read { return Read("ref $" + param + "=" + def) }

// registry holds what the module's init functions registered. A module has
// one of each kind at most. It is the SDK's only mutable state; it is set
// during initialisation, before the agent calls any export.
type registry struct {
	canary     func(CanaryInput) (CanaryOutput, error)
	completion func(CompletionInput) (CompletionOutput, error)
	reads      []Read
}

var reg registry

// RegisterCanary makes fn the module's canary selection policy, reading
// what reads declares. Call it from an init function. Registering twice
// panics: a module implements each kind once.
func RegisterCanary(fn func(CanaryInput) (CanaryOutput, error), reads ...Read) {
	if reg.canary != nil {
		panic("policy: RegisterCanary called twice")
	}
	reg.canary = fn
	reg.reads = append(reg.reads, reads...)
}

// RegisterCompletion makes fn the module's deployment completion policy.
// Call it from an init function. Registering twice panics.
func RegisterCompletion(fn func(CompletionInput) (CompletionOutput, error)) {
	if reg.completion != nil {
		panic("policy: RegisterCompletion called twice")
	}
	reg.completion = fn
}

// Declared reports what the module's init functions registered: the kinds
// bit set (KindCanary, KindCompletion) and the manifest text the module
// exports (docs/policy-abi.md). Useful to test a policy's declarations.
func Declared() (kinds int32, manifest string) {
	return declaredKinds(), manifestText(reg.reads)
}

func declaredKinds() int32 {
	var k int32
	if reg.canary != nil {
		k |= KindCanary
	}
	if reg.completion != nil {
		k |= KindCompletion
	}
	return k
}

// manifestText is the manifest the module exports: one declaration a line.
func manifestText(reads []Read) string {
	var b strings.Builder
	for _, r := range reads {
		b.WriteString(string(r))
		b.WriteByte('\n')
	}
	return b.String()
}
