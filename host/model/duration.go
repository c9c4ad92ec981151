package model

import (
	"encoding/json"
	"reflect"
	"time"
)

// Duration is a time.Duration whose JSON form is Go's duration text ("10s",
// "1m30s"), so job JSON and fixtures stay readable. Numbers are refused: a bare
// 10 is ambiguous between seconds and nanoseconds.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return &json.UnmarshalTypeError{Value: "non-string " + string(b) + ` (durations are strings such as "10s")`, Type: reflect.TypeFor[Duration]()}
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return &json.UnmarshalTypeError{Value: "bad duration " + s, Type: reflect.TypeFor[Duration]()}
	}
	*d = Duration(v)
	return nil
}
