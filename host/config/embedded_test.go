package config

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const clusterHCL = `
name = "agent-2"
nats {
  replicas = 3
  embedded {
    host        = "127.0.0.1"
    port        = 4223
    store_dir   = "/srv/nats"
    server_name = "hv-2"
    cluster {
      name   = "hivelet"
      listen = "127.0.0.1:6223"
      routes = ["127.0.0.1:6222", "nats-route://127.0.0.1:6223", "127.0.0.1:6224"]
    }
  }
}
`

const clusterJSON = `{
  "name": "agent-2",
  "nats": {
    "replicas": 3,
    "embedded": {
      "host": "127.0.0.1", "port": 4223, "store_dir": "/srv/nats", "server_name": "hv-2",
      "cluster": {"name": "hivelet", "listen": "127.0.0.1:6223",
                  "routes": ["127.0.0.1:6222", "nats-route://127.0.0.1:6223", "127.0.0.1:6224"]}
    }
  }
}`

func TestAnEmbeddedClusterResolvesTheSameFromHCLAndJSON(t *testing.T) {
	want := &ResolvedCluster{Name: "hivelet", Host: "127.0.0.1", Port: 6223,
		Routes: []string{"nats-route://127.0.0.1:6222", "nats-route://127.0.0.1:6223", "nats-route://127.0.0.1:6224"}}
	for name, src := range map[string]string{"agent.hcl": clusterHCL, "agent.json": clusterJSON} {
		a, err := Parse([]byte(src), name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		r, err := a.Resolve(false, "/var/hv")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !r.Embedded || r.EmbeddedHost != "127.0.0.1" || r.EmbeddedPort != 4223 || r.EmbeddedStoreDir != "/srv/nats" ||
			r.EmbeddedServerName != "hv-2" || r.Replicas != 3 || r.EmbeddedAllowNonLoopback {
			t.Fatalf("%s: resolved %+v", name, r)
		}
		if !reflect.DeepEqual(r.Cluster, want) {
			t.Fatalf("%s: cluster %+v, want %+v", name, r.Cluster, want)
		}
	}
}

func TestWithoutAnEmbeddedBlockTheServerIsSingleAndLoopback(t *testing.T) {
	r, err := Default().Resolve(false, "/var/hv")
	if err != nil {
		t.Fatal(err)
	}
	if r.Cluster != nil || r.EmbeddedHost != "127.0.0.1" || r.EmbeddedPort != 4222 || r.EmbeddedStoreDir != "/var/hv/nats" || r.EmbeddedServerName != "" {
		t.Fatalf("defaults: %+v", r)
	}
	// The old shorthand still sets the port.
	a, err := Parse([]byte("nats {\n  embedded_port = 5222\n}\n"), "agent.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := a.Resolve(false, "/var/hv"); r.EmbeddedPort != 5222 {
		t.Fatalf("embedded_port: %d", r.EmbeddedPort)
	}
}

func TestEmbeddedServerMistakesFailWithTheirPosition(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"non-loopback client host without consent",
			"nats {\n  embedded {\n    host = \"0.0.0.0\"\n  }\n}\n", "agent.hcl:3:5: non-loopback listener"},
		{"non-loopback cluster listen without consent",
			"nats {\n  embedded {\n    cluster {\n      name = \"c\"\n      listen = \"10.0.0.1:6222\"\n    }\n  }\n}\n", "agent.hcl:5:7: non-loopback listener"},
		{"empty cluster listen host is every interface",
			"nats {\n  embedded {\n    cluster {\n      name = \"c\"\n      listen = \":6222\"\n    }\n  }\n}\n", "agent.hcl:5:7: non-loopback listener"},
		{"routes without a cluster name",
			"nats {\n  embedded {\n    cluster {\n      listen = \"127.0.0.1:6222\"\n      routes = [\"127.0.0.1:6223\"]\n    }\n  }\n}\n", "agent.hcl:3:5: cluster without a name"},
		{"routes without a listen address",
			"nats {\n  embedded {\n    cluster {\n      name = \"c\"\n      routes = [\"127.0.0.1:6223\"]\n    }\n  }\n}\n", "agent.hcl:3:5: cluster without a listen address"},
		{"bad route",
			"nats {\n  embedded {\n    cluster {\n      name = \"c\"\n      listen = \"127.0.0.1:6222\"\n      routes = [\"http://x:1\"]\n    }\n  }\n}\n", "agent.hcl:6:7: invalid route"},
		{"bad listen port",
			"nats {\n  embedded {\n    cluster {\n      name = \"c\"\n      listen = \"127.0.0.1:0\"\n    }\n  }\n}\n", "agent.hcl:5:7: invalid cluster listen address"},
		{"replicas beyond the named members",
			"nats {\n  replicas = 3\n  embedded {\n    cluster {\n      name = \"c\"\n      listen = \"127.0.0.1:6222\"\n      routes = [\"127.0.0.1:6223\"]\n    }\n  }\n}\n", "agent.hcl:2:3: too many replicas: nats.replicas = 3 but the cluster names 2"},
		{"replicas on a single embedded server",
			"nats {\n  replicas = 3\n}\n", "agent.hcl:2:3: too many replicas"},
		{"replicas on an embedded block without cluster",
			"nats {\n  replicas = 2\n  embedded {\n    port = 4223\n  }\n}\n", "agent.hcl:2:3: too many replicas"},
		{"embedded with urls",
			"nats {\n  urls = [\"nats://127.0.0.1:4222\"]\n  embedded {}\n}\n", "agent.hcl:2:3: embedded server with urls"},
		{"two different ports",
			"nats {\n  embedded_port = 4222\n  embedded {\n    port = 4223\n  }\n}\n", "agent.hcl:4:5: conflicting ports"},
		{"cluster without routes",
			"nats {\n  embedded {\n    cluster {\n      name = \"c\"\n      listen = \"127.0.0.1:6222\"\n    }\n  }\n}\n", "agent.hcl:3:5: cluster without routes"},
		{"unknown attribute in cluster",
			"nats {\n  embedded {\n    cluster {\n      peers = 3\n    }\n  }\n}\n", "agent.hcl:4:7"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.src), "agent.hcl")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
	// Controls: the consenting and complete forms load.
	for _, src := range []string{
		"nats {\n  embedded {\n    host = \"0.0.0.0\"\n    allow_non_loopback = true\n    cluster {\n      name = \"c\"\n      listen = \"10.0.0.1:6222\"\n      routes = [\"10.0.0.2:6222\", \"10.0.0.3:6222\"]\n    }\n  }\n  replicas = 3\n}\n",
		"nats {\n  embedded_port = 4223\n  embedded {\n    port = 4223\n  }\n}\n",
		"nats {\n  replicas = 1\n  embedded {\n    cluster {\n      name = \"seed\"\n      listen = \"127.0.0.1:6222\"\n      routes = [\"127.0.0.1:6222\"]\n    }\n  }\n}\n",
	} {
		if _, err := Parse([]byte(src), "agent.hcl"); err != nil {
			t.Fatalf("valid form rejected: %v\n%s", err, src)
		}
	}
}

