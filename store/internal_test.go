package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/api/googleapi"
)

type statusErr int

func (s statusErr) Error() string       { return fmt.Sprintf("status %d", int(s)) }
func (s statusErr) HTTPStatusCode() int { return int(s) }

func TestClassify(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	read := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
	cases := []struct {
		name  string
		err   error
		write bool
		want  error
	}{
		{"404", statusErr(404), false, ErrNotFound},
		{"412", statusErr(412), true, ErrPreconditionFailed},
		{"503 read", statusErr(503), false, ErrTransient},
		{"503 write", statusErr(503), true, ErrTransient}, // an answer: the write was refused
		{"500", statusErr(500), true, ErrTransient},
		{"429", statusErr(429), false, ErrTransient},
		{"408", statusErr(408), false, ErrTransient},
		{"403", statusErr(403), false, ErrPermanent},
		{"400 write", statusErr(400), true, ErrPermanent},
		{"416", statusErr(416), false, ErrPermanent},
		{"gcs 429", &googleapi.Error{Code: 429}, true, ErrTransient},
		{"gcs 412", &googleapi.Error{Code: 412}, true, ErrPreconditionFailed},
		{"gcs 503", fmt.Errorf("wrapped: %w", &googleapi.Error{Code: 503}), false, ErrTransient},
		{"dial read", dial, false, ErrTransient},
		{"dial write", dial, true, ErrTransient}, // never sent
		{"reset read", read, false, ErrTransient},
		{"reset write", read, true, ErrOutcomeUnknown},
		{"deadline write", context.DeadlineExceeded, true, ErrOutcomeUnknown},
		{"deadline read", context.DeadlineExceeded, false, ErrTransient},
		{"unknown write", errors.New("EOF"), true, ErrOutcomeUnknown},
	}
	for _, c := range cases {
		if got := classify(c.err, c.write); got != c.want {
			t.Errorf("%s: classify = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestValidKey(t *testing.T) {
	for _, k := range []string{"a", "a/b", "t/_versions/00000000000000000001.manifest", "a b/ü", ".hidden", "a..b"} {
		if err := validKey(k); err != nil {
			t.Errorf("validKey(%q) = %v, want nil", k, err)
		}
	}
	for _, k := range []string{"", "/a", "a/", "a//b", ".", "..", "a/./b", "a/../b", "a\x00", "\xff"} {
		if err := validKey(k); err == nil {
			t.Errorf("validKey(%q) = nil, want an error", k)
		}
	}
}

func TestRedact(t *testing.T) {
	got := Redact("s3://user:pw@bkt/p?region=us-east-1&secret_access_key=abc&session_token=xyz")
	if strings.Contains(got, "abc") || strings.Contains(got, "xyz") || strings.Contains(got, "pw") || !strings.Contains(got, "region=us-east-1") {
		t.Fatalf("Redact = %s", got)
	}
}

func TestSplitBlobURL(t *testing.T) {
	cases := []struct{ in, bucket, prefix string }{
		{"s3://bkt?region=r", "s3://bkt?region=r", ""},
		{"s3://bkt/some/prefix?region=r", "s3://bkt?region=r", "some/prefix/"},
		{"s3://bkt/some/?prefix=more/&region=r", "s3://bkt?region=r", "some/more/"},
		{"gs://bkt/", "gs://bkt", ""},
	}
	for _, c := range cases {
		u, _ := url.Parse(c.in)
		b, p := splitBlobURL(u)
		if b.String() != c.bucket || p != c.prefix {
			t.Errorf("splitBlobURL(%s) = %s, %q; want %s, %q", c.in, b, p, c.bucket, c.prefix)
		}
	}
}

func TestRetryStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	opts := Options{Retries: 1000, BaseBackoff: 5 * time.Millisecond}.withDefaults()
	n := 0
	start := time.Now()
	err := retry(ctx, opts, func(context.Context) error {
		n++
		if n == 3 {
			cancel()
		}
		return &Error{Class: ErrTransient}
	})
	if !errors.Is(err, ErrTransient) || n != 3 {
		t.Fatalf("retry = %v after %d attempts, want ErrTransient after 3", err, n)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("retry took %v after the context ended", el)
	}
	n = 0
	err = retry(context.Background(), opts, func(context.Context) error { n++; return &Error{Class: ErrPermanent} })
	if !errors.Is(err, ErrPermanent) || n != 1 {
		t.Fatalf("a permanent error was retried: %v after %d attempts", err, n)
	}
}

func TestDetailKeepsOneClass(t *testing.T) {
	inner := &Error{Op: OpGet, Store: "mem://x", Key: "k", Class: ErrTransient, Err: context.DeadlineExceeded}
	outer := errorNamer{op: OpPutIfAbsent, store: "mem://x", key: "k"}.fail(ErrOutcomeUnknown, detail(inner))
	if errors.Is(outer, ErrTransient) || !errors.Is(outer, ErrOutcomeUnknown) || !errors.Is(outer, context.DeadlineExceeded) {
		t.Fatalf("outer error %v: classes wrong or cause lost", outer)
	}
}

func TestOptionsDefaults(t *testing.T) {
	o := Options{}.withDefaults()
	if o.Retries != 5 || o.BaseBackoff != 20*time.Millisecond || o.MaxBackoff != 2*time.Second {
		t.Fatalf("defaults %+v", o)
	}
	if o := (Options{Retries: -1}).withDefaults(); o.Retries != 0 {
		t.Fatalf("Retries -1 gave %d, want 0", o.Retries)
	}
}

func TestRequestsArithmetic(t *testing.T) {
	var c Counters
	c.add(OpGet)
	before := c.Snapshot()
	c.add(OpGet)
	c.add(OpList)
	c.read(7)
	d := c.Snapshot().Sub(before)
	if d.ByOp[OpGet] != 1 || d.ByOp[OpList] != 1 || d.Total() != 2 || d.BytesRead != 7 || d.String() != "get=1 list=1" {
		t.Fatalf("delta %v (%+v)", d, d)
	}
	c.reset()
	if c.Snapshot().Total() != 0 {
		t.Fatal("reset left counts")
	}
}
