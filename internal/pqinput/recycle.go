package pqinput

import (
	"math/bits"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// recycler is a memory.Allocator that keeps the buffers freed to it and hands them out
// again, zeroed, instead of leaving them to the garbage collector. An import reads the
// same buffer sizes batch after batch (values, indices, levels, expanded strings) and
// releases each batch once it is encoded; with Go's allocator every batch took fresh,
// zeroed memory (about 285 MB per 3M-row flights import): garbage collections, zeroing
// and, after the heap was returned to the OS, page faults.
//
// Buffers of 4 KiB to 64 MiB are rounded up to a power of two (others come from make and
// are not kept), 64-byte aligned as arrow-go requires, and at most maxHeld
// bytes are kept. Free must be called only once a buffer is no longer used (arrow-go's
// reference counting does so when the last reference is released). Safe for concurrent
// use.
type recycler struct {
	mu      sync.Mutex
	free    [maxShift + 1][][]byte // by class: 1<<shift bytes
	held    int
	maxHeld int
	// poison fills freed buffers with poisonByte (tests: a use after Free reads garbage).
	poison bool
}

const (
	minShift   = 12 // 4 KiB
	maxShift   = 26 // 64 MiB
	poisonByte = 0xA5
	alignment  = 64
)

// newRecycler returns a recycler keeping at most maxHeld bytes of freed buffers.
func newRecycler(maxHeld int) *recycler { return &recycler{maxHeld: maxHeld} }

var _ memory.Allocator = (*recycler)(nil)

// class returns the shift of the smallest class holding size bytes, or -1 when size is
// outside the classes (smaller buffers are not worth keeping: a 4 KiB class for a few
// bytes would waste more than it saves).
func class(size int) int {
	if size < 1<<minShift || size > 1<<maxShift {
		return -1
	}
	return bits.Len(uint(size - 1))
}

// Allocate returns size zeroed bytes.
func (r *recycler) Allocate(size int) []byte { return r.allocate(size, true) }

// allocate returns size bytes, zeroed if zero (a new buffer always is).
func (r *recycler) allocate(size int, zero bool) []byte {
	c := class(size)
	if c < 0 {
		return alignedMake(size, size)
	}
	r.mu.Lock()
	if l := r.free[c]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		r.free[c] = l[:len(l)-1]
		r.held -= cap(b)
		r.mu.Unlock()
		b = b[:size]
		if zero {
			clear(b)
		}
		return b
	}
	r.mu.Unlock()
	return alignedMake(size, 1<<c)
}

// Reallocate returns b resized to size bytes, its first min(len(b), size) bytes kept and
// the rest zeroed.
func (r *recycler) Reallocate(size int, b []byte) []byte {
	if size <= cap(b) {
		if size > len(b) {
			clear(b[len(b):size])
		}
		return b[:size]
	}
	nb := r.Allocate(size)
	copy(nb, b)
	r.Free(b)
	return nb
}

// Free keeps b for reuse when it is one of the classes and there is room.
func (r *recycler) Free(b []byte) {
	n := cap(b)
	if n < 1<<minShift || n > 1<<maxShift || n&(n-1) != 0 {
		return
	}
	b = b[:n]
	if uintptr(unsafe.Pointer(unsafe.SliceData(b)))%alignment != 0 {
		return
	}
	if r.poison {
		for i := range b {
			b[i] = poisonByte
		}
	}
	c := bits.Len(uint(n - 1))
	r.mu.Lock()
	if r.held+n <= r.maxHeld {
		r.free[c] = append(r.free[c], b)
		r.held += n
	}
	r.mu.Unlock()
}

// alignedMake returns size zeroed bytes with capacity capacity, 64-byte aligned.
func alignedMake(size, capacity int) []byte {
	b := make([]byte, capacity)
	if uintptr(unsafe.Pointer(unsafe.SliceData(b)))%alignment == 0 {
		return b[:size]
	}
	b = make([]byte, capacity+alignment)
	shift := int(alignment - uintptr(unsafe.Pointer(unsafe.SliceData(b)))%alignment)
	return b[shift : shift+size : shift+capacity]
}
