// Package btree is Shale's BTree scalar index (DESIGN §8; the layout follows Lance's,
// shared/reference/lance-format.md §6.1): the (value, row address) pairs of the covered
// fragments sorted by value (nulls first), cut into pages of about DefaultPageRows rows
// stored as the record batches of one Arrow IPC file, plus a lookup object holding that
// file's descriptor: per page its row count, the min, max and null count of its values,
// and checksums. A search reads the lookup (once; callers cache the Reader), keeps the
// pages whose bounds may satisfy the predicate's condition on the column
// (filter.Expr.Implied), reads only those (one range request per run of consecutive
// pages) and returns exactly the row addresses whose value satisfies that condition.
// Deleted rows are not removed here: the scan applies deletion vectors (and the whole
// predicate) to what it fetches.
//
// Objects (under index.Dir): lookup.btree, the framed CBOR Lookup; <ulid>.arrow, the
// pages (absent for an index of no rows). Both are immutable. A search reads each run of
// consecutive pages it needs (up to 64) with one range request.
//
// Memory: Build sorts in memory, about 24 bytes per row plus the values (3,000,000 int32
// values: about 90 MB); a Reader keeps the lookup (a few hundred bytes per 4,096 rows).
package btree

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/shale-db/shale/engine/filter"
	"github.com/shale-db/shale/index"
	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/store"
)

// DefaultPageRows is the page size (rows) of a BTree, as in Lance.
const DefaultPageRows = 4096

// LookupName is the object name of the lookup under an index's directory.
const LookupName = "lookup.btree"

var magicLookup = [4]byte{'S', 'H', 'B', 'T'}

// Lookup is the stored lookup of a BTree.
type Lookup struct {
	Type     []byte            `cbor:"1,keyasint"` // the indexed column's type: an Arrow IPC schema message of one field
	PageRows int               `cbor:"2,keyasint"` // rows per page (every page but the last is full)
	Rows     int64             `cbor:"3,keyasint"` // (value, address) pairs indexed: the covered fragments' physical rows
	Pages    manifest.DataFile `cbor:"4,keyasint"` // the pages file; Batches[i] is page i with its statistics
}

// Chunk is a run of values with their row addresses (fragment id << 32 | row offset).
type Chunk struct {
	Values arrow.Array // the indexed column's values (nulls allowed); Build does not retain or release it
	Addrs  []uint64    // one row address per value, same length as Values
}

// BuildOptions tune Build. Zero values take the defaults.
type BuildOptions struct {
	PageRows  int                   // rows per page (DefaultPageRows)
	Write     manifest.WriteOptions // codec of the pages file (rows per batch and per file are set by Build)
	Allocator memory.Allocator      // default memory.DefaultAllocator
}

// Built is what Build stored.
type Built struct {
	Files  []string // the lookup, then the pages file (none for no rows), keys relative to the store root
	Lookup Lookup   // the lookup as stored
	Bytes  int64    // bytes stored: the lookup and the pages file
}

