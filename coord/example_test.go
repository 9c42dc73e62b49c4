package coord_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/shale-db/shale/coord"
)

// Run etcd inside this process, with its data in a state directory the program owns, and
// hand its client to engine.Options.Etcd. Closing the client stops the server; its data
// stays in the directory for the next start.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "coord-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	etcd, err := coord.Connect(ctx, coord.Config{InProcess: true, StateDir: dir})
	if err != nil {
		log.Fatal(err) // errors.Is(err, coord.ErrStateDirBusy) if another process serves dir
	}
	defer etcd.Close()

	// etcd.Etcd() is what engine.Open takes: engine.Options{Etcd: etcd.Etcd()}.
	if _, err := etcd.Etcd().Put(ctx, "/example/key", "value"); err != nil {
		log.Fatal(err)
	}
	resp, err := etcd.Etcd().Get(ctx, "/example/key")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s = %s\n", resp.Kvs[0].Key, resp.Kvs[0].Value)
	fmt.Println("endpoints:", len(etcd.Endpoints()))
	// Output:
	// /example/key = value
	// endpoints: 1
}

// Join an existing etcd cluster; several processes and machines then share the same
// tables. (Not run: it needs a cluster.)
func ExampleConnect_cluster() {
	ctx := context.Background()
	etcd, err := coord.Connect(ctx, coord.Config{
		Endpoints:   []string{"etcd-1:2379", "etcd-2:2379", "etcd-3:2379"},
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		log.Fatal(err) // wraps coord.ErrConnect when no endpoint answers
	}
	defer etcd.Close()
	_ = etcd.Etcd() // engine.Options{Etcd: etcd.Etcd()}
}
