package node

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/host/wanted"
)

// Build returns the node record: identity and configuration, the host
// attributes, each detected driver as `driver.<name> = 1` plus its own
// attributes (prefixed `driver.<name>.` unless they already start with
// `driver.`), and the operator's intent merged (drain, eligibility). Status is
// ready; HeartbeatAt is now. Attributes and Meta are never nil. It is pure.
func Build(id string, cfg Config, attrs map[string]string, drivers map[string]model.DriverInfo, intent wanted.Intent, now time.Time) *model.Node {
	n := model.Node{
		ID:          id,
		Name:        cfg.Name,
		Datacenter:  cfg.Datacenter,
		NodePool:    cfg.NodePool,
		Class:       cfg.Class,
		Status:      model.NodeStatusReady,
		Attributes:  map[string]string{},
		Meta:        map[string]string{},
		HeartbeatAt: now.UTC(),
	}
	if n.Name == "" {
		n.Name = cfg.Hostname
	}
	if n.Name == "" {
		n.Name = id
	}
	if n.Datacenter == "" {
		n.Datacenter = DefaultDatacenter
	}
	if n.NodePool == "" {
		n.NodePool = DefaultNodePool
	}
	maps.Copy(n.Attributes, attrs)
	maps.Copy(n.Meta, cfg.Meta)
	n.Attributes["unique.hivelet.node_id"] = id
	if len(drivers) > 0 {
		n.Drivers = map[string]model.DriverInfo{}
		for _, name := range slices.Sorted(maps.Keys(drivers)) {
			d := drivers[name]
			n.Drivers[name] = d
			if !d.Detected {
				continue
			}
			n.Attributes["driver."+name] = "1"
			for k, v := range d.Attributes {
				if !strings.HasPrefix(k, "driver.") {
					k = "driver." + name + "." + k
				}
				n.Attributes[k] = v
			}
		}
	}
	n = wanted.MergeIntent(n, intent)
	return &n
}
