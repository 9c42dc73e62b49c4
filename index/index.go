// Package index holds what Shale's scalar indexes share (DESIGN §8): their kinds, where
// their objects live, which column types they support, their errors, and the bridge
// from stored column statistics to filter pruning. The structures are in its
// subpackages: index/btree (sorted value → row address pages and a lookup of per-page
// bounds) and index/zonemap (per-fragment zones of min, max and null count).
//
// An index never decides a query's answer on its own: it names candidate rows (a BTree,
// exactly those whose indexed value satisfies the predicate's condition on its column; a
// ZoneMap, every row of the zones that may match), and the scan evaluates the whole
// predicate on them (invariant 11). Each index records the fragments it covers; a query
// scans the fragments it does not cover, so an index is always valid and at worst
// incomplete.
//
// Layout: every object of an index lives under <table>/_indices/<txn-id>/<index-uuid>/,
// named by the transaction that commits it, so garbage collection can fence an index
// build that did not commit before deleting its files (invariant 15).
package index

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/shale-db/shale/engine/filter"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
)

// Kinds of index (manifest.Index.Kind).
const (
	KindBTree   = "btree"
	KindZoneMap = "zonemap"
)

// Errors.
var (
	// ErrUnsupportedType: the column's type cannot be indexed by the kind asked for.
	ErrUnsupportedType = errors.New("column type cannot be indexed")
	// ErrStalePreparation: an index prepared against a read version is invalid at the
	// version it would commit on (a covered fragment was removed or rewritten, the schema
	// changed, or an index of the same name was replaced meanwhile). Prepare it again.
	// Matched with errors.Is, never by message text.
	ErrStalePreparation = errors.New("stale index preparation; prepare again")
	// ErrNoProgress: an index preparation made no storage progress for its idle timeout
	// and was cancelled.
	ErrNoProgress = errors.New("index preparation made no progress")
)

// Dir is the prefix (no trailing slash) under which the index uuid, committed by
// transaction txnID, writes its objects: <table>/_indices/<txnID>/<uuid>.
func Dir(table, txnID, uuid string) string {
	return manifest.IndicesDir(table) + "/" + txnID + "/" + uuid
}

// Supported reports whether kind can index a column of type t: integers, floats,
// strings, binaries, booleans, dates and timestamps. Errors: ErrUnsupportedType naming
// the type.
func Supported(kind string, t arrow.DataType) error {
	switch kind {
	case KindBTree, KindZoneMap:
	default:
		return fmt.Errorf("unknown index kind %q (want %s or %s)", kind, KindBTree, KindZoneMap)
	}
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT32, arrow.FLOAT64,
		arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY,
		arrow.BOOL, arrow.DATE32, arrow.DATE64, arrow.TIMESTAMP:
		return nil
	}
	return fmt.Errorf("%w: %s indexes integer, float, string, binary, boolean, date and timestamp columns, not %s", ErrUnsupportedType, kind, t)
}

// FilterStats adapts a stored column statistic to filter pruning (filter.ColumnStats).
func FilterStats(s manifest.ColumnStats) filter.ColumnStats {
	cs := filter.ColumnStats{NullCount: s.NullCount}
	lo, okLo := statValue(s.Min)
	hi, okHi := statValue(s.Max)
	if s.HasMinMax && okLo && okHi {
		cs.HasMinMax, cs.Min, cs.Max = true, lo, hi
	}
	return cs
}

func statValue(v fragment.Value) (any, bool) {
	switch v.Kind {
	case fragment.KindInt:
		return v.Int, true
	case fragment.KindUint:
		return v.Uint, true
	case fragment.KindFloat:
		return v.Float, true
	case fragment.KindString, fragment.KindBinary: // binary: the raw bytes, compared bytewise
		return v.Str, true
	case fragment.KindBool:
		return v.Bool, true
	}
	return nil, false
}

// OneColumn is a filter.StatsFunc that knows one column's statistics.
func OneColumn(column string, s filter.ColumnStats) filter.StatsFunc {
	return func(c string) (filter.ColumnStats, bool) {
		if c == column {
			return s, true
		}
		return filter.ColumnStats{}, false
	}
}
