package store_test

import (
	"testing"

	"github.com/shale-db/shale/internal/storetest"
)

// TestConformance runs the store contract over every store kind.
func TestConformance(t *testing.T) {
	for _, k := range storetest.Kinds() {
		t.Run(k.Name, func(t *testing.T) {
			t.Parallel()
			storetest.Conformance(t, k)
		})
	}
}
