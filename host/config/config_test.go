package config

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

const full = `
name       = "node-a"
datacenter = "eu1"
node_pool  = "edge"
node_class = "small"
meta = { rack = "r1" }
state_dir = "/srv/hivelet"

http { address = "127.0.0.1:5646" }

nats {
  urls            = ["nats://10.0.0.1:4222", "nats://10.0.0.2:4222"]
  creds_file      = "/etc/hivelet/nats.creds"
  ca_file         = "/etc/hivelet/ca.pem"
  bucket_prefix   = "prod"
  replicas        = 3
  request_timeout = "2s"
  node_ttl        = "15s"
}

docker { allow_privileged = true }

policy {
  timeout = "100ms"
  pins = { canary-by-rack = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" }
}

plugin "mydriver" {
  sha256 = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
}
`

func TestAFullFileLoadsAndResolves(t *testing.T) {
	a, err := Parse([]byte(full), "agent.hcl")
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.Resolve(false, "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "node-a" || r.Datacenter != "eu1" || r.NodePool != "edge" || r.NodeClass != "small" || r.Meta["rack"] != "r1" {
		t.Fatalf("identity: %+v", r.Agent)
	}
	if r.HTTPAddr != "127.0.0.1:5646" || r.BucketPrefix != "prod" || r.Replicas != 3 || r.RequestTimeout != 2*time.Second || r.NodeTTL != 15*time.Second {
		t.Fatalf("resolved: %+v", r)
	}
	if r.Embedded || len(r.NATS.URLs) != 2 || !r.Privileged || r.AllocDir != "/srv/hivelet/alloc" || r.PolicyTimeout != 100*time.Millisecond {
		t.Fatalf("resolved: %+v", r)
	}
	if len(r.Plugins) != 1 || r.Plugins[0].Name != "mydriver" {
		t.Fatalf("plugins: %+v", r.Plugins)
	}
}

func TestDefaultsWithoutAFile(t *testing.T) {
	r, err := Default().Resolve(true, "/tmp/dev")
	if err != nil {
		t.Fatal(err)
	}
	if !r.Embedded || r.EmbeddedPort != 4222 || r.HTTPAddr != "127.0.0.1:4646" || r.BucketPrefix != "hivelet" ||
		r.Datacenter != "dc1" || r.NodePool != "default" || r.StateDir != "/tmp/dev" || r.Meta == nil || r.NodeTTL != 30*time.Second ||
		r.NetworkAddress != "127.0.0.1" || r.MinDynamicPort != 20000 || r.MaxDynamicPort != 32000 {
		t.Fatalf("defaults: %+v", r)
	}
}

func TestTheNetworkBlockSetsTheAddressRangeAndReservedPorts(t *testing.T) {
	a, err := Parse([]byte("network {\n  address = \"10.1.2.3\"\n  min_dynamic_port = 21000\n  max_dynamic_port = 21999\n  reserved_ports = \"22,21000-21002\"\n}\n"), "agent.hcl")
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.Resolve(false, "/tmp/x")
	if err != nil {
		t.Fatal(err)
	}
	if r.NetworkAddress != "10.1.2.3" || r.MinDynamicPort != 21000 || r.MaxDynamicPort != 21999 || fmt.Sprint(r.ReservedPorts) != "[22 21000 21001 21002]" {
		t.Fatalf("resolved network: %q %d-%d %v", r.NetworkAddress, r.MinDynamicPort, r.MaxDynamicPort, r.ReservedPorts)
	}
	// Control: a non-dev agent without the block leaves the address to the
	// agent's default and keeps Nomad's range.
	r, err = Default().Resolve(false, "/tmp/x")
	if err != nil || r.NetworkAddress != "" || r.MinDynamicPort != 20000 {
		t.Fatalf("no network block: %q %d %v", r.NetworkAddress, r.MinDynamicPort, err)
	}
}

func TestAnUnknownAttributeFailsWithItsPosition(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"unknown attribute", "name = \"a\"\nsurprise = 1\n", "agent.hcl:2:1"},
		{"unknown block", "nats {\n  urls = []\n}\nfoo {}\n", "agent.hcl:4:1"},
		{"wrong type", "nats {\n  replicas = \"three\"\n}\n", "agent.hcl:2:"},
		{"bad duration", "nats {\n  request_timeout = \"soon\"\n}\n", "agent.hcl:2:3: invalid duration"},
		{"bad pin", "plugin \"x\" {\n  sha256 = \"abc\"\n}\n", "agent.hcl:2:3: invalid plugin pin"},
		{"node ttl below a second", "nats {\n  node_ttl = \"500ms\"\n}\n", "agent.hcl:2:3: node_ttl too short"},
		{"half a client cert", "nats {\n  cert_file = \"c.pem\"\n}\n", "incomplete TLS client certificate"},
		{"syntax", "name = \n", "agent.hcl:1:"},
		{"network address not an IP", "network {\n  address = \"eth0\"\n}\n", "agent.hcl:2:3: invalid address"},
		{"dynamic range upside down", "network {\n  min_dynamic_port = 30000\n  max_dynamic_port = 21000\n}\n", "agent.hcl:3:3: empty dynamic port range"},
		{"bad reserved ports", "network {\n  reserved_ports = \"22,x\"\n}\n", "agent.hcl:2:3: invalid reserved ports"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.src), "agent.hcl")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
	// Control: the same shapes, valid, load.
	if _, err := Parse([]byte("name = \"a\"\nnats {\n  urls = [\"nats://127.0.0.1:4222\"]\n  replicas = 3\n  request_timeout = \"1s\"\n}\n"), "agent.hcl"); err != nil {
		t.Fatal(err)
	}
}

