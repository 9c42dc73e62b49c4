package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
)

// PreconditionsKey holds the result of the large-object precondition probe, written once
// with put-if-absent by the first writable Open of a store whose large objects take
// another write path (see Options.SkipLargeProbe), so later opens read it instead of
// uploading LargeProbeSize objects again.
const PreconditionsKey = "_shale/preconditions.json"

// preconditionsFormat is the format version of the record this build writes and reads.
const preconditionsFormat = 1

// PreconditionsRecord is the JSON object at PreconditionsKey.
type PreconditionsRecord struct {
	// Format is the record's format version (1); a reader refuses another.
	Format int `json:"format"`
	// LargeObjects: a second put-if-absent of a ProbeBytes object was refused (true), or
	// accepted (false: the store must not be written).
	LargeObjects bool `json:"large_objects"`
	// ProbeBytes is the size of the probe objects (LargeProbeSize when written).
	ProbeBytes int64 `json:"probe_bytes"`
	// Checked is when the probe ran, by the clock of the machine that ran it.
	Checked time.Time `json:"checked"`
}

// ReadPreconditions returns the store's precondition record. Errors: ErrNotFound when
// none was written, ErrPermanent for a record this build cannot read, the Get's errors.
func ReadPreconditions(ctx context.Context, s Store) (PreconditionsRecord, error) {
	b, err := s.Get(ctx, PreconditionsKey)
	if err != nil {
		return PreconditionsRecord{}, err
	}
	var r PreconditionsRecord
	if err := json.Unmarshal(b, &r); err != nil || r.Format != preconditionsFormat {
		if err == nil {
			err = fmt.Errorf("format %d, this build reads %d", r.Format, preconditionsFormat)
		}
		return PreconditionsRecord{}, &Error{Op: OpGet, Store: s.URL(), Key: PreconditionsKey, Class: ErrPermanent,
			Err: fmt.Errorf("unreadable precondition record: %w", err)}
	}
	return r, nil
}

// RecordPreconditions writes the record of a large-object probe with put-if-absent and
// returns the record the store holds afterwards: ours, or the one another process wrote
// first (which then decides).
func RecordPreconditions(ctx context.Context, s Store, largeObjects bool, checked time.Time) (PreconditionsRecord, error) {
	r := PreconditionsRecord{Format: preconditionsFormat, LargeObjects: largeObjects, ProbeBytes: LargeProbeSize, Checked: checked.UTC()}
	b, err := json.Marshal(r)
	if err != nil {
		return r, err
	}
	if err := s.PutIfAbsent(ctx, PreconditionsKey, b); errors.Is(err, ErrPreconditionFailed) {
		return ReadPreconditions(ctx, s)
	} else if err != nil {
		return r, err
	}
	return r, nil
}

// CheckLargePreconditions makes sure the store refuses a second put-if-absent of a large
// object. It reads the store's record (one GET); without one it runs
// ProbeLargePreconditions and records the result. A store recorded or found to accept
// the second write gets ErrLargePreconditionsIgnored (which is also
// ErrPreconditionsIgnored): it must not be written, though reads are fine. A failure to
// write the record after a successful probe is not an error (the next open probes again).
func CheckLargePreconditions(ctx context.Context, s Store) error {
	rec, err := ReadPreconditions(ctx, s)
	if errors.Is(err, ErrNotFound) {
		checked := time.Now()
		perr := ProbeLargePreconditions(ctx, s)
		if perr != nil && !errors.Is(perr, ErrPreconditionsIgnored) {
			return perr
		}
		rec, err = RecordPreconditions(ctx, s, perr == nil, checked)
		if err != nil {
			if perr != nil {
				return largeIgnored(s, PreconditionsRecord{ProbeBytes: LargeProbeSize, Checked: checked}, false)
			}
			return nil
		}
	} else if err != nil {
		return err
	}
	if !rec.LargeObjects {
		return largeIgnored(s, rec, true)
	}
	return nil
}

func largeIgnored(s Store, rec PreconditionsRecord, recorded bool) error {
	where := ""
	if recorded {
		where = fmt.Sprintf(", recorded in %s", PreconditionsKey)
	}
	return &Error{Op: OpOpen, Store: s.URL(), Class: ErrLargePreconditionsIgnored,
		Err: fmt.Errorf("a second put-if-absent of a %d-byte object (a multipart upload) succeeded when probed at %s%s; "+
			"writing could let two commits both win, so this store is refused for writing (reading works): use a server that "+
			"honours If-None-Match on CompleteMultipartUpload", rec.ProbeBytes, rec.Checked.UTC().Format(time.RFC3339), where)}
}

// LargeWritePath reports whether s writes large objects another way than small ones
// (S3 multipart uploads from 16 MiB, GCS resumable uploads), which is when a store can
// honour put-if-absent on small objects and not on large ones. Stores opened from s3://
// and gs:// URLs, and OpenBucket over S3 or GCS buckets, do.
func LargeWritePath(s Store) bool {
	b, ok := s.(*bucketStore)
	return ok && b.largeWritePath
}

// bucketHasLargeWritePath detects S3 and GCS buckets.
func bucketHasLargeWritePath(b *blob.Bucket) bool {
	var s3c *s3.Client
	var gcs *storage.Client
	return b.As(&s3c) || b.As(&gcs)
}
