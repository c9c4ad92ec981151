package wanted

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/model"
)

// MaxValueSize is the largest KV value a host decodes. A bigger value is
// rejected whole, like any other undecodable declaration: it is refused
// before decoding so that a runaway writer cannot make every agent allocate.
const MaxValueSize = 1 << 20

// DefaultNamespace is the namespace of a job that names none.
const DefaultNamespace = "default"

// Op is what a KV entry does to its key.
type Op int

const (
	// OpPut sets a value.
	OpPut Op = iota
	// OpDelete places a delete marker (the key's history stays).
	OpDelete
	// OpPurge removes the key's history; a bucket-wide TTL expiry reaches a
	// watcher as a purge too.
	OpPurge
)

func (o Op) String() string {
	switch o {
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	case OpPurge:
		return "purge"
	}
	return fmt.Sprintf("op(%d)", int(o))
}

// Entry is one KV entry as a host hears it, from a pull or a watch.
type Entry struct {
	Key      string
	Value    []byte
	Revision uint64
	Op       Op
	// Time is the NATS server's timestamp of the entry (zero for a
	// synthetic one): the clock every cross-machine comparison uses.
	Time time.Time
}

// Rejection records why a value put under a key was refused. The record it
// would have replaced stays in force.
type Rejection struct {
	Bucket   string `json:"bucket,omitempty"`
	Key      string `json:"key"`
	Revision uint64 `json:"revision"`
	Reason   string `json:"reason"`
}

// Effect says what applying one entry did.
type Effect int

const (
	// EffectNone: the entry was at or below the revision already applied.
	EffectNone Effect = iota
	// EffectAccepted: a put decoded and became the record in force.
	EffectAccepted
	// EffectRejected: a put failed to decode; the last good record stays.
	EffectRejected
	// EffectAbsent: a delete or purge; the last good record stays, marked
	// absent (for a job: orphaned; for a node: down).
	EffectAbsent
)

func (e Effect) String() string {
	return [...]string{"none", "accepted", "rejected", "absent"}[e]
}

// Record is what a host holds for one key: the last good decoded value and
// what has happened to the key since.
type Record[T any] struct {
	Key string `json:"key"`
	// Value is the last good decoded value; nil if no put under this key ever
	// decoded.
	Value *T `json:"value,omitempty"`
	// Revision is the KV revision of Value (use it for compare-and-set).
	Revision uint64 `json:"revision"`
	// Applied is the highest revision applied to this record, good or not.
	Applied uint64 `json:"applied"`
	// Rejection is set while the newest put under the key was rejected.
	Rejection *Rejection `json:"rejection,omitempty"`
	// Absent is set while the key is deleted, purged or expired. Absence
	// never clears Value.
	Absent bool `json:"absent,omitempty"`
	// Time is the server timestamp of the newest entry applied (a put, or
	// the delete, purge or expiry marker while Absent); zero when unknown.
	Time time.Time `json:"time,omitzero"`
	// Expired is the server timestamp of the key's last delete, purge or
	// expiry marker, kept when the key is written again (for a node: when
	// it last expired, which the disruption guard counts).
	Expired time.Time `json:"expired,omitzero"`
}

// Decoder turns the value put under a key into a T, or says why it cannot.
type Decoder[T any] func(key string, value []byte) (*T, error)

// Apply applies one entry to the record held for its key. It is idempotent by
// revision: an entry at or below prev.Applied returns prev unchanged with
// EffectNone, so a resumed watch that repeats entries does no harm. Revision 0
// marks a synthetic entry (a key a full pull no longer finds): it applies
// regardless of revision. A delete of an already absent key is EffectNone.
func Apply[T any](prev Record[T], e Entry, decode Decoder[T]) (Record[T], Effect) {
	if e.Revision != 0 && e.Revision <= prev.Applied {
		return prev, EffectNone
	}
	next := prev
	next.Key = e.Key
	next.Applied = max(prev.Applied, e.Revision)
	if !e.Time.IsZero() {
		next.Time = e.Time
	}
	switch e.Op {
	case OpDelete, OpPurge:
		if prev.Absent {
			// Nothing changes but the revision seen, so that a replayed put
			// older than this delete is still known to be older.
			prev.Applied = next.Applied
			return prev, EffectNone
		}
		next.Absent = true
		next.Rejection = nil
		if !e.Time.IsZero() {
			next.Expired = e.Time
		}
		return next, EffectAbsent
	}
	v, err := decode(e.Key, e.Value)
	if err != nil {
		next.Rejection = &Rejection{Key: e.Key, Revision: e.Revision, Reason: err.Error()}
		return next, EffectRejected
	}
	next.Value = v
	next.Revision = e.Revision
	next.Rejection = nil
	next.Absent = false
	return next, EffectAccepted
}

