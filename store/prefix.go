package store

import "context"

// DeletePrefix deletes every object whose key starts with prefix (one List, then one
// Delete per object) and returns how many it deleted. It stops at the first error: the
// objects not deleted yet stay (deleting a missing key is not an error, so running it
// again finishes the job). Not atomic: a reader may see some of the objects gone.
// Errors: the store's, from List or Delete.
func DeletePrefix(ctx context.Context, s Store, prefix string) (int, error) {
	objs, err := s.List(ctx, prefix, 0)
	if err != nil {
		return 0, err
	}
	for i, o := range objs {
		if err := s.Delete(ctx, o.Key); err != nil {
			return i, err
		}
	}
	return len(objs), nil
}