// The clustering example in docs/agent-config.md loads.
func TestTheDocumentedClusterExampleLoads(t *testing.T) {
	doc, err := os.ReadFile("../../docs/agent-config.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "## The embedded server and clustering")
	if !ok {
		t.Fatal("no clustering section")
	}
	_, rest, ok := strings.Cut(sec, "```hcl\n")
	if !ok {
		t.Fatal("no HCL example in the clustering section")
	}
	body, _, _ := strings.Cut(rest, "```")
	a, err := Parse([]byte(body), "agent-config.md.hcl")
	if err != nil {
		t.Fatalf("the clustering example does not load: %v", err)
	}
	r, err := a.Resolve(false, "/var/hv")
	if err != nil {
		t.Fatal(err)
	}
	if r.Cluster == nil || r.Cluster.Name != "hivelet" || len(r.Cluster.Routes) != 3 || r.Replicas != 3 || r.EmbeddedServerName != "hivelet-a" {
		t.Fatalf("clustering example resolved as %+v (cluster %+v)", r, r.Cluster)
	}
}

// The three agents of examples/multihost load and fit together: one cluster
// name, distinct names, directories and ports, every member's listen address
// among everyone's routes, R3 within three members.
func TestTheMultihostExampleFilesFormOneCluster(t *testing.T) {
	seen := map[string]string{}
	unique := func(what, v, file string) {
		if prev, ok := seen[what+"="+v]; ok {
			t.Fatalf("%s %s in both %s and %s", what, v, prev, file)
		}
		seen[what+"="+v] = file
	}
	var listens []string
	var routes [][]string
	for i := 1; i <= 3; i++ {
		file := fmt.Sprintf("../../examples/multihost/agent-%d.hcl", i)
		a, err := Load(file)
		if err != nil {
			t.Fatal(err)
		}
		r, err := a.Resolve(false, "")
		if err != nil {
			t.Fatal(err)
		}
		if r.Cluster == nil || r.Cluster.Name != "hivelet-demo" || r.Replicas != 3 || !r.Embedded {
			t.Fatalf("%s: %+v", file, r)
		}
		unique("name", r.Name, file)
		unique("state_dir", r.StateDir, file)
		unique("http", r.HTTPAddr, file)
		unique("client port", fmt.Sprint(r.EmbeddedPort), file)
		unique("server_name", r.EmbeddedServerName, file)
		listen := fmt.Sprintf("nats-route://%s:%d", r.Cluster.Host, r.Cluster.Port)
		unique("cluster listen", listen, file)
		unique("dc+meta", r.Datacenter+fmt.Sprint(r.Meta), file)
		listens = append(listens, listen)
		routes = append(routes, r.Cluster.Routes)
	}
	for i, rs := range routes {
		for _, l := range listens {
			if !slices.Contains(rs, l) {
				t.Fatalf("agent-%d.hcl routes %v miss %s", i+1, rs, l)
			}
		}
	}
}
