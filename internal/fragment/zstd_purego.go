//go:build !cgo || shale_purego

package fragment

// zstdBackend is klauspost/compress when cgo is off or the shale_purego tag is set.
var zstdBackend zstdCodec = klauspostZstd{}

// zstdBackends are the backends compiled into this build, the build's own first.
var zstdBackends = []zstdCodec{klauspostZstd{}}
