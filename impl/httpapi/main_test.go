package httpapi_test

import (
	"testing"

	"github.com/tollgate/tollgate/impl/devkit/apitest"
)

func TestMain(m *testing.M) { apitest.Main(m) }
