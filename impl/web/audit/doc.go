// Package audit owns an account's audit log (table audit_log, migration 0008): who did what,
// when, to what, with the object's state before and after. The web application records
// sign-ins and changes to keys and limits; approvals decided record here too.
package audit
