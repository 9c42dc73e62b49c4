package plan

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// testSeed is the seed of a randomized test: SHALE_SEED when set (to replay a run),
// else a random one. It is logged, so a failure names the seed to replay.
func testSeed(t *testing.T) uint64 {
	t.Helper()
	seed := rand.Uint64()
	if s := os.Getenv("SHALE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SHALE_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with SHALE_SEED=%d)", seed, seed)
	return seed
}
