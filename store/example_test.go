package store_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/shale-db/shale/store"
)

// Open a store by URL, create an object with put-if-absent, lose a second put-if-absent of
// the same key, and branch on the error classes with errors.Is. An s3://bucket/prefix or
// gs://bucket/prefix URL works the same way; mem://name lives as long as the process.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "store-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(ctx, "file://"+dir, store.Options{})
	if err != nil {
		log.Fatal(err) // a *store.Error; errors.Is(err, store.ErrPermanent) for a bad URL
	}
	defer st.Close()

	if err := st.PutIfAbsent(ctx, "t/_versions/1", []byte("first")); err != nil {
		log.Fatal(err)
	}
	// Exactly one writer of a key wins, across processes.
	err = st.PutIfAbsent(ctx, "t/_versions/1", []byte("second"))
	fmt.Println("second put-if-absent lost:", errors.Is(err, store.ErrPreconditionFailed))

	b, err := st.GetRange(ctx, "t/_versions/1", 1, 3) // bytes 1..3
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("range read: %q\n", b)

	_, err = st.Get(ctx, "t/_versions/2")
	fmt.Println("missing object:", errors.Is(err, store.ErrNotFound))
	var se *store.Error
	if errors.As(err, &se) {
		fmt.Println("error names the op and key:", se.Op, se.Key)
	}

	// Every request attempt is counted (Open's probe is not); the losing put-if-absent read
	// the key back (one head: the sizes differ) to tell a lost race from its own landing.
	fmt.Println("requests:", st.Counters().Snapshot())
	// Output:
	// second put-if-absent lost: true
	// range read: "irs"
	// missing object: true
	// error names the op and key: get t/_versions/2
	// requests: get=1 get_range=1 head=1 put_if_absent=2
}
