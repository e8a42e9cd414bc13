package ratelimit

import (
	"testing"

	"github.com/tollgate/tollgate/impl/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }
