package model

import "sync"

// Intern returns one shared copy of s for the short strings that the
// values decoded from the fleet's buckets repeat: node IDs (each node's
// allocations and its record), namespaces, job and group IDs, statuses,
// allocation names of system jobs, deployment IDs. Decoded from JSON each
// of them is a copy of its own, somewhere in the heap; a steward's
// decision compares and hashes them for each of a job's allocations (a
// node's liveness, its canary membership, the job's filter), and with a
// copy per allocation most of those reads missed the cache. Interned, equal
// strings share their bytes: a comparison of two of them is a pointer
// comparison, and the bytes stay warm.
//
// The table holds at most internMax strings of at most internLen bytes
// each (it starts again empty when full) and is safe for concurrent use.
// A string that is not interned is returned as it is: Intern never changes
// a value, only where its bytes are.
func Intern(s string) string {
	if s == "" || len(s) > internLen {
		return s
	}
	interned.mu.Lock()
	defer interned.mu.Unlock()
	if c, ok := interned.m[s]; ok {
		return c
	}
	if interned.m == nil || len(interned.m) >= internMax {
		interned.m = make(map[string]string, 1024)
	}
	interned.m[s] = s
	return s
}

// internLen and internMax bound Intern's table: about 200 bytes an entry,
// so a few megabytes at most, whatever the fleet declares.
const (
	internLen = 128
	internMax = 1 << 15
)

var interned struct {
	mu sync.Mutex
	m  map[string]string
}

// InternStrings interns the strings of a that repeat across a fleet's
// allocations (Intern): every field but its own ID and its predecessor's.
func (a *Allocation) InternStrings() {
	a.Name = Intern(a.Name)
	a.Namespace = Intern(a.Namespace)
	a.JobID = Intern(a.JobID)
	a.TaskGroup = Intern(a.TaskGroup)
	a.NodeID = Intern(a.NodeID)
	a.DesiredStatus = DesiredStatus(Intern(string(a.DesiredStatus)))
	a.DesiredDescription = Intern(a.DesiredDescription)
	a.ClientStatus = ClientStatus(Intern(string(a.ClientStatus)))
	a.ClientDescription = Intern(a.ClientDescription)
	a.DeploymentID = Intern(a.DeploymentID)
}
