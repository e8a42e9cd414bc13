package web

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/config"
	"github.com/tollgate/tollgate/impl/dataset"
	"github.com/tollgate/tollgate/impl/web/audit"
)

// The Datasets page: the account's dataset files (the ones the MCP tools load and query),
// uploaded here (CSV, Parquet or JSON lines, up to web.dataset_upload_max_bytes) and deleted
// by owners, through the same dataset.Service as the tools and `tollgate admin dataset`.
// An upload is read into a temporary file, checked to be a readable file of its format (as
// the admin command checks it), then stored; members upload new datasets, owners also
// replace and delete them. Uploads, replacements and deletions are audited.

func (a *App) datasetsRoutes(mux *router) {
	mux.Handle("GET /datasets", a.member(a.datasetsPage))
	mux.Handle("POST /datasets", a.member(a.uploadDataset))
	mux.Handle("POST /datasets/{name}/delete", a.owner(a.deleteDataset))
}

// uploadFormOverhead is what a multipart form may add to the file it carries (boundaries,
// headers, the name and format fields).
const uploadFormOverhead = 64 << 10

type datasetRow struct {
	dataset.StoredDataset
	Size   string
	Loaded string
}

type datasetsData struct {
	Available bool
	Datasets  []datasetRow
	// MaxSize is the upload limit, for people; MaxBytes for the page's script.
	MaxSize  string
	MaxBytes int64
	// Error is what was wrong with an upload; Name and Format what was typed.
	Error, Name, Format string
	// Notice is the result of the change just made.
	Notice string
}

func (a *App) uploadLimit() int64 {
	if n := a.web.DatasetUploadMaxBytes; n > 0 {
		return n
	}
	return config.DefaultDatasetUploadMaxBytes
}

// accountMaxBytes and accountMaxCount are what an account may store through this page in all
// (config.Web's DatasetAccountMaxBytes and DatasetAccountMaxCount).
func (a *App) accountMaxBytes() int64 {
	if n := a.web.DatasetAccountMaxBytes; n > 0 {
		return n
	}
	return config.DefaultDatasetAccountMaxBytes
}

func (a *App) accountMaxCount() int {
	if n := a.web.DatasetAccountMaxCount; n > 0 {
		return n
	}
	return config.DefaultDatasetAccountMaxCount
}

func (a *App) datasetsPage(w http.ResponseWriter, r *http.Request, v *Visitor) {
	d := datasetsData{}
	q := r.URL.Query()
	if n := q.Get("uploaded"); n != "" && dataset.ValidName(n) {
		d.Notice = "Dataset " + n + " stored."
	}
	if n := q.Get("deleted"); n != "" && dataset.ValidName(n) {
		d.Notice = "Dataset " + n + " deleted."
	}
	a.renderDatasets(w, r, v, http.StatusOK, d)
}

// renderDatasets lists the account's datasets into d and renders the page.
func (a *App) renderDatasets(w http.ResponseWriter, r *http.Request, v *Visitor, status int, d datasetsData) {
	d.Available = a.datasets != nil
	d.MaxSize, d.MaxBytes = humanBytes(a.uploadLimit()), a.uploadLimit()
	if a.datasets != nil {
		acct := v.Account.AccountID
		stored, err := a.datasets.ListStorage(r.Context(), acct)
		if err != nil {
			a.failInternal(w, r, v, "list datasets", err)
			return
		}
		loaded, err := a.datasets.Loaded(r.Context(), acct)
		if err != nil {
			a.failInternal(w, r, v, "loaded datasets", err)
			return
		}
		byName := map[string]dataset.LoadedDataset{}
		for _, l := range loaded {
			byName[l.Name] = l
		}
		for _, s := range stored {
			row := datasetRow{StoredDataset: s, Size: humanBytes(s.SizeBytes), Loaded: "no"}
			if l, ok := byName[s.Name]; ok {
				row.Loaded = fmt.Sprintf("%d rows, %s", l.Rows, l.LoadedAt.UTC().Format("2006-01-02 15:04 UTC"))
			}
			d.Datasets = append(d.Datasets, row)
		}
	}
	a.render(w, r, v, status, "datasets", "Datasets", d)
}

// upload is an upload form as read: the file is in a temporary file.
type upload struct {
	// replace is the form's "replace" field: "yes" confirms replacing a dataset of that name.
	name, format, fileName, replace string
	file                            *os.File
	size                            int64
	// account is the account the form must have been shown in (the visitor's current one), and
	// accountSeen whether its account_id field was read.
	account     string
	accountSeen bool
}

