package dataset

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	duckdb "github.com/duckdb/duckdb-go/v2"
)

// Column is one column of a dataset or of a query result.
type Column struct {
	Name string `json:"name"`
	// Type is the DuckDB type, e.g. BIGINT, DOUBLE, VARCHAR, DATE, TIMESTAMP.
	Type string `json:"type"`
}

// engineConfig configures each DuckDB database and the engine process that holds it.
type engineConfig struct {
	threads     int
	memoryLimit int64
	conns       int
	// processBytes is the engine process's hard memory bound (Options.EngineMemoryBytes).
	processBytes int64
}

// dsn returns the DuckDB connection string of a fresh in-memory database. Extension
// installing and autoloading, community and unsigned extensions, persistent secrets and
// spilling to a temporary directory are off from the start; external access stays on only
// until the table is loaded (see lockDown).
func (c engineConfig) dsn() string {
	v := url.Values{}
	v.Set("threads", strconv.Itoa(c.threads))
	v.Set("external_threads", "1")
	v.Set("memory_limit", strconv.FormatInt(c.memoryLimit, 10)+"B")
	v.Set("temp_directory", "")
	v.Set("autoinstall_known_extensions", "false")
	v.Set("autoload_known_extensions", "false")
	v.Set("allow_community_extensions", "false")
	v.Set("allow_unsigned_extensions", "false")
	v.Set("allow_persistent_secrets", "false")
	// The engine's directories default to the service user's home, which a tenant's query can
	// read back (current_setting('secret_directory') told /root/.duckdb/stored_secrets: trial
	// h9 D13); nothing is ever read or written there (no extensions, no persistent secrets).
	v.Set("home_directory", neutralDir)
	v.Set("secret_directory", neutralDir+"/secrets")
	v.Set("extension_directory", neutralDir+"/extensions")
	return "?" + v.Encode()
}

// neutralDir is the engine's home, secret and extension directory: a path that does not exist
// and says nothing of the host.
const neutralDir = "/nonexistent/duckdb"

// duck is one DuckDB in-memory database that holds exactly one table, the loaded dataset.
type duck struct {
	db      *sql.DB
	table   string
	columns []Column
	rows    int64
	bytes   int64
}

// Close closes the database and frees its memory.
func (d *duck) Close() error { return d.db.Close() }

// loadSpec says what to load into a new database.
type loadSpec struct {
	path   string // the resolved local file
	format Format
	name   string // the dataset name, which becomes the table name
	opts   LoadOptions
}

// readerSQL is the fixed table-function call that reads the resolved file.
func readerSQL(path string, f Format) string {
	switch f {
	case Parquet:
		return "read_parquet(" + quoteString(path) + ")"
	case JSONL:
		return "read_json(" + quoteString(path) + ", format = 'newline_delimited')"
	default:
		return "read_csv(" + quoteString(path) + ")"
	}
}

// openDuck creates a database, loads spec's file into its one table and locks it down. On
// success, opts.Columns of the returned spec hold the dataset's spelling of the columns.
func openDuck(ctx context.Context, cfg engineConfig, spec loadSpec) (*duck, LoadOptions, error) {
	connector, err := duckdb.NewConnector(cfg.dsn(), nil)
	if err != nil {
		return nil, spec.opts, fmt.Errorf("open duckdb: %w", err)
	}
	d := &duck{db: sql.OpenDB(connector), table: spec.name}
	d.db.SetMaxOpenConns(cfg.conns)
	d.db.SetMaxIdleConns(cfg.conns)
	opts, err := d.load(ctx, spec)
	if err != nil {
		_ = d.Close()
		return nil, opts, err
	}
	return d, opts, nil
}

