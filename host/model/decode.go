package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
)

// DecodeError is a decoding failure with the path of the offending field.
type DecodeError struct {
	Path   string // dotted JSON path, e.g. "groups.update.max_parallel"; "" for the document
	Offset int64  // byte offset in the input, when known
	Reason string
}

func (e *DecodeError) Error() string {
	if e.Path == "" {
		return e.Reason
	}
	return e.Path + ": " + e.Reason
}

// Decode strictly decodes one JSON document into v: unknown fields, fields
// spelled in another case, keys repeated in one object, unknown enum values,
// wrong types and trailing data all fail the whole document with a
// *DecodeError naming the field.
func Decode(data []byte, v any) error {
	if de := checkKeys(data, reflect.TypeOf(v)); de != nil {
		return de
	}
	// A document that decodes is parsed once (decodeOnce); json.Decoder
	// (decodeStream) first reads the whole value into its own buffer,
	// checking its syntax, and then unmarshals that copy.
	if decodeOnce(data, v) {
		return nil
	}
	// A document that does not decode is decoded again the way its errors
	// have always been described, into a zero value (the first attempt may
	// have filled part of v; the error names the same field either way).
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv.Elem().SetZero()
	}
	return decodeStream(data, v)
}

// decodeStream decodes data into v through json.Decoder and describes its
// error, if any, as a *DecodeError (Decode's slow path, and its reference
// in the tests).
func decodeStream(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		de := describe(err)
		var se *json.SyntaxError
		if !errors.As(err, &se) {
			// Name the field with its indices, whatever kind of error it was,
			// and give that field's own reason: encoding/json reports the
			// first error in document order, locate the first field in key
			// order, and with two bad fields the path would name one and the
			// reason the other.
			if path, lerr := locate(data, reflect.TypeOf(v)); path != "" {
				if lerr != nil {
					de = describe(lerr)
				}
				de.Path = path
			}
		}
		return de
	}
	if _, err := dec.Token(); err != io.EOF {
		return &DecodeError{Offset: dec.InputOffset(), Reason: "unexpected data after the JSON document"}
	}
	return nil
}

// DecodeJob strictly decodes a job from its JSON form.
func DecodeJob(data []byte) (*Job, error) {
	var j Job
	if err := Decode(data, &j); err != nil {
		return nil, fmt.Errorf("decoding job: %w", err)
	}
	return &j, nil
}

func describe(err error) *DecodeError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return &DecodeError{Path: te.Field, Offset: te.Offset, Reason: fmt.Sprintf("cannot use %s as %s", te.Value, te.Type)}
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &DecodeError{Offset: se.Offset, Reason: fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)}
	}
	// encoding/json reports unknown fields only as text: `json: unknown field "x"`.
	msg := err.Error()
	if name, ok := cutPrefix(msg, "json: unknown field "); ok {
		return &DecodeError{Reason: "unknown field " + name}
	}
	if err == io.EOF {
		return &DecodeError{Reason: "empty document"}
	}
	return &DecodeError{Reason: msg}
}

func cutPrefix(s, p string) (string, bool) {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):], true
	}
	return "", false
}