func (u *upload) close() {
	if u.file != nil {
		_ = u.file.Close()
		_ = os.Remove(u.file.Name())
	}
}

// errTooLarge is an upload beyond the limit.
var errTooLarge = errors.New("upload too large")

// errOtherAccount is an upload whose form was shown in another account than the visitor's
// current one (its account_id field names another, or is sent twice).
var errOtherAccount = errors.New("upload form of another account")

// readUpload reads the multipart form: the name and format fields (small) and the file
// (into a temporary file, at most limit bytes). Its first part, account_id, was checked before
// the handler ran (postedInShownAccount: the page writes it before the file); another
// account_id part that names another account, or a second one, is refused with
// errOtherAccount and the temporary file is removed: nothing is stored.
func readUpload(r *http.Request, limit int64, account string) (*upload, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, err
	}
	u := &upload{account: account}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return u, nil
		}
		if err != nil {
			u.close()
			return nil, err
		}
		if err := u.readPart(part, limit); err != nil {
			u.close()
			return nil, err
		}
	}
}

func (u *upload) readPart(part *multipart.Part, limit int64) error {
	defer part.Close()
	field := func() (string, error) {
		b, err := io.ReadAll(io.LimitReader(part, 256))
		return strings.TrimSpace(string(b)), err
	}
	var err error
	switch part.FormName() {
	case "name":
		u.name, err = field()
	case "format":
		u.format, err = field()
	case "replace":
		u.replace, err = field()
	case "account_id":
		var shown string
		if shown, err = field(); err == nil && (u.accountSeen || shown != u.account) {
			err = errOtherAccount
		}
		u.accountSeen = true
	case "file":
		if u.file != nil || part.FileName() == "" {
			_, err = io.Copy(io.Discard, part)
			return err
		}
		u.fileName = path.Base(strings.ReplaceAll(part.FileName(), "\\", "/"))
		if u.file, err = os.CreateTemp("", "tollgate-upload-*"); err != nil {
			return err
		}
		u.size, err = io.Copy(u.file, io.LimitReader(part, limit+1))
		if err == nil && u.size > limit {
			err = errTooLarge
		}
	default:
		_, err = io.Copy(io.Discard, part)
	}
	return err
}

// formatOf is the format chosen in the form, or the one of the file's extension.
func formatOf(chosen, fileName string) (dataset.Format, bool) {
	if chosen != "" && chosen != "auto" {
		return dataset.ParseFormat(chosen)
	}
	ext := strings.ToLower(strings.TrimPrefix(path.Ext(fileName), "."))
	if ext == "ndjson" {
		ext = "jsonl"
	}
	return dataset.ParseFormat(ext)
}

