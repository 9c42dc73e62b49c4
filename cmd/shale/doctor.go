package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/engine"
	"github.com/shale-db/shale/store"
)

// Statuses of a doctor check.
const (
	checkOK   = "ok"
	checkFail = "fail"
	checkSkip = "skip" // not run: an earlier check failed, or it does not apply
)

// maxClockSkew is the largest difference doctor accepts between the store's clock and
// this machine's: garbage collection compares object times with the local clock, so a
// skew eats into its grace period (whose safe minimum is 1 minute, see minSafeGrace).
const maxClockSkew = 30 * time.Second

// doctorCheck is one line of `shale doctor`.
type doctorCheck struct {
	Target string `json:"target"` // "store" or "etcd"
	Name   string `json:"name"`
	Status string `json:"status"` // ok, fail or skip
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"` // what to do, for a failed check
}

// doctorReport is the whole result (--json prints it).
type doctorReport struct {
	Store  string        `json:"store"` // redacted
	Etcd   []string      `json:"etcd"`  // redacted endpoints; empty for the embedded default
	OK     bool          `json:"ok"`
	Checks []doctorCheck `json:"checks"`
}

func (r *doctorReport) add(target, name, status, detail, fix string) {
	r.Checks = append(r.Checks, doctorCheck{Target: target, Name: name, Status: status, Detail: detail, Fix: fix})
}

