package agent

import (
	"context"

	"github.com/tollgate/tollgate/impl/store"
)

// ApproveWithJobs approves a pending approval as Resolve does, but inserts its action's job
// runs times in the same transaction, bypassing the one job per resolution: River running the
// job again while its first run is still alive. For tests only.
func (s *Service) ApproveWithJobs(ctx context.Context, approvalID string, runs int) error {
	id, err := parseID(approvalID)
	if err != nil {
		return err
	}
	return s.inTx(ctx, func(tx *store.AgentTx) error {
		cur, err := tx.GetAgentApproval(ctx, id)
		if err != nil {
			return err
		}
		a, err := tx.ResolveAgentApproval(ctx, cur.AccountID, id, ApprovalApproved, "operator")
		if err != nil {
			return err
		}
		for range runs {
			if err := s.insert(ctx, tx, actionArgs{ApprovalID: a.ID}, nil); err != nil {
				return err
			}
		}
		return nil
	})
}