// uploadDataset stores the uploaded file as the account's dataset.
func (a *App) uploadDataset(w http.ResponseWriter, r *http.Request, v *Visitor) {
	if a.datasets == nil {
		a.fail(w, r, v, http.StatusNotFound, "Datasets are not available on this gateway.")
		return
	}
	ctx := r.Context()
	acct := v.Account.AccountID
	limit := a.uploadLimit()
	tooLarge := datasetsData{Error: "The file is larger than the upload limit of " + humanBytes(limit) +
		". Nothing was stored. Ask the operator to store larger files (tollgate admin dataset put)."}
	if r.ContentLength > limit+uploadFormOverhead {
		w.Header().Set("Connection", "close")
		a.renderDatasets(w, r, v, http.StatusRequestEntityTooLarge, tooLarge)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit+uploadFormOverhead)
	u, err := readUpload(r, limit, acct.String())
	var maxErr *http.MaxBytesError
	switch {
	case errors.Is(err, errOtherAccount):
		w.Header().Set("Connection", "close") // the rest of the form is not read
		a.refuseOtherAccount(w, r, v, "")
		return
	case errors.Is(err, errTooLarge) || errors.As(err, &maxErr):
		w.Header().Set("Connection", "close")
		a.renderDatasets(w, r, v, http.StatusRequestEntityTooLarge, tooLarge)
		return
	case err != nil && ctx.Err() != nil:
		return
	case err != nil:
		a.log.Info("web: dataset upload unreadable", "err", err)
		a.renderDatasets(w, r, v, http.StatusBadRequest, datasetsData{Error: "The upload could not be read. Choose the file again and upload it."})
		return
	}
	defer u.close()
	d := datasetsData{Name: u.name, Format: u.format}
	bad := func(format string, args ...any) {
		d.Error = fmt.Sprintf(format, args...)
		a.renderDatasets(w, r, v, http.StatusUnprocessableEntity, d)
	}
	if u.file == nil {
		bad("Choose a file to upload.")
		return
	}
	name := u.name
	if name == "" {
		name = dataset.NameFor(u.fileName)
	}
	if !dataset.ValidName(name) {
		bad("The name %q is not a dataset name: use letters, digits, '_' and '-', at most 64, starting with a letter or a digit (such as %s).",
			name, dataset.NameFor(name))
		return
	}
	f, ok := formatOf(u.format, u.fileName)
	if !ok {
		bad("Cannot tell the format of %q: choose CSV, Parquet or JSON lines, or name the file .csv, .parquet or .jsonl.", u.fileName)
		return
	}
	if u.size == 0 {
		bad("The file %q is empty.", u.fileName)
		return
	}
	// The check of what is stored (the name taken, the quota) and the store are one step for
	// every upload of the account, on every replica: a transaction holds the account's upload
	// lock until the file is stored (trial h11 D5: two uploads of one name both passed the
	// check, and a member's replaced an owner's dataset). The uploads of this process wait
	// for it in memory first, so that they never hold database connections while they wait
	// (storing a file takes one).
	stripe := &a.uploadLocks[acct[0]%byte(len(a.uploadLocks))]
	stripe.Lock()
	defer stripe.Unlock()
	unlock, err := a.store.LockDatasetUploads(ctx, acct)
	if err != nil {
		a.failInternal(w, r, v, "lock dataset uploads", err)
		return
	}
	defer unlock()
	stored, err := a.datasets.ListStorage(ctx, acct)
	if err != nil {
		a.failInternal(w, r, v, "list datasets", err)
		return
	}
	var before any
	others, othersBytes := 0, int64(0) // the account's datasets but the one this replaces
	for _, s := range stored {
		if s.Name == name {
			before = audit.DatasetState(s)
			continue
		}
		others++
		othersBytes += s.SizeBytes
	}
	if maxCount := a.accountMaxCount(); others+1 > maxCount {
		d.Error = fmt.Sprintf("The account holds %d datasets, the most it may through this page. Delete one to upload another, or ask the operator.", others)
		a.renderDatasets(w, r, v, http.StatusConflict, d)
		return
	}
	if maxBytes := a.accountMaxBytes(); othersBytes+u.size > maxBytes {
		d.Error = fmt.Sprintf("Storing this file (%s) would take the account's datasets to %s, above its %s. Delete datasets to make room, or ask the operator.",
			humanBytes(u.size), humanBytes(othersBytes+u.size), humanBytes(maxBytes))
		a.renderDatasets(w, r, v, http.StatusRequestEntityTooLarge, d)
		return
	}
	if before != nil && !v.Owner() {
		bad("A dataset named %s exists; only the account's owners may replace it. Choose another name.", name)
		return
	}
	if before != nil && u.replace != confirmYes {
		// Replacing is destructive: the form must say so (its "replace" box), so that an
		// everyday upload never overwrites a dataset by its name.
		d.Error = "A dataset named " + name + " exists (" + describeStored(before) + "). Uploading this file in its place " +
			"replaces it for every key and agent that queries it, and forgets its load. To replace it, tick " +
			"“Replace the dataset of that name” and choose the file again; or give the upload another name."
		d.Name = name
		a.renderDatasets(w, r, v, http.StatusConflict, d)
		return
	}
	if _, err := dataset.DescribeFile(ctx, u.file.Name(), f); err != nil {
		if ctx.Err() != nil {
			return
		}
		msg := strings.ReplaceAll(err.Error(), u.file.Name(), u.fileName)
		bad("The file is not usable: %s", firstLine(msg))
		return
	}
	if _, err := u.file.Seek(0, io.SeekStart); err != nil {
		a.failInternal(w, r, v, "dataset upload", err)
		return
	}
	saved, err := a.datasets.Put(ctx, acct, name, f, u.file)
	if err != nil {
		if msg, ok := dataset.CallerMessage(err); ok {
			bad("%s", msg)
			return
		}
		a.failInternal(w, r, v, "store dataset", err)
		return
	}
	a.record(r, v, audit.ActionDatasetUploaded, "dataset "+name, before, audit.DatasetState(saved))
	http.Redirect(w, r, "/datasets?"+url.Values{"uploaded": {name}}.Encode(), http.StatusSeeOther)
}

