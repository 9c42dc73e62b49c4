package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/store"
)

// s3Env is the environment of commands that reach the fake S3 servers: never ask the
// EC2 metadata service for credentials (the store URLs carry credentials or
// anonymous=true anyway).
var s3Env = []string{"AWS_EC2_METADATA_DISABLED=true"}

// doctorJSON runs `shale doctor --json` and returns its report and exit status.
func doctorJSON(e *env, extra []string, args ...string) (doctorReport, result) {
	e.t.Helper()
	r := e.runEnv(append(append([]string{}, s3Env...), extra...), append([]string{"doctor", "--json"}, args...)...)
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		e.t.Fatalf("doctor %q: %v\n%v", args, err, r)
	}
	return rep, r
}

// check returns the named check of a report.
func (r doctorReport) check(t *testing.T, target, name string) doctorCheck {
	t.Helper()
	for _, c := range r.Checks {
		if c.Target == target && c.Name == name {
			return c
		}
	}
	t.Fatalf("no %s check %q in %+v", target, name, r.Checks)
	return doctorCheck{}
}

func requireCheck(t *testing.T, r doctorReport, target, name, status string, want ...string) {
	t.Helper()
	c := r.check(t, target, name)
	if c.Status != status {
		t.Fatalf("%s %s: %+v, want status %s", target, name, c, status)
	}
	for _, w := range want {
		if !strings.Contains(c.Detail+" "+c.Fix, w) {
			t.Fatalf("%s %s: %+v does not mention %q", target, name, c, w)
		}
	}
	if status == checkFail && c.Fix == "" {
		t.Fatalf("%s %s failed without a fix: %+v", target, name, c)
	}
}

// shale doctor passes every check on a store that keeps put-if-absent on small and
// large objects, records the large-object result, and prints OK lines without --json.
func TestDoctorPassesOnAGoodS3Store(t *testing.T) {
	e := sharedEnv(t)
	srv := storetest.NewS3Server(t, storetest.S3Options{})
	rep, r := doctorJSON(e, nil, "--store", srv.StoreURL)
	if r.code != 0 || !rep.OK {
		t.Fatalf("doctor on a good store: %v", r)
	}
	for _, n := range []string{"reachable", "credentials", "read/write", "put-if-absent", "large objects", "clock skew"} {
		requireCheck(t, rep, "store", n, checkOK)
	}
	requireCheck(t, rep, "store", "large objects", checkOK, "refused", "recorded in "+store.PreconditionsKey)
	requireCheck(t, rep, "store", "credentials", checkOK, "anonymous")
	requireCheck(t, rep, "etcd", "reachable", checkOK, "etcd 3.")
	if srv.ConditionalCompletes() == 0 {
		t.Fatal("doctor did not probe with a conditional multipart upload")
	}
	out := e.ok("doctor", "--store", srv.StoreURL)
	for _, w := range []string{"store s3://bkt?", "OK    large objects", "OK    clock skew", "etcd embedded", "all checks passed"} {
		if !strings.Contains(out, w) {
			t.Fatalf("doctor output does not show %q:\n%s", w, out)
		}
	}
	// The second run finds the record and agrees with it.
	rep, _ = doctorJSON(e, nil, "--store", srv.StoreURL)
	requireCheck(t, rep, "store", "large objects", checkOK, "(uploaded in parts) was refused")
}

// A store that honours If-None-Match on small puts but not on CompleteMultipartUpload:
// doctor fails its large-object check and says what to do; the first write finds the
// same (the CLI now runs the check) and refuses the store; reads still work.
func TestDoctorAndWritesRefuseStoreIgnoringLargePreconditions(t *testing.T) {
	e := sharedEnv(t)
	gap := storetest.NewS3Server(t, storetest.S3Options{NoMultipartGuard: true})
	rep, r := doctorJSON(e, nil, "--store", gap.StoreURL)
	if r.code != 1 || rep.OK || !strings.Contains(r.stderr, "1 of 7 checks failed") {
		t.Fatalf("doctor over the multipart gap: %v", r)
	}
	requireCheck(t, rep, "store", "put-if-absent", checkOK)
	requireCheck(t, rep, "store", "large objects", checkFail, "succeeded", "CompleteMultipartUpload", "refuses to write")

	tbl := e.table("gap")
	r = e.runEnv(s3Env, "create", tbl, "--schema", "id:int64", "--store", gap.StoreURL)
	if r.code != 1 || !strings.Contains(r.stderr, "on large (multipart) objects") || !strings.Contains(r.stderr, "refused for writing (reading works)") {
		t.Fatalf("create on the gap store: %v", r)
	}
	if r := e.runEnv(s3Env, "status", "--store", gap.StoreURL); r.code != 0 || !strings.Contains(r.stdout, "no tables") {
		t.Fatalf("status (a read) on the gap store: %v", r)
	}

	// A store that ignores preconditions altogether fails the small check too.
	none := storetest.NewS3Server(t, storetest.S3Options{IgnorePreconditions: true})
	rep, r = doctorJSON(e, nil, "--store", none.StoreURL, "--skip-large")
	if r.code != 1 {
		t.Fatalf("doctor on a store without preconditions: %v", r)
	}
	requireCheck(t, rep, "store", "put-if-absent", checkFail, "succeeded", "two writers could both commit")
	requireCheck(t, rep, "store", "large objects", checkSkip, "--skip-large")
}

