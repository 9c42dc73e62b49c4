//go:build tools

// Package shale pins dependencies that packages will import, so go.mod and go.sum hold them
// before the code that uses them lands. Remove entries as real imports replace them.
package shale

import (
	_ "github.com/RoaringBitmap/roaring/v2"
	_ "github.com/anishathalye/porcupine"
	_ "github.com/apache/arrow-go/v18/arrow/compute"
	_ "github.com/apache/arrow-go/v18/arrow/csv"
	_ "github.com/apache/arrow-go/v18/arrow/ipc"
	_ "github.com/apache/arrow-go/v18/parquet/pqarrow"
	_ "github.com/aws/aws-sdk-go-v2/credentials"
	_ "github.com/aws/aws-sdk-go-v2/service/s3"
	_ "github.com/fsouza/fake-gcs-server/fakestorage"
	_ "github.com/fxamacker/cbor/v2"
	_ "github.com/johannesboyne/gofakes3"
	_ "github.com/johannesboyne/gofakes3/backend/s3mem"
	_ "github.com/klauspost/compress/zstd"
	_ "github.com/oklog/ulid/v2"
	_ "github.com/pingcap/tidb/pkg/parser"
	_ "github.com/pingcap/tidb/pkg/parser/test_driver"
	_ "github.com/schollz/progressbar/v3"
	_ "github.com/spf13/cobra"
	_ "go.etcd.io/etcd/client/v3"
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "go.uber.org/zap"
	_ "gocloud.dev/blob/fileblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/memblob"
	_ "gocloud.dev/blob/s3blob"
)
