package ratelimit

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/impl/devkit/redistest"
)

func TestMain(m *testing.M) {
	// The outage tests make the client fail to dial on purpose; its own
	// log of every failed dial would only bury a failure's output.
	redis.SetLogger(quietRedis{})
	redistest.Main(m)
}

// quietRedis is a go-redis logger that drops every line.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