// Each kind of misconfiguration fails the right check with a fix.
func TestDoctorSaysWhatToFix(t *testing.T) {
	e := sharedEnv(t)
	srv := storetest.NewS3Server(t, storetest.S3Options{})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()

	rep, _ := doctorJSON(e, nil, "--store", "s3://bkt?anonymous=true&region=us-east-1&use_path_style=true&endpoint=http://"+dead)
	requireCheck(t, rep, "store", "reachable", checkFail, "connection refused", "check endpoint=")
	requireCheck(t, rep, "store", "read/write", checkSkip)

	rep, _ = doctorJSON(e, nil, "--store", strings.Replace(srv.StoreURL, "s3://bkt", "s3://nosuchbucket", 1))
	requireCheck(t, rep, "store", "reachable", checkFail, `bucket "nosuchbucket" does not exist`, "aws s3 mb s3://nosuchbucket")

	rep, _ = doctorJSON(e, nil, "--store", strings.Replace(srv.StoreURL, "anonymous=true", "anonymous=true&bogus=1", 1))
	requireCheck(t, rep, "store", "reachable", checkFail, `unknown query parameter "bogus"`, "remove the unknown parameter")

	missing := filepath.Join(t.TempDir(), "nosuch")
	rep, _ = doctorJSON(e, nil, "--store", "file://"+missing)
	requireCheck(t, rep, "store", "reachable", checkFail, "does not exist", "mkdir -p "+missing)
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("doctor created %s", missing)
	}

	rep, r := doctorJSON(e, nil, "--store", srv.StoreURL, "--skip-large", "--etcd", dead)
	if r.code != 1 {
		t.Fatalf("doctor with a dead etcd: %v", r)
	}
	requireCheck(t, rep, "store", "put-if-absent", checkOK)
	requireCheck(t, rep, "etcd", "reachable", checkFail, dead, "check --etcd")

	// A local store: no large-object path, the same clock.
	dir := t.TempDir()
	rep, r = doctorJSON(e, nil, "--store", "file://"+dir)
	if r.code != 0 {
		t.Fatalf("doctor on a local store: %v", r)
	}
	requireCheck(t, rep, "store", "large objects", checkOK, "not needed")
	// (Deleting an object of a local store leaves its directory, as every writable open's
	// probe does.)
	if got := strings.Join(tree(t, dir), " "); got != store.TempDir+" "+strings.TrimSuffix(store.ProbeKeyPrefix, "/") {
		t.Fatalf("doctor left %v in the store", got)
	}

	// A fresh state directory: the default store does not exist yet, which is fine.
	f := freshEnv(t)
	rep, r = doctorJSON(f, nil)
	if r.code != 0 {
		t.Fatalf("doctor on a fresh state directory: %v", r)
	}
	requireCheck(t, rep, "store", "reachable", checkOK, "does not exist yet")
	if _, err := os.Stat(filepath.Join(f.home, "store")); !os.IsNotExist(err) {
		t.Fatalf("doctor created the default store: %v", err)
	}
}

// gs:// through fake-gcs-server as a separate HTTP server (STORAGE_EMULATOR_HOST), as
// docs/storage.md runs it: doctor passes, and a table can be written and read.
func TestDoctorAndTablesOnGCSEmulator(t *testing.T) {
	e := sharedEnv(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	host := fmt.Sprintf("127.0.0.1:%d", port)
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", Port: uint16(port), PublicHost: host})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: "shale-gcs"})
	env := []string{"STORAGE_EMULATOR_HOST=" + host}
	rep, r := doctorJSON(e, env, "--store", "gs://shale-gcs/tables")
	if r.code != 0 {
		t.Fatalf("doctor on the GCS emulator: %v", r)
	}
	requireCheck(t, rep, "store", "credentials", checkOK, "STORAGE_EMULATOR_HOST")
	requireCheck(t, rep, "store", "large objects", checkOK, "(a resumable upload) was refused")

	tbl := e.table("gcs")
	in := e.file("rides.csv", "id,city\n1,Oslo\n2,Lima\n")
	if r := e.runEnv(env, "import", in, "--table", tbl, "--store", "gs://shale-gcs/tables"); r.code != 0 {
		t.Fatalf("import: %v", r)
	}
	r = e.runEnv(env, "query", tbl, "--where", "city = 'Lima'", "--format", "csv", "--store", "gs://shale-gcs/tables")
	if r.code != 0 || !strings.Contains(r.stdout, "2,Lima") || r.stderr != "" {
		t.Fatalf("query: %v", r)
	}
}
