package benchmarks

import (
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// flightsPath finds the flights data: $SHALE_BENCH_DATA, the repo's testdata, or the
// shared copy. "" when none exists.
func flightsPath() string {
	for _, p := range []string{os.Getenv("SHALE_BENCH_DATA"), "../testdata/flights-3m.parquet", "../../shared/data/flights-3m.parquet", "/work/shared/data/flights-3m.parquet"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

func recordsEqual(a, b arrow.RecordBatch) bool {
	if a.NumCols() != b.NumCols() || a.NumRows() != b.NumRows() {
		return false
	}
	for i := range a.Columns() {
		if !array.Equal(a.Column(i), b.Column(i)) {
			return false
		}
	}
	return true
}
