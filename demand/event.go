package demand

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Error classes. Every error this package returns wraps one of them, so callers branch
// with errors.Is.
var (
	// ErrUnknownVersion: an event or a stored record has a schema version this build does
	// not read (neither 0 nor 1). Such an event is never folded, and such a record is
	// never overwritten.
	ErrUnknownVersion = errors.New("demand record has an unsupported version")
	// ErrInvalid: a malformed event or argument (empty or '/'-containing table or shard,
	// unknown source, a flush time for generation 0). Nothing was written.
	ErrInvalid = errors.New("invalid demand event")
	// ErrCorrupt: a stored record does not decode (not JSON, a required field missing, a
	// field of the wrong type, or a shard that is not its key's). Reads report it; the
	// next publish to the key replaces it.
	ErrCorrupt = errors.New("corrupt demand record")
	// ErrContended: a publish lost its compare-and-put PublishAttempts times in a row to
	// concurrent writers of the same record.
	ErrContended = errors.New("demand record kept losing to concurrent writes")
	// ErrEtcd: an etcd request failed (the etcd error is wrapped too). A failed put's
	// outcome is unknown; publishing the same event again is safe (the join is
	// idempotent).
	ErrEtcd = errors.New("etcd request failed")
)

// CurrentVersion is the schema version this build writes (the "v" field). It reads 0 (the
// pre-versioning form) as 1 and refuses anything else.
const CurrentVersion = 1

// checkVersion accepts 0 and 1 and refuses any other schema version.
func checkVersion(v int) error {
	if v == 0 || v == CurrentVersion {
		return nil
	}
	return fmt.Errorf("%w: v=%d (this build reads 0 and %d)", ErrUnknownVersion, v, CurrentVersion)
}

// Source is who published an event. It never affects ordering: every source reports
// absolute values, and a lower one loses the maximum.
type Source string

// The three publishers (lance-context §3.6).
const (
	// SourceWriter: a WAL writer after a flush (its epoch, sealed generation, bytes and
	// flush time).
	SourceWriter Source = "writer"
	// SourceExecutor: a WAL merge after it committed a merged watermark (see MergedEvent).
	// Its time is an observation time and never seeds a flush time.
	SourceExecutor Source = "executor"
	// SourceScan: a storage scan carrying both the shard manifest's sealed generation and
	// the base table's merged watermark.
	SourceScan Source = "scan"
)

// rank orders sources for the one place they matter: choosing, among events with equal
// sealed marks, whose provenance the record keeps (writer over scan over executor). The
// empty source (no event yet) ranks lowest.
func (s Source) rank() int {
	switch s {
	case SourceExecutor:
		return 1
	case SourceScan:
		return 2
	case SourceWriter:
		return 3
	}
	return 0
}

// Valid reports whether s is one of the three sources.
func (s Source) Valid() bool { return s.rank() > 0 }

