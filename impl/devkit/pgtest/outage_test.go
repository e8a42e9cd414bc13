package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestOutage: the cluster's database keeps its data across a stop and a start, refuses
// connections while stopped, and answers nothing while frozen.
func TestOutage(t *testing.T) {
	o := NewOutage(t)
	ctx := context.Background()
	query := func(timeout time.Duration) (int, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		conn, err := pgx.Connect(ctx, o.ConnString())
		if err != nil {
			return 0, err
		}
		defer conn.Close(context.Background())
		var n int
		err = conn.QueryRow(ctx, "SELECT count(*) FROM marker").Scan(&n)
		return n, err
	}
	conn, err := pgx.Connect(ctx, o.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE marker (id int); INSERT INTO marker VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	o.Stop()
	if _, err := query(5 * time.Second); err == nil {
		t.Fatal("the stopped cluster answered")
	}
	o.Start()
	if n, err := query(5 * time.Second); err != nil || n != 1 {
		t.Fatalf("after the restart: %d rows, %v", n, err)
	}

	o.Freeze()
	if _, err := query(500 * time.Millisecond); err == nil {
		t.Fatal("the frozen cluster answered")
	}
	o.Thaw()
	if n, err := query(5 * time.Second); err != nil || n != 1 {
		t.Fatalf("after the thaw: %d rows, %v", n, err)
	}
}
