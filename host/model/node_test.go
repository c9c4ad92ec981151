package model

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
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

// TestSameButHeartbeatSeesEveryField: a record differing from another in
// any one field but HeartbeatAt, or in any field of one of its drivers, is
// not the same; differing in HeartbeatAt alone it is. The fields are found
// by reflection, so a field added to Node or DriverInfo and forgotten by
// SameButHeartbeat fails here (as does a field of a kind this test cannot
// vary yet: teach it).
func TestSameButHeartbeatSeesEveryField(t *testing.T) {
	base := func() *Node {
		return &Node{
			ID: "n1", Name: "n1", Datacenter: "dc1", NodePool: "default", Class: "c", Status: NodeStatusReady,
			Eligibility: Eligible, Drain: &DrainStrategy{Deadline: Duration(time.Minute), Started: time.Unix(100, 0)},
			Attributes: map[string]string{"os": "linux"}, Meta: map[string]string{"rack": "r1"},
			Drivers:      map[string]DriverInfo{"mock": {Detected: true, Healthy: true, HealthDesc: "ok", Attributes: map[string]string{"v": "1"}}},
			HostVolumes:  map[string]HostVolume{"data": {Path: "/data"}},
			HostNetworks: map[string]HostNetwork{"lan": {CIDR: "10.0.0.0/8", Address: "10.0.0.1"}},
			HeartbeatAt:  time.Unix(200, 0), HeartbeatTTL: Duration(30 * time.Second), RolloutProtocol: 4, BootID: "b1",
		}
	}
	if !SameButHeartbeat(base(), base()) {
		t.Fatal("two equal records are not the same")
	}
	beat := base()
	beat.HeartbeatAt = beat.HeartbeatAt.Add(time.Second)
	if !SameButHeartbeat(base(), beat) {
		t.Fatal("a record differing in its heartbeat time alone is not the same")
	}
	// A nil and an empty map say the same; a time in another location at
	// the same instant is the same time.
	empty, zoned := base(), base()
	empty.HostVolumes = nil
	noVolumes := base()
	noVolumes.HostVolumes = map[string]HostVolume{}
	zoned.Drain.Started = zoned.Drain.Started.In(time.FixedZone("x", 3600))
	if !SameButHeartbeat(empty, noVolumes) || !SameButHeartbeat(base(), zoned) {
		t.Fatal("a nil map against an empty one, or one instant in two zones, is not the same")
	}
	vary := func(name string, v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Int, reflect.Int64:
			v.SetInt(v.Int() + 1)
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Pointer: // *DrainStrategy: nil against set
			v.SetZero()
		case reflect.Map:
			k := reflect.New(v.Type().Key()).Elem()
			k.SetString("added")
			v.SetMapIndex(k, reflect.New(v.Type().Elem()).Elem())
		default:
			t.Fatalf("field %s: kind %s; teach the test to vary it", name, v.Kind())
		}
	}
	nt := reflect.TypeFor[Node]()
	for i := range nt.NumField() {
		f := nt.Field(i)
		if f.Name == "HeartbeatAt" {
			continue
		}
		n := base()
		vary(f.Name, reflect.ValueOf(n).Elem().Field(i))
		if SameButHeartbeat(base(), n) || SameButHeartbeat(n, base()) {
			t.Errorf("a record differing in %s is the same", f.Name)
		}
	}
	for _, f := range []string{"Deadline", "Started"} { // the drain's own fields
		n := base()
		if f == "Deadline" {
			n.Drain.Deadline++
		} else {
			n.Drain.Started = n.Drain.Started.Add(time.Second)
		}
		if SameButHeartbeat(base(), n) {
			t.Errorf("a record whose drain differs in %s is the same", f)
		}
	}
	dt := reflect.TypeFor[DriverInfo]()
	for i := range dt.NumField() {
		n := base()
		d := n.Drivers["mock"]
		vary("DriverInfo."+dt.Field(i).Name, reflect.ValueOf(&d).Elem().Field(i))
		n.Drivers["mock"] = d
		if SameButHeartbeat(base(), n) {
			t.Errorf("a record whose driver differs in %s is the same", dt.Field(i).Name)
		}
	}
}
