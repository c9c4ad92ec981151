package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// checkKeysOracle is checkKeys as it was before the walk became a scanner
// over the bytes: a walk over json.Decoder's tokens, slow (a token, a path
// and a map allocated for every key) but plainly right. The equivalence
// test and FuzzCheckKeysMatchesOracle hold checkKeys to its verdicts.
func checkKeysOracle(data []byte, t reflect.Type) *DecodeError {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	de, _ := walkKeysOracle(dec, t, "")
	return de
}

// walkKeysOracle consumes one value. The bool reports a token error (bad
// syntax), after which the walk gives up without a verdict.
func walkKeysOracle(dec *json.Decoder, t reflect.Type, path string) (*DecodeError, bool) {
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
			if de, bad := walkKeysOracle(dec, elem, joinPath(path, key)); de != nil || bad {
				return de, bad
			}
		}
	case '[':
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for i := 0; dec.More(); i++ {
			if de, bad := walkKeysOracle(dec, elem, path+"["+strconv.Itoa(i)+"]"); de != nil || bad {
				return de, bad
			}
		}
	}
	if _, err := dec.Token(); err != nil { // the closing delimiter
		return nil, true
	}
	return nil, false
}
