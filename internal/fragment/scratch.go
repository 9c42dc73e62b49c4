package fragment

import (
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Transient decode memory. A filtered scan decodes every column of a batch it cannot prune
// (about 3 MB a batch of the flights data, 138 MB a scan) and keeps only the rows the
// filter selects, copied out; decoding each batch into fresh Go memory made the garbage
// collector and the zeroing of new spans a visible share of such a scan. Batch.
// DecodeTransient decodes into bodies from a pool instead; the body returns to the pool
// when the last array referencing it is released (arrow's reference counts: the body is a
// memory.Buffer with scratchAllocator as its allocator, and every array buffer is a slice
// that retains it).

// scratchMinBytes: smaller bodies are plain allocations (not worth a pool).
const scratchMinBytes = 64 << 10

// scratchSubClasses size classes per power of two (bodies are rounded up by at most 1/8).
const scratchSubClasses = 8

// scratchPools[k*scratchSubClasses+j] holds bodies of capacity 2^k·(1+j/8), *[]byte.
var scratchPools [64 * scratchSubClasses]sync.Pool

// scratchClass is the pool index and capacity of the smallest class holding n bytes.
func scratchClass(n int) (int, int) {
	k := bits.Len(uint(n-1)) - 1 // 2^k < n ≤ 2^(k+1)
	step := 1 << k / scratchSubClasses
	j := (n - 1<<k + step - 1) / step // 1..8
	return k*scratchSubClasses + j - 1, 1<<k + j*step
}

// scratchAllocator is the memory.Allocator of transient bodies: Allocate takes a body from
// the pool (its bytes are not zeroed), Free puts it back.
type scratchAllocator struct{}

var scratch memory.Allocator = scratchAllocator{}

func (scratchAllocator) Allocate(n int) []byte {
	if n < scratchMinBytes {
		return make([]byte, n)
	}
	idx, c := scratchClass(n)
	if p, ok := scratchPools[idx].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, c)
}

func (a scratchAllocator) Reallocate(n int, b []byte) []byte {
	if n <= cap(b) {
		return b[:n]
	}
	nb := a.Allocate(n)
	copy(nb, b)
	a.Free(b)
	return nb
}

func (scratchAllocator) Free(b []byte) {
	c := cap(b)
	if c < scratchMinBytes {
		return
	}
	idx, cc := scratchClass(c)
	if cc != c { // not one of ours (a class capacity): leave it to the collector
		return
	}
	b = b[:c]
	scratchPools[idx].Put(&b)
}
