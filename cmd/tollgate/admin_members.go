package main

import (
	"context"
	"fmt"
)

// memberAdminUsage documents the operator's membership commands (the web application's users).
const memberAdminUsage = ``

// memberAdmin runs the member commands. Pending: issue 14.
func (a *admin) memberAdmin(_ context.Context, verb string, _ []string) error {
	return usageError(fmt.Sprintf("admin member %s: the member commands are not implemented yet", verb))
}
