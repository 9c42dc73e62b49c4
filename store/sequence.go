package store

import "context"

// PutThenPutIfAbsent is PutAllThenPutIfAbsent with one Put: putKey is written as Put does;
// once that write has returned success (the object durable where the store promises
// durability), between runs (nil: none), and if it returns nil, key is created as
// PutIfAbsent does. putErr is the Put's error (then nothing else was done); err is
// between's or PutIfAbsent's (with PutIfAbsent's error classes).
func PutThenPutIfAbsent(ctx context.Context, s Store, putKey string, putData []byte, between func(context.Context) error, key string, data []byte) (putErr, err error) {
	return PutAllThenPutIfAbsent(ctx, s, []Object{{Key: putKey, Data: putData}}, between, key, data)
}

// Object is a key and the bytes a Put writes there.
type Object struct {
	Key  string // the object's key
	Data []byte // its bytes
}

// BatchSequencer is implemented by stores that can stage several Puts together with the
// put-if-absent that must follow them (see PutAllThenPutIfAbsent). Use that function
// rather than calling it directly.
type BatchSequencer interface {
	// PutAllThenPutIfAbsent: see the package function of that name.
	PutAllThenPutIfAbsent(ctx context.Context, puts []Object, between func(context.Context) error, key string, data []byte) (putErr, err error)
}

// PutAllThenPutIfAbsent writes every object of puts as Put does, in no particular order
// among themselves; once all have returned success (each durable where the store promises
// durability), it calls between (nil: none), and if that returns nil, creates key as
// PutIfAbsent does. So the put-if-absent object is never visible before every Put is
// durable, and never created when one failed or between refused. A store implementing
// BatchSequencer overlaps the work the writes can do before the put-if-absent (on local
// disk: every temp file is written and fsynced at once, then every Put's rename and
// directory fsync run at once); any other store makes the Puts in turn.
//
// putErr is the first failed Put's error (the other Puts may or may not have landed;
// nothing else was done); err is between's or PutIfAbsent's. Requests are counted as one
// Put per object and, when attempted, one PutIfAbsent.
func PutAllThenPutIfAbsent(ctx context.Context, s Store, puts []Object, between func(context.Context) error, key string, data []byte) (putErr, err error) {
	if q, ok := s.(BatchSequencer); ok {
		return q.PutAllThenPutIfAbsent(ctx, puts, between, key, data)
	}
	for _, o := range puts {
		if err := s.Put(ctx, o.Key, o.Data); err != nil {
			return err, nil
		}
	}
	if between != nil {
		if err := between(ctx); err != nil {
			return nil, err
		}
	}
	return nil, s.PutIfAbsent(ctx, key, data)
}
