// Package good names its page: docs/lib.md.
package good

// f cites docs/lib.md, which is there, and examples/x/README.md, a path
// this check does not read as a citation of the root.
func f() {}
