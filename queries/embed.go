// Package queries holds the SQL of tollgate: the numbered schema migrations (also sqlc's schema)
// and the named queries that sqlc turns into gen/db. It embeds the migrations so the binary can
// apply them.
package queries

import "embed"

// Migrations holds the numbered schema migrations, applied in file-name order.
//
//go:embed migrations/*.sql
var Migrations embed.FS
