package driverpb

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
)

var update = flag.Bool("update", false, "record new protocol elements in testdata/driver.v1.txt (never removes or changes one)")

const releasedFile = "testdata/driver.v1.txt"

// protocolLines renders every element of the compiled driver.proto that a
// peer depends on, one per line: each RPC with its request and response
// types and streaming, and each message field with its number, name, kind
// and cardinality. Two builds speak the same protocol when their lines
// agree; a build that only adds lines still speaks to an older one.
func protocolLines(fd protoreflect.FileDescriptor) []string {
	var lines []string
	lines = append(lines, "package "+string(fd.Package()))
	svcs := fd.Services()
	for i := range svcs.Len() {
		s := svcs.Get(i)
		ms := s.Methods()
		for j := range ms.Len() {
			m := ms.Get(j)
			stream := ""
			if m.IsStreamingClient() {
				stream += " client-stream"
			}
			if m.IsStreamingServer() {
				stream += " server-stream"
			}
			lines = append(lines, fmt.Sprintf("rpc %s.%s(%s) returns (%s)%s",
				s.Name(), m.Name(), m.Input().FullName(), m.Output().FullName(), stream))
		}
	}
	var walk func(protoreflect.MessageDescriptors)
	walk = func(msgs protoreflect.MessageDescriptors) {
		for i := range msgs.Len() {
			md := msgs.Get(i)
			fs := md.Fields()
			lines = append(lines, fmt.Sprintf("message %s", md.FullName()))
			for j := range fs.Len() {
				f := fs.Get(j)
				kind := f.Kind().String()
				switch {
				case f.IsMap():
					kind = fmt.Sprintf("map<%s, %s>", typeName(f.MapKey()), typeName(f.MapValue()))
				case f.Message() != nil || f.Enum() != nil:
					kind = typeName(f)
				}
				card := ""
				if f.IsList() {
					card = "repeated "
				}
				lines = append(lines, fmt.Sprintf("field %s %d %s %s%s", md.FullName(), f.Number(), f.Name(), card, kind))
			}
			walk(md.Messages())
		}
	}
	walk(fd.Messages())
	slices.Sort(lines)
	return lines
}

func typeName(f protoreflect.FieldDescriptor) string {
	switch {
	case f.Message() != nil:
		return string(f.Message().FullName())
	case f.Enum() != nil:
		return string(f.Enum().FullName())
	}
	return f.Kind().String()
}

// TestTheReleasedProtocolIsUnchanged fails when the compiled driver.proto
// loses or changes anything recorded in testdata/driver.v1.txt (a field's
// number, name, type or cardinality; an RPC's types or streaming): such a
// change breaks every plugin built against protocol version 1 and needs a
// new protocol version instead (docs/drivers.md, "Protocol versions").
// Additions are compatible; the test asks for them to be recorded with
// -update, which refuses to drop or change a recorded line.
func TestTheReleasedProtocolIsUnchanged(t *testing.T) {
	current := protocolLines(File_driver_proto)
	data, err := os.ReadFile(releasedFile)
	if err != nil {
		t.Fatal(err)
	}
	var released []string
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			released = append(released, l)
		}
	}
	var broken, added []string
	for _, l := range released {
		if !slices.Contains(current, l) {
			broken = append(broken, l)
		}
	}
	for _, l := range current {
		if !slices.Contains(released, l) {
			added = append(added, l)
		}
	}
	if len(broken) > 0 {
		t.Fatalf("driver.proto breaks protocol version 1; these released elements are gone or changed:\n  %s",
			strings.Join(broken, "\n  "))
	}
	if len(added) == 0 {
		return
	}
	if !*update {
		t.Fatalf("driver.proto adds to the protocol; record the additions with go test ./sdk/driver/proto -update:\n  %s",
			strings.Join(added, "\n  "))
	}
	header := "# The released driver plugin protocol, version 1: every line must stay true\n" +
		"# (TestTheReleasedProtocolIsUnchanged). Lines are only ever added, with -update.\n"
	all := append(slices.Clone(released), added...)
	slices.Sort(all)
	if err := os.WriteFile(releasedFile, []byte(header+strings.Join(all, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTheCheckSeesABreakingChange is the control: the rendering reacts to
// each kind of breaking change, so an unchanged file cannot pass by
// rendering nothing.
func TestTheCheckSeesABreakingChange(t *testing.T) {
	lines := protocolLines(File_driver_proto)
	for _, want := range []string{
		"rpc Driver.WaitTask(hivelet.driver.v1.WaitTaskRequest) returns (hivelet.driver.v1.ExitResult) server-stream",
		"field hivelet.driver.v1.TaskConfig 7 config_json bytes",
		"field hivelet.driver.v1.TaskStatus 7 attributes map<string, string>",
		"field hivelet.driver.v1.StopTaskRequest 2 timeout google.protobuf.Duration",
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("the rendering lacks %q; it cannot see a change to it", want)
		}
	}
	if len(lines) < 100 {
		t.Errorf("only %d lines rendered", len(lines))
	}
}

// TestTheGeneratedCodeMatchesDriverProto catches a driver.proto edited
// without regenerating (the check above reads the generated code): every
// message of the .proto has, by name and number, exactly the fields the
// generated descriptor has.
func TestTheGeneratedCodeMatchesDriverProto(t *testing.T) {
	src, err := os.ReadFile("driver.proto")
	if err != nil {
		t.Fatal(err)
	}
	// driver.proto declares no nested messages, so a message body holds no
	// braces.
	msgRE := regexp.MustCompile(`(?m)^message (\w+) \{([^}]*)\}`)
	fieldRE := regexp.MustCompile(`(\w+) = (\d+);`)
	inSource := map[string][]string{}
	for _, m := range msgRE.FindAllStringSubmatch(string(src), -1) {
		fields := []string{}
		for _, f := range fieldRE.FindAllStringSubmatch(m[2], -1) {
			fields = append(fields, f[1]+"="+f[2])
		}
		slices.Sort(fields)
		inSource[m[1]] = fields
	}
	msgs := File_driver_proto.Messages()
	if len(inSource) != msgs.Len() {
		t.Errorf("driver.proto declares %d messages, the generated code %d", len(inSource), msgs.Len())
	}
	for i := range msgs.Len() {
		md := msgs.Get(i)
		fields := []string{}
		for j := range md.Fields().Len() {
			f := md.Fields().Get(j)
			fields = append(fields, fmt.Sprintf("%s=%d", f.Name(), f.Number()))
		}
		slices.Sort(fields)
		if got := inSource[string(md.Name())]; !slices.Equal(got, fields) {
			t.Errorf("message %s: driver.proto has %v, the generated code %v; run go generate ./sdk/driver/proto/", md.Name(), got, fields)
		}
	}
}
