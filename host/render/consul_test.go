package render

import (
	"strings"
	"testing"

	"github.com/hivelet/hivelet/host/model"
)

// TestConsulsServiceFunctionReadsHiveletsCatalog: consul-template's
// service "name" gives the same instances as nomadService; "tag.name"
// keeps those with the tag, "@dc" and "|filter" are not looked at; the
// name read is the bare one (what the node watches). Control: an unknown
// tag gives nothing.
func TestConsulsServiceFunctionReadsHiveletsCatalog(t *testing.T) {
	var asked []string
	src := Sources{Service: func(name string) ([]*model.ServiceRegistration, error) {
		asked = append(asked, name)
		if name != "influxdb" {
			return nil, nil
		}
		return []*model.ServiceRegistration{
			{Name: "influxdb", Address: "10.0.0.1", Port: 8086, Tags: []string{"primary"}},
			{Name: "influxdb", Address: "10.0.0.2", Port: 8086},
		}, nil
	}}
	for _, c := range []struct{ text, want string }{
		{`{{ range service "influxdb" }}{{ .Address }}:{{ .Port }};{{ end }}`, "10.0.0.1:8086;10.0.0.2:8086;"},
		{`{{ range service "primary.influxdb" }}{{ .Address }};{{ end }}`, "10.0.0.1;"},
		{`{{ range service "influxdb@dc1|any" }}{{ .Address }};{{ end }}`, "10.0.0.1;10.0.0.2;"},
		{`{{ len (service "replica.influxdb") }}`, "0"},
	} {
		got, err := Render(c.text, "", "", src)
		if err != nil || string(got) != c.want {
			t.Errorf("%s: rendered %q %v, want %q", c.text, got, err, c.want)
		}
	}
	for _, name := range asked {
		if name != "influxdb" {
			t.Errorf("the catalog was asked for %q, want the bare name", name)
		}
	}
	if err := Check(`{{ service "x" }}`, "", ""); err != nil {
		t.Errorf("service refused at check: %v", err)
	}
	if err := Check(`{{ services }}`, "", ""); err == nil {
		t.Error("services (the list of every service) accepted")
	}
}

// TestConsulsKeyFunctionsReadTheVariablesStore: key "a/b/c" is item c of
// variable a/b (the path read, so a change re-renders the file);
// keyOrDefault gives its default and keyExists false for a missing
// variable or item, where key fails naming what to put. Control: the
// present item renders its value.
func TestConsulsKeyFunctionsReadTheVariablesStore(t *testing.T) {
	var asked []string
	src := Sources{Var: func(path string) (map[string]string, bool, error) {
		asked = append(asked, path)
		if path != "homelab/traefik" {
			return nil, false, nil
		}
		return map[string]string{"traefik.yaml": "entryPoints: {}"}, true, nil
	}}
	for _, c := range []struct{ text, want string }{
		{`{{- key "homelab/traefik/traefik.yaml" }}`, "entryPoints: {}"},
		{`{{ keyOrDefault "homelab/traefik/dynamic.yaml" "none" }}`, "none"},
		{`{{ keyOrDefault "homelab/vector/vector.toml" "none" }}`, "none"},
		{`{{ keyExists "homelab/traefik/traefik.yaml" }} {{ keyExists "homelab/traefik/x" }}`, "true false"},
	} {
		got, err := Render(c.text, "", "", src)
		if err != nil || string(got) != c.want {
			t.Errorf("%s: rendered %q %v, want %q", c.text, got, err, c.want)
		}
	}
	if _, err := Render(`{{ key "homelab/traefik/dynamic.yaml" }}`, "", "", src); err == nil ||
		!strings.Contains(err.Error(), "variable homelab/traefik has no item dynamic.yaml (hivelet var put homelab/traefik dynamic.yaml=...)") {
		t.Errorf("a missing key: %v", err)
	}
	if _, err := Render(`{{ key "toplevel" }}`, "", "", src); err == nil || !strings.Contains(err.Error(), "this one has no path") {
		t.Errorf("a key without a path: %v", err)
	}
	for _, p := range asked {
		if p != "homelab/traefik" && p != "homelab/vector" {
			t.Errorf("the store was asked for %q", p)
		}
	}
}
