// Package engine is Shale's table API: a DB over one store (and, when configured, the etcd
// catalog that holds each table's published version), tables with versions and time
// travel, appends, deletes and overwrites, and scans with SQL WHERE filters.
//
// Commit and publish: a write commits a new version in the store (manifest.Commit: the
// put-if-absent of the next version is the linearization point, checked against every
// version committed since the write's read version), then publishes it by fast-forward
// (catalog.FastForward). Because versions are linear and each was conflict-checked against
// all earlier ones, publishing version N also publishes every committed version below it,
// and a fast-forward that finds the pointer already at or past N has met its goal
// (invariant 4). Readers open the published version by default; without a catalog they
// open HEAD.
package engine
