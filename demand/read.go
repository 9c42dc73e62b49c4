package demand

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Paging of reads (lance-context §3.6, reads at scale): a page starts at PageKeys keys,
// halves after a response larger than PageLargeBytes or refused as too big for a gRPC
// message, and doubles back (never to a size that was refused) after responses smaller
// than a quarter of PageLargeBytes. A record with a full flush-time map is about 1.5 KiB,
// so 512 of them fit well under the etcd client's usual 4 MiB message cap.
const (
	PageKeys       = 512
	PageLargeBytes = 1 << 20
)

// readRestarts bounds how often a paged read starts over because its revision was
// compacted away meanwhile.
const readRestarts = 3

// Snapshot is demand read from etcd at one revision.
type Snapshot struct {
	// Revision is the etcd revision every record was read at.
	Revision int64
	// Tables is each table's demand, folded from its records, by table. Tables with no
	// record are absent.
	Tables map[string]*TableDemand
	// Skipped lists records that were not folded: newer schema (ErrUnknownVersion) or
	// undecodable (ErrCorrupt). Their shards are absent from Tables.
	Skipped []Skipped
	// Pages is the number of range requests that returned records (paging, for metrics
	// and tests).
	Pages int
	// Bytes approximates the etcd bytes read: every record's key and value plus a few bytes
	// of framing each (as paging measures a response), for metrics.
	Bytes int64
}

// Skipped is a record a read could not fold.
type Skipped struct {
	Table string // the table, "" when the key does not parse
	Shard string // the shard, "" when the key does not parse
	Key   string // the etcd key
	Err   error  // wraps ErrUnknownVersion or ErrCorrupt
}

// ReadTable reads and folds every record of table at one etcd revision. Errors (as
// *Error): ErrInvalid, ErrEtcd.
func (r *Records) ReadTable(ctx context.Context, table string) (*Snapshot, error) {
	pre := r.TablePrefix(table)
	if err := checkName("table", table); err != nil {
		return nil, &Error{Op: "read", Table: table, Key: pre, Err: err}
	}
	return r.read(ctx, table, pre)
}

// ReadAll reads and folds every demand record of every table at one etcd revision, paged
// by bytes so that thousands of tables (tens of thousands of records) never exceed a
// message size limit. Errors (as *Error): ErrEtcd.
func (r *Records) ReadAll(ctx context.Context) (*Snapshot, error) {
	return r.read(ctx, "*", r.demandPrefix())
}

func (r *Records) read(ctx context.Context, table, pre string) (*Snapshot, error) {
	for restart := 0; ; restart++ {
		snap, err := r.readOnce(ctx, pre)
		if err == nil {
			return snap, nil
		}
		if !errors.Is(err, rpctypes.ErrCompacted) || restart >= readRestarts {
			return nil, &Error{Op: "read", Table: table, Key: pre, Err: fmt.Errorf("%w: %w", ErrEtcd, err)}
		}
	}
}

// readOnce pages through [pre, end of pre) at the revision of its first page.
func (r *Records) readOnce(ctx context.Context, pre string) (*Snapshot, error) {
	snap := &Snapshot{Tables: map[string]*TableDemand{}}
	nowMs := time.Now().UnixMilli()
	end := clientv3.GetPrefixRangeEnd(pre)
	from := pre
	limit, ceiling := int64(PageKeys), int64(PageKeys*2) // ceiling: smallest refused size
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(limit)}
		if snap.Revision > 0 {
			opts = append(opts, clientv3.WithRev(snap.Revision))
		}
		resp, err := r.cli.Get(ctx, from, opts...)
		if err != nil {
			if tooLarge(err) && limit > 1 {
				ceiling = limit
				limit = max(1, limit/2)
				continue
			}
			return nil, err
		}
		if snap.Revision == 0 {
			snap.Revision = resp.Header.Revision
		}
		snap.Pages++
		snap.Bytes += int64(responseBytes(resp))
		for _, kv := range resp.Kvs {
			r.foldKV(snap, kv, nowMs)
		}
		if r.afterPage != nil {
			r.afterPage(snap.Pages)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return snap, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		limit = nextPage(limit, ceiling, responseBytes(resp))
	}
}

// nextPage is the page size after a page of limit keys that came to size bytes, given the
// smallest size refused so far (ceiling): halve when the page was large, double when it
// was small (up to PageKeys, and never to the ceiling), else keep it.
func nextPage(limit, ceiling int64, size int) int64 {
	switch {
	case size > PageLargeBytes && limit > 1:
		return max(1, limit/2)
	case size < PageLargeBytes/4 && limit < PageKeys && limit*2 < ceiling:
		return limit * 2
	}
	return limit
}

// foldKV folds one stored record into the snapshot, or lists it as skipped.
func (r *Records) foldKV(snap *Snapshot, kv *mvccpb.KeyValue, nowMs int64) {
	key := string(kv.Key)
	rest := strings.TrimPrefix(key, r.demandPrefix())
	table, shard, ok := strings.Cut(rest, "/")
	if !ok || table == "" || shard == "" || strings.Contains(shard, "/") {
		snap.Skipped = append(snap.Skipped, Skipped{Key: key, Err: fmt.Errorf("%w: key is not <prefix>/demand/<table>/<shard>", ErrCorrupt)})
		return
	}
	skip := func(err error) {
		snap.Skipped = append(snap.Skipped, Skipped{Table: table, Shard: shard, Key: key, Err: err})
	}
	e, err := DecodeEvent(kv.Value)
	if err != nil {
		skip(err)
		return
	}
	if e.Shard != shard {
		skip(fmt.Errorf("%w: the record names shard %q", ErrCorrupt, e.Shard))
		return
	}
	t := snap.Tables[table]
	if t == nil {
		t = NewTableDemand(table)
		snap.Tables[table] = t
	}
	if _, err := t.Fold(e, kv.ModRevision, nowMs); err != nil {
		skip(err)
	}
}

// tooLarge reports a response refused for its size (the gRPC message limit on either
// side).
func tooLarge(err error) bool {
	s, ok := status.FromError(err)
	return ok && s.Code() == codes.ResourceExhausted && strings.Contains(s.Message(), "larger than max")
}

// responseBytes approximates a range response's encoded size: its keys and values plus a
// few bytes of framing and revisions per record.
func responseBytes(resp *clientv3.GetResponse) int {
	n := 0
	for _, kv := range resp.Kvs {
		n += len(kv.Key) + len(kv.Value) + 24
	}
	return n
}
