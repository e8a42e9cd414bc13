package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/auth"
	"github.com/tollgate/tollgate/impl/tool"
)

// DatasetService is what the dataset tools need from the dataset engine. Every method acts for
// one account, the verified caller's, and must resolve dataset names under that account's
// namespace only (tenant/<account-id>/<dataset>): the tools never pass anything else to say
// whose data it is. A dataset name reaches a method as the caller wrote it, either the short
// name <dataset> or the full name tenant/<account-id>/<dataset> with the account's own id
// (the tools refuse every other shape first), and the method must accept both.
//
// A method refusing a name that does not resolve to one of the account's datasets (another
// tenant's, a path, an encoded separator, one that does not exist) returns an error that wraps
// [ErrNotOwned]; the tools answer it with the exact text
// "Error: dataset '<name>' is not owned by the caller". An expected failure the caller should read
// (a dataset that is not loaded, a refused or timed-out statement, an invalid filter) is a
// [*tool.PublicError] (see [tool.Errorf]); any other error is logged and reported as internal.
type DatasetService interface {
	// ListStorage returns the account's datasets in storage.
	ListStorage(ctx context.Context, account uuid.UUID) ([]StoredDataset, error)
	// Load loads one of the account's datasets into the query engine with the given projection,
	// row limit and filter, replacing what was loaded under that name before, and describes what
	// is now loaded.
	Load(ctx context.Context, account uuid.UUID, req LoadRequest) (LoadedDataset, error)
	// Loaded returns the account's loaded datasets, and nobody else's.
	Loaded(ctx context.Context, account uuid.UUID) ([]LoadedDataset, error)
	// Schema returns the columns of one of the account's loaded datasets.
	Schema(ctx context.Context, account uuid.UUID, dataset string) ([]Column, error)
	// Query runs one read-only statement against one of the account's loaded datasets, where it
	// is the only table, and returns the rows, cut off at the engine's caps.
	Query(ctx context.Context, account uuid.UUID, dataset, sql string) (QueryResult, error)
}

// ErrNotOwned is wrapped by DatasetService errors for a dataset name that does not resolve under
// the caller's namespace.
var ErrNotOwned = errors.New("dataset is not owned by the caller")

// StoredDataset is one dataset in storage.
type StoredDataset struct {
	// Name is the dataset's short name, its name within the account's namespace.
	Name string
	// FullName is the dataset's full name, tenant/<account-id>/<name>; empty when the service
	// does not give it.
	FullName string
	// Format is "csv", "parquet" or "jsonl".
	Format string
	// Size is the stored size in bytes.
	Size int64
	// Updated is when the stored object last changed.
	Updated time.Time
}

// LoadRequest is the arguments of load_storage_dataset.
type LoadRequest struct {
	// Name is the dataset to load, as the caller wrote it: its short or its full name.
	Name string
	// Columns, when not empty, are the columns to load, in order.
	Columns []string
	// Limit, when positive, bounds the rows loaded.
	Limit int64
	// Filter, when not empty, is a row predicate in SQL expression syntax that the engine
	// validates before use.
	Filter string
}

// LoadedDataset is one dataset loaded into the query engine, with its load parameters.
type LoadedDataset struct {
	// Name is the dataset's short name.
	Name string
	// FullName is the dataset's full name, tenant/<account-id>/<name>; empty when the service
	// does not give it.
	FullName string
	// Rows is the number of rows loaded.
	Rows int64
	// Columns are the loaded columns.
	Columns []Column
	// Limit and Filter are the load parameters (zero when not given); the projection is Columns.
	Limit  int64
	Filter string
	// LoadedAt is when it was loaded.
	LoadedAt time.Time
}

// Column is a column's name and engine type.
type Column struct {
	Name string
	Type string
}

// QueryResult is the answer to query_data.
type QueryResult struct {
	// Columns name the result's columns.
	Columns []Column
	// Rows are the rows, each with one value per column. Values are encoded as JSON; a value
	// encoding/json cannot encode is written as its fmt %v string.
	Rows [][]any
	// Text, when not empty, is the result as the engine rendered it (caps included); it is shown
	// as it is and Rows and CutOff are ignored.
	Text string
	// CutOff, when not empty, says which cap cut the result off (for example "row cap of 1000
	// rows reached"); it is shown after the rows.
	CutOff string
}

