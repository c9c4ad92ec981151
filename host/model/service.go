package model

import "time"

// ServiceRegistration is one instance of a service in the services bucket:
// written by the node running the allocation while the service's checks
// pass (or, with none, while its tasks run), deleted when they fail or the
// allocation stops (Nomad's provider = "nomad" services).
type ServiceRegistration struct {
	// Name is the service's name (its interpolations resolved; default
	// <job>-<group>[-<task>]).
	Name      string   `json:"name"`
	AllocID   string   `json:"alloc_id"`
	JobID     string   `json:"job_id"`
	Namespace string   `json:"namespace,omitempty"`
	Group     string   `json:"group"`
	Task      string   `json:"task,omitempty"`
	NodeID    string   `json:"node_id"`
	Address   string   `json:"address"`
	Port      int      `json:"port"`
	Tags      []string `json:"tags,omitempty"`
	// Index tells apart two services of one allocation (their order in
	// the group, then in each task).
	Index      int       `json:"index"`
	UpdateTime time.Time `json:"update_time,omitzero"`
}
