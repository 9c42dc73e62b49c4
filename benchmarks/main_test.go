package benchmarks

import (
	"fmt"
	"os"
	"testing"

	"github.com/shale-db/shale/coord"
)

// testEtcd is one real embedded etcd shared by the package's tests and benchmarks.
var testEtcd *coord.Embedded

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shale-benchmarks-etcd-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testEtcd, err = coord.StartEmbedded(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	closeBenchFixture()
	closeServeFixtures()
	testEtcd.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}
