package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// checkKeys walks a JSON document alongside the Go type it decodes into and
// refuses what encoding/json would silently accept: a struct field spelled in
// another case ("STOP" for "stop": encoding/json matches case-insensitively)
// and a key repeated in one object (encoding/json keeps the last). Either would
// let a declaration mean something other than what a reader of its bytes sees
// ({"stop":false,"STOP":true} stops a job). Syntax errors are left to the
// decoder, which describes them better.
func checkKeys(data []byte, t reflect.Type) *DecodeError {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	de, _ := walkKeys(dec, t, "")
	return de
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// walkKeys consumes one value. The bool reports a token error (bad syntax),
// after which the walk gives up without a verdict.
func walkKeys(dec *json.Decoder, t reflect.Type, path string) (*DecodeError, bool) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && reflect.PointerTo(t).Implements(unmarshalerType) {
		t = nil // decodes itself (enums, durations, times): only check shape
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, true
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil, false
	}
	switch d {
	case '{':
		// Struct keys are compared folded (as encoding/json matches them);
		// map keys, which are data, exactly.
		isStruct := t != nil && t.Kind() == reflect.Struct
		seen := map[string]string{} // compared key → key as written
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, true
			}
			key, _ := kt.(string)
			folded := key
			if isStruct {
				folded = strings.ToLower(key)
			}
			if prev, dup := seen[folded]; dup {
				return &DecodeError{Path: path, Reason: fmt.Sprintf("key %q repeats %q in one object", key, prev)}, false
			}
			seen[folded] = key
			var elem reflect.Type
			if t != nil {
				switch t.Kind() {
				case reflect.Struct:
					ft, f, exact, ok := jsonField(t, key)
					if ok && !exact {
						return &DecodeError{Path: joinPath(path, key), Reason: fmt.Sprintf("field %q must be spelled %q", key, f)}, false
					}
					elem = ft
				case reflect.Map:
					elem = t.Elem()
				}
			}
			if de, bad := walkKeys(dec, elem, joinPath(path, key)); de != nil || bad {
				return de, bad
			}
		}
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if de, bad := walkKeys(dec, elem, path+"["+strconv.Itoa(i)+"]"); de != nil || bad {
				return de, bad
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return nil, true
	}
	return nil, false
}

// jsonField finds the struct field of t that encoding/json decodes key into
// (it matches names case-insensitively): its type, its JSON name, and
// whether key spells that name exactly.
func jsonField(t reflect.Type, key string) (ft reflect.Type, name string, exact, ok bool) {
	for _, f := range fieldsOf(t) {
		if f.tag == key {
			return f.typ, f.tag, true, true
		}
		if strings.EqualFold(f.tag, key) {
			ft, name, ok = f.typ, f.tag, true
		}
	}
	return ft, name, false, ok
}

// jsonName is one exported field of a struct type: its JSON name and type.
type jsonName struct {
	tag string
	typ reflect.Type
}

// fieldNames caches fieldsOf per struct type: every decode of a record
// asks for the same few types, and reading their fields and tags by
// reflection for each key of each record was most of a decode's cost (a
// thousand agents decoding each other's node records).
var fieldNames sync.Map // reflect.Type → []jsonName

// fieldsOf is t's exported fields in declaration order with their JSON
// names (the tag's name, else the field's), leaving out those tagged "-".
func fieldsOf(t reflect.Type) []jsonName {
	if v, ok := fieldNames.Load(t); ok {
		return v.([]jsonName)
	}
	var out []jsonName
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		out = append(out, jsonName{tag: tag, typ: f.Type})
	}
	v, _ := fieldNames.LoadOrStore(t, out)
	return v.([]jsonName)
}
