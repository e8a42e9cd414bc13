// Package usageview is the data behind the web application's Usage page: an account's balance,
// its spend per day grouped by model or by key (for a stacked chart and the table beside it),
// the burn rate and the days of credit left at that rate, and the request log with its
// filters, keyset pages and CSV export. It renders no HTML.
//
// Every method takes the account id as its own argument, which the caller takes from the
// signed-in session; nothing parsed from a request (ParseLogQuery, ParseDailyQuery) names an
// account, and every query is scoped by it, so a key id, model or cursor of another account
// finds nothing.
//
// The package reads PostgreSQL through its own sqlc queries (queries/usageview.sql, gen/db) on
// the store's pool: it only reads, and the store's domain types do not fit a view built for a
// page. Its indexes are those of migration 0009; docs/usage-page.md has the measurements on
// two million usage rows and the plans.
package usageview
