package allocrunner

import (
	"fmt"

	"github.com/hivelet/hivelet/host/model"
	"github.com/hivelet/hivelet/sdk/driver"
)

// taskMounts resolves a task's volume_mount blocks to the host directories
// the driver mounts: each names a volume of the group, whose source is a
// host volume of the node. A mount is read-only when the node's host
// volume, the group's volume or the mount says so (any of the three, as
// in Nomad). It is pure; an error is permanent (the job or the node's
// configuration must change).
func taskMounts(g *model.Group, t *model.Task, n *model.Node) ([]driver.Mount, error) {
	var out []driver.Mount
	for _, m := range t.VolumeMounts {
		vol := g.LookupVolume(m.Volume)
		if vol == nil {
			return nil, fmt.Errorf("task %s: volume_mount names volume %q, which group %s does not declare", t.Name, m.Volume, g.Name)
		}
		var hv model.HostVolume
		ok := false
		if n != nil {
			hv, ok = n.HostVolumes[vol.Source]
		}
		if !ok {
			return nil, fmt.Errorf("task %s: volume %q needs host volume %q, which this node does not offer (its agent's client { host_volume %q { path = ... } })", t.Name, vol.Name, vol.Source, vol.Source)
		}
		out = append(out, driver.Mount{HostPath: hv.Path, TaskPath: m.Destination,
			ReadOnly: hv.ReadOnly || vol.ReadOnly || m.ReadOnly, PropagationMode: m.PropagationMode})
	}
	return out, nil
}