func TestJSONFormIsTheSameSchema(t *testing.T) {
	a, err := Parse([]byte(`{"name":"j","nats":{"urls":["nats://127.0.0.1:4222"],"bucket_prefix":"x"},"plugin":{"mydriver":{"sha256":""}}}`), "agent.json")
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "j" || a.NATS.BucketPrefix != "x" || len(a.Plugins) != 1 {
		t.Fatalf("%+v", a)
	}
	if _, err := Parse([]byte(`{"name":"j","nope":1}`), "agent.json"); err == nil || !strings.Contains(err.Error(), "agent.json:1:") {
		t.Fatalf("unknown JSON attribute: %v", err)
	}
	if _, err := Default().Resolve(true, ""); err != nil {
		t.Fatal(err)
	}
	withURL := &Agent{NATS: &NATS{URLs: []string{"nats://x:4222"}}}
	if _, err := withURL.Resolve(true, ""); err == nil {
		t.Fatal("-dev with nats.urls accepted")
	}
}

// The examples in docs/agent-config.md load: the documentation cannot drift
// from the schema.
func TestTheDocumentedExamplesLoad(t *testing.T) {
	doc, err := os.ReadFile("../../docs/agent-config.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	for _, lang := range []string{"hcl", "json"} {
		_, rest, ok := strings.Cut(string(doc), "```"+lang+"\n")
		if !ok {
			t.Fatalf("no %s example", lang)
		}
		body, _, _ := strings.Cut(rest, "```")
		blocks[lang] = body
	}
	a, err := Parse([]byte(blocks["hcl"]), "agent-config.md.hcl")
	if err != nil {
		t.Fatalf("the HCL example does not load: %v", err)
	}
	if a.NATS == nil || a.NATS.Replicas != 3 || len(a.Plugins) != 1 || a.Policy.Pins["canary-by-rack"] == "" {
		t.Fatalf("HCL example decoded as %+v", a)
	}
	j, err := Parse([]byte(blocks["json"]), "agent-config.md.json")
	if err != nil {
		t.Fatalf("the JSON example does not load: %v", err)
	}
	if j.Name != "web-7" || len(j.Plugins) != 1 {
		t.Fatalf("JSON example decoded as %+v", j)
	}
}

// TestTheHTTPBlockNeedsATokenBeyondLoopback: the API's token file defaults
// into the state directory; insecure_no_auth is accepted on loopback
// (control) and refused, before anything starts, with a non-loopback
// address or with a token file.
func TestTheHTTPBlockNeedsATokenBeyondLoopback(t *testing.T) {
	for _, c := range []struct {
		hcl, refused, tokenFile string
		noAuth, debug           bool
	}{
		{"", "", "/tmp/x/http.token", false, false},
		{"http {\n  enable_debug = true\n}\n", "", "/tmp/x/http.token", false, true},
		{"http {\n  address = \"0.0.0.0:4646\"\n  allow_non_loopback = true\n  token_file = \"/etc/hivelet/api.token\"\n}\n", "", "/etc/hivelet/api.token", false, false},
		{"http {\n  insecure_no_auth = true\n}\n", "", "/tmp/x/http.token", true, false},
		{"http {\n  address = \"0.0.0.0:4646\"\n  allow_non_loopback = true\n  insecure_no_auth = true\n}\n", "not loopback and insecure_no_auth", "", false, false},
		{"http {\n  insecure_no_auth = true\n  token_file = \"/t\"\n}\n", "exclusive", "", false, false},
	} {
		a, err := Parse([]byte(c.hcl), "agent.hcl")
		if err != nil {
			t.Fatal(err)
		}
		r, err := a.Resolve(false, "/tmp/x")
		if c.refused != "" {
			if err == nil || !strings.Contains(err.Error(), c.refused) {
				t.Errorf("%q: %v, want %q", c.hcl, err, c.refused)
			}
			continue
		}
		if err != nil || r.HTTPTokenFile != c.tokenFile || r.HTTPNoAuth != c.noAuth || r.HTTPEnableDebug != c.debug {
			t.Errorf("%q: %+v %v", c.hcl, r, err)
		}
	}
}
