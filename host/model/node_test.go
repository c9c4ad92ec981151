package model

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestADriverDescriptionIsWrittenAsDescriptionAndReadUnderEitherName: a
// node record writes a driver's description as "description" (the SDK's
// name), and a record persisted before, naming it "health_description",
// still decodes to the same value. Giving both, an unknown key or a key in
// another case is refused, as everywhere in a record.
func TestADriverDescriptionIsWrittenAsDescriptionAndReadUnderEitherName(t *testing.T) {
	n := Node{ID: "n1", Status: NodeStatusReady, Eligibility: Eligible, Drivers: map[string]DriverInfo{"exec": {Detected: true, Healthy: false, HealthDesc: "plugin exited", Attributes: map[string]string{"v": "1"}}}}
	b, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"description":"plugin exited"`) || strings.Contains(string(b), "health_description") {
		t.Fatalf("written as %s, want the description under \"description\" only", b)
	}
	var back Node
	if err := Decode(b, &back); err != nil || back.Drivers["exec"].HealthDesc != "plugin exited" || back.Drivers["exec"].Attributes["v"] != "1" || !back.Drivers["exec"].Detected {
		t.Fatalf("round trip: %+v, %v", back.Drivers, err)
	}
	old := `{"id":"n1","status":"ready","eligibility":"eligible","drivers":{"exec":{"detected":true,"healthy":true,"health_description":"healthy (old agent)"}}}`
	var fromOld Node
	if err := Decode([]byte(old), &fromOld); err != nil || fromOld.Drivers["exec"].HealthDesc != "healthy (old agent)" || !fromOld.Drivers["exec"].Healthy {
		t.Fatalf("a record of an older agent: %+v, %v", fromOld.Drivers, err)
	}
	for _, c := range []struct{ name, doc, want string }{
		{"both names", `{"id":"n1","status":"ready","eligibility":"eligible","drivers":{"exec":{"detected":true,"healthy":true,"description":"a","health_description":"b"}}}`, "give one of the two"},
		{"unknown key", `{"id":"n1","status":"ready","eligibility":"eligible","drivers":{"exec":{"detected":true,"healthy":true,"descripton":"a"}}}`, `unknown field "descripton"`},
		{"another case", `{"id":"n1","status":"ready","eligibility":"eligible","drivers":{"exec":{"detected":true,"healthy":true,"Description":"a"}}}`, `must be spelled "description"`},
		{"repeated key", `{"id":"n1","status":"ready","eligibility":"eligible","drivers":{"exec":{"detected":true,"detected":false,"healthy":true}}}`, `key "detected" repeats`},
		{"wrong type", `{"id":"n1","status":"ready","eligibility":"eligible","drivers":{"exec":{"detected":"yes","healthy":true}}}`, "cannot use string as bool"},
	} {
		var got Node
		err := Decode([]byte(c.doc), &got)
		var de *DecodeError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "drivers.exec") {
			t.Errorf("%s: decoded %+v, %v; want a *DecodeError at drivers.exec saying %q", c.name, got.Drivers, err, c.want)
		}
	}
}
