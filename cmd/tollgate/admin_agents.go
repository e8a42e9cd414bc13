package main

import (
	"context"
	"fmt"
)

// agentAdminUsage documents the operator's agent commands: slots, tickets and approvals.
const agentAdminUsage = ``

// agentAdmin runs the slot, ticket and approval commands. Pending: issue 13.
func (a *admin) agentAdmin(_ context.Context, noun, verb string, _ []string) error {
	return usageError(fmt.Sprintf("admin %s %s: the agent commands are not implemented yet", noun, verb))
}
