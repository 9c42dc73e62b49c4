package fragment

import "testing"

func TestScratchClass(t *testing.T) {
	for _, n := range []int{scratchMinBytes, scratchMinBytes + 1, 100_000, 1 << 20, 1<<20 + 1, 3_000_001, 1 << 30} {
		idx, c := scratchClass(n)
		if c < n || c > n+n/8+1 {
			t.Errorf("scratchClass(%d) = capacity %d: want in [n, n+n/8]", n, c)
		}
		if idx2, c2 := scratchClass(c); idx2 != idx || c2 != c {
			t.Errorf("scratchClass(%d) = (%d, %d), of its capacity (%d, %d): a freed body must return to its class", n, idx, c, idx2, c2)
		}
		b := scratch.Allocate(n)
		if len(b) != n || cap(b) != c {
			t.Errorf("Allocate(%d): len %d cap %d, want cap %d", n, len(b), cap(b), c)
		}
		scratch.Free(b)
	}
}