// deleteDataset deletes the account's {name} dataset; a name that is not one of them (another
// account's full name among them) is not found.
func (a *App) deleteDataset(w http.ResponseWriter, r *http.Request, v *Visitor) {
	name := r.PathValue("name")
	if a.datasets == nil || !dataset.ValidName(name) {
		a.fail(w, r, v, http.StatusNotFound, "There is no such dataset.")
		return
	}
	ctx := r.Context()
	acct := v.Account.AccountID
	before, err := a.storedState(ctx, acct, name)
	if err != nil {
		a.failInternal(w, r, v, "list datasets", err)
		return
	}
	if before == nil {
		a.fail(w, r, v, http.StatusNotFound, "There is no such dataset.")
		return
	}
	c := confirmation{Title: "Delete dataset " + name + "?", Action: "/datasets/" + name + "/delete",
		Button: "Delete dataset " + name, Back: "/datasets", Consequences: []string{
			"Deleting dataset “" + name + "” (" + describeStored(before) + ") removes its file for good: the account's keys and " +
				"agents can no longer load or query it (load_storage_dataset and query_data answer that there is no such dataset).",
		}}
	if l, err := a.loadedState(ctx, acct, name); err != nil {
		a.failInternal(w, r, v, "loaded datasets", err)
		return
	} else if l != "" {
		c.Consequences = append(c.Consequences, "Its loaded copy ("+l+") is forgotten too.")
	}
	c.Consequences = append(c.Consequences, "It cannot be undone: to have it again, upload the file again.")
	if !a.confirmed(w, r, v, c) {
		return
	}
	err = a.datasets.Delete(ctx, acct, name)
	if errors.Is(err, dataset.ErrNotOwned) { // deleted meanwhile
		a.fail(w, r, v, http.StatusNotFound, "There is no such dataset.")
		return
	}
	if err != nil {
		a.failInternal(w, r, v, "delete dataset", err)
		return
	}
	a.record(r, v, audit.ActionDatasetDeleted, "dataset "+name, before, nil)
	http.Redirect(w, r, "/datasets?"+url.Values{"deleted": {name}}.Encode(), http.StatusSeeOther)
}

// storedState is the audit log's description (audit.DatasetState) of the account's stored dataset
// name, or nil when the account has none by that name.
func (a *App) storedState(ctx context.Context, acct uuid.UUID, name string) (any, error) {
	stored, err := a.datasets.ListStorage(ctx, acct)
	if err != nil {
		return nil, err
	}
	for _, s := range stored {
		if s.Name == name {
			return audit.DatasetState(s), nil
		}
	}
	return nil, nil
}

// describeStored says what a stored dataset is, from its audit.DatasetState: "CSV, 30 B, stored
// 2026-01-02 10:00 UTC".
func describeStored(state any) string {
	m, _ := state.(map[string]any)
	format, _ := m["format"].(string)
	size, _ := m["size_bytes"].(int64)
	s := map[string]string{"csv": "CSV", "parquet": "Parquet", "jsonl": "JSON lines"}[format]
	if s == "" {
		s = format
	}
	s += ", " + humanBytes(size)
	if t, err := time.Parse(time.RFC3339, fmt.Sprint(m["updated"])); err == nil {
		s += ", stored " + t.UTC().Format("2006-01-02 15:04 UTC")
	}
	return s
}

// loadedState describes the account's loaded copy of dataset name ("3 rows, loaded
// 2026-01-02 10:00 UTC"), or "" when it is not loaded.
func (a *App) loadedState(ctx context.Context, acct uuid.UUID, name string) (string, error) {
	loaded, err := a.datasets.Loaded(ctx, acct)
	if err != nil {
		return "", err
	}
	for _, l := range loaded {
		if l.Name == name {
			return fmt.Sprintf("%d rows, loaded %s", l.Rows, l.LoadedAt.UTC().Format("2006-01-02 15:04 UTC")), nil
		}
	}
	return "", nil
}

// humanBytes is n in B, KiB, MiB or GiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 2; m /= unit {
		div *= unit
		exp++
	}
	s := fmt.Sprintf("%.1f", float64(n)/float64(div))
	s = strings.TrimSuffix(s, ".0")
	return s + " " + []string{"KiB", "MiB", "GiB"}[exp]
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i])
	}
	return s
}
