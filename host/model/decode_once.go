//go:build go1.27

package model

import (
	"encoding/json"
	jsonv2 "encoding/json/v2"
)

// decodeOnce decodes data into v in one parse, as decodeStream's
// json.Decoder would, and reports whether it did. The decoder reads the
// whole value into a buffer of its own, checking its syntax, and then
// unmarshals that copy: two passes over the bytes and a copy, a quarter
// of a rollout summary's decode (which every agent makes for every
// summary) and two fifths of a deployment record's (BenchmarkDecode).
// strictOptions are the decoder's own (encoding/json's semantics, unknown
// fields refused), and Unmarshal refuses anything after the value but
// white space, as decodeStream's check for the end does. Its error is not
// kept: Decode describes a failure through decodeStream.
func decodeOnce(data []byte, v any) bool {
	return jsonv2.Unmarshal(data, v, strictOptions) == nil
}

// strictOptions are what json.NewDecoder with DisallowUnknownFields decodes
// with (encoding/json's v2_stream.go).
var strictOptions = jsonv2.JoinOptions(json.DefaultOptionsV1(), jsonv2.RejectUnknownMembers(true))
