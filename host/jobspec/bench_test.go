package jobspec

import (
	"os"
	"testing"
)

// The same job, as HCL and as its canonical JSON: the JSON path is the one
// every agent takes on each KV update, the HCL path the one the CLI takes.
func benchInputs(b *testing.B) (hclSrc, jsonSrc []byte) {
	hclSrc, err := os.ReadFile("../../examples/jobs/web.hcl")
	if err != nil {
		b.Fatal(err)
	}
	j, err := ParseHCL("web.hcl", hclSrc)
	if err != nil {
		b.Fatal(err)
	}
	jsonSrc, err = Canonical(j)
	if err != nil {
		b.Fatal(err)
	}
	return hclSrc, jsonSrc
}

func BenchmarkParseHCL(b *testing.B) {
	src, _ := benchInputs(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseHCL("web.hcl", src); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseJSON(b *testing.B) {
	_, src := benchInputs(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseJSON("web.json", src); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonical(b *testing.B) {
	_, src := benchInputs(b)
	j, err := ParseJSON("web.json", src)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonical(j); err != nil {
			b.Fatal(err)
		}
	}
}
