package main

import (
	"testing"

	"github.com/tollgate/tollgate/impl/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
