package httpapi

import "github.com/google/uuid"

// accountShares counts the bytes held of a bound, in all and by account, where one account may
// hold at most accountLimit: the body budget's and the Responses WebSockets' memory. Its
// owner's lock guards it.
type accountShares struct {
	limit, accountLimit int64
	used                int64
	byAccount           map[uuid.UUID]int64
}

func newAccountShares(limit, accountLimit int64) accountShares {
	return accountShares{limit: limit, accountLimit: accountLimit, byAccount: map[uuid.UUID]int64{}}
}

// take takes n bytes for account when they fit, in all and in the account's share, and reports
// whether it did.
func (s *accountShares) take(account uuid.UUID, n int64) bool {
	if s.used+n > s.limit || s.byAccount[account]+n > s.accountLimit {
		return false
	}
	s.used += n
	s.byAccount[account] += n
	return true
}

// put gives back n bytes of account's.
func (s *accountShares) put(account uuid.UUID, n int64) {
	s.used -= n
	if left := s.byAccount[account] - n; left > 0 {
		s.byAccount[account] = left
	} else {
		delete(s.byAccount, account)
	}
}