// load reads the file with one statement built here, then locks the database.
func (d *duck) load(ctx context.Context, spec loadSpec) (LoadOptions, error) {
	opts := spec.opts
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return opts, err
	}
	defer conn.Close()
	// Hide the local path from every message that may reach the caller.
	hide := func(err error) error {
		var de *duckdb.Error
		if errors.As(err, &de) || strings.Contains(err.Error(), spec.path) {
			msg := strings.ReplaceAll(err.Error(), spec.path, spec.name+"."+string(spec.format))
			return userErr(CodeFailed, "loading dataset '%s': %s", spec.name, firstLine(msg))
		}
		return err
	}
	reader := readerSQL(spec.path, spec.format)
	if err := checkNesting(ctx, conn, spec.path, spec.format, "dataset '"+spec.name+"'"); err != nil {
		return opts, hide(err)
	}

	source, err := describe(ctx, conn, "DESCRIBE SELECT * FROM "+reader)
	if err != nil {
		return opts, hide(err)
	}
	byLower := make(map[string]string, len(source))
	for _, c := range source {
		byLower[strings.ToLower(c.Name)] = c.Name
	}

	proj := "*"
	if len(opts.Columns) > 0 {
		seen := map[string]bool{}
		cols := make([]string, len(opts.Columns))
		quoted := make([]string, len(opts.Columns))
		for i, c := range opts.Columns {
			name, ok := byLower[strings.ToLower(c)]
			if !ok {
				return opts, userErr(CodeInvalid, "dataset '%s' has no column %q (columns: %s)", spec.name, c, columnList(source))
			}
			if seen[name] {
				return opts, userErr(CodeInvalid, "column %q is listed twice", c)
			}
			seen[name] = true
			cols[i], quoted[i] = name, quoteIdent(name)
		}
		opts.Columns = cols
		proj = strings.Join(quoted, ", ")
	}
	stmt := "CREATE TABLE " + quoteIdent(spec.name) + " AS SELECT " + proj + " FROM " + reader
	if opts.Filter != "" {
		tree, err := parseFilter(opts.Filter, byLower)
		if err != nil {
			return opts, userErr(CodeInvalid, "filter: %v", err)
		}
		stmt += " WHERE " + filterSQL(tree)
	}
	if opts.Limit > 0 {
		stmt += " LIMIT " + strconv.Itoa(opts.Limit)
	}
	if _, err := conn.ExecContext(ctx, stmt); err != nil {
		if ctx.Err() != nil {
			return opts, ctx.Err()
		}
		return opts, hide(err)
	}
	if err := lockDown(ctx, conn); err != nil {
		return opts, err
	}
	if d.columns, err = describe(ctx, conn, "DESCRIBE "+quoteIdent(spec.name)); err != nil {
		return opts, err
	}
	if err := conn.QueryRowContext(ctx, "SELECT count(*) FROM "+quoteIdent(spec.name)).Scan(&d.rows); err != nil {
		return opts, err
	}
	if err := conn.QueryRowContext(ctx, "SELECT coalesce(sum(memory_usage_bytes), 0)::BIGINT FROM duckdb_memory()").Scan(&d.bytes); err != nil {
		return opts, err
	}
	d.bytes += baseBytes
	return opts, nil
}

// baseBytes is what an empty DuckDB database is counted as.
const baseBytes = 1 << 20

// lockDown turns off every way out of the database (files, network, extensions) and locks the
// configuration so that no later statement can turn them on again, then checks that it
// worked. The settings are global to the database, so they hold on every connection.
func lockDown(ctx context.Context, conn *sql.Conn) error {
	for _, s := range []string{
		"SET enable_external_access = false",
		"SET autoinstall_known_extensions = false",
		"SET autoload_known_extensions = false",
		"SET lock_configuration = true",
	} {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("lock down duckdb (%s): %w", s, err)
		}
	}
	var external, locked string
	err := conn.QueryRowContext(ctx, "SELECT current_setting('enable_external_access')::VARCHAR, current_setting('lock_configuration')::VARCHAR").Scan(&external, &locked)
	if err != nil {
		return fmt.Errorf("check duckdb lock down: %w", err)
	}
	if external != "false" || locked != "true" {
		return fmt.Errorf("duckdb lock down did not take: enable_external_access=%s lock_configuration=%s", external, locked)
	}
	return nil
}

// describe runs a DESCRIBE statement and returns the columns it lists.
func describe(ctx context.Context, conn *sql.Conn, stmt string) ([]Column, error) {
	rows, err := conn.QueryContext(ctx, "SELECT column_name, column_type FROM ("+stmt+")")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cols []Column
	for rows.Next() {
		var c Column
		if err := rows.Scan(&c.Name, &c.Type); err != nil {
			return nil, err
		}
		cols = append(cols, c)
	}
	return cols, rows.Err()
}

func columnList(cols []Column) string {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i])
	}
	return s
}

// describeFile is DescribeFile in the engine process, with memoryLimit as DuckDB's.
func describeFile(ctx context.Context, path string, f Format, memoryLimit int64) ([]Column, error) {
	connector, err := duckdb.NewConnector(engineConfig{threads: 1, memoryLimit: memoryLimit, conns: 1}.dsn(), nil)
	if err != nil {
		return nil, fmt.Errorf("open duckdb: %w", err)
	}
	db := sql.OpenDB(connector)
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := checkNesting(ctx, conn, path, f, path); err != nil {
		return nil, err
	}
	if f == CSV {
		if err := checkCSV(ctx, conn, path, path); err != nil {
			return nil, err
		}
	}
	cols, err := describe(ctx, conn, "DESCRIBE SELECT * FROM "+readerSQL(path, f))
	if err != nil {
		return nil, fmt.Errorf("%s is not a readable %s file: %s", path, f, firstLine(err.Error()))
	}
	// The whole file is read into a table as a load reads it, every value converted to its
	// column's type: count(*) alone converts nothing, so that a CSV whose values stop fitting
	// the types sniffed from its first rows was stored, and then every load of it failed
	// (trial h9 D12). A file too large for the engine's memory limit is refused here too: no
	// load could hold it.
	if _, err := conn.ExecContext(ctx, "CREATE TABLE upload_check AS SELECT * FROM "+readerSQL(path, f)); err != nil {
		return nil, fmt.Errorf("%s is not a readable %s file: %s", path, f, csvReason(err))
	}
	return cols, nil
}