// Dataset tool names.
const (
	ToolListStorageDatasets = "list_storage_datasets"
	ToolLoadStorageDataset  = "load_storage_dataset"
	ToolQueryDatasets       = "query_datasets"
	ToolQuerySchema         = "query_schema"
	ToolQueryData           = "query_data"
)

// DatasetTools returns the five read-only dataset tools of the tenant profile over svc:
// list_storage_datasets, load_storage_dataset, query_datasets, query_schema and query_data. Their
// input schemas are the OpenAPI components ListStorageDatasetsInput, LoadStorageDatasetInput,
// QueryDatasetsInput, QuerySchemaInput and QueryDataInput.
//
// A dataset is named by its short name <dataset> or by its full name
// tenant/<account-id>/<dataset>, where the account id is the verified caller's own, written as
// [uuid.UUID.String] writes it (lowercase, hyphenated): that is how list_storage_datasets and
// query_datasets show it, next to the short name. The account's name in place of its id is not
// a full name. In query_data's SQL the dataset is the one table and is always called by its
// short name, whichever name the dataset argument has.
//
// Names are checked before svc sees them: a name that is neither a short name without a path
// separator, a control character, "." or "..", nor such a name after the caller's own
// tenant/<account-id>/ prefix, can never resolve under the caller's namespace and gets the
// not-owned refusal at once, with the name as the caller sent it. svc stays the authority on
// every other name, which it receives as the caller sent it.
//
// DatasetTools panics if the embedded OpenAPI document lacks one of the schemas, which this
// package's tests rule out.
func DatasetTools(svc DatasetService) []tool.Tool {
	d := datasetTools{svc: svc}
	return []tool.Tool{
		{
			Name:        ToolListStorageDatasets,
			Title:       "List stored datasets",
			Description: "List the caller's datasets in storage: for each, its short name, its full name tenant/<account-id>/<name>, format (csv, parquet or jsonl), size in bytes and last update. The other dataset tools take either name. Load one with load_storage_dataset before querying it.",
			InputSchema: mustComponentSchema("ListStorageDatasetsInput"),
			Annotations: tool.ReadOnlyAnnotations("List stored datasets"),
			Handler:     d.listStorage,
		},
		{
			Name:        ToolLoadStorageDataset,
			Title:       "Load a dataset",
			Description: "Load one of the caller's stored datasets into the query engine, optionally projecting columns, limiting rows and filtering them with a SQL predicate; reports the rows and columns loaded. Loading again replaces the earlier load. " + namesSentence,
			InputSchema: mustComponentSchema("LoadStorageDatasetInput"),
			Annotations: tool.ReadOnlyAnnotations("Load a dataset"),
			Handler:     d.load,
		},
		{
			Name:        ToolQueryDatasets,
			Title:       "List loaded datasets",
			Description: "List the caller's datasets loaded into the query engine: for each, its short name, its full name tenant/<account-id>/<name>, rows, columns, load parameters and load time. query_schema and query_data take either name.",
			InputSchema: mustComponentSchema("QueryDatasetsInput"),
			Annotations: tool.ReadOnlyAnnotations("List loaded datasets"),
			Handler:     d.loaded,
		},
		{
			Name:        ToolQuerySchema,
			Title:       "Dataset schema",
			Description: "Column names and types of one of the caller's loaded datasets. " + namesSentence,
			InputSchema: mustComponentSchema("QuerySchemaInput"),
			Annotations: tool.ReadOnlyAnnotations("Dataset schema"),
			Handler:     d.schema,
		},
		{
			Name:        ToolQueryData,
			Title:       "Query a dataset",
			Description: "Run one read-only SQL statement (SELECT or WITH) against one of the caller's loaded datasets. " + namesSentence + " The statement sees that dataset only, as the one table, which it always calls by the dataset's short name, whichever name the dataset argument has: for tenant/<account-id>/sales or sales, write SELECT ... FROM sales (double-quote a name that is not a plain identifier, such as \"sales-2024\"); the full name is not a table name. Rows come back as a text table: a line naming the columns, a rule, then one line per row with its cells separated by ' | '; NULL is SQL NULL, and a text value that could be misread (empty, the word NULL, holding a bar, a backslash or a control character, starting with a quote, or with spaces at its ends) is written as a JSON string. Results are cut off at the engine's row and byte caps, and the answer says so.",
			InputSchema: mustComponentSchema("QueryDataInput"),
			Annotations: tool.ReadOnlyAnnotations("Query a dataset"),
			Handler:     d.query,
		},
	}
}

