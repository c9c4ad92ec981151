// Package lib has a doc that names no page; its rules are in
// spec/reconcile.md and (DESIGN.md, "Rules"), which the tree does not have.
package lib
