package dataset

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxNesting is how deeply a dataset file's values may nest: objects and arrays within each
// other in a JSON-lines file, groups within groups in a Parquet file's schema. DuckDB reads
// nested values and schemas recursively on the thread that runs the statement, so that a file
// nested about 100,000 deep overflowed that thread's stack: a segmentation fault inside the cgo
// call, which no Go code can recover, took the whole gateway down on a member's upload (trial
// h9 D2). Real data nests a few levels; 64 is far beyond it and far below the stack's reach.
const MaxNesting = 64

// checkNesting refuses a dataset file that nests deeper than MaxNesting, before DuckDB reads
// it: it is called on every upload check (DescribeFile) and before every load, which also
// covers a file stored before the check existed. A CSV file has no nesting. conn is a
// connection of a database whose external access is still on (a Parquet schema is read
// through it); name names the file in the error.
func checkNesting(ctx context.Context, conn *sql.Conn, path string, f Format, name string) error {
	var depth int
	var err error
	switch f {
	case JSONL:
		depth, err = jsonNesting(path)
	case Parquet:
		depth, err = parquetNesting(ctx, conn, path)
	default:
		return nil
	}
	switch {
	case errors.Is(err, errTooDeep) || err == nil && depth > MaxNesting:
		return userErr(CodeInvalid, "%s nests its values more than %d levels deep, which datasets do not take", name, MaxNesting)
	case err != nil:
		return err
	}
	return nil
}

// errTooDeep ends a scan as soon as the nesting passes MaxNesting.
var errTooDeep = errors.New("dataset: nested too deeply")

// jsonNesting returns how deeply the JSON-lines file at path nests its objects and arrays (a
// line holding a number is 0, {"a":1} is 1), reading it once, or errTooDeep as soon as it
// passes MaxNesting. It counts brackets outside strings and does not validate the JSON:
// DuckDB does that when it reads the file.
func jsonNesting(path string) (int, error) {
	file, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer file.Close()
	r := bufio.NewReaderSize(file, 64<<10)
	depth, deepest := 0, 0
	inString, escaped := false, false
	for {
		c, err := r.ReadByte()
		if err == io.EOF {
			return deepest, nil
		}
		if err != nil {
			return 0, err
		}
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > deepest {
				if deepest = depth; deepest > MaxNesting {
					return deepest, errTooDeep
				}
			}
		case c == '}' || c == ']':
			depth = max(depth-1, 0)
		case c == '\n':
			// A line is a document: an unbalanced one does not carry its depth to the next.
			depth = 0
		}
	}
}

// parquetNesting returns how deeply the Parquet file at path nests its schema (a flat file's
// columns are at 1), from the schema elements DuckDB's parquet_schema lists in the file's
// depth-first order, each with its number of children; it reads the footer only.
func parquetNesting(ctx context.Context, conn *sql.Conn, path string) (int, error) {
	rows, err := conn.QueryContext(ctx, "SELECT coalesce(num_children, 0) FROM parquet_schema("+quoteString(path)+")")
	if err != nil {
		return 0, fmt.Errorf("not a readable parquet file: %s", firstLine(err.Error()))
	}
	defer rows.Close()
	// open holds, for each group being walked, the children it still has to list.
	var open []int64
	deepest := 0
	for rows.Next() {
		var children int64
		if err := rows.Scan(&children); err != nil {
			return 0, err
		}
		// This element is a child of the innermost open group (the root has none).
		if n := len(open); n > 0 {
			open[n-1]--
		}
		deepest = max(deepest, len(open))
		if deepest > MaxNesting {
			return deepest, errTooDeep
		}
		if children > 0 {
			open = append(open, children)
		}
		for len(open) > 0 && open[len(open)-1] <= 0 {
			open = open[:len(open)-1]
		}
	}
	return deepest, rows.Err()
}