// Event is one demand report for a shard, and also the shape of the stored record (the
// join of every event for the shard). JSON field names are the wire format
// (docs/format.md §9); the minimal accepted JSON is
// {"shard","sealed_through","flushed_at_ms","writer_epoch","source"}.
type Event struct {
	// V is the schema version: CurrentVersion; 0 (pre-versioning) reads as 1; others are
	// refused with ErrUnknownVersion.
	V int `json:"v"`
	// Shard is the WAL shard (manifest.WALMerge.Shard): non-empty, no '/'.
	Shard string `json:"shard"`
	// IncarnationSince is the first version of the table incarnation the event is about
	// (manifest IncarnationSince; 0 when unknown, which ranks below every real one). An
	// event of an older incarnation than the record's changes nothing; one of a newer
	// incarnation starts the shard's record afresh.
	IncarnationSince uint64 `json:"incarnation_since,omitempty"`
	// SealedThrough is the highest flushed generation (0: none yet).
	SealedThrough uint64 `json:"sealed_through"`
	// SealedBytesThrough is the total size in bytes of the shard's generations 1 ..
	// SealedThrough: a running total that never decreases (the join keeps its maximum).
	SealedBytesThrough uint64 `json:"sealed_bytes_through,omitempty"`
	// MergedThrough is the merged watermark (nil: the publisher does not know it, and the
	// stored one is kept).
	MergedThrough *uint64 `json:"merged_through,omitempty"`
	// MergedEpoch is the epoch the merged mark was reported under, provenance only (nil:
	// WriterEpoch). Stored records carry it only when it differs from WriterEpoch.
	MergedEpoch *uint64 `json:"merged_epoch,omitempty"`
	// FlushedAtMs is when SealedThrough was flushed, in Unix milliseconds (0: unknown; no
	// flush time is learned from the event). For an executor event it is the time of the
	// report and never a flush time.
	FlushedAtMs int64 `json:"flushed_at_ms"`
	// WriterEpoch is the epoch of the shard's writer that sealed SealedThrough: a fence
	// and a tiebreak between equal generations, never a numbering restart.
	WriterEpoch uint64 `json:"writer_epoch"`
	// Source is who published the event.
	Source Source `json:"source"`
	// SealedTimes maps generations to their flush times (Unix ms), at most SealedTimesCap
	// after a join (the lowest SealedTimesCap-1 generations plus the newest). Events may
	// carry it (a scan that knows several flush times; a stored record being re-folded).
	SealedTimes map[uint64]int64 `json:"sealed_times,omitempty"`
}

// Sealed returns the event's sealed mark: {SealedThrough, WriterEpoch}.
func (e Event) Sealed() Mark { return Mark{Generation: e.SealedThrough, Epoch: e.WriterEpoch} }

// Merged returns the event's merged mark, {MergedThrough, MergedEpoch or WriterEpoch},
// and whether the event carries one.
func (e Event) Merged() (Mark, bool) {
	if e.MergedThrough == nil {
		return Mark{}, false
	}
	ep := e.WriterEpoch
	if e.MergedEpoch != nil {
		ep = *e.MergedEpoch
	}
	return Mark{Generation: *e.MergedThrough, Epoch: ep}, true
}

// MergedEvent is the synthetic event a WAL merge publishes for a shard (lance-context
// §3.3, executor publication): sealed = merged, writer epoch 0, Source executor, no flush
// times, at the time of the report (Unix ms). Under generation-major order it can raise
// the merged mark only; it never takes a real writer's sealed mark, epoch or times, and
// for a shard with no record it creates (sealed merged, merged merged, epoch 0), which the
// next real flush supersedes.
func MergedEvent(shard string, merged, incarnationSince uint64, atMs int64) Event {
	return Event{
		V:                CurrentVersion,
		Shard:            shard,
		IncarnationSince: incarnationSince,
		SealedThrough:    merged,
		MergedThrough:    new(merged),
		FlushedAtMs:      atMs,
		WriterEpoch:      0,
		Source:           SourceExecutor,
	}
}

// Validate checks an event before it is folded or published. Errors: ErrUnknownVersion,
// ErrInvalid (empty or '/'-containing shard, unknown source, a flush time for generation
// 0).
func (e Event) Validate() error {
	if err := checkVersion(e.V); err != nil {
		return err
	}
	if err := checkName("shard", e.Shard); err != nil {
		return err
	}
	if !e.Source.Valid() {
		return fmt.Errorf("%w: shard %q: unknown source %q (want writer, executor or scan)", ErrInvalid, e.Shard, e.Source)
	}
	if _, ok := e.SealedTimes[0]; ok {
		return fmt.Errorf("%w: shard %q: a flush time for generation 0 (the base table)", ErrInvalid, e.Shard)
	}
	return nil
}

// maxNameLen bounds table and shard names in keys.
const maxNameLen = 256

