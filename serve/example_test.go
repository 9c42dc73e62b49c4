package serve_test

import (
	"errors"
	"fmt"

	"github.com/shale-db/shale/manifest"
	"github.com/shale-db/shale/serve"
	"github.com/shale-db/shale/store"
)

// Failures are classified by typed errors, never by their text.
func ExampleClassify() {
	fmt.Println(serve.Classify(fmt.Errorf("merge table %q: %w", "t", store.ErrTransient)))
	fmt.Println(serve.Classify(fmt.Errorf("commit: %w", manifest.ErrConflict)))
	fmt.Println(serve.Classify(fmt.Errorf("read manifest: %w", manifest.ErrCorrupt)))
	fmt.Println(serve.Classify(serve.ErrStalled))
	fmt.Println(serve.Classify(errors.New("corrupt (only words)")))
	// Output:
	// retryable
	// ownership
	// data_or_configuration
	// retryable
	// retryable
}
