package web

import (
	"testing"

	"github.com/google/uuid"

	"github.com/tollgate/tollgate/impl/store"
	"github.com/tollgate/tollgate/impl/web/members"
)

// TestGrantRowNamesEveryRedirectHost: a grant does not keep the redirect URI it was issued
// to, so Connected apps names every host the client may return to, once each, not only its
// first (trial h11 D6), each shown as itself.
func TestGrantRowNamesEveryRedirectHost(t *testing.T) {
	v := &Visitor{User: &members.User{ID: uuid.New()}, Account: &members.Membership{Role: members.RoleOwner}}
	g := store.OAuthGrant{ClientName: "Agent", ClientRedirectURIs: []string{"https://a.example/cb", "https://b.example/cb", "https://a.example/other"}}
	if row := grantRowOf(g, v); row.RedirectHost != "a.example or b.example" {
		t.Errorf("redirect hosts %q", row.RedirectHost)
	}
}
