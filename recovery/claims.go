package recovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shale-db/shale/store"
)

// OrphanClaims finds the claims that no recovery will ever release: claim objects
// (_recovery/<id>.claim) whose sidecar (_recovery/<id>.json) no longer exists. A recovery
// deletes the sidecar it resolved and then releases its claim; one that dies in between
// (or whose release fails: it is best effort) leaves the claim behind, and since Recover
// only claims sidecars it has listed, nothing else ever looks at it again. A claim is an
// orphan once it is also older than ttl (default DefaultClaimTTL, as for taking over a
// stale claim): a live recovery that has just deleted its sidecar releases its claim
// within moments. Age counts from the later of the claim's recorded time and the
// object's modification time. It returns the orphans to delete and how many orphans
// were kept as younger than ttl; the caller (gc) deletes them.
//
// Deleting a claim never risks data, even the claim of a recovery still running:
// recovery's safety comes from the abort version that fences an operation's
// transactions before any of its files are deleted, from the catalog hold check and from
// re-reading the sidecar under the claim, never from the claim itself. A claim only
// spares two recoveries the same work, and Recover is safe to run concurrently with
// itself.
//
// Cost: one LIST of _recovery/ plus one GET per claim without a sidecar. Errors: store
// errors.
func OrphanClaims(ctx context.Context, s store.Store, ttl time.Duration) (orphans []store.ObjectInfo, young int, err error) {
	if ttl <= 0 {
		ttl = DefaultClaimTTL
	}
	objs, err := s.List(ctx, Dir, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("recovery sidecars: %w", err) // the store error names the listing
	}
	sidecars := map[string]bool{}
	for _, o := range objs {
		if strings.HasSuffix(o.Key, ".json") {
			sidecars[strings.TrimSuffix(o.Key, ".json")] = true
		}
	}
	cutoff := time.Now().Add(-ttl)
	for _, o := range objs {
		id, ok := strings.CutSuffix(o.Key, ".claim")
		if !ok || sidecars[id] {
			continue
		}
		taken := o.ModTime
		b, err := s.Get(ctx, o.Key)
		if errors.Is(err, store.ErrNotFound) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, 0, fmt.Errorf("claim %s: %w", o.Key, err)
		}
		var c claim
		if json.Unmarshal(b, &c) == nil && c.Taken.After(taken) {
			taken = c.Taken
		}
		if taken.After(cutoff) {
			young++
			continue
		}
		orphans = append(orphans, o)
	}
	return orphans, young, nil
}
