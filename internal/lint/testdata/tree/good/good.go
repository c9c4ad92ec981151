// Package good names its page: docs/lib.md.
package good

// f cites docs/lib.md, which is there.
func f() {}
