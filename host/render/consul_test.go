package render

import (
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
