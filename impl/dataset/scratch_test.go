package dataset

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"os"
	"testing"
	"time"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

func TestScratch(t *testing.T) {
	os.WriteFile("/tmp/x.csv", []byte("a,b,c\n1,foo,2.5\n2,bar,3.5\n3,,4\n"), 0o644)
	c, err := duckdb.NewConnector("?autoinstall_known_extensions=false&autoload_known_extensions=false&allow_community_extensions=false&threads=2&memory_limit=256MB&max_temp_directory_size=0B", nil)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	ctx := context.Background()
	q := func(s string) {
		rows, err := db.QueryContext(ctx, s)
		if err != nil {
			fmt.Printf("%q -> ERR %v\n", s, err)
			return
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		fmt.Printf("%q -> %v\n", s, cols)
		n := 0
		for rows.Next() && n < 20 {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			rows.Scan(ptrs...)
			fmt.Printf("   %#v\n", vals)
			n++
		}
		if rows.Err() != nil {
			fmt.Println("  rows err", rows.Err())
		}
	}
	q("SELECT name, value FROM duckdb_settings() WHERE name ~ '.*(temp|lock|memory|thread|external|secret|http|allowed).*'")
	q("CREATE TABLE t AS SELECT * FROM read_csv('/tmp/x.csv')")
	q("SET enable_external_access = false")
	q("SET lock_configuration = true")
	q("SELECT * FROM query('INSERT INTO t VALUES (1,''a'',1)')")
	q("SELECT * FROM query_table('t')")
	q("SELECT count(*) FROM t")
	q("SELECT list(range) FROM range(100000000)")
	q("SELECT current_setting('temp_directory')")
	q("SELECT * FROM duckdb_temporary_files()")
	q("SELECT * FROM read_json_objects('/etc/hostname')")
	q("SELECT * FROM parquet_metadata('/tmp/x.parquet')")
	q("SELECT '1 day'::interval, 1.5::decimal(10,2), uuid(), [1,2], {'a':1}, now()::date, now()::timestamp, now(), 'x'::blob, 170141183460469231731687303715884105727::hugeint, '{\"a\":1}'::json")
	conn, _ := db.Conn(ctx)
	conn.Raw(func(dc any) error {
		c := dc.(*duckdb.Conn)
		for _, s := range []string{"SELECT 1", "SELECT 1; SELECT 2", "CREATE TABLE z(a int); SELECT 1", "WITH x AS (SELECT 1) SELECT * FROM x", "INSERT INTO t VALUES (1,'a',1)", "PRAGMA version", "DESCRIBE t", "SUMMARIZE t", "SHOW TABLES", "EXPLAIN SELECT 1", "VALUES (1)", "FROM t", "PIVOT t ON b", "SELECT 1;", "  SELECT 1 ; -- x"} {
			st, err := c.Prepare(s)
			if err != nil {
				fmt.Printf("prepare %q: %v\n", s, err)
				continue
			}
			ty, _ := st.(*duckdb.Stmt).StatementType()
			fmt.Printf("prepare %q: type %v\n", s, ty)
			st.Close()
		}
		st, _ := c.Prepare("SELECT count(*) FROM range(10000000000) a")
		tctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		r, err := st.(*duckdb.Stmt).QueryContext(tctx, nil)
		fmt.Println("long:", err, time.Since(t0))
		if r != nil {
			r.Close()
		}
		st.Close()
		st, _ = c.Prepare("SELECT * FROM t")
		r, err = st.(*duckdb.Stmt).QueryContext(ctx, nil)
		dest := make([]driver.Value, 3)
		for r.Next(dest) == nil {
			fmt.Printf("  %#v\n", dest)
		}
		r.Close()
		st.Close()
		return nil
	})
	conn.Close()
	q("SELECT 1")
}