// Build sorts the values of chunks (field's type) with their row addresses and stores
// the pages and the lookup under dir (index.Dir). Ties keep the input order, so input in
// address order gives pages sorted by (value, address). Errors: index.ErrUnsupportedType,
// store errors naming the key.
func Build(ctx context.Context, s store.Store, dir string, field arrow.Field, chunks []Chunk, opts BuildOptions) (Built, error) {
	if err := index.Supported(index.KindBTree, field.Type); err != nil {
		return Built{}, err
	}
	if opts.PageRows <= 0 {
		opts.PageRows = DefaultPageRows
	}
	mem := opts.Allocator
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	var arrs []arrow.Array
	var addrs []uint64
	for _, c := range chunks {
		if c.Values.Len() != len(c.Addrs) {
			return Built{}, fmt.Errorf("btree: chunk of %d values and %d addresses", c.Values.Len(), len(c.Addrs))
		}
		if !arrow.TypeEqual(c.Values.DataType(), field.Type) {
			return Built{}, fmt.Errorf("btree: chunk of %s values for a %s column", c.Values.DataType(), field.Type)
		}
		arrs = append(arrs, c.Values)
		addrs = append(addrs, c.Addrs...)
	}
	var values arrow.Array
	if len(arrs) == 0 {
		values = array.MakeArrayOfNull(mem, field.Type, 0)
	} else {
		var err error
		if values, err = array.Concatenate(arrs, mem); err != nil {
			return Built{}, fmt.Errorf("btree: gather values: %w", err)
		}
	}
	defer values.Release()
	less, err := comparator(values)
	if err != nil {
		return Built{}, fmt.Errorf("%w: %v", index.ErrUnsupportedType, err)
	}
	perm := make([]int64, values.Len())
	for i := range perm {
		perm[i] = int64(i)
	}
	byValue := func(a, b int64) int { return less(int(a), int(b)) }
	if !slices.IsSortedFunc(perm, byValue) { // input already in order (data sorted by the column): one pass, no sort
		slices.SortStableFunc(perm, byValue)
	}
	idx := array.NewInt64Data(array.NewData(arrow.PrimitiveTypes.Int64, len(perm),
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(perm))}, nil, 0, 0))
	defer idx.Release()
	sorted, err := compute.TakeArray(compute.WithAllocator(ctx, mem), values, idx)
	if err != nil {
		return Built{}, fmt.Errorf("btree: sort values: %w", err)
	}
	defer sorted.Release()
	sortedAddrs := make([]uint64, len(perm))
	for i, p := range perm {
		sortedAddrs[i] = addrs[p]
	}
	ab := array.NewUint64Builder(mem)
	ab.AppendValues(sortedAddrs, nil)
	addrArr := ab.NewArray()
	ab.Release()
	defer addrArr.Release()

	schema := pageSchema(field.Type)
	w := opts.Write
	w.MaxRowsPerBatch = opts.PageRows
	w.MaxRowsPerFile = max(len(perm), 1)
	w.Allocator = mem
	fw, err := fragment.NewWriter(ctx, s, dir, schema, []int32{0, 1}, w)
	if err != nil {
		return Built{}, err
	}
	rec := array.NewRecordBatch(schema, []arrow.Array{sorted, addrArr}, int64(len(perm)))
	err = fw.Write(rec)
	rec.Release()
	if err != nil {
		fw.Close()
		return Built{}, fmt.Errorf("btree: write pages: %w", err)
	}
	files, err := fw.Close()
	if err != nil {
		return Built{}, fmt.Errorf("btree: write pages: %w", err)
	}
	var pages fragment.DataFile // an index of no rows has no pages file
	switch len(files) {
	case 0:
	case 1:
		pages = files[0]
	default:
		return Built{}, fmt.Errorf("btree: pages written as %d files, want 1", len(files))
	}
	typ, err := manifest.NewSchema(arrow.NewSchema([]arrow.Field{{Name: "value", Type: field.Type, Nullable: true}}, nil), []int32{0})
	if err != nil {
		return Built{}, err
	}
	lk := Lookup{Type: typ.IPC, PageRows: opts.PageRows, Rows: int64(len(perm)), Pages: pages}
	b, err := manifest.Frame(magicLookup, lk)
	if err != nil {
		return Built{}, err
	}
	key := dir + "/" + LookupName
	if err := s.PutIfAbsent(ctx, key, b); err != nil {
		return Built{}, fmt.Errorf("btree: store lookup %s: %w", key, err)
	}
	built := Built{Files: []string{key}, Lookup: lk, Bytes: pages.Size + int64(len(b))}
	if pages.Key != "" {
		built.Files = append(built.Files, pages.Key)
	}
	return built, nil
}

func pageSchema(t arrow.DataType) *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "value", Type: t, Nullable: true},
		{Name: "addr", Type: arrow.PrimitiveTypes.Uint64},
	}, nil)
}

