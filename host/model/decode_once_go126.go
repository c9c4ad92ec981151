//go:build !go1.27

package model

// decodeOnce decodes nothing before Go 1.27, where encoding/json/v2 is an
// experiment: every document goes through decodeStream.
func decodeOnce(data []byte, v any) bool { return false }
