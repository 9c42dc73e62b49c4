package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/shale-db/shale/manifest"
)

// ErrInvalidConfig: a configuration change with an empty key, a key with white space or a
// control character, a key both set and deleted, or a value this build cannot read for a
// key it reads (the codec, the WAL's and the idempotency window's keys).
var ErrInvalidConfig = errors.New("invalid configuration change")

// Config returns a copy of the table's configuration (key → value) at this version; never nil.
func (t *Table) Config() map[string]string {
	c := maps.Clone(t.m.Config)
	if c == nil {
		c = map[string]string{}
	}
	return c
}

// UpdateConfig sets the keys of upserts and deletes the keys of deletes (deleting an absent
// key is allowed) in one new version, an OpUpdateConfig transaction that touches no data.
// Concurrent changes to other keys, and any data change, are merged by the commit loop.
// A concurrent change to one of the same keys (or an Overwrite setting it) is not
// retried: the error is a *manifest.ConflictError wrapping manifest.ErrRetryable naming
// both transactions, the handle stays at its version, and the caller decides (Refresh,
// look at Config, try again). An empty change commits nothing.
// Errors: ErrInvalidConfig, ErrReadOnly, *manifest.ConflictError, store errors.
func (t *Table) UpdateConfig(ctx context.Context, upserts map[string]string, deletes []string) (CommitResult, error) {
	if t.readOnly {
		return CommitResult{}, fmt.Errorf("table %q at version %d: %w", t.name, t.m.Version, ErrReadOnly)
	}
	op, err := planConfig(upserts, deletes)
	if err != nil {
		return CommitResult{}, fmt.Errorf("table %q: %w", t.name, err)
	}
	if len(op.Config) == 0 && len(op.ConfigDeletes) == 0 {
		return CommitResult{Version: t.m.Version}, nil
	}
	return t.commit(ctx, manifest.NewTransaction(t.m.Version, op))
}

// planConfig validates a configuration change and returns its operation (deletes sorted
// and deduplicated).
func planConfig(upserts map[string]string, deletes []string) (manifest.Operation, error) {
	op := manifest.Operation{Kind: manifest.OpUpdateConfig}
	for k, v := range upserts {
		if k == "" {
			return op, fmt.Errorf("%w: empty key (value %q)", ErrInvalidConfig, v)
		}
	}
	for _, k := range deletes {
		if k == "" {
			return op, fmt.Errorf("%w: empty key to delete", ErrInvalidConfig)
		}
		if _, ok := upserts[k]; ok {
			return op, fmt.Errorf("%w: key %q is both set and deleted", ErrInvalidConfig, k)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(upserts)) {
		if err := checkConfigValue(k, upserts[k]); err != nil {
			return op, err
		}
	}
	for _, k := range deletes {
		if err := checkConfigKey(k); err != nil {
			return op, err
		}
	}
	if _, err := TableWriteOptions(WriteOptions{}, upserts); err != nil {
		return op, err
	}
	if len(upserts) > 0 {
		op.Config = maps.Clone(upserts)
	}
	if len(deletes) > 0 {
		op.ConfigDeletes = slices.Compact(slices.Sorted(slices.Values(deletes)))
	}
	return op, nil
}

// checkConfigKey refuses a key that cannot be shown unambiguously (`shale config` prints
// "key = value" lines): one with white space or a control character.
func checkConfigKey(k string) error {
	if i := strings.IndexFunc(k, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }); i >= 0 {
		return fmt.Errorf("%w: key %q holds white space or a control character", ErrInvalidConfig, k)
	}
	return nil
}

// checkConfigValue checks the value of a key this build reads (the codec keys are
// TableWriteOptions'): before, a value the engine could not parse was stored and then
// read as the default (or, for the WAL's shard count, as no WAL). Other keys are stored
// as given.
func checkConfigValue(k, v string) error {
	if err := checkConfigKey(k); err != nil {
		return err
	}
	count := func(min int64, what string) error {
		if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < min {
			return fmt.Errorf("%w: %s = %q (want %s)", ErrInvalidConfig, k, v, what)
		}
		return nil
	}
	switch k {
	case ConfigWALShards:
		return count(0, "a whole number of shards, 0 for no WAL")
	case ConfigWALFlushBytes:
		return count(math.MinInt64, "a whole number of bytes; negative: only explicit flushes")
	case ConfigWALBacklogSoft, ConfigWALBacklogHard:
		return count(0, "a whole number of bytes, 0 for no limit")
	case manifest.ConfigIdempotencyKeys:
		return count(0, "a whole number of keys, 0 or more")
	case ConfigWALFlushInterval:
		if d, err := time.ParseDuration(v); err != nil || d < 0 {
			return fmt.Errorf("%w: %s = %q (want a Go duration such as 200ms, 0 for no age limit)", ErrInvalidConfig, k, v)
		}
	}
	return nil
}
