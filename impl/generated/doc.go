// Package generated holds no code: its test keeps gen/ in step with its sources by proving that
// `make check-generated` passes on the committed tree and fails when the OpenAPI document is
// edited without regenerating.
package generated
