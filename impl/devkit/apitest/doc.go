// Package apitest is the test harness for the HTTP surface: it starts real gateways (the same
// handler `tollgate serve` runs) on a throwaway PostgreSQL database, creates tenants through the
// accounts service, and gives tests HTTP clients whose every response is validated against the
// embedded OpenAPI document. Test-only.
package apitest
