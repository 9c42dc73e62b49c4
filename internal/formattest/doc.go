// Package formattest holds tests only: docs/format.md, the description of what Shale keeps
// in a store and in etcd, checked against the Go types that encode it and against the
// objects a real table writes.
package formattest
