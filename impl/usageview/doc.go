// Package usageview is the data behind the web application's Usage page: an account's balance,
// its spend per day grouped by model or by key (for a stacked chart and the table beside it)
// with the tokens per kind and what prompt caching saved, the burn rate and the days of credit
// left at that rate, the request log with each request's tokens per kind and how its cost was
// made (Request.Bill), its filters, keyset pages and CSV export, and the statement of a period
// (WriteStatement: the credit ledger's entries as CSV lines that add up from the opening to the
// closing balance, usage lines explained by their usage records), which the page's "Download
// statement" and the operator's `tollgate admin usage export` both write. It renders no HTML.
//
// Every method takes the account id as its own argument, which the caller takes from the
// signed-in session; nothing parsed from a request (ParseLogQuery, ParseDailyQuery) names an
// account, and every query is scoped by it, so a key id, model or cursor of another account
// finds nothing.
//
// The package reads PostgreSQL through its own sqlc queries (queries/usageview.sql, gen/db) on
// the store's pool: it only reads, and the store's domain types do not fit a view built for a
// page. Its indexes are those of migration 0009; docs/usage-page.md has the measurements on
// two million usage rows and the plans, and the statement's format. Money is integer
// micro-units throughout; dollars are written from them as exact decimal strings (USD).
package usageview
