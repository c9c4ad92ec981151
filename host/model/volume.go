package model

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
)

// VolumeType is what a group's volume block asks of the node: "host", a
// directory the node's agent configuration names (client { host_volume
// "name" { path = ... } }). Nomad's "csi" needs a CSI plugin, which hivelet
// does not run: the job-file parser refuses it with that reason.
type VolumeType string

const VolumeHost VolumeType = "host"

// VolumeTypes lists every VolumeType value.
var VolumeTypes = []VolumeType{VolumeHost}

func (t *VolumeType) UnmarshalJSON(b []byte) error { return decodeEnum(b, t, VolumeTypes) }

// Volume is a group's volume block (Nomad's `volume "name" { type = "host"
// source = ... }`): a node runs the group only when it has the host
// volume Source (Node.HostVolumes), and a task mounts it with a
// volume_mount naming the block.
type Volume struct {
	// Name is the block's label, what a task's volume_mount names.
	Name string     `json:"name"`
	Type VolumeType `json:"type"`
	// Source is the host volume's name in the node's configuration.
	Source string `json:"source"`
	// ReadOnly mounts the volume read-only in every task; a node's
	// read-only host volume is read-only whatever the job says.
	ReadOnly bool `json:"read_only,omitempty"`
}

// VolumeMount is a task's volume_mount block: the group's volume Volume
// mounted at Destination in the task.
type VolumeMount struct {
	Volume      string `json:"volume"`
	Destination string `json:"destination"`
	ReadOnly    bool   `json:"read_only,omitempty"`
	// PropagationMode is Nomad's: "private" (default), "host-to-task"
	// (rslave) or "bidirectional" (rshared).
	PropagationMode string `json:"propagation_mode,omitempty"`
}

// PropagationModes are the volume_mount propagation modes Nomad has.
var PropagationModes = []string{"private", "host-to-task", "bidirectional"}

// HostVolume is one host volume a node offers (its agent's client {
// host_volume "name" { } } block), recorded in the node's record.
type HostVolume struct {
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// HostNetwork is one named host network a node has (its agent's client {
// host_network "name" { cidr, interface } }): Address is the node's address
// on it, where a port naming the network is published.
type HostNetwork struct {
	CIDR      string `json:"cidr,omitempty"`
	Interface string `json:"interface,omitempty"`
	Address   string `json:"address"`
}

// HostVolumesWanted are the host volume names a group's volumes need on the
// node, sorted, without repeats.
func (g *Group) HostVolumesWanted() []string {
	var out []string
	for _, vol := range g.Volumes {
		if vol.Type == VolumeHost && !slices.Contains(out, vol.Source) {
			out = append(out, vol.Source)
		}
	}
	sort.Strings(out)
	return out
}

// HostNetworksWanted are the host networks a group's ports name, sorted,
// without repeats.
func (g *Group) HostNetworksWanted() []string {
	var out []string
	if g.Network == nil {
		return nil
	}
	for _, p := range g.Network.Ports {
		if p.HostNetwork != "" && !slices.Contains(out, p.HostNetwork) {
			out = append(out, p.HostNetwork)
		}
	}
	sort.Strings(out)
	return out
}

// LookupVolume returns the group's volume of that name, or nil.
func (g *Group) LookupVolume(name string) *Volume {
	for i := range g.Volumes {
		if g.Volumes[i].Name == name {
			return &g.Volumes[i]
		}
	}
	return nil
}

func (v *validator) volumes(p string, g *Group) {
	seen := map[string]bool{}
	for i, vol := range g.Volumes {
		vp := fmt.Sprintf("%s.volumes[%d]", p, i)
		v.name(join(vp, "name"), "volume name", vol.Name)
		if seen[vol.Name] {
			v.add(join(vp, "name"), "duplicate volume %q: volume names must be unique within a group", vol.Name)
		}
		seen[vol.Name] = true
		if !validEnum(vol.Type, VolumeTypes) {
			v.add(join(vp, "type"), "volume type %q is not supported (allowed: %s)", vol.Type, joinEnum(VolumeTypes))
		}
		if vol.Source == "" {
			v.add(join(vp, "source"), "a host volume names its source: the host_volume of the node's agent configuration")
		}
	}
	for ti, t := range g.Tasks {
		if t == nil {
			continue
		}
		dests := map[string]bool{}
		for i, m := range t.VolumeMounts {
			mp := fmt.Sprintf("%s.tasks[%d].volume_mounts[%d]", p, ti, i)
			if g.LookupVolume(m.Volume) == nil {
				names := make([]string, 0, len(g.Volumes))
				for _, vol := range g.Volumes {
					names = append(names, fmt.Sprintf("%q", vol.Name))
				}
				have := "the group declares none"
				if len(names) > 0 {
					have = "the group's are " + strings.Join(names, ", ")
				}
				v.add(join(mp, "volume"), "volume_mount names volume %q, which the group does not declare (%s): add volume %q { type = \"host\" source = ... } to the group", m.Volume, have, m.Volume)
			}
			if !path.IsAbs(m.Destination) {
				v.add(join(mp, "destination"), "destination must be an absolute path in the task, got %q", m.Destination)
			} else if dests[path.Clean(m.Destination)] {
				v.add(join(mp, "destination"), "two volume_mounts at %s", m.Destination)
			}
			dests[path.Clean(m.Destination)] = true
			if m.PropagationMode != "" && !slices.Contains(PropagationModes, m.PropagationMode) {
				v.add(join(mp, "propagation_mode"), "propagation_mode %q is not one of private, host-to-task, bidirectional", m.PropagationMode)
			}
		}
	}
}
