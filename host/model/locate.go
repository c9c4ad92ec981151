package model

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// locate finds the path of the first value in data that does not decode
// into a value of type t, e.g. "groups[1].tasks[0].kill_timeout". It is the
// slow path of Decode, run only after a failure, so that every error names
// its field with indices, including errors encoding/json itself reports
// without a path (such as a time.Time that does not parse).
func locate(data []byte, t reflect.Type) (path string, err error) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if e := strictUnmarshal(data, reflect.New(t).Interface()); e == nil {
		return "", nil
	} else {
		err = e
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return "", err // a leaf with its own decoding: the path ends here
	}
	switch t.Kind() {
	case reflect.Struct:
		var fields map[string]json.RawMessage
		if json.Unmarshal(data, &fields) != nil {
			return "", err
		}
		for _, name := range sortedKeys(fields) {
			ft, _, _, ok := jsonField(t, name)
			if !ok {
				return "", err // an unknown field: the path is its parent's
			}
			if sub, serr := locate(fields[name], ft); serr != nil {
				return joinPath(name, sub), serr
			}
		}
	case reflect.Slice, reflect.Array:
		var elems []json.RawMessage
		if json.Unmarshal(data, &elems) != nil {
			return "", err
		}
		for i, e := range elems {
			if sub, serr := locate(e, t.Elem()); serr != nil {
				return "[" + strconv.Itoa(i) + "]" + dot(sub), serr
			}
		}
	case reflect.Map:
		var elems map[string]json.RawMessage
		if json.Unmarshal(data, &elems) != nil {
			return "", err
		}
		for _, k := range sortedKeys(elems) {
			if sub, serr := locate(elems[k], t.Elem()); serr != nil {
				return joinPath(k, sub), serr
			}
		}
	}
	return "", err
}

func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// joinPath appends sub (a key, or an index path such as "[2].x") to the
// path name; either may be empty.
func joinPath(name, sub string) string {
	switch {
	case sub == "":
		return name
	case name == "" || strings.HasPrefix(sub, "["):
		return name + sub
	}
	return name + "." + sub
}

func dot(sub string) string {
	if sub == "" || strings.HasPrefix(sub, "[") {
		return sub
	}
	return "." + sub
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
