package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/shale-db/shale/coord"
	"github.com/shale-db/shale/internal/storetest"
	"github.com/shale-db/shale/store"
)

// plantedSecret is a credential planted in every store URL and etcd endpoint of
// TestCredentialsNeverPrintedByAnyCommand.
const plantedSecret = "PLANTEDs3cretQz81"

func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Every command of the CLI, run with an S3 store URL and an etcd endpoint that both
// carry a planted secret (the S3 secret access key and the etcd password), succeeding
// and failing (dead store, dead etcd, an unknown secret parameter, credentials nested in
// the endpoint), with and without --json: the secret appears on no stdout, no stderr,
// in no file of the state directory, in no object of the store and in no etcd key or
// value; and the AWS SDK writes nothing to stderr.
func TestCredentialsNeverPrintedByAnyCommand(t *testing.T) {
	e := freshEnv(t)
	etcdSrv, err := coord.StartEmbedded(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer etcdSrv.Close()
	srv := storetest.NewS3Server(t, storetest.S3Options{})
	q := url.Values{}
	q.Set("endpoint", srv.URL)
	q.Set("use_path_style", "true")
	q.Set("region", "us-east-1")
	q.Set("request_checksum_calculation", "when_required")
	goodStore := "s3://AKIDPLANTED:" + plantedSecret + "@" + storetest.S3Bucket + "/planted?" + q.Encode()
	goodEtcd := strings.Replace(etcdSrv.Endpoints()[0], "http://", "http://root:"+plantedSecret+"@", 1)
	dead := deadAddr(t)
	dq := url.Values{}
	for k, v := range q {
		dq[k] = v
	}
	dq.Set("endpoint", "http://"+dead)
	deadStore := "s3://AKIDPLANTED:" + plantedSecret + "@" + storetest.S3Bucket + "/planted?" + dq.Encode()
	deadEtcd := "http://root:" + plantedSecret + "@" + dead
	badParam := goodStore + "&secret_access_key=" + plantedSecret
	nested := "s3://" + storetest.S3Bucket + "?anonymous=true&region=us-east-1&use_path_style=true&endpoint=" +
		url.QueryEscape("http://u:"+plantedSecret+"@"+dead)

	csvFile := e.file("rides.csv", "id,city\n1,Oslo\n2,Lima\n3,Oslo\n")
	pq := filepath.Join(e.dir, "flights-5k.parquet")
	flightsSlice(t, pq, 5000)
	const tbl = "planted"
	// One scenario per command, in an order in which each succeeds.
	scenarios := [][]string{
		{"doctor"},
		{"create", tbl, "--schema", "id:int64,city:string"},
		{"import", csvFile, "--table", tbl},
		{"query", tbl, "--where", "city = 'Oslo'"},
		{"update", tbl, "--set", "city='Rome'", "--where", "id = 1"},
		{"delete", tbl, "--where", "id = 2"},
		{"wal", "append", csvFile, "--table", tbl},
		{"wal", "status", tbl},
		{"wal", "scan"},
		{"wal", "merge", tbl}, // the last of a command's scenarios is the one its failure paths run
		{"versions", tbl},
		{"inspect", tbl},
		{"config", tbl, "shale.write.compression=lz4"},
		{"status"},
		{"verify", tbl},
		{"compact", tbl},
		{"recover", tbl},
		{"repair", tbl},
		{"gc", tbl, "--dry-run"},
		{"demo", "--data", pq, "--table", "planted_demo"},
		{"bench", "--suites", "import", "--reps", "1", "--data", "", "--rows", "1000"},
		{"export", tbl, "--format", "csv"},
		{"index", "create", tbl, "--column", "id"},
		{"why", tbl},
		{"serve", "policy", tbl, "--set", "min_generations=4"},
		{"serve", "retry", tbl},
		{"serve", "--once"},
		{"drop", tbl},
	}
	scenario := map[string][]string{}
	for _, s := range scenarios {
		scenario[s[0]] = s
	}
	var names []string
	for _, c := range newApp(io.Discard, io.Discard).rootCommand().Commands() {
		names = append(names, c.Name())
		if scenario[c.Name()] == nil {
			// A command added since: run it with a table argument, which covers at least
			// its argument checks and its failure paths.
			t.Logf("no planted-secret scenario for command %q: running it with a table argument", c.Name())
			scenario[c.Name()] = []string{c.Name(), tbl}
			scenarios = append(scenarios, scenario[c.Name()])
		}
	}
	slices.Sort(names)

	runs := 0
	check := func(what string, r result) {
		t.Helper()
		runs++
		if os.Getenv("PLANTED_LOG") != "" { // PLANTED_LOG=1 go test -v -run … shows every run
			t.Logf("%s: %v", what, r)
		}
		for _, out := range []string{r.stdout, r.stderr} {
			if strings.Contains(out, plantedSecret) {
				t.Errorf("%s leaks the secret:\n%v", what, r)
			}
		}
		for _, noise := range []string{"SDK 20", "DEBUG", "WARN"} {
			if strings.Contains(r.stderr, noise) {
				t.Errorf("%s: library output on stderr:\n%s", what, r.stderr)
			}
		}
	}
	run := func(storeURL, etcdEP string, json bool, args []string) result {
		a := append(append([]string{}, args...), "--store", storeURL, "--etcd", etcdEP)
		if json {
			a = append(a, "--json")
		}
		return e.runEnv(s3Env, a...)
	}
	// Success paths (the --json rerun of create, import and drop fails: also checked).
	for _, s := range scenarios {
		for _, json := range []bool{false, true} {
			r := run(goodStore, goodEtcd, json, s)
			check(fmt.Sprintf("%q (json %v)", s, json), r)
			if !json && r.code != 0 && slices.Contains(names, s[0]) && scenario[s[0]][0] == s[0] && s[0] != "demo" {
				t.Errorf("%q did not succeed: %v", s, r)
			}
		}
	}
	// Failure paths of every command.
	for i, name := range names {
		s := scenario[name]
		for _, json := range []bool{false, true} {
			for _, c := range []struct{ what, store, etcd string }{
				{"dead store", deadStore, goodEtcd},
				{"dead etcd", goodStore, deadEtcd},
			} {
				r := run(c.store, c.etcd, json, s)
				check(fmt.Sprintf("%q with a %s (json %v)", s, c.what, json), r)
				if r.code == 0 && name != "doctor" {
					t.Errorf("%q with a %s succeeded: %v", s, c.what, r)
				}
			}
		}
		json := i%2 == 0
		check(fmt.Sprintf("%q with a secret parameter", s), run(badParam, goodEtcd, json, s))
		check(fmt.Sprintf("%q with credentials nested in the endpoint", s), run(nested, goodEtcd, !json, s))
	}
	t.Logf("%d commands, %d runs", len(names), runs)

	// Nothing the commands left behind holds the secret: the state directory (etcd, logs),
	// the working directory, the store's objects, etcd's keys and values.
	for _, dir := range []string{e.home, e.dir} {
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), plantedSecret) {
				t.Errorf("%s holds the secret", p)
			}
			return nil
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := store.Open(ctx, srv.StoreURL, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	objs, err := st.List(ctx, "", 0)
	if err != nil || len(objs) == 0 {
		t.Fatalf("store objects: %d, %v", len(objs), err)
	}
	for _, o := range objs {
		if b, err := st.Get(ctx, o.Key); err != nil || strings.Contains(string(b), plantedSecret) || strings.Contains(o.Key, plantedSecret) {
			t.Errorf("object %s: holds the secret or unreadable (%v)", o.Key, err)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: etcdSrv.Endpoints(), DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	kvs, err := cli.Get(ctx, "", clientv3.WithPrefix())
	if err != nil || len(kvs.Kvs) == 0 {
		t.Fatalf("etcd keys: %v, %v", kvs, err)
	}
	for _, kv := range kvs.Kvs {
		if strings.Contains(string(kv.Key)+string(kv.Value), plantedSecret) {
			t.Errorf("etcd key %s holds the secret", kv.Key)
		}
	}
}
