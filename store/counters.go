package store

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
)

// Op names one kind of store request. Counters are kept per Op.
type Op string

// The request kinds a Store counts. A retried request counts once per attempt; a
// put-if-absent that finds the key taken also counts the head (and get) of its read-back.
const (
	OpGet         Op = "get"           // whole-object read
	OpGetRange    Op = "get_range"     // byte-range read
	OpHead        Op = "head"          // attributes
	OpPut         Op = "put"           // unconditional write
	OpPutIfAbsent Op = "put_if_absent" // conditional create
	OpList        Op = "list"          // one page of a listing
	OpDelete      Op = "delete"

	// OpOpen names Open's own failures in an *Error; it is not a counted request.
	OpOpen Op = "open"
)

var allOpsArray = [...]Op{OpGet, OpGetRange, OpHead, OpPut, OpPutIfAbsent, OpList, OpDelete}

var allOps = allOpsArray[:]

// Counters counts requests per Op and bytes moved. Safe for concurrent use.
type Counters struct {
	reqs         [len(allOpsArray)]atomic.Int64
	bytesRead    atomic.Int64
	bytesWritten atomic.Int64
}

func opIndex(op Op) int {
	for i, o := range allOps {
		if o == op {
			return i
		}
	}
	panic("objstore: unknown op " + string(op))
}

func (c *Counters) add(op Op)     { c.reqs[opIndex(op)].Add(1) }
func (c *Counters) read(n int64)  { c.bytesRead.Add(n) }
func (c *Counters) wrote(n int64) { c.bytesWritten.Add(n) }

// Snapshot returns a point-in-time copy of the counts.
func (c *Counters) Snapshot() Requests { return c.snapshot() }

// reset zeroes the counters (Open uses it after its probe, so a new store starts at zero).
func (c *Counters) reset() {
	for i := range c.reqs {
		c.reqs[i].Store(0)
	}
	c.bytesRead.Store(0)
	c.bytesWritten.Store(0)
}

func (c *Counters) snapshot() Requests {
	r := Requests{ByOp: map[Op]int64{}}
	for i, o := range allOps {
		if n := c.reqs[i].Load(); n != 0 {
			r.ByOp[o] = n
		}
	}
	r.BytesRead = c.bytesRead.Load()
	r.BytesWritten = c.bytesWritten.Load()
	return r
}

// Requests is a point-in-time copy of a Store's counters.
type Requests struct {
	ByOp         map[Op]int64 // request attempts per kind (absent: none)
	BytesRead    int64        // object bytes received by Get and GetRange (and put-if-absent read-backs)
	BytesWritten int64        // object bytes stored by Put and PutIfAbsent attempts that succeeded
}

// Total is the number of requests of every kind.
func (r Requests) Total() int64 {
	var t int64
	for _, n := range r.ByOp {
		t += n
	}
	return t
}

// Sub returns r − earlier: the requests made between two snapshots.
func (r Requests) Sub(earlier Requests) Requests {
	d := Requests{ByOp: map[Op]int64{}, BytesRead: r.BytesRead - earlier.BytesRead, BytesWritten: r.BytesWritten - earlier.BytesWritten}
	for o, n := range r.ByOp {
		if v := n - earlier.ByOp[o]; v != 0 {
			d.ByOp[o] = v
		}
	}
	return d
}

// String renders the counts as "get=1 list=2 …" in a stable order.
func (r Requests) String() string {
	var parts []string
	for o, n := range r.ByOp {
		parts = append(parts, fmt.Sprintf("%s=%d", o, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}
