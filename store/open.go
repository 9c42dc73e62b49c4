package store

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"cloud.google.com/go/storage"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/logging"
	"gocloud.dev/blob"
	"gocloud.dev/blob/gcsblob" // gs:// URLs
	"gocloud.dev/blob/s3blob"
	"gocloud.dev/gcp"
	"golang.org/x/oauth2/google"
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
		return nil, &Error{Op: OpOpen, Store: storeURL, Class: openerClass(err), Err: err}
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
	b, err := openGCSBucket(ctx, bu)
	if err != nil {
		return nil, &Error{Op: OpOpen, Store: storeURL, Class: openerClass(err), Err: err}
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

// openerClass classifies a failure of gocloud's URL opener: a query parameter it does not
// know (or a value it cannot parse) is a malformed URL, ErrInvalidURL; anything else
// (loading the AWS configuration, say) is ErrPermanent. gocloud's errors carry no type
// for this, only their text.
func openerClass(err error) error {
	m := err.Error()
	if strings.Contains(m, "unknown query parameter") || strings.Contains(m, "invalid query parameter") || strings.Contains(m, "invalid value for ") || strings.Contains(m, "for query parameter") {
		return ErrInvalidURL
	}
	return ErrPermanent
}

// openGCSBucket opens a gs:// bucket URL. gocloud's default opener, finding no Google
// default credentials, prints "Warning: unable to load GCP Default Credentials: …" on
// the process's standard output (fmt.Printf), which would land in a query's CSV or a
// --json report; it then goes on with empty credentials. Without default credentials
// this opens the bucket the same way, silently: requests go out unauthenticated, and a
// bucket that needs credentials refuses them (shale doctor says what to set). With an
// emulator (STORAGE_EMULATOR_HOST), default credentials, or universe_domain= the default
// opener is used as it is.
func openGCSBucket(ctx context.Context, bu *url.URL) (*blob.Bucket, error) {
	if os.Getenv("STORAGE_EMULATOR_HOST") != "" || os.Getenv("STORAGE_EMULATOR_HOST_GRPC") != "" || bu.Query().Has("universe_domain") {
		return blob.OpenBucket(ctx, bu.String())
	}
	if _, err := gcp.DefaultCredentials(ctx); err == nil {
		return blob.OpenBucket(ctx, bu.String())
	}
	creds, err := google.CredentialsFromJSON(ctx, []byte(`{"type": "service_account"}`))
	if err != nil {
		return nil, fmt.Errorf("open bucket %v: empty credentials: %w", bu, err)
	}
	client, err := gcp.NewHTTPClient(gcp.DefaultTransport(), creds.TokenSource)
	if err != nil {
		return nil, fmt.Errorf("open bucket %v: %w", bu, err)
	}
	o := &gcsblob.URLOpener{Client: client, TokenSource: gcp.CredentialsTokenSource(creds)}
	return o.OpenBucketURL(ctx, bu)
}
