package render

import (
	"errors"
	"github.com/hivelet/hivelet/host/model"
	"reflect"
	"strings"
	"testing"
)

func lookupIn(m map[string]string) Lookup {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestRenderingIsAFunctionOfTheTaskEnvironment(t *testing.T) {
	env := map[string]string{"NOMAD_PORT_http": "9100", "node.unique.name": "n1", "attr.kernel.name": "linux", "TAGS": "a,b"}
	text := `port={{ env "NOMAD_PORT_http" }}
node={{ env "node.unique.name" | toUpper }}
kernel={{ env "attr.kernel.name" }}
missing=[{{ env "NOPE" }}] default={{ envOrDefault "NOPE" "x" }}
{{ range split "," (env "TAGS") }}tag={{ . }}
{{ end }}`
	want := "port=9100\nnode=N1\nkernel=linux\nmissing=[] default=x\ntag=a\ntag=b\n"
	for range 2 {
		got, err := Render(text, "", "", Sources{Env: lookupIn(env)})
		if err != nil || string(got) != want {
			t.Fatalf("rendered %q (%v), want %q", got, err, want)
		}
	}
	// Delimiters: the default ones are then plain text.
	got, err := Render(`[[ env "NOMAD_PORT_http" ]] {{ kept }}`, "[[", "]]", Sources{Env: lookupIn(env)})
	if err != nil || string(got) != "9100 {{ kept }}" {
		t.Fatalf("custom delimiters: %q %v", got, err)
	}
}

func TestAnUnknownFunctionIsRefusedWithItsLine(t *testing.T) {
	err := Check("a\nb {{ secret \"kv/db\" }}\n", "", "")
	var re *Error
	if !errors.As(err, &re) || re.Line != 2 || !strings.Contains(re.Message, `template function "secret" is not available in hivelet (hivelet has no Vault integration)`) {
		t.Fatalf("secret: %#v", err)
	}
	err = Check("{{ frobnicate }}", "", "")
	if !errors.As(err, &re) || re.Line != 1 || !strings.Contains(re.Message, `"frobnicate" is not available in hivelet (available: base64Decode, `) {
		t.Fatalf("unknown function: %#v", err)
	}
	if err := Check("{{ if }}", "", ""); !errors.As(err, &re) || re.Line != 1 {
		t.Fatalf("syntax error: %#v", err)
	}
	if got, err := Render(`{{ toTitle "élan" }}|{{ toTitle "" }}`, "", "", Sources{}); err != nil || string(got) != "Élan|" {
		t.Fatalf("toTitle: %q %v", got, err)
	}
	// Control: every offered function parses.
	if err := Check(`{{ env "A" | toLower | toTitle | trimSpace }}{{ replaceAll "a" "b" "c" }}{{ join "," (split "," "x") }}`, "", ""); err != nil {
		t.Fatal(err)
	}
}

func TestEnvFilesAreKeyValueLines(t *testing.T) {
	got, err := ParseEnvFile([]byte("# comment\nA=1\nexport B = \"two words\"\n\nC='3'\nD=\n"))
	want := map[string]string{"A": "1", "B": "two words", "C": "3", "D": ""}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v %v, want %v", got, err, want)
	}
	if _, err := ParseEnvFile([]byte("A=1\nnot a pair\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("bad line: %v", err)
	}
}

func TestVariablesAreReadByPath(t *testing.T) {
	store := map[string]map[string]string{"app/db": {"password": "s3cret"}}
	var read []string
	src := Sources{Var: func(p string) (map[string]string, bool, error) {
		read = append(read, p)
		v, ok := store[p]
		return v, ok, nil
	}}
	got, err := Render(`{{ with nomadVar "app/db" }}pw={{ .password }}{{ end }} other={{ nomadVarExists "app/none" }}`, "", "", src)
	if err != nil || string(got) != "pw=s3cret other=false" || !reflect.DeepEqual(read, []string{"app/db", "app/none"}) {
		t.Fatalf("rendered %q %v, read %v", got, err, read)
	}
	if _, err := Render(`{{ nomadVar "app/none" }}`, "", "", src); err == nil || !strings.Contains(err.Error(), "variable app/none does not exist") {
		t.Fatalf("a missing variable: %v", err)
	}
	if _, err := Render(`{{ nomadVar "app/db" }}`, "", "", Sources{}); err == nil || !strings.Contains(err.Error(), "no variables store") {
		t.Fatalf("no store: %v", err)
	}
}

func TestServicesAreReadByName(t *testing.T) {
	src := Sources{Service: func(name string) ([]*model.ServiceRegistration, error) {
		if name != "web" {
			return nil, nil
		}
		return []*model.ServiceRegistration{{Name: "web", Address: "10.0.0.1", Port: 8080}, {Name: "web", Address: "10.0.0.2", Port: 8081}}, nil
	}}
	got, err := Render(`{{ range nomadService "web" }}server {{ .Address }}:{{ .Port }};{{ end }}|{{ len (nomadService "db") }}`, "", "", src)
	if err != nil || string(got) != "server 10.0.0.1:8080;server 10.0.0.2:8081;|0" {
		t.Fatalf("rendered %q %v", got, err)
	}
	if _, err := Render(`{{ nomadService "web" }}`, "", "", Sources{}); err == nil {
		t.Fatal("rendered a service with no services bucket")
	}
}
