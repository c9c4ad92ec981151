package model

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
)

// Decode parses a document that decodes once (decodeOnce) and falls back to
// json.Decoder only to describe an error (decode.go). Both ways must give
// the same verdict, the same error and the same value on every document:
// the key check's generated documents for each record type, and each of
// them with white space after it, a second value after it, cut in half,
// and with a field no type has.
func TestDecodeAgreesWithTheStreamDecoder(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	types := checkedTypes[:7] // *Job to *RolloutSummary: the records agents decode
	decoded, refused := 0, 0
	for i := range 4000 {
		typ := types[i%len(types)]
		doc := genDoc(r, typ)
		variants := [][]byte{doc, append(bytes.Clone(doc), " \n\t"...), append(bytes.Clone(doc), `{}`...), doc[:len(doc)/2]}
		if at := bytes.IndexByte(doc, '{'); at >= 0 {
			variants = append(variants, append(append(bytes.Clone(doc[:at+1]), `"zz_no_such_field":1,`...), doc[at+1:]...))
		}
		for _, d := range variants {
			got, want := reflect.New(typ.Elem()), reflect.New(typ.Elem())
			gotErr := Decode(d, got.Interface())
			wantErr := decodeByStream(d, want.Interface())
			if (gotErr == nil) != (wantErr == nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
				t.Fatalf("%s %q:\nDecode       %v\nthe decoder  %v", typ, d, gotErr, wantErr)
			}
			if gotErr != nil {
				refused++
				continue
			}
			decoded++
			if !reflect.DeepEqual(got.Interface(), want.Interface()) {
				t.Fatalf("%s %q: Decode gave\n%+v\nthe decoder\n%+v", typ, d, got.Elem().Interface(), want.Elem().Interface())
			}
		}
	}
	// Control: both ways were taken, many times.
	if decoded < 500 || refused < 500 {
		t.Fatalf("control: %d documents decoded and %d refused; want at least 500 of each", decoded, refused)
	}
	t.Logf("%d documents decoded, %d refused, alike", decoded, refused)
}

// decodeByStream is Decode as it was before decodeOnce: the key check, then
// json.Decoder.
func decodeByStream(data []byte, v any) error {
	if de := checkKeys(data, reflect.TypeOf(v)); de != nil {
		return de
	}
	return decodeStream(data, v)
}

// BenchmarkDecode measures Decode against decodeByStream (its way before
// decodeOnce) on the two records every agent decodes most: a rollout
// summary listing 200 waiters and a deployment record.
func BenchmarkDecode(b *testing.B) {
	docs := []struct {
		name string
		new  func() any
		doc  []byte
	}{
		{"summary200", func() any { return new(RolloutSummary) }, benchSummary(b)},
		{"deployment", func() any { return new(Deployment) }, benchDeployment(b)},
	}
	for _, d := range docs {
		for _, impl := range []struct {
			name   string
			decode func([]byte, any) error
		}{{"stream", decodeByStream}, {"once", Decode}} {
			b.Run(d.name+"/"+impl.name, func(b *testing.B) {
				b.SetBytes(int64(len(d.doc)))
				b.ReportAllocs()
				for b.Loop() {
					if err := impl.decode(d.doc, d.new()); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