// ReadLookup reads and checks the lookup at key (one GET). Errors: manifest.ErrCorrupt /
// ErrFormatTooNew naming the key, store errors.
func ReadLookup(ctx context.Context, s store.Store, key string) (Lookup, error) {
	b, err := s.Get(ctx, key)
	if err != nil {
		return Lookup{}, fmt.Errorf("btree lookup %s: %w", key, err)
	}
	var lk Lookup
	if err := manifest.Unframe(magicLookup, b, &lk); err != nil {
		return Lookup{}, fmt.Errorf("btree lookup %s: %w", key, err)
	}
	if lk.PageRows <= 0 || (lk.Rows > 0 && len(lk.Pages.FieldIDs) != 2) {
		return Lookup{}, fmt.Errorf("btree lookup %s: %w: page rows %d, %d page columns", key, manifest.ErrCorrupt, lk.PageRows, len(lk.Pages.FieldIDs))
	}
	return lk, nil
}

// ValueType decodes the indexed column's type. Errors: manifest.ErrCorrupt when Type is
// not a one-field Arrow IPC schema message.
func (lk Lookup) ValueType() (arrow.DataType, error) {
	sc := manifest.Schema{IPC: lk.Type, FieldIDs: []int32{0}}
	a, err := sc.Arrow()
	if err != nil {
		return nil, err
	}
	return a.Field(0).Type, nil
}

// Reader searches one BTree. It caches the pages file's footer after the first search.
// Safe for concurrent use.
type Reader struct {
	s   store.Store
	lk  Lookup
	typ arrow.DataType
	mem memory.Allocator

	mu   sync.Mutex
	file *fragment.FileReader
}

// NewReader returns a Reader of the BTree whose lookup is lk (from ReadLookup or Build).
// It makes no request; mem nil means memory.DefaultAllocator. Errors: as ValueType.
func NewReader(s store.Store, lk Lookup, mem memory.Allocator) (*Reader, error) {
	typ, err := lk.ValueType()
	if err != nil {
		return nil, fmt.Errorf("btree pages %s: %w", lk.Pages.Key, err)
	}
	if mem == nil {
		mem = memory.DefaultAllocator
	}
	return &Reader{s: s, lk: lk, typ: typ, mem: mem}, nil
}

// Lookup is the reader's lookup.
func (r *Reader) Lookup() Lookup { return r.lk }

// Stats describe one search.
type Stats struct {
	Pages        int // pages in the index
	PagesRead    int // pages fetched (one range request per run of consecutive pages)
	PagesSkipped int // pages whose bounds ruled them out
	Matches      int // row addresses returned
}

// Pages returns the pages whose bounds may satisfy cond, a condition on column alone (as
// filter.Expr.Implied returns it). No I/O.
func (r *Reader) Pages(column string, cond *filter.Expr) []int {
	var out []int
	for i := range r.lk.Pages.Batches {
		st := r.lk.Pages.BatchStats(i)
		if len(st) == 0 {
			out = append(out, i)
			continue
		}
		if cond.MayMatch(r.lk.Pages.Batches[i].Rows, index.OneColumn(column, index.FilterStats(st[0]))) {
			out = append(out, i)
		}
	}
	return out
}