// JobState is what a host holds for one job key.
type JobState = Record[model.Job]

// NodeState is what a host holds for one node key.
type NodeState = Record[model.Node]

// AllocState is what a host holds for one allocation key.
type AllocState = Record[model.Allocation]

// DeploymentState is what a host holds for one deployment key.
type DeploymentState = Record[model.Deployment]

// SlotState is what a host holds for one update slot key.
type SlotState = Record[model.Slot]

// VerdictState is what a host holds for one loss verdict key.
type VerdictState = Record[model.LossVerdict]

// SummaryState is what a host holds for one rollout summary key.
type SummaryState = Record[model.RolloutSummary]

// ErrOversize is wrapped by decode errors for values above MaxValueSize.
var ErrOversize = errors.New("value exceeds the size limit")

func checkSize(value []byte) error {
	if len(value) > MaxValueSize {
		return fmt.Errorf("%w: %d bytes > %d", ErrOversize, len(value), MaxValueSize)
	}
	return nil
}

// required refuses a record that leaves out a required enum field (the
// wire format marks them required): its zero value "" is none of the enum's
// values, so the record would mean "no status" and, encoded again by a
// writer (a deployment's compare-and-set), would no longer decode anywhere.
func required[T ~string](what, path string, v T) error {
	if v == "" {
		return fmt.Errorf("decoding %s: %w", what, &model.DecodeError{Path: path, Reason: "missing: the field is required"})
	}
	return nil
}