// checkName checks a table or shard name used as one etcd key segment.
func checkName(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty %s", ErrInvalid, what)
	case len(name) > maxNameLen:
		return fmt.Errorf("%w: %s %q is longer than %d bytes", ErrInvalid, what, name, maxNameLen)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("%w: %s %q contains '/' or NUL", ErrInvalid, what, name)
	}
	return nil
}

// Encode returns the event's JSON (the stored form).
func (e Event) Encode() []byte {
	b, err := json.Marshal(e)
	if err != nil { // only maps of uint64 to int64 and plain fields: cannot fail
		panic(fmt.Sprintf("demand: encode event: %v", err))
	}
	return b
}

// wireEvent is Event as decoded, with pointers to tell absent required fields.
type wireEvent struct {
	V                  json.RawMessage  `json:"v"`
	Shard              *string          `json:"shard"`
	IncarnationSince   uint64           `json:"incarnation_since"`
	SealedThrough      *uint64          `json:"sealed_through"`
	SealedBytesThrough uint64           `json:"sealed_bytes_through"`
	MergedThrough      *uint64          `json:"merged_through"`
	MergedEpoch        *uint64          `json:"merged_epoch"`
	FlushedAtMs        *int64           `json:"flushed_at_ms"`
	WriterEpoch        *uint64          `json:"writer_epoch"`
	Source             *Source          `json:"source"`
	SealedTimes        map[uint64]int64 `json:"sealed_times"`
}

// UnmarshalJSON decodes an event and checks it: the schema version first (an unknown one
// is ErrUnknownVersion, whatever else the object holds), then the required fields (shard,
// sealed_through, flushed_at_ms, writer_epoch, source) and Validate; those failures wrap
// ErrCorrupt. Unknown fields are ignored. v 0 (or absent) decodes as CurrentVersion.
func (e *Event) UnmarshalJSON(b []byte) error {
	var w wireEvent
	if err := json.Unmarshal(b, &w); err != nil {
		// A newer schema may change shapes: its version, when readable, decides the error.
		var probe struct {
			V json.RawMessage `json:"v"`
		}
		if json.Unmarshal(b, &probe) == nil {
			if v, ok := parseVersion(probe.V); ok && checkVersion(v) != nil {
				return checkVersion(v)
			}
		}
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	v, ok := parseVersion(w.V)
	if !ok {
		return fmt.Errorf("%w: v is %s, not an integer", ErrCorrupt, w.V)
	}
	if err := checkVersion(v); err != nil {
		return err
	}
	var missing []string
	for _, f := range []struct {
		name    string
		present bool
	}{
		{"shard", w.Shard != nil}, {"sealed_through", w.SealedThrough != nil},
		{"flushed_at_ms", w.FlushedAtMs != nil}, {"writer_epoch", w.WriterEpoch != nil},
		{"source", w.Source != nil},
	} {
		if !f.present {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing %s", ErrCorrupt, strings.Join(missing, ", "))
	}
	*e = Event{
		V: CurrentVersion, Shard: *w.Shard, IncarnationSince: w.IncarnationSince, SealedThrough: *w.SealedThrough,
		SealedBytesThrough: w.SealedBytesThrough, MergedThrough: w.MergedThrough, MergedEpoch: w.MergedEpoch,
		FlushedAtMs: *w.FlushedAtMs, WriterEpoch: *w.WriterEpoch, Source: *w.Source, SealedTimes: w.SealedTimes,
	}
	if err := e.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	return nil
}

// parseVersion reads a raw "v": absent or null is 0.
func parseVersion(raw json.RawMessage) (int, bool) {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return 0, true
	}
	var v int
	if err := json.Unmarshal(raw, &v); err != nil {
		return 0, false
	}
	return v, true
}

// DecodeEvent decodes a stored record or a published event (see Event.UnmarshalJSON).
// Errors: ErrUnknownVersion, ErrCorrupt.
func DecodeEvent(b []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(b, &e); err != nil {
		if errors.Is(err, ErrUnknownVersion) || errors.Is(err, ErrCorrupt) {
			return Event{}, err
		}
		return Event{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return e, nil
}