// Search returns the row addresses whose value satisfies cond, a condition on column
// alone (filter.Expr.Implied), reading only the pages whose bounds may satisfy it.
// Errors: corruption of the pages file (manifest.ErrCorrupt naming its key), store
// errors, evaluation errors.
func (r *Reader) Search(ctx context.Context, column string, cond *filter.Expr) (*roaring64.Bitmap, Stats, error) {
	st := Stats{Pages: len(r.lk.Pages.Batches)}
	pages := r.Pages(column, cond)
	st.PagesSkipped = st.Pages - len(pages)
	out := roaring64.New()
	if len(pages) == 0 {
		return out, st, nil
	}
	fr, err := r.open(ctx)
	if err != nil {
		return nil, st, err
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: column, Type: r.typ, Nullable: true}}, nil)
	for len(pages) > 0 {
		// Pages that can match a range lie next to each other: read each run of
		// consecutive pages (at most maxRunPages) with one request.
		n := 1
		for n < len(pages) && n < maxRunPages && pages[n] == pages[0]+n {
			n++
		}
		recs, err := r.readPages(ctx, fr, pages[0], n)
		if err != nil {
			return nil, st, err
		}
		for k, rec := range recs {
			if err == nil {
				err = r.match(ctx, schema, cond, rec, pages[0]+k, out)
			}
			rec.Release()
		}
		if err != nil {
			return nil, st, err
		}
		st.PagesRead += n
		pages = pages[n:]
	}
	st.Matches = int(out.GetCardinality())
	return out, st, nil
}

// maxRunPages bounds the pages one request reads (and one search holds decoded at once:
// 64 pages of 4,096 entries of 8-byte values are about 4 MB).
const maxRunPages = 64

// match adds to out the row addresses of page p (rec) whose value satisfies cond.
func (r *Reader) match(ctx context.Context, schema *arrow.Schema, cond *filter.Expr, rec arrow.RecordBatch, p int, out *roaring64.Bitmap) error {
	one := array.NewRecordBatch(schema, []arrow.Array{rec.Column(0)}, rec.NumRows())
	mask, err := cond.Evaluate(compute.WithAllocator(ctx, r.mem), one)
	one.Release()
	if err != nil {
		return fmt.Errorf("btree pages %s page %d: %w", r.lk.Pages.Key, p, err)
	}
	defer mask.Release()
	addrs := rec.Column(1).(*array.Uint64).Uint64Values()
	for i := 0; i < mask.Len(); i++ {
		if mask.Value(i) {
			out.Add(addrs[i])
		}
	}
	return nil
}

func (r *Reader) open(ctx context.Context) (*fragment.FileReader, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.file != nil {
		return r.file, nil
	}
	fr, err := fragment.OpenFile(ctx, r.s, r.lk.Pages, r.mem)
	if err != nil {
		return nil, fmt.Errorf("btree pages %s: %w", r.lk.Pages.Key, err)
	}
	if fr.NumBatches() != len(r.lk.Pages.Batches) {
		fr.Close()
		return nil, fmt.Errorf("btree pages %s: %w: %d pages, the lookup lists %d", r.lk.Pages.Key, manifest.ErrCorrupt, fr.NumBatches(), len(r.lk.Pages.Batches))
	}
	r.file = fr
	return fr, nil
}

// readPages reads pages first..first+n-1 with one request, with ctx: the pages file stays
// open across searches, so each read must use its own search's context, not the one the
// file was opened with.
func (r *Reader) readPages(ctx context.Context, fr *fragment.FileReader, first, n int) ([]arrow.RecordBatch, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fr.SetContext(ctx)
	recs, err := fr.ReadBatchRange(first, n)
	if err != nil {
		return nil, fmt.Errorf("btree pages %s pages %d-%d: %w", r.lk.Pages.Key, first, first+n-1, err)
	}
	for k, rec := range recs {
		if rec.NumCols() != 2 || !arrow.TypeEqual(rec.Column(0).DataType(), r.typ) || rec.Column(1).DataType().ID() != arrow.UINT64 {
			for _, rec := range recs {
				rec.Release()
			}
			return nil, fmt.Errorf("btree pages %s page %d: %w: columns %s", r.lk.Pages.Key, first+k, manifest.ErrCorrupt, rec.Schema())
		}
	}
	return recs, nil
}

// Close releases the cached pages file (no request). A search after Close reopens it.
// Errors: none in practice (the reader's close error).
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.file == nil {
		return nil
	}
	err := r.file.Close()
	r.file = nil
	return err
}
