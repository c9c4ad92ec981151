package jobspec

// unsupported names the Nomad job-file stanzas and keys hivelet refuses, with
// the reason printed in the error. A name in this table fails with
// `stanza "X" is not supported by hivelet (why)` wherever it appears, unless
// the block being read accepts it (then the block's own handling wins).
var unsupported = map[string]string{
	// Job level.
	"multiregion":   "hivelet has no regions: a fleet is one NATS cluster",
	"all_at_once":   "hivelet has no central scheduler: each node places its own allocations",
	"periodic":      "hivelet has no central scheduler to launch runs on a timer; run a sysbatch job from cron instead",
	"parameterized": "hivelet has no central scheduler to dispatch jobs",
	"ui":            "hivelet has no web UI",
	"vault_token":   "hivelet has no Vault integration",
	"consul_token":  "hivelet has no Consul integration",
	"spread":        "a system job runs on every eligible node, there is nothing to spread",
	"affinity":      "a system job runs on every eligible node; use a constraint to narrow the nodes",

	// Group level.
	"reschedule":                   "hivelet has no central scheduler to move allocations; disconnect { replace } covers lost nodes",
	"migrate":                      "system allocations are stopped on a draining node, not migrated",
	"scaling":                      "a system job runs once per node, there is nothing to scale",
	"network":                      "the network block belongs to the group in hivelet (or, as Nomad once wrote it, inside a task's resources); move it to the group",
	"max_client_disconnect":        "write it as disconnect { lost_after = ... }",
	"stop_after_client_disconnect": "a node cut off from the fleet keeps running its tasks in hivelet",
	"prevent_reschedule_on_lost":   "hivelet reschedules nothing; use disconnect { replace = false }",

	// Task level.
	"vault":            "hivelet has no Vault integration; pass secrets through env or the driver config",
	"csi_plugin":       "hivelet has no CSI support",
	"dispatch_payload": "hivelet has no central scheduler to dispatch jobs",
	"identity":         "hivelet issues no workload identities",
	"leader":           "the tasks of a group are peers in hivelet",
	"kind":             "hivelet has no service mesh",
	"action":           "hivelet has no task actions",
	"schedule":         "hivelet has no time-based task schedules",
	"scaling_policy":   "a system job runs once per node, there is nothing to scale",

	// Resources.
	"memory_max": "hivelet does not oversubscribe memory",
	"cores":      "hivelet reserves no whole cores; use cpu (MHz)",
	"device":     "hivelet has no device plugins",
	"numa":       "hivelet does no NUMA placement",
	"disk":       "hivelet manages no allocation disk",
	"iops":       "hivelet manages no disk IOPS",

	// Services and checks.
	"connect":                 "hivelet has no service mesh",
	"sidecar_service":         "hivelet has no service mesh",
	"sidecar_task":            "hivelet has no service mesh",
	"gateway":                 "hivelet has no service mesh",
	"canary_tags":             "hivelet registers a service with its tags only; canaries are not told apart in the catalog",
	"canary_meta":             "hivelet registers a service with its tags only; canaries are not told apart in the catalog",
	"tagged_addresses":        "hivelet registers a service at the one address its port resolves to",
	"enable_tag_override":     "hivelet's catalog is written by the nodes only; tags are not overridden from outside",
	"address":                 "hivelet registers a service at the address its port resolves to (a label's node address, or the node's)",
	"weights":                 "hivelet registers a service with its tags only; there are no DNS weights",
	"on_update":               "every check counts toward deployment health in hivelet",
	"method":                  "hivelet's http checks are plain GET requests",
	"header":                  "hivelet's http checks are plain GET requests",
	"body":                    "hivelet's http checks are plain GET requests",
	"protocol":                "hivelet's http checks use plain http",
	"tls_skip_verify":         "hivelet's http checks use plain http",
	"tls_server_name":         "hivelet's http checks use plain http",
	"initial_status":          "a check starts critical until it first passes",
	"failures_before_warning": "a check fails on its first failure",
	"expose":                  "hivelet has no service mesh",
	"grpc_service":            "hivelet's checks are http and tcp only",
	"grpc_use_tls":            "hivelet's checks are http and tcp only",
}

// Context-specific reasons for stanzas hivelet supports elsewhere.
var (
	unsupportedInGroup   = map[string]string{}
	unsupportedInTask    = map[string]string{}
	unsupportedInService = map[string]string{
		"task": "services are declared inside their task in hivelet",
	}
	unsupportedInCheck = map[string]string{
		"task": "a check belongs to its service's task in hivelet",
	}
)