// namesSentence is the dataset tools' rule on names, said in their descriptions.
const namesSentence = "Name the dataset by its full name tenant/<account-id>/<dataset>, with the caller's own account id as the listings show it, or by its short name <dataset>; any other name, such as another account's full name, is refused as not owned by the caller."

// datasetTools holds the handlers of the dataset tools.
type datasetTools struct {
	svc DatasetService
}

// NotOwnedResult is the refusal of a dataset name that does not resolve under the caller's
// namespace: "Error: dataset '<name>' is not owned by the caller".
func NotOwnedResult(name string) tool.Result {
	return tool.ErrorResult("dataset '%s' is not owned by the caller", name)
}

// inNamespace reports whether name could name a dataset in the account's namespace: a short
// name that plainName accepts, or the full name tenant/<account-id>/<short name> with the
// account's own id as uuid.UUID.String writes it.
func inNamespace(account uuid.UUID, name string) bool {
	if short, ok := strings.CutPrefix(name, "tenant/"+account.String()+"/"); ok {
		return plainName(short)
	}
	return plainName(name)
}

// plainName reports whether name could be a dataset directly under the caller's namespace.
func plainName(name string) bool {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return false
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// failed turns a service error about the dataset name into a result or an error for runTool.
func failed(name string, err error) (tool.Result, error) {
	if errors.Is(err, ErrNotOwned) {
		return NotOwnedResult(name), nil
	}
	return tool.Result{}, err
}

func (d datasetTools) listStorage(ctx context.Context, p auth.Principal, _ json.RawMessage) (tool.Result, error) {
	list, err := d.svc.ListStorage(ctx, p.AccountID)
	if err != nil {
		return tool.Result{}, err
	}
	if len(list) == 0 {
		return tool.TextResult("No datasets in storage."), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s in storage:\n", len(list), plural(len(list), "dataset", "datasets"))
	for _, s := range list {
		writeJSONLine(&b, struct {
			Name     string `json:"name"`
			FullName string `json:"full_name,omitempty"`
			Format   string `json:"format"`
			Size     int64  `json:"size_bytes"`
			Updated  string `json:"updated"`
		}{s.Name, s.FullName, s.Format, s.Size, formatTime(s.Updated)})
	}
	return tool.TextResult(strings.TrimSuffix(b.String(), "\n")), nil
}

func (d datasetTools) load(ctx context.Context, p auth.Principal, raw json.RawMessage) (tool.Result, error) {
	var args struct {
		Name    string   `json:"name"`
		Columns []string `json:"columns"`
		Limit   int64    `json:"limit"`
		Filter  string   `json:"filter"`
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return tool.ErrorResult("invalid arguments for tool '%s': %v", ToolLoadStorageDataset, err), nil
	}
	if !inNamespace(p.AccountID, args.Name) {
		return NotOwnedResult(args.Name), nil
	}
	ld, err := d.svc.Load(ctx, p.AccountID, LoadRequest{Name: args.Name, Columns: args.Columns, Limit: args.Limit, Filter: args.Filter})
	if err != nil {
		return failed(args.Name, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Loaded dataset '%s'", ld.Name)
	if ld.FullName != "" {
		fmt.Fprintf(&b, " (%s)", ld.FullName)
	}
	fmt.Fprintf(&b, ": %d %s, %d %s.\n", ld.Rows, plural(int(ld.Rows), "row", "rows"),
		len(ld.Columns), plural(len(ld.Columns), "column", "columns"))
	writeColumns(&b, ld.Columns)
	return tool.TextResult(strings.TrimSuffix(b.String(), "\n")), nil
}

func (d datasetTools) loaded(ctx context.Context, p auth.Principal, _ json.RawMessage) (tool.Result, error) {
	list, err := d.svc.Loaded(ctx, p.AccountID)
	if err != nil {
		return tool.Result{}, err
	}
	if len(list) == 0 {
		return tool.TextResult("No datasets loaded. Load one with load_storage_dataset."), nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s loaded:\n", len(list), plural(len(list), "dataset", "datasets"))
	for _, l := range list {
		cols := make([]string, len(l.Columns))
		for i, c := range l.Columns {
			cols[i] = c.Name
		}
		writeJSONLine(&b, struct {
			Name     string   `json:"name"`
			FullName string   `json:"full_name,omitempty"`
			Rows     int64    `json:"rows"`
			Columns  []string `json:"columns"`
			Limit    int64    `json:"limit,omitempty"`
			Filter   string   `json:"filter,omitempty"`
			LoadedAt string   `json:"loaded_at"`
		}{l.Name, l.FullName, l.Rows, cols, l.Limit, l.Filter, formatTime(l.LoadedAt)})
	}
	return tool.TextResult(strings.TrimSuffix(b.String(), "\n")), nil
}

func (d datasetTools) schema(ctx context.Context, p auth.Principal, raw json.RawMessage) (tool.Result, error) {
	var args struct {
		Dataset string `json:"dataset"`
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return tool.ErrorResult("invalid arguments for tool '%s': %v", ToolQuerySchema, err), nil
	}
	if !inNamespace(p.AccountID, args.Dataset) {
		return NotOwnedResult(args.Dataset), nil
	}
	cols, err := d.svc.Schema(ctx, p.AccountID, args.Dataset)
	if err != nil {
		return failed(args.Dataset, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Dataset '%s': %d %s.\n", args.Dataset, len(cols), plural(len(cols), "column", "columns"))
	writeColumns(&b, cols)
	return tool.TextResult(strings.TrimSuffix(b.String(), "\n")), nil
}

func (d datasetTools) query(ctx context.Context, p auth.Principal, raw json.RawMessage) (tool.Result, error) {
	var args struct {
		SQL     string `json:"sql"`
		Dataset string `json:"dataset"`
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return tool.ErrorResult("invalid arguments for tool '%s': %v", ToolQueryData, err), nil
	}
	if !inNamespace(p.AccountID, args.Dataset) {
		return NotOwnedResult(args.Dataset), nil
	}
	res, err := d.svc.Query(ctx, p.AccountID, args.Dataset, args.SQL)
	if err != nil {
		return failed(args.Dataset, err)
	}
	return tool.TextResult(formatRows(res)), nil
}

// formatRows writes a query result as a compact table in JSON: the column names as an array,
// then one array per row, then a line with the row count and, when the result was cut off, why.
func formatRows(res QueryResult) string {
	if res.Text != "" {
		return res.Text
	}
	var b strings.Builder
	names := make([]string, len(res.Columns))
	for i, c := range res.Columns {
		names[i] = c.Name
	}
	writeJSONLine(&b, names)
	for _, row := range res.Rows {
		b.WriteByte('[')
		for i, v := range row {
			if i > 0 {
				b.WriteByte(',')
			}
			b.Write(jsonValue(v))
		}
		b.WriteString("]\n")
	}
	fmt.Fprintf(&b, "(%d %s", len(res.Rows), plural(len(res.Rows), "row", "rows"))
	if res.CutOff != "" {
		fmt.Fprintf(&b, "; result cut off: %s", res.CutOff)
	}
	b.WriteByte(')')
	return b.String()
}

// jsonValue encodes one result value, falling back to its %v string.
func jsonValue(v any) []byte {
	if out, err := marshalNoEscape(v); err == nil {
		return out
	}
	out, _ := marshalNoEscape(fmt.Sprint(v))
	return out
}

// marshalNoEscape is json.Marshal without HTML escaping and without the trailing newline.
func marshalNoEscape(v any) ([]byte, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return []byte(strings.TrimSuffix(b.String(), "\n")), nil
}

// writeJSONLine writes v as one line of JSON.
func writeJSONLine(b *strings.Builder, v any) {
	b.Write(jsonValue(v))
	b.WriteByte('\n')
}

// writeColumns writes one {"name","type"} line per column.
func writeColumns(b *strings.Builder, cols []Column) {
	for _, c := range cols {
		writeJSONLine(b, struct {
			Name string `json:"name"`
			Type string `json:"type"`
		}{c.Name, c.Type})
	}
}

// formatTime is t in RFC 3339 UTC, or "" for the zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
