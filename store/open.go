package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/logging"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/gcsblob" // gs:// URLs
	"gocloud.dev/blob/s3blob"
)

// splitBlobURL separates the key prefix (the URL path plus any "prefix" query parameter)
// from the bucket URL that gocloud opens.
func splitBlobURL(u *url.URL) (bucketURL *url.URL, prefix string) {
	bu := *u
	q := bu.Query()
	prefix = strings.Trim(u.Path, "/")
	if p := strings.Trim(q.Get("prefix"), "/"); p != "" {
		prefix = strings.Trim(prefix+"/"+p, "/")
	}
	q.Del("prefix")
	bu.Path, bu.RawPath, bu.RawQuery = "", "", q.Encode()
	if prefix != "" {
		prefix += "/"
	}
	return &bu, prefix
}

func withPrefix(b *blob.Bucket, prefix string) *blob.Bucket {
	if prefix == "" {
		return b
	}
	return blob.PrefixedBucket(b, prefix)
}

// openS3URL opens an s3:// URL with gocloud's URL opener (so every parameter it knows
// works), then rebuilds the bucket on a copy of its *s3.Client with the SDK retryer
// replaced by aws.NopRetryer: the store's own retry loop then sees, counts and classifies
// every attempt, and a put-if-absent attempt is never silently repeated by the SDK. The
// copy also logs nothing (the SDK's default logger writes to stderr).
//
// Credentials in the URL (s3://ACCESS_KEY_ID:SECRET_ACCESS_KEY@bucket) replace whatever
// the environment provides; gocloud never sees them.
func openS3URL(ctx context.Context, u *url.URL, opts Options, red redactor) (Store, error) {
	storeURL := Redact(u.String())
	fail := func(err error) error {
		return &Error{Op: OpOpen, Store: storeURL, Class: classify(err, false), Err: err}
	}
	var static aws.CredentialsProvider
	if u.User != nil {
		secret, _ := u.User.Password()
		static = aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(u.User.Username(), secret, ""))
		nu := *u
		nu.User = nil
		u = &nu
	}
	bu, prefix := splitBlobURL(u)
	q := bu.Query()
	var s3opts s3blob.Options
	if v := q.Get("ssetype"); v != "" {
		found := false
		for _, t := range s3types.ServerSideEncryptionAes256.Values() {
			if strings.EqualFold(string(t), v) {
				s3opts.EncryptionType, found = t, true
			}
		}
		if !found {
			return nil, &Error{Op: OpOpen, Store: storeURL, Class: ErrPermanent, Err: fmt.Errorf("invalid ssetype %q", v)}
		}
	}
	s3opts.KMSEncryptionID = q.Get("kmskeyid")

	orig, err := blob.OpenBucket(ctx, bu.String())
	if err != nil {
		return nil, &Error{Op: OpOpen, Store: storeURL, Class: ErrPermanent, Err: err}
	}
	var client *s3.Client
	if !orig.As(&client) {
		orig.Close()
		return nil, fail(errors.New("s3 bucket does not expose an *s3.Client"))
	}
	orig.Close()
	o := client.Options()
	s3opts.RequestChecksumCalculation = o.RequestChecksumCalculation
	noRetry := s3.New(o, func(o *s3.Options) {
		o.Retryer = aws.NopRetryer{}
		o.RetryMaxAttempts = 0
		if static != nil {
			o.Credentials = static
		}
		// The SDK logs to the process's stderr (for instance a DEBUG "Response has no
		// supported checksum" line for every ranged GET): a user sees only Shale's own
		// messages, and every failure reaches the caller as a classified error instead.
		o.Logger = logging.Nop{}
		o.ClientLogMode = 0
		o.DisableLogOutputChecksumValidationSkipped = true
	})
	b, err := s3blob.OpenBucket(ctx, noRetry, bu.Host, &s3opts)
	if err != nil {
		return nil, fail(err)
	}
	return &bucketStore{bucket: withPrefix(b, prefix), url: storeURL, opts: opts, redact: red, largeWritePath: true}, nil
}

// openGSURL opens a gs:// URL with gocloud's URL opener and turns the storage client's
// retries off (see openS3URL for why).
func openGSURL(ctx context.Context, u *url.URL, opts Options, red redactor) (Store, error) {
	storeURL := Redact(u.String())
	bu, prefix := splitBlobURL(u)
	b, err := blob.OpenBucket(ctx, bu.String())
	if err != nil {
		return nil, &Error{Op: OpOpen, Store: storeURL, Class: ErrPermanent, Err: err}
	}
	disableGCSRetries(b)
	return &bucketStore{bucket: withPrefix(b, prefix), url: storeURL, opts: opts, redact: red, largeWritePath: true}, nil
}

// disableGCSRetries turns off the retries of a GCS bucket's storage client. gcsblob makes
// a new bucket handle per call, so the change applies to every later call. Other buckets
// are left alone.
func disableGCSRetries(b *blob.Bucket) {
	var c *storage.Client
	if b.As(&c) && c != nil {
		c.SetRetry(storage.WithPolicy(storage.RetryNever))
	}
}