// sortedNames returns a map's keys in order, so that a decoder names the
// same offending entry every time.
func sortedNames[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// DecodeJob decodes the job put under a jobs-bucket key, closed: oversize,
// unknown fields, unknown enum values, wrong types, a missing ID, a key
// other than JobKey(namespace, id), or a job that fails model.Job.Validate
// all fail the whole declaration.
func DecodeJob(key string, value []byte) (*model.Job, error) {
	return decodeJobUnder(key, value, "job", func(j *model.Job) (string, string) {
		return JobKey(j.Namespace, j.ID), fmt.Sprintf("job %q of namespace %q", j.ID, NamespaceOr(j.Namespace))
	})
}

// DecodeJobVersion decodes a recorded job version (the job_versions
// bucket), as closed as DecodeJob: its
// key must be JobVersionKey(namespace, id, version), so that a value put under
// another job's or another version's key is never taken for the spec a
// revert writes back.
func DecodeJobVersion(key string, value []byte) (*model.Job, error) {
	return decodeJobUnder(key, value, "job version", func(j *model.Job) (string, string) {
		return JobVersionKey(j.Namespace, j.ID, j.Version), fmt.Sprintf("version %d of job %q of namespace %q", j.Version, j.ID, NamespaceOr(j.Namespace))
	})
}

// decodeJobUnder is DecodeJob and DecodeJobVersion: the closed decode, then
// the key the job belongs under (home: that key and how to name the job in
// the refusal), the key tokens and the job's own validation.
func decodeJobUnder(key string, value []byte, what string, home func(*model.Job) (want, named string)) (*model.Job, error) {
	if err := checkSize(value); err != nil {
		return nil, err
	}
	j, err := model.DecodeJob(value)
	if err != nil {
		return nil, err
	}
	if j.ID == "" {
		return nil, errors.New("job has no id")
	}
	if want, named := home(j); want != key {
		return nil, fmt.Errorf("%s belongs under key %q, not %q", named, want, key)
	}
	// The key matching is not enough: an ID with a '.' ("a.b" under
	// "default.a.b") would give the job allocation keys no host can parse.
	if err := CheckTokens(NamespaceOr(j.Namespace), j.ID); err != nil {
		return nil, fmt.Errorf("%s under key %q: %w", what, key, err)
	}
	// A declaration put straight into the bucket skipped the CLI's checks:
	// the same semantic rules apply (negative or huge counts, canary out of
	// range, deadlines out of order...).
	if err := j.Validate(); err != nil {
		return nil, fmt.Errorf("invalid job: %w", err)
	}
	return j, nil
}

// DecodeNode decodes a node record, closed; its ID must be its key.
func DecodeNode(key string, value []byte) (*model.Node, error) {
	if err := checkSize(value); err != nil {
		return nil, err
	}
	var n model.Node
	if err := model.Decode(value, &n); err != nil {
		return nil, fmt.Errorf("decoding node: %w", err)
	}
	if n.ID != key {
		return nil, fmt.Errorf("node %q stored under key %q", n.ID, key)
	}
	if err := CheckTokens(n.ID); err != nil {
		return nil, fmt.Errorf("node under key %q: %w", key, err)
	}
	if err := errors.Join(required("node", "status", n.Status), required("node", "eligibility", n.Eligibility)); err != nil {
		return nil, err
	}
	if n.Attributes == nil {
		n.Attributes = map[string]string{}
	}
	if n.Meta == nil {
		n.Meta = map[string]string{}
	}
	n.ID = model.Intern(n.ID) // shared with its allocations' node_id (model.Intern)
	return &n, nil
}

// DecodeAlloc decodes an allocation status record, closed; its key must be
// AllocKey(node_id, namespace, job_id, id).
func DecodeAlloc(key string, value []byte) (*model.Allocation, error) {
	if err := checkSize(value); err != nil {
		return nil, err
	}
	var a model.Allocation
	if err := model.Decode(value, &a); err != nil {
		return nil, fmt.Errorf("decoding allocation: %w", err)
	}
	if want := AllocKey(a.NodeID, a.Namespace, a.JobID, a.ID); want != key {
		return nil, fmt.Errorf("allocation belongs under key %q, not %q", want, key)
	}
	// Each part a token, so that the key's node and job are the record's
	// (a namespace "x.default" would otherwise match a five-token key).
	if err := CheckTokens(a.NodeID, NamespaceOr(a.Namespace), a.JobID, a.ID); err != nil {
		return nil, fmt.Errorf("allocation under key %q: %w", key, err)
	}
	if err := errors.Join(required("allocation", "desired_status", a.DesiredStatus), required("allocation", "client_status", a.ClientStatus)); err != nil {
		return nil, err
	}
	for i, st := range a.States {
		if err := required("allocation", fmt.Sprintf("states[%d].field", i), st.Field); err != nil {
			return nil, err
		}
	}
	for _, name := range sortedNames(a.TaskStates) {
		if a.TaskStates[name] == nil {
			return nil, fmt.Errorf("decoding allocation: %w", &model.DecodeError{Path: "task_states." + name, Reason: "null: a task's state is an object"})
		}
	}
	a.InternStrings()
	return &a, nil
}

// DecodeDeployment decodes a deployment record, closed; its key must be
// DeploymentKey(namespace, job_id, job_version).
func DecodeDeployment(key string, value []byte) (*model.Deployment, error) {
	if err := checkSize(value); err != nil {
		return nil, err
	}
	var d model.Deployment
	if err := model.Decode(value, &d); err != nil {
		return nil, fmt.Errorf("decoding deployment: %w", err)
	}
	if want := DeploymentKey(d.Namespace, d.JobID, d.JobVersion); want != key {
		return nil, fmt.Errorf("deployment belongs under key %q, not %q", want, key)
	}
	if err := CheckTokens(NamespaceOr(d.Namespace), d.JobID); err != nil {
		return nil, fmt.Errorf("deployment under key %q: %w", key, err)
	}
	if err := required("deployment", "status", d.Status); err != nil {
		return nil, err
	}
	if d.Revert != nil {
		if err := required("deployment", "revert.status", d.Revert.Status); err != nil {
			return nil, err
		}
	}
	// Readers index the groups and add to the map: no nil map, no null group.
	for _, name := range sortedNames(d.TaskGroups) {
		if d.TaskGroups[name] == nil {
			return nil, fmt.Errorf("decoding deployment: %w", &model.DecodeError{Path: "task_groups." + name, Reason: "null: a group's state is an object"})
		}
	}
	if d.TaskGroups == nil {
		d.TaskGroups = map[string]*model.DeploymentState{}
	}
	// The canary nodes share their IDs' bytes with the allocations and
	// node records (model.Intern): a steward asks membership for each.
	for _, g := range d.TaskGroups {
		for i, n := range g.CanaryNodes {
			g.CanaryNodes[i] = model.Intern(n)
		}
	}
	return &d, nil
}

// DecodeSlot decodes an update slot, closed; its key must be
// SlotKey(namespace, job_id, group, index).
func DecodeSlot(key string, value []byte) (*model.Slot, error) {
	if err := checkSize(value); err != nil {
		return nil, err
	}
	var sl model.Slot
	if err := model.Decode(value, &sl); err != nil {
		return nil, fmt.Errorf("decoding slot: %w", err)
	}
	if want := SlotKey(sl.Namespace, sl.JobID, sl.Group, sl.Index); want != key {
		return nil, fmt.Errorf("slot belongs under key %q, not %q", want, key)
	}
	if _, _, _, _, ok := ParseSlotKey(key); !ok {
		return nil, fmt.Errorf("slot under key %q: a namespace, job or index that cannot be part of a slot key", key)
	}
	return &sl, nil
}

// DecodeVerdict decodes a loss verdict, closed; its key must name its node.
func DecodeVerdict(key string, value []byte) (*model.LossVerdict, error) {
	if err := checkSize(value); err != nil {
		return nil, err
	}
	var v model.LossVerdict
	if err := model.Decode(value, &v); err != nil {
		return nil, fmt.Errorf("decoding loss verdict: %w", err)
	}
	if n, _, ok := ParseDownKey(key); !ok || n != v.Node {
		return nil, fmt.Errorf("loss verdict of node %q stored under key %q", v.Node, key)
	}
	return &v, nil
}

// ApplyVerdict applies a rollout-bucket loss verdict entry.
func ApplyVerdict(prev VerdictState, e Entry) (VerdictState, Effect) {
	return Apply(prev, e, DecodeVerdict)
}

// DecodeSummary decodes a rollout summary, closed; its key must name its
// job.
func DecodeSummary(key string, value []byte) (*model.RolloutSummary, error) {
	if err := checkSize(value); err != nil {
		return nil, err
	}
	v, err := model.DecodeSummary(value)
	if err != nil {
		return nil, fmt.Errorf("decoding rollout summary: %w", err)
	}
	if want := SummaryKey(v.Namespace, v.JobID); want != key {
		return nil, fmt.Errorf("rollout summary belongs under key %q, not %q", want, key)
	}
	if ns, job, ok := ParseSummaryKey(key); !ok || ns != NamespaceOr(v.Namespace) || job != v.JobID {
		return nil, fmt.Errorf("rollout summary under key %q: a namespace or job that cannot be part of its key", key)
	}
	return v, nil
}

// ApplySummary applies a rollout-bucket summary entry.
func ApplySummary(prev SummaryState, e Entry) (SummaryState, Effect) {
	return Apply(prev, e, DecodeSummary)
}

// ApplySlot applies a rollout-bucket slot entry.
func ApplySlot(prev SlotState, e Entry) (SlotState, Effect) { return Apply(prev, e, DecodeSlot) }

// ApplyJob applies a jobs-bucket entry.
func ApplyJob(prev JobState, e Entry) (JobState, Effect) { return Apply(prev, e, DecodeJob) }

// ApplyNode applies a nodes-bucket entry. A delete or purge (a heartbeat that
// expired reaches watchers as a purge) marks the node down; see NodeView.
func ApplyNode(prev NodeState, e Entry) (NodeState, Effect) { return Apply(prev, e, DecodeNode) }

// ApplyAlloc applies an allocations-bucket entry.
func ApplyAlloc(prev AllocState, e Entry) (AllocState, Effect) { return Apply(prev, e, DecodeAlloc) }

// ApplyDeployment applies a deployments-bucket entry.
func ApplyDeployment(prev DeploymentState, e Entry) (DeploymentState, Effect) {
	return Apply(prev, e, DecodeDeployment)
}

// NodeView returns the node as the fleet should see it: a copy of the last
// good record, with status down when its heartbeat entry is gone. It returns
// nil if no record ever decoded.
func NodeView(s NodeState) *model.Node {
	if s.Value == nil {
		return nil
	}
	n := *s.Value
	if s.Absent {
		n.Status = model.NodeStatusDown
	}
	return &n
}

// Order is what a job's state tells a host to do with that job's allocations.
type Order int

const (
	// OrderNone: nothing decodable was ever declared under the key; do not
	// act on it (a rejected first version places nothing).
	OrderNone Order = iota
	// OrderRun: converge on the last good job.
	OrderRun
	// OrderStop: the last decoded declaration says stop = true.
	OrderStop
	// OrderKeep: the key is gone (deleted, purged, missing). Keep running
	// what runs, report it orphaned, place nothing new, stop nothing.
	OrderKeep
)

func (o Order) String() string {
	return [...]string{"none", "run", "stop", "keep-orphaned"}[o]
}

// OrderFor is the rule "absence is not a deletion order": only a decoded
// declaration with stop = true stops allocations. A job whose last decoded
// declaration was stop = true stays stopped after its key is purged (the
// purge of a stopped job does not revive it).
func OrderFor(s JobState) Order {
	switch {
	case s.Value == nil:
		return OrderNone
	case s.Value.Stop:
		return OrderStop
	case s.Absent:
		return OrderKeep
	}
	return OrderRun
}

// IsDeletionOrder reports whether the state orders the job's allocations
// stopped. It is true only for a decoded stop = true.
func IsDeletionOrder(s JobState) bool { return OrderFor(s) == OrderStop }

// Quiet names a case in which a host has nothing to converge on and must say
// so at info level, each with its own line, so that a loop that does nothing
// can be told from one that is broken.
type Quiet int

const (
	// QuietNoBucket: the bucket does not exist (yet).
	QuietNoBucket Quiet = iota + 1
	// QuietNoKey: the bucket exists, the key does not.
	QuietNoKey
	// QuietNotConfigured: the feature is not configured on this host.
	QuietNotConfigured
)

// Message is the info line logged for the quiet case.
func (q Quiet) Message() string {
	switch q {
	case QuietNoBucket:
		return "bucket does not exist yet: nothing declared, nothing stopped"
	case QuietNoKey:
		return "key not found: nothing declared, nothing stopped"
	case QuietNotConfigured:
		return "not configured: nothing to converge on"
	}
	return "unknown quiet case"
}

func (q Quiet) String() string {
	switch q {
	case QuietNoBucket:
		return "no_bucket"
	case QuietNoKey:
		return "no_key"
	case QuietNotConfigured:
		return "not_configured"
	}
	return "unknown"
}

// Enumeration is what a host knows about its own ability to list what it runs.
type Enumeration struct {
	// StoreErr is the error reading the local state store, if any.
	StoreErr error
	// DriverErrs maps a driver the node's allocations use to the error
	// listing or recovering its tasks (absent or nil: fine).
	DriverErrs map[string]error
}

// Verdict is MayAct's answer.
type Verdict struct {
	Act    bool
	Reason string
}

// MayAct is the fail-closed rule: a host that cannot enumerate what it runs
// does not act at all, because "this node has no such allocation" cannot be
// told from "this node cannot see its allocations", and acting on the guess
// starts a duplicate. The caller must make a refusal visible (status API,
// metric, error log).
func MayAct(e Enumeration) Verdict {
	var reasons []string
	if e.StoreErr != nil {
		reasons = append(reasons, "state store unreadable: "+e.StoreErr.Error())
	}
	names := make([]string, 0, len(e.DriverErrs))
	for name, err := range e.DriverErrs {
		if err != nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		reasons = append(reasons, fmt.Sprintf("driver %s cannot enumerate its tasks: %v", name, e.DriverErrs[name]))
	}
	if len(reasons) > 0 {
		return Verdict{Act: false, Reason: strings.Join(reasons, "; ")}
	}
	return Verdict{Act: true}
}