func (a *app) doctorCommand() *cobra.Command {
	var skipLarge bool
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the store and etcd: reachability, credentials, put-if-absent, clock skew",
		Long: `Checks what shale needs from the store (--store, default the local store under the
state directory) and from etcd (--etcd, default the embedded server), and says what to fix:

  store  reachable        one LIST; a missing bucket or directory, a refused connection
         credentials      where they come from, and whether the store accepted them
         read/write       one PUT, HEAD, GET, ranged GET and DELETE under _probe/
         put-if-absent    a second conditional write of the same key must be refused
         large objects    the same with 16 MiB + 1 byte objects (S3 multipart uploads,
                          GCS resumable uploads); the result is recorded in the store
                          (_shale/preconditions.json) if it was not yet, and a record that
                          disagrees is reported
         clock skew       the store's time of the written object against this machine's
  etcd   reachable        one read; the server version

Each check prints OK, FAIL (with a fix) or SKIP (not run because an earlier check failed
or it does not apply). The exit status is 1 if any check failed. Probe objects are
deleted; a local store directory that does not exist is not created. See docs/storage.md.`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			rep := &doctorReport{Store: store.Redact(a.storeURL()), Etcd: coord.RedactEndpoints(a.etcdEndpoints()), Checks: []doctorCheck{}}
			a.doctorStore(ctx, rep, !skipLarge)
			a.doctorEtcd(ctx, rep)
			failed := 0
			for _, c := range rep.Checks {
				if c.Status == checkFail {
					failed++
				}
			}
			rep.OK = failed == 0
			if a.jsonOut {
				if err := a.printJSON(rep); err != nil {
					return err
				}
			} else {
				a.printDoctor(rep)
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d checks failed", failed, len(rep.Checks))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&skipLarge, "skip-large", false, "skip the large-object put-if-absent check (it uploads about 32 MiB)")
	return cmd
}

func (a *app) printDoctor(rep *doctorReport) {
	etcd := "embedded (state directory " + a.home + ")"
	if len(rep.Etcd) > 0 {
		etcd = strings.Join(rep.Etcd, ",")
	}
	target := ""
	for _, c := range rep.Checks {
		if c.Target != target {
			target = c.Target
			if target == "store" {
				a.printf("store %s\n", rep.Store)
			} else {
				a.printf("etcd %s\n", etcd)
			}
		}
		a.printf("  %-4s  %-14s %s\n", strings.ToUpper(c.Status), c.Name, c.Detail)
		if c.Fix != "" {
			a.printf("        fix: %s\n", c.Fix)
		}
	}
	if rep.OK {
		a.printf("all checks passed\n")
	}
}

// doctorStore runs the store checks. It opens the store read-only (nothing is created)
// and runs each probe itself, so every one is reported.
func (a *app) doctorStore(ctx context.Context, rep *doctorReport, large bool) {
	const T = "store"
	raw := a.storeURL()
	u, _ := url.Parse(raw) // already checked by store.ParseURL
	remote := u.Scheme == "s3" || u.Scheme == "gs"
	skipRest := func(from int, why string) {
		names := []string{"reachable", "credentials", "read/write", "put-if-absent", "large objects", "clock skew"}
		for _, n := range names[from:] {
			if n == "credentials" && !remote {
				continue
			}
			rep.add(T, n, checkSkip, why, "")
		}
	}
	s, err := store.Open(ctx, raw, a.storeOptions(store.Options{ReadOnly: true, Retries: 2, AttemptTimeout: 20 * time.Second}))
	switch {
	case err != nil && errors.Is(err, store.ErrNotFound) && a.storeFlag == "":
		rep.add(T, "reachable", checkOK, "the default store does not exist yet: the first write (shale create or shale import) creates it", "")
		skipRest(1, "no store yet")
		return
	case err != nil && errors.Is(err, store.ErrNotFound):
		rep.add(T, "reachable", checkFail, oneLine(err.Error()),
			fmt.Sprintf("create the directory (mkdir -p %s) or correct --store", u.Path))
		skipRest(1, "the store is not reachable")
		return
	case err != nil:
		rep.add(T, "reachable", checkFail, oneLine(err.Error()), storeFix(err, u))
		skipRest(1, "the store is not reachable")
		return
	}
	defer s.Close()

	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	start := time.Now()
	_, err = s.List(cctx, "", 1)
	cancel()
	creds := credentialSource(u)
	if err != nil {
		if credentialError(err) {
			rep.add(T, "reachable", checkSkip, "the store refused the credentials", "")
			rep.add(T, "credentials", checkFail, creds+": "+oneLine(err.Error()), storeFix(err, u))
			skipRest(2, "the credentials were refused")
			return
		}
		rep.add(T, "reachable", checkFail, oneLine(err.Error()), storeFix(err, u))
		skipRest(1, "the store is not reachable")
		return
	}
	detail := fmt.Sprintf("listed in %s", seconds(time.Since(start)))
	if id, err := s.Get(ctx, engine.StoreIDKey); err == nil {
		detail += fmt.Sprintf("; store id %s", strings.TrimSpace(string(id)))
	} else if errors.Is(err, store.ErrNotFound) {
		detail += "; no store id yet (no table published from it)"
	}
	rep.add(T, "reachable", checkOK, detail, "")
	if remote {
		rep.add(T, "credentials", checkOK, creds+" (accepted for reading)", "")
	}

	// Write access and the store's clock: one object under the probe prefix, which gc
	// collects if this process dies before deleting it.
	var rnd [8]byte
	rand.Read(rnd[:])
	key := store.ProbeKeyPrefix + "doctor-" + hex.EncodeToString(rnd[:])
	body := []byte("shale doctor")
	before := time.Now()
	err = s.Put(ctx, key, body)
	after := time.Now()
	var info store.ObjectInfo
	if err == nil {
		info, err = s.Head(ctx, key)
	}
	readErr := err
	if err == nil {
		var b []byte
		if b, err = s.Get(ctx, key); err == nil && string(b) != string(body) {
			err = fmt.Errorf("get %s returned %q, want %q", key, b, body)
		}
		if err == nil {
			if b, err = s.GetRange(ctx, key, 6, 3); err == nil && string(b) != string(body[6:9]) {
				err = fmt.Errorf("range get of %s returned %q, want %q", key, b, body[6:9])
			}
		}
		readErr = err
	}
	if derr := s.Delete(ctx, key); err == nil {
		err = derr
	}
	if err != nil {
		fix := storeFix(err, u) + writeFix(u)
		if readErr != nil && errors.Is(readErr, store.ErrNotFound) && os.Getenv("STORAGE_EMULATOR_HOST") != "" {
			fix = "the object was written and listed but cannot be read back: start fake-gcs-server with -public-host set to the host:port of STORAGE_EMULATOR_HOST (the storage client downloads from http://HOST/BUCKET/OBJECT)"
		}
		rep.add(T, "read/write", checkFail, oneLine(err.Error()), fix)
		skipRest(3, "the store cannot be written and read back")
		return
	}
	rep.add(T, "read/write", checkOK, "put, head, get, range get and delete of "+key, "")

	pctx, cancel := context.WithTimeout(ctx, time.Minute)
	err = store.ProbePreconditions(pctx, s)
	cancel()
	switch {
	case errors.Is(err, store.ErrPreconditionsIgnored):
		rep.add(T, "put-if-absent", checkFail, "a second put-if-absent of the same key succeeded",
			"this store ignores conditional writes (S3 If-None-Match, GCS ifGenerationMatch=0), so two writers could both commit the same version: use a store that honours them (docs/storage.md)")
	case err != nil:
		rep.add(T, "put-if-absent", checkFail, oneLine(err.Error()), storeFix(err, u))
	default:
		rep.add(T, "put-if-absent", checkOK, "a second conditional write of the same key was refused", "")
	}

	a.doctorLarge(ctx, rep, s, large)

	// The store stamps the object with its own clock; S3's Last-Modified has 1 s resolution.
	mid := before.Add(after.Sub(before) / 2)
	skew := info.ModTime.Sub(mid)
	slack := after.Sub(before)/2 + time.Second
	abs := max(skew, -skew)
	switch {
	case info.ModTime.IsZero():
		rep.add(T, "clock skew", checkSkip, "the store reports no modification times", "")
	case abs > maxClockSkew+slack:
		rep.add(T, "clock skew", checkFail,
			fmt.Sprintf("the store's clock is %s %s this machine's", abs.Round(time.Second), map[bool]string{true: "ahead of", false: "behind"}[skew > 0]),
			fmt.Sprintf("synchronise this machine's clock (NTP, chrony, systemd-timesyncd): gc compares object times with it, so a skew over %s eats into its grace period", maxClockSkew))
	default:
		rep.add(T, "clock skew", checkOK, fmt.Sprintf("within %s of this machine's clock", (abs+slack).Round(time.Second)), "")
	}
}

// doctorLarge runs the large-object probe and compares it with the store's record.
func (a *app) doctorLarge(ctx context.Context, rep *doctorReport, s store.Store, large bool) {
	const T = "store"
	if !store.LargeWritePath(s) {
		rep.add(T, "large objects", checkOK, "not needed: this store writes objects of every size the same way", "")
		return
	}
	rec, recErr := store.ReadPreconditions(ctx, s)
	if !large {
		detail := "skipped (--skip-large)"
		if recErr == nil {
			detail += fmt.Sprintf("; the store's record says %s", honours(rec.LargeObjects))
		}
		rep.add(T, "large objects", checkSkip, detail, "")
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	checked := time.Now()
	err := store.ProbeLargePreconditions(pctx, s)
	cancel()
	if err != nil && !errors.Is(err, store.ErrPreconditionsIgnored) {
		rep.add(T, "large objects", checkFail, oneLine(err.Error()), "the probe uploads two 16 MiB objects: check the connection and the store's upload limits")
		return
	}
	found := err == nil
	how := "uploaded in parts" // S3's multipart upload
	if strings.HasPrefix(s.URL(), "gs://") {
		how = "a resumable upload"
	}
	detail := fmt.Sprintf("a second conditional write of a %s-byte object (%s) was refused", thousands(store.LargeProbeSize), how)
	if !found {
		detail = fmt.Sprintf("a second conditional write of a %s-byte object (%s) succeeded", thousands(store.LargeProbeSize), how)
	}
	switch {
	case errors.Is(recErr, store.ErrNotFound):
		if _, err := store.RecordPreconditions(ctx, s, found, checked); err == nil {
			detail += "; recorded in " + store.PreconditionsKey
		}
	case recErr != nil:
		rep.add(T, "large objects", checkFail, detail+"; "+oneLine(recErr.Error()),
			fmt.Sprintf("delete %s so the next write probes again", store.PreconditionsKey))
		return
	case rec.LargeObjects != found:
		rep.add(T, "large objects", checkFail,
			fmt.Sprintf("%s, but %s (written %s) says the store %s", detail, store.PreconditionsKey, rec.Checked.Format(time.RFC3339), honours(rec.LargeObjects)),
			fmt.Sprintf("the server changed since the record was written: delete %s so the next write probes again", store.PreconditionsKey))
		return
	}
	if !found {
		rep.add(T, "large objects", checkFail, detail,
			"this server ignores If-None-Match on CompleteMultipartUpload, so shale refuses to write to it (reading works): use S3 itself or a server that keeps the precondition on multipart uploads (docs/storage.md)")
		return
	}
	rep.add(T, "large objects", checkOK, detail, "")
}

func honours(ok bool) string {
	if ok {
		return "honours put-if-absent on large objects"
	}
	return "ignores put-if-absent on large objects"
}

// doctorEtcd checks that etcd answers.
func (a *app) doctorEtcd(ctx context.Context, rep *doctorReport) {
	const T = "etcd"
	start := time.Now()
	c, err := coord.Connect(ctx, coord.Config{Endpoints: a.etcdEndpoints(), StateDir: a.home, DialTimeout: 5 * time.Second})
	if err != nil {
		fix := "check --etcd: host:port of a cluster member reachable from here, and user:password@ if the cluster has authentication on"
		if len(a.etcdEndpoints()) == 0 {
			fix = "the embedded etcd did not start: see " + a.home + "/etcd/server.log"
		}
		rep.add(T, "reachable", checkFail, oneLine(err.Error()), fix)
		return
	}
	defer c.Close()
	eps := c.Endpoints()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := c.Etcd().Status(sctx, eps[0])
	if err != nil {
		rep.add(T, "reachable", checkFail, oneLine(err.Error()), "the member at "+eps[0]+" does not answer status requests: check the cluster's health (etcdctl endpoint health)")
		return
	}
	rep.add(T, "reachable", checkOK, fmt.Sprintf("etcd %s at %s, answered in %s", st.Version, strings.Join(eps, ","), seconds(time.Since(start))), "")
}

// credentialSource says where the store's credentials come from (never the secret).
func credentialSource(u *url.URL) string {
	q := u.Query()
	switch u.Scheme {
	case "s3":
		switch {
		case u.User != nil:
			return "credentials from the store URL (access key " + u.User.Username() + ")"
		case strings.EqualFold(q.Get("anonymous"), "true"):
			return "anonymous (anonymous=true)"
		case os.Getenv("AWS_ACCESS_KEY_ID") != "":
			return "credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
		case q.Get("profile") != "":
			return "credentials from profile " + q.Get("profile") + " of the shared AWS config"
		case os.Getenv("AWS_PROFILE") != "":
			return "credentials from profile " + os.Getenv("AWS_PROFILE") + " (AWS_PROFILE) of the shared AWS config"
		default:
			return "credentials from the AWS default chain (~/.aws files, SSO, web identity, instance role)"
		}
	case "gs":
		switch {
		case os.Getenv("STORAGE_EMULATOR_HOST") != "":
			return "no credentials: the emulator at STORAGE_EMULATOR_HOST=" + os.Getenv("STORAGE_EMULATOR_HOST")
		case strings.EqualFold(q.Get("anonymous"), "true"):
			return "anonymous (anonymous=true)"
		case os.Getenv("GOOGLE_APPLICATION_CREDENTIALS") != "":
			return "credentials from GOOGLE_APPLICATION_CREDENTIALS=" + os.Getenv("GOOGLE_APPLICATION_CREDENTIALS")
		default:
			return "application default credentials (gcloud auth application-default login, or the VM's service account)"
		}
	}
	return "none needed"
}

// credentialError reports an error that says the credentials are missing or refused.
func credentialError(err error) bool {
	m := err.Error()
	for _, s := range []string{"get credentials", "failed to refresh cached credentials", "could not find default credentials",
		"no GCS credentials", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "StatusCode: 403", "Error 403", "ExpiredToken"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// storeFix says what to do about a store error.
func storeFix(err error, u *url.URL) string {
	m := err.Error()
	switch {
	case credentialError(err) && u.Scheme == "s3":
		return "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, or ACCESS_KEY_ID:SECRET_ACCESS_KEY@ in the URL) to credentials the server accepts, or add anonymous=true for a server that takes unsigned requests"
	case credentialError(err) && u.Scheme == "gs":
		return "set GOOGLE_APPLICATION_CREDENTIALS to a service account key file or run gcloud auth application-default login; for a local emulator set STORAGE_EMULATOR_HOST=host:port"
	case errors.Is(err, store.ErrNoBucket) || strings.Contains(m, "NoSuchBucket") || strings.Contains(m, "bucket doesn't exist") || (remoteScheme(u) && errors.Is(err, store.ErrNotFound)):
		if u.Scheme == "gs" {
			return fmt.Sprintf("bucket %q does not exist: create it (gcloud storage buckets create gs://%s; on fake-gcs-server POST {\"name\":\"%s\"} to /storage/v1/b) or correct --store", u.Host, u.Host, u.Host)
		}
		return fmt.Sprintf("bucket %q does not exist: create it (aws s3 mb s3://%s, with --endpoint-url for a local server) or correct --store", u.Host, u.Host)
	case strings.Contains(m, "no such host") && u.Scheme == "s3" && !strings.Contains(u.RawQuery, "use_path_style"):
		return "the SDK addressed the bucket as a host name (BUCKET.endpoint): add use_path_style=true for a local or S3-compatible server"
	case strings.Contains(m, "connection refused") || strings.Contains(m, "no such host") || strings.Contains(m, "i/o timeout") || errors.Is(err, store.ErrTransient):
		return "the server cannot be reached: check endpoint= (scheme, host and port) and that the server runs; local servers also need use_path_style=true and region="
	case strings.Contains(m, "unknown query parameter"):
		return "remove the unknown parameter; s3:// takes region, endpoint, use_path_style, anonymous, profile, disable_https, … (docs/storage.md)"
	case u.Scheme == "file":
		return "check that the directory exists and that this user may read and write it"
	}
	return "see docs/storage.md"
}

func writeFix(u *url.URL) string {
	if u.Scheme == "s3" {
		return " (the credentials need s3:PutObject, s3:GetObject, s3:DeleteObject and s3:ListBucket on the bucket and prefix)"
	}
	if u.Scheme == "gs" {
		return " (the credentials need roles/storage.objectAdmin on the bucket)"
	}
	return ""
}

func remoteScheme(u *url.URL) bool { return u.Scheme == "s3" || u.Scheme == "gs" }
