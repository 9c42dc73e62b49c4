package gather

import (
	"testing"

	"github.com/shale-db/shale/engine/enginetest"
)

func TestMain(m *testing.M) { enginetest.Main(m) }
