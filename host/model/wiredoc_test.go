package model

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestWireFormatDocNamesEveryField keeps docs/wire-format.md in step with
// the Go types: every JSON field of every type reachable from the bucket
// records has a row in its type's section, and every enum value is listed.
func TestWireFormatDocNamesEveryField(t *testing.T) {
	raw, err := os.ReadFile("../../docs/wire-format.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	seen := map[reflect.Type]bool{}
	var visit func(reflect.Type)
	visit = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || typ.PkgPath() != reflect.TypeFor[Job]().PkgPath() || seen[typ] {
			return
		}
		seen[typ] = true
		section := docSection(doc, typ.Name())
		if section == "" {
			t.Errorf("docs/wire-format.md has no section ### `%s`", typ.Name())
			return
		}
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			if !strings.Contains(section, "| `"+name+"` |") {
				t.Errorf("section %s lacks a row for field `%s`", typ.Name(), name)
			}
			visit(f.Type)
		}
	}
	for _, root := range []reflect.Type{reflect.TypeFor[Job](), reflect.TypeFor[Node](), reflect.TypeFor[Allocation](),
		reflect.TypeFor[Deployment](), reflect.TypeFor[DeploymentStatusUpdate](), reflect.TypeFor[Slot](), reflect.TypeFor[LossVerdict](), reflect.TypeFor[ServiceRegistration](), reflect.TypeFor[RolloutSummary]()} {
		visit(root)
	}
	if len(seen) < 20 {
		t.Fatalf("visited only %d types; the walk is broken", len(seen))
	}
	enums := map[string][]string{
		"JobType": strs(JobTypes), "ConstraintOperator": strs(ConstraintOperators), "RestartMode": strs(RestartModes),
		"ReconcileMode": strs(ReconcileModes), "CheckType": strs(CheckTypes), "NetworkMode": strs(NetworkModes), "ChangeMode": strs(ChangeModes), "LifecycleHook": strs(LifecycleHooks), "NodeStatus": strs(NodeStatuses),
		"Eligibility": strs(Eligibilities), "DesiredStatus": strs(DesiredStatuses), "ClientStatus": strs(ClientStatuses),
		"AllocStateField": strs(AllocStateFields), "DeploymentStatus": strs(DeploymentStatuses), "RevertStatus": strs(RevertStatuses),
	}
	for name, values := range enums {
		row := ""
		for _, line := range strings.Split(doc, "\n") {
			if strings.HasPrefix(line, "| `"+name+"` |") {
				row = line
			}
		}
		if row == "" {
			t.Errorf("enum %s is not in the enums table", name)
			continue
		}
		for _, v := range values {
			if !strings.Contains(row, "`"+v+"`") {
				t.Errorf("enum %s: value %q is not documented", name, v)
			}
		}
	}
}

func docSection(doc, typeName string) string {
	_, rest, ok := strings.Cut(doc, "### `"+typeName+"`\n")
	if !ok {
		return ""
	}
	if i := strings.Index(rest, "\n#"); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

func strs[T ~string](vals []T) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = string(v)
	}
	return out
}
