package manifest

import (
	"context"
	"fmt"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/shale-db/shale/internal/fragment"
	"github.com/shale-db/shale/store"
)

// rebaseDeletions rewrites ours (a Delete or Update) to apply on top of winner, whose
// transaction changed the deletion vectors of the fragments in shared. For each shared
// fragment it reads our previous and new deletion vectors (our affected rows are new −
// previous) and the winner's current one; if the winner deleted none of our affected rows,
// it writes the union as a new deletion vector and points ours at it. It returns a
// *ConflictError (Retryable) when the same rows were touched twice, when the winner removed
// a shared fragment, or when ours removes a shared fragment (DESIGN §6 "rebase if disjoint
// rows"; lance-format.md §4.3). Cost: up to three GETs and one PUT per shared fragment.
func rebaseDeletions(ctx context.Context, s store.Store, table string, ours Transaction, winner *Manifest, shared []uint32) (Transaction, error) {
	retry := func(frags []uint32, why string) (Transaction, error) {
		return Transaction{}, &ConflictError{Table: table, Resolution: Retryable, Ours: ours, Theirs: winner.Txn,
			TheirsVersion: winner.Version, Fragments: frags, Reason: why}
	}
	for _, id := range ours.Op.Removed {
		if slices.Contains(shared, id) {
			return retry([]uint32{id}, "we delete every row of a fragment whose deletion vector changed")
		}
	}
	read := func(key string) (*roaring.Bitmap, error) {
		if key == "" {
			return roaring.New(), nil
		}
		bm, err := fragment.ReadDeletionVector(ctx, s, key)
		if err != nil {
			return nil, &ObjectError{Table: table, Version: winner.Version, Key: key, Err: err}
		}
		return bm, nil
	}
	out := ours
	out.Op.Deletions = slices.Clone(ours.Op.Deletions)
	var removed []uint32
	for i, d := range out.Op.Deletions {
		if !slices.Contains(shared, d.FragmentID) {
			continue
		}
		f, ok := winner.Fragment(d.FragmentID)
		if !ok {
			return retry([]uint32{d.FragmentID}, "the fragment was removed")
		}
		cur := deletionKey(f)
		if cur == d.Previous {
			continue
		}
		prev, err := read(d.Previous)
		if err != nil {
			return Transaction{}, err
		}
		mine, err := read(d.New.Key)
		if err != nil {
			return Transaction{}, err
		}
		theirs, err := read(cur)
		if err != nil {
			return Transaction{}, err
		}
		affected := roaring.AndNot(mine, prev)
		if roaring.AndNot(theirs, prev).Intersects(affected) {
			return retry([]uint32{d.FragmentID}, "both touched the same rows")
		}
		merged := roaring.Or(theirs, affected)
		if int64(merged.GetCardinality()) >= f.PhysicalRows {
			removed = append(removed, d.FragmentID)
			continue
		}
		key := NewDeletionKey(table, ours.ID, d.FragmentID)
		size, err := fragment.WriteDeletionVector(ctx, s, key, merged)
		if err != nil {
			return Transaction{}, &ObjectError{Table: table, Version: winner.Version + 1, Key: key, Err: err}
		}
		out.Op.Deletions[i] = DeletionUpdate{FragmentID: d.FragmentID, Previous: cur,
			New: DeletionFile{Key: key, Size: size, Deleted: int64(merged.GetCardinality())}}
	}
	if len(removed) > 0 {
		out.Op.Deletions = slices.DeleteFunc(out.Op.Deletions, func(d DeletionUpdate) bool { return slices.Contains(removed, d.FragmentID) })
		out.Op.Removed = append(slices.Clone(out.Op.Removed), removed...)
	}
	if err := ctx.Err(); err != nil {
		return Transaction{}, fmt.Errorf("rebase: %w", err)
	}
	return out, nil
}
